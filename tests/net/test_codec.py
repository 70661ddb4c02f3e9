"""The value codec: round trips of every builtin lattice, errors at the sender, rejections.

The envelope around encoded rows (framing, signatures, the replay guard) is tested in
``test_envelope.py``."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blooml
from blooml import Lattice, lmap, lpset, lset
from blooml.errors import CodecError
from blooml.net import (
    decode,
    encode,
    encode_row,
    register,
    registered,
)
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


def test_never_pickle() -> None:
    import pickle

    with pytest.raises(CodecError):
        decode(pickle.dumps(lset([1])))


def test_a_set_grown_by_small_merges_travels() -> None:
    # lset holds a set grown element by element as an rpds HashTrieSet internally
    grown = lset(range(40)).merge(lset([99]))
    assert decode(encode(grown)) == grown
    assert decode(encode(lpset(range(40)).merge(lpset([99])))) == lpset([*range(40), 99])
