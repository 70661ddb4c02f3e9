"""The envelope (``blooml.net._envelope``, public through ``blooml.net.codec``): framing of
encoded rows, signatures, the replay guard, and the malformed bodies a receiver refuses.

The value codec inside it (values, rows, lattices) is tested in ``test_codec.py``; the wire's
limits on real sockets (replay window, bound destinations, fragments) in ``test_wire.py``."""

from __future__ import annotations

import hmac
from hashlib import sha256

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import lmax
from blooml.errors import CodecError
from blooml.net import FORMAT_VERSION, decode_envelope, encode_envelope, encode_row
from blooml.net.codec import ReplayGuard, encode_envelope_after, envelope_head


def _rows(*rows: tuple) -> list[bytes]:
    return [encode_row(r) for r in rows]


def test_envelope_round_trip() -> None:
    data = encode_envelope("a:1", [("ch", _rows(("x", lmax(3)), ("y", lmax(4))))])
    env = decode_envelope(data)
    assert env.version == FORMAT_VERSION
    assert env.sender == "a:1"
    assert env.batches == (("ch", (("x", lmax(3)), ("y", lmax(4)))),)


def test_unknown_version() -> None:
    body = msgpack.packb(["a:1", 0, []])
    with pytest.raises(CodecError) as ei:
        decode_envelope(msgpack.packb([99, body, None]))
    assert ei.value.reason == "version"


def test_signed_envelopes() -> None:
    key = b"secret"
    data = encode_envelope("a:1", [("ch", _rows((1,)))], key=key)
    guard = ReplayGuard(window=30.0)
    assert decode_envelope(data, key, guard).batches == (("ch", ((1,),)),)
    with pytest.raises(CodecError) as ei:
        decode_envelope(data, key, guard)
    assert ei.value.reason == "replay"
    with pytest.raises(CodecError) as ei:
        decode_envelope(encode_envelope("a:1", [("ch", _rows((1,)))]), key, guard)
    assert ei.value.reason == "unsigned"
    with pytest.raises(CodecError) as ei:
        decode_envelope(encode_envelope("a:1", [("ch", _rows((1,)))], key=b"other"), key, guard)
    assert ei.value.reason == "bad_signature"
    old = encode_envelope("a:1", [("ch", _rows((2,)))], key=key, ts=1000.0)
    with pytest.raises(CodecError) as ei:
        decode_envelope(old, key, guard)
    assert ei.value.reason == "stale"
    # the signature covers the body: flipping a byte of it is caught
    body = msgpack.unpackb(data)[1]
    forged = msgpack.packb([2, body[:-1] + b"\x02", hmac.new(b"x", body, sha256).digest()])
    with pytest.raises(CodecError) as ei:
        decode_envelope(forged, key, guard)
    assert ei.value.reason in ("bad_signature", "malformed")


@pytest.mark.parametrize("size", [0, 1, 200, 300, 70_000])
@pytest.mark.parametrize("key", [None, b"secret"])
def test_envelopes_of_every_body_size_decode(size: int, key: bytes | None) -> None:
    """Bodies under 256 bytes, under 64 KiB and larger (each msgpack ``bin`` header), signed
    or not: an unsigned one takes the reader's short way, the others the general one."""
    rows = _rows(("x" * size, 1)) if size else []
    data = encode_envelope("a:1", [("ch", rows)], key, dest="b:2", seq=7)
    env = decode_envelope(data, key, dest="b:2")
    assert (env.sender, env.dest, env.seq) == ("a:1", "b:2", 7)
    assert env.batches == (("ch", (("x" * size, 1),) if size else ()),)
    for cut in (data[:-1], data[:-2] + data[-1:], data + b"\xc0"):  # one byte off
        with pytest.raises(CodecError) as ei:
            decode_envelope(cut, key, dest="b:2")
        assert ei.value.reason in ("malformed", "bad_signature", "unsigned")


def test_an_envelope_head_packed_once_is_signed_with_the_body() -> None:
    """A node packs sender and destination once per peer (``envelope_head``): the bytes
    are ``encode_envelope``'s, and the signature still binds sender, destination and
    sequence: the envelope replayed at another node is ``misdirected``, and one whose
    head was changed in flight fails its signature."""
    key = b"secret"
    rows = [("ch", _rows((1, "v")))]
    head = envelope_head("a:1", "b:2")
    data = encode_envelope_after(head, rows, key, 5.0, 3)
    assert data == encode_envelope("a:1", rows, key, 5.0, dest="b:2", seq=3)
    assert encode_envelope_after(head, rows, key, 5.0, 4) != data  # the sequence is signed
    env = decode_envelope(data, key, dest="b:2", now=5.0)
    assert (env.sender, env.dest, env.seq) == ("a:1", "b:2", 3)
    with pytest.raises(CodecError) as ei:
        decode_envelope(data, key, dest="c:3", now=5.0)
    assert ei.value.reason == "misdirected"
    forged = data.replace(b"b:2", b"c:3")
    with pytest.raises(CodecError) as ei:
        decode_envelope(forged, key, dest="c:3", now=5.0)
    assert ei.value.reason == "bad_signature"


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=40),
            st.lists(st.tuples(st.integers(-(2**63), 2**64 - 1), st.text(max_size=5)), max_size=20),
        ),
        max_size=18,
    ),
    seq=st.integers(min_value=0, max_value=2**40),
)
def test_an_envelope_is_msgpacks_own_packing_of_its_fields(
    batches: list[tuple[str, list[tuple[int, str]]]], seq: int
) -> None:
    """The envelope's body, joined from its packed pieces (``encode_envelope_after``), is
    byte for byte what msgpack packs for the same fields: any number of batches and rows
    (array headers of 15, 16 and more), any channel name, any sequence number."""
    rows = [(chan, [encode_row(r) for r in rs]) for chan, rs in batches]
    data = encode_envelope("a:1", rows, None, 5.5, dest="b:2", seq=seq)
    body = msgpack.packb(
        ["a:1", "b:2", seq, 5500, [[c, [list(r) for r in rs]] for c, rs in batches]]
    )
    assert data == msgpack.packb([2, body, None])
    assert decode_envelope(data).batches == tuple((c, tuple(rs)) for c, rs in batches)


def test_an_envelope_body_that_is_not_rows_is_malformed() -> None:
    """The body's checks, each field: a bool is not a sequence number, a batch is a pair of
    a name and rows, every row an array."""
    for inner in (
        ["a:1", "", True, 0, []],
        ["a:1", "", 0, 1.5, []],
        ["a:1", "", 0, 0, [["ch"]]],
        ["a:1", "", 0, 0, [[1, []]]],
        ["a:1", "", 0, 0, [["ch", [5]]]],
        ["a:1", "", 0, 0, [["ch", 5]]],
        [1, "", 0, 0, []],
        ["a:1", "", 0, 0],
    ):
        data = msgpack.packb([FORMAT_VERSION, msgpack.packb(inner), None])
        with pytest.raises(CodecError) as ei:
            decode_envelope(data)
        assert ei.value.reason == "malformed", inner
