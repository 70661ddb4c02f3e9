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
from collections.abc import Callable
from typing import Any

from blooml.engine import _net_entry
from blooml.engine._codegen import FusedMapEval
from blooml.engine._feed import DeleteFeed, Feed, UpsertFeed
from blooml.engine._maintain import Support
from blooml.engine._pending_input import discard
from blooml.engine._priority import eligible_heads
from blooml.engine._reads import undeclared_read
from blooml.engine._rel_eval import ScanEval
from blooml.engine._rules import CompiledRule
from blooml.engine._state import LatVarState, Pending, PendingInput
from blooml.engine._tick import run_tick
from blooml.engine._units import Unit, plan_units
from blooml.engine._zops import ZFused, ZScan, sizeof_rows
from blooml.engine.relation import Relation
from blooml.engine.trace import TickRecorder, Tracer
from blooml.engine.views import CollectionView, LatticeView
from blooml.errors import ProgramError
from blooml.ir.coltypes import COLUMN_TYPE_MODES
from blooml.ir.graph import sources
from blooml.ir.program import ProgramIR, Rule

__all__ = ["Runtime"]


#: Per tick at DEBUG (rules fired, rows derived, time); a tick that raised at WARNING.
log = logging.getLogger("blooml.engine")
# A library's loggers stay silent unless the application configures logging.
logging.getLogger("blooml").addHandler(logging.NullHandler())


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

    Class attribute ``column_types`` (default ``"dynamic"``): a column holds any Python values,
    of as many types as the program stores there. ``Program(column_types="spark")`` makes each
    column hold one type family as on ``SparkEngine`` (learned from its first non-None value,
    an int and a float widen to ``double``; ``blooml.ir.coltypes``): a tick that stores a value
    the column cannot hold raises :class:`~blooml.errors.ColumnValueError` and changes nothing.
    """

    # Every attribute ``__init__`` sets, as a slot: a runtime has some fifty, and CPython
    # (3.11) keeps an instance with more than thirty in a dict of its own, through which no
    # method lookup (``rt.tick()``) is specialized and every attribute is a hash lookup; a
    # slot is read at a fixed offset. ``__dict__`` keeps any other attribute settable (the
    # class settings below, set on an instance, live there).
    __slots__ = (
        "__dict__",
        "_failed",
        "_flags",
        "_rec",
        "_rec_heads",
        "_reset",
        "_sent",
        "_stateful",
        "_touched",
        "_transient",
        "_transient_set",
        "_ttl_rels",
        "_views",
        "addr",
        "changes_of",
        "clock",
        "col_families",
        "data_dir",
        "disabled_rules",
        "durable",
        "failed_rule",
        "feeds",
        "firing",
        "ir",
        "last_in",
        "lat_watch",
        "lats",
        "network",
        "node",
        "now",
        "outbox",
        "pending",
        "periodic",
        "prev_in",
        "prio_heads",
        "program",
        "proxy",
        "rec_dirty",
        "rels",
        "rules",
        "strata",
        "support",
        "temporal",
        "tick_changes",
        "tick_count",
        "tick_in",
        "tick_rows",
        "tracer",
        "units",
        "watched",
    )

    pause_gc: bool = True
    prioritize: bool = True
    inline: bool = True
    incremental: bool = True
    column_types: str = "dynamic"
    #: incremental mode: a tick begins the collections it changes as it comes to them, and
    #: skips the units and end-of-tick rules whose inputs did not change
    #: (``blooml.engine._tick``); ``False``: it begins them all and runs them all (tests
    #: compare the two)
    _scoped: bool = True

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
        column_types: str | None = None,
        trace: Any = None,
    ) -> None:
        if column_types is not None:
            if not isinstance(column_types, str) or column_types not in COLUMN_TYPE_MODES:
                raise ProgramError(
                    f"column_types must be one of {', '.join(map(repr, COLUMN_TYPE_MODES))} "
                    f"or None (the default, {type(self).column_types!r}), got {column_types!r}"
                )
            self.column_types = column_types
        #: ``column_types="spark"``: per collection, the type family each column holds
        #: (``None``: none learned yet), as of the last committed tick
        self.col_families: dict[str, list[str | None]] = {}
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
        #: incremental mode: per stratum, its units in dependency order (``_units.plan_units``)
        self.units: list[list[Unit]] = []
        #: incremental mode: the feeds of next-tick rules over scratches (``plan_feeds``)
        self.feeds: list[Feed | DeleteFeed | UpsertFeed] = []
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
        self._transient_set = frozenset(self._transient)
        #: the collections with soft state (expired at the start of every tick)
        self._ttl_rels = [r for r in self.rels.values() if r.persistent and r.ttl is not None]
        #: while a tick runs: the collections it began (``Relation.begin``), with what their
        #: rollback needs; it begins one as it first changes it (``blooml.engine._tick``)
        self._touched: dict[Relation, Any] = {}
        #: while a tick runs: ``(rule, fresh, zfresh, seen_removals)`` of each rule it ran,
        #: as they were before, for a rollback
        self._flags: list[tuple[CompiledRule, bool, bool, int]] = []
        self.temporal = [self.rules[i] for i in ir.temporal]
        if self.incremental:
            plan_units(self)
        if self.inline:
            self._plain_rows()
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
        #: Callbacks per lattice variable, called after each committed tick that changed it
        #: with ``(value at the tick's start, value now, increments merged)``: what changed,
        #: at the cost of the change (``blooml.net.antientropy`` keeps its digests with it).
        self.lat_watch: dict[str, list[Callable[[Any, Any, list[Any]], None]]] = {}

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
            run_tick(self)
        else:
            gc.disable()
            try:
                run_tick(self)
            finally:
                gc.enable()

    def _notify_lats(self) -> None:
        """Called by ``run_tick`` once a tick has committed: tell the ``lat_watch`` callbacks
        what it merged into their lattice variables (a tick that raised never gets here: it
        was rolled back). A callback that raises is logged, never reported as the tick's
        failure."""
        for name, fns in self.lat_watch.items():
            var = self.lats[name]
            if var.incs:
                for fn in fns:
                    try:
                        fn(var.start, var.value, var.incs)
                    except Exception:
                        log.exception(
                            "a lat_watch callback of %r raised after tick %d",
                            name,
                            self.tick_count - 1,
                        )

    def tick_n(self, n: int) -> None:
        """Run ``n`` ticks."""
        for _ in range(n):
            self.tick()

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
            plan_units(self)
            self._reset = True
            for cr in self.rules:  # new operators, empty: each builds its state afresh
                cr.fresh = cr.zfresh = True

    def discard_pending(self, only: Any = None) -> PendingInput:
        """Drop what is queued for the next tick (everything, or the items of ``only``);
        return it (see ``Program.discard_pending``)."""
        return discard(self, only)

    def memory(self) -> dict[str, Any]:
        """What this program keeps, per collection and per rule: rows stored, and the state
        kept for incremental evaluation (derivation counts, per-group aggregate state,
        previous outputs of rules re-run in full), with estimated bytes."""
        colls: dict[str, Any] = {}
        total = 0
        # a recursive view's versions (Backward/Forward, ``engine/_dred.py``) count as support
        ranked = {
            h: u.dred for units in self.units for u in units if u.dred for h in u.dred.by_head
        }
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
            dred = ranked.get(name)
            if dred is not None:
                entries, sup_b = dred.memory(name)
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

    # -- channels -------------------------------------------------------------------------------

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
        if p.inserts or p.deletes or p.replaces or p.lats:
            return True
        # a <+, <- or <+- rule over a scratch queues its rows every tick (those that change its
        # table: see blooml.engine._feed)
        if not self.feeds:
            return False  # (asked at every step of a node: no generator for nothing)
        return any(f.armed and f.counts for f in self.feeds)

    def next_due(self) -> float | None:
        """The clock time at which the next ``periodic`` fires (``None``: no periodic)."""
        if not self.periodic:
            return None
        return min(state[0] for state in self.periodic.values())

    def is_fresh(self, rule: Rule) -> bool:  # pragma: no cover - debugging aid
        """Whether ``rule`` will next be evaluated in full."""
        return self.rules[rule.index].fresh

    # -- channels (``blooml.engine._net_entry``) -----------------------------------------------

    def send(self, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
        """Hand the messages a committed tick sends to ``addr`` to the transport, together.

        ``batch`` holds ``(channel, row, token)`` in the order the rules produced them
        (``token`` is what the transport's ``check`` returned). The one place sends leave a
        program (tracing hooks here).
        """
        _net_entry.send(self, addr, batch)

    def receive(self, chan: str, row: tuple[Any, ...]) -> None:
        """A message arrived on channel ``chan`` (in-process): visible at this program's next
        tick. A key conflict with another queued message fails that tick, as any conflict."""
        _net_entry.receive(self, chan, row)

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
        return _net_entry.receive_batch(self, sender, batches, refuse_conflicts)

    #: :meth:`receive_batch`, returning the ``(channel, rows)`` pairs it queued, each
    #: ``rows`` a list of checked rows of its own (the queue holds a copy): what a transport
    #: remembers as the input unit of a message it received. (The function itself as the
    #: method: a request's way in has no wrapper's call.)
    receive_checked = _net_entry.receive_checked
