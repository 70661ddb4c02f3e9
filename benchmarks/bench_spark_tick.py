"""What one small tick costs on SparkEngine: records read and Spark jobs, at two state sizes.

Run: ``.venv/bin/python benchmarks/bench_spark_tick.py [--small N] [--large M]`` (defaults:
10,000 and 200,000 edges; ``local[2]``).

The program is single-source shortest paths plus two group-bys over the links (fan-out and
spend per node). Tick 0 loads the graph; the measured ticks are one new edge (leading out of
a node the source cannot reach, so the fixpoint itself touches one row) and an empty tick.
Spark's own status store counts what a tick costs: the jobs it ran and the input records its
stages read (``inputRecords``, which also counts rows read back from checkpointed and cached
blocks). Prints the figures per size and the growth ratio of the one-edge tick's records from
the small to the large graph (target <= 3.0), its jobs (target <= 8), and the empty tick's jobs
(target 0). Exits 1 when any target is missed.

The session has a checkpoint directory, as docs/spark.md tells users to set: the engine keeps
the state there as Parquet sorted by each collection's first column, in small row groups, and
a one-row tick adds its rows as a layer on the driver instead of rewriting the files. The
tick's lookups (is the new edge stored, the distance of its source, the fan-out and spend of
its source) are filters by a few values, which Parquet answers from the row groups whose
range holds them: the records read stay flat as the graph grows.
"""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
# ruff: noqa: B015

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_merge import session

from blooml import Program, bloom, count, lmin, scratch, sum_, table
from blooml.spark import SparkEngine

RECORDS_RATIO = 3.0
MAX_JOBS = 8


class SSSPStats(Program):
    """Shortest paths from ``source``, with the fan-out and spend of every node."""

    link = table(["src", "dst", "c"])
    source = table(["node"])
    dist = table(["node"], ["d"])
    fanout = scratch(["src"], ["n"])
    spend = scratch(["src"], ["total"])

    # fmt: off
    @bloom
    def rules(self):
        self.dist <= self.source.map(lambda s: (s.node, lmin(0)))
        self.dist <= self.dist.join(self.link, self.dist.node == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )
        self.fanout <= self.link.group(["src"], count())
        self.spend <= self.link.group(["src"], sum_("c"))
    # fmt: on


class Meter:
    """Jobs run and input records read since the last :meth:`take`, from Spark's status store
    (classic sessions: the driver's ``AppStatusStore``, the data the Spark UI shows)."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self.store = self.sc._jsc.sc().statusStore()
        self.jobs, self.stages = self._ids()

    def _ids(self) -> tuple[int, int]:
        jobs = self.sc.statusTracker().getJobIdsForGroup(None)
        stages = self._stages()
        return max(jobs, default=-1), max((s.stageId() for s in stages), default=-1)

    def _stages(self) -> list[Any]:
        gw = self.sc._gateway
        seq = self.store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
        out, it = [], seq.iterator()
        while it.hasNext():
            out.append(it.next())
        return out

    def take(self) -> tuple[int, int]:
        """(jobs, input records) since the previous call."""
        jobs, _ = self._ids()
        records = sum(
            s.inputRecords()
            for s in self._stages()
            if s.stageId() > self.stages and str(s.status()) == "COMPLETE"
        )
        n_jobs = jobs - self.jobs
        self.jobs, self.stages = self._ids()
        return n_jobs, records


def graph(rnd: random.Random, edges: int) -> tuple[list[tuple[int, int, int]], int]:
    """A random graph over edges // 5 nodes, and a node no edge reaches (nor leaves): the
    middle one, so that looking it up in the sorted state reads the row groups around it
    (a node past the last one would fall outside every row group's range, and read none)."""
    nodes = max(4, edges // 5)
    lonely = nodes // 2
    links = []
    while len(links) < edges:
        a, b = rnd.randrange(nodes), rnd.randrange(nodes)
        if lonely not in (a, b):
            links.append((a, b, rnd.randint(1, 100)))
    return links, lonely


def measure(spark: Any, edges: int, rnd: random.Random) -> dict[str, Any]:
    links, lonely = graph(rnd, edges)
    links_df = spark.createDataFrame(links, "src bigint, dst bigint, c bigint").localCheckpoint()
    engine = SparkEngine(spark, path="dataframe", program=SSSPStats)
    engine.tick({"link": links_df, "source": [(links[0][0],)]})
    meter = Meter(spark)
    t = time.perf_counter()
    one = engine.tick({"link": [(lonely, lonely + 1, 7)]})
    t_one = time.perf_counter() - t
    jobs_one, rec_one = meter.take()
    t = time.perf_counter()
    empty = engine.tick({})
    t_empty = time.perf_counter() - t
    jobs_empty, rec_empty = meter.take()
    # the tick's effect is right: the new edge counted in fanout, dist unchanged
    assert (lonely, 1) in empty.rows("fanout") or (lonely, 1) in one.rows("fanout")
    return {
        "edges": edges,
        "one": (jobs_one, rec_one, t_one),
        "empty": (jobs_empty, rec_empty, t_empty),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--large", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    rnd = random.Random(args.seed)
    spark = session()
    # state kept where docs/spark.md says to keep it: reliable files in the checkpoint
    # directory (sorted, so that a tick's lookups of a few keys read few row groups)
    tmp = tempfile.TemporaryDirectory(prefix="blooml-bench-tick-")
    spark.sparkContext.setCheckpointDir(tmp.name)
    print(f"Spark {spark.version}, local[2], checkpoint directory {tmp.name}")
    measure(spark, 200, rnd)  # warm up: JVM, code generation, Python workers
    results = [measure(spark, n, rnd) for n in (args.small, args.large)]
    failures = []
    for r in results:
        (j1, r1, t1), (j0, r0, t0) = r["one"], r["empty"]
        print(f"\nSSSP + two group-bys, {r['edges']:,} edges")
        print(f"  one-edge tick: {j1:3d} jobs, {r1:>10,} records read, {t1:5.2f} s")
        print(f"  empty tick:    {j0:3d} jobs, {r0:>10,} records read, {t0:5.2f} s")
        if j1 > MAX_JOBS:
            failures.append(f"one-edge tick at {r['edges']:,} edges: {j1} jobs (> {MAX_JOBS})")
        if j0 > 0:
            failures.append(f"empty tick at {r['edges']:,} edges: {j0} jobs (> 0)")
    small, large = results[0]["one"][1], results[1]["one"][1]
    ratio = large / max(small, 1)
    ok = ratio <= RECORDS_RATIO
    print(
        f"\nrecords read by the one-edge tick, {args.large:,} vs {args.small:,} edges: "
        f"{ratio:.1f}x (<= {RECORDS_RATIO}) {'ok' if ok else 'MISSED'}"
    )
    if not ok:
        failures.append(f"records ratio {ratio:.1f} (> {RECORDS_RATIO})")
    spark.stop()
    tmp.cleanup()
    if failures:
        print("\nMISSED: " + "; ".join(failures))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
