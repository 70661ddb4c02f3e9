"""Running blooml.spark as users do: a script from a venv, spark-submit with the package shipped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from blooml.spark._lazy import check_worker_python

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark", reason="Spark tests need pyspark")

_JOB = textwrap.dedent(
    """
    import os
    import blooml.spark  # sets PYSPARK_PYTHON for the local workers
    from pyspark.sql import SparkSession
    from blooml.lattices import Lattice, lset
    from blooml.spark import fold_by_key, from_spark
    from blooml.spark.functions import lfold, lmerge


    class mymax(Lattice):  # a lattice class of the script itself: __main__.mymax
        __slots__ = ()

        def __init__(self, value=0):
            super().__init__(value)

        def merge(self, other):
            return self if self._v >= other._v else other


    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    rdd = spark.sparkContext.parallelize([("a", 1), ("a", 2), ("b", None)], 2)
    print("RESULT", sorted(fold_by_key(rdd, lset).collect()))
    df = spark.createDataFrame([("a", 1), ("a", 5), ("b", 2), ("b", None)], "k string, v long")
    folded = df.repartition(2).groupBy("k").agg(lfold("v", mymax).alias("m"))
    merged = folded.union(folded).groupBy("k").agg(lmerge("m", mymax).alias("m"))
    print("MAIN", sorted((r.k, from_spark(r.m, mymax)) for r in merged.collect()))
    spark.stop()
    """
)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.pop("PYTHONPATH", None)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def test_a_script_run_from_the_venv_needs_no_pyspark_python(tmp_path: Path) -> None:
    """The README way: `.venv/bin/python job.py`, with no PYSPARK_PYTHON and python3 on PATH
    some other interpreter; the workers still import blooml, and a lattice class the script
    defines (in ``__main__``) works in ``lfold``/``lmerge``."""
    job = tmp_path / "job.py"
    job.write_text(_JOB)
    out = subprocess.run(
        [sys.executable, str(job)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "RESULT [('a', lset({1, 2})), ('b', lset())]" in out.stdout, out.stderr[-3000:]
    # a lattice class of the script (__main__) in lfold/lmerge: pickled on the workers
    assert "MAIN [('a', mymax(5)), ('b', mymax(2))]" in out.stdout, out.stderr[-3000:]


class _FakeContext:
    master = "local[2]"

    def __init__(self, exe: str) -> None:
        self.pythonExec = exe


def test_workers_without_blooml_fail_at_once_with_the_fix(tmp_path: Path) -> None:
    bare = tmp_path / "python3"
    bare.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that cannot import blooml
    bare.chmod(0o755)
    with pytest.raises(ImportError, match="Set PYSPARK_PYTHON to this interpreter"):
        check_worker_python("fold", _FakeContext(str(bare)))
    check_worker_python("fold", _FakeContext(sys.executable))  # this one can
    remote: Any = _FakeContext(str(bare))
    remote.master = "spark://elsewhere:7077"
    check_worker_python("fold", remote)  # not checked: the workers are not on this machine


_SUBMITTED_JOB = textwrap.dedent(
    """
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from blooml.lattices import lmax, lset
    from blooml.spark import fold_by_key, from_spark
    from blooml.spark.functions import lfold

    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    rdd = sc.parallelize([(i % 3, i) for i in range(30)], 4)
    folded = sorted((k, sorted(v.reveal())) for k, v in fold_by_key(rdd, lset).collect())
    probe = sc.parallelize(range(4), 4).map(
        lambda _: __import__("blooml").__file__ + " " + __import__("sys").executable
    )
    df = spark.range(30).select((F.col("id") % 3).alias("k"), F.col("id").alias("v"))
    maxes = {r.k: from_spark(r.m, lmax) for r in df.groupBy("k").agg(
        lfold("v", lmax).alias("m")).collect()}
    print("RESULT", folded == [(k, list(range(k, 30, 3))) for k in range(3)],
          maxes == {0: lmax(27), 1: lmax(28), 2: lmax(29)})
    print("WHERE", sorted(set(probe.collect())))
    spark.stop()
    """
)


@pytest.mark.slow
def test_spark_submit_on_local_cluster_with_packed_deps(tmp_path: Path) -> None:
    """spark-submit on local-cluster[2,1,1024]: two executor processes whose Python has no
    blooml and none of its dependencies; blooml ships as a wheel installed into a directory
    that spark.archives unpacks next to each executor (docs/spark.md, running on a cluster)."""
    import pyspark

    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    probe = subprocess.run([str(base), "-c", "import blooml"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has blooml: it would not show the shipping")
    root = Path(__file__).resolve().parents[2]
    dist, deps = tmp_path / "dist", tmp_path / "deps"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(dist), str(root)],
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("blooml-*.whl")
    subprocess.run([*pip, "install", "--target", str(deps), str(wheel)], check=True, timeout=600)
    archive = tmp_path / "deps.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(deps), "."], check=True)
    job = tmp_path / "job.py"
    job.write_text(_SUBMITTED_JOB)
    # SPARK_HOME is the pyspark package directory, seen through a folder of links: a local
    # cluster's executors work in SPARK_HOME/work, which must not land in the installed pyspark
    spark_home = tmp_path / "spark_home"
    spark_home.mkdir()
    for entry in Path(pyspark.__file__).resolve().parent.iterdir():
        if entry.name != "work":
            (spark_home / entry.name).symlink_to(entry)
    env = _clean_env()
    env["SPARK_HOME"] = str(spark_home)
    out = subprocess.run(
        [
            str(spark_home / "bin" / "spark-submit"),
            "--master",
            "local-cluster[2,1,1024]",
            "--conf",
            f"spark.archives={archive}#deps",
            "--conf",
            "spark.executorEnv.PYTHONPATH=deps",
            "--conf",
            f"spark.pyspark.python={base}",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
            str(job),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert "RESULT True True" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
    where = out.stdout.split("WHERE", 1)[1]
    assert str(root / "src") not in where  # not the checkout's blooml: the shipped one
    assert str(spark_home / "work") in where and "/deps/blooml/" in where and str(base) in where
