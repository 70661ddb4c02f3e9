"""The incremental unit runner (``Program(incremental=True)``, the default).

``plan_units`` splits each stratum into units (the rules writing one head, or a recursive
component's rules), gives every collection that does not persist its derivation counts, and
an incremental evaluator (``blooml.engine._zops``) to every rule outside recursion that needs
one; ``run_units`` runs a stratum unit by unit; ``zfire`` applies a rule's signed output to
its head; ``run_recursive`` runs a recursive unit semi-naively (its scratch heads kept under
retraction by Backward/Forward with ranked versions: ``blooml.engine._dred``).
"""

from __future__ import annotations

from time import process_time
from typing import TYPE_CHECKING, Any

from blooml.engine._dred import DRed
from blooml.engine._feed import DeleteFeed, Feed, UpsertFeed
from blooml.engine._maintain import Support, zcompile_rule
from blooml.engine._priority import eligible_heads
from blooml.engine._rules import (
    CompiledRule,
    changed,
    fire,
    fold,
    note,
    open_inputs,
    run_stratum,
    run_stratum_prioritized,
)
from blooml.engine._state import LatVarState
from blooml.engine.relation import Relation
from blooml.ir.graph import has_nonmonotone, rule_units, sources

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime


class Unit:
    """One step of a stratum in incremental mode: the rules writing one head, or a recursive
    component's rules. A recursive unit runs semi-naively (its heads are its own delta); its
    scratch heads are re-derived in full when something it read was retracted (``dirty``)."""

    __slots__ = (
        "always",
        "dred",
        "heads",
        "in_lats",
        "in_rels",
        "monotone",
        "nonmono_rels",
        "nonmono_vars",
        "outside",
        "prio",
        "recursive",
        "rules",
        "scratch",
        "shared",
    )

    def __init__(self, rt: Runtime, recursive: bool, rules: list[CompiledRule]) -> None:
        self.recursive = recursive
        self.rules = rules
        heads = {cr.rule.head for cr in rules}
        self.scratch = [
            rt.rels[h]
            for h in dict.fromkeys(cr.rule.head for cr in rules)
            if h in rt.rels and not rt.rels[h].persistent
        ]
        self.prio = eligible_heads((cr.rule for cr in rules), rt.rels) if recursive else []
        outside: dict[str, Relation] = {}
        nonmono: dict[str, Relation] = {}
        nm_vars: dict[str, LatVarState] = {}
        for cr in rules:
            for name, nm in sources(cr.rule.body):
                if name in heads or name not in rt.rels:
                    continue
                (nonmono if nm else outside)[name] = rt.rels[name]
            for name in cr.rule.nonmonotone_reads:
                nm_vars[name] = rt.lats[name]
        self.outside = list(outside.values())
        self.nonmono_rels = list(nonmono.values())
        self.nonmono_vars = list(nm_vars.values())
        self.dred = DRed.build(rules, rt, self.scratch) if recursive and self.scratch else None
        self.heads: list[Relation] = []
        self.in_rels: tuple[Relation, ...] = ()
        self.in_lats: tuple[LatVarState, ...] = ()
        self.always = True
        self.monotone = False
        #: the unit's maintained head when several of its rules feed it: their changes are
        #: applied together (set by ``Runtime._plan_units``)
        self.shared: str | None = None

    def plan_idle(self) -> None:
        """What ``idle`` reads, once the rules' evaluators are chosen (``plan_units``)."""
        rules = self.rules
        heads = {cr.rule.head for cr in rules}
        #: the collections its rules write (begun when the unit runs: ``run_units``)
        self.heads = list(dict.fromkeys(cr.head_rel for cr in rules if cr.head_rel is not None))
        #: what its rules read, outside its heads: while none of it changed in a tick and no
        #: rule must be evaluated afresh, the unit derives nothing there
        self.in_rels = tuple(
            dict.fromkeys(r for cr in rules for r in cr.in_rels if r.name not in heads)
        )
        self.in_lats = tuple(dict.fromkeys(v for cr in rules for v in cr.in_lats))
        #: run every tick: a recursive unit (its own bookkeeping decides), or a rule that
        #: ``CompiledRule.always`` runs, re-derives a head that does not persist in full
        #: (no incremental evaluator), or refreshes soft state
        self.always = self.recursive or any(
            cr.always
            or (cr.zbody is None and not cr.persistent)
            or (cr.head_rel is not None and cr.head_rel.ttl is not None)
            for cr in rules
        )
        #: only semi-naive evaluators of monotone bodies: rows gone from an input change
        #: nothing they derive (their heads keep what they derived); only new rows count
        self.monotone = all(
            cr.zbody is None and not has_nonmonotone(cr.rule.body) and not cr.rule.nonmonotone_reads
            for cr in rules
        )

    def idle(self) -> bool:
        """Whether the unit would derive nothing this tick (see ``CompiledRule``'s ``idle``,
        ``blooml.engine._rules``): no rule is to be evaluated afresh (first evaluation, a
        table head that lost rows) and nothing it reads changed."""
        if self.always:
            return False
        if self.monotone:
            for rel in self.in_rels:
                if rel.tick_new:
                    return False
            for var in self.in_lats:
                if var.incs:
                    return False
        elif changed(self.in_rels, self.in_lats):
            return False
        for cr in self.rules:
            if cr.fresh or (cr.zfresh and cr.zbody is not None):
                return False
            head = cr.head_rel
            if head is not None and head.persistent and head.removals != cr.seen_removals:
                return False
        return True


def begin_once(touched: dict[Relation, Any], rel: Relation) -> None:
    """Begin ``rel``'s undo log for this tick unless the tick has already begun it: every
    change a tick makes to a relation comes after this call (``touched`` is what the tick
    commits or rolls back)."""
    if rel not in touched:
        touched[rel] = rel.begin()


def plan_units(rt: Runtime) -> None:
    """Incremental mode: split each stratum into units, give every collection that does
    not persist (but the scratch heads of recursive units) its derivation counts, and an
    incremental evaluator to every rule outside recursion that needs one: a rule into a
    maintained collection, or with a non-monotone body. A rule into a table or a lattice
    variable with a monotone body keeps the semi-naive evaluator, which already costs
    what changed (the head keeps what it derived; the body only gains)."""
    rec_heads: set[str] = set()
    plans = []
    for stratum in rt.strata:
        units = []
        for recursive, rules in rule_units([cr.rule for cr in stratum]):
            crs = [rt.rules[r.index] for r in rules]
            unit = Unit(rt, recursive, crs)
            units.append(unit)
            if recursive:
                for rel in unit.scratch:
                    rec_heads.add(rel.name)
                for cr in crs:
                    if cr.head_rel is not None and not cr.head_rel.persistent:
                        cr.persistent = True  # maintained: evaluated on deltas
        plans.append(units)
    # a collection no same-tick rule writes holds its input rows alone: they come and go
    # by key, without counts
    written = {cr.rule.head for cr in rt.rules if cr.rule.op == "<="}
    rt._rec_heads = rec_heads
    for name, rel in rt.rels.items():
        if not rel.persistent and name not in rec_heads and name in written:
            rt.support[name] = Support(rel)
    for units in plans:
        for unit in units:
            if unit.recursive:
                continue
            for cr in unit.rules:
                rule = cr.rule
                if cr.is_lat_body:
                    continue
                if rule.head in rt.support or has_nonmonotone(rule.body) or rule.nonmonotone_reads:
                    cr.zbody = zcompile_rule(rule, rt, cr.head_rel is not None, cr.read_vars)
            heads = {cr.rule.head for cr in unit.rules if cr.zbody is not None}
            feeding = [cr for cr in unit.rules if cr.zbody is not None]
            if len(feeding) > 1 and len(heads) == 1 and next(iter(heads)) in rt.support:
                unit.shared = next(iter(heads))
    for units in plans:
        for unit in units:
            unit.plan_idle()
    rt.units = plans
    plan_feeds(rt)
    rt._stateful = journaled(rt)


def plan_feeds(rt: Runtime) -> None:
    """Give a feed (``blooml.engine._feed``) to every next-tick rule over a collection that
    does not persist that can run on changes: a ``<+`` or ``<+-`` into a table without TTL
    that no other ``<+``/``<+-`` rule writes, and a ``<-`` from a table."""
    writers: dict[str, int] = {}
    for cr in rt.temporal:
        if cr.op in ("<+", "<+-"):
            writers[cr.rule.head] = writers.get(cr.rule.head, 0) + 1
    rt.feeds = []
    for cr in rt.temporal:
        head = cr.head_rel
        cr.feed = None
        if not cr.transient_full or head is None or head.info.kind != "table":
            continue
        if cr.op == "<+" and head.ttl is None and writers[cr.rule.head] == 1:
            cr.zbody = zcompile_rule(cr.rule, rt, True, cr.read_vars)
            cr.feed = Feed(cr.zbody, head)
        elif cr.op == "<+-" and head.ttl is None and writers[cr.rule.head] == 1:
            cr.zbody = zcompile_rule(cr.rule, rt, True, cr.read_vars)
            cr.feed = UpsertFeed(cr.zbody, head)
        elif cr.op == "<-":
            cr.zbody = zcompile_rule(cr.rule, rt, True, cr.read_vars)
            cr.feed = DeleteFeed(cr.zbody, head)
        else:
            continue
        rt.feeds.append(cr.feed)


def run_units(rt: Runtime, units: list[Unit]) -> None:
    """Incremental mode: one stratum, unit by unit in dependency order. Untraced, a unit
    that is ``idle`` is skipped; a unit that runs begins its heads (``Runtime._touched``)
    and keeps its rules' flags for a rollback (``Runtime._flags``)."""
    skip = rt._scoped and rt._rec is None
    touched = rt._touched
    flags = rt._flags
    for u in units:
        if skip and u.idle():
            continue
        for rel in u.heads:
            begin_once(touched, rel)
        for cr in u.rules:
            flags.append((cr, cr.fresh, cr.zfresh, cr.seen_removals))  # (keep_flags, inline)
        if u.recursive:
            run_recursive(rt, u)
            continue
        gather: list[tuple[Any, int]] | None = None
        if u.shared is not None:
            gather = []
        for cr in u.rules:
            if cr.zbody is not None:
                zfire(rt, cr, gather)
            else:  # a lattice-valued body: the semi-naive evaluator, one round
                open_inputs(cr)
                fire(rt, cr, True)
        if gather:
            # several rules into one maintained collection: their changes are applied
            # together, so that a key moving from one rule's row to another's (one
            # retracts what the other derives) is never seen holding both
            sup = rt.support[u.shared]  # type: ignore[index]
            try:
                sup.apply(gather, sup.rel.name)
            except BaseException as exc:
                if rt._failed is None:
                    rt._failed = u.rules[0].rule
                rules = ", ".join(f"rule {cr.rule.index}" for cr in u.rules)
                note(exc, f"in {rules} (into {sup.rel.name})")
                raise


def run_recursive(rt: Runtime, u: Unit) -> None:
    """A recursive unit: semi-naive from what its heads hold, on this tick's changes. When
    an input it reads lost rows, its scratch heads first lose what no longer derives
    (``DRed.run``); they are emptied and re-derived in full when that does not fit (a rule
    it cannot check, a non-monotone input that changed, a retraction reaching too much)."""
    force = False
    indexed: list[tuple[Relation, list[tuple[int, ...]]]] = []
    started = 0.0
    if u.scratch:
        force = rt._reset
        force = force or any(rel.tick_delta() for rel in u.nonmono_rels)
        force = force or any(v.incs for v in u.nonmono_vars)
        removed: dict[str, list[Any]] = {}
        if not force:
            for rel in u.outside:
                gone = [r for r, w in rel.tick_delta() if w < 0]
                if gone:
                    removed[rel.name] = gone
            for rel in u.scratch:
                if rel.name in rt.rec_dirty:  # last tick's input rows left
                    now_in = set(rt.tick_in.get(rel.name, ()))
                    gone = [r for r in rt.prev_in.get(rel.name, ()) if r not in now_in]
                    if gone:
                        removed[rel.name] = gone
        if removed:
            if u.dred is None or not u.dred.run(rt, removed):
                force = True
            else:
                for cr in u.rules:  # the heads lost rows on purpose: stay on deltas
                    if cr.head_rel is not None:
                        cr.seen_removals = cr.head_rel.removals
        if force:
            started = process_time()
            now = rt.now
            indexed = [(rel, list(rel.indexes)) for rel in u.scratch]
            for rel in u.scratch:
                if not rel.undo and rel._saved is None:
                    rel.clear()  # untouched this tick: emptied whole, kept for a rollback
                    continue
                for k in list(rel.store):
                    rel.drop(k)
            if u.dred is not None:
                u.dred.reset()  # the heads' versions are rebuilt from their re-derivation
            for rel in u.scratch:
                rows = rt.tick_in.get(rel.name)
                if rows:
                    rel.add_many(rows, now, f"input to {rel.name}")
    # rank the heads' rows after every rule's evaluation (each stores into one head, rows
    # derived from rows stored before it), while they are in the cache; and first what was
    # stored before the rounds (input rows, a retraction's re-derived rows)
    after = u.dred.settle if u.dred is not None else None
    if after is not None:
        after()
    if u.prio and rt.prioritize:
        skip = u.dred.requeued if u.dred is not None else None
        run_stratum_prioritized(rt, u.rules, u.prio, force, after, skip)
    else:
        run_stratum(rt, u.rules, force, after)
    if u.dred is not None:
        u.dred.settle()  # rank what this tick stored in the heads
    if force and u.scratch and not rt._reset:
        # emptying and refilling the heads outgrew their indexes' change logs, which were
        # dropped: rebuild them in this tick, which costs the view's size anyway, rather than
        # at the next one's first probe (an insert after such a tick cost 60x another).
        # Not the index on the head's key (``reach.n == edge.src``): the store answers
        # those probes until they pay for it (``Relation.index``), so that neither the
        # re-derivation nor the insert after it pays a pass over the view for a few probes
        for rel, cols in indexed:
            for c in cols:
                if c != rel.key_cols:
                    rel.index(c)
    if force and u.dred is not None:
        u.dred.derived(process_time() - started)  # what the next retraction may spend


def zfire(rt: Runtime, cr: CompiledRule, gather: list[tuple[Any, int]] | None = None) -> None:
    """Run a rule's incremental evaluator and apply its signed output to the head: counts
    of a maintained collection (or, with ``gather``, add them to it, to be applied with
    the other rules' of the unit), the rows it gained for a table, the merge of its new
    rows for a lattice variable."""
    rt.firing = cr
    z = cr.zbody
    assert z is not None
    head = cr.head_rel
    try:
        # a table that lost rows gets what the body still derives; soft state is
        # refreshed by every derivation, so a rule into it derives all of it each tick
        fresh = cr.zfresh or (
            head is not None
            and head.persistent
            and (head.removals != cr.seen_removals or head.ttl is not None)
        )
        if fresh:
            rows = z.init()
            delta: list[tuple[Any, int]] | None = None
        else:
            delta = z.step()
            rows = [r for r, w in delta if w > 0]
        rec = rt._rec
        before = 0
        if rec is not None:
            before = len(head.tick_new) if head is not None else len(cr.head_lat.incs)  # type: ignore[union-attr]
        if head is not None:
            sup = rt.support.get(head.name)
            if sup is not None:
                make, where = head.make_row, cr.where
                if delta is None:
                    made = [(make(r, where), 1) for r in rows]
                else:
                    made = [(make(r, where), w) for r, w in delta]
                if gather is not None:
                    gather.extend(made)
                elif made:
                    sup.apply(made, where)
            elif rows:
                head.add_many(rows, rt.now, cr.where)
        elif rows:
            value = fold(rt, cr, rows)
            if value is not None:
                cr.head_lat.merge_in(value, cr.where)  # type: ignore[union-attr]
        if rec is not None and rows:
            after = len(head.tick_new) if head is not None else len(cr.head_lat.incs)  # type: ignore[union-attr]
            rec.rule(cr.rule.index, rows, after - before)
    except BaseException as exc:
        if rt._failed is None:
            rt._failed = cr.rule
        note(exc, f"in {cr.where}")
        raise
    cr.zfresh = False
    cr.fresh = False
    if head is not None:
        cr.seen_removals = head.removals


def journaled(rt: Runtime) -> list[Any]:
    """The incremental state that a tick changes and a rollback undoes: the derivation
    counts of maintained collections and the operators that keep state."""
    out: list[Any] = list(rt.support.values())
    out.extend(rt.feeds)
    for cr in rt.rules:
        stack = [cr.zbody] if cr.zbody is not None else []
        while stack:
            z = stack.pop()
            if hasattr(z, "journal"):
                out.append(z)
            stack.extend(z.children())
    out.extend(u.dred for units in rt.units for u in units if u.dred is not None)
    return out
