"""What the ticks a user runs cost on SparkEngine: records read and Spark jobs, at two sizes.

Run: ``.venv/bin/python benchmarks/bench_spark_tick.py [--small N] [--large M] [--ticks T]``
(defaults: 10,000 and 200,000 edges, 10 ticks of each kind; ``local[2]``).

The program is single-source shortest paths (an ``lmin`` distance table), a ``reach`` table
derived from it, the count of out-edges per node and the global count of reached nodes; a
``<-`` rule deletes the edges given in ``drop``. Tick 0 loads a random graph; then, drawn at
random the way users make them (never the change that is cheap):

* ``edge``: one new edge between two random nodes, at a random cost;
* ``grow``: one new edge from a reached node to one not reached (the global count changes);
* ``delete``: a random stored edge given to ``drop`` (its ``<-`` fact is taken this tick) and
  the next, empty tick that applies it (measured as the two ticks together, jobs per tick);
* ``empty``: a tick with no input.

``--shape notin`` measures ``Blocked`` instead: the links not into a blocked node, as a scratch
and as a table (a ``notin`` whose right side changes), open links per source and in all
(``group``s of the scratch); tick 0 loads the graph and blocks 10 random nodes, then:
``block`` (a random node not blocked is blocked: the right side gains a row, the node's links
leave the scratch), ``unblock`` (a random blocked node is unblocked by ``<-``: the fact is
taken, the next tick applies it and the links are derived again), ``edge`` and ``empty`` as
above. ``--shape both`` (the default) runs one, then the other.

Spark's own status store (the driver's ``AppStatusStore``, the data the Spark UI shows) counts
what a tick costs: its jobs, the jobs among them with no description, and the input records its
stages read (``inputRecords``, which counts rows read back from checkpointed blocks and Parquet
files). Each size runs twice: with a checkpoint directory (state kept as Parquet files, as
docs/spark.md tells production users), then without one (state in ``localCheckpoint``s). Prints
the median and the worst of each kind per size (records, and the rows the tick changed: its
input rows plus the rows its fixpoint rounds made new or grew, ``result.touched``), the ratio
of the records read at the large size to the small one, and what the worst tick of each kind
read per row it changed.

Targets (exits 1 when one is missed): records read at the large size at most 3x those at the
small one (median and worst of each kind; with the checkpoint directory, for information
without), at most 8 jobs per tick, an empty tick 0 jobs, no job without a description.
"""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
# ruff: noqa: B015

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_merge import session

from blooml import Program, bloom, count, lmin, scratch, table
from blooml.spark import SparkEngine

RECORDS_RATIO = 3.0
MAX_JOBS = 8
KINDS = ("edge", "grow", "delete", "empty")
#: what the descriptions of the jobs the engine runs between ticks (compaction) contain
MAINTENANCE = " maintenance after tick "


class SSSPReach(Program):
    """Shortest paths from ``source``, the nodes reached, out-edges per node, reached count."""

    link = table(["src", "dst", "c"])
    source = table(["node"])
    dist = table(["node"], ["d"])
    reach = table(["node"])
    fanout = scratch(["src"], ["n"])
    reached = scratch([], ["n"])
    drop = scratch(["src", "dst", "c"])

    # fmt: off
    @bloom
    def rules(self):
        self.dist <= self.source.map(lambda s: (s.node, lmin(0)))
        self.dist <= self.dist.join(self.link, self.dist.node == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )
        self.reach <= self.dist.map(lambda d: (d.node,))
        self.fanout <= self.link.group(["src"], count())
        self.reached <= self.reach.group([], count())
        self.link <- self.drop
    # fmt: on


class Blocked(Program):
    """Links not into a blocked node (a ``notin`` whose right side changes): as a scratch
    (this tick's) and a table (every link ever open); open links per source node and in all
    (``group``s of the scratch, which follow its retractions); ``<-`` unblocks a node."""

    link = table(["src", "dst", "c"])
    block = table(["node"])
    unblock = scratch(["node"])
    open = scratch(["src", "dst", "c"])
    ever = table(["src", "dst", "c"])
    per = scratch(["src"], ["n"])
    total = scratch([], ["n"])

    # fmt: off
    @bloom
    def rules(self):
        self.open <= self.link.notin(self.block, self.link.dst == self.block.node)
        self.ever <= self.link.notin(self.block, self.link.dst == self.block.node)
        self.per <= self.open.group(["src"], count())
        self.total <= self.open.group([], count())
        self.block <- self.unblock
    # fmt: on


#: the kinds of tick of each shape (``--shape``)
SHAPES = {"sssp": KINDS, "notin": ("block", "unblock", "edge", "empty")}


class Meter:
    """Jobs run (and those with no description) and input records read since the last
    :meth:`take`, from Spark's status store (classic sessions: the driver's ``AppStatusStore``)."""

    def __init__(self, spark: Any) -> None:
        self.sc = spark.sparkContext
        self.store = self.sc._jsc.sc().statusStore()
        self.jobs, self.stages = self._top_job(), self._top_stage()
        self.undescribed: list[str] = []
        #: the jobs of the last :meth:`take`: (description, input records of their stages)
        self.last: list[tuple[str, int]] = []
        #: the compaction jobs the engine ran between ticks (description, records)
        self.maintenance: list[tuple[str, int]] = []

    def _jobs(self) -> list[Any]:
        out, it = [], self.store.jobsList(None).iterator()
        while it.hasNext():
            out.append(it.next())
        return out

    def _top_job(self) -> int:
        return max((j.jobId() for j in self._jobs()), default=-1)

    def _stages(self) -> list[Any]:
        gw = self.sc._gateway
        seq = self.store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None)
        out, it = [], seq.iterator()
        while it.hasNext():
            out.append(it.next())
        return out

    def _top_stage(self) -> int:
        return max((s.stageId() for s in self._stages()), default=-1)

    def take(self, *, record: bool = True) -> tuple[int, int, int]:
        """(jobs, jobs with no description, input records) since the previous call; the
        names of the jobs with no description are kept in ``undescribed`` (if ``record``)."""
        new = [j for j in self._jobs() if j.jobId() > self.jobs]
        bare = [j for j in new if not j.description().isDefined()]
        if record:
            self.undescribed += [str(j.name()) for j in bare]
        stages = self._stages()
        done = {
            s.stageId(): s.inputRecords()
            for s in stages
            if s.stageId() > self.stages and str(s.status()) == "COMPLETE"
        }
        records = sum(done.values())
        self.last = []
        upkeep = 0
        for j in sorted(new, key=lambda j: j.jobId()):
            ids = [int(x) for x in _seq(j.stageIds())]
            what = str(j.description().get()) if j.description().isDefined() else str(j.name())
            got = sum(done.get(i, 0) for i in ids)
            if MAINTENANCE in what:  # compaction between ticks: counted apart
                self.maintenance.append((what, got))
                upkeep += 1
                records -= got
            else:
                self.last.append((what, got))
        self.jobs = max([self.jobs, *(j.jobId() for j in new)])
        self.stages = max([self.stages, *(s.stageId() for s in stages)])
        return len(new) - upkeep, len(bare), records


def _seq(seq: Any) -> list[Any]:
    out, it = [], seq.iterator()
    while it.hasNext():
        out.append(it.next())
    return out


def graph(rnd: random.Random, edges: int) -> tuple[list[tuple[int, int, int]], int]:
    """A uniformly random graph of ``edges`` edges over ``edges // 5`` nodes, costs 1..100."""
    nodes = max(4, edges // 5)
    links = {
        (rnd.randrange(nodes), rnd.randrange(nodes)): rnd.randint(1, 100) for _ in range(edges)
    }
    return [(a, b, c) for (a, b), c in links.items()], nodes


def measure(
    spark: Any, edges: int, rnd: random.Random, ticks: int, shape: str = "sssp"
) -> dict[str, Any]:
    """Tick 0 loads a graph; then ``ticks`` ticks of each kind of ``shape``, interleaved in a
    random order. Returns kind -> [(jobs, most jobs in one tick, undescribed jobs, records,
    seconds, rows changed)]; rows changed: the input rows plus the rows the tick's fixpoint
    rounds made new or grew (``result.touched``)."""
    links, nodes = graph(rnd, edges)
    links_df = spark.createDataFrame(links, "src bigint, dst bigint, c bigint").localCheckpoint()
    kinds = SHAPES[shape]
    blocked: set[int] = set()
    if shape == "sssp":
        engine = SparkEngine(spark, path="dataframe", program=SSSPReach)
        engine.tick({"link": links_df, "source": [(links[0][0],)]})
        reached = {r[0] for r in engine.tick({}).rows("reach")}
    else:
        engine = SparkEngine(spark, path="dataframe", program=Blocked)
        blocked = set(rnd.sample(range(nodes), 10))
        engine.tick({"link": links_df, "block": [(n,) for n in sorted(blocked)]})
        reached = set()
    stored = list(links)
    plan = [k for k in kinds for _ in range(ticks)]
    rnd.shuffle(plan)
    meter = Meter(spark)
    out: dict[str, list[tuple[int, int, int, int, float, int]]] = {k: [] for k in kinds}
    worst: dict[str, tuple[int, list[tuple[str, int]]]] = {}
    for kind in plan:
        steps: list[dict[str, Any]]
        if kind == "edge":
            new = (rnd.randrange(nodes), rnd.randrange(nodes), rnd.randint(1, 100))
            steps = [{"link": [new]}]
            stored.append(new)
        elif kind == "grow":
            a = rnd.choice(sorted(reached))
            b = rnd.choice([n for n in range(nodes) if n not in reached] or [a])
            new = (a, b, rnd.randint(1, 100))
            steps = [{"link": [new]}]
            stored.append(new)
        elif kind == "delete":
            gone = stored.pop(rnd.randrange(len(stored)))
            steps = [{"drop": [gone]}, {}]
        elif kind == "block":  # the notin's right side gains a row
            node = rnd.choice([n for n in range(nodes) if n not in blocked])
            blocked.add(node)
            steps = [{"block": [(node,)]}]
        elif kind == "unblock":  # it loses one: the fact is taken, then applied
            node = rnd.choice(sorted(blocked))
            blocked.discard(node)
            steps = [{"unblock": [(node,)]}, {}]
        else:
            steps = [{}]
        meter.take(record=False)  # what ran between the measured ticks (the checks below)
        jobs = most = bare = records = changed = 0
        t = time.perf_counter()
        result = None
        listing: list[tuple[str, int]] = []
        for inputs in steps:
            result = engine.tick(inputs)
            changed += sum(len(v) for v in inputs.values()) + sum(map(sum, result.touched))
            j, u, r = meter.take()
            jobs, most, bare, records = jobs + j, max(most, j), bare + u, records + r
            listing += meter.last
        seconds = time.perf_counter() - t
        out[kind].append((jobs, most, bare, records, seconds, changed))
        if records >= worst.get(kind, (-1, []))[0]:
            worst[kind] = (records, listing)
        if kind == "grow":  # outside the measured window: what is reached now
            assert result is not None
            reached = {r[0] for r in result.rows("reach")}
            (n,) = result.rows("reached")[0]
            assert n == len(reached), (n, len(reached))
    # compaction: what the engine did by itself between ticks, then all overlays written anew
    meter.take(record=False)
    auto = list(meter.maintenance)
    t = time.perf_counter()
    written = engine.compact()
    seconds = time.perf_counter() - t
    meter.take()
    asked = meter.maintenance[len(auto) :]
    return {
        "edges": edges,
        "ticks": out,
        "undescribed": meter.undescribed,
        "worst": worst,
        "compact": (auto, asked, written, seconds),
    }


def median_worst(rows: list[tuple[int, int, int, int, float, int]], i: int) -> tuple[float, float]:
    vals = [r[i] for r in rows]
    return statistics.median(vals), max(vals)


def report(
    label: str, results: list[dict[str, Any]], check: bool, verbose: bool = False
) -> list[str]:
    """Print one configuration's figures; the targets missed (records: only if ``check``)."""
    failures = []
    print(f"\n== {label} ==", flush=True)
    for r in results:
        print(f"\n{r['edges']:,} edges (median / worst of {len(r['ticks']['edge'])} per kind)")
        for kind in r["ticks"]:
            rows = r["ticks"][kind]
            jm, jw = median_worst(rows, 1)
            rm, rw = median_worst(rows, 3)
            tm, tw = median_worst(rows, 4)
            cm, cw = median_worst(rows, 5)
            bare = sum(x[2] for x in rows)
            print(
                f"  {kind:7s} jobs/tick {jm:4.1f} / {jw:3d}   records {rm:>10,.0f} / {rw:>10,}"
                f"   rows changed {cm:>5,.0f} / {cw:>5,}"
                f"   {tm:5.2f} / {tw:5.2f} s   undescribed jobs {bare}"
            )
            if bare:
                failures.append(f"{label}, {r['edges']:,} edges, {kind}: {bare} undescribed jobs")
            if jw > MAX_JOBS:
                failures.append(f"{label}, {r['edges']:,}, {kind}: {jw} jobs (> {MAX_JOBS})")
            if kind == "empty" and jw > 0:
                failures.append(f"{label}, {r['edges']:,}, empty tick: {jw} jobs (> 0)")
        auto, asked, written, secs = r["compact"]
        print(
            f"  compaction between ticks: by the engine {len(auto)} jobs, "
            f"{sum(x[1] for x in auto):,} records; engine.compact() after the last tick "
            f"({', '.join(f'{n} {c:,} rows' for n, c in written.items()) or 'nothing'}): "
            f"{len(asked)} jobs, {sum(x[1] for x in asked):,} records, {secs:.2f} s"
        )
        if verbose:
            for kind, (n, listing) in r["worst"].items():
                print(f"  the worst {kind} tick's jobs ({n:,} records):")
                for what, got in listing:
                    print(f"    {got:>9,}  {what}")
        if r["undescribed"]:
            print(f"  jobs with no description: {sorted(set(r['undescribed']))}")
    small, large = results
    print(f"\nrecords read, {large['edges']:,} vs {small['edges']:,} edges (median, worst):")
    for kind in [k for k in small["ticks"] if k != "empty"]:
        ms, ws = median_worst(small["ticks"][kind], 3)
        ml, wl = median_worst(large["ticks"][kind], 3)
        rm, rw = ml / max(ms, 1), wl / max(ws, 1)
        ok = rm <= RECORDS_RATIO and rw <= RECORDS_RATIO
        verdict = ("ok" if ok else "MISSED") if check else "(for information)"
        print(f"  {kind:7s} {rm:5.1f}x  {rw:5.1f}x  (<= {RECORDS_RATIO}) {verdict}")
        # what the tick that read the most read per row it changed (its change, not the
        # state, is what a tick's lookups follow)
        per = []
        for r in (small, large):
            top = max(r["ticks"][kind], key=lambda x: x[3])
            per.append(f"{top[3]:,} for {top[5]:,} ({top[3] / max(top[5], 1):,.0f} a row)")
        print(f"          the worst tick's records for the rows it changed: {per[0]}; {per[1]}")
        if check and not ok:
            failures.append(f"{label}, {kind}: records ratio {rm:.1f}x / {rw:.1f}x")
    return failures


def layout(spark: Any, edges: int, rnd: random.Random) -> None:
    """Lookups by a column other than the first of a state file: the engine's layout (sorted
    by the first column, a Bloom filter per column and row group) looked up by one ``IN`` list
    (as the engine looks up) and by ``IN`` lists of at most 10 values OR-ed (each pushed to
    Parquet as equalities: ``spark.sql.parquet.pushdown.inFilterThreshold``), against the same
    rows sorted and written as plain Parquet, and the engine's lookup (:class:`Lookups`) by
    the copy of the rows sorted by the column, which the engine writes for each column other
    than the first the rules look a collection up by (``lookup_columns``: a page per value);
    records read from the status store, file sizes. Two columns: ``dst`` of a random graph
    (each value in ~5 rows spread over the file) and a column whose values are all distinct
    (each in one row group)."""
    from functools import reduce

    from pyspark.sql import functions as F

    from blooml.spark._dffiles import keep_state
    from blooml.spark._dflookup import Lookups

    links, _ = graph(rnd, edges)
    perm = list(range(len(links)))
    rnd.shuffle(perm)
    rows = [(a, b, c, perm[i]) for i, (a, b, c) in enumerate(links)]
    df = spark.createDataFrame(rows, "c0 bigint, c1 bigint, c2 bigint, c3 bigint")
    root = tempfile.mkdtemp(prefix="blooml-bench-layout-")
    spark.sparkContext.setCheckpointDir(root)
    plain_path = f"{root}/plain"
    df.sort("c0").write.option("parquet.block.size", 32 << 10).parquet(plain_path)
    files: list[str] = []
    # with its copies sorted by c1 and by c3 (files[1], files[2]): what the engine's lookups
    # by those columns read; a filter on ``kept`` itself reads its own files (Bloom filters)
    kept = keep_state(df, files, sort=True, rows=len(rows), by=["c1", "c3"])
    plain = spark.read.parquet(plain_path)
    meter = Meter(spark)
    print(f"\n== lookups by a column other than the first, {len(rows):,} rows ==")
    print(
        "  records read: plain Parquet / Bloom filters (the file sorted by c0), one IN list /"
        " IN lists of <= 10 / the engine's lookup, by the copy sorted by the column"
    )
    for col, what in (("c1", "dst (values spread)"), ("c3", "a column of distinct values")):
        print(f"  by {what}:")
        for n in (1, 5, 10, 20, 100, 1000):
            vals = sorted({r[1 if col == "c1" else 3] for r in rnd.sample(rows, n)})
            got = []
            for frame, where in (
                (plain, F.col(col).isin(vals)),
                (kept, F.col(col).isin(vals)),
                (
                    kept,
                    reduce(
                        lambda a, b: a | b,
                        [F.col(col).isin(vals[i : i + 10]) for i in range(0, len(vals), 10)],
                    ),
                ),
            ):
                meter.take(record=False)
                found = frame.where(where).count()
                got.append((found, meter.take(record=False)[2]))
            meter.take(record=False)
            found = len(Lookups().rows(kept, [col], [(v,) for v in vals]))
            got.append((found, meter.take(record=False)[2]))
            assert len({g[0] for g in got}) == 1, got
            print(
                f"    {n:5d} values: {got[0][1]:>9,} / {got[1][1]:>9,} / {got[2][1]:>9,}"
                f" / {got[3][1]:>9,} records ({got[0][0]:,} rows)"
            )
    size = {
        p: sum(f.stat().st_size for f in Path(p.removeprefix("file:")).rglob("*.parquet"))
        for p in (plain_path, *files)
    }
    print(
        f"  file size: plain {size[plain_path] / 1e6:.2f} MB, "
        f"engine's {size[files[0]] / 1e6:.2f} MB, its copies sorted by c1 and c3 "
        f"{size[files[1]] / 1e6:.2f} MB and {size[files[2]] / 1e6:.2f} MB"
    )
    sc = spark.sparkContext
    getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--large", type=int, default=200_000)
    ap.add_argument("--ticks", type=int, default=10)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--jobs", action="store_true", help="list the jobs of the worst tick of each kind"
    )
    ap.add_argument(
        "--no-plain", action="store_true", help="skip the runs without a checkpoint directory"
    )
    ap.add_argument(
        "--layout",
        action="store_true",
        help="only measure lookups by the second column of a state file (Bloom filters, and the "
        "copy sorted by it)",
    )
    ap.add_argument(
        "--shape",
        choices=("sssp", "notin", "both"),
        default="both",
        help="the program measured: sssp (SSSPReach), notin (Blocked), or both in turn",
    )
    args = ap.parse_args(argv)
    rnd = random.Random(args.seed)
    spark = session()
    print(f"Spark {spark.version}, local[2]")
    if args.layout:
        layout(spark, args.large, rnd)
        spark.stop()
        return 0
    shapes = ("sssp", "notin") if args.shape == "both" else (args.shape,)
    failures = []
    for shape in shapes:
        measure(spark, 200, rnd, 2, shape)  # warm up: JVM, code generation, Python workers
    sizes = (args.small, args.large)
    # with a checkpoint directory (the configuration the targets are for) first, then without
    tmp = tempfile.TemporaryDirectory(prefix="blooml-bench-tick-")
    sc = spark.sparkContext
    for shape in shapes:
        name = SSSPReach.__name__ if shape == "sssp" else Blocked.__name__
        spark.sparkContext.setCheckpointDir(tmp.name)
        kept = [measure(spark, n, rnd, args.ticks, shape) for n in sizes]
        failures += report(f"{name}, with a checkpoint directory", kept, True, args.jobs)
        getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))  # unset
        if not args.no_plain:
            plain = [measure(spark, n, rnd, args.ticks, shape) for n in sizes]
            failures += report(f"{name}, without a checkpoint directory", plain, False, args.jobs)
    spark.stop()
    tmp.cleanup()
    if failures:
        print("\nMISSED: " + "; ".join(failures))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
