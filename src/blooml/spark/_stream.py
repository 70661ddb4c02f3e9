"""Ticks as Structured Streaming micro-batches: each micro-batch is one tick of a program.

:func:`tick_stream` starts ``stream.writeStream.foreachBatch(...)``: the batch's rows are the
tick's input to one collection, :meth:`SparkEngine.tick` runs the tick as DataFrame plans, and
the program's state after the tick (tables, lattice variables, the facts queued for the next
tick) is written as Parquet under ``<checkpoint_location>/blooml-state/tick-<batch id>``
before the tick is marked committed. After a restart (a new driver, a new engine) the state is
read back from the last committed tick. A batch whose tick is already committed — Spark
re-runs the last batch when the query stopped between blooml's commit and its own — is
skipped, so no tick is lost or applied twice. Output collections are written per tick to
``<path>/tick=<batch id>`` (overwritten when a tick is re-run), so readers see each tick once.

The state directory is read and written by the driver with Spark (Parquet) and a small marker
file written with Python's file functions: ``checkpoint_location`` must be a path the driver
can write as a local (or mounted) file system path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from blooml.errors import NotSupportedOnSpark
from blooml.lattices._base import Lattice
from blooml.spark._formats import column_format
from blooml.spark._lazy import is_connect, require_pyspark

__all__ = ["tick_stream"]

_LATEST = "LATEST"


def tick_stream(
    engine: Any,
    stream: Any,
    into: str,
    *,
    checkpoint_location: str,
    outputs: Mapping[str, str] | None = None,
    program: Any = None,
    available_now: bool = False,
    processing_time: str | None = None,
) -> Any:
    """Run ``program`` on a streaming DataFrame, one tick per micro-batch; returns the query.

    Args:
        engine: the :class:`~blooml.spark.SparkEngine` (its ``program``, or ``program=``).
        stream: a streaming DataFrame (``spark.readStream...``) whose columns are those of
            collection ``into``, in order.
        into: the collection each batch's rows are inserted into.
        checkpoint_location: Spark's checkpoint location for the query; blooml keeps the
            program's state under ``<checkpoint_location>/blooml-state``.
        outputs: collection name → Parquet path written after every tick
            (``<path>/tick=<n>``).
        program: the program (default: the engine's).
        available_now: process what is available, then stop (``trigger(availableNow=True)``).
        processing_time: a trigger interval such as ``"5 seconds"``.

    Raises:
        NotSupportedOnSpark: a Spark Connect session (``foreachBatch`` runs on the server
            there, away from the engine's state), or a rule with no DataFrame translation.
        KeyError: ``into`` or an output is not a collection of the program.
    """
    require_pyspark("tick_stream")
    if is_connect(engine.spark):
        raise NotSupportedOnSpark(
            "tick_stream on a Spark Connect session",
            "foreachBatch functions run on the Connect server, away from the engine's state; "
            "use a classic session for ticks as micro-batches",
        )
    ir = engine._bound(program)
    from blooml.spark._dfengine import DataFramePlan

    plan, why = DataFramePlan.try_build(ir)
    if plan is None:
        raise NotSupportedOnSpark(why, "no Spark SQL translation (tick_stream)")
    for name in [into, *(outputs or {})]:
        if name not in ir.collections:
            known = ", ".join(sorted(ir.collections))
            raise KeyError(f"{name!r} is not a collection of {ir.name} (known: {known})")
    state_dir = os.path.join(checkpoint_location, "blooml-state")
    os.makedirs(state_dir, exist_ok=True)
    prog = program if program is not None else engine.program
    columns = list(ir.collections[into].columns)

    def on_batch(batch: Any, batch_id: int) -> None:
        latest = _latest(state_dir)
        if batch_id <= latest:
            return  # this tick is committed already: a re-delivered batch
        carried_tick = engine.state(program=prog)[0]
        if carried_tick != latest:
            _load(engine, prog, ir, plan, state_dir, latest)
        result = engine.tick({into: batch.toDF(*columns)}, program=prog)
        tick_dir = os.path.join(state_dir, f"tick-{batch_id}")
        _save(engine, prog, ir, tick_dir)
        for name, path in (outputs or {}).items():
            result.dataframe(name).write.mode("overwrite").parquet(
                os.path.join(path, f"tick={batch_id}")
            )
        _commit(state_dir, batch_id, carried_tick + 1)

    writer = stream.writeStream.foreachBatch(on_batch).option(
        "checkpointLocation", checkpoint_location
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def _latest(state_dir: str) -> int:
    try:
        with open(os.path.join(state_dir, _LATEST)) as f:
            return int(json.load(f)["batch"])
    except FileNotFoundError:
        return -1


def _commit(state_dir: str, batch_id: int, tick: int) -> None:
    tmp = os.path.join(state_dir, f".{_LATEST}.tmp")
    with open(tmp, "w") as f:
        json.dump({"batch": batch_id, "tick": tick}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(state_dir, _LATEST))  # atomic: the tick is committed


def _save(engine: Any, program: Any, ir: Any, tick_dir: str) -> None:
    tick, frames, lattices, pending = engine.state(program=program)
    spark = engine.spark
    for name, df in frames.items():
        df.write.mode("overwrite").parquet(os.path.join(tick_dir, "tables", name))
    for op, by in pending.items():
        for name, df in by.items():
            df.write.mode("overwrite").parquet(os.path.join(tick_dir, "pending", _op(op), name))
    cells = []
    for name, value in lattices.items():
        cells.append((name, json.dumps(_cell_json(value))))
    spark.createDataFrame(cells, "name string, cell string").write.mode("overwrite").parquet(
        os.path.join(tick_dir, "lattices")
    )
    with open(os.path.join(tick_dir, "_TICK"), "w") as f:
        f.write(str(tick))


def _load(engine: Any, program: Any, ir: Any, plan: Any, state_dir: str, batch: int) -> None:
    if batch < 0:
        engine.reset(program)
        return
    spark = engine.spark
    tick_dir = os.path.join(state_dir, f"tick-{batch}")
    with open(os.path.join(tick_dir, "_TICK")) as f:
        tick = int(f.read())
    frames = {}
    tables = os.path.join(tick_dir, "tables")
    for name in sorted(os.listdir(tables)) if os.path.isdir(tables) else []:
        frames[name] = spark.read.parquet(os.path.join(tables, name)).localCheckpoint()
    pending: dict[str, dict[str, Any]] = {}
    pend_dir = os.path.join(tick_dir, "pending")
    for op_name in sorted(os.listdir(pend_dir)) if os.path.isdir(pend_dir) else []:
        for name in sorted(os.listdir(os.path.join(pend_dir, op_name))):
            df = spark.read.parquet(os.path.join(pend_dir, op_name, name)).localCheckpoint()
            pending.setdefault(_OPS_BACK[op_name], {})[name] = df
    lattices: dict[str, Lattice] = {}
    for row in spark.read.parquet(os.path.join(tick_dir, "lattices")).collect():
        cls = ir.lattices[row.name].cls
        lattices[row.name] = column_format(cls).from_cell(_cell_back(json.loads(row.cell)))
    engine.restore(tick, frames, lattices, pending, program=program)


_OPS = {"<+": "insert", "<-": "delete", "<+-": "replace"}
_OPS_BACK = {v: k for k, v in _OPS.items()}


def _op(op: str) -> str:
    return _OPS[op]


def _cell_json(value: Lattice) -> Any:
    """A lattice variable's native cell as JSON (sets as sorted lists)."""
    cell = column_format(type(value)).to_cell(value)
    return {"cell": cell}


def _cell_back(obj: Any) -> Any:
    return obj["cell"]
