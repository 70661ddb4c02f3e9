"""The tick loop: one atomic timestep of a runtime (see ``blooml.engine.runtime``).

``run_tick`` makes the queued inputs visible (``apply_pending``; in incremental mode the input
rows of collections that do not persist come and go by ``turnover`` and ``store_inputs``),
runs the strata (``blooml.engine._units`` incrementally, ``blooml.engine._rules`` for the
reference), then the end-of-tick rules; it commits, or undoes every change if anything raised
(``rollback_incremental`` for the incremental state), and reports the tick.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from blooml.engine._coltypes import check_families, check_input_families
from blooml.engine._direct import DirectPlan, direct_plan
from blooml.engine._feed import refill, unfeed
from blooml.engine._maintain import Support
from blooml.engine._net_entry import send_outbox
from blooml.engine._pending_input import blame, culprits, report_pending
from blooml.engine._rules import note, run_stratum, run_stratum_prioritized, run_temporal
from blooml.engine._state import Pending
from blooml.engine._units import journaled, run_units
from blooml.engine.relation import CheckedRows
from blooml.engine.trace import TickRecorder, message_key

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime

log = logging.getLogger("blooml.engine")


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


def run_tick(rt: Runtime) -> None:
    plan = direct_plan(rt)
    if (
        plan is not None
        and rt.tracer is None
        and plan.fits(rt, rt.pending)
        and not log.isEnabledFor(logging.DEBUG)
    ):
        run_direct_tick(rt, plan)
        return
    now = rt.clock()
    rel_tokens = {n: r.begin() for n, r in rt.rels.items()}
    lat_tokens = {n: v.begin() for n, v in rt.lats.items()}
    saved = (
        rt.pending,
        rt.tick_count,
        rt.now,
        {k: list(v) for k, v in rt.periodic.items()},
        rt.last_in,
    )
    if rt.incremental:
        flags = [(cr.fresh, cr.zfresh, cr.seen_removals) for cr in rt.rules]
        reset = rt._reset
        for z in rt._stateful:
            z.journal = []
    consumed = rt.pending
    rt.pending = Pending()
    rt.outbox = []
    rt._sent = set()
    rt.now = now
    prev_rt = rt.proxy._rt
    rt.proxy._rt = rt
    rec = None
    if rt.tracer is not None or log.isEnabledFor(logging.DEBUG):
        rec = rt._rec = TickRecorder(rt, rt.tracer.limit if rt.tracer else 0)
        rec.inputs(consumed)
    rt._failed = None
    try:
        if rt.column_types == "spark":
            check_input_families(rt, consumed)
        apply_inputs(rt, consumed, now)
        if rec is None:
            if rt.incremental:
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
        families = check_families(rt) if rt.column_types == "spark" else None
        if rt.durable is not None:
            # the last step: one transaction on disk; if it fails, the tick rolls back
            rt.durable.commit(rt)
    except BaseException as exc:
        for n, r in rt.rels.items():
            r.rollback(rel_tokens[n])
        for n, v in rt.lats.items():
            v.rollback(lat_tokens[n])
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
        rt.proxy._rt = prev_rt
        rt.firing = None
        rt._rec = None
    rt._reset = False
    if rt.watched:
        rt.tick_rows = {n: rt.rels[n].tick_new for n in rt.watched}
    if rt.changes_of:
        rt.tick_changes = {n: rt.rels[n].tick_delta() for n in rt.changes_of}
    for r in rt.rels.values():
        r.commit()
    if families:
        rt.col_families.update(families)
    if rt.incremental:
        # a committed tick is never undone: let its journals go now, in the tick that made
        # them (the next tick, however small, freed a bulk tick's: 4 ms after 100k upserts)
        for z in rt._stateful:
            z.journal = []
    rt.tick_count += 1
    outbox, rt.outbox = rt.outbox, []
    ids: dict[str, list[str]] | None = None
    if rec is not None:
        ids = report_tick(rt, rec, outbox)
    if outbox:
        send_outbox(rt, outbox, ids)
    if rt.lat_watch:
        rt._notify_lats()


def run_direct_tick(rt: Runtime, plan: DirectPlan) -> None:
    """``run_tick`` for a tick whose whole input is channel rows, in a program whose every
    rule maps over one channel (``blooml.engine._direct``): the same transaction, failure
    report, durable write and sends, on the collections the tick can change alone (the
    channels that held rows or receive some, the tables their rules write; every lattice
    variable), with the plan's rules fired in place of the strata."""
    now = rt.clock()
    consumed = rt.pending
    touched = plan.touched(rt, consumed)
    rel_tokens = [(r, r.begin()) for r in touched]
    lat_tokens = [(v, v.begin()) for v in rt.lats.values()]
    saved = (consumed, rt.tick_count, rt.now, rt.last_in)
    flags = [(cr, cr.fresh, cr.seen_removals) for cr, _ in plan.rules]
    rt.pending = Pending()
    rt.outbox = []
    rt._sent = set()
    rt.now = now
    proxy = rt.proxy
    prev_rt = proxy._rt
    proxy._rt = rt
    rt._failed = None
    try:
        plan.run(rt, consumed, now)
        if rt.durable is not None:
            rt.durable.commit(rt)  # the last step, as in run_tick
    except BaseException as exc:
        for r, token in rel_tokens:
            r.rollback(token)
        for v, token in lat_tokens:
            v.rollback(token)
        rt.pending, rt.tick_count, rt.now, rt.last_in = saved
        rt.outbox = []
        for cr, fresh, seen in flags:
            cr.fresh, cr.seen_removals = fresh, seen
        if isinstance(exc, Exception) and consumed:
            report_pending(rt, exc, consumed, rt._failed)
        report_failure(rt, None, exc, saved[1])
        raise
    finally:
        proxy._rt = prev_rt
        rt.firing = None
    if rt.watched:  # an untouched collection gained nothing: its tick_new is empty
        rt.tick_rows = {n: rt.rels[n].tick_new for n in rt.watched}
    for r, _ in rel_tokens:
        r.commit()
    rt.tick_count += 1
    outbox, rt.outbox = rt.outbox, []
    if outbox:
        send_outbox(rt, outbox, None)
    if rt.lat_watch:
        rt._notify_lats()


def rollback_incremental(rt: Runtime, flags: list[tuple[bool, bool, int]], reset: bool) -> None:
    """Undo a failed tick's changes to the incremental state (the relations roll back by
    their own undo logs), so the next tick goes on from the last committed one at the
    cost of what it changes. Should undoing fail, the next tick rebuilds the state from
    the stored rows instead."""
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
        for cr, (fresh, zfresh, seen) in zip(rt.rules, flags, strict=True):
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


def report_tick(rt: Runtime, rec: TickRecorder, outbox: list[Any]) -> dict[str, list[str]]:
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
    if log.isEnabledFor(logging.DEBUG):
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


def apply_inputs(rt: Runtime, pend: Pending, now: float) -> None:
    try:
        apply_pending(rt, pend, now)
    except BaseException as exc:
        note(exc, "while applying the facts queued for this tick (<+, <-, <+-, inserts)")
        raise


def apply_pending(rt: Runtime, pend: Pending, now: float) -> None:
    if rt.incremental:
        turnover(rt)
    for rel in rt.rels.values():
        if not rel.persistent:
            if not rt.incremental:
                rel.clear()
        elif rel.ttl is not None:
            rel.expire(now)
    tick_in = rt.tick_in
    for name, rows in pend.replaces.items():
        rel = rt.rels[name]
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
    if rt.feeds:
        unfeed(rt.feeds)
    for name, rows in pend.deletes.items():
        rel = rt.rels[name]
        if name in tick_in:
            gone = set(rows)
            tick_in[name] = [r for r in tick_in[name] if r not in gone]
            continue
        for row in rows:
            rel.remove(row)
    if rt.feeds:
        refill(rt.feeds, now)
    for name, rows in pend.inserts.items():
        if name in tick_in:
            _gather(tick_in, name, rows)
            continue
        try:
            rt.rels[name].add_many(rows, now, f"input to {name}")
        except Exception as exc:
            blame(exc, {name: culprits(exc, rows) or list(rows)})
            raise
    for name, values in pend.lats.items():
        var = rt.lats[name]
        for v in values:
            try:
                var.merge_in(v, f"input to {name}")
            except Exception as exc:
                blame(exc, {name: [v]})
                raise
    for name, state in rt.periodic.items():
        if now >= state[0]:
            rel = rt.rels[name]
            row = rel.make_row((state[1], now), name)
            if name in tick_in:
                _gather(tick_in, name, [row])
            else:
                rel.add(row, now)
            if rt._rec is not None:
                rt._rec.periodic(name, row)
            state[1] += 1
            period = rt.ir.collections[name].period or 0.0
            state[0] += period
            if state[0] <= now:
                state[0] = now + period
    if rt.incremental:
        store_inputs(rt, now)


def turnover(rt: Runtime) -> None:
    """Incremental mode, start of a tick: the last tick's input rows of every collection
    that does not persist leave (a reset tick empties them all and forgets their counts);
    this tick's are gathered in ``tick_in`` and stored by ``_store_inputs``."""
    rt.rec_dirty = set()
    rt.prev_in = rt.last_in
    stale = False
    for name in rt._transient:
        rel = rt.rels[name]
        if rt._reset:
            for k in list(rel.store):
                rel.drop(k)
            if name in rt.support:
                rt.support[name] = Support(rel)
                stale = True
            continue
        last = rt.last_in.get(name)
        if last:
            sup = rt.support.get(name)
            if sup is not None:
                sup.apply([(r, -1) for r in last], f"input to {name}")
            elif name in rt._rec_heads:
                rt.rec_dirty.add(name)  # a recursive unit's head: re-derived
            else:  # input rows alone: emptied, as a scratch of the reference is
                rel.clear()
    if stale:
        rt._stateful = journaled(rt)
    rt.tick_in = {n: [] for n in rt._transient}


def store_inputs(rt: Runtime, now: float) -> None:
    """Incremental mode: count (or, for a recursive unit's head, store) this tick's input
    rows of the collections that do not persist."""
    for name, rows in rt.tick_in.items():
        if not rows:
            continue
        rel = rt.rels[name]
        where = f"input to {name}"
        try:
            if type(rows) is not CheckedRows:  # checked at insert already: stored as is
                make = rel.make_row
                rows = [make(r, where) for r in rows]
                rt.tick_in[name] = rows
            sup = rt.support.get(name)
            if sup is not None:
                sup.apply([(r, 1) for r in rows], where)
            else:
                rel.add_many(rows, now, where)
        except Exception as exc:
            blame(exc, {name: culprits(exc, rows) or list(rows)})
            raise
    rt.last_in = rt.tick_in
