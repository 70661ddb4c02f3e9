"""Recursive views under random deletes and inserts, against the reference, tick by tick.

Random weighted graphs with cycles (self-loops, zero weights) feed set recursion
(reachability, a non-linear transitive closure) and lattice-valued recursion (``lmin``
shortest distances; ``lmax`` widest paths, whose ``min_of`` lets a cycle hold a value without
improving it), as scratch views maintained by Backward/Forward (``blooml.engine._dred``). After
every tick the incremental instance and ``Program(incremental=False)`` hold the same rows, or
both raised (a key conflict in the input rolls the tick back).
"""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, lmax, lmin, scratch, table
from blooml.engine._dred import DRed


class Rec(Program):
    e = table(["s", "t"], ["w"])
    root = table(["n"])
    reach = scratch(["n"])
    dist = scratch(["n"], ["d"])
    wide = scratch(["n"], ["c"])
    tc = scratch(["x", "y"])
    far = scratch(["n"])

    @bloom
    def rules(self) -> None:
        self.reach <= self.root
        self.reach <= self.reach.join(self.e, self.reach.n == self.e.s).map(lambda r, e: (e.t,))
        self.dist <= self.root.map(lambda r: (r.n, lmin(0)))
        self.dist <= self.dist.join(self.e, self.dist.n == self.e.s).map(
            lambda a, e: (e.t, a.d + e.w)
        )
        self.wide <= self.root.map(lambda r: (r.n, lmax(5)))
        self.wide <= self.wide.join(self.e, self.wide.n == self.e.s).map(
            lambda a, e: (e.t, a.c.min_of(e.w))
        )
        self.tc <= self.e.map(lambda e: (e.s, e.t))
        self.tc <= self.tc.join(self.tc, self.tc.y == self.tc.x).map(lambda a, b: (a.x, b.y))
        # a stratum above, reading the changes of two recursive views
        self.far <= self.reach.notin(self.tc, self.reach.n == self.tc.y)


def contents(p: Program) -> dict[str, Any]:
    return {n: sorted(map(tuple, r.store.values()), key=repr) for n, r in p._rt.rels.items()}


node = st.integers(0, 5)
weight = st.integers(0, 3)
op = st.one_of(
    st.tuples(st.just("ins"), st.lists(st.tuples(node, node, weight), max_size=4)),
    st.tuples(st.just("del"), st.lists(st.tuples(node, node), max_size=3)),
    st.tuples(st.just("root+"), st.lists(node, max_size=1)),
    st.tuples(st.just("root-"), st.lists(node, max_size=1)),
    st.tuples(st.just("dist"), st.lists(st.tuples(node, weight), max_size=2)),
    st.tuples(st.just("conflict"), st.lists(st.tuples(node, node, weight), min_size=1, max_size=1)),
)


def apply(p: Program, kind: str, args: list[Any]) -> None:
    if kind == "ins":
        p.e.insert(list({(s, t): (s, t, w) for s, t, w in args}.values()))  # type: ignore[attr-defined]
    elif kind == "del":
        keys = set(args)
        p.e.delete([r for r in p.e if (r.s, r.t) in keys])  # type: ignore[attr-defined]
    elif kind == "root+":
        p.root.insert([(n,) for n in args])  # type: ignore[attr-defined]
    elif kind == "root-":
        p.root.delete([(n,) for n in args])  # type: ignore[attr-defined]
    elif kind == "dist":  # input rows of the recursive head itself, for one tick
        p.dist.insert(list({n: (n, lmin(d)) for n, d in args}.values()))  # type: ignore[attr-defined]
    else:  # two rows under one key: the tick fails in both and is rolled back
        s, t, w = args[0]
        p.e.insert([(s, t, w), (s, t, w + 1)])  # type: ignore[attr-defined]


def run_both(ops: list[tuple[str, list[Any]]]) -> None:
    inc, ref = Rec(), Rec(incremental=False)
    for t, (kind, args) in enumerate(ops):
        results = []
        for p in (inc, ref):
            apply(p, kind, args)
            try:
                p.tick()
                results.append("ok")
            except Exception as exc:
                results.append(type(exc).__name__)
                p.discard_pending()
        assert results[0] == results[1], (t, kind, args, results)
        assert contents(inc) == contents(ref), f"tick {t} ({kind} {args})"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=30))
def test_recursive_views_equal_the_reference_under_random_changes(
    ops: list[tuple[str, list[Any]]],
) -> None:
    run_both([("root+", [0]), *ops])


@pytest.mark.parametrize("share", [-100.0, 100.0])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=20))
def test_the_fallback_and_the_backward_phase_agree(
    share: float, ops: list[tuple[str, list[Any]]]
) -> None:
    """Whether a retraction falls back to re-deriving (share < 0) or never does, the rows
    are the reference's."""
    old = DRed.limit_share
    DRed.limit_share = share
    try:
        run_both([("root+", [0]), *ops])
    finally:
        DRed.limit_share = old


def random_ops(seed: int, nodes: int, ticks: int) -> list[tuple[str, list[Any]]]:
    rnd = random.Random(seed)
    edges = {
        (rnd.randrange(nodes), rnd.randrange(nodes)): rnd.randrange(4) for _ in range(3 * nodes)
    }
    ops: list[tuple[str, list[Any]]] = [("ins", [(s, t, w) for (s, t), w in edges.items()])]
    ops.append(("root+", [0]))
    for _ in range(ticks):
        r = rnd.random()
        if r < 0.45 and edges:
            k = rnd.choice(sorted(edges))
            del edges[k]
            ops.append(("del", [k]))
        elif r < 0.9:
            k = (rnd.randrange(nodes), rnd.randrange(nodes))
            if k in edges:
                continue
            edges[k] = rnd.randrange(4)
            ops.append(("ins", [(*k, edges[k])]))
        else:
            ops.append(("dist", [(rnd.randrange(nodes), rnd.randrange(4))]))
    return ops


@pytest.mark.parametrize("seed", range(4))
def test_larger_random_graphs_with_cycles(seed: int) -> None:
    """Graphs of 40 nodes and ~120 edges: deletions reach deeper than hypothesis's."""
    run_both(random_ops(seed, 40, 60))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_larger_random_graphs_with_cycles_long(seed: int) -> None:
    run_both(random_ops(100 + seed, 120, 150))
