"""tick_stream killed with SIGKILL in the middle of the ticks, then restarted: the state read
back from the checkpoint location (written by Spark, at a file:// URI) has every tick once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _reach import Reach, local, write_batch

from blooml.spark import SparkEngine, _stream

pytestmark = pytest.mark.spark
HERE = Path(__file__).resolve().parent

#: one micro-batch per list, one tick each
BATCHES = [[(0, 1), (1, 2)], [(2, 3)], [(3, 4), (0, 5)], [(5, 6)], [(6, 0)], [(4, 7), (7, 8)]]

_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import blooml.spark
    from pyspark.sql import SparkSession
    from _reach import Reach
    from blooml.spark import SparkEngine, tick_stream

    root = Path(sys.argv[1])
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    stream = (
        spark.readStream.schema("a bigint, b bigint")
        .option("maxFilesPerTrigger", 1)
        .json(str(root / "in"))
    )
    query = tick_stream(
        SparkEngine(spark, program=Reach), stream, "edge",
        checkpoint_location=(root / "ckpt").as_uri(),
        outputs={"path": (root / "out").as_uri()}, available_now=True,
    )
    query.awaitTermination()
    print("DONE", query.exception())
    """
)


def _child(root: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return subprocess.Popen(
        [sys.executable, str(root / "child.py"), str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_sigkill_mid_stream_loses_and_doubles_no_tick(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(_CHILD)
    folder = tmp_path / "in"
    folder.mkdir()
    for i, rows in enumerate(BATCHES):
        write_batch(folder, i, rows)
    state = (tmp_path / "ckpt").as_uri() + "/blooml-state"
    proc = _child(tmp_path)
    deadline = time.monotonic() + 300
    commits = tmp_path / "ckpt" / "blooml-state" / "commits"
    # kill -9 once tick 2 is committed: in the middle of tick 3 (or of its commit)
    while not list((commits / "tick=2").glob("part-*")) and proc.poll() is None:
        assert time.monotonic() < deadline, "tick 2 never committed"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    latest = _stream._latest(spark, state)
    assert 2 <= latest[1] < len(BATCHES)
    proc = _child(tmp_path)  # restarted: the rest of the batches
    out, err = proc.communicate(timeout=600)
    assert "DONE None" in out, err[-3000:]
    assert _stream._latest(spark, state) == (len(BATCHES) - 1, len(BATCHES) - 1)
    engine = SparkEngine(spark, program=Reach)
    _stream._load(engine, Reach.ir(), state, len(BATCHES) - 1)
    _, frames, lattices, _ = engine.state()
    expected = local(BATCHES)
    for name in ("edge", "path", "back", "gone"):
        got = sorted(map(tuple, frames[name].collect())) if name in frames else []
        assert got == sorted(map(tuple, getattr(expected, name))), name
    assert lattices["top"] == expected.top.value
    for i in range(len(BATCHES)):
        path = spark.read.parquet(str(tmp_path / "out" / f"tick={i}")).collect()
        assert sorted(map(tuple, path)) == sorted(map(tuple, local(BATCHES[: i + 1]).path)), i
