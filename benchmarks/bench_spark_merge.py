"""Spark merges: lattice builders vs mutable sets, native SQL lowering vs the pickled RDD path.

Run: ``.venv/bin/python benchmarks/bench_spark_merge.py [--pairs N] [--keys K] [--repeat R]``
(defaults: 1,000,000 pairs, 1,000 keys, best of 2, ``local[2]``).

Part 1 — per-key folds of ``(key, element)`` pairs, against ``aggregateByKey`` over mutable
Python sets mutated in place (the baseline, measured in the same run):

* ``fold_by_key(rdd, lset)``: the builder path (``add`` per element, one freeze per key);
* ``merge_by_key`` of ``(key, lset singleton)`` pairs, the singletons made in the same pipelined
  stage (also shown against sets fed singleton frozensets made the same way);
* ``fold_by_key(rdd, lmax)``; ``aggregateByKey`` with plain ``max`` shown for information.

Target: each builder path within 2x of the mutable-set baseline (the stricter comparisons are
printed for information).

Part 2 — ``merge_column`` on a cached DataFrame of the same size: the native column (SQL
aggregates, no Python worker) against the plan a PySpark user writes by hand (``max``; the
elements exploded and ``collect_set`` per key) and against the same values pickled in a
``binary`` column (merged by Python in an Arrow UDF, as for pickled CRDTs and user lattices).
The three plans alternate, each planned per run. Target: the Python path at least 5x slower
than native for lmax, 4x for lset. Native against the plan by hand is printed for information:
their physical plans are identical, so the ratio shows only the machine's noise.

Why lset's bar is 4 (it was 5): it was set when the Python path was the pickled RDD path, one
Python call per row. Now the Python path runs in Arrow batches, and native lset is exactly the
plan by hand (explode, ``collect_set``), so the ratio is what Spark's ``collect_set`` of
1,000,000 distinct elements costs against Python's set unions: 4.3-8.5 in five runs under a
load average of 14-18 on 2 cores (lmax: 15-26).

``--part 1`` or ``--part 2`` runs one part.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

BUILDER_TARGET = 2.0
#: how much slower the Python (Arrow UDF) path must be than the native one, per lattice
PYTHON_TARGET = {"lmax": 5.0, "lset": 4.0}


def session(master: str = "local[2]") -> Any:
    """A local SparkSession for benchmarks (workers run this interpreter)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("blooml-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Fastest of ``repeat`` runs (the least disturbed by other processes) and its result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


# -- the baselines (plain Python accumulators) -------------------------------------------------


def _set_add(s: set[Any], x: Any) -> set[Any]:
    s.add(x)
    return s


def _set_update(s: set[Any], x: frozenset[Any]) -> set[Any]:
    s.update(x)
    return s


def _set_union(a: set[Any], b: set[Any]) -> set[Any]:
    a |= b
    return a


def _max_or_none(a: Any, x: Any) -> Any:
    return x if a is None or x > a else a


def _max2(a: Any, b: Any) -> Any:
    return b if a is None or (b is not None and b > a) else a


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--part", choices=["all", "1", "2"], default="all")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from blooml.lattices import lmax, lset
    from blooml.spark import Pickled, fold_by_key, merge_by_key, merge_column, to_spark

    n, k, parts, rep = args.pairs, args.keys, args.partitions, args.repeat
    t0 = time.perf_counter()
    spark = session()
    sc = spark.sparkContext
    print(
        f"Spark {spark.version}, local[2], {n:,} pairs, {k:,} keys, {parts} partitions, "
        f"best of {rep} (session start {time.perf_counter() - t0:.1f} s)"
    )

    pairs = sc.parallelize(range(n), parts).map(lambda i: (i % k, i)).cache()
    pairs.count()
    failures: list[str] = []

    def check(name: str, ratio: float, ok: bool, target: str) -> None:
        verdict = "ok" if ok else "MISSED"
        print(f"  -> {name}: {ratio:.2f} ({target}) {verdict}")
        if not ok:
            failures.append(f"{name}: {ratio:.2f} ({target})")

    if args.part in ("all", "1"):
        print("\nPart 1: per-key folds in aggregateByKey (seconds)")
        t_set, sizes = best_of(
            rep,
            lambda: dict(
                pairs.aggregateByKey(set(), _set_add, _set_union).mapValues(len).collect()
            ),
        )
        print(f"  baseline: mutable Python sets        {t_set:7.2f}")
        t_fold, got = best_of(rep, lambda: dict(fold_by_key(pairs, lset).collect()))
        assert {key: len(v) for key, v in got.items()} == sizes
        print(f"  fold_by_key(rdd, lset)               {t_fold:7.2f}")
        check("fold_by_key lset / sets", t_fold / t_set, t_fold <= BUILDER_TARGET * t_set, "<= 2")

        # merge_by_key takes lattice values: one Python object per row, made in the same stage.
        # Its fair baseline gets one object per row too (a singleton frozenset, merged in place).
        frozen = pairs.map(lambda kv: (kv[0], frozenset((kv[1],))))
        t_fset, _ = best_of(
            rep,
            lambda: frozen.aggregateByKey(set(), _set_update, _set_union).mapValues(len).collect(),
        )
        print(f"  baseline: sets fed singleton frozensets {t_fset:4.2f}")
        singletons = pairs.map(lambda kv: (kv[0], lset.from_item(kv[1])))
        t_merge, got = best_of(rep, lambda: dict(merge_by_key(singletons).collect()))
        assert {key: len(v) for key, v in got.items()} == sizes
        print(f"  merge_by_key of lset singletons      {t_merge:7.2f}")
        check(
            "merge_by_key lset / sets", t_merge / t_set, t_merge <= BUILDER_TARGET * t_set, "<= 2"
        )
        print(f"     (merge_by_key / sets fed frozensets: {t_merge / t_fset:.2f}, for information)")

        t_max, maxes = best_of(
            rep, lambda: dict(pairs.aggregateByKey(None, _max_or_none, _max2).collect())
        )
        print(f"  baseline: plain max                  {t_max:7.2f}")
        t_lmax, got = best_of(rep, lambda: dict(fold_by_key(pairs, lmax).collect()))
        assert {key: v.reveal() for key, v in got.items()} == maxes
        print(f"  fold_by_key(rdd, lmax)               {t_lmax:7.2f}")
        check("fold_by_key lmax / sets", t_lmax / t_set, t_lmax <= BUILDER_TARGET * t_set, "<= 2")
        print(f"     (fold_by_key lmax / plain max: {t_lmax / t_max:.2f}, for information: lmax")
        print("      validates each item and uses the generic, immutable builder)")

    if args.part in ("all", "2"):
        print("\nPart 2: merge_column, native SQL vs pickled Arrow UDF path (seconds)")
        base = spark.range(n).select((F.col("id") % k).alias("k"), F.col("id").alias("v"))
        cases = [
            ("lmax", lmax, base, Pickled(lmax), lambda v: lmax(v), lambda df: F.max("v")),
            (
                "lset",
                lset,
                base.select("k", F.array("v").alias("v")),
                Pickled(lset),
                lambda v: lset.from_item(v),
                None,  # by hand: the elements exploded, then collect_set
            ),
        ]
        for name, spec, native_df, pickled_spec, make, by_hand in cases:
            native_df = native_df.repartition(parts).cache()
            native_df.count()
            fmt_rows = base.rdd.map(
                lambda r, make=make, ps=pickled_spec: (r[0], to_spark(make(r[1]), ps))
            )
            pickled_df = (
                spark.createDataFrame(fmt_rows, "k long, v binary").repartition(parts).cache()
            )
            pickled_df.count()

            def hand_plan(df: Any, by_hand: Any = by_hand) -> Any:
                if by_hand is None:  # the elements exploded, then collect_set per key
                    exploded = df.select("k", F.explode("v").alias("v"))
                    return exploded.groupBy("k").agg(F.collect_set("v").alias("v"))
                return df.groupBy("k").agg(by_hand(df).alias("v"))

            def run(df: Any, s: Any) -> None:
                merge_column(df, "k", "v", s).write.format("noop").mode("overwrite").save()

            def run_hand(df: Any = native_df) -> None:  # planned per run, as merge_column is
                hand_plan(df).write.format("noop").mode("overwrite").save()

            run(native_df.limit(1000), spec)  # warm up: the first query of a shape plans/compiles
            run(pickled_df.limit(1000), pickled_spec)
            run_hand(native_df.limit(1000))
            # the three alternate, so that a burst of load on the machine hits each of them
            t_hand = t_native = t_pickled = float("inf")
            for _ in range(rep):
                t_hand = min(t_hand, best_of(1, run_hand)[0])
                t_native = min(t_native, best_of(1, lambda df=native_df, s=spec: run(df, s))[0])
                t_pickled = min(
                    t_pickled, best_of(1, lambda df=pickled_df, s=pickled_spec: run(df, s))[0]
                )
            print(
                f"  {name}: native {t_native:6.2f}   by hand {t_hand:6.2f}   "
                f"pickled Arrow UDF path {t_pickled:6.2f}"
            )
            print(f"     ({name} native / by hand: {t_native / t_hand:.2f}, for information)")
            bar = PYTHON_TARGET[name]
            check(
                f"{name} pickled / native",
                t_pickled / t_native,
                t_pickled >= bar * t_native,
                f">= {bar:g}",
            )
            native_df.unpersist()
            pickled_df.unpersist()

    spark.stop()
    return verdict(failures)


def verdict(failures: list[str]) -> int:
    """Print the missed targets (or that all were met); the exit status."""
    if failures:
        print("\nMISSED: " + "; ".join(failures))
        return 1
    print("\nall targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
