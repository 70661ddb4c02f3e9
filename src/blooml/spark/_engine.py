"""``SparkEngine``: one tick of a Bloom^L program evaluated on Spark, from its IR alone.

Each collection lives in an RDD of ``(key, row)`` pairs hash-partitioned by key (rows are plain
tuples; a user function sees them as named tuples, as in the local engine). Strata run in
order; each runs to fixpoint semi-naively: the first round evaluates every rule on the full
state, and each later round joins only the *delta* — the rows that are new or whose lattice
columns grew in the previous round — against the full state. A new row merges into the stored
row with the same key (lattice columns by ``merge``; any other disagreement is a
:class:`~blooml.errors.KeyConstraintError`). Every ``checkpoint_every`` rounds the state is
checkpointed so lineage (and planning time) stays bounded. Lattice variables are single values
kept on the driver; a collection folded into one is folded on the executors
(:func:`blooml.spark.fold`).

This module knows the IR (:mod:`blooml.ir`) and nothing of the DSL.
"""

from __future__ import annotations

import logging
import re
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from blooml.errors import KeyConstraintError, NotSupportedOnSpark, ProgramError
from blooml.ir import (
    Filter,
    FlatMap,
    Group,
    Join,
    Lat,
    LatConst,
    LatMethod,
    LatVar,
    Literal,
    Map,
    Node,
    NotIn,
    ProgramIR,
    Rule,
    Scan,
    sources,
)
from blooml.ir.aggregates import apply_aggregate
from blooml.ir.nodes import AGG_NAMES
from blooml.ir.program import CollectionInfo
from blooml.lattices._base import Lattice
from blooml.spark import _dfpython
from blooml.spark._dfengine import DataFramePlan, run_plan
from blooml.spark._errors import worker_errors
from blooml.spark._formats import Pickled, column_format, spec_of
from blooml.spark._lazy import check_worker_python, is_connect, require_pyspark
from blooml.spark._rdd import fold

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


def _unsupported_rel(node: Node) -> str | None:
    """Why a relational body cannot run on Spark (``None`` when it can)."""
    if isinstance(node, Scan):
        return None
    if isinstance(node, Literal):
        if any(isinstance(c, Node) for row in node.rows for c in row):
            return "literal rows with lattice cells read at run time are not supported on Spark"
        return None
    if isinstance(node, (Map, FlatMap, Filter)):
        return _unsupported_rel(node.input)
    if isinstance(node, Join):
        if node.how != "inner":
            return f"a {node.how} join (non-monotone) has no Spark translation yet"
        for inp in node.inputs:
            if isinstance(inp, Join):
                return "a join of joins is not supported on Spark; join the collections directly"
            why = _unsupported_rel(inp)
            if why:
                return why
        return None
    if isinstance(node, NotIn):
        for side in (node.left, node.right):
            if isinstance(side, Join):
                return "notin over a join is not supported on Spark; map the join first"
        return _unsupported_rel(node.left) or _unsupported_rel(node.right)
    if isinstance(node, Group):
        bad = [a.fn for a in node.aggs if a.fn not in AGG_NAMES]
        if bad:
            return f"the aggregate {bad[0]!r} has no Spark translation"
        return _unsupported_rel(node.input)
    name = type(node).__name__
    return (
        f"{name.lower()} ({name}) is not supported on Spark yet: SparkEngine runs scan, map, "
        "flat_map, filter, inner join, notin, group, lattice folds and morphisms"
    )


def _group_row(keys_aggs: Any) -> Callable[[Any], tuple[Any, ...]]:
    aggs = keys_aggs

    def finish(kv: Any) -> tuple[Any, ...]:
        key, rows = kv
        rows = list(rows)
        vals = []
        for a in aggs:
            if a.col is None:
                vals.append(apply_aggregate(a.fn, rows, rows))
                continue
            try:
                column = [r[a.col] for r in rows]
            except IndexError:
                raise ProgramError(
                    f"group: aggregate {a!r} refers to column {a.col}, but a row has only "
                    f"{len(rows[0])} columns: {rows[0]!r}"
                ) from None
            vals.append(apply_aggregate(a.fn, column, rows))
        return (*key, *vals)

    return finish


def _flat(item: Any) -> tuple[Any, ...]:
    """A join item as one row (the local engine's flattening for group)."""
    return tuple(c for r in item for c in (r if r is not None else ()))


def _unsupported_lat(node: Node) -> str | None:
    if isinstance(node, (LatVar, LatConst)):
        return None
    if isinstance(node, LatMethod):
        if node.kind == "nonmonotone":
            return f"the non-monotone lattice method {node.name!r} has no Spark translation yet"
        for n in (node.target, *node.args):
            if isinstance(n, Node):
                why = _unsupported_lat(n) if isinstance(n, Lat) else "a collection argument"
                if why:
                    return why
        return None
    return f"{type(node).__name__} is not supported on Spark yet"


def _check_rule(ir: ProgramIR, rule: Rule) -> None:
    def fail(reason: str) -> None:
        raise NotSupportedOnSpark(rule.describe(), reason)

    if rule.op != "<=":
        fail(
            f"{rule.op} takes effect at a later tick (or on the network); SparkEngine.run "
            "evaluates one tick's <= rules"
        )
    if rule.reads or rule.reads_tick:
        what = ", ".join(sorted(rule.reads)) or "tick_count"
        fail(f"its functions read program state ({what}) that Spark workers cannot see")
    if ir.is_lattice(rule.head):
        why = (
            _unsupported_lat(rule.body)
            if isinstance(rule.body, Lat)
            else (_unsupported_rel(rule.body))
        )
    elif isinstance(rule.body, Lat):
        why = "deriving rows from a lattice expression is not supported on Spark yet"
    else:
        why = _unsupported_rel(rule.body)
    if why:
        fail(why)


# -- rows, keys and merging (these run on the executors) ------------------------------------------


def _norm(x: Any) -> Iterator[tuple[Any, ...]]:
    if isinstance(x, tuple):
        yield x
    elif x is not None:
        yield (x,)


class _Head:
    """How rows of one collection are shaped, keyed and merged (shipped to the executors)."""

    def __init__(self, info: CollectionInfo) -> None:
        self.name = info.name
        self.kind = info.kind
        self.columns = info.columns
        self.arity = len(info.columns)
        self.nkeys = len(info.keys)
        self.full_key = not info.values

    def row(self, r: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(r, tuple):
            if self.arity != 1:
                raise ProgramError(
                    f"{where}: {self.kind} {self.name!r} has columns {list(self.columns)}; got "
                    f"the non-tuple {r!r}"
                )
            r = (r,)
        if len(r) != self.arity:
            raise ProgramError(
                f"{where}: {self.kind} {self.name!r} has {self.arity} columns "
                f"{list(self.columns)}; got {len(r)} values {tuple(r)!r}"
            )
        r = tuple(r)
        for i in range(self.nkeys):
            if isinstance(r[i], Lattice):
                raise ProgramError(
                    f"{self.kind} {self.name!r}: key column {self.columns[i]!r} holds the "
                    f"lattice value {r[i]!r} in {r!r}; lattice values cannot be key columns "
                    "(declare the column among the values)"
                )
        return r

    def keyed(self, r: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
        return (r if self.full_key else r[: self.nkeys]), r

    def merge_rows(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        return self.merge(self.keyed(a)[0], a, b)

    def merge(self, key: Any, a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
        if a == b:
            return a
        out = list(a)
        for i in range(self.nkeys, self.arity):
            x, y = a[i], b[i]
            if x is y or x == y:
                continue
            if isinstance(x, Lattice) and type(x) is type(y):
                out[i] = x.merge(y)
            else:
                raise KeyConstraintError(self.name, key, a, b)
        return tuple(out)


def _merge_step(head: _Head) -> Callable[[Any], Any]:
    """``cogroup(state, new rows)`` → ``(key, (merged row, changed))``."""

    def step(kv: Any) -> Any:
        key, (olds, news) = kv
        old = None
        for o in olds:
            old = o
        cur = old
        for r in news:
            cur = r if cur is None else head.merge(key, cur, r)
        return key, (cur, old is None or cur != old)

    return step


# -- evaluation ---------------------------------------------------------------------------------


class _Rows:
    """An evaluated relational node: an RDD, and the row type of each position of its items
    (one position for a collection or a map's output, one per input after a join)."""

    __slots__ = ("rdd", "types")

    def __init__(self, rdd: Any, types: tuple[Any, ...]) -> None:
        self.rdd = rdd
        self.types = types


def _wrap(fn: Callable[..., Any], types: tuple[Any, ...]) -> Callable[[Any], Any]:
    """``fn`` applied to an item as the local engine would call it (named tuples; ``fn(*rows)``
    after a join)."""
    if len(types) == 1:
        t = types[0]
        if t is None:
            return fn
        return lambda r: fn(tuple.__new__(t, r))

    def call(item: Any) -> Any:
        return fn(
            *(r if t is None else tuple.__new__(t, r) for r, t in zip(item, types, strict=True))
        )

    return call


class _Stratum:
    """Evaluation of rule bodies over the current full state and, in later rounds, deltas."""

    def __init__(self, engine: SparkEngine, run: _Run) -> None:
        self.engine = engine
        self.run = run

    def eval(self, node: Node, delta_at: int | None, counter: list[int]) -> _Rows | None:
        """Evaluate ``node``; the ``delta_at``-th recursive scan reads its delta instead of its
        full contents. ``None`` means: no rows (an empty delta)."""
        run = self.run
        if isinstance(node, Scan):
            idx = counter[0]
            if node.name in run.recursive:
                counter[0] += 1
            rowt = run.row_types[node.name]
            if delta_at is not None and idx == delta_at and node.name in run.recursive:
                d = run.delta.get(node.name)
                return None if d is None else _Rows(d, (rowt,))
            return _Rows(run.state[node.name].values(), (rowt,))
        if isinstance(node, Literal):
            return _Rows(run.sc.parallelize([tuple(r) for r in node.rows], 1), (None,))
        if isinstance(node, (Map, FlatMap, Filter)):
            inp = self.eval(node.input, delta_at, counter)
            if inp is None:
                return None
            call = _wrap(node.fn, inp.types)
            if isinstance(node, Filter):
                return _Rows(inp.rdd.filter(lambda x: bool(call(x))), inp.types)
            if isinstance(node, Map):
                return _Rows(inp.rdd.flatMap(lambda x: _norm(call(x))), (None,))
            return _Rows(
                inp.rdd.flatMap(lambda x: (r for y in (call(x) or ()) for r in _norm(y))),
                (None,),
            )
        if isinstance(node, Join):
            return self._join(node, delta_at, counter)
        if isinstance(node, NotIn):
            return self._notin(node, delta_at, counter)
        if isinstance(node, Group):
            # its input is complete (stratification: an earlier stratum's), so always in full
            inp = self.eval(node.input, None, counter)
            if inp is None:  # pragma: no cover - its input is an earlier stratum's, never a delta
                return None
            rows = inp.rdd if len(inp.types) == 1 else inp.rdd.map(_flat)
            keys = node.keys
            grouped = rows.map(lambda r: (tuple(r[i] for i in keys), r)).groupByKey(
                self.engine.num_partitions
            )
            return _Rows(grouped.map(_group_row(node.aggs)), (None,))
        raise AssertionError(f"unchecked node {node!r}")  # pragma: no cover - _check_rule

    def _join(self, node: Join, delta_at: int | None, counter: list[int]) -> _Rows | None:
        parts = [self.eval(inp, delta_at, counter) for inp in node.inputs]
        if any(p is None for p in parts):
            return None
        n = self.engine.num_partitions
        acc = parts[0].rdd.map(_one)  # type: ignore[union-attr]
        types: list[Any] = list(parts[0].types)  # type: ignore[union-attr]
        for j in range(1, len(parts)):
            preds = [p for p in node.preds if p.right == j]
            right = parts[j].rdd  # type: ignore[union-attr]
            if not preds:
                acc = acc.cartesian(right).map(_append)
            else:
                lk = tuple((p.left, p.lcol) for p in preds)
                rk = tuple(p.rcol for p in preds)
                left_keyed = acc.map(lambda item, lk=lk: (tuple(item[i][c] for i, c in lk), item))
                right_keyed = self._keyed(node.inputs[j], right, rk)
                acc = left_keyed.partitionBy(n).join(right_keyed, n).map(_join_item)
            types.extend(parts[j].types)  # type: ignore[union-attr]
        return _Rows(acc, tuple(types))

    def _notin(self, node: NotIn, delta_at: int | None, counter: list[int]) -> _Rows | None:
        """Rows of ``left`` with no match in ``right`` (complete: an earlier stratum's)."""
        left = self.eval(node.left, delta_at, counter)
        if left is None:
            return None
        right = self.eval(node.right, None, counter)
        n = self.engine.num_partitions
        lt, rt = left.types[0], right.types[0] if right is not None else None
        fn = node.fn
        test = None
        if fn is not None:

            def test(lrow: Any, rrow: Any) -> bool:
                a = lrow if lt is None else tuple.__new__(lt, lrow)
                b = rrow if rt is None else tuple.__new__(rt, rrow)
                return bool(fn(a, b))

        if right is None:
            return left
        if node.preds:
            lcols = tuple(p.lcol for p in node.preds)
            rcols = tuple(p.rcol for p in node.preds)
            lk = left.rdd.map(lambda r: (tuple(r[c] for c in lcols), r))
            rk = right.rdd.map(lambda r: (tuple(r[c] for c in rcols), r))
            if test is None:
                return _Rows(lk.subtractByKey(rk, n).values(), left.types)
            return _Rows(
                lk.cogroup(rk, n).flatMap(
                    lambda kv: [a for a in kv[1][0] if not any(test(a, b) for b in kv[1][1])]
                ),
                left.types,
            )
        if test is not None:
            # no equality to partition on: every left row is tested against every right row,
            # so the right side is broadcast (it must fit in memory)
            others = self.run.sc.broadcast(right.rdd.collect())
            return _Rows(
                left.rdd.filter(lambda a: not any(test(a, b) for b in others.value)), left.types
            )
        bad = right.rdd.map(lambda r: (tuple(r), None))
        return _Rows(
            left.rdd.map(lambda r: (tuple(r), None)).subtractByKey(bad, n).keys(), left.types
        )

    def _keyed(self, node: Node, rdd: Any, cols: tuple[int, ...]) -> Any:
        """``rdd`` keyed by ``cols`` and hash-partitioned; an input that cannot change during
        the stratum (it reads no recursive collection) is keyed, shuffled and cached once."""
        run = self.run
        keyed = rdd.map(lambda r: (tuple(r[c] for c in cols), r)).partitionBy(
            self.engine.num_partitions
        )
        if any(name in run.recursive for name, _ in sources(node)):
            return keyed
        memo_key = (id(node), cols)
        cached = run.static.get(memo_key)
        if cached is None:
            cached = run.static[memo_key] = keyed.persist()
        return cached


def _one(r: Any) -> tuple[Any]:
    return (r,)


def _append(lr: Any) -> tuple[Any, ...]:
    return (*lr[0], lr[1])


def _join_item(kv: Any) -> tuple[Any, ...]:
    return (*kv[1][0], kv[1][1])


class _Run:
    """The state of one ``SparkEngine.run``."""

    def __init__(self, engine: SparkEngine, ir: ProgramIR) -> None:
        self.ir = ir
        self.sc = engine.spark.sparkContext
        self.heads = {n: _Head(info) for n, info in ir.collections.items()}
        self.row_types = {
            n: namedtuple(n, info.columns)  # the row type the local engine passes to functions
            for n, info in ir.collections.items()
        }
        self.state: dict[str, Any] = {}
        self.delta: dict[str, Any] = {}
        self.recursive: set[str] = set()
        self.lattices = {n: info.initial for n, info in ir.lattices.items()}
        self.rounds: list[int] = []
        self.versions: dict[str, int] = {}
        self.kept: dict[str, list[Any]] = {}
        self.checkpoints: dict[str, Any] = {}
        self.static: dict[Any, Any] = {}


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
            ``"rdd"``: the RDD path (classic sessions; Python runs the rule functions);
            ``"auto"`` (default): ``"dataframe"`` on Spark Connect, ``"rdd"`` on a classic
            session (its columns may hold values of mixed types, as in Python).
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
        self.program = program
        self.checkpoint_every = checkpoint_every
        self.num_partitions = num_partitions or (
            0 if self.connect else spark.sparkContext.defaultParallelism
        )
        self.max_rounds = max_rounds

    def check(self, program: Any) -> ProgramIR:
        """Return the program's IR if every rule can run on Spark.

        Raises:
            NotSupportedOnSpark: naming the first rule that cannot, and why.
        """
        ir = _program_ir(program)
        for rule in ir.rules:
            _check_rule(ir, rule)
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
        if self.path == "dataframe" or (self.path == "auto" and self.connect):
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
        check_worker_python("SparkEngine", self.spark)
        ir = self.check(program)
        run = _Run(self, ir)
        inputs = dict(inputs or {})
        for name in inputs:
            if name not in ir.collections:
                known = ", ".join(sorted(ir.collections))
                raise KeyError(f"input {name!r} is not a collection of {ir.name} (known: {known})")
        for name in ir.collections:
            rows = self._input_rdd(run, name, inputs.get(name))
            if rows is None:
                run.state[name] = run.sc.emptyRDD().partitionBy(self.num_partitions)
            else:
                merged, checkpoint = self._merge(run, name, rows)
                merged.count()
                self._commit(run, name, merged, checkpoint)
        for i, stratum in enumerate(ir.strata):
            try:
                run.rounds.append(self._run_stratum(run, [ir.rules[r] for r in stratum]))
            except Exception as exc:
                log.warning("%s stratum %d failed: %s", ir.name, i, _failure(exc, ir, stratum))
                raise
        return SparkResult(self.spark, ir, run.state, run.lattices, tuple(run.rounds))

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
        _dfpython.declare(plan, self.spark, self.schemas)
        if any(plan.python_nodes.values()):
            check_worker_python("SparkEngine", self.spark)
        with worker_errors():  # a rule function raising on a worker: named by its rule
            state, lattices, rounds, touched, pending = run_plan(
                self.spark,
                plan,
                frames,
                checkpoint_every=self.checkpoint_every,
                max_rounds=self.max_rounds,
                state=carried.state if carried else None,
                lattices=carried.lattices if carried else None,
                pending=carried.pending if carried else None,
            )
        result = DataFrameResult(self.spark, plan, state, lattices, rounds, touched)
        if keep:
            tick = carried.tick + 1 if carried else 0
            self._ticks[plan.ir.name] = _Carried(tick, state, lattices, pending, plan)
            result.tick = tick
        return result

    def tick(self, inputs: Mapping[str, Any] | None = None, *, program: Any = None) -> SparkResult:
        """Run the next tick of the program, keeping its state for the one after.

        ``engine = SparkEngine(spark, program=P); engine.tick({"link": df})``.

        Tables persist across ticks (as DataFrames, localCheckpointed), scratches start each
        tick empty, lattice variables keep their values, and the facts of the previous tick's
        ``<+`` (insert), ``<-`` (delete) and ``<+-`` (replace by key) rules apply first, as in
        the local engine. Runs as DataFrame plans (every rule must lower). ``result.tick``
        counts the ticks from 0; :meth:`reset` forgets the program's state.

        Raises:
            NotSupportedOnSpark: a rule does not lower to DataFrame plans (before any job).
            TypeError: no program (pass ``program=`` here or to the engine).
        """
        ir = self._bound(program)
        for name in inputs or {}:
            if name not in ir.collections:
                known = ", ".join(sorted(ir.collections))
                raise KeyError(f"input {name!r} is not a collection of {ir.name} (known: {known})")
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
        self._ticks[ir.name] = _Carried(tick, frames, dict(lattices), pend, plan)

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

    def _input_rdd(self, run: _Run, name: str, data: Any) -> Any:
        head = run.heads[name]
        where = f"input {name!r}"
        if data is None:
            return None
        pyspark = require_pyspark("SparkEngine.run")
        if isinstance(data, pyspark.RDD):
            rdd = data
        elif hasattr(data, "rdd") and hasattr(data, "schema"):
            rdd = data.rdd.map(tuple)
        else:
            rdd = run.sc.parallelize([tuple(r) if isinstance(r, tuple) else r for r in data])
        return rdd.map(lambda r: head.row(r, where))

    def _merge(self, run: _Run, name: str, rows: Any) -> Any:
        """Merge new rows into a collection's state, persisted: RDD of
        ``(key, (row, changed))``; every ``checkpoint_every`` rounds it is checkpointed."""
        head = run.heads[name]
        n = self.num_partitions
        state = run.state.get(name)
        if state is None:
            state = run.sc.emptyRDD().partitionBy(n)
        # Combine duplicates map-side and hash-partition the new rows like the state, so the
        # cogroup shuffles only the new rows, never the (large) state.
        new = rows.map(head.keyed).reduceByKey(head.merge_rows, n)
        merged = state.cogroup(new, n).map(_merge_step(head), preservesPartitioning=True)
        merged.persist(_memory_and_disk())
        run.versions[name] = run.versions.get(name, 0) + 1
        checkpoint = run.versions[name] % self.checkpoint_every == 0
        if checkpoint:
            if run.sc._jsc.sc().getCheckpointDir().isDefined():
                merged.checkpoint()
            else:
                merged.localCheckpoint()
            run.checkpoints[name] = merged
        return merged, checkpoint

    def _commit(self, run: _Run, name: str, merged: Any, checkpoint: bool) -> None:
        """Make the computed ``merged`` the state, and drop cached versions no longer needed:
        all but the newest and the last checkpoint (its lineage ends there; a local
        checkpoint's data lives only in the block manager)."""
        run.state[name] = merged.mapValues(_first)
        base = run.checkpoints.get(name)
        for old in run.kept.get(name, []):
            if old is not base:
                old.unpersist()
        run.kept[name] = [merged] if base is None or base is merged else [base, merged]
        if checkpoint:
            for other in run.kept[name][:-1]:
                other.unpersist()
            run.kept[name] = [merged]

    def _run_stratum(self, run: _Run, rules: list[Rule]) -> int:
        ir = run.ir
        heads = {r.head for r in rules}
        reads = {name for r in rules for name, _ in sources(r.body)}
        run.recursive = {h for h in heads if h in reads and h in ir.collections}
        ev = _Stratum(self, run)
        rounds = 0
        changed_lats: set[str] = set()
        while True:
            rounds += 1
            if rounds > self.max_rounds:
                raise ProgramError(
                    f"{ir.name}: the stratum of rules {[r.index for r in rules]} did not reach a "
                    f"fixpoint in {self.max_rounds} rounds (raise max_rounds if it should)"
                )
            first = rounds == 1
            derived: dict[str, list[Any]] = {}
            lat_news: dict[str, list[Lattice]] = {}
            for rule in rules:
                if isinstance(rule.body, Lat):
                    if first or {n for n, _ in sources(rule.body)} & changed_lats:
                        v = self._eval_lat(run, rule, rule.body)
                        if v is not None:
                            lat_news.setdefault(rule.head, []).append(v)
                    continue
                parts = self._rule_rows(ev, run, rule, first)
                if ir.is_lattice(rule.head):
                    cls = ir.lattices[rule.head].cls
                    for part in parts:
                        items = part.map(_fold_item)
                        lat_news.setdefault(rule.head, []).append(_in_rule(rule, fold, items, cls))
                elif parts:
                    derived.setdefault(rule.head, []).extend(parts)
            # lattice variables: single values on the driver
            changed_lats = set()
            for name, values in lat_news.items():
                old = run.lattices[name]
                new = old
                for v in values:
                    new = _in_rule(None, new.merge, v, head=name, program=ir.name)
                if new != old:
                    run.lattices[name] = new
                    changed_lats.add(name)
            # collections: merged on the executors; the rows that changed are the next delta
            new_delta: dict[str, Any] = {}
            new_counts: dict[str, int] = {}
            computed: list[tuple[str, Any, bool]] = []
            for name, parts in derived.items():
                head = run.heads[name]
                where = f"a rule deriving {name!r}"
                rows = parts[0] if len(parts) == 1 else run.sc.union(parts)
                rows = rows.map(lambda r, head=head, where=where: head.row(r, where))
                merged, checkpoint = self._merge(run, name, rows)
                # Compute every version now, while the versions it reads are still cached:
                # older versions (and their local checkpoints) are dropped below.
                if name in reads:
                    delta = merged.filter(_changed).map(_first_of_value)
                    new_counts[name] = delta.count()
                    if new_counts[name]:
                        new_delta[name] = delta
                else:  # a delta nobody in this stratum reads
                    merged.count()
                computed.append((name, merged, checkpoint))
            # only now, when every head's new version is computed, may older versions go
            for name, merged, checkpoint in computed:
                self._commit(run, name, merged, checkpoint)
            run.delta = new_delta
            log.info(
                "%s stratum %d round %d: rows new %s, lattices grown %s",
                ir.name,
                len(run.rounds),
                rounds,
                new_counts or "{}",
                sorted(changed_lats) or "[]",
            )
            if not (set(new_delta) | changed_lats) & reads:
                for cached in run.static.values():
                    cached.unpersist()
                run.static.clear()
                return rounds

    def _rule_rows(self, ev: _Stratum, run: _Run, rule: Rule, first: bool) -> list[Any]:
        """The rows a rule derives this round (full in the first round, from deltas after)."""
        if first:
            out = ev.eval(rule.body, None, [0])
            return [] if out is None else [out.rdd]
        occurrences = sum(1 for name, _ in sources(rule.body) if name in run.recursive)
        parts = []
        for i in range(occurrences):
            out = ev.eval(rule.body, i, [0])
            if out is not None:
                parts.append(out.rdd)
        return parts

    def _eval_lat(self, run: _Run, rule: Rule, node: Node) -> Any:
        if isinstance(node, LatVar):
            return run.lattices[node.name]
        if isinstance(node, LatConst):
            return node.value
        if isinstance(node, LatMethod):
            target = self._eval_lat(run, rule, node.target)
            args = [self._eval_lat(run, rule, a) if isinstance(a, Node) else a for a in node.args]
            try:
                return getattr(target, node.name)(*args)
            except Exception as exc:
                exc.add_note(f"in {rule.describe()} (on Spark)")
                raise
        raise AssertionError(f"unchecked node {node!r}")  # pragma: no cover - _check_rule


def _memory_and_disk() -> Any:
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def _first(v: tuple[Any, bool]) -> Any:
    return v[0]


def _changed(kv: Any) -> bool:
    return bool(kv[1][1])


def _first_of_value(kv: Any) -> Any:
    return kv[1][0]


def _fold_item(r: tuple[Any, ...]) -> Any:
    """A row folded into a lattice: a one-column row is its value (as the local engine does)."""
    return r[0] if len(r) == 1 else r


def _failure(exc: BaseException, ir: ProgramIR, stratum: tuple[int, ...]) -> str:
    """One line for a failed stratum: the error (from a worker's traceback if need be) and the
    rule that raised (its note), else the stratum's rules."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
    what = errs[-1] if errs else f"{type(exc).__name__}: {lines[0] if lines else ''}"
    notes = [n for n in getattr(exc, "__notes__", ()) if "(on Spark)" in n]
    notes += [ln for ln in lines if ln.endswith("(on Spark)")]
    where = notes[-1] if notes else "; ".join(ir.rules[r].describe() for r in stratum[:3])
    return f"{what} ({where})"


def _in_rule(
    rule: Rule | None, fn: Callable[..., Any], *args: Any, head: str = "", program: str = ""
) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        where = rule.describe() if rule is not None else f"merging into {head!r} of {program}"
        exc.add_note(f"in {where} (on Spark)")
        raise


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

    __slots__ = ("lattices", "pending", "plan", "state", "tick")

    def __init__(
        self,
        tick: int,
        state: dict[str, Any],
        lattices: dict[str, Lattice],
        pending: dict[str, dict[str, Any]],
        plan: DataFramePlan | None = None,
    ) -> None:
        self.tick = tick
        self.state = state
        self.lattices = lattices
        self.pending = pending
        self.plan = plan


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
            from pyspark.sql.types import NullType, StructField, StructType

            return self._spark.createDataFrame(
                [],
                schema or StructType([StructField(c, NullType(), True) for c in info.columns]),
            )
        return df.toDF(*info.columns)

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
