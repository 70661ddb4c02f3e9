"""Rules bound to one runtime, and their semi-naive evaluation.

``CompiledRule`` holds a rule's evaluator, head and incremental bookkeeping; the functions
here fire rules (``fire``), apply what they derive to their heads (``emit``, ``fold``), queue
the facts of ``<+ <- <+- <~`` rules for the next tick (``defer``) and run a stratum to its
fixpoint, semi-naively (``run_stratum``; best value first: ``run_stratum_prioritized``).
The reference mode, and the rules that keep the semi-naive evaluator in incremental mode, run
here; the tick loop is ``blooml.engine._tick``, the incremental units ``blooml.engine._units``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blooml.engine._codegen import FusedMapEval, fused_map
from blooml.engine._feed import DeleteFeed, Feed, UpsertFeed
from blooml.engine._lat_eval import LatEval
from blooml.engine._net_entry import check_addr
from blooml.engine._pending_input import NOTE_MARK as _NOTE_MARK
from blooml.engine._priority import Frontier
from blooml.engine._reads import MonotoneRead, guard_class, undeclared_read
from blooml.engine._rel_eval import Eval, MapEval, ScanEval
from blooml.engine._state import LatVarState
from blooml.engine._zops import ZOp
from blooml.engine.compile import compile_node, flatten_rows
from blooml.engine.relation import MISSING, Relation
from blooml.engine.trace import TickRecorder
from blooml.ir.graph import sources
from blooml.ir.program import Rule

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime


def note(exc: BaseException, text: str) -> None:
    notes = getattr(exc, "__notes__", ())
    if not any(n.startswith(_NOTE_MARK) for n in notes):
        exc.add_note(_NOTE_MARK + text)


def _to_rows(rel: Relation, out: Any, where: str) -> list[Any]:
    """Rule results as rows of ``rel`` (for the facts queued for the next tick)."""
    make = rel.make_row
    if type(out) is list and len(out) == 1:  # one result (a request's reply): no loop
        r = out[0]
        return [] if r is None else [make(r, where)]
    return [make(r, where) for r in out if r is not None]


class CompiledRule:
    """A rule bound to one runtime: its evaluator, head and incremental bookkeeping."""

    __slots__ = (
        "always",
        "body",
        "feed",
        "fresh",
        "guards",
        "head_lat",
        "head_rel",
        "in_lats",
        "in_rels",
        "is_lat_body",
        "only_scan",
        "op",
        "persistent",
        "read_modes",
        "read_vars",
        "ref_full",
        "rule",
        "seen_removals",
        "transient_full",
        "where",
        "zbody",
        "zfresh",
    )

    def __init__(self, rule: Rule, rt: Runtime) -> None:
        self.rule = rule
        self.op = rule.op
        self.where = rule.describe()
        self.head_rel: Relation | None = rt.rels.get(rule.head)
        self.head_lat: LatVarState | None = rt.lats.get(rule.head)
        body: Any = fused_map(rule.body, rt, self.head_rel, rule.op) if rt.inline else None
        if body is None:
            body = compile_node(rule.body, rt, raw=self.head_rel is not None)
        if isinstance(body, Eval) and body.width > 1:
            # rows of a join (e.g. join(...).filter(...)) reach a head: concatenate them
            body = MapEval(body, flatten_rows, raw=self.head_rel is not None)
        self.body = body
        self.is_lat_body = isinstance(self.body, LatEval)
        #: the one relation the body maps over, when it is ``map(f)`` of a scan: while that
        #: relation holds no row and gained none, the rule derives nothing (see ``fire``)
        self.only_scan: Relation | None = None
        if type(body) is FusedMapEval and len(body.inputs) == 1:
            self.only_scan = body.inputs[0].rel
        elif type(body) is MapEval and type(body.inp) is ScanEval:
            self.only_scan = body.inp.rel
        self.read_vars = [rt.lats[v] for v in sorted(rule.reads)]
        # what the body reads: a rule none of whose inputs changed in a tick derives nothing
        # new there unless it must be evaluated in full (``idle``)
        names = [name for name, _ in sources(rule.body)]
        self.in_rels: tuple[Relation, ...] = tuple(
            dict.fromkeys(rt.rels[n] for n in names if n in rt.rels)
        )
        self.in_lats: tuple[LatVarState, ...] = tuple(
            dict.fromkeys([*(rt.lats[n] for n in names if n in rt.lats), *self.read_vars])
        )
        #: evaluated every tick, whatever changed: a body that reads no collection or lattice
        #: variable (literal rows), or ``tick_count``
        self.always = not names or rule.reads_tick
        # name -> the function may use the value freely (a non-monotone read, stratified
        # before this rule) or only through @morph/@monotone methods (a MonotoneRead guard)
        self.read_modes = {v: v in rule.nonmonotone_reads for v in rule.reads}
        self.guards: dict[str, MonotoneRead] = {}
        if self.head_rel is not None:
            # A message is an event: `<~` sends what the body derives anew (as for a table
            # head); a scratch head must hold every derivation, every tick.
            self.persistent = rule.op == "<~" or (
                self.head_rel.persistent and rule.op in ("<=", "<+", "<+-")
            )
        else:
            self.persistent = True
        self.fresh = True
        self.seen_removals = 0
        #: the incremental evaluator (``blooml.engine._maintain``), for rules it runs
        self.zbody: ZOp | None = None
        self.zfresh = True
        #: incremental mode, ``<+``/``<-`` over a scratch into a table: what it keeps
        #: (``blooml.engine._feed``; set by ``_units.plan_feeds``)
        self.feed: Feed | DeleteFeed | UpsertFeed | None = None
        # the reference (Program(incremental=False)) re-derives every rule each tick but
        # `<~`, whose messages are what a tick derives anew
        self.ref_full = not rt.incremental and rule.op != "<~"
        # incrementally, a next-tick rule over a collection that does not persist sees its
        # whole contents each tick (a scratch's rows are not new just because it kept them)
        self.transient_full = (
            rt.incremental
            and rule.temporal
            and any(
                name in rt.rels and not rt.rels[name].persistent for name, _ in sources(rule.body)
            )
        )

    def keep_flags(self, flags: list[tuple[CompiledRule, bool, bool, int]]) -> None:
        """Append this rule's incremental flags to ``flags`` (``Runtime._flags``), which a
        failed tick restores in reverse: the rule runs after this call in the tick. The hot
        loops of ``run_temporal`` and ``_units.run_units`` append the same tuple inline (a
        call less a rule): a flag added here must be added there."""
        flags.append((self, self.fresh, self.zfresh, self.seen_removals))

    def full_mode(self, first_round: bool) -> bool:
        """Whether this evaluation must be over the whole state (see the module docstring)."""
        if first_round:
            if self.fresh or not self.persistent or self.rule.reads_tick:
                return True
            if self.ref_full or self.transient_full:
                return True
            head = self.head_rel
            if head is not None and head.persistent and head.removals != self.seen_removals:
                return True
            if head is not None and head.ttl is not None:
                return True  # each derivation refreshes a soft-state row's lifetime
            for v in self.read_vars:  # noqa: SIM110 - a loop: no generator on the hot path
                if v.incs:
                    return True
            return False
        for v in self.read_vars:  # noqa: SIM110 - a loop: no generator on the hot path
            if v.hi > v.lo:
                return True
        return False

    def read(self, var: LatVarState) -> Any:
        """``self.<var>`` read by one of this rule's functions (verified against the IR)."""
        free = self.read_modes.get(var.name)
        if free is None:
            undeclared_read(self.where, var.name)
        value = var.value
        if free:
            return value
        g = self.guards.get(var.name)
        if g is None or g._value is not value:
            g = guard_class(var.cls)(value, var.name, self.where)
            self.guards[var.name] = g
        return g

    def evaluate(self, full: bool) -> Any:
        """The body's rows (or lattice value) to apply to the head."""
        b = self.body
        if self.is_lat_body:
            return b.value() if full else b.delta()
        return b.full() if full else b.delta()


def open_all(rt: Runtime, from_start: bool) -> bool:
    """Advance every delta window; return whether any is non-empty."""
    live = False
    for rel in rt.rels.values():
        if from_start:
            rel.lo = 0
        else:
            rel.lo = rel.hi
        rel.hi = len(rel.tick_new)
        live = live or rel.hi > rel.lo
    for var in rt.lats.values():
        var.lo = 0 if from_start else var.hi
        var.hi = len(var.incs)
        live = live or var.hi > var.lo
    return live


def open_inputs(cr: CompiledRule) -> None:
    """``open_all(rt, True)`` for the windows rule ``cr`` reads (its first round on its own:
    the other windows are not read by its evaluation)."""
    for rel in cr.in_rels:
        rel.lo = 0
        rel.hi = len(rel.tick_new)
    for var in cr.in_lats:
        var.lo = 0
        var.hi = len(var.incs)


def changed(rels: tuple[Relation, ...] | list[Relation], lats: Any) -> bool:
    """Whether any of ``rels`` changed in this tick (rows new, gone or replaced: its undo log,
    or emptied whole) or any of lattice variables ``lats`` grew."""
    for rel in rels:
        if rel.tick_new or rel.undo or rel._saved is not None:
            return True
    for var in lats:  # noqa: SIM110 - a loop: no generator on the tick's hot path
        if var.incs:
            return True
    return False


def idle(cr: CompiledRule) -> bool:
    """Whether the semi-naive evaluator of rule ``cr`` (in its first round) would derive
    nothing this tick, so that firing it can be skipped: it is not to be evaluated in full
    (``full_mode``) and nothing it reads changed (its delta windows are empty; what a
    non-monotone evaluator compares, the inputs' change counts, did not move)."""
    return not cr.always and not cr.full_mode(True) and not changed(cr.in_rels, cr.in_lats)


def run_stratum(
    rt: Runtime,
    rules: list[CompiledRule],
    force: bool = False,
    after: Callable[[], None] | None = None,
) -> None:
    """One stratum (or recursive unit) to fixpoint, semi-naively; ``after`` is called after
    every rule's evaluation (a recursive view ranking what its heads stored, in order)."""
    open_all(rt, True)
    first = True
    while True:
        for cr in rules:
            fire(rt, cr, first, force and first)
            if after is not None:
                after()
        first = False
        if not open_all(rt, False):
            break


def run_stratum_prioritized(
    rt: Runtime,
    rules: list[CompiledRule],
    heads: list[Relation],
    force: bool = False,
    after: Callable[[], None] | None = None,
    requeued: Callable[[], None] | None = None,
) -> None:
    """``_run_stratum`` with the deltas of ``heads`` processed best value first; the
    fixpoint ends only when no window is open and no deferred row is left. ``after`` is
    called after every rule's evaluation, ``requeued`` after the frontiers appended the
    next round's rows (rows stored before, appended again to ``tick_new``: a recursive
    view ranking what its heads store skips them)."""
    open_all(rt, True)
    fronts = [Frontier(rel) for rel in heads]
    first = True
    while True:
        for cr in rules:
            fire(rt, cr, first, force and first)
            if after is not None:
                after()
        first = False
        live = open_all(rt, False)
        for f in fronts:
            live = f.narrow() or live
        if requeued is not None:
            requeued()
        if not live:
            break


def run_temporal(rt: Runtime) -> None:
    """The end-of-tick rules (``<+ <- <+- <~``) on the tick's final state. Incrementally
    (and untraced), a rule that is ``idle`` is skipped (it would queue or send nothing), and
    a rule opens only the windows it reads."""
    flags = rt._flags
    if not (rt.incremental and rt._scoped) or rt._rec is not None:
        open_all(rt, True)
        for cr in rt.temporal:
            cr.keep_flags(flags)
            if cr.feed is not None:
                run_feed(rt, cr, cr.feed)
            else:
                fire(rt, cr, True)
        return
    for cr in rt.temporal:
        if cr.feed is not None:
            cr.keep_flags(flags)
            run_feed(rt, cr, cr.feed)
            continue
        scan = cr.only_scan
        if scan is not None and not scan.tick_new:
            if not scan.store:
                # a map over a collection with no row (a channel nothing arrived on):
                # ``fire`` would only set its marks (a request's reply rule of another channel)
                head = cr.head_rel
                if cr.fresh or (head is not None and cr.seen_removals != head.removals):
                    cr.keep_flags(flags)
                    fire(rt, cr, True)
                continue
            if idle(cr):
                continue
        elif scan is None and idle(cr):
            continue
        # (a map over a collection that gained rows this tick is never idle)
        flags.append((cr, cr.fresh, cr.zfresh, cr.seen_removals))  # (keep_flags, inline)
        open_inputs(cr)
        fire(rt, cr, True)


_FEED_KINDS: dict[type, str] = {Feed: "inserts", DeleteFeed: "deletes", UpsertFeed: "replaces"}


def run_feed(rt: Runtime, cr: CompiledRule, feed: Feed | DeleteFeed | UpsertFeed) -> None:
    """A next-tick rule over a scratch with a feed: queue the rows that change its head."""
    rt.firing = cr
    try:
        rows = feed.run(cr.zfresh, cr.where)
        if rows:
            kind = _FEED_KINDS[type(feed)]
            rt.pending.add(kind, feed.head.name, rows)
        if rt._rec is not None and rows:
            rt._rec.rule(cr.rule.index, rows, None)
    except BaseException as exc:
        if rt._failed is None:
            rt._failed = cr.rule
        note(exc, f"in {cr.where}")
        raise
    cr.zfresh = cr.fresh = False


def fire(rt: Runtime, cr: CompiledRule, first: bool, force: bool = False) -> None:
    scan = cr.only_scan
    if scan is not None and not scan.store and not scan.tick_new and rt._rec is None:
        # map(f) over a relation with no row at all (a channel nothing arrived on this
        # tick): the evaluation would find nothing, in full or on its delta; its marks only
        cr.fresh = False
        if cr.head_rel is not None:
            cr.seen_removals = cr.head_rel.removals
        return
    rt.firing = cr
    full = force or cr.full_mode(first)
    try:
        if rt._rec is not None:
            fire_observed(rt, cr, full, rt._rec)
        else:
            out = cr.evaluate(full)
            if cr.op == "<=":
                emit(rt, cr, out)
            else:
                defer(rt, cr, out)
    except BaseException as exc:
        if rt._failed is None:
            rt._failed = cr.rule
        note(exc, f"in {cr.where}")
        raise
    cr.fresh = False
    if cr.head_rel is not None:
        cr.seen_removals = cr.head_rel.removals


def fire_observed(rt: Runtime, cr: CompiledRule, full: bool, rec: TickRecorder) -> None:
    """``_fire``'s evaluation, recording what the rule derived and added."""
    out = cr.evaluate(full)
    if cr.is_lat_body:
        items = [] if out is None else [out]
    else:
        out = out if isinstance(out, list) else list(out)
        items = [r for r in out if r is not None]
    if cr.op != "<=":
        defer(rt, cr, out)
        if items:
            rec.rule(cr.rule.index, items, None)
        return
    rel, var = cr.head_rel, cr.head_lat
    before = len(rel.tick_new) if rel is not None else len(var.incs) if var else 0
    emit(rt, cr, out)
    after = len(rel.tick_new) if rel is not None else len(var.incs) if var else 0
    if items:
        rec.rule(cr.rule.index, items, after - before)


def emit(rt: Runtime, cr: CompiledRule, out: Any) -> None:
    rel = cr.head_rel
    if rel is not None:
        if out:
            rel.add_many(out if isinstance(out, list) else list(out), rt.now, cr.where)
        return
    var = cr.head_lat
    assert var is not None
    value = fold(rt, cr, out)
    if value is not None:
        var.merge_in(value, cr.where)


def fold(rt: Runtime, cr: CompiledRule, out: Any) -> Any:
    """A lattice head: the body's value, or its rows folded with merge (a row holding a
    None is skipped: NULL is ⊥, as Spark SQL's aggregates skip NULL)."""
    if cr.is_lat_body:
        return out
    var = cr.head_lat
    assert var is not None
    b = None
    for r in out:
        if r is None:
            continue
        if isinstance(r, tuple):
            # NULL is ⊥: a row with a None adds nothing (as Spark's lfold); tested by
            # identity (``None in r`` calls each lattice cell's ``__eq__``)
            null = False
            for x in r:
                if x is None:
                    null = True
                    break
            if null:
                continue
            item = r[0] if len(r) == 1 else tuple(r)
        else:
            item = r
        if b is None:
            b = var.cls.builder()
        b.add(item)
    return None if b is None else b.freeze()


def defer(rt: Runtime, cr: CompiledRule, out: Any) -> None:
    op = cr.op
    if cr.head_lat is not None:
        value = fold(rt, cr, out)
        if value is not None:
            if type(value) is not cr.head_lat.cls:
                cr.head_lat.merge_in(value, cr.where)  # raises the type error
            rt.pending.add("lats", cr.rule.head, [value])
        return
    rel = cr.head_rel
    assert rel is not None
    if type(out) is list and len(out) == 1:  # one result (a request's reply): no call
        r = out[0]
        if r is None:
            return
        rows = [rel.make_row(r, cr.where)]
    else:
        rows = _to_rows(rel, out, cr.where)
        if not rows:
            return
    if op == "<~":
        loc = rel.info.loc
        assert loc is not None
        sent = rt._sent
        name = rel.name
        outbox = rt.outbox
        for row in rows:
            # a channel holds a set of messages per tick: one derived twice is sent once
            key = (name, row)
            if key in sent:
                continue
            sent.add(key)
            addr = row[loc]
            wire = check_addr(rt, addr, name, row, cr.where)
            outbox.append((addr, name, tuple(row), wire))
        return
    kind = {"<+": "inserts", "<-": "deletes", "<+-": "replaces"}[op]
    if kind != "inserts":
        for row in rows:
            rel.info.check_keys(row)
    if kind != "deletes" and rel.keyfn is not None and rel.ttl is None:
        check_deferred_keys(rt, rel, kind, rows)
    rt.pending.add(kind, rel.name, rows)


def check_deferred_keys(rt: Runtime, rel: Relation, kind: str, rows: list[Any]) -> None:
    """Raise now, in the deriving rule, the key conflict that facts for the next tick
    (``<+`` or ``<+-``, with those already queued this tick) would raise when applied:
    two of them under one key that differ in a non-lattice column. Conflicts with stored
    rows are not known yet (a ``<-`` of the old row may come first, as in Bud's KVS)."""
    keyfn = rel.keyfn
    assert keyfn is not None
    seen: dict[Any, Any] = {}
    queued = getattr(rt.pending, kind).get(rel.name, ())
    for rows_ in (queued, rows):
        for r in rows_:
            k = keyfn(r)
            old = seen.get(k, MISSING)
            if old is MISSING:
                seen[k] = r
            elif old != r:
                seen[k] = rel._merge(k, old, r)  # raises KeyConstraintError
