"""Shared helpers of the Spark tests: in-process reference folds and strategies."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from typing import Any

from hypothesis import strategies as st

from blooml.lattices import Lattice, lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.spark import MapOf

#: Each example runs a Spark job (~0.1-1 s), so property tests draw few examples.
SPARK_SETTINGS: dict[str, Any] = {"max_examples": 10, "deadline": None}

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
_INTS = st.integers(-50, 50)
_MAP_KEYS = st.sampled_from(["x", "y", "z"])

ORDERED: dict[type[Lattice], st.SearchStrategy[Lattice]] = {
    lmax: st.one_of(st.just(lmax()), _INTS.map(lmax)),
    lmin: st.one_of(st.just(lmin()), _INTS.map(lmin)),
    lbool: st.booleans().map(lbool),
}

_LSET = st.frozensets(st.integers(0, 12), max_size=5).map(lset)
_LBAG = st.dictionaries(st.sampled_from("pqrs"), st.integers(1, 3), max_size=3).map(lbag)


def _maps(values: st.SearchStrategy[Lattice]) -> st.SearchStrategy[Lattice]:
    return st.dictionaries(_MAP_KEYS, values, max_size=3).map(lmap)


#: Native column specs: strategy, Spark type of the elements, Spark type of the map keys.
NATIVE: dict[Any, tuple[st.SearchStrategy[Lattice], Any, Any]] = {}


def native_specs(T: Any) -> dict[Any, tuple[st.SearchStrategy[Lattice], Any, Any]]:
    """Every native spec we test, with its strategy and Spark types (``T``: pyspark types)."""
    long, string = T.LongType(), T.StringType()
    return {
        lmax: (ORDERED[lmax], long, None),
        lmin: (ORDERED[lmin], long, None),
        lbool: (ORDERED[lbool], None, None),
        lset: (_LSET, long, None),
        lpset: (st.frozensets(st.integers(0, 12), max_size=5).map(lpset), long, None),
        lbag: (_LBAG, string, None),
        MapOf(lmax): (_maps(ORDERED[lmax]), long, string),
        MapOf(lmin): (_maps(ORDERED[lmin]), long, string),
        MapOf(lbool): (_maps(ORDERED[lbool]), None, string),
        MapOf(lset): (_maps(_LSET), long, string),
        MapOf(MapOf(lmax)): (_maps(_maps(ORDERED[lmax])), long, string),
    }


def _crdts() -> dict[type[Lattice], st.SearchStrategy[Lattice]]:
    from blooml.lattices import crdts
    from blooml.testing import elements

    return {getattr(crdts, name): elements(getattr(crdts, name)) for name in crdts.__all__}


CRDTS = _crdts()


def merged_by_key(pairs: Iterable[tuple[Any, Lattice]]) -> dict[Any, Lattice]:
    """The in-process reference: merge each key's values with ``merge``."""
    out: dict[Any, Lattice] = {}
    for k, v in pairs:
        out[k] = out[k].merge(v) if k in out else v
    return out


def merged(cls: type[Lattice], values: Iterable[Lattice]) -> Lattice:
    """The in-process merge of all values (⊥ for none)."""
    return reduce(lambda a, b: a.merge(b), values, cls())


COLLECTIONS: dict[type[Lattice], st.SearchStrategy[Lattice]] = {
    lset: _LSET,
    lpset: st.frozensets(st.integers(0, 12), max_size=5).map(lpset),
    lbag: _LBAG,
    lmap: _maps(ORDERED[lmax]),
}

#: Plain items folded by ``fold``/``fold_by_key`` into each builtin (``Cls.from_item``).
ITEMS: dict[type[Lattice], st.SearchStrategy[Any]] = {
    lmax: _INTS,
    lmin: _INTS,
    lbool: st.booleans(),
    lset: st.integers(0, 12),
    lpset: st.integers(0, 12),
    lbag: st.sampled_from("pqrs"),
    lmap: st.tuples(_MAP_KEYS, ORDERED[lmax]),
}
