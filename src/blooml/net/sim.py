"""``Simulation``: many programs in one process, on a virtual clock, over a simulated network.

A simulation is a transport (see ``docs/net.md``, the seam): a program joins it with
``P(addr="a", network=sim)`` and from then on runs on the simulation's virtual clock. The
simulation keeps one queue of events in virtual time (message deliveries, node ticks, timed
calls) and processes them in order; a node ticks when a message reaches it, when its own
``<+``/``<-`` facts or external input wait, and when a ``periodic`` falls due, as a socket
node does. The network between nodes has per-link delay distributions, loss, duplication,
reordering (random delays; ``fifo=True`` links keep their order) and partitions that heal.

Every message goes through the wire codec (``blooml.net.codec``) unless ``codec=False``, so a
program that would fail on sockets (an unregistered type in a channel column) fails here too.
Everything random is drawn from one ``random.Random(seed)``, and events at one instant are
processed in the order they were scheduled: a run is a function of the seed.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from blooml.errors import BloomlError, CodecError, SimulationError
from blooml.net._envelope import decode_envelope, encode_envelope, encode_for_channel

__all__ = ["Link", "Message", "Simulation"]

log = logging.getLogger("blooml.net.sim")

#: A delay: a number of seconds, a ``(low, high)`` uniform range, or ``f(rng) -> seconds``.
DelaySpec = float | tuple[float, float] | Callable[[random.Random], float]

_DELIVER, _TICK, _CALL = 0, 1, 2
_REAL = (int, float)


def _check_prob(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, _REAL) or not 0 <= value <= 1:
        raise SimulationError("must be a probability in [0, 1]", value, where)
    return float(value)


def _delay_fn(spec: Any, where: str) -> Callable[[random.Random], float]:
    """A sampler for a delay spec (checked here, not at the first message)."""
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = spec
        ok = all(isinstance(x, _REAL) and not isinstance(x, bool) for x in spec)
        if not ok or not 0 <= lo <= hi or not math.isfinite(hi):
            raise SimulationError(
                "a (low, high) delay range needs 0 <= low <= high < inf", spec, where
            )
        lo_f, hi_f = float(lo), float(hi)
        return lambda rng: rng.uniform(lo_f, hi_f)
    if isinstance(spec, _REAL) and not isinstance(spec, bool):
        if not 0 <= spec < math.inf:
            raise SimulationError("a delay must be a finite number >= 0", spec, where)
        d = float(spec)
        return lambda rng: d
    raise SimulationError(
        "a delay is seconds (a number), a (low, high) range or a function rng -> seconds",
        spec,
        where,
    )


@dataclass(frozen=True)
class Link:
    """How the network treats messages from one node to another.

    Attributes:
        delay: seconds, a ``(low, high)`` uniform range, or ``f(rng) -> seconds`` (for
            instance ``lambda rng: rng.expovariate(100)``).
        loss: probability that a message is lost.
        dup: probability that a message arrives twice (each copy with its own delay).
        fifo: deliver in sending order (as over TCP); otherwise random delays reorder.
    """

    delay: Any = (0.001, 0.01)
    loss: float = 0.0
    dup: float = 0.0
    fifo: bool = False


@dataclass
class Message:
    """One message on the simulated network: all the tuples one tick sends to one address
    (one datagram on sockets).

    Attributes:
        id: its number, in sending order from 0.
        src, dst: the sender's and the receiver's addresses.
        sent_at: the virtual time it was sent.
        channels: ``(channel, number of tuples)`` pairs.
        size: its encoded size in bytes (0 when ``codec=False``).
        delays: the delay of each copy delivered (empty: lost); set when it is sent.
    """

    id: int
    src: str
    dst: Any
    sent_at: float
    channels: tuple[tuple[str, int], ...]
    size: int
    payload: Any = field(repr=False, default=None)
    delays: tuple[float, ...] = ()
    fate: str = "sent"


class Simulation:
    """Programs on a simulated network, on a virtual clock (see the module docstring).

    Args:
        seed: seeds every random choice (delays, loss, duplicates): a run is a function of it.
        delay, loss, dup, fifo: the default :class:`Link` between two nodes; ``link(a, b,
            ...)`` sets one link.
        codec: encode every message with the wire codec and decode it at the receiver (a
            value that cannot travel fails its sending rule, as on sockets).
        tick_interval: the virtual time a tick takes: a node ticks at most once per interval.
        errors: ``"raise"`` (default): a failing tick's exception propagates out of
            ``run_until`` (with a note saying where and when); ``"log"``: the tick is rolled
            back, logged and counted in ``stats()["errors"]``, the input the engine blames set
            aside (``pending_input`` of the exception: the row being applied, or the rows a
            rule's functions raised on, else the input that rule reads) and the rest retried
            at the next tick; the node keeps running. (A socket node narrows it further, to
            the one datagram or call, with trial ticks: docs/net.md.)
        schedule: ``f(message) -> delays``: decides each message's fate instead of the link
            (``[]``: lost; two delays: duplicated); partitions still apply. Used by
            ``blooml.testing.check_confluence``.
        transport: ``"udp"`` (default): as on a UDP node, a tuple that would not fit one
            datagram fails its sending rule (``CodecError`` ``too_large``); ``"tcp"``: no
            such limit.

    Example::

        sim = Simulation(seed=1, delay=(0.01, 0.05), loss=0.1)
        a = Replica(addr="a", network=sim)
        b = Replica(addr="b", network=sim)
        sim.partition(["a"], ["b"], heal_after=5.0)
        sim.run_until(lambda s: a.store.value == b.store.value, limit=60)
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        delay: Any = (0.001, 0.01),
        loss: float = 0.0,
        dup: float = 0.0,
        fifo: bool = False,
        codec: bool = True,
        tick_interval: float = 0.001,
        errors: str = "raise",
        schedule: Callable[[Message], Sequence[float]] | None = None,
        transport: str = "udp",
    ) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise SimulationError("the seed must be an int", seed, "Simulation(seed=...)")
        if transport not in ("udp", "tcp"):
            raise SimulationError("must be 'udp' or 'tcp'", transport, "Simulation(transport=...)")
        self.transport = transport
        if errors not in ("raise", "log"):
            raise SimulationError("must be 'raise' or 'log'", errors, "Simulation(errors=...)")
        if (
            isinstance(tick_interval, bool)
            or not isinstance(tick_interval, _REAL)
            or not 0 < tick_interval < math.inf
        ):
            raise SimulationError(
                "must be a positive number of seconds", tick_interval, "tick_interval"
            )
        self.seed = seed
        self.rng = random.Random(seed)
        self.codec = bool(codec)
        self.tick_interval = float(tick_interval)
        self.errors = errors
        self.schedule = schedule
        self.default_link = self._make_link(delay, loss, dup, fifo, "Simulation()")
        self._samplers: dict[Any, Callable[[random.Random], float]] = {
            None: _delay_fn(delay, "Simulation(delay=...)")
        }
        self.links: dict[tuple[str, str], Link] = {}
        #: The virtual time, in seconds (starts at 0).
        self.now = 0.0
        #: The programs on this network, by address, in the order they joined.
        self.nodes: dict[str, Any] = {}
        #: Addresses of crashed nodes (``crash``) not yet restarted.
        self.down: set[str] = set()
        #: Every message sent, in sending order (with its fate), when ``record`` is on.
        self.messages: list[Message] = []
        self.record = True
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._in_flight = 0
        self._calls = 0
        self._tick_at: dict[str, float | None] = {}
        self._last_tick: dict[str, float] = {}
        self._fifo_last: dict[tuple[str, Any], float] = {}
        self._groups: list[set[str]] = []
        self._logged: set[str] = set()
        self.events = 0
        self._stats: dict[str, Any] = {
            "messages": 0,
            "tuples": 0,
            "bytes": 0,
            "delivered": 0,
            "lost": 0,
            "duplicated": 0,
            "partitioned": 0,
            "ticks": 0,
            "errors": 0,
            "dropped": {},
        }

    # -- building the network -----------------------------------------------------------------

    def _make_link(self, delay: Any, loss: Any, dup: Any, fifo: Any, where: str) -> Link:
        _delay_fn(delay, f"{where}: delay")
        return Link(
            delay,
            _check_prob(loss, f"{where}: loss"),
            _check_prob(dup, f"{where}: dup"),
            bool(fifo),
        )

    def register(self, program: Any) -> None:
        """Add ``program`` (done by ``Program(network=sim)``): it runs on the virtual clock
        from now on."""
        rt = program._rt
        addr = str(rt.addr)
        if addr in self.nodes:
            raise SimulationError("this address is already taken", addr, "Simulation")
        self.down.discard(addr)  # a restart after crash()
        rt.set_clock(self.clock)
        rt.network = self
        self.nodes[addr] = program
        self._tick_at[addr] = None
        self._last_tick[addr] = -math.inf
        due = rt.next_due()
        if due is not None:
            self._wake(addr, due)  # its first periodic; input inserted later is polled

    def clock(self) -> float:
        """The virtual time (every program on this simulation reads it as its clock)."""
        return self.now

    def link(
        self,
        src: str,
        dst: str,
        *,
        delay: Any = None,
        loss: float | None = None,
        dup: float | None = None,
        fifo: bool | None = None,
        both: bool = True,
    ) -> Link:
        """Set the link from ``src`` to ``dst`` (and back, with ``both=True``); unset
        parameters keep the default link's. Returns the new link."""
        base = self.default_link
        new = self._make_link(
            base.delay if delay is None else delay,
            base.loss if loss is None else loss,
            base.dup if dup is None else dup,
            base.fifo if fifo is None else fifo,
            f"link({src!r}, {dst!r})",
        )
        for pair in [(src, dst), (dst, src)] if both else [(src, dst)]:
            self.links[pair] = new
            self._samplers[pair] = _delay_fn(new.delay, "link")
        return new

    def partition(self, *groups: Iterable[str], heal_after: float | None = None) -> None:
        """Cut the network into ``groups`` of addresses: a message between two groups is lost
        (counted in ``stats()["partitioned"]``). Nodes in no group are not affected. The
        partition lasts until ``heal()``, or ``heal_after`` virtual seconds."""
        sets = [set(map(str, g)) for g in groups]
        if len(sets) < 2:
            raise SimulationError("needs at least two groups of addresses", groups, "partition")
        seen: set[str] = set()
        for g in sets:
            unknown = g - set(self.nodes)
            if unknown:
                raise SimulationError(
                    f"no node at {sorted(unknown)} (nodes: {sorted(self.nodes)})",
                    sorted(unknown),
                    "partition",
                )
            if g & seen:
                raise SimulationError("an address is in two groups", sorted(g & seen), "partition")
            seen |= g
        self._groups = sets
        if heal_after is not None:
            if isinstance(heal_after, bool) or not isinstance(heal_after, _REAL):
                raise SimulationError("must be a number of seconds", heal_after, "heal_after")
            self.at(self.now + float(heal_after), lambda sim: sim.heal())

    def heal(self) -> None:
        """End the partition: messages sent from now on cross again."""
        self._groups = []

    def partitioned(self, src: str, dst: Any) -> bool:
        """Whether a message from ``src`` to ``dst`` is cut off by the current partition."""
        if not self._groups:
            return False
        gs = next((i for i, g in enumerate(self._groups) if src in g), None)
        gd = next((i for i, g in enumerate(self._groups) if dst in g), None)
        return gs is not None and gd is not None and gs != gd

    def crash(self, addr: str) -> Any:
        """Crash the node at ``addr`` now: it stops ticking, loses its memory (its queued input
        and everything not durable), and messages reaching it are lost (counted as
        ``dropped["down"]``) until a program joins at that address again, e.g.
        ``P(addr=addr, network=sim, data_dir=...)``, which resumes from its durable state. A
        durable store is closed as by a killed process (every committed tick is on disk).
        Returns the crashed program."""
        p = self.nodes.pop(addr, None)
        if p is None:
            raise SimulationError(f"no node there (nodes: {sorted(self.nodes)})", addr, "crash")
        self._tick_at[addr] = None
        self.down.add(addr)
        store = getattr(p._rt, "durable", None)
        if store is not None:
            store.close()
        p._rt.network = None
        return p

    def at(self, time: float, fn: Callable[[Simulation], Any]) -> None:
        """Call ``fn(sim)`` at virtual time ``time`` (for instance to insert input or heal a
        partition at a given moment); what it inserts is applied by the next ticks."""
        if isinstance(time, bool) or not isinstance(time, _REAL) or time < self.now:
            raise SimulationError(f"must be a time >= now ({self.now})", time, "at")
        self._calls += 1
        self._push(float(time), _CALL, fn)

    # -- the transport seam ---------------------------------------------------------------------

    def check(self, rt: Any, addr: Any, chan: str, row: Any, where: str = "") -> Any:
        """At the sending rule: encode the row (a value the codec refuses fails the rule)."""
        if addr == rt.addr or not self.codec:
            return None
        return encode_for_channel(
            row, chan, rt.rels[chan].columns, rt.addr, where, udp=self.transport == "udp"
        )

    def deliver(self, rt: Any, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
        """After a tick commits: put the tuples for ``addr`` on the network, as one message."""
        src = str(rt.addr)
        if addr == rt.addr:  # loopback, as on a socket node: in-process, next tick
            groups: dict[str, list[Any]] = {}
            for chan, row, _ in batch:
                groups.setdefault(chan, []).append(row)
            rt.receive_batch(addr, list(groups.items()))
            self._wake(src, self.now)
            return
        counts: dict[str, int] = {}
        for chan, _, _ in batch:
            counts[chan] = counts.get(chan, 0) + 1
        if self.codec:
            wires: dict[str, list[bytes]] = {}
            for chan, _, wire in batch:
                wires.setdefault(chan, []).append(wire)
            payload: Any = encode_envelope(src, wires.items(), None, ts=0.0, dest=str(addr))
            size = len(payload)
        else:
            rows: dict[str, list[Any]] = {}
            for chan, row, _ in batch:
                rows.setdefault(chan, []).append(row)
            payload, size = list(rows.items()), 0
        msg = Message(len(self.messages), src, addr, self.now, tuple(counts.items()), size, payload)
        st = self._stats
        st["messages"] += 1
        st["tuples"] += len(batch)
        st["bytes"] += size
        if self.record:
            self.messages.append(msg)
        if self.partitioned(src, addr):
            st["partitioned"] += 1
            msg.fate = "partitioned"
            return
        pair = (src, addr)
        if self.schedule is not None:
            delays = [float(d) for d in self.schedule(msg)]
            if any(not 0 <= d < math.inf for d in delays):
                raise SimulationError("a schedule's delays must be finite and >= 0", delays)
        else:
            link = self.links.get(pair, self.default_link)
            sample = self._samplers.get(pair) or self._samplers[None]
            if link.loss and self.rng.random() < link.loss:
                delays = []
            else:
                copies = 2 if link.dup and self.rng.random() < link.dup else 1
                delays = [max(0.0, float(sample(self.rng))) for _ in range(copies)]
            if link.fifo and delays:
                floor = self._fifo_last.get(pair, -math.inf) - self.now
                delays = [max(d, floor) for d in delays]
                self._fifo_last[pair] = self.now + max(delays)
        msg.delays = tuple(delays)
        if not delays:
            st["lost"] += 1
            msg.fate = "lost"
            return
        st["duplicated"] += len(delays) - 1
        msg.fate = "in flight"
        for d in delays:
            self._in_flight += 1
            self._push(self.now + d, _DELIVER, msg)

    # -- running ------------------------------------------------------------------------------

    def _push(self, time: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, payload))

    def _wake(self, addr: str, at: float) -> None:
        at = max(at, self._last_tick[addr] + self.tick_interval)
        cur = self._tick_at[addr]
        if cur is None or at < cur:
            self._tick_at[addr] = at
            self._push(at, _TICK, addr)

    def _poll(self) -> None:
        """Schedule a tick for every node with input waiting (inserted from outside)."""
        for addr, p in self.nodes.items():
            if p._rt.has_pending():
                self._wake(addr, self.now)

    def quiescent(self) -> bool:
        """No message in flight, no timed call waiting and no node with input waiting
        (``periodic`` timers may still fire)."""
        if self._in_flight or self._calls:
            return False
        return not any(p._rt.has_pending() for p in self.nodes.values())

    def step(self) -> bool:
        """Process the next event; return ``False`` if there is none."""
        self._poll()
        if not self._heap:
            return False
        time, _, kind, payload = heapq.heappop(self._heap)
        self.now = max(self.now, time)
        self.events += 1
        if kind == _DELIVER:
            self._in_flight -= 1
            self._arrive(payload)
        elif kind == _TICK:
            if payload in self.nodes and self._tick_at.get(payload) == time:
                self._tick_at[payload] = None
                self._tick(payload)
        else:
            self._calls -= 1
            payload(self)
        return True

    def next_time(self) -> float | None:
        """The time of the next event (``None``: nothing will happen)."""
        self._poll()
        return self._heap[0][0] if self._heap else None

    def run_until(
        self,
        until: float | Callable[[Simulation], Any],
        *,
        limit: float | None = None,
        max_events: int = 1_000_000,
    ) -> bool:
        """Run until virtual time ``until`` or until ``until(sim)`` is true.

        With a predicate, it is checked before the first event and after each one; the run
        stops (returning ``False``) when nothing is left to happen or the virtual time would
        pass ``limit`` (default: an hour of virtual time from now). With a time, every event
        up to it is processed and the clock is set to it; returns ``True``.
        Raises :class:`~blooml.errors.SimulationError` after ``max_events`` events.
        """
        budget = self.events + max_events
        if callable(until):
            pred = until
            horizon = self.now + 3600.0 if limit is None else float(limit)
            while True:
                if pred(self):
                    return True
                t = self.next_time()
                if t is None or t > horizon:
                    if t is not None:
                        self.now = max(self.now, horizon)
                    return False
                self._guard(budget, max_events)
                self.step()
        if isinstance(until, bool) or not isinstance(until, _REAL):
            raise SimulationError(
                "run_until takes a virtual time or a predicate f(sim) -> bool", until, "run_until"
            )
        while True:
            t = self.next_time()
            if t is None or t > until:
                break
            self._guard(budget, max_events)
            self.step()
        self.now = max(self.now, float(until))
        return True

    def run(self, seconds: float, *, max_events: int = 1_000_000) -> None:
        """Run ``seconds`` of virtual time."""
        self.run_until(self.now + seconds, max_events=max_events)

    def settle(self, *, limit: float | None = None, max_events: int = 1_000_000) -> bool:
        """Run until :meth:`quiescent` (returns ``False`` if ``limit`` came first)."""
        return self.run_until(lambda s: s.quiescent(), limit=limit, max_events=max_events)

    def _guard(self, budget: int, max_events: int) -> None:
        if self.events >= budget:
            raise SimulationError(
                f"still busy after {max_events} events at virtual time {self.now:.6g} (a rule "
                "that derives input for every next tick, or messages that never stop?); pass "
                "a larger max_events or run to a time",
                max_events,
                "run_until",
            )

    def _arrive(self, msg: Message) -> None:
        st = self._stats
        target = self.nodes.get(msg.dst) if isinstance(msg.dst, str) else None
        if target is None:
            if msg.dst in self.down:
                self._drop("down", f"from {msg.src!r}: {msg.dst!r} has crashed")
            else:
                self._drop("no_route", f"from {msg.src!r}: no node at {msg.dst!r}")
            return
        rt = target._rt
        try:
            if self.codec:
                env = decode_envelope(msg.payload, dest=str(msg.dst))
                sender, batches = env.sender, env.batches
            else:
                sender, batches = msg.src, msg.payload
            n = rt.receive_batch(sender, batches)
        except CodecError as exc:
            self._drop(exc.reason, f"at {msg.dst!r} from {msg.src!r}: {exc}")
            return
        except BloomlError as exc:
            self._drop("rejected", f"at {msg.dst!r} from {msg.src!r}: {exc}")
            return
        st["delivered"] += 1
        msg.fate = "delivered"
        if n:
            self._wake(msg.dst, self.now)

    def _drop(self, reason: str, detail: str) -> None:
        d = self._stats["dropped"]
        d[reason] = d.get(reason, 0) + 1
        if reason not in self._logged:
            self._logged.add(reason)
            log.warning("simulation: dropped a message (%s): %s", reason, detail)

    def _tick(self, addr: str) -> None:
        p = self.nodes[addr]
        rt = p._rt
        self._last_tick[addr] = self.now
        try:
            rt.tick()
        except Exception as exc:
            self._stats["errors"] += 1
            if self.errors == "raise":
                exc.add_note(f"blooml.net.Simulation: in the tick of {addr!r} at t={self.now:.6g}")
                raise
            log.error("%s: tick failed at t=%.6g and was rolled back: %s", addr, self.now, exc)
            # set aside what the engine blames (the row being applied, the rows a rule's
            # function raised on, else the input that rule reads); the rest is retried
            blamed = getattr(exc, "pending_input", None)
            discard = getattr(p, "discard_pending", None)
            if callable(discard):
                discard(blamed if blamed else None)
            else:
                rt.pending = type(rt.pending)()
        else:
            self._stats["ticks"] += 1
        if rt.has_pending():
            self._wake(addr, self.now + self.tick_interval)
        due = rt.next_due()
        if due is not None:
            self._wake(addr, due)

    def stats(self) -> dict[str, Any]:
        """Counters: ``messages``, ``tuples`` and ``bytes`` sent, ``delivered``, ``lost``,
        ``duplicated``, ``partitioned``, ``ticks``, ``errors``, ``dropped`` (by reason),
        ``in_flight`` and ``events``."""
        out = dict(self._stats)
        out["dropped"] = dict(out["dropped"])
        out["in_flight"] = self._in_flight
        out["events"] = self.events
        return out

    def __repr__(self) -> str:
        return f"<Simulation seed={self.seed} t={self.now:.6g} nodes={sorted(self.nodes)}>"
