"""Bloom^L strata on RDDs: ``SparkEngine``'s path for classic sessions (Python runs the rules).

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

This module knows the IR (:mod:`blooml.ir`) and nothing of the DSL; :mod:`blooml.spark._engine`
chooses between it and the DataFrame plans of :mod:`blooml.spark._dfengine`.
"""

from __future__ import annotations

import logging
from collections import namedtuple
from collections.abc import Callable, Iterator
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
from blooml.spark import _jobs
from blooml.spark._lazy import require_pyspark
from blooml.spark._rdd import fold

__all__ = ["RddPath", "check_rule"]

#: Each fixpoint round at INFO: the rows new per head and the lattice variables that grew.
log = logging.getLogger("blooml.spark")


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


def check_rule(ir: ProgramIR, rule: Rule) -> None:
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
        self.info = info
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
        self.info.check_keys(r)
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

    def __init__(self, engine: RddPath, run: _Run) -> None:
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

    def __init__(self, engine: RddPath, ir: ProgramIR) -> None:
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


class RddPath:
    """Runs one tick of a checked program's IR over RDDs (see the module docstring).

    Args:
        spark: a classic SparkSession.
        checkpoint_every, num_partitions, max_rounds: as for :class:`blooml.spark.SparkEngine`.
    """

    def __init__(
        self, spark: Any, *, checkpoint_every: int, num_partitions: int, max_rounds: int
    ) -> None:
        self.spark = spark
        self.checkpoint_every = checkpoint_every
        self.num_partitions = num_partitions
        self.max_rounds = max_rounds

    def run(
        self, ir: ProgramIR, inputs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Lattice], tuple[int, ...]]:
        """Load ``inputs`` (collection name -> DataFrame, RDD or iterable of rows) and run
        every stratum to fixpoint; returns (state RDDs of ``(key, row)``, lattice values,
        rounds per stratum)."""
        run = _Run(self, ir)
        _jobs.label(what="inputs")
        for name in ir.collections:
            rows = self._input_rdd(run, name, inputs.get(name))
            if rows is None:
                run.state[name] = run.sc.emptyRDD().partitionBy(self.num_partitions)
            else:
                merged, checkpoint = self._merge(run, name, rows)
                merged.count()
                self._commit(run, name, merged, checkpoint)
        for i, stratum in enumerate(ir.strata):
            _jobs.label(stratum=i)
            try:
                run.rounds.append(self._run_stratum(run, [ir.rules[r] for r in stratum]))
            except Exception as exc:
                log.warning("%s stratum %d failed: %s", ir.name, i, _jobs.failure(exc, ir, stratum))
                raise
        return run.state, run.lattices, tuple(run.rounds)

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
                _jobs.label(round=rounds, rule=rule)
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
                idx = ", ".join(str(r.index) for r in rules if r.head == name)
                _jobs.label(round=rounds, what=f"merge into {name} (rules {idx})")
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
            _jobs.log_round(ir.name, len(run.rounds), rounds, new_counts, changed_lats)
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


def _in_rule(
    rule: Rule | None, fn: Callable[..., Any], *args: Any, head: str = "", program: str = ""
) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        where = rule.describe() if rule is not None else f"merging into {head!r} of {program}"
        exc.add_note(f"in {where} (on Spark)")
        raise
