"""The Lattice base class: derived order, value semantics, marks, builders, errors."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import (
    Lattice,
    LatticeBuilder,
    LatticeTypeError,
    LatticeValueError,
    kind_of,
    lattice_class,
    lbool,
    lmax,
    lmin,
    monotone,
    morph,
    registered_lattices,
)


class Longest(Lattice):
    """The exact user-lattice shape from the issue: must keep working."""

    wrapper_name = "llongest"

    def __init__(self, value: str = ""):  # the no-argument call gives ⊥
        super().__init__(value)  # the base stores it; reveal() returns it

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        return self if (len(a), a) >= (len(b), b) else other

    @monotone
    def length(self) -> lmax:
        return lmax(len(self.reveal()))


class Parity(Lattice):
    """A lattice with incomparable elements: ⊥ < {even, odd} < top."""

    wrapper_name = "lparity"

    def __init__(self, value: str = "bot"):
        if value not in ("bot", "even", "odd", "top"):
            raise LatticeValueError("lparity", value, "expected bot, even, odd or top")
        super().__init__(value)

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        if a == b or b == "bot":
            return self
        if a == "bot":
            return other
        return Parity("top")

    @morph
    def is_top(self) -> lbool:
        return lbool(self.reveal() == "top")


def test_user_lattice_shape_from_issue():
    x = Longest("abc")
    assert Longest() == Longest.bottom() == Longest("")
    assert x.merge(Longest("zz")) is x
    assert Longest("zz") <= x
    assert x.length() == lmax(3)
    assert Longest.monotones() == frozenset({"length"})
    assert kind_of(Longest, "length") == "monotone"
    assert kind_of(Longest, "reveal") == "nonmonotone"
    assert lattice_class("llongest") is Longest
    assert "llongest" in registered_lattices()


def test_partial_order_incomparable_values_are_all_false():
    even, odd = Parity("even"), Parity("odd")
    assert not even <= odd
    assert not even < odd
    assert not even >= odd
    assert not even > odd
    assert even != odd
    assert (even | odd) == Parity("top")
    assert Parity() < even < Parity("top")
    assert Parity("top") > odd >= Parity()


@given(st.integers(), st.integers())
def test_order_agrees_with_merge(a, b):
    x, y = lmax(a), lmax(b)
    assert (x <= y) == (x.merge(y) == y)
    assert (x | y) == x.merge(y) == y.merge(x)
    assert (x < y) == (a < b)


def test_merging_different_classes_names_both():
    with pytest.raises(TypeError) as exc:
        lmax(1).merge(lmin(1))
    assert isinstance(exc.value, LatticeTypeError)
    assert "lmax" in str(exc.value) and "lmin" in str(exc.value)
    with pytest.raises(LatticeTypeError):
        lmax(1) <= lmin(2)
    with pytest.raises(LatticeTypeError):
        lmax(1) | lmin(2)
    with pytest.raises(LatticeTypeError, match="llongest"):
        Longest("a").merge(Parity("even"))


def test_comparison_with_non_lattice_is_a_type_error():
    with pytest.raises(TypeError):
        lmax(1) <= 3
    assert lmax(1) != 1
    assert (lmax(1) == 1) is False


def test_values_are_immutable_hashable_and_pickle():
    x = Longest("abc")
    with pytest.raises(AttributeError, match="immutable"):
        x.other = 1
    with pytest.raises(AttributeError, match="immutable"):
        del x._v
    assert {x, Longest("abc")} == {x}
    assert hash(lmax(3)) == hash(lmax(3))
    for v in (x, lmax(3), lmax(), lmin("a"), lbool(True), Parity("odd")):
        back = pickle.loads(pickle.dumps(v))
        assert back == v and type(back) is type(v) and hash(back) == hash(v)
        assert copy.copy(v) is v and copy.deepcopy(v) is v


@pytest.mark.parametrize("value", [lmax(3), lmax(), lmin(-2.5), lmin("b"), lbool(), lbool(True)])
def test_builtin_repr_round_trips(value):
    assert eval(repr(value)) == value


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: lbool("yes"), "lbool('yes')"),
        (lambda: lbool(1), "lbool(1)"),
        (lambda: lmax(float("nan")), "NaN"),
        (lambda: lmax({}), "not totally ordered"),
        (lambda: lmax(lmax(1)), "not a lattice"),
    ],
)
def test_invalid_constructor_input(make, fragment):
    with pytest.raises(LatticeValueError) as exc:
        make()
    assert isinstance(exc.value, ValueError)
    assert fragment in str(exc.value)


def test_lattice_value_error_carries_value():
    with pytest.raises(LatticeValueError) as exc:
        lbool("yes")
    assert exc.value.lattice == "lbool" and exc.value.value == "yes"


def test_lmax_lmin_bottoms_and_methods():
    assert lmax().reveal() is None and lmin().reveal() is None
    assert lmax() <= lmax(-(10**9)) and lmin() <= lmin(10**9)
    assert lmax(5).gt(4) == lbool(True) and lmax().gt(-(10**9)) == lbool(False)
    assert lmax(5).gt_eq(5) and not lmax(5).gt(5)
    assert lmin(3).lt(4) and lmin(3).lt_eq(3) and not lmin().lt(10)
    assert lmax(5) + 2 == lmax(7) and 2 + lmax(5) == lmax(7) and lmax(5) - 1 == lmax(4)
    assert lmax() + 2 == lmax() and lmin() + 2 == lmin()
    assert lmin(5) + 2 == lmin(7) and lmin(5) - 7 == lmin(-2)
    assert lmax(9).min_of(4) == lmax(4) and lmax(3).min_of(4) == lmax(3)
    assert lmin(1).max_of(4) == lmin(4)
    assert lmax("b").merge(lmax("a")) == lmax("b")
    with pytest.raises(TypeError, match="expects a number"):
        lmax(1) + "x"
    with pytest.raises(TypeError, match="expects a number"):
        lmin(1) + lmin(2)
    with pytest.raises(LatticeValueError, match="cannot be compared"):
        lmax(1).merge(lmax("a"))


def test_lbool_when_true_and_truthiness():
    assert lbool(True).when_true(lambda: [("addr",)]) == [("addr",)]
    called = []
    assert lbool(False).when_true(lambda: called.append(1)) is None
    assert called == []
    assert bool(lbool(True)) and not bool(lbool())


def test_marks_and_kind_of():
    assert {"gt", "gt_eq", "min_of", "__add__", "__sub__", "merge"} <= lmax.morphisms()
    assert lmax.monotones() == frozenset()
    assert kind_of(lbool, "when_true") == "morph"
    assert kind_of(Parity, "is_top") == "morph"
    with pytest.raises(AttributeError, match="no method 'nope'"):
        kind_of(lmax, "nope")
    with pytest.raises(TypeError, match="Lattice subclass"):
        kind_of(int, "bit_length")


def test_unmarked_override_is_nonmonotone():
    class Shorter(Longest):
        wrapper_name = "lshorter_test"

        def length(self) -> lmax:  # overridden without the mark
            return lmax(0)

    assert kind_of(Shorter, "length") == "nonmonotone"
    assert kind_of(Longest, "length") == "monotone"


def test_bad_wrapper_name():
    with pytest.raises(TypeError, match="wrapper_name"):

        class Bad(Lattice):
            wrapper_name = "not an identifier"

            def merge(self, other):
                return self


def test_lattice_class_unknown_name():
    with pytest.raises(KeyError, match="no lattice with wrapper_name 'lnope'"):
        lattice_class("lnope")


def test_missing_merge_is_reported():
    class NoMerge(Lattice):
        pass

    with pytest.raises(NotImplementedError, match="must define merge"):
        NoMerge(1).merge(NoMerge(2))


def test_from_item_fold_and_default_builder():
    assert lmax.from_item(3) == lmax(3)
    v = lmax(4)
    assert lmax.from_item(v) is v
    assert lmax.fold([3, 9, lmax(4), 1]) == lmax(9)
    assert lmax.fold([]) == lmax()
    b = lmax.builder()
    assert isinstance(b, LatticeBuilder) and b.lattice is lmax
    b.add(3).merge(lmax(5))
    other = lmax.builder(lmax(7))
    assert b.merge_builder(other).freeze() == lmax(7)
    back = pickle.loads(pickle.dumps(b))
    assert back.freeze() == lmax(7)
    with pytest.raises(LatticeTypeError):
        b.merge(lmin(1))
    with pytest.raises(LatticeTypeError):
        lmax.builder(lmin(1))


def test_is_bottom():
    assert lmax().is_bottom() and not lmax(0).is_bottom()
    assert Longest().is_bottom() and not Longest("a").is_bottom()
