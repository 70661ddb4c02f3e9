"""Shared helpers of the Spark tests: in-process reference folds and strategies."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from typing import Any

from hypothesis import strategies as st

from blooml.lattices import Lattice, lbool, lmax, lmin

SPARK_SETTINGS: dict[str, Any] = {"max_examples": 12, "deadline": None}

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])

ORDERED: dict[type[Lattice], st.SearchStrategy[Lattice]] = {
    lmax: st.one_of(st.just(lmax()), st.integers(-50, 50).map(lmax)),
    lmin: st.one_of(st.just(lmin()), st.integers(-50, 50).map(lmin)),
    lbool: st.booleans().map(lbool),
}


def _crdts() -> dict[type[Lattice], st.SearchStrategy[Lattice]]:
    try:
        from blooml.lattices.crdts import llww, lpair
    except ImportError:  # TEMP while the CRDT modules land
        return {}
    return {
        lpair: st.tuples(st.integers(0, 9), st.integers(0, 9)).map(
            lambda t: lpair(lmax(t[0]), lmin(t[1]))
        ),
        llww: st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from(["n1", "n2"])).map(
            lambda t: llww(t[0], ts=t[1], node=t[2])
        ),
    }


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
