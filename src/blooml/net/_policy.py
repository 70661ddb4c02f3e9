"""A node's isolation policy: input queued as units, and what happens when a tick fails (set
aside only the input it fails on, hold and retry when no input is to blame, quarantine a
rule that keeps failing). The search itself is ``_isolate``'s."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

from blooml.engine._pending_input import row_test, scanning
from blooml.engine._state import Pending
from blooml.errors import IllTypedValueError, ProgramError, RuleQuarantinedError
from blooml.net._coltypes import ColumnTypes
from blooml.net._input import (
    Unit,
    added,
    combine,
    marks,
    merge_into,
    split_by,
    split_units,
    truncate,
)
from blooml.net._isolate import isolate
from blooml.net._nodebase import NodeBase, log

#: Rows the slow lane applies together at most when the node is idle: the rows
#: ``pending_input`` replays a failed rule's functions on (``row_culprit``), so that one
#: failed tick names every poison row of the batch.
_SLOW_ROWS = 10_000


class Isolation(NodeBase):
    """Input units, ticks that fail, and quarantine (``release_quarantine``)."""

    def _queue(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        fut: concurrent.futures.Future[Any] | None = None,
        sender: str | None = None,
    ) -> Any:
        """Call ``fn(*args)``, remembering what it queues for the next tick as one input
        unit (``_input.Unit``); if it raises, nothing it queued stays queued. ``fn`` sees
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
        if mine and sender is None:  # a local write: the check the door makes for the wire
            types = self._types
            if types is None:
                types = self._types = ColumnTypes(rt)
            why = types.check_pending(mine)
            if why is not None:
                truncate(base, before)
                raise IllTypedValueError(what, why)
        if mine:
            self._units.append(Unit(what, mine, fut, value, sender))
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
            if self._streak:
                self._streak.clear()
            for u in units:
                if u.fut is not None:  # a sync_do/async_do call waits for it
                    u.settle(None)
            if self._strikes:
                self._forgive(units)
            return True
        self._stats["errors"] += 1
        self._report(exc, None)
        if self._in_slow:  # the next idle batch of the lane is screened with it
            failed = rt.failed_rule
            self._suspect = None if failed is None else (failed, type(exc))
        live, gone = split_units(rt.pending, units)
        for u in gone:
            u.settle(None)  # a tick outside the node applied it
        if not live:
            self._hold(exc, [])
            return False

        def attempt(units: list[Unit]) -> BaseException | None:
            rt.pending = combine(units)
            return self._commit_tick(t0)

        # in the slow lane every sender is throttled already: its units stay in the search
        apart = not self._in_slow
        iso = isolate(rt, live, exc, self.isolation_trials, self._strike_one, attempt, apart)
        self._stats["trial_ticks"] += iso.trials
        if iso.no_input is not None:
            self._hold(iso.no_input, live)
            return False
        for u, e in iso.bad:
            self._set_aside(u, e)
        self._strike(iso.bad, iso.good)
        log.error(
            "%s: tick %d failed (%s: %s); set aside %s; ticking again on the other %d inputs%s",
            rt.addr,
            rt.tick_count,
            type(exc).__name__,
            exc,
            _describe(iso.bad),
            len(iso.good),
            f" ({len(iso.undecided)} left for the next tick)" if iso.undecided else "",
        )
        if iso.committed:
            exc2 = None
        else:
            rt.pending = combine(iso.good)
            # nothing good left (a batch of poison only): no tick on nothing
            exc2 = self._commit_tick(t0) if iso.good else None
        ok = exc2 is None
        if exc2 is None:
            self._streak.clear()
            for u in iso.good:
                u.settle(None)
        else:
            self._stats["errors"] += 1
            self._hold(exc2, iso.good)
        for u in iso.undecided:  # not tried within the budget: they stay queued
            if u.sender is not None and self._strikes.get(u.sender, 0) > 0:
                self._slow.append((u.sender, u))  # its sender had rows refused: apart
                continue
            merge_into(rt.pending, u.pend)
            self._units.append(u)
        return ok

    # -- senders whose rows keep failing --------------------------------------------------

    def _strike(self, bad: list[tuple[Unit, BaseException]], good: list[Unit]) -> None:
        """After an isolation: tell each sender of rows set aside (one refusal per sender
        and tick), and count a strike against it per piece set aside; a sender with
        ``throttle_after`` strikes more than clean datagrams is throttled (``_throttled``)."""
        per: dict[str, tuple[dict[str, int], BaseException]] = {}
        strikes = self._strikes
        for u, e in bad:
            if u.sender is None:
                continue
            chans, _ = per.setdefault(u.sender, ({}, e))
            for _, name, items in u.lists():
                chans[name] = chans.get(name, 0) + len(items)
        for sender, (chans, e) in per.items():
            self._refuse(sender, chans, e)
            if strikes.get(sender, 0) >= self.throttle_after and sender not in self._throttled_now:
                self._throttled_now.add(sender)
                self._stats["throttled_senders"] += 1
                log.warning(
                    "%s: throttling %s: %d of its rows were set aside (more than its clean "
                    "datagrams); its datagrams now wait in a slow lane (at most %d%% of tick "
                    "time while other input waits)",
                    self.rt.addr,
                    sender,
                    self.throttle_after,
                    round(100 * self.throttle_share),
                )
        while len(strikes) > 10_000:  # forged sender names cannot grow it without bound
            self._throttled_now.discard(next(iter(strikes)))
            del strikes[next(iter(strikes))]
        self._forgive([u for u in good if u.sender not in per])

    def _strike_one(self, unit: Unit) -> bool:
        """A piece of ``unit``'s sender was found bad: a strike per row of it; whether the
        sender is throttled now."""
        sender = unit.sender
        if sender is None:
            return False
        strikes = self._strikes
        # (re)inserted last: oldest first
        n = strikes[sender] = strikes.pop(sender, 0) + unit.size()
        return n >= self.throttle_after

    def _forgive(self, units: list[Unit]) -> None:
        """Each sender of a datagram that applied cleanly loses one strike."""
        strikes = self._strikes
        for sender in {u.sender for u in units if u.sender in strikes}:
            assert sender is not None
            n = strikes[sender] - 1
            if n > 0:
                strikes[sender] = n
            else:
                del strikes[sender]
            if n < self.throttle_after:
                self._throttled_now.discard(sender)

    def _throttled(self, sender: str, batches: Any) -> bool:
        """Whether a checked datagram from ``sender`` goes to the slow lane (its sender is
        throttled); there it waits, bounded (``throttle_queue``; more are dropped,
        ``dropped["throttled"]``)."""
        if self._strikes.get(sender, 0) < self.throttle_after or self._in_slow:
            return False
        if len(self._slow) >= self.throttle_queue:
            self._drop("throttled", f"from {sender!r}: its slow lane is full")
            self._refuse(  # the sender learns its rows were shed, as any refusal
                sender,
                {c: len(rows) for c, rows in batches},
                ProgramError(f"{sender} is throttled and its slow lane is full: rows shed"),
            )
            return True
        self._slow.append((sender, batches))
        return True

    def _slow_step(self, idle: bool) -> None:
        """Apply the slow lane in a tick of its own: while other input comes (not ``idle``),
        one datagram when the lane's share of tick time (``throttle_share``, its credit)
        allows, so that a throttled sender's failures cost its own ticks, never the other
        senders' throughput; once the node is ``idle``, a batch of them (up to
        ``batch_limit`` datagrams and ``_SLOW_ROWS`` rows), so that a flood in which every
        sender is throttled is applied at the cost of its rows, not of a tick and an
        isolation per datagram."""
        slow = self._slow
        if not slow or (not idle and self._slow_credit <= 0):
            return
        t0 = time.perf_counter()
        most = self.batch_limit if idle else 1
        rows = 0
        taken = 0
        # screened only when the lane's units are all that is queued (not after a tick
        # that failed with no input to blame, whose input is held)
        alone = idle and not self._units and not self.rt.pending
        self._in_slow = True
        try:
            while slow and taken < most and rows < _SLOW_ROWS:
                sender, batches = slow.popleft()
                taken += 1
                if isinstance(batches, Unit):  # queued already, then left undecided
                    merge_into(self.rt.pending, batches.pend)
                    self._units.append(batches)
                    rows += batches.size()
                elif self._enqueue(sender, batches):
                    rows += sum(len(r) for _, r in batches)
            screened = self._screen() if alone and len(self._units) > 1 else None
            if screened is not None:
                self._tick_screened(t0, *screened)
            elif self._units:
                self._tick(t0)
        finally:
            self._in_slow = False
        if not idle:  # (idle, it took no one's time)
            self._slow_credit -= time.perf_counter() - t0

    def _screen(self) -> tuple[list[Unit], list[Unit]] | None:
        """The rows of the slow lane's batch (``_units``, all that is queued) on which the
        rule its last failed tick raised in raises again alone (``row_test``, the test
        ``pending_input`` names rows by), as ``(suspects, rest)`` units; ``None`` when there
        are none (then screening stops until a lane tick fails again)."""
        suspect = self._suspect
        if suspect is None:
            return None
        rule, etype = suspect
        probe = None if rule.index in self.quarantined else row_test(self.rt, rule, etype)
        found = None
        if probe is not None:
            with scanning(self.rt):
                found = split_by(self._units, *probe)
        if found is None:
            self._suspect = None
        return found

    def _tick_screened(self, t0: float, suspects: list[Unit], rest: list[Unit]) -> None:
        """A screened batch of the slow lane: a tick on the ``rest``, then one on the
        ``suspects`` alone, which isolation judges as any failed tick's input (no row is
        set aside without a tick failing on it; a suspect that applies is applied). A flood
        then costs one failed tick of its poison rows, not of the whole batch."""
        rt = self.rt
        # (what was queued is the batch's units alone: ``_slow_step`` screens only then)
        self._units, rt.pending = rest, combine(rest)
        ok = self._tick(t0) if rest else True
        # one unit per sender of them (their datagrams' rows together): the isolation of
        # their tick handles a unit per sender, not one per datagram of a flood
        by: dict[str, list[Unit]] = {}
        for u in suspects:
            by.setdefault(u.sender or "", []).append(u)
        suspects = [
            Unit(f"rows screened from {s or 'this node'}", combine(us), None, None, s or None)
            for s, us in by.items()
        ]
        if not ok:  # (the rest failed unnamed: the suspects wait for the next batch)
            for u in reversed(suspects):
                self._slow.appendleft((u.sender or "", u))
            return
        for u in suspects:
            merge_into(rt.pending, u.pend)
        self._units = [*self._units, *suspects]
        self._tick(t0)

    def _credit(self, seconds: float) -> None:
        """A clean step took ``seconds``: the slow lane may take its share of them."""
        share = self.throttle_share
        self._slow_credit = min(self._slow_credit + seconds * share / (1 - share), 0.05)

    def _commit_tick(self, t0: float) -> BaseException | None:
        """One tick of the runtime, with the node's bookkeeping; the exception if it failed
        (rolled back: ``rt.pending`` holds its input again)."""
        rt = self.rt
        watches = self._watches
        if watches:
            lat_before = {n: rt.lats[n].value for n in watches if n in rt.lats}
            rt.watched = {n for n in watches if n in rt.rels}
        try:
            rt.tick()
        except Exception as exc:
            self._last_error = exc
            return exc
        self._latency.append(time.perf_counter() - t0)
        self._stats["ticks"] += 1
        if watches:
            for name, fns in watches.items():
                if name in rt.lats:
                    v = rt.lats[name].value
                    was = lat_before.get(name)
                    new = [v] if v is not was and v != was else []
                else:
                    rel = rt.rels[name]
                    new = [tuple.__new__(rel.named, r) for r in rt.tick_rows.get(name, ())]
                if new:
                    for fn in fns:
                        self._call(fn, new)
        if rt.tick_rows:
            rt.tick_rows = {}
        if self._tick_cbs:
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


def _describe(bad: list[tuple[Unit, BaseException]], most: int = 3) -> str:
    """What an isolation set aside, for the log: the first ``most`` pieces, then how many
    more (a flood's failed tick sets aside hundreds: one line of bounded length)."""
    if not bad:
        return "nothing"
    shown = ", ".join(f"{u.what} ({u.size()} items)" for u, _ in bad[:most])
    if len(bad) <= most:
        return shown
    total = sum(u.size() for u, _ in bad)
    return f"{shown} and {len(bad) - most} more ({total} items in all)"
