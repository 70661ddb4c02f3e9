"""Ticks across runs and as Structured Streaming micro-batches, with state recovered after a
restart: no lost and no doubled tick."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, lmax, table
from blooml.spark import SparkEngine, tick_stream

pytestmark = pytest.mark.spark


class Reach(Program):
    """Reachability over edges that arrive tick by tick; reversed edges arrive a tick later."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    back = table(["a", "b"])
    gone = table(["a", "b"])
    top = lmax()

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.back <+ self.edge.map(lambda e: (e.b, e.a))
        self.gone <+ self.edge.filter(lambda e: e.a == 0)
        self.gone <- self.gone.filter(lambda g: g.b > 1)
        self.top <= self.edge.map(lambda e: e.b)
    # fmt: on


BATCHES = [[(0, 1), (1, 2)], [(2, 3)], [(3, 4), (0, 5)], [(5, 6)]]


def _local(batches: list[list[tuple[int, int]]]) -> Program:
    p = Reach()
    for rows in batches:
        p.edge.insert(rows)
        p.tick()
    return p


def _same(p: Program, engine: SparkEngine) -> None:
    _, frames, lattices, _ = engine.state()
    for name in ("edge", "path", "back", "gone"):
        got = sorted(map(tuple, frames[name].collect())) if name in frames else []
        assert got == sorted(map(tuple, getattr(p, name))), name
    assert lattices["top"] == p.top.value


def test_engine_tick_keeps_state_across_ticks(spark: Any) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Reach)
    for i, rows in enumerate(BATCHES[:3]):
        result = engine.tick({"edge": rows})
        assert result.tick == i
    _same(_local(BATCHES[:3]), engine)


def _write_batch(folder: Path, i: int, rows: list[tuple[int, int]]) -> None:
    path = folder / f"batch-{i}.json"
    path.write_text("".join(json.dumps({"a": a, "b": b}) + "\n" for a, b in rows))
    t = 1_700_000_000 + i * 10
    os.utime(path, (t, t))  # the file source takes files in modification-time order


def _run(spark: Any, folder: Path, ckpt: Path, out: Path) -> SparkEngine:
    engine = SparkEngine(spark, program=Reach)  # a new engine: a restarted driver
    stream = (
        spark.readStream.schema("a bigint, b bigint")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )
    query = tick_stream(
        engine,
        stream,
        "edge",
        checkpoint_location=str(ckpt),
        outputs={"path": str(out)},
        available_now=True,
    )
    query.awaitTermination(300)
    assert query.exception() is None
    return engine


def test_micro_batches_are_ticks_and_survive_a_restart(spark: Any, tmp_path: Path) -> None:
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    folder.mkdir()
    for i in (0, 1):
        _write_batch(folder, i, BATCHES[i])
    _run(spark, folder, ckpt, out)  # ticks 0 and 1, then the query stops
    for i in (2, 3):
        _write_batch(folder, i, BATCHES[i])
    # Spark re-runs the last batch when its own commit is missing (a stop between blooml's
    # commit and Spark's): blooml must not apply that tick twice
    (ckpt / "commits" / "1").unlink()
    (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)
    engine = _run(spark, folder, ckpt, out)  # restarted: batch 1 again, then 2 and 3
    _same(_local(BATCHES), engine)
    latest = json.loads((ckpt / "blooml-state" / "LATEST").read_text())
    assert latest == {"batch": 3, "tick": 3}
    ticks = sorted(p.name for p in out.iterdir() if p.name.startswith("tick="))
    assert ticks == ["tick=0", "tick=1", "tick=2", "tick=3"]
    last = {tuple(r) for r in spark.read.parquet(str(out / "tick=3")).collect()}
    assert last == set(map(tuple, _local(BATCHES).path))
