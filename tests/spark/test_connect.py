"""Spark Connect: the DataFrame functions work on a Connect session (a local Connect server in a
child process: one JVM cannot hold a classic and a Connect-server session side by side); the
RDD-only functions fail at once naming what to use instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the spark extra")

HERE = Path(__file__).resolve().parent

_SCRIPT = textwrap.dedent(
    """
    import json
    import blooml.spark
    from pyspark.sql import SparkSession, functions as F
    from blooml.errors import LatticeValueError, NotSupportedOnSpark
    from blooml.lattices import lmax, lset
    from blooml.lattices.crdts import lorset
    from blooml.spark import (
        SparkEngine, Structured, fold_by_key, from_spark, merge_column, to_rdd, to_spark,
        worker_errors,
    )
    from blooml.spark.functions import lfold, lmerge
    from _user_lattice import lsum

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    out = {"connect": type(spark).__module__}
    df = spark.createDataFrame(
        [("a", 1, "x"), ("a", 2, "y"), ("b", None, None)], "k string, v bigint, e string"
    )
    agg = df.groupBy("k").agg(
        lfold("v", lset).alias("s"),
        lfold("v", lmax).alias("m"),
        lfold(["e", "v"], Structured(lorset)).alias("o"),
        lfold("v", lsum).alias("u"),
        F.count("*").alias("n"),
    )
    out["agg"] = {
        r.k: [
            repr(from_spark(r.s, lset)),
            repr(from_spark(r.m, lmax)),
            repr(from_spark(r.o, Structured(lorset))),
            repr(from_spark(r.u, lsum)),
            r.n,
        ]
        for r in agg.collect()
    }
    merged = merge_column(agg, "k", "s", lset)
    out["merge_column"] = {r.k: repr(from_spark(r.s, lset)) for r in merged.collect()}
    cells = spark.createDataFrame(
        [("a", to_spark(lsum(1), lsum)), ("b", to_spark(lsum(13), lsum)),
         ("b", to_spark(lsum(2), lsum))],
        "k string, v binary",
    )
    try:
        with worker_errors():
            merge_column(cells, "k", "v", lsum).collect()
    except LatticeValueError as exc:
        out["worker_error"] = [type(exc).__name__, exc.key, exc.call]
    from blooml import Program, bloom, table

    class Closure(Program):
        edge = table(["a", "b"])
        path = table(["a", "b"])

        @bloom
        def rules(self):
            self.path <= self.edge
            self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
                lambda p, e: (p.a, e.b)
            )

    result = SparkEngine(spark).run(Closure, {"edge": [(1, 2), (2, 3), (3, 4)]})
    out["closure"] = sorted(result.rows("path"))
    out["touched"] = result.touched
    errors = []
    for call in (
        lambda: to_rdd(df, "k", "v", lmax),
        lambda: fold_by_key(df, lset),
        lambda: SparkEngine(spark, path="rdd"),
    ):
        try:
            call()
        except NotSupportedOnSpark as exc:
            errors.append(str(exc))
    out["errors"] = errors
    limit = 2

    class Cheap(Program):  # a closure and a conditional: runs as Arrow-batched Python
        link = table(["src", "dst", "w"])
        cheap = table(["src", "dst"])

        @bloom
        def rules(self):
            self.cheap <= self.link.map(lambda lk: (lk.src, lk.dst) if lk.w <= limit else None)

    links = [(1, 2, 1), (2, 3, 5), (3, 4, 2)]
    local = Cheap()
    local.link.insert(links)
    local.tick()
    cheap = SparkEngine(spark, path="dataframe").run(Cheap, {"link": links}).rows("cheap")
    out["python"] = [sorted(cheap), sorted(map(tuple, local.cheap))]
    print("RESULT " + json.dumps(out))
    spark.stop()
    """
)


def test_functions_on_a_local_connect_server(tmp_path: Path) -> None:
    script = tmp_path / "connect_job.py"
    script.write_text(_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYTHONPATH"] = str(HERE)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(lines[0][len("RESULT ") :])
    assert out["connect"].startswith("pyspark.sql.connect")
    assert out["agg"] == {
        "a": ["lset({1, 2})", "lmax(2)", "lorset({'x': {1}, 'y': {2}})", "lsum(2)", 2],
        "b": ["lset()", "lmax()", "lorset()", "lsum(0)", 1],
    }
    assert out["merge_column"] == {"a": "lset({1, 2})", "b": "lset()"}
    assert out["worker_error"] == [
        "LatticeValueError",
        "'b'",
        "merge_column(df, ['k'], 'v', lsum)",
    ]
    assert len(out["errors"]) == 3
    for msg in out["errors"]:
        assert "Spark Connect" in msg
    assert "lmerge" in out["errors"][0] and "lfold" in out["errors"][1]
    # SparkEngine on Connect: the program as DataFrame plans
    assert out["closure"] == [[1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4]]
    assert out["touched"][-1][-1] == 0
    # a rule body that does not lower runs as Arrow-batched Python on Connect too
    assert out["python"][0] == out["python"][1] == [[1, 2], [3, 4]]
