"""Ticks across runs and as Structured Streaming micro-batches, with state recovered after a
restart: no lost and no doubled tick."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from _reach import BATCHES, Best, Reach, local, write_batch

from blooml import Program
from blooml.spark import SparkEngine, _stream, tick_stream

pytestmark = pytest.mark.spark


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
    _same(local(BATCHES[:3]), engine)


def _start(
    spark: Any, program: Any, folder: Path, ckpt: Path | str, outputs: dict[str, str]
) -> tuple[Any, Any]:
    engine = SparkEngine(spark, program=program)  # a new engine: a restarted driver
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
        outputs=outputs,
        available_now=True,
    )
    return engine, query


def _run(spark: Any, folder: Path, ckpt: Path | str, out: Path | str) -> SparkEngine:
    engine, query = _start(spark, Reach, folder, ckpt, {"path": str(out)})
    query.awaitTermination(300)
    assert query.exception() is None
    return engine


def test_micro_batches_are_ticks_and_survive_a_restart(spark: Any, tmp_path: Path) -> None:
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    folder.mkdir()
    for i in (0, 1):
        write_batch(folder, i, BATCHES[i])
    _run(spark, folder, ckpt, out)  # ticks 0 and 1, then the query stops
    for i in (2, 3):
        write_batch(folder, i, BATCHES[i])
    # Spark re-runs the last batch when its own commit is missing (a stop between blooml's
    # commit and Spark's): blooml must not apply that tick twice
    (ckpt / "commits" / "1").unlink()
    (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)
    engine = _run(spark, folder, ckpt, out)  # restarted: batch 1 again, then 2 and 3
    _same(local(BATCHES), engine)
    assert _stream._latest(spark, str(ckpt / "blooml-state")) == (3, 3)
    # the commit log keeps the last two entries; a table is its first version and the rows
    # each tick added (``edge`` every tick), one that lost rows (``gone``) a new version
    state = ckpt / "blooml-state"
    assert sorted(p.name for p in state.iterdir()) == ["commits", "meta", "pending", "tables"]
    assert sorted(p.name for p in (state / "commits").iterdir()) == ["tick=2", "tick=3"]
    parts = {t.name: sorted(p.name for p in t.iterdir()) for t in (state / "tables").iterdir()}
    assert parts["edge"] == ["t=0", "t=1", "t=2", "t=3"]
    rows = {
        t: spark.read.parquet(str(state / "tables" / "edge" / t)).count() for t in parts["edge"]
    }
    assert rows == {f"t={i}": len(b) for i, b in enumerate(BATCHES)}  # each tick: its rows
    ticks = sorted(p.name for p in out.iterdir() if p.name.startswith("tick="))
    assert ticks == ["tick=0", "tick=1", "tick=2", "tick=3"]
    last = {tuple(r) for r in spark.read.parquet(str(out / "tick=3")).collect()}
    assert last == set(map(tuple, local(BATCHES).path))
    from pyspark import cloudpickle

    # on a classic session the query's function holds the user's engine: nothing module-level
    # keeps it (or its state frames) alive after the query, and it is never pickled
    assert str(ckpt / "blooml-state") not in _stream._ENGINES
    ticks = _stream._Ticks(Reach.ir(), "edge", str(ckpt), {}, checkpoint_every=8, max_rounds=9)
    ticks.engine = engine
    assert pickle.loads(cloudpickle.dumps(ticks)).engine is None  # as Spark Connect ships it


def test_checkpoint_location_as_a_file_uri(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a URI is Spark's to resolve: nothing lands under <cwd>/file:/..., and the state is read
    # back through Spark alone (no local file functions) after a restart
    monkeypatch.chdir(tmp_path)
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    folder.mkdir()
    write_batch(folder, 0, BATCHES[0])
    _run(spark, folder, ckpt.as_uri(), out.as_uri())
    write_batch(folder, 1, BATCHES[1])
    engine = _run(spark, folder, ckpt.as_uri(), out.as_uri())  # a new engine reads tick 0
    _same(local(BATCHES[:2]), engine)
    assert not (tmp_path / "file:").exists()
    assert _stream._latest(spark, ckpt.as_uri() + "/blooml-state") == (1, 1)
    assert sorted(p.name for p in out.iterdir()) == ["tick=0", "tick=1"]


def test_a_failed_tick_stops_the_query_with_the_blooml_error(spark: Any, tmp_path: Path) -> None:
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    folder.mkdir()
    write_batch(folder, 0, [(0, 1), (1, 2)])
    write_batch(folder, 1, [(0, 5)])  # a second successor of 0: a key conflict in best
    engine, query = _start(spark, Best, folder, ckpt, {"best": str(out)})
    with pytest.raises(Exception) as caught:
        query.awaitTermination(300)
    assert type(caught.value).__name__ == "StreamingQueryException"
    for msg in (str(caught.value), str(query.exception())):
        assert "blooml.errors.KeyConstraintError: key conflict in 'best' for key 0" in msg
        assert "tick 1 of Best (micro-batch 1, input 'edge'); not committed" in msg
    # the failed tick is not committed
    assert _stream._latest(spark, str(ckpt / "blooml-state")) == (0, 0)
    assert engine.state()[0] == 0


def test_connect_ticks_that_cannot_be_pickled_fail_first_naming_the_rule() -> None:
    # Spark Connect cloudpickles tick_stream's function with the IR; check before the query
    import threading

    from blooml import bloom, table
    from blooml.errors import NotSupportedOnSpark

    lock = threading.Lock()

    class Guarded(Program):
        edge = table(["a", "b"])
        seen = table(["a", "b"])

        # fmt: off
        @bloom
        def rules(self):
            self.seen <= self.edge.map(lambda e: (e.a, e.b) if lock else None)
        # fmt: on

    ticks = _stream._Ticks(Guarded.ir(), "edge", "unused", {}, checkpoint_every=8, max_rounds=9)
    with pytest.raises(NotSupportedOnSpark, match=r"rule 0 .*cannot be pickled.*lock") as info:
        _stream._check_shippable(ticks)
    assert "test_stream.py" in info.value.rule


def test_a_restart_over_state_layered_in_the_checkpoint_dir(
    spark: Any, tmp_path: Path, checkpoint_dir: Path
) -> None:
    """With a checkpoint directory the engine keeps its state there as sorted files plus
    overlays of a few rows on the driver (small ticks); a restarted stream reads its own
    committed state back and continues with the local engine's rows."""
    folder, ckpt, out = tmp_path / "in", tmp_path / "stream", tmp_path / "out"
    folder.mkdir()
    for i in (0, 1):
        write_batch(folder, i, BATCHES[i])
    first = _run(spark, folder, ckpt, out)
    assert first._ticks["Reach"].carry.overlays  # rows on the driver, not new files
    for i in (2, 3):
        write_batch(folder, i, BATCHES[i])
    engine = _run(spark, folder, ckpt, out)  # a new engine: the state read back
    _same(local(BATCHES), engine)
    assert _stream._latest(spark, str(ckpt / "blooml-state")) == (3, 3)
