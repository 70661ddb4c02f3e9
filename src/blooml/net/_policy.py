"""A node's isolation policy: input queued as units, and what happens when a tick fails (set
aside only the input it fails on, hold and retry when no input is to blame, quarantine a
rule that keeps failing). The search itself is ``_isolate``'s."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from blooml.engine._state import Pending
from blooml.errors import ProgramError, RuleQuarantinedError
from blooml.net._isolate import (
    Unit,
    added,
    combine,
    isolate,
    marks,
    merge_into,
    split_units,
    truncate,
)
from blooml.net._nodebase import NodeBase, log


class Isolation(NodeBase):
    """Input units, ticks that fail, and quarantine (``release_quarantine``)."""

    def _queue(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        fut: concurrent.futures.Future[Any] | None = None,
    ) -> Any:
        """Call ``fn(*args)``, remembering what it queues for the next tick as one input
        unit (``_isolate.Unit``); if it raises, nothing it queued stays queued. ``fn`` sees
        the queue as it is (a ``p.tick()`` inside it ticks on everything queued)."""
        rt = self.rt
        base = rt.pending
        before = marks(base)
        try:
            value = fn(*args)
        except BaseException:
            if rt.pending is base:
                truncate(base, before)
            raise
        mine = added(base, before) if rt.pending is base else None
        if mine:
            self._units.append(Unit(what, mine, fut, value))
        elif fut is not None:  # nothing queued, or fn ticked and so applied it already
            fut.set_result(value)
        return value

    def _run_call(
        self, fn: Callable[[Any], Any], fut: concurrent.futures.Future[Any], what: str
    ) -> None:
        try:
            self._queue(what, fn, self.program, fut=fut)
        except Exception as exc:
            if not fut.done():
                fut.set_exception(exc)
            if what == "async_do":
                self._report(exc, "async_do")

    def _tick(self, t0: float | None = None) -> bool:
        """Tick on the queued input; if the tick fails, set aside only the input it fails on
        and tick again on the rest (see ``_isolate``); return whether a tick committed."""
        rt = self.rt
        if t0 is None:
            t0 = time.perf_counter()
        units, self._units = self._units, []
        exc = self._commit_tick(t0)
        if exc is None:
            self._streak.clear()
            for u in units:
                u.settle(None)
            return True
        self._stats["errors"] += 1
        self._report(exc, None)
        live, gone = split_units(rt.pending, units)
        for u in gone:
            u.settle(None)  # a tick outside the node applied it
        if not live:
            self._hold(exc, [])
            return False
        iso = isolate(rt, live, exc, self.isolation_trials)
        self._stats["trial_ticks"] += iso.trials
        if iso.no_input is not None:
            self._hold(iso.no_input, live)
            return False
        for u, e in iso.bad:
            self._set_aside(u, e)
        log.error(
            "%s: tick %d failed (%s: %s); set aside %s; ticking again on the other %d inputs%s",
            rt.addr,
            rt.tick_count,
            type(exc).__name__,
            exc,
            ", ".join(f"{u.what} ({u.size()} items)" for u, _ in iso.bad) or "nothing",
            len(iso.good),
            f" ({len(iso.undecided)} left for the next tick)" if iso.undecided else "",
        )
        rt.pending = combine(iso.good)
        exc2 = self._commit_tick(t0)
        ok = exc2 is None
        if exc2 is None:
            self._streak.clear()
            for u in iso.good:
                u.settle(None)
        else:
            self._stats["errors"] += 1
            self._hold(exc2, iso.good)
        for u in iso.undecided:  # not tried within the budget: they stay queued
            merge_into(rt.pending, u.pend)
            self._units.append(u)
        return ok

    def _commit_tick(self, t0: float) -> BaseException | None:
        """One tick of the runtime, with the node's bookkeeping; the exception if it failed
        (rolled back: ``rt.pending`` holds its input again)."""
        rt = self.rt
        lat_before = {n: rt.lats[n].value for n in self._watches if n in rt.lats}
        if self._watches:
            rt.watched = {n for n in self._watches if n in rt.rels}
        try:
            rt.tick()
        except Exception as exc:
            self._last_error = exc
            return exc
        self._latency.append(time.perf_counter() - t0)
        self._stats["ticks"] += 1
        for name, fns in self._watches.items():
            if name in rt.lats:
                v = rt.lats[name].value
                new = [v] if v is not lat_before.get(name) and v != lat_before.get(name) else []
            else:
                rel = rt.rels[name]
                new = [tuple.__new__(rel.named, r) for r in rt.tick_rows.get(name, ())]
            if new:
                for fn in fns:
                    self._call(fn, new)
        rt.tick_rows = {}
        for fn in self._tick_cbs:
            self._call(fn, self.program)
        return None

    def _hold(self, exc: BaseException, units: list[Unit]) -> None:
        """The tick fails with no input to blame: keep the input queued and retry after a
        back-off; after ``quarantine_after`` failures in a row quarantine the rule that
        raised (or, when no rule did, set the held input aside)."""
        rt = self.rt
        if units:
            rt.pending = combine(units)
            self._units[:0] = units
        rule = rt.failed_rule
        key = rule.index if rule is not None else None
        n = self._streak[key] = self._streak.get(key, 0) + 1
        if n >= self.quarantine_after:
            self._streak.pop(key)
            if rule is not None:
                self._quarantine(rule, n, exc)
                return
            log.error(
                "%s: %d ticks in a row failed in no rule (%s: %s); setting their input aside",
                rt.addr,
                n,
                type(exc).__name__,
                exc,
            )
            for u in units:
                self._set_aside(u, exc)
            self._units = [u for u in self._units if u not in units]
            rt.pending = Pending()
            return
        delay = min(0.05 * 2 ** (n - 1), 1.0)
        self._fail_backoff_until = rt.clock() + delay
        log.warning(
            "%s: tick %d failed with no input to blame%s: %s: %s; its input stays queued, "
            "retrying in %.2f s (failure %d of %d before quarantine)",
            rt.addr,
            rt.tick_count,
            f" (in {rule.describe()})" if rule is not None else "",
            type(exc).__name__,
            exc,
            delay,
            n,
            self.quarantine_after,
        )

    def _quarantine(self, rule: Any, failures: int, exc: BaseException) -> None:
        err = RuleQuarantinedError(rule.describe(), rule.index, failures, exc)
        self.quarantined[rule.index] = err
        self.rt.disable_rule(rule.index)
        self._fail_backoff_until = 0.0
        log.error("%s: %s", self.rt.addr, err)
        self._report(err, None)

    def release_quarantine(self, index: int | None = None) -> list[int]:
        """Put quarantined rules back into evaluation (all, or rule ``index``); return their
        indexes. Each is evaluated in full at the next tick."""
        if self.running and not self.on_own_thread():
            done: list[int] = self.sync_do(lambda p: self.release_quarantine(index))
            return done
        which = list(self.quarantined) if index is None else [index]
        for i in which:
            if i not in self.quarantined:
                raise ProgramError(
                    f"release_quarantine({i!r}): no such quarantined rule (quarantined: "
                    f"{sorted(self.quarantined)})"
                )
            self.rt.disable_rule(i, False)
            del self.quarantined[i]
        return which

    def _set_aside(self, unit: Unit, exc: BaseException) -> None:
        """Drop one input unit the tick fails on: counted, kept in ``discarded``, and its
        caller (``sync_do``/``async_do``) gets ``exc``."""
        self._stats["discarded_batches"] += 1
        self._stats["discarded_tuples"] += unit.size()
        self.discarded.append(unit.as_dict())
        unit.settle(exc)
