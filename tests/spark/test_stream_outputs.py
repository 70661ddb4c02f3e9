"""tick_stream's outputs read back over all ticks: a collection empty at tick 0 is written with
its columns' real types (or not at all while no type is known), never ``void``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from _reach import BATCHES, Reach, local, write_batch

from blooml import Program, bloom, table
from blooml.spark import SparkEngine, tick_stream

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Later(Program):
    """``both`` joins this tick's edges with last tick's: no rule derives it at tick 0."""

    edge = table(["a", "b"])
    seen = table(["a", "b"])
    both = table(["a", "b"])

    # fmt: off
    @bloom
    def rules(self):
        self.seen <+ self.edge
        self.both <= self.edge.join(self.seen, self.edge.a == self.seen.a).map(
            lambda e, s: (e.a, s.b)
        )
    # fmt: on


def _stream(spark: Any, folder: Path) -> Any:
    return (
        spark.readStream.schema("a bigint, b bigint")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )


def test_outputs_empty_at_tick_0_read_back_over_all_ticks(spark: Any, tmp_path: Path) -> None:
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "out"
    folder.mkdir()
    for i in (0, 1):
        write_batch(folder, i, BATCHES[i])
    stream = _stream(spark, folder)
    # back and gone are filled by <+ rules: empty at tick 0, rows from tick 1 on
    outputs = {name: str(out / name) for name in ("back", "gone")}
    query = tick_stream(
        SparkEngine(spark, program=Reach),
        stream,
        "edge",
        checkpoint_location=str(ckpt),
        outputs=outputs,
        available_now=True,
    )
    query.awaitTermination(300)
    assert query.exception() is None
    for name in ("back", "gone"):
        back = spark.read.parquet(outputs[name])  # every tick at once
        assert [f.dataType.simpleString() for f in back.schema.fields] == [
            "bigint",
            "bigint",
            "int",
        ], name
        got = sorted((r.tick, r.a, r.b) for r in back.collect())
        want = sorted((t, a, b) for t in (0, 1) for a, b in getattr(local(BATCHES[: t + 1]), name))
        assert got == want and got, name


def test_an_empty_collection_has_its_known_column_types(spark: Any) -> None:
    engine = SparkEngine(spark, program=Reach)
    result = engine.tick({"edge": BATCHES[0]})
    assert result.is_empty("back") and not result.is_empty("path")
    types = [f.dataType.simpleString() for f in result.dataframe("back").schema.fields]
    assert types == ["bigint", "bigint"]  # from the <+ facts queued for tick 1
    declared = SparkEngine(spark, program=Reach, schemas={"gone": "a int, b int"})
    gone = declared.tick({"edge": []}).dataframe("gone")
    assert [f.dataType.simpleString() for f in gone.schema.fields] == ["int", "int"]


def test_an_output_of_unknown_types_writes_no_file_while_empty(spark: Any, tmp_path: Path) -> None:
    folder, ckpt, out = tmp_path / "in", tmp_path / "ckpt", tmp_path / "both"
    folder.mkdir()
    write_batch(folder, 0, [(1, 2)])
    write_batch(folder, 1, [(1, 3)])
    query = tick_stream(
        SparkEngine(spark, program=Later),
        _stream(spark, folder),
        "edge",
        checkpoint_location=str(ckpt),
        outputs={"both": str(out)},
        available_now=True,
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("tick=")) == ["tick=1"]
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == [(1, 2, 1)]
