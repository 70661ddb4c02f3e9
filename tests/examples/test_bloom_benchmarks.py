"""The Bloom^L benchmarks compute the right answers (their speed is measured, not tested)."""

from __future__ import annotations

import math

import pytest
from _examples import load_benchmark
from hypothesis import given
from hypothesis import strategies as st

bp = load_benchmark("bench_bloom_paths")

pairs = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=16)
weighted = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 20)), max_size=20
)


def closure_by_dfs(edges: list[tuple[int, int]]) -> set[tuple[int, int]]:
    succ: dict[int, set[int]] = {}
    for s, d in edges:
        succ.setdefault(s, set()).add(d)
    out = set()
    for start in succ:
        stack, seen = list(succ[start]), set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            stack.extend(succ.get(n, ()))
        out |= {(start, n) for n in seen}
    return out


def bellman_ford(edges: list[tuple[int, int, int]], source: int) -> dict[int, int]:
    nodes = {source} | {s for s, _, _ in edges} | {d for _, d, _ in edges}
    dist = {n: math.inf for n in nodes}
    dist[source] = 0
    for _ in range(len(nodes)):
        for s, d, c in edges:
            if dist[s] + c < dist[d]:
                dist[d] = dist[s] + c
    return {n: int(v) for n, v in dist.items() if v != math.inf}


@given(pairs)
def test_baseline_closure_is_right(edges: list[tuple[int, int]]) -> None:
    assert bp.baseline_closure(edges) == closure_by_dfs(edges)


@given(weighted, st.integers(0, 7))
def test_baseline_sssp_and_dijkstra_are_right(edges: list[tuple[int, int, int]], src: int) -> None:
    want = bellman_ford(edges, src)
    assert bp.baseline_sssp(edges, src) == want
    assert bp.dijkstra(edges, src) == want


@given(pairs)
def test_engine_closure_equals_reference(edges: list[tuple[int, int]]) -> None:
    assert bp.engine_closure(edges) == closure_by_dfs(edges)


@given(weighted, st.integers(0, 7))
def test_engine_sssp_equals_reference(edges: list[tuple[int, int, int]], src: int) -> None:
    assert bp.engine_sssp(edges, src) == bellman_ford(edges, src)


def test_chain_and_random_graph_inputs() -> None:
    assert bp.chain(4) == [(0, 1), (1, 2), (2, 3)]
    g = bp.random_graph(50, 200, seed=3)
    assert len(g) == 200 and all(s != d and 0 <= s < 50 and 0 <= d < 50 for s, d, _ in g)
    assert g == bp.random_graph(50, 200, seed=3)


def _result_misses(missed: list[str]) -> list[str]:
    return [m for m in missed if "speed" not in m and "incrementality" not in m]


@pytest.mark.slow
def test_paths_benchmark_quick_run_is_correct() -> None:
    v, ratios = bp.run(chain_n=40, nodes=300, edges=1_500, repeat=1, measure_memory=False)
    assert _result_misses(v.missed) == []
    assert set(ratios) == {"closure", "sssp"}


@pytest.mark.slow
def test_kvs_benchmark_quick_run_is_correct() -> None:
    bk = load_benchmark("bench_bloom_kvs")
    v = bk.run(small=50, large=500, ticks=40, warmup=5)
    assert _result_misses(v.missed) == []


dag_negative = st.lists(
    st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(-10, 10)).filter(
        lambda e: e[0] < e[1]  # a DAG: negative weights but no negative cycle
    ),
    max_size=30,
)


@given(dag_negative)
def test_engine_sssp_with_negative_weights_on_a_dag(edges: list[tuple[int, int, int]]) -> None:
    """lmin paths are a least fixpoint, not Dijkstra: negative edges must still be right."""
    assert bp.engine_sssp(edges, 0) == bellman_ford(edges, 0)


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 2)), max_size=24))
def test_engine_sssp_with_zero_weights(edges: list[tuple[int, int, int]]) -> None:
    assert bp.engine_sssp(edges, 0) == bellman_ford(edges, 0)
