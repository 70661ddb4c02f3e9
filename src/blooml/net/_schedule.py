"""A node's tick scheduling: its thread and asyncio loop, what wakes it (datagrams, timers,
``sync_do``/``async_do`` calls), how much of the inbox one tick applies, and stopping."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from blooml.errors import ProgramError
from blooml.net._nodebase import NodeBase, log
from blooml.net._transport import _UDP, _Frames


class Scheduler(NodeBase):
    """The node's loop: ``start``, ``stop``, ``run`` and one step of work (``_step``)."""

    def start(self) -> None:
        """Start the node's thread and loop (see ``Program.start``)."""
        if self.running:
            raise ProgramError(f"{self.rt.addr}: the node is running already")
        if self._closing:
            raise ProgramError(f"{self.rt.addr}: the node was stopped; make a new program")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._thread_main, args=(ready, failure), name=f"blooml-node {self.rt.addr}"
        )
        self._thread.daemon = True
        self.running = True
        self._thread.start()
        ready.wait(10.0)
        if failure:
            self.running = False
            raise failure[0]

    def _thread_main(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._ident = threading.get_ident()
        try:
            loop.run_until_complete(self._main(ready, failure))
        finally:
            self._ident = None  # (an ident is reused by threads started later)
            loop.close()
            self.running = False
            ready.set()

    async def _main(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            if self.transport == "udp":
                assert self.sock is not None
                t, _ = await loop.create_datagram_endpoint(lambda: _UDP(self), sock=self.sock)
                self._udp = t  # type: ignore[assignment]
            elif self.transport == "tcp":
                assert self.sock is not None
                self._server = await loop.create_server(lambda: _Frames(self), sock=self.sock)
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        ready.set()
        for addr, frame in self._pre_start:
            self._peer(addr).push(frame)
        self._pre_start = []
        self._pre_start_size = 0
        wake = self._wake
        while True:
            if not self._work_ready():
                delay = self._timer_delay()
                if delay is None:
                    self._parked = True
                    await wake.wait()
                    self._parked = False
                elif delay > 0:
                    # a timer that sets the event (wait_for would make a task per wait)
                    timer = loop.call_later(delay, wake.set)
                    self._parked = True
                    await wake.wait()
                    self._parked = False
                    timer.cancel()
            wake.clear()
            self._step()
            if self._closing and (
                not (self._inbox or self._calls) or time.monotonic() >= self._stop_deadline
            ):
                break
            await asyncio.sleep(0)
        self._step()
        for u in self._units:  # held by a failing rule until the end
            u.settle(ProgramError(f"{self.rt.addr}: the node stopped before applying it"))
        for _ in range(len(self._inbox) + len(self._slow)):  # too late for stop()'s budget
            self._drop("stopping", "the node stopped before applying it")
        self._slow.clear()
        self._inbox.clear()
        self._inbox_size = 0
        while self._calls:  # queued sync_do/async_do calls that stop()'s budget left unrun
            _fn, fut, _what = self._calls.popleft()
            if fut is not None and not fut.done():
                fut.set_exception(ProgramError(f"{self.rt.addr}: the node stopped first"))
        # every peer flushes at once, within the budget stop() gave: a peer that never reads
        # loses what is queued for it (counted in send_dropped), it does not hold the stop
        budget = max(0.05, self._stop_deadline - time.monotonic())
        await asyncio.gather(*(peer.close(budget) for peer in list(self._peers.values())))
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.close()  # peers see EOF now, and reconnect to whoever binds this address next
        if self._udp is not None:
            self._udp.close()
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _arrived(self) -> None:
        """Input arrived (on the loop). When the node's task is parked with nothing to do,
        step without waking the task: at once when no other callback waits in this round
        of the loop (the request's read was the last: stepping in the next round would
        only cost a ``select`` and a round of the loop first, and what that round reads
        would come after the step anyway), else from the loop's next round, after the
        other callbacks of this one (other connections' reads), so that what arrives
        together goes into one tick. Otherwise wake the task."""
        wake = self._wake
        if wake is None:
            return
        if self._parked and not self._closing and not wake.is_set():
            if not self._step_soon:
                self._step_soon = True  # until the step has run: no second one meanwhile
                loop = self._loop
                # asyncio's queue of this round's callbacks (absent from other loops)
                if not getattr(loop, "_ready", True):
                    try:
                        self._step_parked()  # (parked and not woken: what _step_now checks)
                    except Exception as exc:  # as the loop reports a failing callback: the
                        # connection whose read this is must not be the one to pay for it
                        loop.call_exception_handler(  # type: ignore[union-attr]
                            {"message": f"{self.rt.addr}: a step raised", "exception": exc}
                        )
                else:
                    loop.call_soon(self._step_now)  # type: ignore[union-attr]
            return
        wake.set()

    def _step_now(self) -> None:
        """The step ``_arrived`` scheduled for the loop's next round (see ``_step_parked``),
        unless the task has been woken meanwhile: then it steps."""
        wake = self._wake
        assert wake is not None
        if not self._parked or wake.is_set() or self._closing:
            self._step_soon = False
            wake.set()  # the task is awake, or stopping: it steps
            return
        self._step_parked()

    def _step_parked(self) -> None:
        """A step while the node's task is parked (not woken; ``stop()`` wakes it, so not
        stopping either); the task takes over again (woken) when more work waits (what
        arrived during the step included) or the step moved a timer (a periodic that fired,
        a failure's back-off)."""
        rt = self.rt
        backoff = self._fail_backoff_until
        due = rt.next_due() if rt.periodic else None
        try:
            self._step()
        finally:
            self._step_soon = False
        if (
            self._work_ready()
            or self._fail_backoff_until != backoff
            or (rt.next_due() if rt.periodic else None) != due
        ):
            self._wake.set()  # type: ignore[union-attr]

    def _work_ready(self) -> bool:
        if self._closing:
            return True
        if not (self._inbox or self._calls or self._units or self.rt.has_pending()) and (
            not self._slow or self._slow_wait(time.perf_counter())
        ):
            return False
        backoff = self._fail_backoff_until  # (0.0 when no rule is failing: no clock read)
        # a rule keeps failing: wait (new datagrams wait in the inbox)
        return not (backoff and self.rt.clock() < backoff)

    def _timer_delay(self) -> float | None:
        now = self.rt.clock()
        if now < self._fail_backoff_until:
            return self._fail_backoff_until - now
        due = self.rt.next_due()
        slow = self._slow_wait(time.perf_counter()) if self._slow else None
        if due is None:
            return slow
        due = max(due - now, 0.0)
        return due if slow is None else min(due, slow)

    def _slow_wait(self, now: float) -> float:
        """Seconds until the slow lane (not empty) may run: 0.0 while it has credit (its
        share of the time other input took) or once no other input came for
        ``throttle_idle`` seconds (the node is idle)."""
        if self._slow_credit > 0:
            return 0.0
        return max(0.0, self._last_input + self.throttle_idle - now)

    def _step(self) -> None:
        """Apply arrived datagrams, run one queued call, tick if there is anything to do."""
        t0 = time.perf_counter()
        rt = self.rt
        backoff = self._fail_backoff_until  # (0.0 when no rule is failing: no clock read)
        if backoff and not self._closing and rt.clock() < backoff:
            return
        # the event loop reads one datagram per wake-up: take what else has arrived from
        # the socket now, so that a tick applies what arrived (up to batch_limit), not one
        if self._udp is not None:
            self._drain_udp()
        inbox = self._inbox
        if inbox:
            taken = 0
            closing = self._closing
            budget = self.batch_bytes
            try:
                for _ in range(min(len(inbox), self.batch_limit)):
                    if closing and time.monotonic() >= self._stop_deadline:
                        break
                    size = len(inbox[0])
                    if taken and taken + size > budget:
                        break
                    taken += size
                    self.accept(inbox.popleft())
            finally:
                self._inbox_size -= taken
        # one queued call per tick (as Bud's sync_do/async_do): what it inserts is applied
        # by a tick of its own
        if self._calls:
            self._last_input = t0
            fn, fut, what = self._calls.popleft()
            self._run_call(fn, fut, what)
        if self._units or rt.has_pending() or (rt.periodic and rt.next_due() <= rt.clock()):
            self._tick(t0)
            if self._slow or self._slow_credit < 0.05:
                self._credit(time.perf_counter() - t0)
        if self._slow:
            # idle: nothing waits and no other input came for ``throttle_idle`` seconds
            wait = self._inbox or time.perf_counter() - self._last_input < self.throttle_idle
            self._slow_step(idle=not wait)
        if self._acks_due:
            self._flush_acks()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop: apply what arrived, send what is queued, close (see ``Program.stop``).

        Bounded: queued TCP frames get half of ``timeout`` to leave; what a peer has not taken
        by then is dropped (counted in ``send_dropped``) and its connection aborted. If the
        node's thread still runs after ``timeout`` (a callback that blocks), a warning is
        logged and ``stop`` returns.
        """
        if not self.running or self._loop is None:
            self._closing = True
            if self.sock is not None:
                self.sock.close()
            return
        if self.on_own_thread():
            raise ProgramError("stop() from the node's own thread (a callback) would deadlock")
        loop = self._loop

        self._stop_deadline = time.monotonic() + timeout / 2

        def close() -> None:
            self._closing = True
            assert self._wake is not None
            self._wake.set()

        loop.call_soon_threadsafe(close)
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning(
                "%s: the node's thread did not end within %s s (a callback that blocks?); "
                "it is a daemon thread and ends with the process",
                self.rt.addr,
                timeout,
            )

    def run(
        self,
        *,
        duration: float | None = None,
        every: float | None = None,
        on_every: Callable[[], Any] | None = None,
        on_start: Callable[[], Any] | None = None,
    ) -> None:
        """Start, then wait in the foreground until SIGINT/SIGTERM (or ``duration`` seconds, or
        the node stops), then stop. ``on_start()`` runs once the node is started, ``on_every()``
        every ``every`` seconds (``blooml run`` prints its summaries so)."""
        stop = threading.Event()
        previous = {}

        def handler(signum: int, frame: Any) -> None:
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        try:
            self.start()
            if on_start is not None:
                on_start()
            now = time.monotonic()
            deadline = None if duration is None else now + duration
            next_call = None if every is None or on_every is None else now + every
            step = 0.2 if every is None else min(0.2, every)
            while not stop.is_set() and self.running:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if next_call is not None and on_every is not None and now >= next_call:
                    on_every()
                    next_call = now + (every or 0.0)
                stop.wait(step)
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
            self.stop()
