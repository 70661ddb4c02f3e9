"""Ticks as Structured Streaming micro-batches: each micro-batch is one tick of a program.

:func:`tick_stream` starts ``stream.writeStream.foreachBatch(...)``: the batch's rows are the
tick's input to one collection, :meth:`SparkEngine.tick` runs the tick as DataFrame plans, and
the program's state after the tick (tables, lattice variables, the facts queued for the next
tick) is written as Parquet under ``<checkpoint_location>/blooml-state/tick-<batch id>``
before the tick is marked committed (then the state of older ticks is deleted). After a
restart (a new driver, a new engine) the state is read back from the last committed tick. A
batch whose tick is already committed — Spark re-runs the last batch when the query stopped
between blooml's commit and its own — is skipped, so no tick is lost or applied twice. Output
collections are written per tick to ``<path>/tick=<batch id>`` (overwritten when a tick is
re-run), so readers see each tick once.

One code path for classic and Connect sessions. The ``foreachBatch`` function is a
:class:`_Ticks` holding plain data only (the program's IR, the input collection, the state
directory, the outputs, the engine's settings), because on Spark Connect it is cloudpickled
and called in a Python process the Connect server starts (one per query), away from the
client. There it builds a :class:`SparkEngine` on the batch's session and keeps it in
:data:`_ENGINES` (by state directory) from batch to batch. On a classic session the function
runs in the driver and holds the user's engine itself (nothing module-level keeps it once the
query is gone), so that engine holds the ticks' state as it would after ``engine.tick(...)``.

The state directory is read and written with Spark (Parquet) and a small marker file written
with Python's file functions by the process that runs the function (the driver; on Connect the
server's Python): ``checkpoint_location`` must be a path that process can write as a local (or
mounted) file system path.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from typing import Any

from blooml.errors import NotSupportedOnSpark, ProgramError
from blooml.ir import ProgramIR
from blooml.lattices import lbool, lmax, lmin
from blooml.lattices._base import Lattice
from blooml.spark._formats import column_format
from blooml.spark._lazy import is_connect, require_pyspark

__all__ = ["tick_stream"]

_LATEST = "LATEST"

#: state directory → the engine running its ticks in this process: on Spark Connect, one built
#: on the batch's session by the server's Python (on a classic session, _Ticks.engine)
_ENGINES: dict[str, Any] = {}


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

    Works on classic and Spark Connect sessions. On a classic session the ticks run in the
    driver on ``engine``, which holds the program's state afterwards (``engine.state()``). On
    Spark Connect the ``foreachBatch`` function runs in a Python process of the Connect server:
    it builds its own engine there (``path="dataframe"``, ``engine``'s ``checkpoint_every`` and
    ``max_rounds``) and ``engine`` does not see the ticks (read ``outputs``). That Python must
    import blooml, the program's module and its lattice classes, and
    ``checkpoint_location`` must be a path the *server* can write (give an absolute path).

    A tick that fails stops the query: ``query.awaitTermination()`` raises a
    ``StreamingQueryException`` and ``query.exception()`` returns it, its message carrying the
    blooml error (its class, the rule or collection it names); the failed tick is not committed,
    and a restarted query runs it again.

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
        NotSupportedOnSpark: a rule with no DataFrame translation, or (Spark Connect) a rule
            whose functions cannot be pickled to ship to the server (before the query starts).
        KeyError: ``into`` or an output is not a collection of the program.
    """
    require_pyspark("tick_stream")
    ir = engine._bound(program)
    from blooml.spark._dfengine import DataFramePlan

    plan, why = DataFramePlan.try_build(ir)
    if plan is None:
        raise NotSupportedOnSpark(why, "no Spark SQL translation (tick_stream)")
    for name in [into, *(outputs or {})]:
        if name not in ir.collections:
            known = ", ".join(sorted(ir.collections))
            raise KeyError(f"{name!r} is not a collection of {ir.name} (known: {known})")
    connect = is_connect(engine.spark)
    if not connect:  # the driver runs the function: a path relative to its directory
        checkpoint_location = os.path.abspath(checkpoint_location)
    state_dir = os.path.join(checkpoint_location, "blooml-state")
    ticks = _Ticks(
        ir,
        into,
        state_dir,
        dict(outputs or {}),
        checkpoint_every=engine.checkpoint_every,
        max_rounds=engine.max_rounds,
    )
    if not connect:
        ticks.engine = engine  # the ticks run here, on the user's engine
    else:
        _check_shippable(ticks)
    writer = stream.writeStream.foreachBatch(ticks).option(
        "checkpointLocation", checkpoint_location
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def _check_shippable(ticks: _Ticks) -> None:
    """Spark Connect cloudpickles the ``foreachBatch`` function with the program's IR: a rule
    function that closes over something pickle cannot carry (a lock, a socket, an open file)
    fails there with a generic serialization error. Fail first, naming the rule."""
    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(ticks)
    except Exception as exc:
        culprit: tuple[str, BaseException] = (f"tick_stream of {ticks.ir.name}", exc)
        for rule in ticks.ir.rules:
            try:
                cloudpickle.dumps(rule)
            except Exception as rule_exc:
                culprit = (rule.describe(), rule_exc)
                break
        where, cause = culprit
        raise NotSupportedOnSpark(
            where,
            "its functions cannot be pickled to run on the Spark Connect server "
            f"({type(cause).__name__}: {cause}); close over plain values, or use a classic "
            "session",
        ) from cause


class _Ticks:
    """The ``foreachBatch`` function of :func:`tick_stream`: one tick per batch.

    Holds plain, picklable data only (the IR's rule functions are cloudpickled with it), so
    that a Spark Connect server can run it in its own Python process."""

    def __init__(
        self,
        ir: ProgramIR,
        into: str,
        state_dir: str,
        outputs: dict[str, str],
        *,
        checkpoint_every: int,
        max_rounds: int,
    ) -> None:
        self.ir = ir
        self.into = into
        self.columns = list(ir.collections[into].columns)
        self.state_dir = state_dir
        self.outputs = outputs
        self.checkpoint_every = checkpoint_every
        self.max_rounds = max_rounds
        #: the user's engine, on a classic session (never pickled: Connect gets None)
        self.engine: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "engine": None}

    def __call__(self, batch: Any, batch_id: int) -> None:
        state_dir, ir = self.state_dir, self.ir
        latest, committed = _latest(state_dir)
        if batch_id <= latest:
            return  # this tick is committed already: a re-delivered batch
        os.makedirs(state_dir, exist_ok=True)
        try:
            engine = self._engine(batch.sparkSession)
            if engine.state(program=ir)[0] != committed:  # a new engine, or a failed tick
                _load(engine, ir, state_dir, latest)
            result = engine.tick({self.into: batch.toDF(*self.columns)}, program=ir)
            tick_dir = os.path.join(state_dir, f"tick-{batch_id}")
            _save(engine, ir, tick_dir)
            for name, path in self.outputs.items():
                df = result.dataframe(name)
                if result.is_empty(name) and _void(df):
                    continue  # no rows, and no type known for a column yet: nothing to write
                df.write.mode("overwrite").parquet(os.path.join(path, f"tick={batch_id}"))
        except Exception as exc:
            exc.add_note(
                f"in blooml.spark.tick_stream: tick {committed + 1} of {ir.name} (micro-batch "
                f"{batch_id}, input {self.into!r}); not committed, a restarted query runs it again"
            )
            raise
        _commit(state_dir, batch_id, committed + 1)
        _prune(state_dir, batch_id)

    def _engine(self, session: Any) -> Any:
        """This state directory's engine in this process; a new one (its state loaded from the
        last committed tick) on a Connect session it was not built on."""
        if self.engine is not None:  # classic: the user's engine
            return self.engine
        engine = _ENGINES.get(self.state_dir)
        if engine is not None and not (
            engine.connect and _session_id(engine.spark) != _session_id(session)
        ):
            return engine
        from blooml.spark._engine import SparkEngine

        engine = SparkEngine(
            session,
            path="dataframe",
            checkpoint_every=self.checkpoint_every,
            max_rounds=self.max_rounds,
            program=self.ir,
        )
        _ENGINES[self.state_dir] = engine
        return engine


def _void(df: Any) -> bool:
    """Whether a column of ``df`` has Spark's ``void`` type (a Parquet file with one would make
    the output's ticks unreadable together)."""
    from pyspark.sql.types import NullType

    return any(isinstance(f.dataType, NullType) for f in df.schema.fields)


def _session_id(session: Any) -> Any:
    return getattr(session, "session_id", None)


def _latest(state_dir: str) -> tuple[int, int]:
    """(batch id, tick) of the last committed tick; (-1, -1) before the first."""
    try:
        with open(os.path.join(state_dir, _LATEST)) as f:
            latest = json.load(f)
    except FileNotFoundError:
        return -1, -1
    return int(latest["batch"]), int(latest["tick"])


def _commit(state_dir: str, batch_id: int, tick: int) -> None:
    tmp = os.path.join(state_dir, f".{_LATEST}.tmp")
    with open(tmp, "w") as f:
        json.dump({"batch": batch_id, "tick": tick}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(state_dir, _LATEST))  # atomic: the tick is committed


def _prune(state_dir: str, batch_id: int) -> None:
    """Delete the state of ticks before the committed one (a restart reads only that one)."""
    for name in os.listdir(state_dir):
        if name.startswith("tick-") and name[5:].isdigit() and int(name[5:]) < batch_id:
            shutil.rmtree(os.path.join(state_dir, name), ignore_errors=True)


def _save(engine: Any, ir: ProgramIR, tick_dir: str) -> None:
    tick, frames, lattices, pending = engine.state(program=ir)
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
    # lattice classes of columns found when Python rule bodies ran (only the SQL-merged
    # builtins can be such columns): a restarted engine merges those cells as lattices
    found = {
        name: {str(i): cls.__name__ for i, cls in known.items()}
        for name, known in engine.lattice_columns(program=ir).items()
    }
    with open(os.path.join(tick_dir, "_LATTICE_COLUMNS"), "w") as f:
        json.dump(found, f)
    with open(os.path.join(tick_dir, "_TICK"), "w") as f:
        f.write(str(tick))


def _load(engine: Any, ir: ProgramIR, state_dir: str, batch: int) -> None:
    if batch < 0:
        engine.reset(ir)
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
    columns: dict[str, dict[int, type]] = {}
    path = os.path.join(tick_dir, "_LATTICE_COLUMNS")
    if os.path.exists(path):  # absent in a state written before it was recorded
        with open(path) as f:
            for name, known in json.load(f).items():
                for i, cls_name in known.items():
                    if cls_name not in _COLUMN_CLASSES:
                        raise ProgramError(
                            f"{path}: column {i} of {name!r} has lattice class {cls_name!r}; "
                            f"a saved state knows only {sorted(_COLUMN_CLASSES)}"
                        )
                    columns.setdefault(name, {})[int(i)] = _COLUMN_CLASSES[cls_name]
    engine.restore(tick, frames, lattices, pending, program=ir, lattice_columns=columns)


#: lattice classes a DataFrame-path collection column can hold (merged in Spark SQL)
_COLUMN_CLASSES: dict[str, type] = {c.__name__: c for c in (lmax, lmin, lbool)}


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
