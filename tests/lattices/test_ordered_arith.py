"""``lmin``/``lmax`` arithmetic (path costs): the one-call int path with interned results
agrees with the general path, keeps types, and bounds its table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml.errors import LatticeValueError
from blooml.lattices import ordered
from blooml.lattices.ordered import lmax, lmin

ints = st.integers(-(2**70), 2**70)


@pytest.mark.parametrize("cls", [lmin, lmax])
@given(v=ints, n=ints)
def test_int_arithmetic_matches_plain_arithmetic(cls, v, n):
    a = cls(v)
    for got, want in ((a + n, v + n), (n + a, v + n), (a - n, v - n)):
        assert type(got) is cls
        assert got.reveal() == want and type(got.reveal()) is int
        assert got == cls(want) and hash(got) == hash(cls(want))


@pytest.mark.parametrize("cls", [lmin, lmax])
def test_bottom_stays_bottom(cls):
    assert (cls() + 3).reveal() is None and (cls() - 3).reveal() is None
    assert (3 + cls()) == cls()


@pytest.mark.parametrize("cls", [lmin, lmax])
def test_floats_and_ints_do_not_share_interned_values(cls):
    one = cls(0) + 1
    f = cls(0) + 1.0
    assert type(f.reveal()) is float and type(one.reveal()) is int
    assert type((cls(0.5) + 1).reveal()) is float


@pytest.mark.parametrize("cls", [lmin, lmax])
def test_bool_and_non_numbers_are_rejected(cls):
    with pytest.raises(TypeError):
        cls(1) + True
    with pytest.raises(TypeError):
        cls(1) + "x"
    with pytest.raises(TypeError):
        cls(1) - None


def test_inf_minus_inf_is_an_error():
    with pytest.raises(LatticeValueError):
        lmin(float("inf")) - float("inf")


def test_classes_do_not_share_interned_values():
    assert type(lmin(1) + 1) is lmin and type(lmax(1) + 1) is lmax
    assert lmin(1) + 1 != lmax(1) + 1


def test_a_subclass_keeps_its_type():
    class Dist(lmin):
        __slots__ = ()

    d = Dist(3) + 4
    assert type(d) is Dist and d.reveal() == 7
    assert type(Dist(3) - 1) is Dist


def test_interned_table_is_bounded_and_values_stay_right(monkeypatch):
    # the table is shared by the whole process: earlier tests may have filled it with these
    # very values (then nothing is inserted and nothing is evicted), so start it empty
    table = ordered._INTERNED[lmin]
    saved = dict(table)
    table.clear()
    monkeypatch.setattr(ordered, "_INTERN_CAP", 16)
    try:
        base = lmin(0)
        got = [base + i for i in range(100)]
        assert [g.reveal() for g in got] == list(range(100))
        assert len(table) <= 16
        assert base + 99 == got[99]
    finally:
        table.clear()
        table.update(saved)


def test_equal_results_may_be_shared_and_are_immutable():
    a = lmin(10) + 5
    b = lmin(12) + 3
    assert a == b
    with pytest.raises(AttributeError):
        a._v = 3  # type: ignore[misc]
    assert b.reveal() == 15
