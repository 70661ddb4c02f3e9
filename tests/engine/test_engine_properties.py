"""Algebraic claims, checked with hypothesis: semi-naive == naive, incremental == from scratch,
ticks are atomic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import KeyConstraintError, Program, bloom, count, lmin, lset, scratch, table

edges = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=25)
wedges = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 9)), max_size=20)


class TC(Program):
    edge = table(["a", "b"])
    path = table(["a", "b"])

    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )


def naive_tc(es):
    path = set(es)
    while True:
        new = path | {(a, d) for (a, b) in path for (c, d) in es if b == c}
        if new == path:
            return path
        path = new


@given(edges)
def test_semi_naive_equals_naive(es):
    p = TC()
    p.edge.insert(es)
    p.tick()
    assert {tuple(r) for r in p.path} == naive_tc(set(es))


@given(st.lists(edges, min_size=1, max_size=4))
def test_incremental_across_ticks_equals_from_scratch(batches):
    p = TC()
    seen: set[tuple[int, int]] = set()
    for b in batches:
        p.edge.insert(b)
        p.tick()
        seen |= set(b)
        assert {tuple(r) for r in p.path} == naive_tc(seen)


class SSSP(Program):
    edge = table(["a", "b"], ["w"])
    dist = table(["n"], ["d"])
    start = scratch(["n"])

    @bloom
    def rules(self):
        self.dist <= self.start.map(lambda s: (s.n, lmin(0)))
        self.dist <= self.dist.join(self.edge, self.dist.n == self.edge.a).map(
            lambda d, e: (e.b, d.d + e.w)
        )


def bellman_ford(es, src):
    dist = {src: 0}
    for _ in range(len(es) + 1):
        for a, b, w in es:
            if a in dist and dist[a] + w < dist.get(b, 1 << 60):
                dist[b] = dist[a] + w
    return dist


@given(wedges, st.lists(wedges, max_size=2))
def test_lattice_column_paths_equal_bellman_ford_incrementally(first, more):
    dedup = lambda es: list({(a, b): (a, b, w) for a, b, w in es}.values())  # noqa: E731
    p = SSSP()
    all_edges = dedup(first)
    p.edge.insert(all_edges)
    p.start.insert([(0,)])
    p.tick()
    for extra in more:
        have = {(a, b) for a, b, _ in all_edges}
        extra = [e for e in dedup(extra) if (e[0], e[1]) not in have]
        all_edges += extra
        p.edge.insert(extra)
        p.tick()
    got = {r.n: r.d.reveal() for r in p.dist}
    assert got == bellman_ford(all_edges, 0)


class Fragile(Program):
    inp = scratch(["k", "v"])
    t = table(["k"], ["v"])
    log = table(["k"])
    s = scratch(["k"])

    @bloom
    def rules(self):
        self.log <= self.inp.map(lambda r: (r.k,))
        self.s <= self.inp.map(lambda r: (r.k,))
        self.t <= self.inp.map(lambda r: (r.k, 1 // (r.v % 5)))
        self.t < +self.inp.map(lambda r: (r.k + "'", r.v))


def snapshot(p):
    return (
        {n: {tuple(r) for r in getattr(p, n)} for n in ("inp", "t", "log", "s")},
        p.tick_count,
    )


@settings(max_examples=40)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 9)), max_size=4), max_size=6)
)
def test_ticks_are_atomic(batches):
    """A failing tick (user code or key conflict, in a rule or in applying <+ facts) leaves
    every collection as it was; a twin fed only the successful batches agrees throughout."""
    p = Fragile()
    twin = Fragile()
    for b in batches:
        before = snapshot(p)
        p.inp.insert(b)
        try:
            p.tick()
        except (ZeroDivisionError, KeyConstraintError) as e:
            assert snapshot(p) == before
            assert any(n.startswith("blooml: ") for n in e.__notes__)
            with pytest.raises(type(e)):
                p.tick()  # the pending input was restored, so it fails the same way
            assert snapshot(p) == before
            return
        twin.inp.insert(b)
        twin.tick()
        assert snapshot(p) == snapshot(twin)


def test_failed_tick_keeps_pending_input_and_error_type():
    p = Fragile()
    p.inp.insert([("a", 5)])
    with pytest.raises(ZeroDivisionError) as ei:
        p.tick()
    assert any("rule 2" in n and "test_engine_properties.py:" in n for n in ei.value.__notes__)
    assert p.tick_count == 0 and len(p.t) == 0
    with pytest.raises(ZeroDivisionError):
        p.tick()  # the same pending input fails again: it was restored
    p2 = Fragile()
    p2.inp.insert([("a", 1)])
    p2.tick()
    p2.inp.insert([("b", 5)])
    with pytest.raises(ZeroDivisionError):
        p2.tick()
    assert {tuple(r) for r in p2.t} == {("a", 1)}
    assert {tuple(r) for r in p2.s} == {("a",)}  # the scratch still shows the last good tick
    pending = p2._rt.pending.inserts
    assert [tuple(r) for r in pending["t"]] == [("a'", 1)]  # the <+ facts wait, unchanged
    assert [tuple(r) for r in pending["inp"]] == [("b", 5)]


class Mixed(Program):
    """Persistent and scratch heads, joins, negation, aggregates, deletions, a lattice."""

    edge = table(["a", "b"])
    block = table(["a"])
    reach = table(["a", "b"])
    open_ = table(["a", "b"])
    deg = scratch(["a"], ["n"])
    low = scratch(["a", "b"])
    nodes = lset()
    later = table(["a", "b"])

    @bloom
    def rules(self):
        self.reach <= self.edge
        self.reach <= self.reach.join(self.edge, self.reach.b == self.edge.a).map(
            lambda r, e: (r.a, e.b)
        )
        self.open_ <= self.reach.notin(self.block, self.reach.a == self.block.a)
        self.deg <= self.edge.group(["a"], count())
        self.low <= self.edge.argmin(["a"], "b")
        self.nodes <= self.edge.map(lambda e: e.a)
        self.later < +self.open_.filter(lambda o: o.a < o.b)


def state(p):
    out = {n: {tuple(r) for r in getattr(p, n)} for n in ("reach", "open_", "deg", "low", "later")}
    out["nodes"] = p.nodes.value
    return out


ops = st.lists(
    st.tuples(
        st.sampled_from(["edge+", "edge-", "block+", "block-"]),
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=4),
    ),
    max_size=8,
)


@settings(max_examples=40)
@given(ops)
def test_incremental_ticks_equal_full_reevaluation(steps):
    """The engine's cross-tick incrementality (deltas, lazy indexes, skipped work) gives the
    same states as re-deriving every rule in full each tick (Bud's semantics)."""
    inc = Mixed()
    ref = Mixed()
    for op, rows in steps:
        for p in (inc, ref):
            coll = p.edge if op.startswith("edge") else p.block
            data = rows if op.startswith("edge") else [(a,) for a, _ in rows]
            (coll.insert if op.endswith("+") else coll.delete)(data)
        for cr in ref._rt.rules:
            cr.fresh = True  # the reference evaluates every rule in full
        inc.tick()
        ref.tick()
        assert state(inc) == state(ref)


@given(
    st.sampled_from(["lmin", "lmax"]),
    st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 5)), max_size=6), max_size=4),
)
def test_lattice_columns_hold_the_merge_of_everything_derived(kind, batches):
    from blooml import lmax

    cls = lmin if kind == "lmin" else lmax

    class P(Program):
        inp = scratch(["k", "v"])
        best = table(["k"], ["m"])

        @bloom
        def rules(self):
            self.best <= self.inp.map(lambda r: (r.k, cls(r.v)))

    p = P()
    want: dict[int, object] = {}
    for b in batches:
        p.inp.insert(b)
        p.tick()
        for k, v in b:
            want[k] = want[k].merge(cls(v)) if k in want else cls(v)
        assert {r.k: r.m for r in p.best} == want
