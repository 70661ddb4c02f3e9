"""``merge_is_exact``: a class that declares it returns the left operand itself from a merge
whenever the right one is below it, so that a lattice variable may skip its ``<=`` test after
a merge (``blooml.engine._state.LatVarState.merge_in``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import lbag, lbool, lmap, lmax, lmin, lset
from blooml.engine._state import LatVarState
from blooml.lattices import Lattice
from blooml.testing import elements

EXACT = [lmax, lmin, lmap, lbag]


def test_the_classes_that_declare_it() -> None:
    declared = {c for c in (lmax, lmin, lmap, lbag, lbool, lset) if vars(c).get("merge_is_exact")}
    assert declared == set(EXACT)
    assert Lattice.merge_is_exact is False


@pytest.mark.parametrize("cls", EXACT, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_merge_below_returns_the_left_operand_itself(
    cls: type[Lattice], data: st.DataObject
) -> None:
    x, y = data.draw(elements(cls)), data.draw(elements(cls))
    z = x.merge(y)  # both are below their join
    assert z.merge(x) is z
    assert z.merge(y) is z
    assert z.merge(z) is z
    if y <= x:
        assert x.merge(y) is x
    else:  # a merge that returns another object grew it
        assert x.merge(y) is not x


def test_a_subclass_does_not_inherit_the_promise() -> None:
    class Sticky(lmax):
        """Overrides merge: a new (equal) object every time."""

        __slots__ = ()

        def merge(self, other: lmax) -> lmax:
            return type(self)(max(self.reveal() or 0, other.reveal() or 0))

    var = LatVarState("v", Sticky, Sticky(5))
    assert not var.exact
    assert var.merge_in(Sticky(3), "test") is False  # the <= test still runs
    assert var.incs == []


@pytest.mark.parametrize("cls", EXACT, ids=lambda c: c.__name__)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_merge_in_reports_growth_as_the_le_test_does(
    cls: type[Lattice], data: st.DataObject
) -> None:
    start = data.draw(elements(cls))
    values = data.draw(st.lists(elements(cls), max_size=5))
    fast, slow = LatVarState("v", cls, start), LatVarState("v", cls, start)
    slow.exact = False
    assert fast.exact
    for v in values:
        assert fast.merge_in(v, "test") == slow.merge_in(v, "test")
        assert fast.value == slow.value
    assert fast.changes == slow.changes
