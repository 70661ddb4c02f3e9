"""Ticks a user runs cost what they change, measured with Spark's own status store: a random
new edge on shortest paths (an ``lmin`` table, a ``reach`` table derived from it, out-edges per
node and the global count of reached nodes), a random edge deleted with ``<-``; every job of a
tick carries its description. Each tick is checked against the local engine."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, count, lmin, scratch, table
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# the benchmark's program: shortest paths from ``source`` (an ``lmin`` table), the nodes
# reached, out-edges per node, the reached count and ``<-`` deletes of links
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_spark_tick  # noqa: E402

cloudpickle.register_pickle_by_value(bench_spark_tick)
Reached = bench_spark_tick.SSSPReach


class Meter:
    """Jobs, jobs with no description and input records since the last :meth:`take`, from
    the driver's status store (the data the Spark UI shows)."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self.store = self.sc._jsc.sc().statusStore()
        self.job, self.stage = self._top()

    def _list(self, seq: Any) -> list[Any]:
        out, it = [], seq.iterator()
        while it.hasNext():
            out.append(it.next())
        return out

    def _stages(self) -> list[Any]:
        gw = self.sc._gateway
        return self._list(
            self.store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
        )

    def _top(self) -> tuple[int, int]:
        jobs = self._list(self.store.jobsList(None))
        return max((j.jobId() for j in jobs), default=-1), max(
            (s.stageId() for s in self._stages()), default=-1
        )

    def take(self) -> tuple[int, list[str], int]:
        """(jobs, names of the jobs with no description, input records) since the last call."""
        new = [j for j in self._list(self.store.jobsList(None)) if j.jobId() > self.job]
        bare = [str(j.name()) for j in new if not j.description().isDefined()]
        stages = [s for s in self._stages() if s.stageId() > self.stage]
        records = sum(s.inputRecords() for s in stages if str(s.status()) == "COMPLETE")
        self.job, self.stage = self._top()
        return len(new), bare, records


def _same(engine_result: Any, p: Program, tick: int) -> None:
    for name in Reached.ir().collections:
        local = sorted(map(tuple, getattr(p, name)), key=repr)
        assert sorted(engine_result.rows(name), key=repr) == local, (tick, name)


def _graph(rnd: random.Random, edges: int, nodes: int) -> list[tuple[int, int, int]]:
    pairs = sorted({(rnd.randrange(nodes), rnd.randrange(nodes)) for _ in range(edges)})
    return [(a, b, rnd.randint(1, 9)) for a, b in pairs]


def _ticks(
    rnd: random.Random, links: list[tuple[int, int, int]], nodes: int, n: int
) -> list[dict[str, list[tuple[int, ...]]]]:
    """``n`` random ticks: a new edge, an edge deleted (then the tick that applies it), or
    nothing."""
    stored = list(links)
    out: list[dict[str, list[tuple[int, ...]]]] = []
    for _ in range(n):
        kind = rnd.choice(("edge", "edge", "delete", "empty"))
        if kind == "edge":
            new = (rnd.randrange(nodes), rnd.randrange(nodes), rnd.randint(1, 9))
            stored.append(new)
            out.append({"link": [new]})
        elif kind == "delete":
            out += [{"drop": [stored.pop(rnd.randrange(len(stored)))]}, {}]
        else:
            out.append({})
    return out


def _run_alongside(spark: Any, seed: int, edges: int, nodes: int, n: int) -> None:
    rnd = random.Random(seed)
    links = _graph(rnd, edges, nodes)
    p = Reached()
    engine = SparkEngine(spark, path="dataframe", program=Reached, checkpoint_every=3)
    first = {"link": links, "source": [(links[0][0],)]}
    for i, inputs in enumerate([first, *_ticks(rnd, links, nodes, n)]):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        _same(engine.tick(inputs), p, i)


def test_random_edges_and_deletes_equal_the_local_engine(spark: Any) -> None:
    _run_alongside(spark, seed=5, edges=40, nodes=15, n=6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_edges_and_deletes_equal_the_local_engine_long(spark: Any, seed: int) -> None:
    _run_alongside(spark, seed=seed, edges=60, nodes=20, n=16)


def test_random_edges_and_deletes_with_state_files_equal_the_local_engine(
    spark: Any, checkpoint_dir: Any
) -> None:
    _run_alongside(spark, seed=8, edges=40, nodes=15, n=6)


def test_a_random_edge_and_a_delete_read_a_part_of_the_state_and_every_job_is_named(
    spark: Any, checkpoint_dir: Any, monkeypatch: Any
) -> None:
    # row groups of ~100 rows (Parquet's least), so that a state of 4,000 edges is many
    monkeypatch.setattr("blooml.spark._dffiles.STATE_ROW_GROUP", 1024)
    _random_edge_and_delete(spark, edges=4000, nodes=2000)


@pytest.mark.slow
def test_a_random_edge_and_a_delete_read_a_part_of_the_state_long(
    spark: Any, checkpoint_dir: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr("blooml.spark._dffiles.STATE_ROW_GROUP", 1024)
    _random_edge_and_delete(spark, edges=20000, nodes=5000)


def _rounds(result: Any) -> int:
    """The fixpoint rounds of a tick that derived something (a stratum with nothing to do
    runs one round that reads nothing)."""
    return sum(len(t) for t in result.touched if any(t))


def _random_edge_and_delete(spark: Any, edges: int, nodes: int) -> None:
    rnd = random.Random(11)
    links = _graph(rnd, edges, nodes)
    df = spark.createDataFrame(links, "src bigint, dst bigint, c bigint")
    engine = SparkEngine(spark, path="dataframe", program=Reached)
    loaded = engine.tick({"link": df, "source": [(links[0][0],)]})
    # every stored row: what ticks that scan the collections they look in would read
    total = sum(len(loaded.rows(n)) for n in Reached.ir().collections)
    meter = Meter(spark)
    new = (rnd.randrange(nodes), rnd.randrange(nodes), 5)
    for inputs in ({"link": [new]}, {}):
        result = engine.tick(inputs)
        jobs, bare, records = meter.take()
        # the lookups of a round (and those the next round will need) run as one job, each
        # reading the few row groups that can hold its values: an eighth of the state at
        # most (before: a job per lookup, 2-3 per round; and a collection written anew every
        # checkpoint_every ticks, all of it read)
        assert bare == [] and jobs <= min(8, _rounds(result) + 1), (inputs, jobs, result)
        assert records * 8 <= total, (inputs, jobs, records, total)
    assert jobs == 0  # the empty tick
    # an edge from a reached node to one not reached: the global count of reached nodes grows
    reached = {r[0] for r in engine.tick({}).rows("reach")}
    a = rnd.choice(sorted(reached))
    b = rnd.choice([n for n in range(nodes) if n not in reached])
    meter.take()
    result = engine.tick({"link": [(a, b, 1)]})
    jobs, bare, records = meter.take()
    # a path into nodes not reached before: as many fixpoint rounds as it has hops (here
    # more than 8), and one job a round; each round's job learns the next hop's rows, so
    # no plan of point lookups needs fewer (docs/spark.md)
    # and each round reads the row groups that can hold its values in the collections it
    # looks in (~1,400 records here), not the collections (a scan of link alone is 4,000)
    rounds = _rounds(result)
    assert bare == [] and jobs <= rounds + 1, (jobs, result)
    assert records * 4 <= total * rounds, (jobs, records, total)
    assert result.rows("reached") == [(len(reached) + 1,)] or len(reached) + 1 < nodes
    links += [new, (a, b, 1)]
    gone = links[rnd.randrange(len(links))]
    engine.tick({"drop": [gone]})  # the <- fact is taken here, applied by the next tick
    meter.take()
    result = engine.tick({})
    jobs, bare, records = meter.take()
    # the delete: its row looked up in link and dropped on the driver (link not rewritten);
    # fanout: the deleted edge's group recomputed from the link rows of that group only
    assert bare == [] and jobs <= 4 and records * 8 <= total, (jobs, bare, records, total)
    fan = dict(result.rows("fanout"))
    assert fan.get(gone[0], 0) == sum(1 for r in links if r[0] == gone[0]) - 1


def test_tick_on_the_rdd_path_says_it_runs_one_tick_before_any_job(spark: Any) -> None:
    from blooml.errors import NotSupportedOnSpark

    engine = SparkEngine(spark, path="rdd", program=Reached)
    meter = Meter(spark)
    with pytest.raises(NotSupportedOnSpark, match=r"path='rdd'.*one tick.*path='auto'"):
        engine.tick({"link": [(0, 1, 2)]})
    assert meter.take()[0] == 0


def test_ticks_without_a_checkpoint_dir_say_once_how_to_read_what_changed(
    spark: Any, caplog: Any
) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Reached)
    with caplog.at_level("WARNING", logger="blooml.spark"):
        for inputs in ({"link": [(0, 1, 2)], "source": [(0,)]}, {"link": [(1, 2, 3)]}, {}):
            engine.tick(inputs)
    said = [r.getMessage() for r in caplog.records if "checkpoint directory" in r.getMessage()]
    assert len(said) == 1 and "setCheckpointDir" in said[0], said


class Best(Program):
    """One successor per node: a second successor is a key conflict."""

    edge = table(["a", "b"])
    best = table(["a"], ["b"])

    @bloom
    def rules(self):
        self.best <= self.edge


def test_a_small_tick_that_conflicts_with_a_stored_key_says_which_rows(spark: Any) -> None:
    from blooml.errors import KeyConstraintError

    engine = SparkEngine(spark, path="dataframe", program=Best)
    engine.tick({"edge": [(0, 1), (5, 6)]})
    assert sorted(engine.tick({"edge": [(7, 8)]}).rows("best")) == [(0, 1), (5, 6), (7, 8)]
    # merged on the driver by a lookup of key 0: its stored row disagrees, and the merge
    # that says so names both rows
    with pytest.raises(KeyConstraintError) as got:
        engine.tick({"edge": [(0, 2)]})
    assert got.value.key == 0 and {tuple(got.value.old), tuple(got.value.new)} == {(0, 1), (0, 2)}


def test_a_lookup_of_scattered_keys_in_a_state_file_reads_their_pages_only(
    spark: Any, checkpoint_dir: Any
) -> None:
    from pyspark.sql import functions as F

    from blooml.spark._dffiles import STATE_PAGE_ROWS, STATE_ROW_GROUP, keep_state
    from blooml.spark._dflookup import Lookups

    n = 8_000  # a few row groups of ~2,000 rows (STATE_ROW_GROUP), in a shuffled order
    df = spark.range(n).selectExpr(f"(id * 7919) % {n} AS k", "id AS v")
    files: list[str] = []
    # with a copy sorted by v: the rules look the rows up by v too (lookup_columns)
    kept = keep_state(df, files, sort=True, rows=n, by=["v"])
    rnd = random.Random(26)
    keys = [rnd.randrange(i * n // 4, (i + 1) * n // 4) for i in range(4)]
    meter = Meter(spark)
    got = sorted(kept.where(F.col("k").isin(keys)).collect())
    _, _, records = meter.take()
    assert [r.k for r in got] == sorted(keys)
    assert all((r.k - r.v * 7919) % n == 0 for r in got)
    # one page of each key's row group (the column index's ranges), not the row groups
    assert records <= len(keys) * STATE_PAGE_ROWS, (records, keys)
    # and the row groups hold the rows they held before pages were small (~8 bytes a value of
    # STATE_ROW_GROUP), not 2x: a lookup a Bloom filter prunes reads whole groups
    pq = pytest.importorskip("pyarrow.parquet")
    groups = [
        meta.row_group(i).num_rows
        for f in Path(files[0].removeprefix("file:")).rglob("*.parquet")
        for meta in [pq.ParquetFile(f).metadata]
        for i in range(meta.num_row_groups)
    ]
    assert sum(groups) == n and max(groups) <= STATE_ROW_GROUP // 16, groups
    # more than 10 keys: Spark pushes an IN list of more than 10 values (spark.sql.parquet.
    # pushdown.inFilterThreshold) to Parquet as one IN predicate, whose page skipping uses
    # only its smallest and largest values: 24 keys spread over the file read every page of
    # the row groups they fall in (7,710 of 8,000 records) until the engine's lookups split
    # long lists into lists of 10 OR-ed (each pushed as equalities: a page per key)
    keys = [(k,) for k in random.Random(24).sample(range(n), 24)]
    meter.take()
    lookups = Lookups()
    got = lookups.rows(kept, ["k"], keys)
    _, _, records = meter.take()
    assert sorted(r[0] for r in got) == sorted(k for (k,) in keys)
    assert all((k - v * 7919) % n == 0 for k, v in got)
    assert lookups.jobs == 1 and records <= len(keys) * STATE_PAGE_ROWS, records
    # by two columns (the first one prunes): the same pages; a pair whose second value
    # differs from the stored one is not found
    pairs = [(k, v) for k, v in got[:12]] + [(got[12][0], got[12][1] + 1)]
    meter.take()
    found = Lookups().rows(kept, ["k", "v"], pairs)
    _, _, records = meter.take()
    assert sorted(found) == sorted(pairs[:12]) and records <= 13 * STATE_PAGE_ROWS, records
    # by the second column, whose values are scattered over the file sorted by k: its copy
    # sorted by v, a page per value. Until the copies, the Bloom filters left every row group
    # holding one of the values: 24 values of 8,000 rows read all 8,000 records
    vals = [(v,) for v in random.Random(25).sample(range(n), 24)]
    meter.take()
    lookups = Lookups()
    got = lookups.rows(kept, ["v"], vals)
    _, _, records = meter.take()
    assert sorted(r[1] for r in got) == sorted(v for (v,) in vals), got
    assert all((k - v * 7919) % n == 0 for k, v in got)  # rows in the frame's column order
    assert lookups.jobs == 1 and records <= len(vals) * STATE_PAGE_ROWS, records
    # by (v, k): the copy prunes by v; a pair whose k differs is not found
    pairs = [(v, k) for k, v in got[:5]] + [(got[5][1], got[5][0] + 1)]
    found = Lookups().rows(kept, ["v", "k"], pairs)
    assert sorted(found) == sorted((k, v) for v, k in pairs[:5]), found
    assert len(files) == 2  # the copy's files are the caller's to delete, with the first


class Star(Program):
    """Shortest paths (``lmin``) and the nodes reached: the benchmark's program without its
    groups."""

    link = table(["src", "dst", "c"])
    source = table(["node"])
    dist = table(["node"], ["d"])
    reach = table(["node"])

    @bloom
    def rules(self):
        self.dist <= self.source.map(lambda s: (s.node, lmin(0)))
        self.dist <= self.dist.join(self.link, self.dist.node == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )
        self.reach <= self.dist.map(lambda d: (d.node,))


@pytest.mark.slow
def test_a_new_edge_that_lowers_many_scattered_distances_reads_a_page_per_key(
    spark: Any, checkpoint_dir: Any
) -> None:
    from blooml.spark._dffiles import STATE_PAGE_ROWS

    # the source reaches every node at cost 100; a new edge of cost 1 into a hub whose 40
    # links lead to nodes spread over the key range at cost 1: one round lowers 40
    # scattered distances (40 keys looked up in dist, link and reach, in one job). Until
    # lookups split IN lists of more than 10 values, that round read every page of those
    # collections (~30,000 records); now a page per key and collection
    n, hub = 10_000, 7
    rnd = random.Random(3)
    spread = rnd.sample(range(10, n), 40)
    links = [(0, v, 100) for v in range(1, n)] + [(hub, v, 1) for v in spread]
    df = spark.createDataFrame(links, "src bigint, dst bigint, c bigint")
    engine = SparkEngine(spark, path="dataframe", program=Star)
    engine.tick({"link": df, "source": [(0,)]})
    meter = Meter(spark)
    result = engine.tick({"link": [(0, hub, 1)]})
    jobs, bare, records = meter.take()
    dist = {k: d.reveal() for k, d in result.rows("dist")}
    assert dist[hub] == 1 and all(dist[v] == 2 for v in spread), [dist[v] for v in spread]
    assert sum(1 for d in dist.values() if d == 100) == n - 2 - len(spread)
    keys = 1 + 1 + len(spread)  # the new edge's source, the hub, the hub's successors
    assert bare == [] and jobs <= 4, (jobs, bare)
    assert records <= 3 * keys * STATE_PAGE_ROWS, (records, keys)


class Counted(Program):
    """A table projected into another, and the global count of the second."""

    a = table(["x"])
    b = table(["x"])
    n = scratch([], ["k"])

    @bloom
    def rules(self):
        self.b <= self.a
        self.n <= self.b.group([], count())


def test_a_row_the_previous_tick_replaced_is_not_looked_up_again(spark: Any) -> None:
    # the count's row was replaced by the previous tick: its stored row is the overlay's, on
    # the driver, so updating it needs no job (until this release: a job of its own, after
    # the one that looked up the new row, as the worst SSSP tick's last job)
    engine = SparkEngine(spark, path="dataframe", program=Counted)
    p = Counted()
    meter = Meter(spark)
    for i, rows in enumerate([[(1,), (2,)], [(5,)], [(6,)]]):
        p.a.insert(rows)
        p.tick()
        result = engine.tick({"a": rows})
        jobs, bare, _ = meter.take()
        assert bare == [] and (jobs == 1 or i < 2), (i, jobs)  # is the new row stored?
    assert result.rows("n") == [(4,)] == list(map(tuple, p.n))
