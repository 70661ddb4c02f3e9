"""What exact sums cost (issue 27): ``sum_``/``avg`` of floats as ``math.fsum``'s value.

Run: ``.venv/bin/python benchmarks/bench_exact_sum.py [--part local|spark|both] [--rows N]
[--groups G] [--repeat R]`` (defaults: both parts, 100,000 rows, 1,000 groups, 5 runs a side).

The values are random floats of mixed magnitudes (uniform in ±1e6 times 10**k, k in -6..6)
with one in ten an int, drawn once per run; both sides of each comparison sum the same groups
and alternate, so the machine's load weighs on both. Printed per side: median and 90th
percentile of the runs, and the ratio of the medians (exact / plain).

* ``local``: a program with ``group(["k"], sum_("v"), avg("v"))`` loads the rows in one tick,
  then runs 40 ticks of 10 deleted or re-inserted rows on the incremental core (4 on the
  reference evaluator, which re-derives every group each tick); against the same engine
  with its sums swapped for plain ones (floats added as they come, as before issue 27).
  The aggregate alone (``apply_aggregate`` against ``sum``) is printed for information.
* ``spark``: ``groupBy(k).agg(exact_sum(v))`` (fsum's algorithm in SQL higher-order
  functions, what ``SparkEngine`` runs for a ``double`` column) against
  ``groupBy(k).agg(F.sum(v))``, on a cached DataFrame, written to the ``noop`` sink.

Targets (exit 1 when missed): each local engine run ≤ 1.5× its plain-sum run; Spark ≤ 6×
``F.sum``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

LOCAL_TARGET = 1.5
SPARK_TARGET = 6.0


def _values(rows: int, groups: int, seed: int = 27) -> list[tuple[int, float]]:
    rnd = random.Random(seed)
    out: list[tuple[int, Any]] = []
    for _ in range(rows):
        v: Any = rnd.uniform(-1e6, 1e6) * 10 ** rnd.randint(-6, 6)
        if rnd.random() < 0.1:
            v = int(v) or 1
        out.append((rnd.randrange(groups), v))
    return out


def _stats(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(0.9 * len(times)))]


def _race(sides: dict[str, Callable[[], Any]], repeat: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(repeat):
        for name, fn in sides.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {k: _stats(v) for k, v in times.items()}


def _report(title: str, res: dict[str, tuple[float, float]], exact: str, plain: str) -> float:
    print(f"== {title}")
    for name, (med, p90) in res.items():
        print(f"  {name:<40} median {med * 1000:9.1f} ms   p90 {p90 * 1000:9.1f} ms")
    ratio = res[exact][0] / res[plain][0]
    print(f"  ratio (median, exact / plain): {ratio:.2f}")
    return ratio


class _PlainSum:
    """The running sum of before issue 27 (floats added as they come), for the baseline."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total: Any = 0
        self.n = 0

    def add(self, v: Any, w: int = 1) -> None:
        self.total += v * w
        self.n += w

    def value(self) -> Any:
        return self.total if self.n else None


def _engine(data: list[tuple[int, Any]], incremental: bool, plain: bool) -> Callable[[], None]:
    """One engine run: tick 0 loads the rows; then 40 ticks (the reference evaluator, which
    re-derives everything each tick: 4) of 10 random deleted or re-inserted rows each.
    ``plain``: the engine's sums swapped for plain ones (the baseline)."""
    import blooml.engine._zgroup as zops
    import blooml.ir.aggregates as aggs
    from blooml import Program, avg, bloom, scratch, sum_, table

    class Sums(Program):
        t = table(["i"], ["k", "v"])
        s = scratch(["k"], ["total", "mean"])

        @bloom
        def rules(self) -> None:
            self.s <= self.t.group(["k"], sum_("v"), avg("v"))  # noqa: B015

    rows = [(i, k, v) for i, (k, v) in enumerate(data)]
    rnd = random.Random(5)
    changes = [rnd.sample(rows, 10) for _ in range(20 if incremental else 2)]

    def run() -> None:
        saved = (aggs.exact_sum, zops.ExactSum)
        if plain:
            aggs.exact_sum, zops.ExactSum = sum, _PlainSum  # type: ignore[assignment]
        try:
            p = Sums(incremental=incremental)
            p.t.insert(rows)
            p.tick()
            for ch in changes:
                p.t.delete(ch)
                p.tick()
                p.t.insert(ch)
                p.tick()
        finally:
            aggs.exact_sum, zops.ExactSum = saved

    return run


def local(rows: int, groups: int, repeat: int) -> bool:
    from blooml.ir.aggregates import apply_aggregate

    data = _values(rows, groups)
    ok = True
    for incremental in (True, False):
        what = "incremental core" if incremental else "reference evaluator (incremental=False)"
        r = _report(
            f"local: group(k, sum_(v), avg(v)), {rows:,} rows, then 40 ticks of 10 changes; {what}",
            _race(
                {
                    "exact sums": _engine(data, incremental, plain=False),
                    "plain sums": _engine(data, incremental, plain=True),
                },
                repeat,
            ),
            "exact sums",
            "plain sums",
        )
        if r > LOCAL_TARGET:
            print(f"  MISSED: target <= {LOCAL_TARGET}")
            ok = False
    by: dict[int, list[Any]] = {}
    for k, v in data:
        by.setdefault(k, []).append(v)
    lists = list(by.values())
    _report(
        "local: the aggregate alone, per group (for information)",
        _race(
            {
                "apply_aggregate('sum') (fsum)": lambda: [
                    apply_aggregate("sum", vs, vs) for vs in lists
                ],
                "sum()": lambda: [sum(vs) for vs in lists],
            },
            repeat,
        ),
        "apply_aggregate('sum') (fsum)",
        "sum()",
    )
    return ok


def spark_part(rows: int, groups: int, repeat: int) -> bool:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from blooml.spark._exactsum import exact_sum

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("blooml-bench-exact-sum")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    data = [(k, float(v)) for k, v in _values(rows, groups)]
    df = spark.createDataFrame(data, "k bigint, v double").repartition(4).cache()
    df.count()

    def run(agg: Any) -> Callable[[], None]:
        return lambda: (
            df.groupBy("k").agg(agg.alias("s")).write.format("noop").mode("overwrite").save()
        )

    run(exact_sum("v"))()  # warm up both plans' code generation
    run(F.sum("v"))()
    res = _race(
        {"agg(exact_sum(v))": run(exact_sum("v")), "agg(F.sum(v))": run(F.sum("v"))}, repeat
    )
    r = _report(
        f"spark: groupBy(k) over {rows:,} rows, {groups:,} groups",
        res,
        "agg(exact_sum(v))",
        "agg(F.sum(v))",
    )
    # the two agree with fsum on every group (the reason for the cost)
    import math

    got = {row.k: row.s for row in df.groupBy("k").agg(exact_sum("v").alias("s")).collect()}
    want: dict[int, list[float]] = {}
    for k, v in data:
        want.setdefault(k, []).append(v)
    bad = sum(1 for k, vs in want.items() if got[k] != math.fsum(vs))
    print(f"  groups whose exact_sum differs from math.fsum: {bad} of {len(want)}")
    spark.stop()
    ok = bad == 0
    if r > SPARK_TARGET:
        print(f"  MISSED: target <= {SPARK_TARGET}")
        ok = False
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["local", "spark", "both"], default="both")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    ok = True
    if a.part in ("local", "both"):
        ok &= local(a.rows, a.groups, a.repeat)
    if a.part in ("spark", "both"):
        ok &= spark_part(a.rows, a.groups, a.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
