"""The direct tick: a request's tick without the strata machinery, for programs where every
rule is triggered by a channel (the shape of a service: ``store <= put.map(...)``,
``reply <~ get.map(...)``, ``reply <~ get.join(kv, get.k == kv.k).map(...)``).

In such a program a tick's work is fixed by which channels received rows: the rules over
those channels fire once each (nothing a ``<=`` rule writes is read by another ``<=`` rule's
body, so there is no fixpoint to iterate; the ``<~`` rules read what the ``<=`` rules wrote,
after them, as in the general path), the rules over the other channels derive nothing (a
``map`` of an empty channel, or an inner join with one, is empty), and there is no other
input to apply. :class:`DirectPlan` is built once per program (and again when a rule is
taken out of evaluation) when the program has that shape; ``run_tick`` then runs
``run_direct_tick`` for a tick whose whole input is channel rows: the same transaction
(begin, commit, rollback), durable write, failure report that names the row a rule raised on
(per-row isolation in ``blooml.net``), outbox and sends, on the collections the tick can
change.

What :meth:`DirectPlan.run` does is what the general path does for this shape, step for
step: the channels' last-tick rows leave (``turnover``), this tick's rows are stored in
their channels (``store_inputs``: the same ``add_many``, the same blame on failure), then
each rule over a channel that holds rows is fired by the same ``fire`` (``<=`` rules in
their strata's order, then the ``<~`` rules in theirs), which evaluates, folds, merges,
checks and encodes each sent row exactly as the general path does. What it skips is what
has nothing to do: the loops over every collection and rule of the general path, the units
and windows of rules whose channels received nothing.

A rule fits when its body is a ``map``/``filter`` over one channel, or over an inner
equi-join of scans (generated code, ``engine/_codegen``) at least one of which is a channel
and the others persistent tables (for a ``<=`` rule, tables no ``<=`` rule writes), and its
head is a lattice variable or a persistent table (``<=``, functions reading no lattice
variable) or a channel (``<~``). Not direct (the general path runs): any other rule in the
program, reference mode (``incremental=False``), a traced or DEBUG-logged tick,
``column_types="spark"``, input that is not channel rows (``<+``/``<-`` facts, inserts into
tables, lattice merges), a ``periodic`` or a soft-state collection in the program, a reader
of a tick's signed changes (``changes_of``), and the first tick after a reset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from blooml.engine._codegen import FusedMapEval
from blooml.engine._pending_input import blame, culprits
from blooml.engine._rules import CompiledRule, fire, note
from blooml.engine._state import Pending
from blooml.engine.relation import CheckedRows, Relation

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime

__all__ = ["DirectPlan", "direct_plan"]


class DirectPlan:
    """How a direct tick runs a program (see the module docstring): per channel, the rules
    that map over it, in the order the general path fires them.

    Attributes:
        rules: ``(rule, the channel it maps over)`` in firing order (strata, then ``<~``).
        channels: the names of the program's channels.
        tables: per channel, the tables the ``<=`` rules over it write.
    """

    __slots__ = ("channels", "rules", "tables", "where")

    def __init__(self, rules: list[tuple[CompiledRule, tuple[Relation, ...]]], rt: Runtime) -> None:
        self.rules = rules
        #: channel -> the tables that rules over it write (``<=``)
        self.tables: dict[str, list[Relation]] = {}
        for cr, chans in rules:
            if cr.head_rel is not None and cr.op == "<=":
                for src in chans:
                    self.tables.setdefault(src.name, []).append(cr.head_rel)
        self.channels = frozenset(n for n, r in rt.rels.items() if r.info.kind == "channel")
        self.where = {n: f"input to {n}" for n in self.channels}

    @classmethod
    def build(cls, rt: Runtime) -> DirectPlan | None:
        """The plan for ``rt``, or ``None`` when the program does not have the shape."""
        if not rt.incremental or rt.column_types == "spark":
            return None
        if rt.periodic or rt.feeds or rt.support or rt._rec_heads:
            return None
        if any(r.ttl is not None for r in rt.rels.values()):
            return None
        order = [cr for units in rt.units for u in units for cr in u.rules]
        if any(u.recursive for units in rt.units for u in units):
            return None
        order += rt.temporal
        if len(order) != len(rt.rules) - len(rt.disabled_rules):
            return None  # a rule that runs elsewhere
        # the tables written in a tick (by ``<=``): a ``<=`` rule reading one would need the
        # fixpoint; a ``<~`` rule reads them after every ``<=`` rule, as the general path does
        written = {cr.rule.head for cr in order if cr.op == "<="}
        out: list[tuple[CompiledRule, tuple[Relation, ...]]] = []
        for cr in order:
            body = cr.body
            if cr.only_scan is not None:
                srcs: list[Relation] = [cr.only_scan]
            elif type(body) is FusedMapEval:  # map/filter over an inner equi-join of scans
                srcs = [inp.rel for inp in body.inputs]
            else:
                return None
            chans = tuple(r for r in srcs if r.info.kind == "channel")
            if not chans:
                return None  # a rule over tables alone: it runs on their changes
            for r in srcs:
                if r.info.kind == "channel":
                    continue
                if not (r.persistent and r.info.kind == "table"):
                    return None
                if cr.op == "<=" and r.name in written:
                    return None
            if cr.is_lat_body or cr.zbody is not None or cr.feed is not None:
                return None
            if cr.op == "<=":
                head = cr.head_rel
                if cr.read_vars or cr.rule.reads_tick:
                    return None  # a value read within the tick could change: a fixpoint
                if head is not None and not (head.persistent and head.info.kind == "table"):
                    return None
                if head is None and cr.head_lat is None:
                    return None
            elif cr.op == "<~":
                if cr.head_rel is None or cr.head_rel.info.kind != "channel":
                    return None
            else:
                return None
            out.append((cr, chans))
        return cls(out, rt)

    def fits(self, rt: Runtime, pend: Pending) -> bool:
        """Whether the tick on ``pend`` can run directly: its whole input is channel rows
        (and nothing reads a tick's signed changes, ``changes_of``)."""
        if pend.deletes or pend.replaces or pend.lats or rt._reset or rt.changes_of:
            return False
        channels = self.channels
        return all(name in channels for name in pend.inserts)

    def touched(self, rt: Runtime, pend: Pending) -> list[Relation]:
        """The collections a direct tick on ``pend`` can change: the channels holding the
        last tick's rows (they leave), those receiving rows, and the tables the rules over
        those write. The others are left as the last tick committed them (no rows new, no
        undo log): beginning and committing them would change nothing."""
        rels = rt.rels
        out = {name: rels[name] for name, rows in rt.last_in.items() if rows}
        tables = self.tables
        for name, rows in pend.inserts.items():
            if rows:
                out[name] = rels[name]
                for head in tables.get(name, ()):
                    out[head.name] = head
        return list(out.values())

    def run(self, rt: Runtime, pend: Pending, now: float) -> None:
        """``apply_inputs`` and the strata of a tick on ``pend`` (see the module docstring);
        raises as they would (the caller rolls the tick back)."""
        # turnover: the last tick's input rows leave their channels
        rels = rt.rels
        rt.rec_dirty = set()
        last = rt.prev_in = rt.last_in
        for name, rows in last.items():
            if rows:
                rels[name].clear()
        # store_inputs: this tick's rows, stored as checked at arrival
        tick_in: dict[str, list[Any]] = {}
        rt.tick_in = tick_in
        where = self.where
        for name, rows in pend.inserts.items():
            if not rows:
                continue
            rel = rels[name]
            try:
                if type(rows) is not CheckedRows:
                    make = rel.make_row
                    rows = [make(r, where[name]) for r in rows]
                rel.add_many(rows, now, where[name])
            except Exception as exc:
                blame(exc, {name: culprits(exc, rows) or list(rows)})
                note(exc, "while applying the facts queued for this tick (<+, <-, <+-, inserts)")
                raise
            tick_in[name] = rows
        rt.last_in = tick_in
        # the rules: those over a channel that holds rows fire (on its rows, as the general
        # path's first round does); the others are marked as fire marks a rule with nothing
        for cr, chans in self.rules:
            live = False
            for src in chans:  # the window of each channel: its rows, as open_all opens it
                n = len(src.tick_new)
                src.lo, src.hi = 0, n
                live = live or n > 0
            if live:
                fire(rt, cr, True)
            else:
                cr.fresh = False
                head = cr.head_rel
                if head is not None:
                    cr.seen_removals = head.removals


def direct_plan(rt: Runtime) -> DirectPlan | None:
    """The runtime's direct plan (``None``: the program does not have the shape), planned
    again when the rules taken out of evaluation change (``disable_rule``)."""
    if rt._direct_for is not rt.disabled_rules:
        rt._direct = DirectPlan.build(rt)
        rt._direct_for = rt.disabled_rules
    return rt._direct
