"""Issue 24's remaining shapes cost what changed: the work a tick does is counted (comparisons,
``combine`` calls, rows re-derived), never timed, and the rows are the reference's."""

from __future__ import annotations

import math
import operator
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, count, lmap, lmax, lset, min_, scratch, table
from blooml.engine import _zfold
from blooml.engine._zfold import ZLatRows, ZReduce
from blooml.engine._zops import ZLeftJoin

# the benchmark's issue-24 programs, tested here for what their ticks do (counted, not timed)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_incremental

History = bench_incremental.NextFromScratchShape  # ``hist <+ view``, a history of items
Blocked = bench_incremental.DeleteFromScratchShape  # ``tasks <- view`` of a blocklist


class Prio:
    """A priority that counts the comparisons made of it."""

    compared = 0

    def __init__(self, v: int) -> None:
        self.v = v

    def __lt__(self, other: Prio) -> bool:
        Prio.compared += 1
        return self.v < other.v

    def __gt__(self, other: Prio) -> bool:
        Prio.compared += 1
        return self.v > other.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Prio) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"Prio({self.v})"


class Queue(Program):
    jobs = table(["user", "job"], ["prio"])
    best = scratch(["user", "job"], ["prio"])
    lo = scratch(["user"], ["prio"])

    @bloom
    def rules(self) -> None:
        self.best <= self.jobs.argmin(["user"], "prio")
        self.lo <= self.jobs.group(["user"], min_("prio"))


@pytest.mark.parametrize("n", [256, 4096])
def test_popping_the_minimum_of_a_large_group_costs_log_n_comparisons(n: int) -> None:
    """A priority queue: the best job leaves, the next best is found without scanning the
    group (argmin and min_ both)."""
    p = Queue()
    order = list(range(n))
    random.Random(n).shuffle(order)
    p.jobs.insert([("u", j, Prio(j)) for j in order])
    p.tick()
    costs = []
    for j in range(20):
        p.jobs.delete([("u", j, Prio(j))])
        Prio.compared = 0
        p.tick()
        costs.append(Prio.compared)
        assert [r.job for r in p.best] == [j + 1]
        assert [r.prio for r in p.lo] == [Prio(j + 1)]
    # amortized: a heap pop is ~2 log2(n) comparisons, per structure (argmin and min_)
    assert sum(costs) / len(costs) <= 8 * math.log2(n) + 16, costs


class View(Program):
    src = table(["k", "v"])
    tags = lset()
    m = lmap()
    out_tags = scratch(["x"])
    out_m = scratch(["k"], ["v"])
    out_odd = scratch(["k"], ["v"])

    @bloom
    def rules(self) -> None:
        self.tags <= self.src.map(lambda r: (r.k,))
        self.m <= self.src.map(lambda r: (r.k, lmax(r.v)))
        self.out_tags <= self.tags.to_collection()
        self.out_m <= self.m.to_collection()
        self.out_odd <= self.m.to_collection(lambda k, v: (k, v) if k % 2 else None)


def test_a_lattice_variable_view_changes_by_the_growth(monkeypatch: Any) -> None:
    p = View()
    p.src.insert([(k, k) for k in range(2000)])
    p.tick()
    for i in (2, 3, 4):
        assert isinstance(p._rt.rules[i].zbody, ZLatRows)
    calls = []
    real = _zfold.as_rows
    monkeypatch.setattr(_zfold, "as_rows", lambda v: calls.append(v) or real(v))
    p.src.insert([(5, 100), (5000, 1)])  # key 5 grows, key 5000 is new
    p.tick()
    assert calls == []  # no value listed in full: the increments were read
    assert (5, lmax(100)) in set(map(tuple, p.out_odd))
    assert (5, lmax(5)) not in set(map(tuple, p.out_odd))
    assert len(p.out_odd) == 1000
    assert (5, lmax(100)) in set(map(tuple, p.out_m))
    assert (5, lmax(5)) not in set(map(tuple, p.out_m))
    assert (5000,) in set(map(tuple, p.out_tags))
    assert len(p.out_m) == 2001 and len(p.out_tags) == 2001


class Summed(Program):
    src = table(["k"], ["v"])
    total = scratch(["s"])

    @bloom
    def rules(self) -> None:
        self.total <= self.src.reduce(0, lambda m, r: m + r.v, combine=self.add)

    @staticmethod
    def add(a: int, b: int) -> int:
        Summed.combined += 1
        return a + b

    combined = 0


@pytest.mark.parametrize("n", [1000, 16000])
def test_a_declared_reduce_costs_log_n_combines_per_changed_row(n: int) -> None:
    p = Summed()
    p.src.insert([(k, k) for k in range(n)])
    p.tick()
    assert isinstance(p._rt.rules[0].zbody, ZReduce)
    for k in range(10):
        p.src.delete([(k, k)])
        Summed.combined = 0
        p.tick()
        assert Summed.combined <= math.log2(n) + 2
    assert list(p.total) == [(sum(range(10, n)),)]


def test_reduce_without_combine_is_the_same_operator_as_before() -> None:
    class Plain(Program):
        src = table(["k"], ["v"])
        total = scratch(["s"])

        @bloom
        def rules(self) -> None:
            self.total <= self.src.reduce(0, lambda m, r: m + r.v)

    p = Plain()
    p.tick()
    assert not isinstance(p._rt.rules[0].zbody, ZReduce)
    assert "combine" not in repr(Plain.ir().rules[0])
    assert "combine=add" in repr(Summed.ir().rules[0])


def test_reduce_combine_must_be_a_function() -> None:
    from blooml import ProgramError

    with pytest.raises(ProgramError, match=r"reduce\(combine=...\) expects a function, got 3"):

        class Bad(Program):
            src = table(["k"])
            out = scratch(["s"])

            @bloom
            def rules(self) -> None:
                self.out <= self.src.reduce(0, lambda m, r: m + 1, combine=3)

        Bad.ir()


class Outer(Program):
    a = table(["x", "y"])
    b = table(["y", "z"])
    out = scratch(["x", "y", "z"])

    @bloom
    def rules(self) -> None:
        self.out <= self.a.leftjoin(self.b, self.a.y == self.b.y).map(
            lambda p, q: (p.x, p.y, q.z if q else None)
        )


def test_a_left_join_of_scans_is_maintained() -> None:
    p = Outer()
    p.tick()
    assert isinstance(p._rt.rules[0].zbody.inp, ZLeftJoin)  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["ins_a", "del_a", "ins_b", "del_b"]),
            st.tuples(st.integers(0, 3), st.integers(0, 3)),
        ),
        max_size=30,
    )
)
def test_left_join_reduce_and_views_match_the_reference(ops: list[tuple[str, Any]]) -> None:
    class All(Program):
        a = table(["x", "y"])
        b = table(["y", "z"])
        out = scratch(["x", "y", "z"])
        total = scratch(["n", "s"])
        best = scratch(["x", "y"])
        s = lset()
        view = scratch(["v"])

        @bloom
        def rules(self) -> None:
            self.out <= self.a.leftjoin(self.b, self.a.y == self.b.y).map(
                lambda p, q: (p.x, p.y, q.z if q else None)
            )
            self.total <= self.a.reduce(
                (0, 0),
                lambda m, r: (m[0] + 1, m[1] + r.y),
                combine=lambda u, v: (u[0] + v[0], u[1] + v[1]),
            )
            self.best <= self.a.argmax(["x"], "y")
            self.s <= self.b.map(lambda r: (r.z,))
            self.view <= self.s.to_collection()

    inc, ref = All(), All(incremental=False)
    for kind, row in ops:
        for p in (inc, ref):
            rel = p.a if kind.endswith("a") else p.b
            (rel.insert if kind.startswith("ins") else rel.delete)([row])
            p.tick()
        for name in ("out", "total", "best", "view"):
            assert sorted(map(tuple, getattr(inc, name)), key=repr) == sorted(
                map(tuple, getattr(ref, name)), key=repr
            ), name


def test_operator_add_is_a_fine_combine() -> None:
    class Sum(Program):
        src = table(["k"], ["v"])
        total = scratch(["s"])

        @bloom
        def rules(self) -> None:
            self.total <= self.src.reduce(0, lambda m, r: m + r.v, combine=operator.add)

    p = Sum()
    p.src.insert([(1, 5), (2, 7)])
    p.tick()
    assert list(p.total) == [(12,)]
    p.src.delete([(1, 5)])
    p.tick()
    assert list(p.total) == [(7,)]


def test_disabling_a_rule_rebuilds_every_operator() -> None:
    """disable_rule re-plans the units with new, empty operators: they used to go on from
    their (empty) state with this tick's change alone, and a group lost its other rows."""

    class P(Program):
        a = table(["k", "v"])
        g = scratch(["k"], ["n"])
        o = scratch(["k"])

        @bloom
        def rules(self) -> None:
            self.g <= self.a.group(["k"], count())
            self.o <= self.a.map(lambda r: (r.k,))

    out = []
    for incremental in (True, False):
        p = P(incremental=incremental)
        p.a.insert([(1, 1), (1, 2), (2, 1)])
        p.tick()
        p._rt.disable_rule(1)
        p.tick()
        p.a.insert([(1, 3)])
        p.tick()
        out.append((sorted(map(tuple, p.g)), sorted(map(tuple, p.o))))
    assert out[0] == out[1] == ([(1, 3), (2, 1)], [])


def test_a_next_tick_rule_over_a_scratch_queues_only_what_its_table_lacks() -> None:
    p = History()
    p.items.insert([(i, i) for i in range(5000)])
    p.tick()
    assert len(p._rt.pending.inserts["hist"]) == 5000  # the first tick: all of it
    p.tick()
    assert len(p.hist) == 5000
    p.items.insert([(9000, 1)])
    p.tick()
    assert p._rt.pending.inserts["hist"] == [(9000, 2)]  # not the 5,001 rows of the view
    assert p._rt.has_pending()  # as the reference's: its view still queues rows


@pytest.mark.parametrize("incremental", [True, False])
def test_a_row_deleted_from_outside_is_put_back_by_the_next_tick_rule(incremental) -> None:
    """The reference deletes, then inserts every queued row of the view: the row stays."""
    p = History(incremental=incremental)
    p.items.insert([(1, 1), (2, 2)])
    p.tick()
    p.tick()
    p.hist.delete([(1, 2)])
    p.tick()
    assert sorted(map(tuple, p.hist)) == [(1, 2), (2, 4)]
    dropped = p.discard_pending()  # what the reference queued: the view's rows
    assert sorted(map(tuple, dropped["hist"])) == [(1, 2), (2, 4)]
    p.hist.delete([(2, 4)])
    p.tick()
    assert sorted(map(tuple, p.hist)) == [(1, 2)]  # nothing queued was put back


def test_a_rule_into_soft_state_refreshes_its_rows_every_tick() -> None:
    """A soft-state row's lifetime restarts at each derivation: the semi-naive evaluator took
    only new rows, so an unchanged body let its rows expire early (found by the differential
    test: a row derived at time 1 was gone at time 2 with a ttl of 2)."""

    class Clock:
        t = 0.0

        def __call__(self) -> float:
            return self.t

    class Soft(Program):
        a = table(["x", "y"])
        soft = table(["x", "y"], ttl=2.0)

        @bloom
        def rules(self) -> None:
            self.soft <= self.a.filter(lambda r: r.y < 3)

    out = []
    for incremental in (True, False):
        clock = Clock()
        p = Soft(clock=clock, incremental=incremental)
        p.a.insert([(1, 0)])
        p.tick()
        clock.t = 1.0
        p.tick()  # derived again at 1: lives until 3
        p.a.delete([(1, 0)])
        clock.t = 2.0
        p.tick()
        out.append(sorted(map(tuple, p.soft)))
    assert out == [[(1, 0)], [(1, 0)]]


def test_a_delete_rule_over_a_scratch_queues_only_what_deletes() -> None:
    p = Blocked()
    p.blocked.insert([(i, 0) for i in range(5000)])
    p.tasks.insert([(1, 0), (7000, 0)])
    p.tick()
    assert p._rt.pending.deletes["tasks"] == [(1, 0)]  # not the 5,000 rows of the view
    p.tick()
    assert sorted(map(tuple, p.tasks)) == [(7000, 0)]
    assert not p._rt.pending.deletes
    assert p._rt.has_pending()  # as the reference's: its view still queues deletions


@pytest.mark.parametrize("incremental", [True, False])
def test_a_row_stored_by_a_replacement_is_deleted_by_the_next_tick_rule(incremental) -> None:
    """The reference replaces, then deletes every queued row of the view."""

    class Both(Blocked):
        upd = scratch(["id", "v"])

        # fmt: off
        @bloom
        def more(self) -> None:
            self.tasks <+- self.upd
        # fmt: on

    p = Both(incremental=incremental)
    p.blocked.insert([(3, 0)])
    p.tick()
    p.upd.insert([(3, 0)])  # stored by <+- at the next tick, before the deletions
    p.tick()
    p.tick()
    assert sorted(map(tuple, p.tasks)) == []
    dropped = p.discard_pending()
    assert sorted(map(tuple, dropped.deletes["tasks"])) == [(3, 0)]


class Evaluated:
    """How many rows the counted rule's function was called on."""

    n = 0

    @classmethod
    def counted(cls, r: Any) -> tuple[int, int]:
        cls.n += 1
        return (r.id, r.v)


class Latest(bench_incremental.UpsertFromScratchShape):
    """The benchmark's ``latest <+- view``, and a same-tick rule into ``latest``."""

    other = table(["id"], ["v"])

    @bloom
    def more(self) -> None:
        self.latest <= self.other.map(Evaluated.counted)


def test_a_replace_rule_over_a_scratch_queues_only_the_rows_that_change_its_table() -> None:
    """``<+-`` from a scratch: a row its key's stored row equals replaces nothing, so it is
    not queued, and the table loses no row, so a same-tick rule into it is not re-evaluated
    in full (it was, every tick, when each of the view's rows deleted and re-inserted its
    stored row)."""
    p = Latest()
    p.items.insert([(i, i) for i in range(5000)])
    p.other.insert([(i, 0) for i in range(10_000, 12_000)])
    p.tick()
    assert len(p._rt.pending.replaces["latest"]) == 5000  # the first tick: all of it
    p.tick()
    assert len(p.latest) == 7000
    assert "latest" not in p._rt.pending.replaces  # every row is stored: nothing replaces
    assert p._rt.has_pending()  # as the reference's: its view still queues rows
    p.items.delete([(1, 1)])
    p.items.insert([(1, 7), (9000, 1)])
    Evaluated.n = 0
    p.tick()
    assert sorted(p._rt.pending.replaces["latest"]) == [(1, 14), (9000, 2)]
    assert Evaluated.n == 0
    p.tick()  # (1, 2) is replaced: the same-tick rule into latest re-derives its rows once
    assert Evaluated.n == 2000
    assert "latest" not in p._rt.pending.replaces
    Evaluated.n = 0
    for _ in range(3):
        p.tick()
    assert Evaluated.n == 0
    assert (1, 14) in p.latest and len(p.latest) == 7001


@pytest.mark.parametrize("incremental", [True, False])
def test_a_replaced_row_deleted_from_outside_comes_back_as_in_the_reference(
    incremental: bool,
) -> None:
    p = Latest(incremental=incremental)
    p.items.insert([(1, 1), (2, 2)])
    p.tick()
    p.tick()
    p.latest.delete([(1, 2)])
    p.tick()  # the queued replacements come first, then the deletion
    assert sorted(map(tuple, p.latest)) == [(2, 4)]
    p.tick()
    assert sorted(map(tuple, p.latest)) == [(1, 2), (2, 4)]
    dropped = p.discard_pending()  # what the reference queued: the view's rows
    assert sorted(map(tuple, dropped["latest"])) == [(1, 2), (2, 4)]
    assert not p._rt.has_pending()
    p.latest.delete([(2, 4)])
    p.tick()
    assert sorted(map(tuple, p.latest)) == [(1, 2)]  # nothing queued was put back
    p.tick()
    assert sorted(map(tuple, p.latest)) == [(1, 2), (2, 4)]  # queued again at the last tick


def test_values_that_come_and_go_do_not_pile_up_in_the_heap() -> None:
    """A value pushed each time it reappears, and never the best, stays bounded."""
    p = Queue()
    p.jobs.insert([("u", 0, Prio(0))])
    p.tick()
    for i in range(300):
        p.jobs.insert([("u", 1, Prio(1 + i % 7))])
        p.tick()
        p.jobs.delete([("u", 1, Prio(1 + i % 7))])
        p.tick()
    arg: Any = p._rt.rules[0].zbody  # argmin: each group's rows by value
    grp: Any = p._rt.rules[1].zbody  # min_: each group's multiset of values
    heaps = [g.heap.h for g in arg.groups.values()]
    heaps += [g.slots[0].heap.h for g in grp.groups.values()]
    assert len(heaps) == 2
    assert all(len(h) <= 2 * 2 + 16 for h in heaps), [len(h) for h in heaps]
