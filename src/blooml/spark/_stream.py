"""Ticks as Structured Streaming micro-batches: each micro-batch is one tick of a program.

:func:`tick_stream` starts ``stream.writeStream.foreachBatch(...)``: the batch's rows are the
tick's input to one collection, :meth:`SparkEngine.tick` runs the tick as DataFrame plans, and
the program's state after the tick is saved under ``<checkpoint_location>/blooml-state`` before
the tick is committed. After a restart (a new driver, a new engine) the state is read back from
the last committed tick. A batch whose tick is already committed — Spark re-runs the last batch
when the query stopped between blooml's commit and its own — is skipped, so no tick is lost or
applied twice. Output collections are written per tick to ``<path>/tick=<batch id>``
(overwritten when a tick is re-run), so readers see each tick once.

Storage: everything is written and read by Spark (Parquet and text data sources), so the
checkpoint location is any URI Spark's Hadoop file systems know (``file://``, ``hdfs://``,
``s3a://``, ``abfss://``, ``dbfs:/``, a plain path) and nothing is read with Python's file
functions — the same on classic and Connect sessions. The layout::

    blooml-state/commits/tick=<t>/part-*.txt     one JSON line {"batch": b, "tick": t}
    blooml-state/meta/slot=<t % 2>/              tick t: where its tables are, its lattices
    blooml-state/tables/<name>/t=<t>/            Parquet: a full version, or the rows tick t
                                                 changed
    blooml-state/pending/slot=<t % 2>/<op>/<name>/  Parquet: facts for tick t + 1

A tick writes only what it changed: a table's rows that are new or grew that tick are appended
as a part (``t=<tick>``) to the parts of its last version, and a reader merges the parts (set
semantics, lattice columns by their SQL aggregate, see :func:`~blooml.spark._dfengine.
merge_saved`). A table that lost rows (``<-``, ``<+-``, a recomputed scratch), and one with
:data:`_MAX_PARTS` parts, is written in full as a new version. Tick ``t``'s meta and pending
facts go to slot ``t % 2`` (overwriting tick ``t - 2``'s; tick ``t - 1``, committed, is in the
other slot). Then the tick commits by writing its commit-log entry — one small file, which
Spark's output committer moves into place only when the write job succeeds (a rename on HDFS
and local disks, a single object on object stores), as Structured Streaming's own commit log
does. A reader takes the highest committed tick, so a tick killed at any point before its entry
exists is not committed and is run again (its parts are overwritten then). On classic sessions
commit-log entries and table parts that no committed tick refers to any more are deleted
through the Hadoop ``FileSystem`` of the location; on Connect (no JVM in the client) they stay.

One code path for classic and Connect sessions. The ``foreachBatch`` function is a
:class:`_Ticks` holding plain data only (the program's IR, the input collection, the state
directory, the outputs, the engine's settings), because on Spark Connect it is cloudpickled
and called in a Python process the Connect server starts (one per query), away from the
client. There it builds a :class:`SparkEngine` on the batch's session and keeps it in
:data:`_ENGINES` (by state directory) from batch to batch. On a classic session the function
runs in the driver and holds the user's engine itself (nothing module-level keeps it once the
query is gone), so that engine holds the ticks' state as it would after ``engine.tick(...)``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from blooml.errors import NotSupportedOnSpark, ProgramError
from blooml.ir import ProgramIR
from blooml.lattices import lbool, lmax, lmin
from blooml.lattices._base import Lattice
from blooml.spark._formats import column_format
from blooml.spark._lazy import is_connect, require_pyspark

__all__ = ["tick_stream"]

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
    ``checkpoint_location`` must be one the *server's* Spark can write (a URI or an absolute
    path).

    A tick that fails stops the query: ``query.awaitTermination()`` raises a
    ``StreamingQueryException`` and ``query.exception()`` returns it, its message carrying the
    blooml error (its class, the rule or collection it names); the failed tick is not committed,
    and a restarted query runs it again.

    Args:
        engine: the :class:`~blooml.spark.SparkEngine` (its ``program``, or ``program=``).
        stream: a streaming DataFrame (``spark.readStream...``) whose columns are those of
            collection ``into``, in order.
        into: the collection each batch's rows are inserted into.
        checkpoint_location: Spark's checkpoint location for the query, any URI Spark's
            Hadoop file systems reach (``hdfs://``, ``s3a://``, ``dbfs:/``, ``file://``) or a
            plain path; blooml keeps the program's state under
            ``<checkpoint_location>/blooml-state``, written and read by Spark only, each tick
            committed by one commit-log file (see ``docs/spark.md``).
        outputs: collection name → Parquet path or URI written after every tick
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
    if not connect and not _has_scheme(checkpoint_location):
        # the driver runs the function: a plain path relative to its directory
        checkpoint_location = os.path.abspath(checkpoint_location)
    state_dir = _join(checkpoint_location, "blooml-state")
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
        #: (batch id, tick) last committed, once read from the commit log by this query
        self.committed: tuple[int, int] | None = None
        #: the meta of the last committed tick (where its tables' parts are)
        self.meta: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "engine": None, "committed": None, "meta": None}

    def __call__(self, batch: Any, batch_id: int) -> None:
        state_dir, ir = self.state_dir, self.ir
        session = batch.sparkSession
        if self.committed is None:  # the first batch of this query: read the commit log
            self.committed = _latest(session, state_dir)
        latest, committed = self.committed
        if batch_id <= latest:
            return  # this tick is committed already: a re-delivered batch
        tick = committed + 1
        try:
            engine = self._engine(session)
            if engine.state(program=ir)[0] != committed:  # a new engine, or a failed tick
                self.meta = _load(engine, ir, state_dir, committed)
            result = engine.tick({self.into: batch.toDF(*self.columns)}, program=ir)
            if self.meta is None and committed >= 0:
                self.meta = _read_meta(session, state_dir, committed)
            meta = _save(engine, ir, state_dir, batch_id, self.meta)
            for name, path in self.outputs.items():
                df = result.dataframe(name)
                if result.is_empty(name) and _void(df):
                    continue  # no rows, and no type known for a column yet: nothing to write
                df.write.mode("overwrite").parquet(_join(path, f"tick={batch_id}"))
            _commit(session, state_dir, batch_id, tick)
        except Exception as exc:
            exc.add_note(
                f"in blooml.spark.tick_stream: tick {tick} of {ir.name} (micro-batch "
                f"{batch_id}, input {self.into!r}); not committed, a restarted query runs it again"
            )
            raise
        self.committed, old, self.meta = (batch_id, tick), self.meta, meta
        _prune(session, state_dir, tick, old, meta)

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


def _has_scheme(location: str) -> bool:
    """Whether ``location`` is a URI (``file:///x``, ``hdfs://nn/x``, ``dbfs:/x``), not a plain
    path (a one-letter scheme is a Windows drive)."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", location) is not None


def _join(location: str, *names: str) -> str:
    """``location``/``names``: a path or URI joined with ``/`` (``os.path.join`` would turn
    ``file:///x`` into a relative path on some systems and ``\\`` on Windows)."""
    return "/".join([location.rstrip("/"), *names])


#: a table saved as more parts than this is written in full as a new version
_MAX_PARTS = 16


def _slot(state_dir: str, kind: str, tick: int) -> str:
    return _join(state_dir, kind, f"slot={tick % 2}")


def _missing(exc: BaseException) -> bool:
    """Whether a Spark read failed because its path does not exist."""
    cond = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        return bool(cond and cond() == "PATH_NOT_FOUND") or "PATH_NOT_FOUND" in str(exc)
    except Exception:  # pragma: no cover - an error class the client cannot read
        return "PATH_NOT_FOUND" in str(exc)


def _read_text(spark: Any, path: str) -> list[Any] | None:
    """The rows of a text dataset written by :func:`_write_text`, or None when absent."""
    from pyspark.errors import AnalysisException

    try:
        return list(spark.read.text(path).collect())
    except AnalysisException as exc:
        if _missing(exc):
            return None
        raise


def _write_text(spark: Any, path: str, line: str) -> None:
    """One line as a one-file text dataset at ``path`` (replacing what was there)."""
    df = spark.createDataFrame([(line,)], "value string").coalesce(1)
    df.write.mode("overwrite").text(path)


def _latest(spark: Any, state_dir: str) -> tuple[int, int]:
    """(batch id, tick) of the last committed tick; (-1, -1) before the first."""
    rows = _read_text(spark, _join(state_dir, "commits"))
    best = (-1, -1)
    for row in rows or ():
        entry = json.loads(row.value)
        best = max(best, (int(entry["batch"]), int(entry["tick"])), key=lambda bt: bt[1])
    return best


def _commit(spark: Any, state_dir: str, batch_id: int, tick: int) -> None:
    """Commit ``tick``: its commit-log entry, one file moved into place by Spark's committer
    when the write succeeds."""
    entry = json.dumps({"batch": batch_id, "tick": tick})
    _write_text(spark, _join(state_dir, "commits", f"tick={tick}"), entry)


def _hadoop_fs(spark: Any, path: str) -> Any:
    """(Hadoop FileSystem, Path) of ``path`` on a classic session; None on Spark Connect."""
    if is_connect(spark):
        return None
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hpath


def _prune(
    spark: Any, state_dir: str, tick: int, old: dict[str, Any] | None, new: dict[str, Any]
) -> None:
    """After ``tick`` committed: delete the commit-log entries before ``tick - 1`` and the
    table parts that only ticks before it referred to (classic sessions, through the
    location's Hadoop FileSystem; Connect has no file system API)."""
    paths = [f"commits/tick={tick - 2}"] if tick >= 2 else []  # relative to state_dir
    if old is not None:
        keep = {p for parts in new["tables"].values() for p in parts}
        paths += sorted({p for parts in old["tables"].values() for p in parts} - keep)
    for path in paths:
        try:
            found = _hadoop_fs(spark, _join(state_dir, path))
            if found is None:
                return
            fs, hpath = found
            fs.delete(hpath, True)
        except Exception:  # pragma: no cover - a store that refuses deletes: the files stay
            continue


def _save(
    engine: Any, ir: ProgramIR, state_dir: str, batch_id: int, prev: dict[str, Any] | None
) -> dict[str, Any]:
    """The program's state after a tick (not committed yet); returns the tick's meta. A table
    is written as the rows the tick changed, appended to the parts of its last version, or
    in full (see the module's docstring)."""
    tick, frames, lattices, pending = engine.state(program=ir)
    delta, shrunk = engine._changes(program=ir)
    spark = engine.spark
    before: dict[str, list[str]] = prev["tables"] if prev is not None else {}
    tables: dict[str, list[str]] = {}
    for name, df in frames.items():
        parts = before.get(name)
        part = f"tables/{name}/t={tick}"  # relative to the state directory
        if parts is None or name in shrunk or len(parts) >= _MAX_PARTS:
            df.write.mode("overwrite").parquet(_join(state_dir, part))
            tables[name] = [part]
        elif name in delta:
            delta[name].write.mode("overwrite").parquet(_join(state_dir, part))
            tables[name] = [*parts, part]
        else:
            tables[name] = parts  # unchanged this tick
    pend_dir = _slot(state_dir, "pending", tick)
    for op, by in pending.items():
        for name, df in by.items():
            df.write.mode("overwrite").parquet(_join(pend_dir, _op(op), name))
    # lattice classes of columns found when Python rule bodies ran (only the SQL-merged
    # builtins can be such columns): a restarted engine merges those cells as lattices
    found = {
        name: {str(i): cls.__name__ for i, cls in known.items()}
        for name, known in engine.lattice_columns(program=ir).items()
    }
    meta = {
        "tick": tick,
        "batch": batch_id,
        "tables": tables,
        "pending": {_op(op): sorted(by) for op, by in pending.items()},
        "lattices": {name: _cell_json(value) for name, value in lattices.items()},
        "lattice_columns": found,
    }
    _write_text(spark, _slot(state_dir, "meta", tick), json.dumps(meta))
    return meta


def _read_meta(spark: Any, state_dir: str, tick: int) -> dict[str, Any]:
    """The meta of committed tick ``tick``."""
    slot = _slot(state_dir, "meta", tick)
    rows = _read_text(spark, slot)
    meta: dict[str, Any] | None = json.loads(rows[0].value) if rows else None
    if meta is None or int(meta["tick"]) != tick:
        raise ProgramError(
            f"{slot}: tick {tick} is committed but its state is "
            + ("missing" if meta is None else f"that of tick {meta['tick']}")
            + " (was the checkpoint location changed by hand?)"
        )
    return meta


def _load(engine: Any, ir: ProgramIR, state_dir: str, tick: int) -> dict[str, Any] | None:
    """Restore ``engine`` to committed tick ``tick`` (-1: the start); returns its meta."""
    if tick < 0:
        engine.reset(ir)
        return None
    from blooml.spark._dfengine import DataFramePlan, merge_saved

    spark = engine.spark
    meta = _read_meta(spark, state_dir, tick)
    columns: dict[str, dict[int, type]] = {}
    for name, known in meta["lattice_columns"].items():
        for i, cls_name in known.items():
            if cls_name not in _COLUMN_CLASSES:
                raise ProgramError(
                    f"{_slot(state_dir, 'meta', tick)}: column {i} of {name!r} has lattice "
                    f"class {cls_name!r}; a saved state knows only {sorted(_COLUMN_CLASSES)}"
                )
            columns.setdefault(name, {})[int(i)] = _COLUMN_CLASSES[cls_name]
    plan, _ = DataFramePlan.try_build(ir)
    frames = {}
    for name, parts in meta["tables"].items():
        df = spark.read.parquet(*[_join(state_dir, p) for p in parts])
        if len(parts) > 1:
            info = ir.collections[name]
            lat = {**(plan.lattice_cols[name] if plan else {}), **columns.get(name, {})}
            nk = len(info.keys) if info.values else len(info.columns)
            df = merge_saved(df, nk, lat)
        frames[name] = _keep(df)
    pending: dict[str, dict[str, Any]] = {}
    pend_dir = _slot(state_dir, "pending", tick)
    for op_name, names in meta["pending"].items():
        for name in names:
            df = _keep(spark.read.parquet(_join(pend_dir, op_name, name)))
            pending.setdefault(_OPS_BACK[op_name], {})[name] = df
    lattices: dict[str, Lattice] = {}
    for name, cell in meta["lattices"].items():
        cls = ir.lattices[name].cls
        lattices[name] = column_format(cls).from_cell(_cell_back(cell))
    engine.restore(tick, frames, lattices, pending, program=ir, lattice_columns=columns)
    return meta


def _keep(df: Any) -> Any:
    """A state frame read from a slot, materialized: the slot is overwritten two ticks later
    (a reliable checkpoint when the session has a checkpoint directory)."""
    from blooml.spark._dfengine import keep_state

    return keep_state(df)


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
