"""tick_stream killed with SIGKILL in the middle of the ticks, then restarted: the state read
back from the checkpoint location (written by Spark, at a file:// URI) has every tick once.

A tick is a micro-batch as Spark delivers it, and after a crash Spark may deliver two files in
one micro-batch although ``maxFilesPerTrigger`` is 1: its file source logs the files of the
next batch (``sources/0/<n>``) before the offset log entry (``offsets/<n>``), and a driver
killed between the two plans, after the restart, a batch of the logged files and the next
unseen one. So the expected ticks are the micro-batches Spark's own logs say it ran (each file
in exactly one of them, in order), not one per file."""

from __future__ import annotations

import json
import os
import re
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


def _spark_batches(ckpt: Path) -> list[list[int]]:
    """The input files (their index in BATCHES) of each micro-batch Spark ran, from its own
    checkpoint: ``offsets/<b>`` ends with the file source's log offset of micro-batch ``b``
    (``{"logOffset": k}``) and the file source's log (``sources/0/<k>``, one JSON line per
    file, compacted files included) lists the files of each ``k``."""
    logged: dict[int, set[int]] = {}
    for f in (ckpt / "sources" / "0").iterdir():
        if not f.name.startswith("."):
            for line in f.read_text().splitlines()[1:]:  # after the version line
                entry = json.loads(line)
                found = re.search(r"batch-(\d+)\.json$", entry["path"])
                assert found is not None, entry
                logged.setdefault(int(entry["batchId"]), set()).add(int(found.group(1)))
    ends = sorted(
        (int(f.name), int(json.loads(f.read_text().splitlines()[-1])["logOffset"]))
        for f in (ckpt / "offsets").iterdir()
        if f.name.isdigit()
    )
    batches: list[list[int]] = []
    start = -1
    for b, end in ends:
        assert b == len(batches), ends
        batches.append(sorted(i for k in range(start + 1, end + 1) for i in logged[k]))
        start = end
    return batches


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
    # the micro-batches Spark ran: each file in one of them, in order (usually one file each;
    # two in one after a kill between Spark's source log and offset log, see above)
    runs = _spark_batches(tmp_path / "ckpt")
    assert [i for files in runs for i in files] == list(range(len(BATCHES))), runs
    ticks = [[row for i in files for row in BATCHES[i]] for files in runs]
    last = len(ticks) - 1
    assert _stream._latest(spark, state) == (last, last), runs
    engine = SparkEngine(spark, program=Reach)
    _stream._load(engine, Reach.ir(), state, last)
    _, frames, lattices, _ = engine.state()
    expected = local(ticks)
    for name in ("edge", "path", "back", "gone"):
        got = sorted(map(tuple, frames[name].collect())) if name in frames else []
        assert got == sorted(map(tuple, getattr(expected, name))), (name, runs)
    assert lattices["top"] == expected.top.value
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("tick="))
    assert written == sorted(f"tick={i}" for i in range(len(ticks))), runs
    for i in range(len(ticks)):
        path = spark.read.parquet(str(tmp_path / "out" / f"tick={i}")).collect()
        assert sorted(map(tuple, path)) == sorted(map(tuple, local(ticks[: i + 1]).path)), (i, runs)
