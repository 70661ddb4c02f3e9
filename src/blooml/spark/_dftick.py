"""The Spark tick driver: one tick of a planned program (:func:`run_plan`), stratum by
stratum and round by round, semi-naive within a tick and across ticks (only rules whose inputs
changed run, over the rows that changed), and what a tick hands the next (:class:`Carry`).

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blooml.errors import NotSupportedOnSpark, ProgramError
from blooml.ir import Group, Lat, LatConst, LatMethod, LatVar, Node, Rule, Scan, sources
from blooml.lattices._base import Lattice
from blooml.spark import _dfnotin, _dfpython, _jobs
from blooml.spark._dfeval import _aggregate, _Run
from blooml.spark._dffiles import _checkpoint
from blooml.spark._dflookup import in_chunk
from blooml.spark._dfplan import _INCREMENTAL, DataFramePlan
from blooml.spark._dfstate import (
    SMALL_DELTA,
    Overlay,
    _atomic,
    _local_frame,
    _local_plan,
    _local_rows,
    _matches,
    anti_join,
    learn_types,
)
from blooml.spark._exactsum import is_float_type
from blooml.spark._listinput import check_frame_types, typed_rows

__all__ = ["Carry", "run_plan"]


def _rules(indexes: list[int]) -> str:
    """``(rule 3)`` / ``(rules 0, 1)``: what a job label names as the source of its rows."""
    return f"(rule{'s' if len(indexes) > 1 else ''} {', '.join(map(str, indexes))})"


class Carry:
    """What one tick hands the next besides the state itself: the exact row count of every
    stored collection (no job counts them again) and the scratches that inputs or pending
    facts fed (those start the next tick empty; the others keep their rows until a rule that
    derives them has a changed input); and, for whoever saves the state, what the tick
    changed (``delta``, ``shrunk``)."""

    __slots__ = ("counts", "delta", "fed", "overlays", "shrunk")

    def __init__(self, counts: dict[str, int] | None = None, fed: set[str] | None = None) -> None:
        self.counts = dict(counts or {})
        self.fed = set(fed or ())
        #: collection -> the changes kept on the driver on its last materialized frame
        #: (:class:`~blooml.spark._dfstate.Overlay`); a collection without one has a new
        #: frame, which whoever keeps the state writes
        self.overlays: dict[str, Overlay] = {}
        #: after a tick: collection -> the rows it gained or that grew (keyed: the merged rows)
        self.delta: dict[str, Any] = {}
        #: after a tick: the collections that lost rows (deleted, replaced, recomputed scratches)
        self.shrunk: set[str] = set()


def run_plan(
    spark: Any,
    plan: DataFramePlan,
    inputs: Mapping[str, Any],
    *,
    checkpoint_every: int,
    max_rounds: int,
    state: Mapping[str, Any] | None = None,
    lattices: Mapping[str, Lattice] | None = None,
    pending: Mapping[str, Mapping[str, Any]] | None = None,
    carry: Carry | None = None,
) -> tuple[
    dict[str, Any],
    dict[str, Lattice],
    tuple[int, ...],
    list[list[int]],
    dict[str, dict[str, Any]],
]:
    """Evaluate one tick; returns (state DataFrames, lattice values, rounds per stratum, rows
    touched per round per stratum, the facts for the next tick by op and collection).

    ``state``, ``lattices``, ``pending`` and ``carry`` carry a previous tick's results (``carry``
    is updated in place for the next tick): tables persist, scratches start empty, and the
    previous tick's ``<+-`` (replace by key), ``<-`` (delete, matched on the non-lattice
    columns) and ``<+`` (insert) facts apply first.

    With a previous tick the evaluation is semi-naive across ticks, as in the local engine: a
    rule none of whose inputs changed this tick is not evaluated (a scratch it derives keeps the
    rows it had), and the first round of a stratum joins only the rows the tick changed with
    the state; a rule that reads a changed input non-monotonically (``notin``'s right side, a
    ``group``, ``argmin``, ...) or that derives a scratch that must be recomputed runs over the
    whole state. A tick that changes nothing runs no Spark job."""
    ir = plan.ir
    run = _Run(spark, plan, checkpoint_every)
    if carry is None:
        carry = Carry()
    pend = pending or {}
    _jobs.label(what="inputs")
    fed = {n for n, df in inputs.items() if df is not None} | {
        n for by in pend.values() for n in by
    }
    scratch_fed = {n for n in fed | carry.fed if not ir.collections[n].persistent}
    derived = {r.head for r in ir.rules}
    for n, df in (state or {}).items():
        info = ir.collections[n]
        # a scratch keeps its rows only while rules alone derive it: rows an input or a
        # pending fact gave it (now or last tick) belong to that tick
        if info.persistent or (n in derived and n not in scratch_fed):
            run.state[n] = df
            if n in carry.counts:
                run.n_state[n] = carry.counts[n]
        else:
            run.lose(n)
            if n in derived:
                run.reset.add(n)
    run.fresh = state is None
    run.overlays = {n: ov for n, ov in carry.overlays.items() if run.state.get(n) is ov.frame}
    run.lattices.update(lattices or {})
    for name, rows in pend.get("<+-", {}).items():
        old = run.state.get(name)
        info = ir.collections[name]
        nk = len(info.keys) if info.values else len(info.columns)
        keys = run.cols(name)[:nk]
        _jobs.label(what=f"<+- facts of the previous tick: replace in {name}")
        if old is not None and not run.delete_local(name, rows, keys):
            run.state[name] = anti_join(old, rows.select(*keys).distinct(), keys)
            run.n_state.pop(name, None)
            run.rewrite.add(name)  # a new frame: kept in full
            run.lose(name)
        run.merge(name, rows, precount=True)
    for name, rows in pend.get("<-", {}).items():
        old = run.state.get(name)
        if old is not None:
            match = [c for i, c in enumerate(run.cols(name)) if i not in plan.lattice_cols[name]]
            _jobs.label(what=f"<- facts of the previous tick: delete from {name}")
            if run.delete_local(name, rows, match):
                continue
            run.state[name] = anti_join(old, rows.select(*match).distinct(), match)
            run.n_state.pop(name, None)
            run.rewrite.add(name)
            run.lose(name)
    for name, rows in pend.get("<+", {}).items():
        _jobs.label(what=f"<+ facts of the previous tick: insert into {name}")
        run.merge(name, rows, precount=True)
    _jobs.label(what="inputs")
    for name, df in inputs.items():
        if df is None:
            continue
        cols = run.cols(name)
        given = None
        if not (hasattr(df, "schema") and hasattr(df, "columns")):
            info = ir.collections[name]
            given, schema = typed_rows(name, info.kind, info.columns, df, _known_types(run, name))
            if not given:
                continue  # no rows
            df = spark.createDataFrame(given, schema)
        if len(df.columns) != len(cols):
            raise ProgramError(
                f"input {name!r}: {ir.collections[name].kind} {name!r} has columns "
                f"{list(ir.collections[name].columns)}; the DataFrame has {df.columns}"
            )
        if given is None:
            check_frame_types(name, ir.collections[name].columns, df, _known_types(run, name))
        df = df.toDF(*cols)
        if given is None or not run.merge_local(name, df, given):
            run.merge(name, df)
    run.fed = {n for n in fed if not ir.collections[n].persistent}
    rounds: list[int] = []
    for s_index, stratum in enumerate(ir.strata):
        rules = [ir.rules[i] for i in stratum]
        _jobs.label(stratum=s_index)
        try:
            rounds.append(_stratum(run, rules, max_rounds))
        except Exception as exc:
            why = _jobs.failure(exc, ir, stratum)
            _jobs.log.warning("%s stratum %d failed: %s", ir.name, s_index, why)
            raise
    # end of tick: the temporal rules over the final state; their facts wait for the next tick
    run.recursive = set()
    nxt: dict[str, dict[str, Any]] = {}
    for i in ir.temporal:
        rule = ir.rules[i]
        _jobs.label(end=True, rule=rule)
        rows = run.eval(rule.body, None, [0])
        if rows is None:
            continue
        rows = rows.select(*[rows[c].alias(f"c{j}") for j, c in enumerate(rows.columns)])
        learn_types(plan, rule.head, rows)
        by_head = nxt.setdefault(rule.op, {})
        prev = by_head.get(rule.head)
        by_head[rule.head] = rows if prev is None else prev.unionByName(rows)
    for op, by_head in nxt.items():
        for name in by_head:
            idx = [i for i in ir.temporal if ir.rules[i].head == name and ir.rules[i].op == op]
            _jobs.label(end=True, what=f"{op} facts for the next tick into {name} {_rules(idx)}")
            if not _local_plan(by_head[name]):  # rows on the driver stay there
                by_head[name] = _checkpoint(by_head[name])  # a snapshot of this tick's state
    # a collection given a new frame (not only overlay changes) is kept anew by the engine;
    # the others stay their materialized frames plus their overlays (compacted between ticks)
    carry.overlays = {
        n: ov
        for n, ov in run.overlays.items()
        if n not in run.rewrite and run.state.get(n) is ov.frame
    }
    carry.counts = {n: c for n, c in run.n_state.items() if n in run.state}
    carry.fed = set(run.fed)
    carry.shrunk = set(run.shrunk) | (set(run.state) if run.fresh else set())
    carry.delta = {}
    for name, parts in run.tick_delta.items():
        df = parts[0][0]
        for p, _ in parts[1:]:
            df = df.unionByName(p)
        carry.delta[name] = df
    return run.state, run.lattices, tuple(rounds), run.touched, nxt


def _as_frame(spark: Any, data: Any, columns: tuple[str, ...], lat: dict[int, type]) -> Any:
    """A frame of an input (a DataFrame as it is; Python rows typed by what they hold, as
    :func:`blooml.spark._listinput.typed_rows` types them), or None for no rows."""
    if hasattr(data, "schema") and hasattr(data, "columns"):
        return data
    rows, schema = typed_rows("input", "collection", columns, data, {})
    return spark.createDataFrame(rows, schema) if rows else None


def _known_types(run: _Run, name: str) -> dict[int, Any]:
    """Column index -> the Spark type collection ``name``'s column is known to hold: declared
    (``SparkEngine(schemas=...)``), else as stored, else as learned from earlier rows."""
    from pyspark.sql.types import NullType

    declared = run.plan.schemas.get(name)
    if declared is not None:
        return {i: f.dataType for i, f in enumerate(declared.fields)}
    known = dict(run.plan.column_types.get(name, {}))
    old = run.state.get(name)
    if old is not None:
        for i, f in enumerate(old.schema.fields):
            if not isinstance(f.dataType, NullType):
                known[i] = f.dataType
    return known


def _stratum(run: _Run, rules: list[Rule], max_rounds: int) -> int:
    ir = run.ir
    heads = {r.head for r in rules}
    reads = {name for r in rules for name, _ in sources(r.body)}
    run.recursive = {h for h in heads if h in reads and h in ir.collections}
    run.delta = {}
    touched_log: list[int] = []
    changed_lats: set[str] = set()
    first_rules = _first_round(run, rules)
    rounds = 0
    while True:
        rounds += 1
        if rounds > max_rounds:
            raise ProgramError(
                f"{ir.name}: the stratum of rules {[r.index for r in rules]} did not reach a "
                f"fixpoint in {max_rounds} rounds (raise max_rounds if it should)"
            )
        first = rounds == 1
        derived: dict[str, list[Any]] = {}
        lat_news: dict[str, list[Lattice]] = {}
        incr: dict[str, int] = {}  # heads updated incrementally: rows changed
        incr_delta: dict[str, Any] = {}
        # heads whose rows this round came only from rules joining the tick's delta
        from_delta: set[str] = set()
        from_state: set[str] = set()
        for rule in rules:
            if first and first_rules[rule.index] == "skip":
                continue
            _jobs.label(round=rounds, rule=rule)
            if isinstance(rule.body, Lat):
                if first or {n for n, _ in sources(rule.body)} & changed_lats:
                    lat_news.setdefault(rule.head, []).append(_eval_lat(run, rule, rule.body))
                continue
            if first and first_rules[rule.index] == "notin":
                _jobs.label(round=rounds, what=f"update {rule.head} (rule {rule.index})")
                parts, n = _dfnotin.update(run, rule)
                if n:  # a scratch head changed in place
                    incr[rule.head] = n
                if parts:  # a table head: the rows that became derivable
                    derived.setdefault(rule.head, []).extend(parts)
                    from_delta.add(rule.head)
                continue
            if first and first_rules[rule.index] in ("incr", "regroup"):
                _jobs.label(round=rounds, what=f"update {rule.head} (rule {rule.index})")
                regroup = first_rules[rule.index] == "regroup"
                delta, n = _regroup(run, rule) if regroup else run.incr_group(rule)
                incr[rule.head] = n
                if delta is not None and rule.head in reads:
                    incr_delta[rule.head] = delta
                continue
            if first and first_rules[rule.index] == "delta":
                parts = _tick_delta_rows(run, rule)
                from_delta.add(rule.head)
            else:
                parts = _rule_rows(run, rule, first)
                from_state.add(rule.head)
            if ir.is_lattice(rule.head):
                cls = ir.lattices[rule.head].cls
                for df in parts:
                    lat_news.setdefault(rule.head, []).append(
                        _dfpython.fold_rows(run.plan, df, cls, rule)
                    )
            else:
                derived.setdefault(rule.head, []).extend(parts)
        changed_lats = set()
        for name, values in lat_news.items():
            old = run.lattices[name]
            new = old
            for v in values:
                new = new.merge(v)
            if new != old:
                run.lattices[name] = new
                changed_lats.add(name)
        run.tick_lats |= changed_lats
        # rows joined from small deltas only (a later tick): counted before they are merged
        small = not run.fresh and all(v <= SMALL_DELTA for v in run.n_delta.values())
        new_delta: dict[str, Any] = dict(incr_delta)
        run.n_delta = {h: incr[h] for h in incr_delta}
        run.sizes = {}
        touched = sum(incr.values())
        rows_new = {h: 0 for h in heads if h in ir.collections} | incr
        for name, parts in derived.items():
            if not parts:
                continue
            idx = [r.index for r in rules if r.head == name]
            _jobs.label(round=rounds, what=f"merge into {name} {_rules(idx)}")
            rows = _union(name, parts, rules)
            precount = name in from_delta - from_state if first else small
            delta, n = run.merge(name, rows, precount=precount)
            rows_new[name] = n
            touched += n
            if delta is not None and name in reads:
                new_delta[name] = delta
                run.n_delta[name] = n
        touched_log.append(touched)
        _jobs.log_round(ir.name, len(run.touched), rounds, rows_new, changed_lats)
        run.delta = new_delta
        if not (set(new_delta) | changed_lats) & reads:
            run.touched.append(touched_log)
            return rounds


def _first_round(run: _Run, rules: list[Rule]) -> dict[int, str]:
    """How each rule of a stratum runs in its first round: ``"full"`` (over the whole state),
    ``"delta"`` (over the rows this tick changed, joined with the state), ``"incr"``/
    ``"regroup"`` (a ``group`` by the groups touched), ``"notin"`` (a ``notin`` by the keys
    touched, :mod:`blooml.spark._dfnotin`) or ``"skip"`` (no input changed). A scratch
    derived by a rule that must run is recomputed from nothing, so every rule deriving it runs
    in full; so is a scratch that reads one recomputed in its stratum."""
    ir = run.ir
    if run.fresh:
        return {r.index: "full" for r in rules}
    changed = set(run.tick_delta) | run.tick_lats
    how: dict[int, str] = {}
    for rule in rules:
        srcs = list(sources(rule.body))
        if isinstance(rule.body, Lat):
            how[rule.index] = "full" if {n for n, _ in srcs} & run.tick_lats else "skip"
            continue
        if _incremental(run, rule, rules):
            how[rule.index] = "incr"
        elif _regroupable(run, rule, rules):
            how[rule.index] = "regroup"
        elif _dfnotin.follows_changes(run, rule, rules):
            how[rule.index] = "notin"
        elif any(nm and (n in changed or n in run.shrunk) for n, nm in srcs) or any(
            n in run.tick_lats for n, _ in srcs
        ):
            how[rule.index] = "full"
        elif any(n in changed for n, _ in srcs):
            how[rule.index] = "delta"
        elif (
            rule.head in ir.collections
            and not ir.collections[rule.head].persistent
            and any(n in run.shrunk for n, _ in srcs)
        ):
            # a scratch holds what its rules derive from the state now: rows it derived from
            # rows its inputs lost must go (a table keeps what it derived in earlier ticks)
            how[rule.index] = "full"
        else:
            how[rule.index] = "skip"
    redo = {
        r.head
        for r in rules
        if r.head in ir.collections
        and not ir.collections[r.head].persistent
        and (
            how[r.index] not in ("skip", "incr", "regroup", "notin")
            or r.head in run.fed
            or r.head in run.reset
        )
    }
    # a scratch of this stratum that reads one recomputed from nothing is recomputed too: the
    # rows it derived from rows that are gone must go (its first round cannot know them)
    while True:
        more = {
            r.head
            for r in rules
            if r.head in ir.collections
            and not ir.collections[r.head].persistent
            and r.head not in redo
            and any(n in redo for n, _ in sources(r.body))
        }
        if not more:
            break
        redo |= more
    for name in redo - run.fed:  # recomputed from nothing (a fed scratch holds this tick's rows)
        if run.state.pop(name, None) is not None:
            run.lose(name)
        run.n_state.pop(name, None)
    for rule in rules:
        if rule.head in redo:
            how[rule.index] = "full"
    return how


def _incremental(run: _Run, rule: Rule, rules: list[Rule]) -> bool:
    """Whether ``rule`` keeps its head up to date incrementally this tick (:meth:`_Run.
    incr_group`): a ``group`` by ``count()``, ``sum``, ``min`` or ``max`` straight over a
    collection whose every change this tick is known on the driver: rows gained (few, local),
    and rows lost (known removals) only with ``count()`` among the aggregates and no ``min``
    or ``max`` (no NULL among the aggregated values); its head a keyed scratch keyed by the
    group's keys, that this rule alone derives and no other rule of the stratum reads, holding
    the rows of the previous tick."""
    node = rule.body
    if not isinstance(node, Group) or not isinstance(node.input, Scan):
        return False
    src, head = node.input.name, rule.head
    gained = run.tick_local.get(src, [])
    lost = run.removed.get(src, []) if src in run.shrunk else []
    info = run.ir.collections.get(head)
    if (
        gained is None
        or (src in run.shrunk and src not in run.removed)
        or not (gained or lost)
        or info is None
        or info.persistent
        or head not in run.state
        or head in run.fed
        or head in run.reset
        or len(info.keys) != len(node.keys)
        or run.plan.lattice_cols[head]
        or run.plan.python_nodes.get(id(node))
    ):
        return False
    rows = [*gained, *lost]
    if lost and not any(a.fn == "count" for a in node.aggs):
        return False  # rows lost: a group is gone when its count() is 0
    for a in node.aggs:
        if a.fn not in _INCREMENTAL or (a.fn == "count") != (a.col is None):
            return False
        if lost and a.fn not in ("count", "sum"):
            return False  # a min or max that lost a row: regrouped (_regroup)
        if a.col is not None and any(r[a.col] is None for r in rows):
            return False
        # a float sum is exact over all of a group's values: a stored sum plus the new
        # values' is not (it would depend on the ticks the values came in)
        col = a.col
        if a.fn == "sum" and col is not None and any(type(r[col]) is float for r in rows):
            return False
    if sum(1 for r in run.ir.rules if r.head == head) != 1:
        return False
    if not _atomic(run.state[head].schema):  # its touched groups become local rows
        return False
    fields = run.state[head].schema.fields
    if any(
        a.fn == "sum" and is_float_type(fields[len(node.keys) + j].dataType)
        for j, a in enumerate(node.aggs)
    ):
        return False  # a stored float sum (see above)
    return not any(r is not rule and head in {n for n, _ in sources(r.body)} for r in rules)


def _regroupable(run: _Run, rule: Rule, rules: list[Rule]) -> bool:
    """Whether ``rule``, a ``group`` (any aggregate) straight over a collection whose every
    change this tick is known on the driver — rows gained (few, local) and rows deleted
    (:meth:`~blooml.spark._dfstate._State.delete_local`) — keeps its head up to date by
    recomputing only the groups those rows touch (:func:`_regroup`); the head as for
    :func:`_incremental`: a keyed scratch keyed by the group's keys, derived by this rule alone
    and read by no other rule of the stratum, holding the previous tick's rows."""
    node = rule.body
    if not isinstance(node, Group) or not isinstance(node.input, Scan):
        return False
    src, head = node.input.name, rule.head
    info = run.ir.collections.get(head)
    gained = run.tick_local.get(src, [])
    lost = run.removed.get(src, []) if src in run.shrunk else []
    if (
        gained is None
        or (src in run.shrunk and src not in run.removed)
        or not (gained or lost)
        or src not in run.state
        or info is None
        or info.persistent
        or head not in run.state
        or head in run.fed
        or head in run.reset
        or len(info.keys) != len(node.keys)
        or run.plan.lattice_cols[head]
        or run.plan.python_nodes.get(id(node))
        or sum(1 for r in run.ir.rules if r.head == head) != 1
        or not _atomic(run.state[head].schema)
        or not _atomic(run.state[src].schema)
    ):
        return False
    return not any(r is not rule and head in {n for n, _ in sources(r.body)} for r in rules)


def _regroup(run: _Run, rule: Rule) -> tuple[Any, int]:
    """Update the scratch ``rule.head`` (see :func:`_regroupable`) for the groups this tick's
    changes of its input touch: one job aggregates the input's rows of those groups (a filter
    by their keys), one reads their stored rows; the new state is the stored one less those
    groups plus their new rows, an overlay change. Returns (the rows that changed or None, how
    many)."""
    from pyspark.sql import functions as F

    node = rule.body
    assert isinstance(node, Group) and isinstance(node.input, Scan)  # _regroupable
    name, src = rule.head, node.input.name
    rows = [*(run.tick_local.get(src) or ()), *run.removed.get(src, ())]
    keys = list(dict.fromkeys(tuple(r[i] for i in node.keys) for r in rows))
    data = run.state[src]
    src_cols = run.cols(src)
    nk = len(node.keys)
    where = _matches([src_cols[i] for i in node.keys], keys, data.schema, in_chunk(run.spark))
    part = data.where(where)  # as it is: Parquet prunes row groups by it (not by a coalesce)
    aggs = [
        _aggregate(a.fn, a.col, None if a.col is None else part.schema[f"c{a.col}"].dataType).alias(
            f"c{nk + j}"
        )
        for j, a in enumerate(node.aggs)
    ]
    grouped = part.groupBy(*[F.col(f"c{k}") for k in node.keys]).agg(
        *aggs, F.count(F.lit(1)).alias("_rows")
    )
    old = run.state[name]
    cols = run.cols(name)
    # a group with no rows left has no row (groupBy() of no keys gives one, counting 0)
    fresh = [tuple(r)[:-1] for r in grouped.collect() if r["_rows"]]
    new_rows = _local_rows(run.spark, fresh, old.schema)
    stored = {tuple(r[:nk]): tuple(r[nk:]) for r in run.stored_rows(name, cols[:nk], keys)}
    now = {tuple(r[:nk]): tuple(r[nk:]) for r in new_rows}
    changed = [(*k, *v) for k, v in now.items() if stored.get(k) != v]
    run._layer(
        name, run.state_rows(name) - len(stored) + len(new_rows), cols[:nk], list(stored), new_rows
    )
    if any(k in now for k in stored if stored[k] != now.get(k)) or set(stored) - set(now):
        run.lose(name)  # a stored group's row was replaced or removed
    if not changed:
        return None, 0
    delta = _local_frame(run.spark, changed, old.schema)
    run._local_delta(name, delta, changed)
    return delta, len(changed)


def _tick_delta_rows(run: _Run, rule: Rule) -> list[Any]:
    """The rows of ``rule`` that this tick's changes make derivable: one evaluation per
    occurrence of a changed collection, that occurrence reading the tick's delta of it and the
    others the whole state (which includes the delta)."""
    saved = run.recursive, run.delta, run.n_delta
    names = {n for n, _ in sources(rule.body) if n in run.tick_delta}
    run.recursive = names
    run.delta, run.n_delta = {}, {}
    for n in names:
        parts = run.tick_delta[n]
        rows = run.tick_local.get(n)
        df = parts[0][0]
        if rows is not None and len(parts) > 1:  # one local frame (no job to collect it)
            df = _local_frame(run.spark, rows, df.schema)
        else:
            for p, _ in parts[1:]:
                df = df.unionByName(p)
        run.delta[n] = df
        run.n_delta[n] = sum(c for _, c in parts)
        if rows is not None:
            run.local_frames[id(df)] = (df, rows)
    try:
        return _rule_rows(run, rule, False)
    finally:
        run.recursive, run.delta, run.n_delta = saved


def _union(name: str, parts: list[Any], rules: list[Rule]) -> Any:
    """The union of rule outputs for one head; columns must have one Spark type. Parts of
    one schema whose rows are on the driver (:func:`_local_plan`) give one local frame
    (collecting a union of local relations would run a job)."""
    from pyspark.sql.types import NullType, NumericType

    if len(parts) == 1:
        return parts[0]
    if all(p.schema == parts[0].schema and _local_plan(p) for p in parts):
        got = [tuple(r) for p in parts for r in p.collect()]
        if got:
            return _local_frame(parts[0].sparkSession, got, parts[0].schema)
    types = [[f.dataType for f in p.schema.fields] for p in parts]
    for j in range(len(types[0])):
        seen = {t[j] for t in types if not isinstance(t[j], NullType)}
        if len(seen) > 1 and not all(isinstance(t, NumericType) for t in seen):
            names = ", ".join(sorted(t.simpleString() for t in seen))
            raise NotSupportedOnSpark(
                ", ".join(r.describe() for r in rules if r.head == name),
                f"column {j} of {name!r} is derived with different Spark types ({names}); a "
                "DataFrame column has one type: run this program on the RDD path "
                "(SparkEngine(spark, path='rdd'))",
            )
    rows = parts[0]
    for p in parts[1:]:
        rows = rows.unionByName(p)
    return rows


def _rule_rows(run: _Run, rule: Rule, first: bool) -> list[Any]:
    if first:
        out = run.eval(rule.body, None, [0])
        return [] if out is None else [out]
    occurrences = sum(1 for name, _ in sources(rule.body) if name in run.recursive)
    parts = []
    for i in range(occurrences):
        out = run.eval(rule.body, i, [0])
        if out is not None:
            parts.append(out)
    return parts


def _eval_lat(run: _Run, rule: Rule, node: Node) -> Any:
    if isinstance(node, LatVar):
        return run.lattices[node.name]
    if isinstance(node, LatConst):
        return node.value
    if isinstance(node, LatMethod):
        target = _eval_lat(run, rule, node.target)
        args = [_eval_lat(run, rule, a) if isinstance(a, Node) else a for a in node.args]
        try:
            return getattr(target, node.name)(*args)
        except Exception as exc:
            exc.add_note(f"in {rule.describe()} (on Spark)")
            raise
    raise AssertionError(f"unplanned {node!r}")  # pragma: no cover
