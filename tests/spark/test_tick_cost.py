"""Ticks cost what changed: across ticks, SparkEngine evaluates only the rules whose inputs
changed (an empty tick runs no Spark job) and gives the local engine's state tick after tick,
scratches, deletes, non-monotone rules and lattice variables included."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _reach import STATS_TICKS, Stats

from blooml import Program, bloom, count, lmax, scratch, table
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Ticky(Program):
    """Every kind of input a rule can see change between ticks."""

    edge = table(["a", "b"])
    event = scratch(["a"])
    path = table(["a", "b"])
    deg = scratch(["a"], ["n"])
    busy = scratch(["a"])
    hits = table(["a", "b"])
    lone = scratch(["a"])
    dead = table(["a", "b"])
    alive = scratch(["a", "b"])
    const = scratch(["a"])
    top = lmax()

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.deg <= self.edge.group(["a"], count())
        self.busy <= self.deg.filter(lambda d: d.n > 1).map(lambda d: (d.a,))
        self.hits <= self.event.join(self.path, self.event.a == self.path.a).map(
            lambda e, p: (p.a, p.b)
        )
        self.lone <= self.event.notin(self.path, self.event.a == self.path.a)
        self.dead <+ self.event.map(lambda e: (e.a, e.a))
        self.dead <- self.dead.filter(lambda g: g.a > 1)
        self.alive <= self.path.notin(self.dead)
        self.const <= [(7,)]
        self.top <= self.edge.map(lambda e: e.b)
    # fmt: on


TICKS: list[dict[str, list[tuple[int, ...]]]] = [
    {"edge": [(0, 1), (1, 2)], "event": [(1,)]},
    {"edge": [(2, 3)]},
    {},
    {"event": [(2,), (9,)]},
    {"edge": [(0, 5), (3, 4)]},
    {},
    {"edge": [(5, 0)], "event": [(0,)]},
]


def _rows(engine: SparkEngine, result: Any, name: str) -> list[tuple[Any, ...]]:
    return sorted(result.rows(name), key=repr)


def test_ticks_equal_the_local_engine_tick_after_tick(spark: Any) -> None:
    p = Ticky()
    engine = SparkEngine(spark, path="dataframe", program=Ticky)
    for _, result in _alongside(engine, p, TICKS):
        assert result["top"] == p.top.value


def _alongside(
    engine: SparkEngine, p: Program, ticks: list[dict[str, list[tuple[int, ...]]]]
) -> Iterator[tuple[int, Any]]:
    """Each tick's inputs run by the local program ``p`` and by ``engine``, every collection
    checked equal; yields (tick, the engine's result)."""
    for i, inputs in enumerate(ticks):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        result = engine.tick(inputs)
        for name in type(p).ir().collections:
            local = sorted(map(tuple, getattr(p, name)), key=repr)
            assert _rows(engine, result, name) == local, (i, name)
        yield i, result


class Meter:
    """Spark jobs started since the last :meth:`take` (the driver's status store)."""

    def __init__(self, spark: Any) -> None:
        self.store = spark.sparkContext._jsc.sc().statusStore()
        self.last = self._top()

    def _top(self) -> int:
        jobs = self.store.jobsList(None)
        top, it = -1, jobs.iterator()
        while it.hasNext():
            top = max(top, it.next().jobId())
        return top

    def take(self) -> int:
        top = self._top()
        n, self.last = top - self.last, top
        return n


class Chain(Program):
    """A closure and a group-by over a chain that grows by one far-away edge."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    fan = scratch(["a"], ["n"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.fan <= self.edge.group(["a"], count())
    # fmt: on


def test_an_empty_tick_runs_no_job_and_a_small_one_few(spark: Any) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Chain)
    engine.tick({"edge": [(i, i + 1) for i in range(30)]})
    meter = Meter(spark)
    empty = engine.tick({})
    assert meter.take() == 0
    assert empty.rounds == (1,) * len(empty.rounds) and empty.touched[0] == [0]
    # one edge no path reaches: round 1 joins it with the state, one more round finds nothing
    one = engine.tick({"edge": [(100, 101)]})
    jobs = meter.take()
    # the edge looked up in edge; per round of path: the join with the one-row delta (its
    # broadcast, its count) and the lookup of the derived row; fan's one group (was 9 jobs)
    assert 0 < jobs <= 8, jobs
    assert one.touched == [[1, 0], [1]]  # path: the edge, then nothing; fan: the one group
    assert (100, 101) in one.rows("path") and (100, 1) in one.rows("fan")
    assert len(one.rows("path")) == 30 * 31 // 2 + 1


def test_state_lives_in_the_checkpoint_dir_with_truthful_size_estimates(
    spark: Any, checkpoint_dir: Any
) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Chain)
    for t in range(4):
        result = engine.tick({"edge": [(t * 10 + i, t * 10 + i + 1) for i in range(5)]})
    path = result.dataframe("path")
    # read back from Parquet files: Spark sizes the frame from them (not ~Long.MaxValue)
    size = int(path._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    assert 0 < size < 1 << 20
    assert sorted(result.rows("path")) == sorted(
        (t * 10 + i, t * 10 + j) for t in range(4) for i in range(5) for j in range(i + 1, 6)
    )
    kept = [p for p in checkpoint_dir.rglob("blooml-state-*") if p.is_dir()]
    # path and fan changed every tick: their last two versions are kept; edge's rows (input
    # lists) are on the driver until a compaction writes them
    assert 2 <= len(kept) <= 4


def test_group_bys_update_the_groups_a_tick_touches_and_equal_the_local_engine(
    spark: Any,
) -> None:
    p = Stats()
    engine = SparkEngine(spark, path="dataframe", program=Stats)
    groups = ("fan", "spend", "lo", "hi")
    before: set[tuple[str, tuple[Any, ...]]] = set()
    stratum = None
    for i, result in _alongside(engine, p, STATS_TICKS):
        now = {(g, tuple(r)) for g in groups for r in getattr(p, g)}
        if stratum is None:  # the stratum of the group-bys: 4 * 7 groups derived at tick 0
            stratum = next(s for s, t in enumerate(result.touched) if t == [28])
        elif i in (1, 2, 4, 6):  # inserts only: the rows of the groups they changed, no more
            assert result.touched[stratum] == [len(now - before)], (i, result.touched)
        before = now


def test_small_ticks_change_overlays_on_the_kept_files_compacted_between_ticks(
    spark: Any, checkpoint_dir: Any, monkeypatch: Any
) -> None:
    p = Stats()
    engine = SparkEngine(spark, path="dataframe", program=Stats, checkpoint_every=2)
    files = []
    for _, result in _alongside(engine, p, [*STATS_TICKS, {"link": [(1, 400, 3)]}]):
        files.append(frozenset(result.dataframe("link").inputFiles()))
    # tick 0 wrote link's files; the later ticks' inserts and the delete are rows kept on the
    # driver (an overlay): however many ticks change it, link is not written anew in a tick
    # (until this release: every checkpoint_every=2 changes, a full rewrite inside the tick)
    assert all(f == files[0] for f in files), files
    done = engine.compact()  # the maintenance step, between ticks
    assert set(done) >= {"link"} and engine.compact() == {}
    link = engine.state()[1]["link"]
    compacted = frozenset(link.inputFiles())
    assert compacted != files[0]
    assert sorted(map(tuple, link.collect())) == sorted(map(tuple, p.link))
    for f in compacted:  # each file sorted by the first column
        first = [r[0] for r in spark.read.parquet(f).collect()]
        assert first == sorted(first)
    # an overlay past OVERLAY_ROWS: the engine compacts it after the tick, by itself
    monkeypatch.setattr("blooml.spark._engine.OVERLAY_ROWS", 1)
    _ = list(_alongside(engine, p, [{"link": [(2, 500, 1), (2, 501, 1)]}]))
    assert frozenset(engine.state()[1]["link"].inputFiles()) != compacted
    assert engine.compact() == {}


class Mixed(Program):
    """Small inputs of strings, floats and NULLs, looked up and grouped on the driver."""

    item = table(["k", "v", "w"])
    tag = table(["k", "t"])
    n = scratch(["k"], ["n"])
    pair = table(["w", "t"])

    # fmt: off
    @bloom
    def rules(self):
        self.n <= self.item.group(["k"], count())
        self.pair <= self.item.join(self.tag, self.item.k == self.tag.k).map(
            lambda i, g: (i.w, g.t)
        )
    # fmt: on


def test_small_inputs_with_nulls_strings_and_floats_equal_the_local_engine(spark: Any) -> None:
    ticks: list[dict[str, list[tuple[Any, ...]]]] = [
        {"item": [("a", 1.5, "x"), ("b", None, "y"), (None, 2.0, "z")], "tag": [("a", 1)]},
        {"item": [("a", 1.5, "x"), ("a", None, "q")]},  # one stored already, one new
        {"item": [(None, 2.0, "z"), ("e", None, None)]},  # a NULL key stored already
        {"item": [("c", float("inf"), "w"), ("b", None, "y")], "tag": [("b", 2), ("d", 3)]},
        {"item": [("d", -0.5, "v")]},
    ]
    engine = SparkEngine(spark, path="dataframe", program=Mixed)
    for _ in _alongside(engine, Mixed(), ticks):
        pass
