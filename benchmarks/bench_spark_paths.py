"""Bloom^L on Spark: single-source shortest paths (lmin) and transitive closure, SparkEngine
against the local engine on the same generated graphs.

Run: ``.venv/bin/python benchmarks/bench_spark_paths.py [--edges N] [--nodes V] [--tc-edges M]``
(defaults: SSSP on 200,000 edges over 50,000 nodes, transitive closure on 600 edges over 500
nodes; ``--edges 1000000 --nodes 200000`` is the issue's size, minutes on a 2-core machine;
``--path rdd`` (default, the published figures) or ``auto``/``dataframe``: SparkEngine's path).

Prints, per program and engine: seconds, semi-naive rounds, rows, and the shuffle bytes Spark
wrote; checks that both engines derive exactly the same rows; and prints the speed ratio. On one
machine the local engine is expected to win (Spark pays per round for jobs and Python workers);
Spark's case is data that does not fit one machine. Exits 1 if the engines disagree.
"""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
# ruff: noqa: B015

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_merge import session

from blooml import Program, bloom, lmin, table
from blooml.spark import SparkEngine


class SSSP(Program):
    """Single-source shortest paths: ``dist`` holds an lmin per node (costs only go down)."""

    link = table(["src", "dst", "c"])
    source = table(["node"])
    dist = table(["node"], ["d"])

    # fmt: off
    @bloom
    def rules(self):
        self.dist <= self.source.map(lambda s: (s.node, lmin(0)))
        self.dist <= self.dist.join(self.link, self.dist.node == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )
    # fmt: on


class Closure(Program):
    """Transitive closure: ``path`` joined with itself (two recursive occurrences)."""

    edge = table(["a", "b"])
    path = table(["a", "b"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
    # fmt: on


def graph(nodes: int, edges: int, seed: int) -> list[tuple[int, int, int]]:
    """A uniformly random directed graph with costs 1..100 (seeded)."""
    rnd = random.Random(seed)
    return [(rnd.randrange(nodes), rnd.randrange(nodes), rnd.randint(1, 100)) for _ in range(edges)]


def shuffle_bytes(spark: Any) -> int | None:
    """Total shuffle bytes written by every stage so far (from Spark's status store)."""
    try:
        store = spark.sparkContext._jsc.sc().statusStore()
        quantiles = getattr(store, "stageList$default$4")()
        stages = store.stageList(None, False, False, quantiles, None)
        return sum(int(stages.apply(i).shuffleWriteBytes()) for i in range(stages.size()))
    except Exception:  # the status store is an internal API; report n/a rather than fail
        return None


def run_spark(spark: Any, program: type[Program], inputs: dict[str, Any], k: int, path: str) -> Any:
    before = shuffle_bytes(spark)
    t0 = time.perf_counter()
    result = SparkEngine(spark, path=path, checkpoint_every=k).run(program, inputs)
    rows = {
        name: sorted(result.rows(name))
        for name in ("dist", "path")
        if name in program.ir().collections
    }
    secs = time.perf_counter() - t0
    after = shuffle_bytes(spark)
    shuffled = None if before is None or after is None else after - before
    return secs, result.rounds, rows, shuffled


def run_local(program: type[Program], inputs: dict[str, Any]) -> Any:
    t0 = time.perf_counter()
    p = program()
    for name, rows in inputs.items():
        getattr(p, name).insert(rows)
    p.tick()
    rows = {
        name: sorted(map(tuple, getattr(p, name)))
        for name in ("dist", "path")
        if name in program.ir().collections
    }
    return time.perf_counter() - t0, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=200_000)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--tc-edges", type=int, default=600)
    ap.add_argument("--tc-nodes", type=int, default=500)
    ap.add_argument(
        "--local-max-edges",
        type=int,
        default=1_000_000,
        help="skip the local engine above this many edges",
    )
    ap.add_argument("--checkpoint-every", type=int, default=8)
    # the published figures (docs/spark.md) are the RDD path's; "auto" runs DataFrame plans
    ap.add_argument("--path", choices=["rdd", "auto", "dataframe"], default="rdd")
    args = ap.parse_args(argv)

    spark = session()
    spark.sparkContext.parallelize(range(100), 2).count()  # start the Python workers
    print(f"Spark {spark.version}, local[2]")
    failures = []

    cases = [
        ("SSSP (lmin)", SSSP, args.edges, args.nodes, lambda g: {"link": g, "source": [(0,)]}),
        (
            "transitive closure",
            Closure,
            args.tc_edges,
            args.tc_nodes,
            lambda g: {"edge": [(s, d) for s, d, _ in g]},
        ),
    ]
    for title, program, m, n, make in cases:
        inputs = make(graph(n, m, seed=7))
        print(f"\n{title}: {m:,} edges, {n:,} nodes")
        secs, rounds, rows, shuffled = run_spark(
            spark, program, inputs, args.checkpoint_every, args.path
        )
        (name,) = rows
        size = f"{shuffled / 1e6:,.1f} MB" if shuffled is not None else "n/a"
        print(
            f"  SparkEngine   {secs:8.2f} s  rounds {list(rounds)}  {len(rows[name]):,} "
            f"{name} rows  shuffle written {size}"
        )
        if m <= args.local_max_edges:
            lsecs, lrows = run_local(program, inputs)
            print(f"  local engine  {lsecs:8.2f} s  {len(lrows[name]):,} {name} rows")
            same = lrows == rows
            print(
                f"  same rows: {'yes' if same else 'NO'};  Spark / local time: {secs / lsecs:.1f}x"
            )
            if not same:
                failures.append(title)
    spark.stop()
    if failures:
        print("\nENGINES DISAGREE: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
