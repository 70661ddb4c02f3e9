"""Traces: spine shape, ordered access, look-ups, compaction, memory, errors."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml.dataflow import (
    IndexedZSet,
    TimestampError,
    Trace,
    TraceKindError,
    WeightError,
    ZSet,
    leq,
    lub,
)

updates = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.integers(0, 3),
        st.tuples(st.integers(0, 3), st.integers(0, 3)),
        st.integers(-2, 2).filter(bool),
    ),
    max_size=40,
)


def _reference(entries: list[tuple[int, int, tuple[int, int], int]]) -> dict:
    acc: dict = {}
    for k, v, t, w in entries:
        acc[(k, v, t)] = acc.get((k, v, t), 0) + w
    return {kvt: w for kvt, w in acc.items() if w}


@given(updates, st.integers(1, 8))
def test_batched_appends_equal_one_consolidated_set(entries, chunk) -> None:  # type: ignore[no-untyped-def]
    tr = Trace(indexed=True)
    for i in range(0, len(entries), chunk):
        part = entries[i : i + chunk]
        for k, v, t, w in part:
            tr = tr.insert(IndexedZSet([((k, v), w)]), t)
    got = list(tr)
    assert got == sorted(got, key=lambda e: (e[0], e[1], e[2]))  # key, then value, then time
    assert {(k, v, t): w for k, v, t, w in got} == _reference(entries)
    for k in range(6):
        expect = sorted((v, t, w) for (kk, v, t), w in _reference(entries).items() if kk == k)
        merged: dict = {}
        for v, t, w in tr.entries(k):
            merged[(v, t)] = merged.get((v, t), 0) + w
        assert sorted((v, t, w) for (v, t), w in merged.items() if w) == expect


def test_spine_merges_by_size() -> None:
    tr = Trace()
    for i in range(1000):
        tr = tr.insert(ZSet({i: 1}), i)
    sizes = tr.batch_sizes()
    assert sum(sizes) == 1000 and len(sizes) <= 12
    assert all(a >= b for a, b in itertools.pairwise(sizes))
    assert tr.history(500) == [(500, 1)] and tr.history(5000) == []


def test_insert_is_persistent_and_empty_insert_is_identity() -> None:
    t0 = Trace()
    t1 = t0.insert(ZSet({"a": 1}), 0)
    t2 = t1.insert(ZSet({"a": -1}), 0)
    assert len(t0) == 0 and list(t1) == [("a", None, 0, 1)] and list(t2) == []
    assert t2.insert(ZSet(), 3) is t2
    assert t1.consolidate() == ZSet({"a": 1}) and t2.consolidate() == ZSet()


def test_the_spec_trace_layout_and_consolidate() -> None:
    # The spec's Consolidate example (two of its lines lack a comma: `{1, 4, 0 -1}` and
    # `{2, 4, 0 1}`; we test the intended 4-tuples).
    t = Trace(
        [
            (0, 0, 0, 1),
            (0, 0, 0, -1),
            (0, 1, 0, 1),
            (0, 1, 0, 1),
            (1, 2, 0, 2),
            (1, 3, 0, 1),
            (1, 3, 0, -1),
            (1, 4, 0, -1),
            (2, 2, 0, 1),
            (2, 4, 0, 1),
        ]
    )
    assert t.consolidate() == ZSet({(0, 1): 2, (1, 2): 2, (1, 4): -1, (2, 2): 1, (2, 4): 1})
    assert t.keys() == [0, 1, 2]


def test_mixed_unorderable_types_fall_back_to_a_total_order() -> None:
    t = Trace().insert(ZSet({1: 1, "a": 1}), 0).insert(ZSet({None: 1, (1, "x"): 2}), 1)
    assert t.history("a") == [(0, 1)] and t.history(None) == [(1, 1)]
    assert t.history((1, "x")) == [(1, 2)] and t.history(2) == []
    assert len(list(t)) == 4 and t.consolidate() == ZSet({1: 1, "a": 1, None: 1, (1, "x"): 2})
    t2 = Trace().insert(ZSet({1: 1}), 0).insert(ZSet({"b": 1}), 0)  # mixing found at a merge
    assert t2.consolidate() == ZSet({1: 1, "b": 1}) and t2.history("b") == [(0, 1)]
    big = Trace().insert(ZSet({i: 1 for i in range(10)}), 0).insert(ZSet({"z": 1}), 1)
    assert big.batch_sizes() == [10, 1]  # not merged yet: two batches of unorderable keys
    assert big.keys() == [*range(10), "z"] and big.history("z") == [(1, 1)]
    assert big.history(3) == [(0, 1)] and len(list(big)) == 11


def test_as_of_uses_the_product_order() -> None:
    t = (
        Trace()
        .insert(ZSet({"a": 1}), (0, 0))
        .insert(ZSet({"b": 1}), (0, 2))
        .insert(ZSet({"c": 1}), (1, 1))
    )
    assert t.as_of((1, 1)) == ZSet({"a": 1, "c": 1})  # (0, 2) is not <= (1, 1)
    assert t.as_of((1, 2)) == ZSet({"a": 1, "b": 1, "c": 1})
    assert leq((0, 0), (0, 1)) and leq((0, 1), (1, 1))
    assert not leq((0, 2), (1, 1)) and not leq((1, 1), (2, 0))
    assert lub((0, 2), (1, 1)) == (1, 2) and lub(3, 5) == 5 and lub(None, (1, 0)) == (1, 0)


@given(updates, st.integers(0, 4))
def test_compaction_preserves_every_comparison_at_or_after_the_frontier(entries, f) -> None:  # type: ignore[no-untyped-def]
    tr = Trace(entries, indexed=True)
    small = tr.compact(f)
    assert len(small) <= len(tr)
    for e in range(f, 5):
        for i in range(4):
            assert small.as_of((e, i)) == tr.as_of((e, i))
            assert small.as_of((e - 1, i)) == tr.as_of((e - 1, i)) if e >= 1 else True
    assert small.consolidate() == tr.consolidate()


def test_compaction_shrinks_memory() -> None:
    tr = Trace()
    for e in range(50):
        tr = tr.insert(ZSet({i: 1 if e % 2 == 0 else -1 for i in range(100)}), (e, 0))
    assert len(tr) == 5000
    small = tr.compact(50)
    assert len(small) == 0 and small.memory_bytes() < tr.memory_bytes()
    assert tr.memory_bytes(deep=True) >= tr.memory_bytes() > 0


def test_errors() -> None:
    with pytest.raises(TimestampError) as info:
        Trace().insert(ZSet({1: 1}), -1)
    assert info.value.time == -1
    for bad in (1.5, (1, -1), (), "0", [0, 1]):
        with pytest.raises(TimestampError):
            Trace().insert(ZSet({1: 1}), bad)  # type: ignore[arg-type]
    with pytest.raises(TraceKindError):
        Trace().insert(ZSet({1: 1}), 0).insert(IndexedZSet({1: {1: 1}}), 0)
    with pytest.raises(TraceKindError):
        Trace().insert(IndexedZSet({1: {1: 1}}), 0).insert(ZSet({1: 1}), 0)
    with pytest.raises(TraceKindError):
        Trace().insert([1], 0)  # type: ignore[arg-type]
    with pytest.raises(WeightError):
        Trace([(1, 2, 0)])  # type: ignore[list-item]
    with pytest.raises(WeightError):
        Trace([(1, 2, 0, 0.5)])
    with pytest.raises(TraceKindError):
        Trace([(1, 2, 0, 1)], indexed=False)
    with pytest.raises(TimestampError):
        Trace().compact(-2)


def test_repr_and_equality() -> None:
    t = Trace([("k", "v", 0, 1)])
    assert repr(t) == "Trace(indexed, 1 updates in 1 batches: [('k', 'v', 0, 1)])"
    assert t == Trace([("k", "v", 0, 2), ("k", "v", 0, -1)]) and hash(t) == hash(Trace(list(t)))
    assert t != Trace([("k", "v", 1, 1)])
