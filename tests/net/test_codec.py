"""The wire codec: round trips of every builtin lattice, errors at the sender, rejections."""

from __future__ import annotations

import hmac
from hashlib import sha256

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blooml
from blooml import Lattice, lmap, lmax, lpset, lset
from blooml.errors import CodecError
from blooml.net import (
    FORMAT_VERSION,
    decode,
    decode_envelope,
    encode,
    encode_envelope,
    encode_row,
    register,
    registered,
)
from blooml.net.codec import ReplayGuard, encode_envelope_after, envelope_head
from blooml.testing import elements

BUILTINS = [
    blooml.lmax,
    blooml.lmin,
    blooml.lbool,
    blooml.lset,
    blooml.lpset,
    blooml.lbag,
    blooml.lmap,
    blooml.lpair,
    blooml.ldompair,
    blooml.lgcounter,
    blooml.lvclock,
    blooml.lpncounter,
    blooml.llww,
    blooml.lmvreg,
    blooml.lorset,
    blooml.l2pset,
]


@pytest.mark.parametrize("cls", BUILTINS, ids=lambda c: c.wrapper_name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_builtin_lattice_round_trips(cls: type, data: st.DataObject) -> None:
    v = data.draw(elements(cls))
    back = decode(encode(v))
    assert type(back) is type(v)
    assert back == v


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.tuples(inner, inner) | st.frozensets(st.integers(), max_size=4),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(plain)
def test_plain_values_round_trip(v: object) -> None:
    assert decode(encode(v)) == v


def test_big_ints_and_nested_lattices() -> None:
    v = (2**100, -(2**70), lmap({"a": lset([1, (2, 3)]), "b": lset()}))
    assert decode(encode(v)) == v


def test_unknown_type_is_an_error_naming_the_column() -> None:
    with pytest.raises(CodecError, match="column 'v'") as ei:
        encode_row(("k", object()), "rule r", ("k", "v"))
    assert ei.value.reason == "unknown_type"


def test_unregistered_lattice_names_register() -> None:
    class Longest(Lattice):
        def __init__(self, value: str = "") -> None:
            super().__init__(value)

        def merge(self, other: Longest) -> Longest:
            return self if len(self.reveal()) >= len(other.reveal()) else other

    with pytest.raises(CodecError, match="register"):
        encode(Longest("ab"))
    register(Longest)
    assert decode(encode(Longest("abc"))) == Longest("abc")
    assert registered()[f"{Longest.__module__}.{Longest.__qualname__}"] is Longest


def test_user_lattice_with_a_wrapper_name_and_custom_wire() -> None:
    @register
    class Tally(Lattice):
        wrapper_name = "ltally_codec_test"

        def __init__(self, n: int = 0) -> None:
            if not isinstance(n, int) or n < 0:
                raise ValueError("non-negative int")
            super().__init__(n)

        def merge(self, other: Tally) -> Tally:
            return self if self.reveal() >= other.reveal() else other

    assert decode(encode((Tally(3),))) == (Tally(3),)
    # a value the lattice rejects is an error, not a half-built value
    forged = msgpack.ExtType(3, msgpack.packb(("ltally_codec_test", -5)))
    with pytest.raises(CodecError) as ei:
        decode(msgpack.packb(forged))
    assert ei.value.reason == "lattice_rejected"


def test_builtin_lattice_rejects_a_bad_value() -> None:
    code = msgpack.unpackb(encode(lpset([1, 2]))).code  # lpset's extension code
    bad = msgpack.packb(msgpack.ExtType(code, msgpack.packb((-1, 2))))  # lpset rejects -1
    with pytest.raises(CodecError) as ei:
        decode(bad)
    assert ei.value.reason == "lattice_rejected"


def test_malformed_and_too_deep() -> None:
    with pytest.raises(CodecError) as ei:
        decode(b"\xc1")
    assert ei.value.reason == "malformed"
    with pytest.raises(CodecError) as ei:
        decode(b"\x91" * 5000 + b"\xc0")
    assert ei.value.reason == "too_deep"
    nested = lset([1])
    for _ in range(40):
        nested = lmap({"k": nested})
    with pytest.raises(CodecError) as ei:
        decode(encode(nested))
    assert ei.value.reason == "too_deep"


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


def test_never_pickle() -> None:
    import pickle

    with pytest.raises(CodecError):
        decode(pickle.dumps(lset([1])))


def test_a_set_grown_by_small_merges_travels() -> None:
    # lset holds a set grown element by element as an rpds HashTrieSet internally
    grown = lset(range(40)).merge(lset([99]))
    assert decode(encode(grown)) == grown
    assert decode(encode(lpset(range(40)).merge(lpset([99])))) == lpset([*range(40), 99])
