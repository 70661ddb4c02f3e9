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
import tempfile
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


class _ConnectJob:
    """The ``_connect_job.py`` child process, started as soon as collection is done when the
    session will run a test that reads it: the Connect server starts and the job runs while
    the tests before the Spark ones run (its ~2 minutes overlap them instead of adding up)."""

    proc: subprocess.Popen[str] | None = None
    work: str | None = None

    @classmethod
    def start(cls) -> None:
        if cls.proc is not None or _missing_requirement() is not None:
            return
        if importlib.util.find_spec("pyspark.sql.connect.session") is None:
            return
        here = Path(__file__).resolve().parent
        cls.work = tempfile.mkdtemp(prefix="blooml-connect-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env["PYTHONPATH"] = str(here)  # the server's Python imports _reach, _differential, ...
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # output to files, not pipes: nothing reads them before the fixture, and a full pipe
        # would stop the job
        with (
            open(Path(cls.work, "out.txt"), "w") as out,
            open(Path(cls.work, "err.txt"), "w") as err,
        ):
            cls.proc = subprocess.Popen(
                [sys.executable, str(here / "_connect_job.py"), cls.work],
                env=env,
                stdout=out,
                stderr=err,
                text=True,
                cwd=cls.work,
            )

    @classmethod
    def stop(cls) -> None:
        if cls.proc is not None and cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait()
        if cls.work is not None:
            shutil.rmtree(cls.work, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the Connect job early when a collected test reads it."""
    if session.config.option.collectonly:
        return
    if any("connect_job" in getattr(item, "fixturenames", ()) for item in session.items):
        _ConnectJob.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _ConnectJob.stop()


@pytest.fixture(scope="session")
def connect_job() -> dict[str, Any]:
    """The ``RESULT`` of ``_connect_job.py``, run once per session against a local Spark Connect
    server in a child process (a server costs ~20 s to start, much more on a loaded machine),
    started when collection ends (``pytest_collection_finish``): every Connect test of the
    suite reads its part of it."""
    pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the extra")
    reason = _missing_requirement()
    if reason is not None:
        pytest.skip(f"Spark tests need Java and pyspark: {reason}")
    _ConnectJob.start()
    proc = _ConnectJob.proc
    assert proc is not None
    try:
        proc.wait(timeout=1200)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    work = Path(str(_ConnectJob.work))
    stdout, stderr = (work / "out.txt").read_text(), (work / "err.txt").read_text()
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, stdout[-2000:] + stderr[-4000:]
    out: dict[str, Any] = json.loads(lines[0][len("RESULT ") :])
    assert out["connect"].startswith("pyspark.sql.connect")
    return out
