"""lmax, lmin and lbool: examples for every method and error, and laws as properties."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import LatticeTypeError, LatticeValueError, kind_of, lbool, lmax, lmin, lset

numbers = st.integers(-50, 50)
maxes = st.one_of(st.just(lmax()), st.builds(lmax, numbers))
mins = st.one_of(st.just(lmin()), st.builds(lmin, numbers))
bools = st.builds(lbool, st.booleans())


class TestLmax:
    def test_bottom_and_merge(self):
        assert lmax() == lmax.bottom() and lmax().reveal() is None and lmax().is_bottom()
        assert lmax(3).merge(lmax(5)) == lmax(5) and lmax(5) | lmax(3) == lmax(5)
        assert lmax().merge(lmax(-100)) == lmax(-100)
        assert lmax("a").merge(lmax("b")) == lmax("b")
        assert lmax((1, 2)).merge(lmax((1, 3))) == lmax((1, 3))

    def test_merge_returns_an_input(self):
        a, b = lmax(3), lmax(5)
        assert a.merge(b) is b and b.merge(a) is b and a.merge(lmax()) is a

    @pytest.mark.parametrize("bad", [float("nan"), {1}, frozenset(), lmax(1)])
    def test_rejects(self, bad):
        with pytest.raises(LatticeValueError) as e:
            lmax(bad)
        assert e.value.lattice == "lmax"

    def test_incomparable_merge(self):
        with pytest.raises(LatticeValueError, match="cannot be compared"):
            lmax(1).merge(lmax("a"))

    def test_partially_ordered_values_do_not_merge_order_dependently(self):
        # tuples holding sets pass the reflexivity check but are only partially ordered
        a, b = lmax((1, frozenset({1}))), lmax((1, frozenset({2})))
        for x, y in ((a, b), (b, a)):
            with pytest.raises(LatticeValueError, match="cannot be compared"):
                x.merge(y)
        a, b = lmin((1, frozenset({1}))), lmin((1, frozenset({2})))
        with pytest.raises(LatticeValueError, match="cannot be compared"):
            a.merge(b)

    def test_morphisms(self):
        assert lmax(5).gt(4) == lbool(True) and lmax(4).gt(4) == lbool(False)
        assert lmax(4).gt_eq(4) == lbool(True) and lmax().gt_eq(-1000) == lbool(False)
        assert lmax(5).min_of(3) == lmax(3) and lmax(2).min_of(3) == lmax(2)
        assert lmax().min_of(3) == lmax()
        assert lmax(5) + 2 == lmax(7) and 2 + lmax(5) == lmax(7) and lmax(5) - 2 == lmax(3)
        assert lmax() + 2 == lmax() and lmax() - 2 == lmax()
        for name in ("gt", "gt_eq", "min_of", "__add__", "__radd__", "__sub__", "merge"):
            assert kind_of(lmax, name) == "morph"

    @pytest.mark.parametrize("bad", ["1", True, float("nan"), None])
    def test_arithmetic_rejects_non_numbers(self, bad):
        with pytest.raises(TypeError, match="expects a number"):
            lmax(1) + bad
        with pytest.raises(TypeError, match="expects a number"):
            lmax(1) - bad

    def test_order(self):
        assert lmax() <= lmax(1) < lmax(2) and lmax(2) >= lmax(2) > lmax(1)
        assert not (lmax(2) <= lmax(1))
        with pytest.raises(LatticeTypeError, match="lmax"):
            _ = lmax(1) <= lmin(1)
        with pytest.raises(LatticeTypeError):
            lmax(1).merge(lmin(1))


class TestLmin:
    def test_bottom_and_merge(self):
        assert lmin() == lmin.bottom() and lmin().reveal() is None
        assert lmin(3).merge(lmin(5)) == lmin(3) and lmin().merge(lmin(9)) == lmin(9)
        assert lmin(5) <= lmin(3)  # growing means getting smaller

    def test_morphisms(self):
        assert lmin(3).lt(4) == lbool(True) and lmin(4).lt(4) == lbool(False)
        assert lmin(4).lt_eq(4) == lbool(True) and lmin().lt_eq(1000) == lbool(False)
        assert lmin(5).max_of(7) == lmin(7) and lmin(9).max_of(7) == lmin(9)
        assert lmin().max_of(7) == lmin()
        assert lmin(5) + 1 == lmin(6) and 1 + lmin(5) == lmin(6) and lmin(5) - 1 == lmin(4)
        assert lmin() + 1 == lmin()
        for name in ("lt", "lt_eq", "max_of", "__add__", "__sub__"):
            assert kind_of(lmin, name) == "morph"

    def test_rejects(self):
        with pytest.raises(LatticeValueError):
            lmin(float("nan"))
        with pytest.raises(TypeError):
            lmin(1) + "x"


class TestLbool:
    def test_bottom_and_merge(self):
        assert lbool() == lbool(False) == lbool.bottom() and lbool().is_bottom()
        assert lbool(True).merge(lbool(False)) == lbool(True)
        assert lbool(False) | lbool(False) == lbool(False)
        assert bool(lbool(True)) and not lbool(False)

    @pytest.mark.parametrize("bad", ["yes", 1, 0])
    def test_rejects(self, bad):
        with pytest.raises(LatticeValueError) as e:
            lbool(bad)
        assert e.value.lattice == "lbool" and e.value.value == bad

    def test_when_true(self):
        calls = []
        assert lbool(True).when_true(lambda: calls.append(1) or [("x",)]) == [("x",)]
        assert lbool(False).when_true(lambda: calls.append(2)) is None
        assert calls == [1]
        assert kind_of(lbool, "when_true") == "morph"


class TestValueSemantics:
    @pytest.mark.parametrize(
        "value",
        [lmax(), lmax(3), lmax("s"), lmax((1, "a")), lmin(), lmin(2.5), lbool(), lbool(True)],
    )
    def test_repr_pickle_hash_copy(self, value):
        assert eval(repr(value)) == value
        w = pickle.loads(pickle.dumps(value))
        assert w == value and hash(w) == hash(value) and type(w) is type(value)
        assert copy.copy(value) is value and copy.deepcopy(value) is value

    def test_repr_text(self):
        assert repr(lmax()) == "lmax()" and repr(lmin(2)) == "lmin(2)"
        assert repr(lbool(True)) == "lbool(True)"

    def test_immutable(self):
        with pytest.raises(AttributeError, match="immutable"):
            lmax(1)._v = 3
        with pytest.raises(AttributeError):
            del lmax(1)._v

    def test_equality_across_classes(self):
        assert lmax(1) != lmin(1) and lmax(1) != 1 and lmax(1) != lset([1])

    def test_numeric_equal_values(self):
        assert lmax(1) == lmax(1.0) and hash(lmax(1)) == hash(lmax(1.0))

    def test_from_item_and_fold(self):
        assert lmax.from_item(3) == lmax(3)
        m = lmax(3)
        assert lmax.from_item(m) is m
        assert lmax.fold([1, 5, lmax(3)]) == lmax(5) and lmax.fold([]) == lmax()
        assert lmin.fold([4, 2]) == lmin(2) and lbool.fold([False, True]) == lbool(True)

    def test_default_builder_pickles(self):
        b = lmax.builder()
        b.add(3).add(1)
        b = pickle.loads(pickle.dumps(b))
        b.merge_builder(lmax.builder(lmax(7)))
        assert b.freeze() == lmax(7)


# -- laws as properties ---------------------------------------------------------------------------


@pytest.mark.parametrize("values", [maxes, mins, bools], ids=["lmax", "lmin", "lbool"])
def test_merge_is_a_join(values):
    @given(values, values, values)
    def check(a, b, c):
        bottom = type(a)()
        assert a.merge(b).merge(c) == a.merge(b.merge(c))
        assert a.merge(b) == b.merge(a)
        assert a.merge(a) == a and a.merge(bottom) == a and bottom <= a
        assert (a <= b) == (a.merge(b) == b)
        assert (a < b) == (a <= b and a != b)
        assert (a >= b) == (b <= a) and (a > b) == (b < a)

    check()


@given(maxes, maxes, numbers)
def test_lmax_morphisms_distribute(a, b, n):
    ab = a.merge(b)
    assert ab.gt(n) == a.gt(n).merge(b.gt(n))
    assert ab.gt_eq(n) == a.gt_eq(n).merge(b.gt_eq(n))
    assert ab.min_of(n) == a.min_of(n).merge(b.min_of(n))
    assert ab + n == (a + n).merge(b + n)
    assert ab - n == (a - n).merge(b - n)


@given(mins, mins, numbers)
def test_lmin_morphisms_distribute(a, b, n):
    ab = a.merge(b)
    assert ab.lt(n) == a.lt(n).merge(b.lt(n))
    assert ab.lt_eq(n) == a.lt_eq(n).merge(b.lt_eq(n))
    assert ab.max_of(n) == a.max_of(n).merge(b.max_of(n))
    assert ab + n == (a + n).merge(b + n)


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_lmax_floats_including_infinities(x, y):
    assert lmax(x).merge(lmax(y)).reveal() == max(x, y)
    assert not math.isnan(lmax(x).merge(lmax(y)).reveal())


# None given to a scalar lattice's constructor is ⊥ (a NULL adds nothing, as SQL's aggregates
# and Spark's least/greatest skip NULL; issue 27): the identity of merge, equal and hash-equal
# to ⊥, and the same bytes on the wire.
_NONE_BOTTOM = [(lmax, maxes), (lmin, mins), (lbool, bools)]


@pytest.mark.parametrize("cls, values", _NONE_BOTTOM, ids=lambda c: getattr(c, "__name__", ""))
def test_none_is_bottom(cls, values):
    from blooml.net.codec import decode, encode

    b = cls(None)
    assert b == cls() == cls.bottom() and hash(b) == hash(cls()) and b.is_bottom()
    assert repr(b) == repr(cls()) and b.reveal() == cls().reveal()
    assert encode(b) == encode(cls()) and decode(encode(b)) == cls()

    @given(values)
    def identity(v):
        assert v.merge(b) == v == b.merge(v) and b <= v

    identity()
