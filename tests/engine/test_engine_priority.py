"""Prioritized semi-naive evaluation (``Runtime.prioritize``): best-value-first processing of
``lmin``/``lmax`` deltas reaches the same fixpoint as plain semi-naive rounds and as textbook
algorithms, with no more relaxations; ineligible strata stay on the plain path; ticks stay
atomic."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, lmax, lmin, scratch, table
from blooml.engine.runtime import Runtime

N = 8
# weights include 0; self loops, cycles, parallel edges and unreachable nodes all occur
wedges = st.lists(st.tuples(st.integers(0, N - 1), st.integers(0, N - 1), st.integers(0, 9)))
batches = st.lists(wedges.map(lambda es: es[:15]), min_size=1, max_size=4)


@contextmanager
def prioritize(on: bool) -> Iterator[None]:
    old = Runtime.prioritize
    Runtime.prioritize = on
    try:
        yield
    finally:
        Runtime.prioritize = old


class Dist(Program):
    """Single-source shortest distances (``lmin``), the benchmark's shape."""

    source = table(["v"])
    link = table(["src", "dst", "c"])
    dist = table(["v"], ["d"])

    @bloom
    def rules(self):
        self.dist <= self.source.map(lambda s: (s.v, lmin(0)))
        self.dist <= self.dist.join(self.link, self.dist.v == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )


class AllPairs(Program):
    """All-pairs shortest paths keyed on two columns."""

    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
        self.path <= self.path.join(self.link, self.path.dst == self.link.src).map(
            lambda p, lk: (p.src, lk.dst, p.c + lk.c)
        )


class Widest(Program):
    """Widest (maximum-bottleneck) paths from a source (``lmax``)."""

    source = table(["v"])
    link = table(["src", "dst", "cap"])
    width = table(["v"], ["w"])

    @bloom
    def rules(self):
        self.width <= self.source.map(lambda s: (s.v, lmax(10**6)))
        self.width <= self.width.join(self.link, self.width.v == self.link.src).map(
            lambda w, lk: (lk.dst, w.w.min_of(lk.cap))
        )


class Far(Dist):
    """A non-monotone consumer (``notin`` reading distances) downstream of the fixpoint."""

    node = table(["v"])
    far = table(["v"])

    @bloom
    def report(self):
        self.far <= self.node.notin(
            self.dist, self.node.v == self.dist.v, lambda n, d: d.d.reveal() <= 6
        )


def dijkstra(edges, source):
    succ = defaultdict(list)
    for s, d, c in edges:
        succ[s].append((d, c))
    dist = {}
    heap = [(0, source)]
    while heap:
        dn, n = heapq.heappop(heap)
        if n in dist:
            continue
        dist[n] = dn
        for m, c in succ[n]:
            if m not in dist:
                heapq.heappush(heap, (dn + c, m))
    return dist


def bellman_ford_all_pairs(edges):
    best = {}
    for s, d, c in edges:
        best[(s, d)] = min(c, best.get((s, d), c))
    changed = True
    while changed:
        changed = False
        for (a, b), c in list(best.items()):
            for s, d, w in edges:
                if s == b and c + w < best.get((a, d), c + w + 1):
                    best[(a, d)] = c + w
                    changed = True
    return best


def widest(edges, source):
    top = 10**6
    width = {source: top}
    changed = True
    while changed:
        changed = False
        for s, d, c in edges:
            if s in width:
                w = min(width[s], c)
                if w > width.get(d, -1):
                    width[d] = w
                    changed = True
    return width


def run_dist(batches_, on, cls=Dist):
    with prioritize(on):
        p = cls()
        p.source.insert([(0,)])
        out = []
        for es in batches_:
            p.link.insert(es)
            p.tick()
            out.append({r.v: r.d.reveal() for r in p.dist})
        return p, out


@given(batches)
def test_sssp_prioritized_equals_plain_and_dijkstra(bs):
    _, got = run_dist(bs, True)
    _, plain = run_dist(bs, False)
    assert got == plain
    seen = []
    for es, g in zip(bs, got, strict=True):
        seen += es
        assert g == dijkstra(seen, 0)


@given(batches)
def test_all_pairs_prioritized_equals_plain_and_bellman_ford(bs):
    res = {}
    for on in (True, False):
        with prioritize(on):
            p = AllPairs()
            out = []
            for es in bs:
                p.link.insert(es)
                p.tick()
                out.append({(r.src, r.dst): r.c.reveal() for r in p.path})
            res[on] = out
    assert res[True] == res[False]
    seen = []
    for es, g in zip(bs, res[True], strict=True):
        seen += es
        assert g == bellman_ford_all_pairs(seen)


@given(batches)
def test_widest_paths_lmax(bs):
    res = {}
    for on in (True, False):
        with prioritize(on):
            p = Widest()
            p.source.insert([(0,)])
            out = []
            for es in bs:
                p.link.insert(es)
                p.tick()
                out.append({r.v: r.w.reveal() for r in p.width})
            res[on] = out
    assert res[True] == res[False]
    seen = []
    for es, g in zip(bs, res[True], strict=True):
        seen += es
        assert g == widest(seen, 0)


@given(batches)
def test_non_monotone_consumer_sees_final_values(bs):
    p, _ = run_dist(bs, True, Far)
    p.node.insert([(v,) for v in range(N)])
    p.tick()
    seen = [e for es in bs for e in es]
    d = dijkstra(seen, 0)
    assert {r.v for r in p.far} == {v for v in range(N) if d.get(v, 99) > 6}


def _relaxations(edges, on):
    calls = [0]

    class Counted(Program):
        source = table(["v"])
        link = table(["src", "dst", "c"])
        dist = table(["v"], ["d"])

        @bloom
        def rules(self):
            self.dist <= self.source.map(lambda s: (s.v, lmin(0)))
            self.dist <= self.dist.join(self.link, self.dist.v == self.link.src).map(
                lambda d, lk: calls.__setitem__(0, calls[0] + 1) or (lk.dst, d.d + lk.c)
            )

    with prioritize(on):
        p = Counted()
        p.source.insert([(0,)])
        p.link.insert(edges)
        p.tick()
    return calls[0], {r.v: r.d.reveal() for r in p.dist}


@settings(max_examples=30)
@given(wedges)
def test_prioritized_never_relaxes_more(es):
    n_on, d_on = _relaxations(es, True)
    n_off, d_off = _relaxations(es, False)
    assert d_on == d_off
    assert n_on <= n_off


def test_prioritized_relaxes_each_edge_once_where_plain_does_not():
    # a long cheap path and a short expensive one: plain rounds settle 3 twice
    es = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (0, 3, 10), (3, 4, 1), (4, 5, 1)]
    n_on, d = _relaxations(es, True)
    n_off, _ = _relaxations(es, False)
    assert d == dijkstra(es, 0)
    # each edge once, plus the source's two edges a second time: the first round evaluates the
    # recursive rule in full, and the source row it derived is still that round's delta
    assert n_on == len(es) + 2
    assert n_off > n_on


@pytest.mark.parametrize("incremental", [True, False])
def test_a_recursive_scratch_view_is_prioritized_like_a_table(incremental):
    """A scratch view of distances (re-derived by the reference every tick, and by the
    incremental engine when a retraction falls back) relaxes each edge once too: it was left
    on plain rounds, which settle 3 twice and everything below it twice."""
    calls = [0]

    class ScratchDist(Program):
        source = table(["v"])
        link = table(["src", "dst", "c"])
        dist = scratch(["v"], ["d"])

        @bloom
        def rules(self):
            self.dist <= self.source.map(lambda s: (s.v, lmin(0)))
            self.dist <= self.dist.join(self.link, self.dist.v == self.link.src).map(
                lambda d, lk: calls.__setitem__(0, calls[0] + 1) or (lk.dst, d.d + lk.c)
            )

    es = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (0, 3, 10), *((i, i + 1, 1) for i in range(3, 20))]
    p = ScratchDist(incremental=incremental)
    assert [r.name for r in p._rt.prio_heads[-1]] == ["dist"]
    p.source.insert([(0,)])
    p.link.insert(es)
    p.tick()
    assert {r.v: r.d.reveal() for r in p.dist} == dijkstra(es, 0)
    assert calls[0] == len(es) + 2  # as for a table (above); plain rounds: 37


def test_eligibility():
    assert [r.name for r in Dist()._rt.prio_heads[-1]] == ["dist"]
    assert [r.name for r in Widest()._rt.prio_heads[-1]] == ["width"]

    class Closure(Program):
        link = table(["a", "b"])
        path = table(["a", "b"])

        @bloom
        def rules(self):
            self.path <= self.link
            self.path <= self.path.join(self.link, self.path.b == self.link.a).map(
                lambda p, lk: (p.a, lk.b)
            )

    # every column a key: no value to order by
    assert not any(Closure()._rt.prio_heads)
    # the notin stratum of Far is not monotone; dist's stratum still is
    rt = Far()._rt
    by_stratum = [sorted(cr.rule.head for cr in s) for s in rt.strata]
    for heads, prio in zip(by_stratum, rt.prio_heads, strict=True):
        assert [r.name for r in prio] == (["dist"] if "dist" in heads else [])


def test_unorderable_values_fall_back_to_plain_rounds():
    class Mixed(Program):
        seed = table(["k"], ["v"])
        link = table(["a", "b"])
        best = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.best <= self.seed
            self.best <= self.best.join(self.link, self.best.k == self.link.a).map(
                lambda b, lk: (lk.b, b.v)
            )

    res = {}
    for on in (True, False):
        with prioritize(on):
            p = Mixed()
            p.seed.insert([(0, lmin(3)), (1, lmin("x")), (2, 7), (3, lmax(1))])
            p.link.insert([(0, 4), (1, 5), (2, 6), (3, 7), (4, 8)])
            p.tick()
            res[on] = {r.k: r.v for r in p.best}
    assert res[True] == res[False]
    assert res[True][8] == lmin(3) and res[True][5] == lmin("x") and res[True][6] == 7


def test_rule_raising_mid_fixpoint_rolls_back():
    boom = {"at": 5}

    class Fragile(Program):
        source = table(["v"])
        link = table(["src", "dst", "c"])
        dist = table(["v"], ["d"])

        @bloom
        def rules(self):
            self.dist <= self.source.map(lambda s: (s.v, lmin(0)))
            self.dist <= self.dist.join(self.link, self.dist.v == self.link.src).map(
                lambda d, lk: (lk.dst, d.d + lk.c) if lk.dst != boom["at"] else 1 / 0
            )

    es = [(0, 1, 1), (1, 2, 1), (2, 3, 1), (3, 4, 1), (4, 5, 1), (0, 2, 5)]
    p = Fragile()
    p.source.insert([(0,)])
    p.link.insert(es[:2])
    p.tick()
    before = sorted((r.v, r.d.reveal()) for r in p.dist)
    p.link.insert(es[2:])
    with pytest.raises(ZeroDivisionError):
        p.tick()
    assert sorted((r.v, r.d.reveal()) for r in p.dist) == before
    assert len(p.link) == 2
    boom["at"] = None
    p.link.insert(es[2:])
    p.tick()
    assert {r.v: r.d.reveal() for r in p.dist} == dijkstra(es, 0)


def test_switch_off_on_one_instance():
    es = [(0, 1, 4), (0, 2, 1), (2, 1, 1), (1, 3, 1)]
    p = Dist()
    p._rt.prioritize = False
    p.source.insert([(0,)])
    p.link.insert(es)
    p.tick()
    assert {r.v: r.d.reveal() for r in p.dist} == dijkstra(es, 0)


def test_lmin_and_lmax_with_equal_raw_values_share_a_bucket_safely():
    # lmin(3) and lmax(3) queue under the same raw value; later lmin/lmax values of other
    # sizes make the heap compare an lmin value with an lmax one: deferral stops, result holds
    class Mixed(Program):
        seed = table(["k"], ["v"])
        link = table(["a", "b"])
        best = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.best <= self.seed
            self.best <= self.best.join(self.link, self.best.k == self.link.a).map(
                lambda b, lk: (lk.b, b.v + 1)
            )

    res = {}
    for on in (True, False):
        with prioritize(on):
            p = Mixed()
            p.seed.insert([(0, lmin(3)), (1, lmax(3)), (2, lmax(9))])
            p.link.insert([(0, 3), (1, 4), (2, 5), (3, 6), (4, 7), (5, 8)])
            p.tick()
            res[on] = {r.k: r.v for r in p.best}
    assert res[True] == res[False]
    assert res[True][6] == lmin(5) and res[True][7] == lmax(5) and res[True][8] == lmax(11)
