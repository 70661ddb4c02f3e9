"""Strategies for the CRDTs of :mod:`blooml.lattices.crdts`, registered for ``elements``.

Registered through :func:`blooml.testing._strategies._register_builtin`. Domains are small (node
ids ``"a"``-``"c"``, a few values and tags) so that independently drawn values overlap, share
entries and compare; any two values drawn from one strategy merge.

Options (keyword-only):
    lpair: ``first``, ``second`` — a lattice class or a strategy of values for each component
        (default ``lmax`` and ``lmin``).
    ldompair: ``first``, ``second`` — as for ``lpair`` (default: ``lpair(lmax, lmax)`` first
        components, which are partially ordered so the incomparable case is drawn, and ``lmax``).
    llww: ``values`` — a strategy of mutually ordered register values (default small ints);
        ``timestamps`` — a strategy of timestamps (default small ints).
    lmvreg: ``values`` — a strategy of register values (default small ints).
    lorset: ``elems`` — a strategy of elements, ``tags`` — a strategy of tags.
    l2pset: ``elems`` — a strategy of elements.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice, lmax, lmin
from blooml.lattices.crdts import (
    l2pset,
    ldompair,
    lgcounter,
    llww,
    lmvreg,
    lorset,
    lpair,
    lpncounter,
    lvclock,
)
from blooml.testing._errors import LawCheckError, short_repr
from blooml.testing._strategies import _register_builtin, elements

NODES = st.sampled_from(["a", "b", "c"])
_SMALL = st.integers(min_value=0, max_value=4)
_ELEMS = st.integers(min_value=0, max_value=5) | st.sampled_from(["x", "y"])
_TAGS = st.integers(min_value=0, max_value=5)
_MAX_ITEMS = 4


def _component(cls: type[Lattice], option: str, given: Any, default: Any) -> SearchStrategy[Any]:
    if given is None:
        given = default
    if isinstance(given, type) and issubclass(given, Lattice):
        return elements(given)
    if isinstance(given, SearchStrategy):
        return given
    raise LawCheckError(
        cls,
        f"elements({cls.__qualname__}, {option}=...) takes a lattice class or a strategy of "
        f"lattice values, got {short_repr(given)}",
    )


def _lpair_values(*, first: Any = None, second: Any = None) -> SearchStrategy[lpair]:
    firsts = _component(lpair, "first", first, lmax)
    seconds = _component(lpair, "second", second, lmin)
    return st.just(lpair()) | st.builds(lpair, firsts, seconds)


def _ldompair_values(*, first: Any = None, second: Any = None) -> SearchStrategy[ldompair]:
    grid = st.builds(lpair, elements(lmax), elements(lmax))
    firsts = _component(ldompair, "first", first, grid)
    seconds = _component(ldompair, "second", second, lmax)
    return st.just(ldompair()) | st.builds(ldompair, firsts, seconds)


def _llww_values(
    *, values: SearchStrategy[Any] | None = None, timestamps: SearchStrategy[Any] | None = None
) -> SearchStrategy[llww]:
    return st.just(llww()) | st.builds(
        llww,
        _SMALL if values is None else values,
        _SMALL if timestamps is None else timestamps,
        st.sampled_from(["", "a", "b"]),
    )


def _counts() -> SearchStrategy[dict[str, int]]:
    return st.dictionaries(NODES, _SMALL, max_size=3)


def _lvclock_values() -> SearchStrategy[lvclock]:
    return _counts().map(lvclock)


def _lgcounter_values() -> SearchStrategy[lgcounter]:
    return _counts().map(lgcounter)


def _lpncounter_values() -> SearchStrategy[lpncounter]:
    return st.builds(lpncounter, _counts(), _counts())


def _lmvreg_values(*, values: SearchStrategy[Any] | None = None) -> SearchStrategy[lmvreg]:
    entry = st.tuples(_lvclock_values(), _SMALL if values is None else values)
    return st.lists(entry, max_size=_MAX_ITEMS).map(lmvreg)


def _lorset_values(
    *, elems: SearchStrategy[Any] | None = None, tags: SearchStrategy[Any] | None = None
) -> SearchStrategy[lorset]:
    tag_map = st.dictionaries(
        _ELEMS if elems is None else elems,
        st.frozensets(_TAGS if tags is None else tags, max_size=3),
        max_size=_MAX_ITEMS,
    )
    return st.builds(lorset, tag_map, tag_map)


def _l2pset_values(*, elems: SearchStrategy[Any] | None = None) -> SearchStrategy[l2pset]:
    items = st.frozensets(_ELEMS if elems is None else elems, max_size=_MAX_ITEMS)
    return st.builds(l2pset, items, items)


_ELEM_ARG = st.sampled_from(["x", "y", 1, "zz"])

#: Arguments for the update and read methods of each CRDT, in ``check_laws(args=...)`` form:
#: small domains that hit existing nodes, elements and stamps as well as new ones.
METHOD_ARGS: dict[type[Lattice], dict[str, Any]] = {
    lpair: {},
    ldompair: {},
    llww: {"write": st.tuples(_SMALL, _SMALL, st.sampled_from(["", "a", "b"]))},
    lvclock: {"increment": NODES | st.just("d"), "at": NODES | st.just("d")},
    lgcounter: {
        "increment": st.tuples(NODES, st.integers(min_value=1, max_value=3)),
        "at": NODES,
    },
    lpncounter: {
        "increment": st.tuples(NODES, st.integers(min_value=1, max_value=3)),
        "decrement": st.tuples(NODES, st.integers(min_value=1, max_value=3)),
    },
    lmvreg: {"write": st.tuples(_SMALL, NODES)},
    lorset: {"add": st.tuples(_ELEM_ARG, _TAGS), "remove": _ELEM_ARG},
    l2pset: {"add": _ELEM_ARG, "remove": _ELEM_ARG},
}

for _cls, _factory in (
    (lpair, _lpair_values),
    (ldompair, _ldompair_values),
    (llww, _llww_values),
    (lvclock, _lvclock_values),
    (lgcounter, _lgcounter_values),
    (lpncounter, _lpncounter_values),
    (lmvreg, _lmvreg_values),
    (lorset, _lorset_values),
    (l2pset, _l2pset_values),
):
    _register_builtin(_cls, _factory, args=METHOD_ARGS[_cls])
