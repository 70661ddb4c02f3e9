"""The compatibility contract of ``blooml.net.codec``, split into the value codec
(``blooml.net._valuecodec``) and the envelope (``blooml.net._envelope``): every public name it
held before the split is importable from it still, as the very object the code uses, and its
``__all__`` (what ``from blooml.net.codec import *`` binds) is unchanged.

The names are listed, not computed: a name dropped from the codec fails here by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import blooml.net
from blooml.net import _envelope, _valuecodec, codec
from blooml.net.codec import (  # every public name of blooml.net.codec before the split
    ENVELOPE_SLACK,
    FORMAT_VERSION,
    MAX_DATAGRAM,
    MAX_ENCODE_DEPTH,
    MAX_EXT_DEPTH,
    MAX_MESSAGE,
    CodecError,
    Destination,
    Envelope,
    ReplayGuard,
    decode,
    decode_envelope,
    encode,
    encode_envelope,
    encode_envelope_after,
    encode_fitting,
    encode_for_channel,
    encode_row,
    envelope_head,
    register,
    registered,
    split_outer,
)

ALL_BEFORE = [
    "ENVELOPE_SLACK",
    "FORMAT_VERSION",
    "MAX_DATAGRAM",
    "MAX_MESSAGE",
    "Envelope",
    "decode",
    "decode_envelope",
    "encode",
    "encode_envelope",
    "encode_for_channel",
    "encode_row",
    "register",
    "registered",
]


def test_every_name_of_the_codec_before_its_split_is_the_object_the_code_uses() -> None:
    from blooml.errors import CodecError as the_error

    assert CodecError is the_error
    values = {
        "MAX_ENCODE_DEPTH": MAX_ENCODE_DEPTH,
        "MAX_EXT_DEPTH": MAX_EXT_DEPTH,
        "decode": decode,
        "encode": encode,
        "encode_fitting": encode_fitting,
        "encode_row": encode_row,
        "register": register,
        "registered": registered,
    }
    framing = {
        "ENVELOPE_SLACK": ENVELOPE_SLACK,
        "FORMAT_VERSION": FORMAT_VERSION,
        "MAX_DATAGRAM": MAX_DATAGRAM,
        "MAX_MESSAGE": MAX_MESSAGE,
        "Destination": Destination,
        "Envelope": Envelope,
        "ReplayGuard": ReplayGuard,
        "decode_envelope": decode_envelope,
        "encode_envelope": encode_envelope,
        "encode_envelope_after": encode_envelope_after,
        "encode_for_channel": encode_for_channel,
        "envelope_head": envelope_head,
        "split_outer": split_outer,
    }
    # each the object its module defines, not a copy that could drift from it
    assert [n for n, v in values.items() if getattr(_valuecodec, n) is not v] == []
    assert [n for n, v in framing.items() if getattr(_envelope, n) is not v] == []
    assert codec.__all__ == ALL_BEFORE
    star: dict[str, object] = {}
    exec("from blooml.net.codec import *", star)
    assert sorted(set(star) - {"__builtins__"}) == sorted(ALL_BEFORE)
    # and the package's own names (docs/net.md imports them from blooml.net) are the same
    for name in set(blooml.net.__all__) & set(ALL_BEFORE):
        assert getattr(blooml.net, name) is getattr(codec, name), name


def test_the_value_codec_imports_nothing_of_the_envelope() -> None:
    """The envelope builds on the value codec, never the other way round: the value codec
    reads only the errors and the lattices of blooml (an import anywhere in the file, also
    inside a function)."""
    path = Path(_valuecodec.__file__)
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"relative import in {path.name}:{node.lineno}"
            imported.add(node.module or "")
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert {m for m in imported if m.startswith("blooml")} == {"blooml.errors", "blooml.lattices"}
