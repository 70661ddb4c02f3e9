"""One local SparkSession shared by every Spark test (starting one costs 8-14 s).

The session runs ``local[2]``; its workers run the test interpreter because ``import
blooml.spark`` sets ``PYSPARK_PYTHON`` (as it does for users running a script from a venv),
binds to 127.0.0.1, uses few shuffle partitions and no UI. When Java or pyspark is missing the
Spark tests are skipped with the reason; CI has both, so there they run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _missing_requirement() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'blooml[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))) and not (
        shutil.which("java")
    ):
        return "no Java runtime found (set JAVA_HOME or put java on PATH)"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared local SparkSession (``local[2]``)."""
    reason = _missing_requirement()
    if reason is not None:
        pytest.skip(f"Spark tests need Java and pyspark: {reason}")
    import blooml.spark  # noqa: F401 - sets PYSPARK_PYTHON for local workers, as for users

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # workers import the tests' user lattice module (_user_lattice.py) from this folder
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH", "")) if p
    )
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("blooml-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        # tiny inputs: compiling generated code and re-planning cost more than they save
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def sc(spark: Any) -> Any:
    """The shared session's SparkContext."""
    return spark.sparkContext


@pytest.fixture
def checkpoint_dir(spark: Any, tmp_path: Any) -> Iterator[Any]:
    """The shared session with a checkpoint directory (``tmp_path / "ckpt"``) for one test,
    unset afterwards."""
    sc = spark.sparkContext
    path = tmp_path / "ckpt"
    sc.setCheckpointDir(str(path))
    try:
        yield path
    finally:
        getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))


@pytest.fixture(scope="session")
def connect_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ``RESULT`` of ``_connect_job.py``, run once per session against a local Spark Connect
    server in a child process (a server costs ~20 s to start, much more on a loaded machine):
    every Connect test of the suite reads its part of it."""
    pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the extra")
    reason = _missing_requirement()
    if reason is not None:
        pytest.skip(f"Spark tests need Java and pyspark: {reason}")
    here = Path(__file__).resolve().parent
    work = tmp_path_factory.mktemp("connect")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYTHONPATH"] = str(here)  # the server's Python imports _reach, _differential, ...
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.run(
        [sys.executable, str(here / "_connect_job.py"), str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        cwd=work,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(lines[0][len("RESULT ") :])
    assert out["connect"].startswith("pyspark.sql.connect")
    return out
