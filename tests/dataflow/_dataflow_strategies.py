"""Hypothesis strategies shared by the dataflow tests."""

from __future__ import annotations

from hypothesis import strategies as st

from blooml.dataflow import IndexedZSet, ZSet

elements = st.integers(min_value=0, max_value=6)
weights = st.integers(min_value=-3, max_value=3).filter(bool)

zsets = st.dictionaries(elements, weights, max_size=6).map(ZSet)

pairs = st.tuples(st.integers(0, 3), st.integers(0, 3))
pair_zsets = st.dictionaries(pairs, weights, max_size=6).map(ZSet)

indexed = st.dictionaries(
    st.integers(0, 3),
    st.dictionaries(st.integers(0, 4), weights, min_size=1, max_size=3),
    max_size=4,
).map(IndexedZSet)


def streams(of: st.SearchStrategy, min_size: int = 1, max_size: int = 6) -> st.SearchStrategy:
    """A finite stream (list) of values."""
    return st.lists(of, min_size=min_size, max_size=max_size)
