"""The embedded engine: one program instance's state and its timesteps.

A tick (see ``docs/bloom.md``): (1) inputs become visible: scratches are emptied, expired soft
state dropped, the previous tick's ``<+-``/``<-``/``<+`` facts, external input, arrived
messages and periodic firings applied; (2) each stratum runs to fixpoint, semi-naively (best
``lmin``/``lmax`` value first where that is safe: ``Runtime.prioritize``);
(3) ``<+ <- <~ <+-`` rules are evaluated on the final state; their facts wait for the next tick
and messages are sent once the tick has committed.

Across ticks the evaluation is incremental: a rule whose head persists (a table or a lattice
variable) is evaluated on what changed since the last tick (new rows, lattice increments),
because what it derived before is still there. It is evaluated in full when that may not hold:
on the first tick, after its head lost tuples, when a lattice variable its functions read grew,
or when it reads ``tick_count``. Heads that do not persist (scratches, channels, interfaces)
are re-derived in full every tick, as in Bud. A tick is atomic: every change is logged and
undone if anything raises.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from blooml.engine._codegen import FusedMapEval, fused_map
from blooml.engine._dred import DRed
from blooml.engine._lat_eval import LatEval
from blooml.engine._maintain import Support, zcompile_rule
from blooml.engine._pending_input import NOTE_MARK as _NOTE_MARK
from blooml.engine._pending_input import blame, culprits, discard, report_pending
from blooml.engine._priority import Frontier, eligible_heads
from blooml.engine._reads import MonotoneRead, guard_class, undeclared_read
from blooml.engine._rel_eval import Eval, MapEval, ScanEval
from blooml.engine._state import LatVarState, Pending, PendingInput
from blooml.engine._zops import ZFused, ZOp, ZScan, sizeof_rows
from blooml.engine.compile import compile_node, flatten_rows
from blooml.engine.relation import MISSING, CheckedRows, Relation
from blooml.engine.trace import TickRecorder, Tracer, message_key
from blooml.engine.views import CollectionView, LatticeView
from blooml.errors import ProgramError
from blooml.ir.graph import has_nonmonotone, rule_units, sources
from blooml.ir.program import ProgramIR, Rule

__all__ = ["Runtime"]


#: Per tick at DEBUG (rules fired, rows derived, time); a tick that raised at WARNING.
log = logging.getLogger("blooml.engine")
# A library's loggers stay silent unless the application configures logging.
logging.getLogger("blooml").addHandler(logging.NullHandler())

# While a runtime hands its messages to the transport: (sender address, message identities by
# content key, or None when the sender does not trace), so that an in-process receiver can
# record who sent what (a transport from elsewhere passes the sender to receive_batch).
_sending = threading.local()


def _note(exc: BaseException, text: str) -> None:
    notes = getattr(exc, "__notes__", ())
    if not any(n.startswith(_NOTE_MARK) for n in notes):
        exc.add_note(_NOTE_MARK + text)


def _gather(into: dict[str, list[Any]], name: str, rows: list[Any]) -> None:
    """Add queued input ``rows`` to ``into[name]``: the queued list itself when it is the
    first (checked input keeps its mark, and stores without a second check), else a copy
    (the queue is kept unchanged for a rollback)."""
    have = into[name]
    if not have:
        into[name] = rows
    elif type(have) is CheckedRows and type(rows) is CheckedRows:
        into[name] = CheckedRows([*have, *rows])
    else:
        into[name] = [*have, *rows]


def _to_rows(rel: Relation, out: Any, where: str) -> list[Any]:
    """Rule results as rows of ``rel`` (for the facts queued for the next tick)."""
    make = rel.make_row
    return [make(r, where) for r in out if r is not None]


class CompiledRule:
    """A rule bound to one runtime: its evaluator, head and incremental bookkeeping."""

    __slots__ = (
        "body",
        "fresh",
        "guards",
        "head_lat",
        "head_rel",
        "is_lat_body",
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
        self.read_vars = [rt.lats[v] for v in sorted(rule.reads)]
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
            return any(v.incs for v in self.read_vars)
        return bool(self.read_vars) and any(v.hi > v.lo for v in self.read_vars)

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


class _Unit:
    """One step of a stratum in incremental mode: the rules writing one head, or a recursive
    component's rules. A recursive unit runs semi-naively (its heads are its own delta); its
    scratch heads are re-derived in full when something it read was retracted (``dirty``)."""

    __slots__ = (
        "dred",
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
        #: the unit's maintained head when several of its rules feed it: their changes are
        #: applied together (set by ``Runtime._plan_units``)
        self.shared: str | None = None


class Runtime:
    """State and tick loop of one program instance (``program._rt``).

    Class attribute ``pause_gc`` (default ``True``): Python's cyclic garbage collector is
    paused while a tick runs and restored after it. A tick allocates many small tuples and
    lattice values that live on; collecting the young generation over and over while they are
    created roughly doubles the time of a large fixpoint. Set it to ``False`` to keep the
    collector running.

    Class attribute ``prioritize`` (default ``True``): in a stratum of monotone rules whose
    recursive heads are keyed with one value column (``dist = table(["v"], ["d"])``), changed
    rows holding ``lmin`` (``lmax``) values are processed smallest (largest) value first and the
    others deferred to later rounds of the same fixpoint, as Dijkstra's algorithm does; a row
    improved while it waits is processed once. The fixpoint is the same (see
    ``blooml.engine._priority``); shortest-path programs do far fewer relaxations. Set it to
    ``False`` (on the class, or ``Program(prioritize=False)`` for one instance) for plain
    semi-naive rounds.

    Class attribute ``inline`` (default ``True``): a rule ``head <= a.map(f)`` or
    ``head <= a.join(b, ...).map(f)`` over stored collections, whose ``f`` is a simple function
    (``Map.expr`` is not ``None``: a tuple of column reads, constants and arithmetic), runs as
    generated code (``blooml.engine._codegen``); collections whose rows no user function receives
    store them as plain tuples (views still give named tuples). ``Program(inline=False)``
    calls every function as written.

    Class attribute ``incremental`` (default ``True``): a tick costs what changed. Collections
    that do not persist are maintained across ticks instead of re-derived (derivation counts,
    ``blooml.engine._maintain``), and rules outside recursion run as incremental evaluators of
    signed changes (``blooml.engine._zops``). ``Program(incremental=False)`` re-derives every
    rule each tick: the reference the incremental core is tested against.
    """

    pause_gc: bool = True
    prioritize: bool = True
    inline: bool = True
    incremental: bool = True

    def __init__(
        self,
        ir: ProgramIR,
        program: Any,
        proxy: Any,
        *,
        addr: str,
        clock: Callable[[], float],
        prioritize: bool | None = None,
        inline: bool | None = None,
        incremental: bool | None = None,
        trace: Any = None,
    ) -> None:
        if incremental is not None:
            self.incremental = incremental
        if prioritize is not None:
            self.prioritize = prioritize
        if inline is not None:
            self.inline = inline
        self.ir = ir
        self.program = program
        self.proxy = proxy
        self.addr = addr
        self.clock = clock
        #: The transport (see ``deliver``/``check`` below and ``docs/net.md``): ``None`` for
        #: loopback only, a ``blooml.net.LocalNetwork``, a socket node's transport or a
        #: simulation. Set by the transport's ``register(program)``.
        self.network: Any = None
        #: The ``blooml.net`` node running this program (``p.start()`` etc.), if any.
        self.node: Any = None
        #: Where durable state is kept (``Program(data_dir=...)``), and its store: an object
        #: with ``commit(rt)``, called as the last step of every tick (``blooml.net.durable``).
        self.data_dir: Any = None
        self.durable: Any = None
        self.tick_count = 0
        self.now = clock()
        self.rels = {name: Relation(info) for name, info in ir.collections.items()}
        self.lats = {
            name: LatVarState(name, info.cls, info.initial) for name, info in ir.lattices.items()
        }
        self.rules = [CompiledRule(r, self) for r in ir.rules]
        self.strata = [[self.rules[i] for i in s] for s in ir.strata]
        self.prio_heads = [eligible_heads((cr.rule for cr in s), self.rels) for s in self.strata]
        #: incremental mode: per stratum, its units in dependency order (``_plan_units``)
        self.units: list[list[_Unit]] = []
        #: incremental mode: the derivation counts of each maintained collection
        self.support: dict[str, Support] = {}
        #: incremental mode: the input rows of this tick and the last one, per collection that
        #: does not persist; the next tick must re-derive everything (first tick, rollback)
        self.tick_in: dict[str, list[Any]] = {}
        self.last_in: dict[str, list[Any]] = {}
        self.prev_in: dict[str, list[Any]] = {}
        #: recursive units' scratch heads whose last-tick input rows left this tick
        self.rec_dirty: set[str] = set()
        self._reset = True
        self._stateful: list[Any] = []
        self._rec_heads: set[str] = set()
        self._transient = [n for n, r in self.rels.items() if not r.persistent]
        if self.incremental:
            self._plan_units()
        if self.inline:
            self._plain_rows()
        self.temporal = [self.rules[i] for i in ir.temporal]
        self.pending = Pending()
        self.outbox: list[tuple[Any, str, tuple[Any, ...], Any]] = []
        # (channel, row) of the messages in the outbox: each is sent once a tick
        self._sent: set[Any] = set()
        self.periodic = {
            name: [self.now + (info.period or 0.0), 0]
            for name, info in ir.collections.items()
            if info.kind == "periodic"
        }
        self._views: dict[str, Any] = {}
        self._rec: TickRecorder | None = None  # set while a tick is observed
        self._failed: Rule | None = None  # the rule that raised in the current tick
        #: The rule that raised in the last tick that failed (``None``: no rule did, e.g. the
        #: durable write failed). Read by ``blooml.net`` to quarantine a rule that keeps failing.
        self.failed_rule: Rule | None = None
        #: Indexes of the rules taken out of evaluation (``disable_rule``).
        self.disabled_rules: frozenset[int] = frozenset()
        self.tracer: Tracer | None = None
        if trace is not None:
            self.tracer = trace if isinstance(trace, Tracer) else Tracer(trace)
        #: Collections whose new rows each committed tick keeps in ``tick_rows`` (``watch``).
        self.watched: set[str] = set()
        self.tick_rows: dict[str, list[Any]] = {}
        #: Collections whose signed change each committed tick keeps in ``tick_changes``
        #: (``(row, +1)`` new, ``(row, -1)`` gone; read from the undo logs, so it costs what
        #: changed): how ``blooml.dataflow.DatalogView`` returns each update's change.
        self.changes_of: set[str] = set()
        self.tick_changes: dict[str, list[tuple[Any, int]]] = {}
        self.firing: CompiledRule | None = None  # the rule being evaluated, during a tick

    def _plan_units(self) -> None:
        """Incremental mode: split each stratum into units, give every collection that does
        not persist (but the scratch heads of recursive units) its derivation counts, and an
        incremental evaluator to every rule outside recursion that needs one: a rule into a
        maintained collection, or with a non-monotone body. A rule into a table or a lattice
        variable with a monotone body keeps the semi-naive evaluator, which already costs
        what changed (the head keeps what it derived; the body only gains)."""
        rec_heads: set[str] = set()
        plans = []
        for stratum in self.strata:
            units = []
            for recursive, rules in rule_units([cr.rule for cr in stratum]):
                crs = [self.rules[r.index] for r in rules]
                unit = _Unit(self, recursive, crs)
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
        written = {cr.rule.head for cr in self.rules if cr.rule.op == "<="}
        self._rec_heads = rec_heads
        for name, rel in self.rels.items():
            if not rel.persistent and name not in rec_heads and name in written:
                self.support[name] = Support(rel)
        for units in plans:
            for unit in units:
                if unit.recursive:
                    continue
                for cr in unit.rules:
                    rule = cr.rule
                    if cr.is_lat_body:
                        continue
                    if (
                        rule.head in self.support
                        or has_nonmonotone(rule.body)
                        or rule.nonmonotone_reads
                    ):
                        cr.zbody = zcompile_rule(rule, self, cr.head_rel is not None, cr.read_vars)
                heads = {cr.rule.head for cr in unit.rules if cr.zbody is not None}
                feeding = [cr for cr in unit.rules if cr.zbody is not None]
                if len(feeding) > 1 and len(heads) == 1 and next(iter(heads)) in self.support:
                    unit.shared = next(iter(heads))
        self.units = plans
        self._stateful = self._journaled()

    def _plain_rows(self) -> None:
        """Store as plain tuples the rows of every collection that no user function receives:
        its readers are generated ``map`` rules (which read columns by position) and bare
        scans (whose rows the head converts). Views still give named tuples."""
        exposed: set[str] = set()
        for cr in self.rules:
            b = cr.body
            if isinstance(b, FusedMapEval):
                exposed |= b.exposed
            elif not isinstance(b, ScanEval):
                exposed.update(name for name, _ in sources(cr.rule.body))
            z = cr.zbody
            if isinstance(z, ZFused):
                exposed |= z.fz.exposed
            elif z is not None and not isinstance(z, ZScan):
                exposed.update(name for name, _ in sources(cr.rule.body))
        for name, rel in self.rels.items():
            if name not in exposed:
                rel.set_plain()

    # -- access ---------------------------------------------------------------------------------

    def view(self, name: str) -> Any:
        """The user-facing view of collection or lattice variable ``name``."""
        v = self._views.get(name)
        if v is None:
            v = CollectionView(self, name) if name in self.rels else LatticeView(self, name)
            self._views[name] = v
        return v

    def read_attr(self, name: str) -> Any:
        """``self.<name>`` inside a rule function while a tick runs.

        A lattice variable or ``tick_count`` that the rule being evaluated does not declare
        (``Rule.reads``, ``Rule.reads_tick``) raises :class:`~blooml.errors.ProgramError`;
        see :mod:`blooml.engine._reads`.
        """
        var = self.lats.get(name)
        if var is not None:
            cr = self.firing
            if cr is None or cr.read_modes.get(name):
                return var.value  # outside a rule, or a declared non-monotone read
            g = cr.guards.get(name)
            if g is not None and g._value is var.value:
                return g  # the guard of a monotone read, made for this value
            return cr.read(var)  # a new guard, or the error for an undeclared read
        if name == "tick_count":
            cr = self.firing
            if cr is not None and not cr.rule.reads_tick:
                undeclared_read(cr.where, name)
            return self.tick_count
        if name in self.rels:
            self.refuse_collection_read(name)
        return getattr(self.program, name)

    def lat_value(self, name: str) -> Any:
        """A lattice variable's value for its view (``p.best.value``): verified as
        :meth:`read_attr` while a rule is evaluated (a helper method of the program)."""
        var = self.lats[name]
        cr = self.firing
        return var.value if cr is None else cr.read(var)

    def refuse_collection_read(self, name: str) -> None:
        """Raise for a rule function reading collection ``name`` (directly or via a view)."""
        where = f"{self.firing.where}: " if self.firing is not None else ""
        raise ProgramError(
            f"{where}self.{name} is a collection: rule functions cannot read collections (it "
            "would hide a dependency); join with it, or use notin/include"
        )

    # -- the tick -------------------------------------------------------------------------------

    def tick(self) -> None:
        """Run one atomic timestep."""
        if not (self.pause_gc and gc.isenabled()):
            self._tick()
            return
        gc.disable()
        try:
            self._tick()
        finally:
            gc.enable()

    def tick_n(self, n: int) -> None:
        """Run ``n`` ticks."""
        for _ in range(n):
            self.tick()

    def _tick(self) -> None:
        now = self.clock()
        rel_tokens = {n: r.begin() for n, r in self.rels.items()}
        lat_tokens = {n: v.begin() for n, v in self.lats.items()}
        saved = (
            self.pending,
            self.tick_count,
            self.now,
            {k: list(v) for k, v in self.periodic.items()},
            self.last_in,
        )
        if self.incremental:
            flags = [(cr.fresh, cr.zfresh, cr.seen_removals) for cr in self.rules]
            reset = self._reset
            for z in self._stateful:
                z.journal = []
        consumed = self.pending
        self.pending = Pending()
        self.outbox = []
        self._sent = set()
        self.now = now
        prev_rt = self.proxy._rt
        self.proxy._rt = self
        rec = None
        if self.tracer is not None or log.isEnabledFor(logging.DEBUG):
            rec = self._rec = TickRecorder(self, self.tracer.limit if self.tracer else 0)
            rec.inputs(consumed)
        self._failed = None
        try:
            self._apply_inputs(consumed, now)
            if rec is None:
                if self.incremental:
                    for units in self.units:
                        self._run_units(units)
                else:
                    for stratum, heads in zip(self.strata, self.prio_heads, strict=True):
                        if heads and self.prioritize:
                            self._run_stratum_prioritized(stratum, heads)
                        else:
                            self._run_stratum(stratum)
                self._run_temporal()
            else:
                self._run_strata_timed(rec)
            if self.durable is not None:
                # the last step: one transaction on disk; if it fails, the tick rolls back
                self.durable.commit(self)
        except BaseException as exc:
            for n, r in self.rels.items():
                r.rollback(rel_tokens[n])
            for n, v in self.lats.items():
                v.rollback(lat_tokens[n])
            self.pending, self.tick_count, self.now, self.periodic, self.last_in = saved
            self.outbox = []
            if self.incremental:
                self._rollback_incremental(flags, reset)
            else:
                for cr in self.rules:
                    cr.fresh = True  # change tracking is not rolled back: start over in full
            if isinstance(exc, Exception) and consumed:
                report_pending(self, exc, consumed, self._failed)
            self._report_failure(rec, exc, saved[1])
            raise
        finally:
            self.proxy._rt = prev_rt
            self.firing = None
            self._rec = None
        self._reset = False
        if self.watched:
            self.tick_rows = {n: self.rels[n].tick_new for n in self.watched}
        if self.changes_of:
            self.tick_changes = {n: self.rels[n].tick_delta() for n in self.changes_of}
        for r in self.rels.values():
            r.commit()
        self.tick_count += 1
        outbox, self.outbox = self.outbox, []
        ids: dict[str, list[str]] | None = None
        if rec is not None:
            ids = self._report_tick(rec, outbox)
        if outbox:
            batches: dict[Any, list[tuple[str, tuple[Any, ...], Any]]] = {}
            for addr, chan, row, wire in outbox:
                b = batches.get(addr)
                if b is None:
                    batches[addr] = b = []
                b.append((chan, row, wire))
            prev = getattr(_sending, "info", None)
            _sending.info = (self.addr, ids)
            try:
                for addr, batch in batches.items():
                    self.send(addr, batch)
            finally:
                _sending.info = prev

    def _journaled(self) -> list[Any]:
        """The incremental state that a tick changes and a rollback undoes: the derivation
        counts of maintained collections and the operators that keep state."""
        out: list[Any] = list(self.support.values())
        for cr in self.rules:
            stack = [cr.zbody] if cr.zbody is not None else []
            while stack:
                z = stack.pop()
                if hasattr(z, "journal"):
                    out.append(z)
                stack.extend(z.children())
        return out

    def _rollback_incremental(self, flags: list[tuple[bool, bool, int]], reset: bool) -> None:
        """Undo a failed tick's changes to the incremental state (the relations roll back by
        their own undo logs), so the next tick goes on from the last committed one at the
        cost of what it changes. Should undoing fail, the next tick rebuilds the state from
        the stored rows instead."""
        self._reset = reset
        if reset:
            # the failed tick was rebuilding the state: the next one rebuilds it again, so
            # every rule must be evaluated afresh (the failed tick marked some initialised)
            for cr in self.rules:
                cr.fresh = cr.zfresh = True
            return
        try:
            for z in self._stateful:
                z.rollback()
            for cr, (fresh, zfresh, seen) in zip(self.rules, flags, strict=True):
                cr.fresh, cr.zfresh, cr.seen_removals = fresh, zfresh, seen
        except Exception:  # pragma: no cover - a defect; rebuilding is always correct
            log.exception("%s: could not undo the incremental state; rebuilding it", self.addr)
            self._reset = True
            for cr in self.rules:
                cr.fresh = cr.zfresh = True

    def _run_strata_timed(self, rec: TickRecorder) -> None:
        """The strata and end-of-tick rules of ``_tick``, each timed into ``rec``."""
        clock = time.perf_counter
        for i, (stratum, heads) in enumerate(zip(self.strata, self.prio_heads, strict=True)):
            t0 = clock()
            if self.incremental:
                self._run_units(self.units[i])
            elif heads and self.prioritize:
                self._run_stratum_prioritized(stratum, heads)
            else:
                self._run_stratum(stratum)
            rec.stratum(i, clock() - t0)
        t0 = clock()
        self._run_temporal()
        rec.stratum("next", clock() - t0)

    def _report_tick(self, rec: TickRecorder, outbox: list[Any]) -> dict[str, list[str]]:
        """Trace and log a committed tick; return its messages' identities by content key
        (for an in-process receiver to record them)."""
        tick = rec.tick
        ids: dict[str, list[str]] = {}
        sends = []
        for i, (addr, chan, row, _) in enumerate(outbox):
            msg = f"{self.addr}#{tick}.{i}"
            sends.append((addr, chan, row, msg))
            ids.setdefault(message_key(chan, addr, row), []).append(msg)
        if self.tracer is not None:
            self.tracer.events(self, rec.finish(self, True, sends))
        if log.isEnabledFor(logging.DEBUG):
            fired = ", ".join(f"r{i}:{d[1]}" for i, d in sorted(rec.derived.items()))
            log.debug(
                "%s tick %d: %d rules fired (%s), %d rows derived, %d messages, %.3f ms",
                self.addr,
                tick,
                len(rec.derived),
                fired or "-",
                rec.total_derived(),
                len(outbox),
                (time.perf_counter() - rec.start) * 1000,
            )
        return ids

    def _report_failure(self, rec: TickRecorder | None, exc: BaseException, tick: int) -> None:
        """Log (WARNING) and trace a tick that raised and was rolled back."""
        rule = self._failed
        self._failed = None
        self.failed_rule = rule
        where = f" in {rule.describe()}" if rule is not None else ""
        log.warning(
            "%s tick %d rolled back: %s: %s%s", self.addr, tick, type(exc).__name__, exc, where
        )
        if rec is not None and self.tracer is not None:
            rec.error(exc, rule)
            self.tracer.events(self, rec.finish(self, False, []))

    def disable_rule(self, index: int, disabled: bool = True) -> None:
        """Take rule ``index`` out of evaluation (``disabled=False``: put it back, to be
        evaluated in full at its next firing). Used by ``blooml.net`` to quarantine a rule
        that keeps failing; the program's strata and monotonicity are unchanged."""
        if not 0 <= index < len(self.rules):
            raise ProgramError(f"disable_rule: no rule {index} (the program has {len(self.rules)})")
        off = self.disabled_rules | {index} if disabled else self.disabled_rules - {index}
        self.disabled_rules = frozenset(off)
        self.strata = [[self.rules[i] for i in s if i not in off] for s in self.ir.strata]
        self.prio_heads = [eligible_heads((cr.rule for cr in s), self.rels) for s in self.strata]
        self.temporal = [self.rules[i] for i in self.ir.temporal if i not in off]
        self.rules[index].fresh = True
        if self.incremental:
            # the units follow the rules that run; the next tick rebuilds what they keep
            self.units = []
            self.support = {}
            self._plan_units()
            self._reset = True

    def discard_pending(self, only: Any = None) -> PendingInput:
        """Drop what is queued for the next tick (everything, or the items of ``only``);
        return it (see ``Program.discard_pending``)."""
        return discard(self, only)

    def _apply_inputs(self, pend: Pending, now: float) -> None:
        try:
            self._apply_pending(pend, now)
        except BaseException as exc:
            _note(exc, "while applying the facts queued for this tick (<+, <-, <+-, inserts)")
            raise

    def _apply_pending(self, pend: Pending, now: float) -> None:
        if self.incremental:
            self._turnover()
        for rel in self.rels.values():
            if not rel.persistent:
                if not self.incremental:
                    rel.clear()
            elif rel.ttl is not None:
                rel.expire(now)
        tick_in = self.tick_in
        for name, rows in pend.replaces.items():
            rel = self.rels[name]
            if name in tick_in:  # maintained: this tick's input rows (below)
                _gather(tick_in, name, rows)
                continue
            for row in rows:
                rel.remove_key(row)
            for row in rows:
                try:
                    rel.add(row, now)
                except Exception as exc:
                    blame(exc, {name: [row]})
                    raise
        for name, rows in pend.deletes.items():
            rel = self.rels[name]
            if name in tick_in:
                gone = set(rows)
                tick_in[name] = [r for r in tick_in[name] if r not in gone]
                continue
            for row in rows:
                rel.remove(row)
        for name, rows in pend.inserts.items():
            if name in tick_in:
                _gather(tick_in, name, rows)
                continue
            try:
                self.rels[name].add_many(rows, now, f"input to {name}")
            except Exception as exc:
                blame(exc, {name: culprits(exc, rows) or list(rows)})
                raise
        for name, values in pend.lats.items():
            var = self.lats[name]
            for v in values:
                try:
                    var.merge_in(v, f"input to {name}")
                except Exception as exc:
                    blame(exc, {name: [v]})
                    raise
        for name, state in self.periodic.items():
            if now >= state[0]:
                rel = self.rels[name]
                row = rel.make_row((state[1], now), name)
                if name in tick_in:
                    _gather(tick_in, name, [row])
                else:
                    rel.add(row, now)
                if self._rec is not None:
                    self._rec.periodic(name, row)
                state[1] += 1
                period = self.ir.collections[name].period or 0.0
                state[0] += period
                if state[0] <= now:
                    state[0] = now + period
        if self.incremental:
            self._store_inputs(now)

    def _turnover(self) -> None:
        """Incremental mode, start of a tick: the last tick's input rows of every collection
        that does not persist leave (a reset tick empties them all and forgets their counts);
        this tick's are gathered in ``tick_in`` and stored by ``_store_inputs``."""
        self.rec_dirty = set()
        self.prev_in = self.last_in
        stale = False
        for name in self._transient:
            rel = self.rels[name]
            if self._reset:
                for k in list(rel.store):
                    rel.drop(k)
                if name in self.support:
                    self.support[name] = Support(rel)
                    stale = True
                continue
            last = self.last_in.get(name)
            if last:
                sup = self.support.get(name)
                if sup is not None:
                    sup.apply([(r, -1) for r in last], f"input to {name}")
                elif name in self._rec_heads:
                    self.rec_dirty.add(name)  # a recursive unit's head: re-derived
                else:  # input rows alone: emptied, as a scratch of the reference is
                    rel.clear()
        if stale:
            self._stateful = self._journaled()
        self.tick_in = {n: [] for n in self._transient}

    def _store_inputs(self, now: float) -> None:
        """Incremental mode: count (or, for a recursive unit's head, store) this tick's input
        rows of the collections that do not persist."""
        for name, rows in self.tick_in.items():
            if not rows:
                continue
            rel = self.rels[name]
            where = f"input to {name}"
            try:
                if type(rows) is not CheckedRows:  # checked at insert already: stored as is
                    make = rel.make_row
                    rows = [make(r, where) for r in rows]
                    self.tick_in[name] = rows
                sup = self.support.get(name)
                if sup is not None:
                    sup.apply([(r, 1) for r in rows], where)
                else:
                    rel.add_many(rows, now, where)
            except Exception as exc:
                blame(exc, {name: culprits(exc, rows) or list(rows)})
                raise
        self.last_in = self.tick_in

    def _open_all(self, from_start: bool) -> bool:
        """Advance every delta window; return whether any is non-empty."""
        live = False
        for rel in self.rels.values():
            if from_start:
                rel.lo = 0
            else:
                rel.lo = rel.hi
            rel.hi = len(rel.tick_new)
            live = live or rel.hi > rel.lo
        for var in self.lats.values():
            var.lo = 0 if from_start else var.hi
            var.hi = len(var.incs)
            live = live or var.hi > var.lo
        return live

    def _run_stratum(self, rules: list[CompiledRule], force: bool = False) -> None:
        self._open_all(True)
        first = True
        while True:
            for cr in rules:
                self._fire(cr, first, force and first)
            first = False
            if not self._open_all(False):
                break

    def _run_stratum_prioritized(
        self, rules: list[CompiledRule], heads: list[Relation], force: bool = False
    ) -> None:
        """``_run_stratum`` with the deltas of ``heads`` processed best value first; the
        fixpoint ends only when no window is open and no deferred row is left."""
        self._open_all(True)
        fronts = [Frontier(rel) for rel in heads]
        first = True
        while True:
            for cr in rules:
                self._fire(cr, first, force and first)
            first = False
            live = self._open_all(False)
            for f in fronts:
                live = f.narrow() or live
            if not live:
                break

    def _run_units(self, units: list[_Unit]) -> None:
        """Incremental mode: one stratum, unit by unit in dependency order."""
        for u in units:
            if u.recursive:
                self._run_recursive(u)
                continue
            gather: list[tuple[Any, int]] | None = None
            if u.shared is not None:
                gather = []
            for cr in u.rules:
                if cr.zbody is not None:
                    self._zfire(cr, gather)
                else:  # a lattice-valued body: the semi-naive evaluator, one round
                    self._open_all(True)
                    self._fire(cr, True)
            if gather:
                # several rules into one maintained collection: their changes are applied
                # together, so that a key moving from one rule's row to another's (one
                # retracts what the other derives) is never seen holding both
                sup = self.support[u.shared]  # type: ignore[index]
                try:
                    sup.apply(gather, sup.rel.name)
                except BaseException as exc:
                    if self._failed is None:
                        self._failed = u.rules[0].rule
                    rules = ", ".join(f"rule {cr.rule.index}" for cr in u.rules)
                    _note(exc, f"in {rules} (into {sup.rel.name})")
                    raise

    def _run_recursive(self, u: _Unit) -> None:
        """A recursive unit: semi-naive from what its heads hold, on this tick's changes; its
        scratch heads are emptied and re-derived in full when an input it reads lost rows
        (or a non-monotone input changed), which growth alone cannot account for."""
        force = False
        if u.scratch:
            force = self._reset
            force = force or any(rel.tick_delta() for rel in u.nonmono_rels)
            force = force or any(v.incs for v in u.nonmono_vars)
            removed: dict[str, list[Any]] = {}
            if not force:
                for rel in u.outside:
                    gone = [r for r, w in rel.tick_delta() if w < 0]
                    if gone:
                        removed[rel.name] = gone
                for rel in u.scratch:
                    if rel.name in self.rec_dirty:  # last tick's input rows left
                        now_in = set(self.tick_in.get(rel.name, ()))
                        gone = [r for r in self.prev_in.get(rel.name, ()) if r not in now_in]
                        if gone:
                            removed[rel.name] = gone
            if removed:
                if u.dred is None or not u.dred.run(self, removed):
                    force = True
                else:
                    for cr in u.rules:  # the heads lost rows on purpose: stay on deltas
                        if cr.head_rel is not None:
                            cr.seen_removals = cr.head_rel.removals
            if force:
                now = self.now
                for rel in u.scratch:
                    for k in list(rel.store):
                        rel.drop(k)
                    rows = self.tick_in.get(rel.name)
                    if rows:
                        rel.add_many(rows, now, f"input to {rel.name}")
        if u.prio and self.prioritize:
            self._run_stratum_prioritized(u.rules, u.prio, force)
        else:
            self._run_stratum(u.rules, force)

    def _zfire(self, cr: CompiledRule, gather: list[tuple[Any, int]] | None = None) -> None:
        """Run a rule's incremental evaluator and apply its signed output to the head: counts
        of a maintained collection (or, with ``gather``, add them to it, to be applied with
        the other rules' of the unit), the rows it gained for a table, the merge of its new
        rows for a lattice variable."""
        self.firing = cr
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
            rec = self._rec
            before = 0
            if rec is not None:
                before = len(head.tick_new) if head is not None else len(cr.head_lat.incs)  # type: ignore[union-attr]
            if head is not None:
                sup = self.support.get(head.name)
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
                    head.add_many(rows, self.now, cr.where)
            elif rows:
                value = self._fold(cr, rows)
                if value is not None:
                    cr.head_lat.merge_in(value, cr.where)  # type: ignore[union-attr]
            if rec is not None and rows:
                after = len(head.tick_new) if head is not None else len(cr.head_lat.incs)  # type: ignore[union-attr]
                rec.rule(cr.rule.index, rows, after - before)
        except BaseException as exc:
            if self._failed is None:
                self._failed = cr.rule
            _note(exc, f"in {cr.where}")
            raise
        cr.zfresh = False
        cr.fresh = False
        if head is not None:
            cr.seen_removals = head.removals

    def memory(self) -> dict[str, Any]:
        """What this program keeps, per collection and per rule: rows stored, and the state
        kept for incremental evaluation (derivation counts, per-group aggregate state,
        previous outputs of rules re-run in full), with estimated bytes."""
        colls: dict[str, Any] = {}
        total = 0
        for name, rel in self.rels.items():
            n = len(rel.store)
            rows_b = sys.getsizeof(rel.store) + sizeof_rows(n, next(iter(rel.store.values()), ()))
            sup = self.support.get(name)
            entries = sup.entries() if sup is not None else 0
            sup_b = 0
            if sup is not None:
                sup_b = sys.getsizeof(sup.counts) + entries * 80
                if sup.keyed:
                    sup_b += len(sup.counts) * 250
            colls[name] = {"rows": n, "bytes": rows_b, "support": entries, "support_bytes": sup_b}
            total += rows_b + sup_b
        rules: dict[str, Any] = {}
        for cr in self.rules:
            if cr.zbody is None:
                continue
            entries, b = cr.zbody.memory()
            rules[cr.where] = {"operator": cr.zbody.kind(), "entries": entries, "bytes": b}
            total += b
        return {"collections": colls, "rules": rules, "total_bytes": total}

    def _run_temporal(self) -> None:
        self._open_all(True)
        for cr in self.temporal:
            self._fire(cr, True)

    def _fire(self, cr: CompiledRule, first: bool, force: bool = False) -> None:
        self.firing = cr
        full = force or cr.full_mode(first)
        try:
            if self._rec is not None:
                self._fire_observed(cr, full, self._rec)
            else:
                out = cr.evaluate(full)
                if cr.op == "<=":
                    self._emit(cr, out)
                else:
                    self._defer(cr, out)
        except BaseException as exc:
            if self._failed is None:
                self._failed = cr.rule
            _note(exc, f"in {cr.where}")
            raise
        cr.fresh = False
        if cr.head_rel is not None:
            cr.seen_removals = cr.head_rel.removals

    def _fire_observed(self, cr: CompiledRule, full: bool, rec: TickRecorder) -> None:
        """``_fire``'s evaluation, recording what the rule derived and added."""
        out = cr.evaluate(full)
        if cr.is_lat_body:
            items = [] if out is None else [out]
        else:
            out = out if isinstance(out, list) else list(out)
            items = [r for r in out if r is not None]
        if cr.op != "<=":
            self._defer(cr, out)
            if items:
                rec.rule(cr.rule.index, items, None)
            return
        rel, var = cr.head_rel, cr.head_lat
        before = len(rel.tick_new) if rel is not None else len(var.incs) if var else 0
        self._emit(cr, out)
        after = len(rel.tick_new) if rel is not None else len(var.incs) if var else 0
        if items:
            rec.rule(cr.rule.index, items, after - before)

    def _emit(self, cr: CompiledRule, out: Any) -> None:
        rel = cr.head_rel
        if rel is not None:
            if out:
                rel.add_many(out if isinstance(out, list) else list(out), self.now, cr.where)
            return
        var = cr.head_lat
        assert var is not None
        value = self._fold(cr, out)
        if value is not None:
            var.merge_in(value, cr.where)

    def _fold(self, cr: CompiledRule, out: Any) -> Any:
        """A lattice head: the body's value, or its rows folded with merge."""
        if cr.is_lat_body:
            return out
        var = cr.head_lat
        assert var is not None
        b = None
        for r in out:
            if r is None:
                continue
            item = (r[0] if len(r) == 1 else tuple(r)) if isinstance(r, tuple) else r
            if b is None:
                b = var.cls.builder()
            b.add(item)
        return None if b is None else b.freeze()

    def _defer(self, cr: CompiledRule, out: Any) -> None:
        op = cr.op
        if cr.head_lat is not None:
            value = self._fold(cr, out)
            if value is not None:
                if type(value) is not cr.head_lat.cls:
                    cr.head_lat.merge_in(value, cr.where)  # raises the type error
                self.pending.add("lats", cr.rule.head, [value])
            return
        rel = cr.head_rel
        assert rel is not None
        rows = _to_rows(rel, out, cr.where)
        if not rows:
            return
        if op == "<~":
            loc = rel.info.loc
            assert loc is not None
            sent = self._sent
            for row in rows:
                # a channel holds a set of messages per tick: one derived twice is sent once
                key = (rel.name, row)
                if key in sent:
                    continue
                sent.add(key)
                wire = self._check_addr(row[loc], rel.name, row, cr.where)
                self.outbox.append((row[loc], rel.name, tuple(row), wire))
            return
        kind = {"<+": "inserts", "<-": "deletes", "<+-": "replaces"}[op]
        if kind != "inserts":
            for row in rows:
                rel.info.check_keys(row)
        if kind != "deletes" and rel.keyfn is not None and rel.ttl is None:
            self._check_deferred_keys(rel, kind, rows)
        self.pending.add(kind, rel.name, rows)

    def _check_deferred_keys(self, rel: Relation, kind: str, rows: list[Any]) -> None:
        """Raise now, in the deriving rule, the key conflict that facts for the next tick
        (``<+`` or ``<+-``, with those already queued this tick) would raise when applied:
        two of them under one key that differ in a non-lattice column. Conflicts with stored
        rows are not known yet (a ``<-`` of the old row may come first, as in Bud's KVS)."""
        keyfn = rel.keyfn
        assert keyfn is not None
        seen: dict[Any, Any] = {}
        queued = getattr(self.pending, kind).get(rel.name, ())
        for rows_ in (queued, rows):
            for r in rows_:
                k = keyfn(r)
                old = seen.get(k, MISSING)
                if old is MISSING:
                    seen[k] = r
                elif old != r:
                    seen[k] = rel._merge(k, old, r)  # raises KeyConstraintError

    # -- channels -------------------------------------------------------------------------------

    def _check_addr(self, addr: Any, chan: str, row: Any, where: str = "") -> Any:
        """Check a message at its sending rule (inside the tick: an error rolls it back).

        Returns the transport's token for the message (a socket transport encodes the row
        here, so a value that cannot travel fails the rule), passed back to ``deliver``.
        """
        if self.network is not None:
            return self.network.check(self, addr, chan, row, where)
        if addr != self.addr:
            raise ProgramError(
                f"channel {chan!r}: message {tuple(row)!r} is addressed to {addr!r}, but this "
                f"program ({self.addr!r}) has no network; only its own address is delivered "
                "(loopback). Pass network=LocalNetwork() to connect programs, or bind a "
                "host:port address"
            )
        return None

    def send(self, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
        """Hand the messages a committed tick sends to ``addr`` to the transport, together.

        ``batch`` holds ``(channel, row, token)`` in the order the rules produced them
        (``token`` is what the transport's ``check`` returned). The one place sends leave a
        program (tracing hooks here).
        """
        if self.network is not None:
            self.network.deliver(self, addr, batch)
        else:
            for chan, row, _ in batch:
                self.receive(chan, row)

    def receive(self, chan: str, row: tuple[Any, ...]) -> None:
        """A message arrived on channel ``chan`` (in-process): visible at this program's next
        tick. A key conflict with another queued message fails that tick, as any conflict."""
        self.receive_batch(None, [(chan, [row])], refuse_conflicts=False)

    def receive_batch(self, sender: Any, batches: Any, refuse_conflicts: bool = True) -> int:
        """Messages arrived (from ``sender``, if known): visible at this program's next tick.

        ``batches`` holds ``(channel, rows)`` pairs. All or nothing: raises ``ProgramError``
        with nothing queued if a channel is not a channel of this program or a row does not
        fit it (wrong arity, a lattice in a key column, an unhashable value) or, with
        ``refuse_conflicts`` (network arrivals), if a row's key conflicts with a message
        already queued for the same tick (which would fail that tick for every message).
        Returns the number of rows queued. The one place messages enter a program (tracing
        hooks here).
        """
        checked = []
        staged: dict[str, dict[Any, Any]] = {}
        for chan, rows in batches:
            rel = self.rels.get(chan)
            if rel is None or rel.info.kind != "channel":
                raise ProgramError(
                    f"message on {chan!r} from {sender!r}: this program has no channel of that name"
                )
            where = f"message on {chan}"
            out = rel.check_rows(list(rows), where)
            try:
                for r in out:
                    hash(r)
            except TypeError:
                raise ProgramError(
                    f"{where} from {sender!r}: an unhashable value in {r!r}"
                ) from None
            if refuse_conflicts and rel.keyfn is not None:
                # a key conflict with a message already queued for this tick would fail the
                # whole tick: refuse this message instead (nothing queued)
                keyfn = rel.keyfn
                queued = self.pending.chan_keys.get(chan, {})
                mine = staged.setdefault(chan, {})
                for r in out:
                    k = keyfn(r)
                    old = mine.get(k, queued.get(k, MISSING))
                    if old is MISSING:
                        mine[k] = r
                    elif old != r:
                        try:
                            mine[k] = rel._merge(k, old, r)
                        except Exception as exc:
                            raise ProgramError(f"{where} from {sender!r}: {exc}") from None
            checked.append((chan, out))
        n = 0
        for chan, rows in checked:
            self.pending.add("inserts", chan, rows)
            n += len(rows)
        for chan, keyed in staged.items():
            self.pending.chan_keys.setdefault(chan, {}).update(keyed)
        if self.tracer is not None:
            self._trace_receipts(sender, checked)
        return n

    def _trace_receipts(self, sender: Any, checked: list[tuple[str, list[Any]]]) -> None:
        """Record arrived messages; an in-process delivery tells who sent them, and which."""
        assert self.tracer is not None
        info = getattr(_sending, "info", None)
        ids = None
        if info is not None:
            sender = sender if sender is not None else info[0]
            ids = info[1]
        for chan, rows in checked:
            for row in rows:
                msg = None
                if ids:
                    queue = ids.get(message_key(chan, self.addr, row))
                    msg = queue.pop(0) if queue else None
                self.tracer.recv(self, chan, row, sender, msg)

    def set_clock(self, clock: Callable[[], float]) -> None:
        """Run on ``clock`` from now on (a simulation's virtual clock): the current time and
        every ``periodic`` deadline are taken afresh from it (a transport calls it when the
        program joins, before it ticks there)."""
        self.clock = clock
        self.now = clock()
        self.periodic = {
            name: [self.now + (self.ir.collections[name].period or 0.0), 0]
            for name in self.periodic
        }

    def has_pending(self) -> bool:
        """Whether input (messages, inserts, deferred facts) waits for the next tick."""
        p = self.pending
        return bool(p.inserts or p.deletes or p.replaces or p.lats)

    def next_due(self) -> float | None:
        """The clock time at which the next ``periodic`` fires (``None``: no periodic)."""
        if not self.periodic:
            return None
        return min(state[0] for state in self.periodic.values())

    def is_fresh(self, rule: Rule) -> bool:  # pragma: no cover - debugging aid
        """Whether ``rule`` will next be evaluated in full."""
        return self.rules[rule.index].fresh
