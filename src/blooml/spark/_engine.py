"""``SparkEngine``: a Bloom^L program's ticks evaluated on Spark, from its IR alone.

The engine checks the program, picks a path and keeps what ticks carry over:

* DataFrame plans (:mod:`blooml.spark._dfengine`, with rule bodies that do not lower run as
  Arrow-batched Python by :mod:`blooml.spark._dfpython`): classic and Spark Connect sessions,
  ``path="dataframe"``, and the default wherever the program lowers;
* RDDs of ``(key, row)`` pairs with Python running the rules (:mod:`blooml.spark._rddengine`):
  classic sessions, ``path="rdd"``, and the fallback (logged once) of a program that does not
  lower.

Results come back as :class:`SparkResult` (RDD path) or :class:`DataFrameResult`. This module
knows the IR (:mod:`blooml.ir`) and nothing of the DSL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from blooml.errors import NotSupportedOnSpark
from blooml.ir import (
    ProgramIR,
)
from blooml.lattices._base import Lattice
from blooml.spark import _dfpython, _jobs
from blooml.spark._dfengine import (
    Carry,
    DataFramePlan,
    checkpoint_dir,
    delete_files,
    keep_state,
    run_plan,
)
from blooml.spark._dflookup import _local_plan, lookup_columns
from blooml.spark._dfstate import OVERLAY_ROWS
from blooml.spark._errors import worker_errors
from blooml.spark._formats import Pickled, column_format, spec_of
from blooml.spark._lazy import check_worker_python, is_connect, require_pyspark
from blooml.spark._rddengine import RddPath, check_rule

__all__ = ["DataFrameResult", "SparkEngine", "SparkResult"]

#: Each fixpoint round at INFO: the rows new per head and the lattice variables that grew.
log = logging.getLogger("blooml.spark")


def _program_ir(program: Any) -> ProgramIR:
    if isinstance(program, ProgramIR):
        return program
    ir = getattr(program, "ir", None)
    if callable(ir):
        ir = ir()
    if isinstance(ir, ProgramIR):
        return ir
    raise TypeError(
        "SparkEngine.run expects a Bloom^L program class (or its ProgramIR, P.ir()), got "
        f"{program!r}"
    )


# -- what runs on Spark -------------------------------------------------------------------------


class SparkEngine:
    """Evaluate a Bloom^L program's tick on Spark (see ``docs/spark.md``).

    Args:
        spark: the SparkSession.
        checkpoint_every: checkpoint the recursive state every this many rounds, bounding the
            lineage Spark must track and re-plan. Uses reliable checkpoints when the
            SparkContext has a checkpoint directory (``sc.setCheckpointDir``), local ones
            otherwise.
        num_partitions: partitions of the state and of shuffles (default: Spark's default
            parallelism).
        max_rounds: give up a stratum after this many rounds (a safeguard against a program
            whose lattice grows forever, such as a counter incremented in a cycle).
        path: ``"dataframe"``: run the program as DataFrame plans (Spark SQL; every rule must
            lower, else ``NotSupportedOnSpark`` names the rule before any job runs);
            ``"rdd"``: the RDD path (classic sessions; Python runs the rule functions per row;
            its columns may hold values of mixed types, as in Python); ``"auto"`` (default):
            DataFrame plans wherever the program lowers, on classic and Connect sessions; on
            a classic session a program that does not lower runs on the RDD path, with one
            WARNING on the ``blooml.spark`` logger naming the rule and why.
        program: the program :meth:`tick` runs (``engine.tick(inputs)``).
        schemas: on the DataFrame path, collection name → its Spark schema (a DDL string such
            as ``"src bigint, dst bigint"`` or a ``StructType``, one field per column): the rows
            that a rule body running as Python (a function that does not lower to SQL) derives
            for it are built in these types in one pass, instead of having their types
            inferred from the function's output (see ``docs/spark.md``).

    Example::

        result = SparkEngine(spark).run(Paths, inputs={"link": links_df})
        result["best"].write.parquet("best.parquet")
    """

    def __init__(
        self,
        spark: Any,
        *,
        checkpoint_every: int = 8,
        num_partitions: int | None = None,
        max_rounds: int = 10_000,
        path: str = "auto",
        program: Any = None,
        schemas: Mapping[str, Any] | None = None,
    ) -> None:
        require_pyspark("SparkEngine")
        self.connect = is_connect(spark)
        if not self.connect and not hasattr(spark, "sparkContext"):
            raise TypeError(f"SparkEngine expects a SparkSession, got {spark!r}")
        for name, v in (("checkpoint_every", checkpoint_every), ("max_rounds", max_rounds)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SparkEngine: {name} must be a positive int, got {v!r}")
        if path not in ("auto", "dataframe", "rdd"):
            raise ValueError(
                f"SparkEngine: path must be 'auto', 'dataframe' or 'rdd', got {path!r}"
            )
        if path == "rdd" and self.connect:
            raise NotSupportedOnSpark(
                "SparkEngine(path='rdd') on a Spark Connect session",
                "Spark Connect has no RDDs; use path='auto' (DataFrame plans)",
            )
        if schemas is not None and not isinstance(schemas, Mapping):
            raise TypeError(
                f"SparkEngine: schemas must map collection names to Spark schemas, got {schemas!r}"
            )
        self.spark = spark
        self.path = path
        self.schemas = dict(schemas or {})
        self._ticks: dict[str, _Carried] = {}
        #: program name -> collection -> its state files (keep_state), the last two versions
        self._files: dict[str, dict[str, list[str]]] = {}
        self.program = program
        self.checkpoint_every = checkpoint_every
        self.num_partitions = num_partitions or (
            0 if self.connect else spark.sparkContext.defaultParallelism
        )
        self.max_rounds = max_rounds
        #: whether this engine has said that ticks without a checkpoint directory scan state
        self._said_no_checkpoint_dir = False

    def check(self, program: Any) -> ProgramIR:
        """Return the program's IR if every rule can run on Spark.

        Raises:
            NotSupportedOnSpark: naming the first rule that cannot, and why.
        """
        ir = _program_ir(program)
        for rule in ir.rules:
            check_rule(ir, rule)
        for info in ir.collections.values():
            if info.ttl is not None:
                raise NotSupportedOnSpark(
                    f"{info.describe()}", "soft state (ttl) needs wall-clock ticks; not on Spark"
                )
        return ir

    def run(self, program: Any, inputs: Mapping[str, Any] | None = None) -> SparkResult:
        """Evaluate one tick: load ``inputs``, run every stratum to fixpoint, return the state.

        Args:
            program: the Bloom^L program class (or its ``ProgramIR``).
            inputs: collection name → its rows for this tick: a DataFrame (columns in the
                collection's order), an RDD of tuples, or a Python iterable of tuples. Lattice
                cells must be lattice values (RDDs or iterables; DataFrame cells are plain).

        Raises:
            NotSupportedOnSpark: a rule cannot run on Spark (checked before any job runs).
            KeyError: an input names no collection of the program.
            ProgramError, KeyConstraintError: as the local engine raises them (from the Spark
                job, inside a ``PythonException``).
        """
        ir0 = _program_ir(program)
        for name in inputs or {}:
            if name not in ir0.collections:
                known = ", ".join(sorted(ir0.collections))
                raise KeyError(f"input {name!r} is not a collection of {ir0.name} (known: {known})")
        if self.path != "rdd":
            plan, why = DataFramePlan.try_build(ir0)
            if plan is not None:
                return self._run_dataframe(plan, dict(inputs or {}))
            if self.path == "dataframe" or self.connect:
                raise NotSupportedOnSpark(
                    why,
                    "no Spark SQL translation"
                    + (
                        " (Spark Connect runs only programs that lower to DataFrame plans: "
                        "use a classic session for the RDD path)"
                        if self.connect
                        else ""
                    ),
                )
        ir = self.check(program)  # before the fallback is logged: a rule no path runs raises
        if self.path == "auto":
            log.warning(
                "%s runs on the RDD path (Python per row), not as DataFrame plans: %s has no "
                "Spark SQL translation; SparkEngine(spark, path='rdd') chooses it explicitly",
                ir0.name,
                why,
            )
        check_worker_python("SparkEngine", self.spark)
        with _jobs.tick(self.spark, ir.name, "run"):
            state, lattices, rounds = RddPath(
                self.spark,
                checkpoint_every=self.checkpoint_every,
                num_partitions=self.num_partitions,
                max_rounds=self.max_rounds,
            ).run(ir, dict(inputs or {}))
        return SparkResult(self.spark, ir, state, lattices, rounds)

    # -- internals -----------------------------------------------------------------------------

    def _run_dataframe(
        self, plan: DataFramePlan, inputs: dict[str, Any], *, keep: bool = False
    ) -> SparkResult:
        frames = {}
        for name, data in inputs.items():
            if data is not None and hasattr(data, "toDF") and not hasattr(data, "schema"):
                cols = plan.ir.collections[name].columns
                data = data.map(_cells).toDF(list(cols))  # an RDD (classic sessions)
            frames[name] = data
        carried = self._ticks.get(plan.ir.name) if keep else None
        if carried is not None and carried.plan is not None:
            # lattice column classes found when Python rule bodies ran in earlier ticks
            for name, known in carried.plan.lattice_cols.items():
                for i, cls in known.items():
                    plan.lattice_cols[name].setdefault(i, cls)
            for name, types in carried.plan.column_types.items():
                for i, t in types.items():
                    plan.column_types[name].setdefault(i, t)
        # what the previous tick hands this one (row counts, fed scratches); updated in place
        carry = (carried.carry if carried else None) or Carry()
        _dfpython.declare(plan, self.spark, self.schemas)
        if any(plan.python_nodes.values()):
            check_worker_python("SparkEngine", self.spark)
        tick = (carried.tick + 1 if carried else 0) if keep else "run"
        if carried and not self._said_no_checkpoint_dir and checkpoint_dir(self.spark) is None:
            self._said_no_checkpoint_dir = True
            log.warning(
                "%s: the session has no checkpoint directory, so the state kept between ticks "
                "is localCheckpointed and every lookup of a tick (the stored rows its changes "
                "touch) scans the collection it looks in: ticks read the whole state. For ticks "
                "that read what changed, set one (spark.sparkContext.setCheckpointDir(...); "
                "spark.checkpoint.dir on Spark Connect): the state is then kept as sorted "
                "Parquet files that lookups prune (see docs/spark.md, 'What a tick costs')",
                plan.ir.name,
            )
        with (
            _jobs.tick(self.spark, plan.ir.name, tick),
            worker_errors(),  # a rule function raising on a worker: named by its rule
        ):
            state, lattices, rounds, touched, pending = run_plan(
                self.spark,
                plan,
                frames,
                checkpoint_every=self.checkpoint_every,
                max_rounds=self.max_rounds,
                state=carried.state if carried else None,
                lattices=carried.lattices if carried else None,
                pending=carried.pending if carried else None,
                carry=carry,
            )
            # the state files are written inside the tick: their jobs carry its label and tag
            state = self._keep(
                plan.ir,
                state,
                carried.state if carried else {},
                keep,
                carry.overlays,
                carry.counts,
            )
        result = DataFrameResult(self.spark, plan, state, lattices, rounds, touched)
        if keep:
            assert isinstance(tick, int)
            self._ticks[plan.ir.name] = _Carried(tick, state, lattices, pending, plan, carry)
            result.tick = tick
            # between ticks: the collections whose overlays outgrew the driver written anew,
            # as a step of its own (its jobs say "maintenance after tick n"), never inside a tick
            due = [n for n, ov in carry.overlays.items() if ov.size() > OVERLAY_ROWS]
            if due:
                self._compact(plan.ir.name, due)
        return result

    def compact(self, program: Any = None) -> dict[str, int]:
        """Write anew every collection of the program that carries changes on the driver.

        A tick that changes a few rows of a stored collection keeps them on the driver as an
        *overlay* on the collection's materialized frame (its state files, or a checkpoint
        without a checkpoint directory): rows added, and the stored rows removed or replaced.
        The engine compacts a collection by itself after the tick whose changes take its
        overlay past 8,192 rows; ``compact`` does it now, for every collection with an
        overlay, e.g. at a quiet time between ticks (as Delta Lake's ``OPTIMIZE``). Its jobs
        are described ``blooml <program> maintenance after tick <n>: compact <collection>``.
        Returns collection -> rows written (empty when there was nothing to compact)."""
        ir = self._bound(program)
        carried = self._ticks.get(ir.name)
        if carried is None or carried.carry is None or not carried.carry.overlays:
            return {}
        return self._compact(ir.name, list(carried.carry.overlays))

    def _compact(self, program: str, names: list[str]) -> dict[str, int]:
        carried = self._ticks[program]
        carry = carried.carry
        assert carry is not None
        state = dict(carried.state)
        done = {}
        kept = self._files.setdefault(program, {})
        with _jobs.tick(self.spark, program, carried.tick, "maintenance after tick"):
            for name in names:
                ov = carry.overlays.get(name)
                if ov is None or state.get(name) is not ov.frame:
                    continue
                rows = carry.counts.get(name)
                _jobs.label(what=f"compact {name} ({ov.size():,} rows on the driver)")
                files: list[str] = []
                # its copies sorted by the other columns it is looked up by, rewritten with it
                by = lookup_columns(carried.plan.ir, name) if carried.plan is not None else ()
                state[name] = keep_state(ov.frame, files, sort=True, rows=rows, by=by)
                if files:
                    old = kept.get(name, [])
                    kept[name] = [*old[-1:], *files]
                    delete_files(self.spark, old[:-1])
                done[name] = -1 if rows is None else rows
        carried.state = state
        carry.overlays = {n: ov for n, ov in carry.overlays.items() if n not in done}
        return done

    def _keep(
        self,
        ir: ProgramIR,
        state: dict[str, Any],
        before: Mapping[str, Any],
        keep: bool,
        overlays: Mapping[str, Any],
        counts: Mapping[str, int],
    ) -> dict[str, Any]:
        """The tick's state frames that changed, materialized for after the tick: reliable
        Parquet files in the checkpoint directory when the session has one (see
        :func:`keep_state`; sorted by the first column, so that a filter by a few of its
        values reads few row groups, with a copy sorted by each other column the rules look
        it up by: :func:`~blooml.spark._dflookup.lookup_columns`), else left as the tick's
        local checkpoints. A frame
        that is its kept files plus changes on the driver (``overlays``, see
        :class:`~blooml.spark._dfstate.Overlay`) stays as it is: nothing is written until
        it is compacted between ticks (``counts``: row counts, which size the files' row
        groups). A
        collection's files from before its previous version are deleted (a result stays
        readable until the collection changes twice more)."""
        if checkpoint_dir(self.spark) is None:
            return state
        out = {}
        kept = self._files.setdefault(ir.name, {}) if keep else {}
        for name, df in state.items():
            if before.get(name) is df or name in overlays:  # its files are current
                out[name] = df
                continue
            if _local_plan(df):  # a few rows on the driver (an input list): nothing to write
                out[name] = df
                continue
            files: list[str] = []
            _jobs.label(end=True, what=f"keep {name} as state files")
            by = lookup_columns(ir, name)
            out[name] = keep_state(df, files, sort=True, rows=counts.get(name), by=by)
            if keep and files:
                old = kept.get(name, [])
                kept[name] = [*old[-1:], *files]  # this tick's and the previous one's
                delete_files(self.spark, old[:-1])
        return out

    def tick(self, inputs: Mapping[str, Any] | None = None, *, program: Any = None) -> SparkResult:
        """Run the next tick of the program, keeping its state for the one after.

        ``engine = SparkEngine(spark, program=P); engine.tick({"link": df})``.

        Tables persist across ticks (as DataFrames, localCheckpointed), scratches start each
        tick empty, lattice variables keep their values, and the facts of the previous tick's
        ``<+`` (insert), ``<-`` (delete) and ``<+-`` (replace by key) rules apply first, as in
        the local engine. Runs as DataFrame plans (every rule must lower). ``result.tick``
        counts the ticks from 0; :meth:`reset` forgets the program's state.

        Raises:
            NotSupportedOnSpark: a rule does not lower to DataFrame plans, or the engine was
                made with ``path="rdd"`` (the RDD path runs one tick, :meth:`run`; before any
                job).
            TypeError: no program (pass ``program=`` here or to the engine).
        """
        ir = self._bound(program)
        for name in inputs or {}:
            if name not in ir.collections:
                known = ", ".join(sorted(ir.collections))
                raise KeyError(f"input {name!r} is not a collection of {ir.name} (known: {known})")
        if self.path == "rdd":
            raise NotSupportedOnSpark(
                f"SparkEngine(path='rdd').tick({ir.name})",
                "the RDD path evaluates one tick from nothing (SparkEngine.run); ticks that "
                "carry state across ticks (tables, lattice variables, <+ <- <+- facts) run "
                "as DataFrame plans: use path='auto' or path='dataframe' for tick",
            )
        plan, why = DataFramePlan.try_build(ir)
        if plan is None:
            raise NotSupportedOnSpark(why, "no Spark SQL translation (SparkEngine.tick)")
        return self._run_dataframe(plan, dict(inputs or {}), keep=True)

    def _bound(self, program: Any) -> ProgramIR:
        program = program if program is not None else self.program
        if program is None:
            raise TypeError(
                "SparkEngine.tick needs the program: SparkEngine(spark, program=P) or "
                "tick(inputs, program=P)"
            )
        return _program_ir(program)

    def state(self, program: Any = None) -> tuple[int, dict[str, Any], dict[str, Lattice], Any]:
        """(last tick, collection → DataFrame with the collection's columns, lattice values,
        pending facts op → collection → DataFrame) kept for the program (tick -1: none)."""
        ir = self._bound(program)
        carried = self._ticks.get(ir.name)
        if carried is None:
            return -1, {}, {}, {}
        frames = {n: df.toDF(*ir.collections[n].columns) for n, df in carried.state.items()}
        pend = {
            op: {n: df.toDF(*ir.collections[n].columns) for n, df in by.items()}
            for op, by in carried.pending.items()
        }
        return carried.tick, frames, dict(carried.lattices), pend

    def _changes(self, program: Any = None) -> tuple[dict[str, Any], set[str]]:
        """What the program's last tick changed: collection -> the rows it gained or that grew
        (with the collection's columns), and the collections that lost rows."""
        ir = self._bound(program)
        carried = self._ticks.get(ir.name)
        if carried is None or carried.carry is None:
            return {}, set(ir.collections)
        delta = {n: df.toDF(*ir.collections[n].columns) for n, df in carried.carry.delta.items()}
        return delta, set(carried.carry.shrunk)

    def restore(
        self,
        tick: int,
        state: Mapping[str, Any],
        lattices: Mapping[str, Lattice],
        pending: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        program: Any = None,
        lattice_columns: Mapping[str, Mapping[int, type]] | None = None,
    ) -> None:
        """Continue the program from a saved tick (as :meth:`state` returns it).

        ``lattice_columns`` (as :meth:`lattice_columns` returns it) restores the lattice classes
        of collection columns that were found when Python rule bodies ran: without them, stored
        cells of such a column merge as plain values until a rule derives the column again."""
        ir = self._bound(program)
        plan = None
        if lattice_columns:
            plan, why = DataFramePlan.try_build(ir)
            if plan is None:
                raise NotSupportedOnSpark(why, "no Spark SQL translation (SparkEngine.restore)")
            for name, known in lattice_columns.items():
                if name not in ir.collections:
                    raise KeyError(f"lattice_columns: {name!r} is not a collection of {ir.name}")
                for i, cls in known.items():
                    plan.lattice_cols[name].setdefault(int(i), cls)
        frames = {n: df.toDF(*[f"c{i}" for i in range(len(df.columns))]) for n, df in state.items()}
        pend = {
            op: {n: df.toDF(*[f"c{i}" for i in range(len(df.columns))]) for n, df in by.items()}
            for op, by in (pending or {}).items()
        }
        # a restored scratch may hold rows an input gave it: the next tick derives it anew
        fed = {n for n, info in ir.collections.items() if not info.persistent}
        self._ticks[ir.name] = _Carried(tick, frames, dict(lattices), pend, plan, Carry(fed=fed))

    def lattice_columns(self, program: Any = None) -> dict[str, dict[int, type]]:
        """Collection -> {column index: lattice class} of the lattice-valued columns the
        program's last tick knew, those found at run time included (save it with
        :meth:`state` to :meth:`restore` a tick elsewhere)."""
        carried = self._ticks.get(self._bound(program).name)
        if carried is None or carried.plan is None:
            return {}
        return {n: dict(c) for n, c in carried.plan.lattice_cols.items() if c}

    def reset(self, program: Any = None) -> None:
        """Forget the state :meth:`tick` keeps for the program."""
        self._ticks.pop(self._bound(program).name, None)


class SparkResult:
    """The state after ``SparkEngine.run``: collections as DataFrames/RDDs, lattice values.

    ``result["best"]`` is a DataFrame of a collection (lattice cells stored natively as in
    :func:`blooml.spark.to_spark`, pickled for CRDTs and user lattices) or the value of a
    lattice variable. ``result.rdd("best")`` gives the rows as an RDD of tuples with lattice
    values, ``result.rows("best")`` collects them, ``result.rounds`` counts the rounds each
    stratum took.
    """

    def __init__(
        self,
        spark: Any,
        ir: ProgramIR,
        state: dict[str, Any],
        lattices: dict[str, Lattice],
        rounds: tuple[int, ...],
    ) -> None:
        self._spark = spark
        self.ir = ir
        self._state = state
        self.lattices = dict(lattices)
        self.rounds = rounds

    def rdd(self, name: str) -> Any:
        """The rows of collection ``name``: an RDD of tuples (lattice cells as values)."""
        return self._collection(name).values()

    def rows(self, name: str) -> list[tuple[Any, ...]]:
        """The rows of collection ``name``, collected to the driver."""
        return list(self.rdd(name).collect())

    def dataframe(self, name: str, schema: Any = None) -> Any:
        """Collection ``name`` as a DataFrame; lattice cells stored as :func:`to_spark` does.

        Spark infers the column types from the rows unless ``schema`` is given (a column that
        is NULL in every row, or an empty collection, needs a schema).
        """
        self._collection(name)  # raises KeyError naming the known collections
        info = self.ir.collections[name]
        rows = self.rdd(name).map(_cells)
        if schema is not None:
            return self._spark.createDataFrame(rows, schema)
        if rows.isEmpty():
            from pyspark.sql.types import NullType, StructField, StructType

            return self._spark.createDataFrame(
                [], StructType([StructField(c, NullType(), True) for c in info.columns])
            )
        return self._spark.createDataFrame(rows, list(info.columns), samplingRatio=1.0)

    def __getitem__(self, name: str) -> Any:
        if name in self.lattices:
            return self.lattices[name]
        return self.dataframe(name)

    def _collection(self, name: str) -> Any:
        try:
            return self._state[name]
        except KeyError:
            known = ", ".join(sorted([*self._state, *self.lattices]))
            raise KeyError(f"{self.ir.name} has no collection {name!r} (known: {known})") from None

    def __repr__(self) -> str:
        return f"<SparkResult of {self.ir.name}: rounds per stratum {list(self.rounds)}>"


def _cells(row: Iterable[Any]) -> tuple[Any, ...]:
    from blooml.spark._formats import column_format

    out = []
    for c in row:
        if isinstance(c, Lattice):
            try:
                spec = spec_of(c)
            except TypeError:
                spec = Pickled(type(c))
            out.append(column_format(spec).to_cell(c))
        else:
            out.append(c)
    return tuple(out)


class _Carried:
    """What :meth:`SparkEngine.tick` keeps of a program between ticks."""

    __slots__ = ("carry", "lattices", "pending", "plan", "state", "tick")

    def __init__(
        self,
        tick: int,
        state: dict[str, Any],
        lattices: dict[str, Lattice],
        pending: dict[str, dict[str, Any]],
        plan: DataFramePlan | None = None,
        carry: Carry | None = None,
    ) -> None:
        self.tick = tick
        self.state = state
        self.lattices = lattices
        self.pending = pending
        self.plan = plan
        self.carry = carry


class DataFrameResult(SparkResult):
    """The state after a run as DataFrame plans: collections are DataFrames whose lattice
    columns hold native cells (``lmin`` as its value); same interface as :class:`SparkResult`.

    Attributes:
        touched: rows touched (new or grown) per semi-naive round, per stratum.
    """

    def __init__(
        self,
        spark: Any,
        plan: DataFramePlan,
        state: dict[str, Any],
        lattices: dict[str, Lattice],
        rounds: tuple[int, ...],
        touched: list[list[int]],
    ) -> None:
        super().__init__(spark, plan.ir, state, lattices, rounds)
        self.plan = plan
        self.touched = touched
        self.tick: int | None = None

    def dataframe(self, name: str, schema: Any = None) -> Any:
        """Collection ``name`` as a DataFrame with the collection's column names."""
        info = self.ir.collections.get(name)
        if info is None:
            self._collection(name)  # raises KeyError naming the known collections
        assert info is not None
        df = self._state.get(name)
        if df is None:
            return self._spark.createDataFrame([], schema or self._empty_schema(name))
        return df.toDF(*info.columns)

    def _empty_schema(self, name: str) -> Any:
        """An empty collection's schema: its declared one (``SparkEngine(schemas=...)``), else
        the types of the rows merged into it or queued for it so far (in this tick or an
        earlier one); ``void`` only for a column no row has shown yet."""
        from pyspark.sql.types import NullType, StructField, StructType

        columns = self.ir.collections[name].columns
        declared = self.plan.schemas.get(name)
        if declared is not None:
            types = [f.dataType for f in declared.fields]
        else:
            known = self.plan.column_types.get(name, {})
            types = [known.get(i, NullType()) for i in range(len(columns))]
        return StructType([StructField(c, t, True) for c, t in zip(columns, types, strict=True)])

    def is_empty(self, name: str) -> bool:
        """Whether collection ``name`` holds no rows, known without a Spark job (``False``
        may still mean zero rows: a stored frame whose rows ``<-`` deleted)."""
        self._collection(name)  # raises KeyError naming the known collections
        return self._state.get(name) is None

    def rows(self, name: str) -> list[tuple[Any, ...]]:
        """The rows of collection ``name``, collected, lattice cells as lattice values."""
        lat = self.plan.lattice_cols[name]
        fmts = {i: column_format(cls) for i, cls in lat.items()}
        out = []
        for r in self.dataframe(name).collect():
            out.append(tuple(fmts[i].from_cell(c) if i in fmts else c for i, c in enumerate(r)))
        return out

    def rdd(self, name: str) -> Any:
        """The rows of collection ``name`` as an RDD of tuples (classic sessions only)."""
        return self._spark.sparkContext.parallelize(self.rows(name))

    def _collection(self, name: str) -> Any:
        if name in self.ir.collections:
            return self._state.get(name)
        known = ", ".join(sorted([*self.ir.collections, *self.lattices]))
        raise KeyError(f"{self.ir.name} has no collection {name!r} (known: {known})")

    def __repr__(self) -> str:
        return (
            f"<DataFrameResult of {self.ir.name}: rounds per stratum {list(self.rounds)}, "
            f"rows touched per round {self.touched}>"
        )
