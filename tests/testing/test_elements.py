"""elements() and register(): strategies of lattice values, and the errors around them."""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from blooml import Lattice, lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.testing import LawCheckError, elements, register
from blooml.testing._strategies import _register_builtin


def one(strategy):
    """The simplest value ``strategy`` draws (``.example()`` is for interactive use only)."""
    return find(strategy, lambda _: True, settings=settings(database=None))


@pytest.mark.parametrize("cls", [lmax, lmin, lbool])
def test_elements_draw_values_of_exactly_the_class_bottom_included(cls):
    seen = []

    @settings(max_examples=50, database=None)
    @given(elements(cls))
    def collect(v):
        assert type(v) is cls
        seen.append(v)

    collect()
    assert cls() in seen


def test_ordered_values_option():
    @settings(max_examples=30, database=None)
    @given(elements(lmax, values=st.text(alphabet="xy", max_size=3)))
    def strings(v):
        assert v.reveal() is None or isinstance(v.reveal(), str)

    strings()


def test_unknown_option_lists_the_accepted_ones():
    with pytest.raises(
        LawCheckError, match=r"unknown option\(s\) \['colour'\]; it accepts: values"
    ):
        elements(lmax, colour="red")
    with pytest.raises(LawCheckError, match="it accepts: no options"):
        elements(lbool, values=st.booleans())


def test_unregistered_class_says_to_call_register():
    class Mine(Lattice):
        def merge(self, other):
            return self

    with pytest.raises(LawCheckError) as info:
        elements(Mine)
    assert "no strategy is registered for" in str(info.value)
    assert "Mine" in str(info.value)
    assert "blooml.testing.register(" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_not_a_lattice_class():
    with pytest.raises(LawCheckError, match="expects a Lattice subclass, got <class 'int'>"):
        elements(int)
    with pytest.raises(LawCheckError, match="expects a Lattice subclass"):
        register(lmax(3), st.just(lmax(3)))


def test_register_a_user_lattice_and_replace_it():
    class Flag(Lattice):
        wrapper_name = "lflag_el"

        def __init__(self, value: bool = False):
            super().__init__(value)

        def merge(self, other):
            return self if self.reveal() else other

    register(Flag, st.just(Flag(True)))
    assert one(elements(Flag)) == Flag(True)
    register(Flag, st.just(Flag()))
    assert one(elements(Flag)) == Flag()


def test_register_rejects_a_non_strategy():
    class Other(Lattice):
        def merge(self, other):
            return self

    with pytest.raises(LawCheckError, match="needs a hypothesis strategy, got 3"):
        register(Other, 3)


def test_a_strategy_drawing_the_wrong_class_fails_clearly():
    class Wrong(Lattice):
        def merge(self, other):
            return self

    register(Wrong, st.just(lmax(1)))
    with pytest.raises(LawCheckError, match=r"drew lmax\(1\) \(a lmax\), not a .*Wrong"):
        one(elements(Wrong))


def test_internal_hook_registers_factories_with_options():
    class Pairish(Lattice):
        wrapper_name = "lpairish_el"

        def merge(self, other):
            return self

    def factory(*, size: int = 1):
        return st.just(Pairish(size))

    _register_builtin(Pairish, factory)
    assert one(elements(Pairish)) == Pairish(1)
    assert one(elements(Pairish, size=3)) == Pairish(3)
    with pytest.raises(LawCheckError, match="it accepts: size"):
        elements(Pairish, width=2)
    with pytest.raises(LawCheckError, match="must be callable"):
        _register_builtin(Pairish, "not a factory")


# -- collection lattices -------------------------------------------------------------------


@pytest.mark.parametrize("cls", [lset, lpset, lbag, lmap])
def test_collection_elements_include_bottom_and_any_two_merge(cls):
    seen = []

    @settings(max_examples=60, database=None)
    @given(elements(cls), elements(cls))
    def merge_any_two(a, b):
        assert type(a) is cls
        assert a <= a.merge(b)  # raises TypeError if two drawn maps were incompatible
        seen.append(a)

    merge_any_two()
    assert cls() in seen


def test_mixed_lmap_values_are_decided_by_the_key():
    @settings(max_examples=60, database=None)
    @given(elements(lmap))
    def check(m):
        for key, value in m.reveal().items():
            if isinstance(key, str):
                assert type(value) is lmax
            elif isinstance(key, int):
                assert type(value) is lset
            elif key[0] == "flag":
                assert type(value) is lbool
            else:
                assert type(value) is lmap
                assert all(type(v) is lmin for v in value.reveal().values())

    check()


def test_lmap_options():
    @settings(max_examples=30, database=None)
    @given(
        elements(lmap, values=lbool, keys=st.integers(0, 3)),
        elements(lmap, values=st.integers(0, 3).map(lmin)),
    )
    def check(bools, mins):
        assert all(type(v) is lbool and isinstance(k, int) for k, v in bools.reveal().items())
        assert all(type(v) is lmin for v in mins.reveal().values())

    check()
    with pytest.raises(LawCheckError, match="takes a lattice class or a strategy"):
        elements(lmap, values=3)


def test_collection_values_option():
    @settings(max_examples=30, database=None)
    @given(elements(lset, values=st.tuples(st.integers(0, 2), st.integers(0, 2))))
    def rows(s):
        assert all(isinstance(x, tuple) for x in s.reveal())

    rows()
