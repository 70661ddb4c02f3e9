"""The incremental core: a tick costs what changed, for every rule shape (issue 19).

Each shape is one small program whose head is a ``scratch``. The script loads N base rows
(N = 1,000, 10,000, 100,000), then runs ``--ticks`` ticks that each change one base row
(alternately an insert and a delete, or the shape's own kind of change: a ``<+-``
replacement, a soft-state expiry), and reports the median milliseconds per tick of the
incremental engine (``Program()``) and of the reference that re-derives everything every
tick (``Program(incremental=False)``), measured in the same run. After every tick both hold
the same rows, or the shape fails.

Targets (issue 19): per-tick time at N = 100,000 at most 2x that at N = 1,000 (recursive
reachability: 5x), and at most 1 ms at N = 100,000. Also printed: the bytes of state kept per
stored row (``Program.memory()``), against the reference's. Exit status 1 on a miss.

    python benchmarks/bench_incremental.py [--quick] [--ticks T] [--sizes 1000,100000]
"""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
# ruff: noqa: B015
from __future__ import annotations

import argparse
import gc
import heapq
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header

from blooml import Program, bloom, lmap, lmax, lmin, scratch, table
from blooml.bloom import count, max_, min_, sum_

GROUPS = 100  # distinct values of k: groups of N / 100 rows
TTL_TICKS = 200  # rows that expire one per timed tick (at most --ticks ticks are timed)
SCALE = 2.0
LIMIT_MS = 1.0


class Clock:
    """A clock the benchmark advances (soft state)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class MapShape(Program):
    items = table(["id"], ["k", "v"])
    out = scratch(["id", "k", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.map(lambda r: (r.id, r.k, r.v + 1))


class GroupShape(Program):
    items = table(["id"], ["k", "v"])
    out = scratch(["k"], ["n", "s", "lo", "hi"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.group(["k"], count(), sum_("v"), min_("v"), max_("v"))


class NotInShape(Program):
    items = table(["id"], ["k", "v"])
    gone = table(["id"])
    out = scratch(["id", "k", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.notin(self.gone, self.items.id == self.gone.id)


class ArgMinShape(Program):
    items = table(["id"], ["k", "v"])
    out = scratch(["id", "k", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.argmin(["k"], "v")


class JoinShape(Program):
    items = table(["id"], ["k", "v"])
    names = table(["k"], ["name"])
    out = scratch(["id", "name", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.join(self.names, self.items.k == self.names.k).map(
            lambda i, n: (i.id, n.name, i.v)
        )


class ReachShape(Program):
    edge = table(["src", "dst"])
    start = table(["n"])
    reach = scratch(["n"])

    @bloom
    def rules(self) -> None:
        self.reach <= self.start
        self.reach <= self.reach.join(self.edge, self.reach.n == self.edge.src).map(
            lambda r, e: (e.dst,)
        )


class TtlShape(Program):
    items = table(["id"], ["k", "v"], ttl=1000.0)
    out = scratch(["id", "k", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.items.map(lambda r: (r.id, r.k, r.v + 1))


class ReplaceShape(Program):
    items = table(["id"], ["k", "v"])
    upd = scratch(["id", "k", "v"])
    out = scratch(["k"], ["n", "s"])

    @bloom
    def rules(self) -> None:
        self.items < +-self.upd
        self.out <= self.items.group(["k"], count(), sum_("v"))


def item(i: int) -> tuple[int, int, int]:
    return (i, i % GROUPS, (i * 7919) % 1000)


Change = Callable[[Program, int, int], None]


def rows_load(p: Program, n: int) -> None:
    p.items.insert([item(i) for i in range(n)])  # type: ignore[attr-defined]


def rows_change(p: Program, n: int, t: int) -> None:
    """Tick t: insert a new row (even t) or delete the one inserted at t - 1 (odd t)."""
    i = n + t // 2
    if t % 2 == 0:
        p.items.insert([item(i)])  # type: ignore[attr-defined]
    else:
        p.items.delete([item(i)])  # type: ignore[attr-defined]


def notin_load(p: Program, n: int) -> None:
    rows_load(p, n)
    p.gone.insert([(i,) for i in range(0, n, 10)])  # type: ignore[attr-defined]


def notin_change(p: Program, n: int, t: int) -> None:
    """Both sides change: a row of items, then a row of gone (which hides, then shows again,
    one stored item: a one-row change of the output; its cost is per output row whose status
    changes, so a key matching m rows costs m)."""
    if t % 4 < 2:
        rows_change(p, n, t)
    elif t % 4 == 2:
        p.gone.insert([((t * 7919) % n | 1,)])  # type: ignore[attr-defined]
    else:
        p.gone.delete([(((t - 1) * 7919) % n | 1,)])  # type: ignore[attr-defined]


def join_load(p: Program, n: int) -> None:
    rows_load(p, n)
    p.names.insert([(k, f"name{k}") for k in range(GROUPS)])  # type: ignore[attr-defined]


def reach_load(p: Program, n: int) -> None:
    # a random tree of n nodes below node 0, plus n / 2 cross edges: every node reachable
    rnd = random.Random(7)
    edges = [(rnd.randrange(i), i) for i in range(1, n)]
    edges += [(rnd.randrange(n), rnd.randrange(n)) for _ in range(n // 2)]
    p.edge.insert(edges)  # type: ignore[attr-defined]
    p.start.insert([(0,)])  # type: ignore[attr-defined]


def reach_change(p: Program, n: int, t: int) -> None:
    """Insert, then delete, an edge to a new leaf below a random node."""
    leaf = n + t // 2
    parent = ((t // 2) * 7919) % n
    if t % 2 == 0:
        p.edge.insert([(parent, leaf)])  # type: ignore[attr-defined]
    else:
        p.edge.delete([(parent, leaf)])  # type: ignore[attr-defined]


def ttl_change(p: Program, n: int, t: int) -> None:
    """One row inserted per tick, and the clock moves so that one stored row expires."""
    p._blooml_clock.t = 1001.0 + t  # type: ignore[attr-defined]
    p.items.insert([item(n + t)])  # type: ignore[attr-defined]


def ttl_load(p: Program, n: int) -> None:
    """N rows stored at time 500 (they outlive the run), then one row a tick at times 1, 2,
    ...: from time 1001 on, one of those expires at every tick (the table's ttl is 1000)."""
    clock = p._blooml_clock  # type: ignore[attr-defined]
    few = TTL_TICKS
    clock.t = 500.0
    p.items.insert([item(i) for i in range(few, n)])  # type: ignore[attr-defined]
    p.tick()
    for i in range(few):
        clock.t = 1.0 + i
        p.items.insert([item(i)])  # type: ignore[attr-defined]
        p.tick()


def replace_change(p: Program, n: int, t: int) -> None:
    i = (t * 7919) % n
    p.upd.insert([(i, i % GROUPS, t)])  # type: ignore[attr-defined]


SHAPES: list[tuple[str, type[Program], Callable[[Program, int], None], Change, float]] = [
    ("map", MapShape, rows_load, rows_change, SCALE),
    ("group count/sum/min/max", GroupShape, rows_load, rows_change, SCALE),
    ("notin (both sides change)", NotInShape, notin_load, notin_change, SCALE),
    ("argmin", ArgMinShape, rows_load, rows_change, SCALE),
    ("join + map", JoinShape, join_load, rows_change, SCALE),
    ("recursive reachability", ReachShape, reach_load, reach_change, 5.0),
    ("TTL expiry", TtlShape, ttl_load, ttl_change, SCALE),
    ("<+- replacement", ReplaceShape, rows_load, replace_change, SCALE),
]


def contents(p: Program) -> dict[str, Any]:
    rt = p._rt
    return {n: sorted(map(tuple, r.store.values()), key=repr) for n, r in rt.rels.items()}


def worse_median(times: list[float]) -> float:
    """The larger of the medians of even and odd ticks: a shape whose inserts are cheap and
    deletes dear (or the reverse) is judged by the dearer kind, not by a median between."""
    return max(statistics.median(times[0::2]), statistics.median(times[1::2] or times))


def build(cls: type[Program], incremental: bool) -> Program:
    clock = Clock()
    p = cls(clock=clock, incremental=incremental)
    p._blooml_clock = clock  # type: ignore[attr-defined]
    return p


def run_shape(
    cls: type[Program],
    load: Callable[[Program, int], None],
    change: Change,
    n: int,
    ticks: int,
    ref_ticks: int,
) -> tuple[float, float, bool, float, float]:
    """(median ms per tick incremental, reference, equal at every compared tick, bytes per
    stored row incremental, reference)."""
    inc = build(cls, True)
    ref = build(cls, False)
    for p in (inc, ref):
        load(p, n)
        p.tick()
    same = contents(inc) == contents(ref)
    times: list[float] = []
    rtimes: list[float] = []
    gc.collect()
    for t in range(ticks):
        change(inc, n, t)
        t0 = time.perf_counter()
        inc.tick()
        times.append(time.perf_counter() - t0)
        if t < ref_ticks:
            change(ref, n, t)
            t0 = time.perf_counter()
            ref.tick()
            rtimes.append(time.perf_counter() - t0)
            if same and contents(inc) != contents(ref):
                same = False
    rows = max(1, sum(len(r.store) for r in inc._rt.rels.values()))
    mem_inc = inc._rt.memory()["total_bytes"] / rows
    mem_ref = ref._rt.memory()["total_bytes"] / rows
    return (
        worse_median(times) * 1000,
        worse_median(rtimes) * 1000,
        same,
        mem_inc,
        mem_ref,
    )


# -- issue 24: the shapes re-evaluated in full before, on random changes ------------------------
#
# Each program is loaded at two sizes (1,000 and 100,000 rows), incremental and reference, and
# the sizes are interleaved tick by tick; every changed row is drawn at random (a popped job is
# the queue's minimum, as a queue pops it). Per tick: process CPU time. Reported: median, 90th
# and 99th percentile of the incremental engine, and the reference's median, in the same run.
# Targets: median growth 1k -> 100k <= 2x; the 90th percentile at most the reference's median.


class PQShape(Program):
    """A priority queue: one group of every job, its best job (argmin) and its minimum."""

    jobs = table(["job"], ["prio"])
    best = scratch(["job"], ["prio"])
    lo = scratch([], ["prio"])

    @bloom
    def rules(self) -> None:
        self.best <= self.jobs.argmin([], "prio")
        self.lo <= self.jobs.group([], min_("prio"))


class LeftJoinShape(Program):
    """Orders left-joined with their customer (ten orders per customer)."""

    orders = table(["id"], ["cust", "v"])
    custs = table(["cust"], ["name"])
    out = scratch(["id", "name", "v"])

    @bloom
    def rules(self) -> None:
        self.out <= self.orders.leftjoin(self.custs, self.orders.cust == self.custs.cust).map(
            lambda o, c: (o.id, c.name if c else None, o.v)
        )


class LatViewShape(Program):
    """A view over an lmap lattice variable (one key per item, its largest value)."""

    items = table(["id", "v"])
    m = lmap()
    out = scratch(["id"], ["v"])

    @bloom
    def rules(self) -> None:
        self.m <= self.items.map(lambda r: (r.id, lmax(r.v)))
        self.out <= self.m.to_collection()


class NextFromScratchShape(Program):
    """``<+`` from a scratch view of every item into a table (a history)."""

    items = table(["id"], ["v"])
    view = scratch(["id", "v"])
    hist = table(["id", "v"])

    @bloom
    def rules(self) -> None:
        self.view <= self.items.map(lambda r: (r.id, r.v * 2))
        self.hist < +self.view


class DeleteFromScratchShape(Program):
    """``<-`` from a scratch view of a 100,000-row blocklist: a task whose id is blocked is
    deleted at the next tick."""

    tasks = table(["id"], ["v"])
    blocked = table(["id", "v"])
    view = scratch(["id", "v"])

    @bloom
    def rules(self) -> None:
        self.view <= self.blocked.map(lambda r: (r.id, r.v))
        self.tasks < -self.view


class UpsertFromScratchShape(Program):
    """``<+-`` from a scratch view of every item into a table (the latest value per id)."""

    items = table(["id"], ["v"])
    view = scratch(["id"], ["v"])
    latest = table(["id"], ["v"])

    @bloom
    def rules(self) -> None:
        self.view <= self.items.map(lambda r: (r.id, r.v * 2))
        self.latest < +-self.view


class _Workload:
    """One program at one size, incremental and reference, with its random changes."""

    def __init__(self, cls: type[Program], n: int, seed: int) -> None:
        self.n = n
        self.rnd = random.Random(seed)
        self.inc = cls()
        self.ref = cls(incremental=False)
        self.next_id = n  # ids of new rows

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def load(self) -> None:
        for p in (self.inc, self.ref):
            self.fill(p)
            p.tick()
            p.tick()  # the load's ``<+``/``<+-`` writes land here, not in the first timed tick

    def fill(self, p: Program) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def change(self) -> list[tuple[str, str, list[Any]]]:  # pragma: no cover - abstract
        """This tick's change: (collection, "insert" or "delete", rows), drawn at random."""
        raise NotImplementedError


class _PQ(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            self.prio = {j: self.rnd.random() for j in range(self.n)}
            self.heap = [(v, j) for j, v in self.prio.items()]
            heapq.heapify(self.heap)
        p.jobs.insert(list(self.prio.items()))  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        # pop the minimum (a priority queue serves its best job) and push a new random job
        v, j = heapq.heappop(self.heap)
        del self.prio[j]
        new = (self.new_id(), self.rnd.random())
        self.prio[new[0]] = new[1]
        heapq.heappush(self.heap, (new[1], new[0]))
        return [("jobs", "delete", [(j, v)]), ("jobs", "insert", [new])]


class _LeftJoin(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            nc = max(1, self.n // 10)
            self.orders = {i: (i, self.rnd.randrange(nc), i % 97) for i in range(self.n)}
            self.custs = {c: (c, f"c{c}") for c in range(nc) if self.rnd.random() < 0.9}
            self.nc = nc
        p.orders.insert(list(self.orders.values()))  # type: ignore[attr-defined]
        p.custs.insert(list(self.custs.values()))  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        r = self.rnd.random()
        if r < 0.25:  # a new order of a random customer
            i = self.new_id()
            row = self.orders[i] = (i, self.rnd.randrange(self.nc), 1)
            return [("orders", "insert", [row])]
        if r < 0.5:  # a random order leaves
            i = self.rnd.randrange(self.n)
            while i not in self.orders:
                i = self.rnd.randrange(self.n)
            return [("orders", "delete", [self.orders.pop(i)])]
        c = self.rnd.randrange(self.nc)  # a random customer appears or leaves
        if c in self.custs:
            return [("custs", "delete", [self.custs.pop(c)])]
        row = self.custs[c] = (c, f"c{c}")
        return [("custs", "insert", [row])]


class _LatView(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            self.top = {i: self.rnd.randrange(1000) for i in range(self.n)}
        p.items.insert(list(self.top.items()))  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        if self.rnd.random() < 0.5:  # a random key grows
            i = self.rnd.randrange(self.n)
            self.top[i] += 1 + self.rnd.randrange(100)
        else:  # a new key
            i = self.new_id()
            self.top[i] = self.rnd.randrange(1000)
        return [("items", "insert", [(i, self.top[i])])]


class _NextFromScratch(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            self.items = {i: (i, self.rnd.randrange(1000)) for i in range(self.n)}
        p.items.insert(list(self.items.values()))  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        if self.rnd.random() < 0.5:
            i = self.new_id()
            row = self.items[i] = (i, self.rnd.randrange(1000))
            return [("items", "insert", [row])]
        i = self.rnd.randrange(self.n)
        while i not in self.items:
            i = self.rnd.randrange(self.n)
        return [("items", "delete", [self.items.pop(i)])]


class _DeleteFromScratch(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            self.blocked = {i: (i, 0) for i in range(0, 2 * self.n, 2)}  # the even ids
        p.blocked.insert(list(self.blocked.values()))  # type: ignore[attr-defined]
        p.tasks.insert([(i, 0) for i in range(1, 2 * self.n, 2)])  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        i = self.rnd.randrange(2 * self.n)
        r = self.rnd.random()
        if r < 0.5:  # a new task: deleted at the next tick when its id is blocked
            return [("tasks", "insert", [(self.new_id() * 2 + (i & 1), 0)])]
        if r < 0.75:  # a random id is blocked
            row = self.blocked[i] = (i, 0)
            return [("blocked", "insert", [row])]
        j = self.rnd.randrange(0, 2 * self.n, 2)  # a random even id is unblocked (or blocked)
        if j in self.blocked:
            return [("blocked", "delete", [self.blocked.pop(j)])]
        row = self.blocked[j] = (j, 0)
        return [("blocked", "insert", [row])]


class _UpsertFromScratch(_Workload):
    def fill(self, p: Program) -> None:
        if p is self.inc:
            self.items = {i: (i, self.rnd.randrange(1000)) for i in range(self.n)}
        p.items.insert(list(self.items.values()))  # type: ignore[attr-defined]

    def change(self) -> list[tuple[str, str, list[Any]]]:
        r = self.rnd.random()
        if r < 0.25:  # a new item
            i = self.new_id()
            row = self.items[i] = (i, self.rnd.randrange(1000))
            return [("items", "insert", [row])]
        i = self.rnd.choice(list(self.items)) if len(self.items) < 64 else -1
        while i not in self.items:
            i = self.rnd.randrange(self.next_id + 1)
        old = self.items.pop(i)
        if r < 0.4:  # a random item leaves (its latest value stays)
            return [("items", "delete", [old])]
        row = self.items[i] = (i, self.rnd.randrange(1000))  # a random item's value changes
        return [("items", "delete", [old]), ("items", "insert", [row])]


SHAPES24: list[tuple[str, type[Program], type[_Workload]]] = [
    ("priority queue: pop the min", PQShape, _PQ),
    ("leftjoin", LeftJoinShape, _LeftJoin),
    ("lattice variable view", LatViewShape, _LatView),
    ("<+ from a scratch", NextFromScratchShape, _NextFromScratch),
    ("<- from a scratch", DeleteFromScratchShape, _DeleteFromScratch),
    ("<+- from a scratch", UpsertFromScratchShape, _UpsertFromScratch),
]


# -- recursion under change on random graphs (issue 24) ---------------------------------------
#
# A random directed graph of n nodes and 2n edges (weights 1..10, root 0): reachability as a
# Bloom^L view and as a Datalog view, and ``lmin`` shortest distances. Each cycle of changes
# deletes an edge drawn at random among all edges, re-inserts it at the next tick (the insert
# right after a delete), inserts a new random edge, and deletes another random edge. A delete
# of the distances is filed "on" when the edge is on a shortest path (d[src] + w = d[dst]),
# "off" otherwise; both are drawn the same way, neither is chosen. The reference
# (``Program(incremental=False)``, ``Datalog.evaluate``) runs the same changes, fewer of them
# at the large size (it re-derives the view every tick), and the rows are compared. Times are
# CPU time of this process (``time.process_time``): on a shared machine, wall time counts the
# waits for a core, which dwarf a 0.05 ms tick.

GRAPH_SIZES = ((500, 1000), (50_000, 100_000))
REC_SCALE = 5.0


class GraphReach(Program):
    edge = table(["src", "dst"], ["w"])
    root = table(["n"])
    reach = scratch(["n"])

    @bloom
    def rules(self) -> None:
        self.reach <= self.root
        self.reach <= self.reach.join(self.edge, self.reach.n == self.edge.src).map(
            lambda r, e: (e.dst,)
        )


class GraphPaths(Program):
    edge = table(["src", "dst"], ["w"])
    root = table(["n"])
    d = scratch(["n"], ["d"])

    @bloom
    def rules(self) -> None:
        self.d <= self.root.map(lambda r: (r.n, lmin(0)))
        self.d <= self.d.join(self.edge, self.d.n == self.edge.src).map(
            lambda a, e: (e.dst, a.d + e.w)
        )


def random_graph(n: int, m: int, rnd: random.Random) -> dict[tuple[int, int], int]:
    edges: dict[tuple[int, int], int] = {}
    while len(edges) < m:
        a, b = rnd.randrange(n), rnd.randrange(n)
        if a != b:
            edges.setdefault((a, b), rnd.randint(1, 10))
    return edges


def graph_changes(
    edges: dict[tuple[int, int], int], n: int, cycles: int, rnd: random.Random
) -> list[tuple[str, tuple[int, int, int]]]:
    """``(kind, (src, dst, w))``: kind "delete" (random among all edges), "reinsert" (the
    edge just deleted, at the next tick), "insert" (a new random edge)."""
    live = dict(edges)
    keys = list(live)
    out: list[tuple[str, tuple[int, int, int]]] = []

    def delete() -> tuple[int, int, int]:
        i = rnd.randrange(len(keys))
        keys[i], keys[-1] = keys[-1], keys[i]
        k = keys.pop()
        return (*k, live.pop(k))

    for _ in range(cycles):
        e = delete()
        out += [("delete", e), ("reinsert", e)]
        live[e[:2]] = e[2]
        keys.append(e[:2])
        while True:
            k = (rnd.randrange(n), rnd.randrange(n))
            if k[0] != k[1] and k not in live:
                break
        live[k] = rnd.randint(1, 10)
        keys.append(k)
        out.append(("insert", (*k, live[k])))
        out.append(("delete", delete()))
    return out


def random_tree(n: int, rnd: random.Random) -> dict[tuple[int, int], int]:
    """A random recursive tree rooted at 0 (node i's parent drawn among 0..i-1): the root's
    first children head about half the tree, its later ones less."""
    return {(rnd.randrange(i), i): rnd.randint(1, 10) for i in range(1, n)}


def root_cuts(
    edges: dict[tuple[int, int], int], cycles: int, rnd: random.Random
) -> list[tuple[str, tuple[int, int, int]]]:
    """The adversarial changes: delete an edge out of the root, drawn at random (it cuts off
    its subtree), and re-insert it at the next tick. Every third cycle cuts a second edge
    out of the root right after the first ("a cut right after a cut": no tick between runs
    the unit, so it pays what the first cut's fallback left to do), then re-inserts both."""
    out: list[tuple[str, tuple[int, int, int]]] = []
    roots = sorted(k for k in edges if k[0] == 0)
    for i in range(cycles):
        k = rnd.choice(roots)
        out.append(("cut at the root", (*k, edges[k])))
        if i % 3 == 2 and len(roots) > 1:
            j = rnd.choice([r for r in roots if r != k])
            out += [
                ("a cut right after a cut", (*j, edges[j])),
                ("re-insert the cut", (*j, edges[j])),
            ]
        out.append(("re-insert the cut", (*k, edges[k])))
    return out


def interior_cuts(
    edges: dict[tuple[int, int], int], cycles: int, rnd: random.Random
) -> list[tuple[str, tuple[int, int, int]]]:
    """The case beside the adversarial one: cut the edge into a node drawn at random (most
    subtrees are small, a few large), and re-insert it at the next tick."""
    out: list[tuple[str, tuple[int, int, int]]] = []
    keys = sorted(edges)
    for _ in range(cycles):
        k = rnd.choice(keys)
        out += [("cut at a random node", (*k, edges[k])), ("re-insert the cut", (*k, edges[k]))]
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _cpu_tick(p: Program) -> float:
    t0 = time.process_time()
    p.tick()
    return (time.process_time() - t0) * 1000


def run_shape24(
    cls: type[Program], work: type[_Workload], sizes: list[int], ticks: int, ref_ticks: int
) -> tuple[dict[int, list[float]], dict[int, list[float]], bool]:
    """Per size: the incremental ticks' and the reference's CPU ms; whether they agreed."""
    ws = [work(cls, n, seed=n) for n in sizes]
    for w in ws:
        w.load()
    inc: dict[int, list[float]] = {n: [] for n in sizes}
    ref: dict[int, list[float]] = {n: [] for n in sizes}
    same = True
    gc.collect()
    for t in range(ticks):
        for w in ws:  # sizes interleaved tick by tick
            ch = w.change()
            both = t < ref_ticks
            for p in (w.inc, w.ref) if both else (w.inc,):
                for name, op, rows in ch:
                    getattr(getattr(p, name), op)(rows)
            inc[w.n].append(_cpu_tick(w.inc))
            if both:
                ref[w.n].append(_cpu_tick(w.ref))
                same = same and contents(w.inc) == contents(w.ref)
    return inc, ref, same


def shapes24(args: argparse.Namespace, v: Verdicts) -> None:
    """The issue-24 section (see the comment above ``PQShape``)."""
    sizes = [1000, 100_000] if not args.quick else [1000, 10_000]
    ticks = 60 if args.quick else 200
    ref_ticks = 8 if args.quick else 15
    print()
    print(
        f"   {'issue 24 shape':28} {'N':>7} {'median':>8} {'p90':>8} {'p99':>8} "
        f"{'ref med':>9} {'ref/med':>8}   (CPU ms per tick)"
    )
    for name, cls, work in SHAPES24:
        if args.only and args.only not in name:
            continue
        inc, ref, same = run_shape24(cls, work, sizes, ticks, ref_ticks)
        med = {n: statistics.median(inc[n]) for n in sizes}
        for n in sizes:
            rmed = statistics.median(ref[n])
            print(
                f"   {name:28} {n:>7} {med[n]:>8.3f} {pct(inc[n], 0.9):>8.3f} "
                f"{pct(inc[n], 0.99):>8.3f} {rmed:>9.3f} {rmed / med[n]:>8.1f}"
            )
        lo, hi = sizes[0], sizes[-1]
        v.check(f"{name}: equal to the reference", same, "every compared tick")
        v.check(
            f"{name}: median growth",
            med[hi] <= SCALE * med[lo],
            f"{med[hi]:.3f} ms at N={hi} / {med[lo]:.3f} ms at N={lo} = "
            f"{med[hi] / med[lo]:.2f} (<= {SCALE})",
        )
        for n in sizes:
            p90, rmed = pct(inc[n], 0.9), statistics.median(ref[n])
            v.check(
                f"{name}: p90 at N={n}",
                p90 <= rmed,
                f"{p90:.3f} ms (<= the reference's median, {rmed:.3f} ms)",
            )


_GONE = ("delete", "cut at the root", "cut at a random node", "a cut right after a cut")


def apply_change(p: Any, kind: str, e: tuple[int, int, int]) -> None:
    gone = kind in _GONE
    if isinstance(p, Program):
        (p.edge.delete if gone else p.edge.insert)([e])  # type: ignore[attr-defined]
    elif gone:
        p.update(None, {"edge": [e[:2]]})
    else:
        p.update({"edge": [e[:2]]})


def datalog_reach() -> Any:
    from blooml.dataflow import Datalog

    dl = Datalog()
    edge, root, reach = dl.relation("edge", 2), dl.relation("root", 1), dl.relation("reach", 1)
    x, y = Datalog.vars("x y")
    dl.rule(reach(x), root(x))
    dl.rule(reach(y), reach(x), edge(x, y))
    return dl


def _fallbacks(rt: Any) -> int:
    """Retractions of the runtime's recursive units that fell back to re-deriving."""
    return sum(u.dred.fallbacks for us in rt.units for u in us if u.dred is not None)


def run_graph_shape(
    shape: str, n: int, m: int, cycles: int, ref_cycles: int, tree: str = "", seed: int = 24
) -> tuple[dict[str, list[float]], dict[str, list[float | None]], dict[str, int], bool]:
    """Per kind of change: the incremental engine's ms per tick, the reference's on the
    same change (None where it did not run), and the ticks on which the incremental engine
    fell back to re-deriving; whether both held the same rows at every compared tick. The
    reference runs the first ``4 * ref_cycles`` changes, and then every change on which the
    incremental engine fell back or spent more than half the reference's median (it catches
    up with the changes it skipped first, in one tick: it re-derives the view anyway).
    ``tree``: "root", the adversarial workload (a random tree cut at the root), or
    "interior" (cut at a random node), instead of random changes to a random graph."""
    rnd = random.Random(seed)
    if tree:
        edges = random_tree(n, rnd)
        cuts = root_cuts if tree == "root" else interior_cuts
        changes = cuts(edges, cycles // 2, rnd)
    else:
        edges = random_graph(n, m, rnd)
        changes = graph_changes(edges, n, cycles, rnd)
    rows = [(*k, w) for k, w in edges.items()]
    times: dict[str, list[float]] = {}
    rtimes: dict[str, list[float | None]] = {}
    fell: dict[str, int] = {}
    same = True
    ref_seen: list[float] = []

    def dear(ms: float, fell: bool) -> bool:
        return fell or (bool(ref_seen) and ms > 0.5 * statistics.median(ref_seen))

    if shape == "datalog reachability":
        dl = datalog_reach()
        inc: Any = dl.compile()
        inc.update({"edge": [r[:2] for r in rows], "root": [(0,)]})
        facts = {r[:2] for r in rows}
        gc.collect()
        for i, (kind, e) in enumerate(changes):
            fb = _fallbacks(inc._rt)
            t0 = time.process_time()
            apply_change(inc, kind, e)
            ms = (time.process_time() - t0) * 1000
            times.setdefault(kind, []).append(ms)
            (facts.discard if kind in _GONE else facts.add)(e[:2])
            r_ms = None
            fb = _fallbacks(inc._rt) - fb
            fell[kind] = fell.get(kind, 0) + fb
            if i < 4 * ref_cycles or dear(ms, fb > 0):
                t0 = time.process_time()
                want = dl.evaluate({"edge": facts, "root": {(0,)}})
                r_ms = (time.process_time() - t0) * 1000
                ref_seen.append(r_ms)
                same = same and set(inc["reach"]) == want["reach"]
            rtimes.setdefault(kind, []).append(r_ms)
        return times, rtimes, fell, same
    cls = GraphPaths if shape == "lmin shortest paths" else GraphReach
    inc = cls()
    ref = cls(incremental=False)
    for p in (inc, ref):
        p.edge.insert(rows)  # type: ignore[attr-defined]
        p.root.insert([(0,)])  # type: ignore[attr-defined]
        p.tick()
    dist = inc._rt.rels["d"].store if cls is GraphPaths else None
    now = set(rows)  # the edges after the changes so far, and those the reference holds
    ref_has = set(rows)
    gc.collect()
    for i, (kind, e) in enumerate(changes):
        label = kind
        if dist is not None and kind == "delete":
            a, b = dist.get(e[0]), dist.get(e[1])
            on = a is not None and b is not None and a[1].reveal() + e[2] == b[1].reveal()
            label = "delete on a shortest path" if on else "delete off shortest paths"
        apply_change(inc, kind, e)
        (now.discard if kind in _GONE else now.add)(e)
        fb = _fallbacks(inc._rt)
        t0 = time.process_time()
        inc.tick()
        ms = (time.process_time() - t0) * 1000
        times.setdefault(label, []).append(ms)
        r_ms = None
        fb = _fallbacks(inc._rt) - fb
        fell[label] = fell.get(label, 0) + fb
        if i < 4 * ref_cycles or dear(ms, fb > 0):
            # the changes the reference skipped, and this one: it re-derives the view from
            # the same edges as the incremental engine, whatever led there
            ref.edge.delete(list(ref_has - now))  # type: ignore[attr-defined]
            ref.edge.insert(list(now - ref_has))  # type: ignore[attr-defined]
            ref_has = set(now)
            t0 = time.process_time()
            ref.tick()
            r_ms = (time.process_time() - t0) * 1000
            ref_seen.append(r_ms)
            if n <= 1000 or i >= 4 * ref_cycles - 1:
                same = same and contents(inc) == contents(ref)
        rtimes.setdefault(label, []).append(r_ms)
    return times, rtimes, fell, same


GRAPH_SHAPES = ("reachability", "datalog reachability", "lmin shortest paths")


#: No tick of a recursive workload may cost more than re-deriving (the reference's tick on
#: the same change; past the ticks it ran, its worst) times this, plus ``WORST_MS``:
#: the budget (``DRed.limit_share``, 1/16 of a re-derivation while the checks find nothing,
#: growing to ``DRed.limit_share_found``, a half, under ``DRed.limit_fallback``'s cap, as they
#: find derivations) bounds what a retraction spends before it falls back, and the fallback
#: costs about one re-derivation plus its own fixed cost (ranking the rows it derives),
#: which dominates a tiny view.
WORST_RATIO = 1.5
WORST_MS = 1.0


def run_recursion(args: Any, v: Verdicts) -> None:
    """The recursive shapes on random graphs (see the section's comment), and the
    adversarial workload beside them: a random tree cut at the root, and the case beside
    that one: the same tree cut at a random node."""
    cycles = 30 if args.quick else 60
    sizes = (GRAPH_SIZES[0], (5000, 10_000)) if args.quick else GRAPH_SIZES
    print(
        f"\n   recursion on random graphs: {cycles} cycles of (delete, re-insert, insert, delete)"
        " per size; and a random tree of as many nodes, an edge out of its root (or into a"
        " random node) cut and re-inserted (every third root cut followed at once by a second one);"
        " CPU ms per tick; ref = re-deriving (fewer ticks"
        " at the large size);"
        " max/ref = the worst tick over the reference's median, max/rmax over its worst,"
        " worst/same = the largest ratio of a tick to the reference's on the same change"
        " (the tree's every tick is also re-derived; the random graph's first ticks, and every"
        " tick that fell back or cost over half the reference's median),"
        " fb = the ticks that fell back to re-deriving"
    )
    print(
        f"   {'shape':22} {'change':26} {'nodes':>6} {'n':>4} {'median':>8} {'p90':>8} "
        f"{'p99':>8} {'max':>8} {'ref n':>5} {'ref med':>8} {'ref/med':>8} {'max/ref':>8} "
        f"{'max/rmax':>8} {'worst/same':>10} {'fb':>3}"
    )
    for shape in GRAPH_SHAPES:
        if args.only and args.only not in shape:
            continue
        meds: dict[str, dict[int, float]] = {}
        for n, m in sizes:
            for tree in ("", "root", "interior"):
                ref_cycles = cycles if n <= 1000 or tree else 3
                times, rtimes, fell, same = run_graph_shape(
                    shape, n, m, cycles, ref_cycles, tree, args.seed
                )
                what = f"a tree cut at {'the root' if tree == 'root' else 'a node'}"
                what = what if tree else "a random graph"
                v.check(f"{shape} on {what} of {n}: equal to the reference", same, "compared ticks")
                ref_all = [x for xs in rtimes.values() for x in xs if x is not None]
                ref_med, ref_max = statistics.median(ref_all), max(ref_all)
                for kind in sorted(times):
                    xs = times[kind]
                    med, p90, p99, top = (
                        statistics.median(xs),
                        pct(xs, 0.9),
                        pct(xs, 0.99),
                        max(xs),
                    )
                    # the ticks the reference ran on the same change (the first ones, and
                    # every fallback or dear tick after them), paired; the others against
                    # its worst
                    pairs = [(a, b) for a, b in zip(xs, rtimes[kind], strict=True) if b is not None]
                    rs = [b for _, b in pairs]
                    rmed = statistics.median(rs) if rs else ref_med
                    if not tree:
                        meds.setdefault(kind, {})[n] = med
                    same_t = max((a / b for a, b in pairs), default=float("nan"))
                    print(
                        f"   {shape:22} {kind:26} {n:>6} {len(xs):>4} {med:>8.3f} {p90:>8.3f} "
                        f"{p99:>8.3f} {top:>8.3f} {len(rs):>5} {rmed:>8.3f} {rmed / med:>8.1f} "
                        f"{top / ref_med:>8.2f} {top / ref_max:>8.2f} {same_t:>10.2f} "
                        f"{fell.get(kind, 0):>3}"
                    )
                    bad = [(a, b) for a, b in pairs if a > WORST_RATIO * b + WORST_MS]
                    alone = [a for a, b in zip(xs, rtimes[kind], strict=True) if b is None]
                    rest = max(alone, default=0.0)
                    v.check(
                        f"{shape}, {kind} at {n} nodes: no tick dearer than re-deriving",
                        not bad and rest <= WORST_RATIO * ref_max + WORST_MS,
                        f"each of {len(pairs)} ticks <= {WORST_RATIO} x the reference's on it + "
                        f"{WORST_MS} ms"
                        + (f" (missed: {bad[0][0]:.3f} vs {bad[0][1]:.3f} ms)" if bad else "")
                        + (
                            f", the {len(alone)} others <= {WORST_RATIO} x its worst "
                            f"({rest:.3f} vs {ref_max:.3f} ms)"
                            if alone
                            else ""
                        ),
                    )
                    if n == sizes[-1][0] and not tree:
                        v.check(
                            f"{shape}, {kind}: p90 below the reference's median",
                            p90 <= ref_med,
                            f"{p90:.3f} ms vs {ref_med:.3f} ms (all reference ticks)",
                        )
        lo, hi = sizes[0][0], sizes[-1][0]
        for kind, per in meds.items():
            if lo in per and hi in per:
                v.check(
                    f"{shape}, {kind}: median growth",
                    per[hi] <= REC_SCALE * max(per[lo], 0.05),
                    f"{per[hi]:.3f} ms at {hi} nodes / {per[lo]:.3f} ms at {lo} = "
                    f"{per[hi] / per[lo]:.2f} (<= {REC_SCALE}; 1k side floored at 0.05 ms)",
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 1,000 and 10,000, fewer ticks")
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--sizes", default="")
    ap.add_argument("--only", default="", help="run the shapes whose name contains this")
    ap.add_argument(
        "--section",
        default="",
        help="run one section: 'issue19', 'issue24' or 'recursion' (default: all)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=24,
        help="the random graphs and changes of the recursion section (default: 24)",
    )
    ap.add_argument(
        "--recursion",
        choices=("with", "only", "without"),
        default="with",
        help="the recursive shapes on random graphs (issue 24): with the others, alone, or not",
    )
    args = ap.parse_args()
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    ticks = min(TTL_TICKS, 60 if args.quick else args.ticks)
    header(
        "incremental core: one changed row per tick, median ms (the dearer of even/odd ticks)",
        {"sizes": sizes, "ticks": ticks, "targets": "100k/1k <= 2 (reach: 5), <= 1 ms at 100k"},
    )
    v = Verdicts()
    print(
        f"   {'shape':28} {'N':>7} {'incr ms':>9} {'ref ms':>9} {'ref/incr':>9} "
        f"{'B/row':>7} {'ref B/row':>9}"
    )
    for name, cls, load, change, scale in SHAPES:
        if args.recursion == "only" or args.section not in ("", "issue19"):
            break
        if args.only and args.only not in name:
            continue
        per: dict[int, float] = {}
        equal = True
        worst_mem = 0.0
        for n in sizes:
            ref_ticks = max(6, min(ticks, 2_000_000 // (n * 10)))
            ms, rms, same, mb, rmb = run_shape(cls, load, change, n, ticks, ref_ticks)
            per[n] = ms
            equal = equal and same
            worst_mem = max(worst_mem, mb / max(rmb, 1.0))
            print(
                f"   {name:28} {n:>7} {ms:>9.3f} {rms:>9.3f} {rms / ms:>9.1f} "
                f"{mb:>7.0f} {rmb:>9.0f}"
            )
        lo, hi = min(sizes), max(sizes)
        v.check(f"{name}: equal to the reference", equal, "every compared tick")
        v.check(
            f"{name}: growth",
            per[hi] <= scale * per[lo],
            f"{per[hi]:.3f} ms at N={hi} / {per[lo]:.3f} ms at N={lo} = "
            f"{per[hi] / per[lo]:.2f} (<= {scale})",
        )
        if hi >= 100_000:
            v.check(f"{name}: time", per[hi] <= LIMIT_MS, f"{per[hi]:.3f} ms (<= {LIMIT_MS})")
        v.check(f"{name}: memory", worst_mem <= 3.0, f"{worst_mem:.2f}x the reference (<= 3)")
    if args.recursion != "only" and args.section in ("", "issue24"):
        shapes24(args, v)
    if args.recursion != "without" and args.section in ("", "recursion"):
        run_recursion(args, v)
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
