"""examples/shortest_paths.py: the lmin program agrees with Floyd–Warshall on random graphs."""

from __future__ import annotations

import math

import pytest
from _examples import load_example
from hypothesis import given
from hypothesis import strategies as st

from blooml import lmin

sp = load_example("shortest_paths")

Edge = tuple[str, str, int]
edges = st.lists(
    st.tuples(st.sampled_from("abcdef"), st.sampled_from("abcdef"), st.integers(1, 9)),
    max_size=14,
)


def floyd_warshall(links: list[Edge]) -> dict[tuple[str, str], int]:
    """Cheapest cost over paths of at least one link (so i -> i only through a cycle)."""
    nodes = sorted({s for s, _, _ in links} | {d for _, d, _ in links})
    d = {(i, j): math.inf for i in nodes for j in nodes}
    for s, t, c in links:
        d[(s, t)] = min(d[(s, t)], c)
    for k in nodes:
        for i in nodes:
            dik = d[(i, k)]
            if dik == math.inf:
                continue
            for j in nodes:
                if dik + d[(k, j)] < d[(i, j)]:
                    d[(i, j)] = dik + d[(k, j)]
    return {k: int(v) for k, v in d.items() if v != math.inf}


def reference_paths(links: list[Edge]) -> dict[tuple[str, str, str], int]:
    """The ``path`` table: per (src, dst, first hop) the cheapest cost."""
    best = floyd_warshall(links)
    out: dict[tuple[str, str, str], int] = {}
    for s, t, c in links:
        key = (s, t, "direct")
        out[key] = min(out.get(key, math.inf), c)  # type: ignore[arg-type]
        for (x, dst), rest in best.items():
            if x == t:
                k2 = (s, dst, t)
                out[k2] = min(out.get(k2, math.inf), c + rest)  # type: ignore[arg-type]
    return out


def run(batches: list[list[Edge]]) -> sp.Paths:
    p = sp.Paths()
    for batch in batches:
        p.link.insert(batch)
        p.tick()
    return p


def test_road_map_matches_dijkstra_and_shortcut_improves() -> None:
    result = sp.main()
    assert result["ok"]
    assert result["before"] == floyd_warshall(sp.ROADS)
    assert result["after"] == floyd_warshall([*sp.ROADS, sp.SHORTCUT])
    # the shortcut haarlem -> utrecht (1) makes amsterdam -> utrecht 3 instead of 4
    assert result["before"][("amsterdam", "utrecht")] == 4
    assert result["after"][("amsterdam", "utrecht")] == 3
    assert ("amsterdam", "utrecht") in result["improved"]
    assert result["seen"] == {s for s, _, _ in sp.ROADS}


def test_rows_are_named_tuples_with_lmin_costs() -> None:
    p = run([[("a", "b", 10), ("b", "c", 5)]])
    rows = set(p.best)
    assert {(r.src, r.dst, r.c) for r in rows} == {
        ("a", "b", lmin(10)),
        ("b", "c", lmin(5)),
        ("a", "c", lmin(15)),
    }
    r = next(r for r in rows if r.dst == "c" and r.src == "a")
    assert r[0] == "a" and r.c == lmin(15)
    assert set(p.seen.value.reveal()) == {"a", "b"}


@given(edges)
def test_best_equals_floyd_warshall(links: list[Edge]) -> None:
    p = run([links])
    assert sp.best_costs(p) == floyd_warshall(links)


@given(edges)
def test_path_table_equals_reference(links: list[Edge]) -> None:
    p = run([links])
    got = {(r.src, r.dst, r.hop): r.c.reveal() for r in p.path}
    assert got == reference_paths(links)


@given(edges, edges)
def test_incremental_insert_equals_batch(first: list[Edge], second: list[Edge]) -> None:
    p = run([first, second])
    assert sp.best_costs(p) == floyd_warshall(first + second)
    q = run([first + second])
    assert {tuple(r) for r in p.path} == {tuple(r) for r in q.path}


def test_costs_only_fall_when_links_are_added() -> None:
    p = run([[("a", "b", 5), ("b", "c", 5)]])
    assert sp.best_costs(p)[("a", "c")] == 10
    p.link.insert([("a", "c", 3)])
    p.tick()
    assert sp.best_costs(p)[("a", "c")] == 3
    # one path key, two derivations: merged, not a key conflict
    rows = [r for r in p.path if (r.src, r.dst) == ("a", "c")]
    assert sorted((r.hop, r.c.reveal()) for r in rows) == [("b", 10), ("direct", 3)]


@pytest.mark.parametrize("n", [3, 6])
def test_cycle_has_round_trip_costs(n: int) -> None:
    ring = [(f"n{i}", f"n{(i + 1) % n}", 1) for i in range(n)]
    p = run([ring])
    costs = sp.best_costs(p)
    assert costs[("n0", "n0")] == n
    assert len(costs) == n * n


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.sampled_from("abcdef"), st.integers(-9, 9)).filter(
            lambda e: e[0] < e[1]  # a DAG: negative costs, no negative cycle
        ),
        max_size=14,
    )
)
def test_negative_costs_on_a_dag(links: list[Edge]) -> None:
    p = run([links])
    assert sp.best_costs(p) == floyd_warshall(links)
