"""The tick loop: one atomic timestep of a runtime (see ``blooml.engine.runtime``).

``run_tick`` makes the queued inputs visible (``apply_pending``; in incremental mode the input
rows of collections that do not persist come and go by ``turnover`` and ``store_inputs``),
runs the strata (``blooml.engine._units`` incrementally, ``blooml.engine._rules`` for the
reference), then the end-of-tick rules; it commits, or undoes every change if anything raised
(``rollback_incremental`` for the incremental state), and reports the tick.

A tick costs what it reaches: it begins (``Relation.begin``) a collection only as it first
changes it, keeping the tokens in ``Runtime._touched``, and commits or rolls back only those;
units (``Unit.idle``) and end-of-tick rules (``_rules.idle``) none of whose inputs changed are
not run. A collection it did not begin is as the last tick committed it: no undo log, no new
rows, empty windows. The reference mode, a tick that rebuilds the incremental state and an
observed tick begin every collection and run every rule.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from blooml.engine._coltypes import check_families, check_input_families
from blooml.engine._feed import refill, unfeed
from blooml.engine._maintain import Support
from blooml.engine._net_entry import send_outbox
from blooml.engine._pending_input import blame, culprits, report_pending
from blooml.engine._rules import (
    CompiledRule,
    note,
    run_stratum,
    run_stratum_prioritized,
    run_temporal,
)
from blooml.engine._state import Pending
from blooml.engine._units import begin_once, journaled, run_units
from blooml.engine.relation import CheckedRows
from blooml.engine.trace import TickRecorder, message_key

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime

log = logging.getLogger("blooml.engine")


def _gather(into: dict[str, list[Any]], name: str, rows: list[Any]) -> None:
    """Add queued input ``rows`` to ``into[name]``: the queued list itself when it is the
    first (checked input keeps its mark, and stores without a second check), else a copy
    (the queue is kept unchanged for a rollback)."""
    have = into.get(name)
    if not have:
        into[name] = rows
    elif type(have) is CheckedRows and type(rows) is CheckedRows:
        into[name] = CheckedRows([*have, *rows])
    else:
        into[name] = [*have, *rows]


def run_tick(rt: Runtime) -> None:
    """One atomic timestep of ``rt`` (see the module docstring).

    It begins (``Relation.begin``) only the collections it changes, as it comes to them
    (``Runtime._touched``): those receiving input or losing last tick's input rows, those
    with soft state or a feed, and the heads of the units that run; in incremental mode a
    unit or an end-of-tick rule none of whose inputs changed (``idle``) is not run. The
    others are as the last tick left them (committed: no undo log, no new rows), so a tick
    on one channel row costs what that row reaches, not the program's size. A tick that
    raised undoes what it began (and the flags of the rules it ran) and re-queues its input.
    """
    debug = log.isEnabledFor(logging.DEBUG)  # once a tick (the recorder and the report)
    now = rt.clock()
    consumed = rt.pending
    saved = (consumed, rt.tick_count, rt.now, rt.periodic, rt.last_in)
    if rt.periodic:  # (its deadlines are changed in place)
        saved = (*saved[:3], {k: list(v) for k, v in rt.periodic.items()}, rt.last_in)
    reset = rt._reset
    rt.pending = Pending()
    rt.outbox = []
    rt._sent = set()
    rt.now = now
    proxy = rt.proxy
    prev_rt = proxy._rt
    proxy._rt = rt
    rec = None
    if rt.tracer is not None or debug:
        rec = rt._rec = TickRecorder(rt, rt.tracer.limit if rt.tracer else 0)
        rec.inputs(consumed)
    # the class settings, read once a tick (a read through the instance is a dict and a
    # type lookup each time)
    incremental = rt.incremental
    spark = rt.column_types == "spark"
    if incremental and rt._scoped and rec is None and not reset:
        touched = rt._touched = {}
        if rt._ttl_rels:  # (no iterator for none: a request's tick has none)
            for rel in rt._ttl_rels:  # expired below
                touched[rel] = rel.begin()
        if rt.feeds:
            for feed in rt.feeds:  # ``unfeed``/``refill`` change their heads
                begin_once(touched, feed.head)
    else:  # the reference, a tick rebuilding the state, an observed tick: all of them
        touched = rt._touched = {r: r.begin() for r in rt.rels.values()}
        for z in rt._stateful:  # (a tick commits or rolls back its journals: a defect's)
            z.journal = []
    lat_tokens = []
    for v in rt.lats.values():  # (a loop: no comprehension's frame)
        lat_tokens.append((v, v.begin()))
    flags = rt._flags = []
    rt._failed = None
    families = None
    try:
        if spark:
            check_input_families(rt, consumed)
        try:
            apply_pending(rt, consumed, now)
        except BaseException as exc:
            note(exc, "while applying the facts queued for this tick (<+, <-, <+-, inserts)")
            raise
        if rec is None:
            if incremental:
                for units in rt.units:
                    run_units(rt, units)
            else:
                for stratum, heads in zip(rt.strata, rt.prio_heads, strict=True):
                    if heads and rt.prioritize:
                        run_stratum_prioritized(rt, stratum, heads)
                    else:
                        run_stratum(rt, stratum)
            run_temporal(rt)
        else:
            run_strata_timed(rt, rec)
        if spark:
            families = check_families(rt)
        if rt.durable is not None:
            # the last step: one transaction on disk; if it fails, the tick rolls back
            rt.durable.commit(rt)
    except BaseException as exc:
        for r, token in touched.items():
            r.rollback(token)
        for v, token in lat_tokens:
            v.rollback(token)
        rt.pending, rt.tick_count, rt.now, rt.periodic, rt.last_in = saved
        rt.outbox = []
        if rt.incremental:
            rollback_incremental(rt, flags, reset)
        else:
            for cr in rt.rules:
                cr.fresh = True  # change tracking is not rolled back: start over in full
        if isinstance(exc, Exception) and consumed:
            report_pending(rt, exc, consumed, rt._failed)
        report_failure(rt, rec, exc, saved[1])
        raise
    finally:
        proxy._rt = prev_rt
        rt.firing = None
        rt._rec = None
    rt._reset = False
    if rt.watched:  # a collection the tick did not begin gained nothing: tick_new is []
        rt.tick_rows = {n: rt.rels[n].tick_new for n in rt.watched}
    if rt.changes_of:
        rt.tick_changes = {n: rt.rels[n].tick_delta() for n in rt.changes_of}
    rt.tick_count += 1
    outbox, rt.outbox = rt.outbox, []
    if rec is None and outbox:
        # the tick has committed (nothing from here on fails it): its messages leave first
        # (the transport only queues or writes them), the commit's bookkeeping follows, off
        # the way of a reply
        try:
            send_outbox(rt, outbox, None)
        finally:
            finish_commit(rt, touched, families)
    else:
        finish_commit(rt, touched, families)
        if rec is not None:
            ids = report_tick(rt, rec, outbox, debug)
            if outbox:
                send_outbox(rt, outbox, ids)
    if rt.lat_watch:
        rt._notify_lats()


def finish_commit(rt: Runtime, touched: dict[Any, Any], families: Any) -> None:
    """The end of a committed tick: the collections it began commit (their undo logs and
    windows go), and so do the journals of the incremental state."""
    for r in touched:
        r.commit()
    if families:
        rt.col_families.update(families)
    stateful = rt._stateful
    if stateful:
        # a committed tick is never undone: let its journals go now, in the tick that made
        # them (the next tick, however small, freed a bulk tick's: 4 ms after 100k upserts)
        for z in stateful:
            z.journal = []


def rollback_incremental(
    rt: Runtime, flags: list[tuple[CompiledRule, bool, bool, int]], reset: bool
) -> None:
    """Undo a failed tick's changes to the incremental state (the relations roll back by
    their own undo logs; ``flags`` holds the flags of the rules the tick ran, as they were
    before), so the next tick goes on from the last committed one at the cost of what it
    changes. Should undoing fail, the next tick rebuilds the state from the stored rows
    instead."""
    rt._reset = reset
    if reset:
        # the failed tick was rebuilding the state: the next one rebuilds it again, so
        # every rule must be evaluated afresh (the failed tick marked some initialised)
        for cr in rt.rules:
            cr.fresh = cr.zfresh = True
        return
    try:
        for z in rt._stateful:
            z.rollback()
        for cr, fresh, zfresh, seen in reversed(flags):  # a rule run twice: its first
            cr.fresh, cr.zfresh, cr.seen_removals = fresh, zfresh, seen
    except Exception:  # pragma: no cover - a defect; rebuilding is always correct
        log.exception("%s: could not undo the incremental state; rebuilding it", rt.addr)
        rt._reset = True
        for cr in rt.rules:
            cr.fresh = cr.zfresh = True


def run_strata_timed(rt: Runtime, rec: TickRecorder) -> None:
    """The strata and end-of-tick rules of ``_tick``, each timed into ``rec``."""
    clock = time.perf_counter
    for i, (stratum, heads) in enumerate(zip(rt.strata, rt.prio_heads, strict=True)):
        t0 = clock()
        if rt.incremental:
            run_units(rt, rt.units[i])
        elif heads and rt.prioritize:
            run_stratum_prioritized(rt, stratum, heads)
        else:
            run_stratum(rt, stratum)
        rec.stratum(i, clock() - t0)
    t0 = clock()
    run_temporal(rt)
    rec.stratum("next", clock() - t0)


def report_tick(
    rt: Runtime, rec: TickRecorder, outbox: list[Any], debug: bool
) -> dict[str, list[str]]:
    """Trace and log a committed tick; return its messages' identities by content key
    (for an in-process receiver to record them)."""
    tick = rec.tick
    ids: dict[str, list[str]] = {}
    sends = []
    for i, (addr, chan, row, _) in enumerate(outbox):
        msg = f"{rt.addr}#{tick}.{i}"
        sends.append((addr, chan, row, msg))
        ids.setdefault(message_key(chan, addr, row), []).append(msg)
    if rt.tracer is not None:
        rt.tracer.events(rt, rec.finish(rt, True, sends))
    if debug:
        fired = ", ".join(f"r{i}:{d[1]}" for i, d in sorted(rec.derived.items()))
        log.debug(
            "%s tick %d: %d rules fired (%s), %d rows derived, %d messages, %.3f ms",
            rt.addr,
            tick,
            len(rec.derived),
            fired or "-",
            rec.total_derived(),
            len(outbox),
            (time.perf_counter() - rec.start) * 1000,
        )
    return ids


def report_failure(rt: Runtime, rec: TickRecorder | None, exc: BaseException, tick: int) -> None:
    """Log (WARNING) and trace a tick that raised and was rolled back."""
    rule = rt._failed
    rt._failed = None
    rt.failed_rule = rule
    where = f" in {rule.describe()}" if rule is not None else ""
    log.warning("%s tick %d rolled back: %s: %s%s", rt.addr, tick, type(exc).__name__, exc, where)
    if rec is not None and rt.tracer is not None:
        rec.error(exc, rule)
        rt.tracer.events(rt, rec.finish(rt, False, []))


def apply_pending(rt: Runtime, pend: Pending, now: float) -> None:
    """Make the queued input visible (step 1 of a tick), beginning each collection it
    changes (``Runtime._touched``; those with soft state or a feed were begun already)."""
    touched = rt._touched
    rels = rt.rels
    incremental = rt.incremental
    if incremental:
        turnover(rt)
    else:
        for rel in rels.values():
            if not rel.persistent:
                rel.clear()
    if rt._ttl_rels:
        for rel in rt._ttl_rels:
            rel.expire(now)
    # incrementally, the input rows of a collection that does not persist are this tick's
    # (``tick_in``), stored by ``store_inputs``
    maintained = rt._transient_set if incremental else ()
    tick_in = rt.tick_in
    if pend.replaces:
        for name, rows in pend.replaces.items():
            if name in maintained:
                _gather(tick_in, name, rows)
                continue
            rel = rels[name]
            begin_once(touched, rel)
            for row in rows:
                rel.remove_key(row)
            for row in rows:
                try:
                    rel.add(row, now)
                except Exception as exc:
                    blame(exc, {name: [row]})
                    raise
    feeds = rt.feeds
    if feeds:
        unfeed(feeds)
    if pend.deletes:
        for name, rows in pend.deletes.items():
            if name in maintained:
                have = tick_in.get(name)
                if have:
                    gone = set(rows)
                    tick_in[name] = [r for r in have if r not in gone]
                continue
            rel = rels[name]
            begin_once(touched, rel)
            for row in rows:
                rel.remove(row)
    if feeds:
        refill(feeds, now)
    for name, rows in pend.inserts.items():
        if name in maintained:
            if name in tick_in:
                _gather(tick_in, name, rows)
            else:  # (the first rows: the queued list itself, as _gather keeps it)
                tick_in[name] = rows
            continue
        rel = rels[name]
        begin_once(touched, rel)
        try:
            rel.add_many(rows, now, f"input to {name}")
        except Exception as exc:
            blame(exc, {name: culprits(exc, rows) or list(rows)})
            raise
    if pend.lats:
        for name, values in pend.lats.items():
            var = rt.lats[name]
            for v in values:
                try:
                    var.merge_in(v, f"input to {name}")
                except Exception as exc:
                    blame(exc, {name: [v]})
                    raise
    if rt.periodic:
        fire_periodic(rt, now)
    if tick_in:
        store_inputs(rt, now)
    elif incremental:
        rt.last_in = tick_in


def fire_periodic(rt: Runtime, now: float) -> None:
    """The ``periodic`` collections that are due get their row."""
    touched = rt._touched
    tick_in = rt.tick_in
    for name, state in rt.periodic.items():
        if now >= state[0]:
            rel = rt.rels[name]
            row = rel.make_row((state[1], now), name)
            if rt.incremental and name in rt._transient_set:
                _gather(tick_in, name, [row])
            else:
                begin_once(touched, rel)
                rel.add(row, now)
            if rt._rec is not None:
                rt._rec.periodic(name, row)
            state[1] += 1
            period = rt.ir.collections[name].period or 0.0
            state[0] += period
            if state[0] <= now:
                state[0] = now + period


def turnover(rt: Runtime) -> None:
    """Incremental mode, start of a tick: the last tick's input rows of every collection
    that does not persist leave (a reset tick empties them all and forgets their counts);
    this tick's are gathered in ``tick_in`` (only collections that receive rows) and stored
    by ``store_inputs``."""
    if rt.rec_dirty:
        rt.rec_dirty = set()
    last_in = rt.prev_in = rt.last_in
    rt.tick_in = {}
    if rt._reset:
        stale = False
        for name in rt._transient:
            rel = rt.rels[name]
            for k in list(rel.store):
                rel.drop(k)
            if name in rt.support:
                rt.support[name] = Support(rel)
                stale = True
        if stale:
            rt._stateful = journaled(rt)
        return
    touched = rt._touched
    for name, last in last_in.items():
        if not last:
            continue
        rel = rt.rels[name]
        sup = rt.support.get(name)
        if sup is not None:
            begin_once(touched, rel)
            sup.apply([(r, -1) for r in last], f"input to {name}")
        elif name in rt._rec_heads:
            rt.rec_dirty.add(name)  # a recursive unit's head: re-derived
        else:  # input rows alone: emptied, as a scratch of the reference is
            if rel not in touched:  # (begin_once, inline: once a tick per input channel)
                touched[rel] = rel.begin()
            rel.clear()


def store_inputs(rt: Runtime, now: float) -> None:
    """Incremental mode: count (or, for a recursive unit's head, store) this tick's input
    rows of the collections that do not persist."""
    touched = rt._touched
    tick_in = rt.tick_in
    for name, rows in tick_in.items():
        if not rows:
            continue  # (its rows deleted in the same tick)
        rel = rt.rels[name]
        if rel not in touched:  # (begin_once, inline: once a tick per input channel)
            touched[rel] = rel.begin()
        where = f"input to {name}"
        try:
            if type(rows) is not CheckedRows:  # checked at insert already: stored as is
                make = rel.make_row
                rows = [make(r, where) for r in rows]
                tick_in[name] = rows
            sup = rt.support.get(name)
            if sup is not None:
                sup.apply([(r, 1) for r in rows], where)
            else:
                rel.add_many(rows, now, where)
        except Exception as exc:
            blame(exc, {name: culprits(exc, rows) or list(rows)})
            raise
    rt.last_in = tick_in
