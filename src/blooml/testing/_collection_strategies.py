"""Strategies for the collection lattices ``lset``, ``lpset``, ``lbag`` and ``lmap``.

Registered through :func:`blooml.testing._strategies._register_builtin`; the options are
documented on :func:`blooml.testing.elements`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice, lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.testing._errors import LawCheckError, short_repr
from blooml.testing._strategies import _register_builtin, elements, named

_ITEMS = st.integers(min_value=0, max_value=12) | st.sampled_from(["a", "b", "c"])
# Quarter steps are exact in binary floating point, so sums do not depend on summation order.
_NONNEG = st.integers(min_value=0, max_value=12) | st.integers(min_value=0, max_value=48).map(
    lambda q: q / 4
)
_MAX_ITEMS = 6


# Lists rather than st.frozensets/st.dictionaries: drawing unique elements costs hypothesis a
# filtered draw per element (measured 3x slower for nested maps), and the constructors dedupe.


def _lset_values(*, values: SearchStrategy[Any] | None = None) -> SearchStrategy[lset]:
    return st.lists(_ITEMS if values is None else values, max_size=_MAX_ITEMS).map(lset)


def _lpset_values(*, values: SearchStrategy[Any] | None = None) -> SearchStrategy[lpset]:
    return st.lists(_NONNEG if values is None else values, max_size=_MAX_ITEMS).map(lpset)


def _lbag_values(*, values: SearchStrategy[Any] | None = None) -> SearchStrategy[lbag]:
    pairs = st.tuples(_ITEMS if values is None else values, st.integers(min_value=1, max_value=3))
    return st.lists(pairs, max_size=_MAX_ITEMS).map(lambda ps: lbag(dict(ps)))


def _lmap_values(
    *,
    keys: SearchStrategy[Any] | None = None,
    values: type[Lattice] | SearchStrategy[Any] | None = None,
) -> SearchStrategy[lmap]:
    if values is None and keys is None:
        # Mixed value lattices, the key deciding the class: two drawn maps always merge.
        pairs = st.one_of(
            st.tuples(st.sampled_from(["a", "b", "c"]), elements(lmax)),
            st.tuples(st.integers(min_value=0, max_value=2), elements(lset)),
            st.tuples(st.sampled_from([("flag", 0), ("flag", 1)]), elements(lbool)),
            st.tuples(
                st.sampled_from([("sub", 0), ("sub", 1)]),
                elements(lmap, keys=st.sampled_from("xy"), values=lmin),
            ),
        )
        return st.lists(pairs, max_size=_MAX_ITEMS).map(lambda ps: lmap(dict(ps)))
    if values is None:
        values = lmax
    if isinstance(values, type):
        value_strategy = elements(values)
    elif isinstance(values, SearchStrategy):
        value_strategy = values
    else:
        raise LawCheckError(
            lmap,
            "elements(lmap, values=...) takes a lattice class or a strategy of lattice values, "
            f"got {short_repr(values)}",
        )
    key_strategy = st.sampled_from("abcdef") if keys is None else keys
    pairs = st.tuples(key_strategy, value_strategy)
    return st.lists(pairs, max_size=_MAX_ITEMS).map(lambda ps: lmap(dict(ps)))


# -- default method arguments (check_laws(Cls) with no args) ------------------------------

ITEM_FUNCTIONS = st.sampled_from(
    [
        named("identity", lambda x: x),
        named("first_char", lambda x: str(x)[:1]),
        named("constant", lambda x: 0),
        named("drop_small", lambda x: None if isinstance(x, int) and x < 4 else x),
        named("pair", lambda x: (x, x)),
    ]
)
NUMBER_FUNCTIONS = st.sampled_from(
    [
        named("identity", lambda x: x),
        named("double", lambda x: 2 * x),
        named("halve_floor", lambda x: x // 2),
        named("drop_big", lambda x: None if x > 6 else x),
        named("zero", lambda x: 0),
    ]
)
_MAP_KEYS = st.sampled_from(["a", "b", "c", "z", 0, 1, 2, 9, ("flag", 0), ("flag", 1), ("sub", 0)])

_register_builtin(
    lset,
    _lset_values,
    # group_count needs rows (tuples); the default items are not: checked with rows in the suite
    args={"contains": _ITEMS, "project": ITEM_FUNCTIONS, "group_count": None},
)
_register_builtin(
    lpset,
    _lpset_values,
    args={
        "contains": _NONNEG,
        "project": NUMBER_FUNCTIONS,
        "group_count": st.sampled_from(["real", ("imag",), ["real", "imag"]]),
    },
)
_register_builtin(
    lbag, _lbag_values, args={"contains": _ITEMS, "mult": _ITEMS, "project": ITEM_FUNCTIONS}
)
_register_builtin(
    lmap,
    _lmap_values,
    # The default maps mix value classes: methods whose arguments depend on the value class are
    # checked per value class in the suite (elements(lmap, values=...)), not here.
    args={"at": None, "has_key": _MAP_KEYS, "filter": None, "apply_morph": None, "apply": None},
)
