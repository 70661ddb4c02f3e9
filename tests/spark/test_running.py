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
    from blooml.lattices import lset
    from blooml.spark import fold_by_key

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    rdd = spark.sparkContext.parallelize([("a", 1), ("a", 2), ("b", None)], 2)
    print("RESULT", sorted(fold_by_key(rdd, lset).collect()))
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
    some other interpreter; the workers still import blooml."""
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
