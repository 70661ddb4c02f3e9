"""Network nodes: a program bound to a ``host:port`` address, run on its own asyncio loop.

``P(addr="127.0.0.1:0")`` binds a socket at once (port 0 picks a free port; ``p.addr`` then
says which) and makes a :class:`Node` the program's transport. ``p.start()`` runs the node's
loop in a background thread: it ticks whenever datagrams, timers (``periodic``) or calls from
``sync_do``/``async_do`` arrive. Each node has its own thread, so many nodes (of one class or
of many) run in one process at once, each ticking on its own schedule.

A node is assembled from one module per concern: ``_transport`` (the socket, sending through
the transport seam ``check``/``deliver``, receiving, name resolution), ``_peers`` (outgoing
TCP connections), ``_schedule`` (the thread, the loop, what one tick applies, stopping) and
``_policy`` (input units, failed ticks, isolation and quarantine). This module holds the
constructor and the user's handles. See ``docs/net.md``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import random
import socket
import sys
import threading
import types
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blooml.errors import ProgramError, RowsRefusedError, RuleQuarantinedError
from blooml.net import _peers, _transport
from blooml.net._coltypes import ColumnTypes
from blooml.net._envelope import MAX_DATAGRAM, MAX_MESSAGE, ReplayGuard
from blooml.net._fragment import Reassembler
from blooml.net._input import Unit
from blooml.net._nodebase import NodeBase
from blooml.net._peers import Peers, _Peer
from blooml.net._policy import Isolation
from blooml.net._schedule import Scheduler
from blooml.net._transport import Transport, parse_addr

__all__ = ["MAX_MESSAGE", "Node", "parse_addr"]

#: Deprecated alias of :data:`MAX_MESSAGE` (the TCP frame limit was 64 MiB).
MAX_FRAME = MAX_MESSAGE

#: Settings of this module that the node's parts read where they are used: reading or
#: setting ``blooml.net.node.RESOLVE_TTL`` reads or sets the value the node uses (a copy
#: re-exported here would be dead: setting it would change nothing).
#: ``RESOLVE_TTL``: seconds a resolved host name is used before it is resolved again.
#: ``CONNECT_TIMEOUT``: seconds a TCP connect to a peer may take.
SETTINGS: dict[str, types.ModuleType] = {
    "RESOLVE_TTL": _transport,
    "CONNECT_TIMEOUT": _peers,
}

if TYPE_CHECKING:  # provided by _NodeModule.__getattr__ (live, see SETTINGS)
    RESOLVE_TTL: float
    CONNECT_TIMEOUT: float


def _setting(name: str, value: Any) -> float:
    """``value`` checked as the new value of setting ``name`` (a number of seconds > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ProgramError(f"blooml.net.node.{name} = {value!r}: expected a number of seconds > 0")
    return float(value)


def get_setting(name: str) -> Any:
    """The live value of setting ``name`` (see ``SETTINGS``); ``AttributeError`` if there is
    no such setting."""
    owner = SETTINGS.get(name)
    if owner is None:
        raise AttributeError(f"module 'blooml.net.node' has no attribute {name!r}")
    return getattr(owner, name)


def set_setting(name: str, value: Any) -> None:
    """Set setting ``name`` where the node reads it (``ProgramError`` on a value that is not
    a number of seconds > 0, nothing changed)."""
    setattr(SETTINGS[name], name, _setting(name, value))


class _NodeModule(types.ModuleType):
    """This module: its settings (``SETTINGS``) are read from and written to the modules
    that use them."""

    def __getattr__(self, name: str) -> Any:
        return get_setting(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SETTINGS:
            set_setting(name, value)
        else:
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _NodeModule


class Node(Transport, Peers, Scheduler, Isolation, NodeBase):
    """Runs one program as a network node (made by ``Program(addr="host:port")``; use the
    program's methods: ``p.start()``, ``p.stop()``, ``p.run()``, ``p.sync_do(fn)``, ...).

    Args:
        program: the program instance.
        transport: ``"udp"`` (default), ``"tcp"``, or ``None`` for no socket (loopback only).
        cluster_key: sign and check every datagram with HMAC-SHA256 under this key.
        inbox_limit: datagrams waiting to be applied; more are dropped (``inbox_full``).
        window: seconds a signed datagram's timestamp may differ from this node's clock.
        max_datagram: the largest UDP datagram sent or accepted (a larger one is dropped,
            ``too_large``); a larger message travels as fragments of this size.
        max_message: the largest message (envelope) sent or accepted: a TCP frame, or an
            envelope reassembled from UDP fragments. A tuple that cannot fit one fails its
            sending rule (``CodecError``, ``too_large``); a peer announcing a larger frame is
            disconnected before the frame is read.
        send_buffer: bytes queued for one TCP peer at most; frames beyond are dropped and
            counted (``send_dropped``). Default ``2 * max_message``.
        inbox_bytes: bytes of received messages waiting to be applied at most; more are
            dropped (``inbox_full``). Default ``4 * max_message``.
        quarantine_after: a rule that fails this many ticks in a row (with no input to blame)
            is quarantined: taken out of evaluation (see ``quarantined``).
        isolation_trials: trial ticks at most to find the input a failed tick fails on.
    """

    # Every attribute ``__init__`` sets, as a slot: a node has some seventy, and CPython
    # (3.11) keeps an instance with more than thirty in a dict of its own, through which no
    # method lookup (``self._step()``) is specialized and every attribute is a hash lookup;
    # a slot is read at a fixed offset. Other attributes stay settable (the mixins give the
    # instance a ``__dict__``: the class settings below, set on a node, live there).
    __slots__ = (
        "_acks_due",
        "_arities",
        "_calls",
        "_closing",
        "_conns",
        "_down",
        "_epoch",
        "_error_cbs",
        "_fail_backoff_until",
        "_heads",
        "_heads_of",
        "_ident",
        "_in_slow",
        "_inbox",
        "_inbox_size",
        "_last_error",
        "_last_input",
        "_latency",
        "_liveness",
        "_logged",
        "_logged_refusals",
        "_logged_resolve",
        "_loop",
        "_parked",
        "_peers",
        "_pre_start",
        "_pre_start_size",
        "_reassembly",
        "_received_from",
        "_resolved",
        "_resolving",
        "_rng",
        "_seq",
        "_server",
        "_slow",
        "_slow_credit",
        "_stats",
        "_step_soon",
        "_stop_deadline",
        "_streak",
        "_strikes",
        "_suspect",
        "_thread",
        "_throttled_now",
        "_tick_cbs",
        "_types",
        "_udp",
        "_udp_inode",
        "_units",
        "_wake",
        "_watches",
        "_wildcard_port",
        "aliases",
        "discarded",
        "drop_rate",
        "guard",
        "inbox_bytes",
        "inbox_limit",
        "isolation_trials",
        "key",
        "max_datagram",
        "max_delay",
        "max_message",
        "program",
        "quarantine_after",
        "quarantined",
        "refusals",
        "rt",
        "running",
        "send_buffer",
        "sock",
        "transport",
        "window",
    )

    #: Datagrams applied per tick at most (the rest wait for the following ticks).
    batch_limit = 2000
    #: Bytes of messages applied per tick at most (at least one message): a backlog of large
    #: messages (whole states queued behind a busy tick) is applied over several short ticks,
    #: each of which commits and answers, not in one tick that decodes them all.
    batch_bytes = 4 * 1024 * 1024
    #: Rows (or pieces of datagrams) of a sender that may be set aside, more than its
    #: datagrams that applied cleanly, before the sender is throttled: its datagrams then
    #: wait in a slow lane of their own.
    throttle_after = 3
    #: The share of tick time the slow lane may take while other input waits.
    throttle_share = 0.1
    #: Datagrams waiting in the slow lane at most (more are dropped, ``throttled``).
    throttle_queue = 1000
    #: Seconds without other input after which the node counts as idle, and the slow lane
    #: runs beyond its share. Other input that arrives in bursts (a stream of TCP reads)
    #: leaves the inbox empty between them: judged by an empty inbox alone, the node looked
    #: idle after every step, and the slow lane's datagrams (each a failed tick and a trial
    #: per poison row) took most of the time of a node that other senders kept busy. With
    #: 0.001 a busy TCP stream left gaps that long (``bench_net_poison.py``: 0.51-0.69x of
    #: clean throughput with one poison sender, against 0.81-0.85x with 0.005).
    throttle_idle = 0.005
    #: Seconds a UDP peer may leave what it was sent unacknowledged before it is shown as
    #: not alive (``peers()``, ``stats()["peers_down"]``, ``["undelivered"]``).
    peer_timeout = 5.0

    def __init__(
        self,
        program: Any,
        *,
        transport: str | None = None,
        cluster_key: bytes | str | None = None,
        inbox_limit: int = 10_000,
        window: float = 30.0,
        max_datagram: int = MAX_DATAGRAM,
        max_message: int = MAX_MESSAGE,
        send_buffer: int | None = None,
        inbox_bytes: int | None = None,
        quarantine_after: int = 5,
        isolation_trials: int = 24,
    ) -> None:
        for name, v, low in (
            ("max_datagram", max_datagram, 512),
            ("max_message", max_message, 1),
            ("send_buffer", send_buffer, 1),
            ("inbox_bytes", inbox_bytes, 1),
        ):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
                raise ProgramError(f"Node({name}={v!r}): expected an int >= {low}")
        if max_datagram > 65_507:
            raise ProgramError(
                f"Node(max_datagram={max_datagram!r}): a UDP datagram holds at most 65,507 bytes"
            )
        for name, n in (
            ("quarantine_after", quarantine_after),
            ("isolation_trials", isolation_trials),
        ):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ProgramError(f"Node({name}=...) must be an int >= 1, got {n!r}")
        #: Ticks in a row a rule may fail (on no input) before it is quarantined.
        self.quarantine_after = quarantine_after
        #: Trial ticks at most to find the input a failed tick fails on (see docs/net.md).
        self.isolation_trials = isolation_trials
        #: Quarantined rules: rule index -> the error that reported it.
        self.quarantined: dict[int, RuleQuarantinedError] = {}
        self._units: list[Unit] = []
        self._types: ColumnTypes | None = None
        self._arities: dict[str, int] | None = None  # per channel, at the first datagram
        self._streak: dict[int | None, int] = {}
        self.program = program
        rt = self.rt = program._rt
        self.transport = transport
        self.key = cluster_key.encode() if isinstance(cluster_key, str) else cluster_key
        self.guard = ReplayGuard(window) if self.key else None
        self.inbox_limit = inbox_limit
        self.max_datagram = max_datagram
        #: See the class docstring; settable (``blooml.net.node(p).max_message = ...``) before
        #: ``start()``, as the other limits are.
        self.max_message = max_message
        self.send_buffer = send_buffer
        self.inbox_bytes = inbox_bytes
        self.window = window
        self._inbox_size = 0
        self._reassembly: Reassembler | None = None
        self.running = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._ident: int | None = None  # the node thread's ident while it runs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._parked = False  # the node's task waits for work (see Scheduler._arrived)
        self._step_soon = False
        self._inbox: deque[bytes] = deque()
        self._calls: deque[tuple[Callable[[Any], Any], concurrent.futures.Future[Any], str]]
        self._calls = deque()
        self._last_error: BaseException | None = None
        self._tick_cbs: list[Callable[[Any], Any]] = []
        self._error_cbs: list[Callable[[BaseException], Any]] = []
        self._watches: dict[str, list[Callable[[list[Any]], Any]]] = {}
        self._logged: set[str] = set()
        self._latency: deque[float] = deque(maxlen=10_000)
        self._pre_start: list[tuple[str, bytes]] = []
        self._pre_start_size = 0
        self._peers: dict[str, _Peer] = {}
        # host:port -> (socket address, when to resolve again); names resolve off the thread
        self._resolved: dict[str, tuple[tuple[str, int], float]] = {}
        self._resolving: dict[str, list[bytes]] = {}
        self._logged_resolve: set[str] = set()
        self._udp_inode: int | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Transport] = set()
        self._udp: asyncio.DatagramTransport | None = None
        self._fail_backoff_until = 0.0
        self._stop_deadline = 0.0
        #: Fault injection for tests and demos: the probability that an outgoing datagram
        #: (or TCP frame) is silently lost (``blooml run --drop-rate``). Counted in
        #: ``stats()["injected_drops"]``.
        self.drop_rate = 0.0
        #: Fault injection: each outgoing UDP datagram waits a random 0..max_delay seconds
        #: (so datagrams are reordered) (``blooml run --max-delay``).
        self.max_delay = 0.0
        self._rng = random.Random()
        self._stats: dict[str, Any] = {
            "ticks": 0,
            "errors": 0,
            "received": 0,
            "received_tuples": 0,
            "sent": 0,
            "sent_tuples": 0,
            "sent_bytes": 0,
            "received_bytes": 0,
            "fragments_sent": 0,
            "fragments_received": 0,
            "resolve_failures": 0,
            "dropped": {},
            "discarded_batches": 0,
            "discarded_tuples": 0,
            "send_errors": 0,
            "send_dropped": 0,
            "connect_failures": 0,
            "callback_errors": 0,
            "injected_drops": 0,
            "trial_ticks": 0,
            "send_failures": {},
            "refused": {},
            "refused_rows": 0,
            "refusals_sent": 0,
            "throttled_senders": 0,
            "acks_sent": 0,
        }
        #: Refusals of rows this node sent, from the peers that set them aside (the most
        #: recent 100, as ``RowsRefusedError``).
        self.refusals: deque[RowsRefusedError] = deque(maxlen=100)
        self._logged_refusals: set[str] = set()
        self._strikes: dict[str, int] = {}
        self._throttled_now: set[str] = set()
        self._slow: deque[tuple[str, Any]] = deque()
        self._in_slow = False
        # (the rule a slow-lane tick last failed in, and the exception's type: _screen)
        self._suspect = None
        self._slow_credit = 0.0
        # perf_counter() of the last other input than the slow lane's: a datagram of an
        # unthrottled sender while some sender is struck, or a call (``_slow_wait``)
        self._last_input = 0.0
        self._epoch = random.getrandbits(31)
        self._acks_due: dict[str, int] = {}
        self._received_from: dict[str, int] = {}
        self._liveness: dict[str, list[Any]] = {}
        self._down: set[str] = set()
        #: The batches set aside after failed ticks (the most recent 100).
        self.discarded: deque[dict[str, list[Any]]] = deque(maxlen=100)
        self.sock: socket.socket | None = None
        #: Other addresses this node answers to (``"localhost:7000"`` for a node bound at
        #: ``127.0.0.1:7000``, a public name behind NAT): with a cluster key, a datagram
        #: addressed to any other is refused (``misdirected``).
        self.aliases: set[str] = set()
        self._seq = 0
        # envelope heads (sender and destination, packed) per destination, for _heads_of
        self._heads: dict[str, bytes] = {}
        self._heads_of = ""
        self._wildcard_port: int | None = None
        if transport is not None:
            if transport not in ("udp", "tcp"):
                raise ProgramError(f"transport must be 'udp' or 'tcp', got {transport!r}")
            host, port = parse_addr(rt.addr, "addr")
            self.sock = self._bind(host, port)
            if transport == "udp":
                with contextlib.suppress(OSError):
                    self._udp_inode = os.fstat(self.sock.fileno()).st_ino
            bound_port = self.sock.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            rt.addr = f"{shown}:{bound_port}"
            if host in ("0.0.0.0", "::", ""):  # bound to every interface: any host, this port
                self._wildcard_port = bound_port
        rt.network = self if transport is not None else None
        rt.node = self

    def sync_do(self, fn: Callable[[Any], Any], timeout: float | None = 30.0) -> Any:
        """Run ``fn(program)`` between ticks; return its result after the tick that applies
        what it queued. Raises what ``fn`` raises (nothing it queued is kept), or the
        exception of the tick that could not apply its input (that input is set aside)."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if not self.running or self._loop is None:
            self._run_call(fn, fut, "sync_do")
            if self._units or self.rt.has_pending():
                self._tick()
            while self._slow:  # not running: what waits apart is applied now, in turn
                self._slow_step(idle=True)
            if not fut.done():  # held: the tick fails with no input to blame
                fut.set_exception(self._last_error or ProgramError("the tick did not commit"))
            return fut.result(0)
        if self.on_own_thread():
            return fn(self.program)
        self._calls.append((fn, fut, "sync_do"))
        self._wake_soon()
        return fut.result(timeout)

    def async_do(self, fn: Callable[[Any], Any]) -> concurrent.futures.Future[Any]:
        """Queue ``fn(program)`` to run between ticks (when the node runs); return a future
        of its result, set after the tick that applies what it queued, or failed with the
        exception of ``fn`` or of the tick that could not apply its input."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.append((fn, fut, "async_do"))
        self._wake_soon()
        return fut

    def on_tick(self, fn: Callable[[Any], Any]) -> None:
        """Call ``fn(program)`` after every committed tick."""
        self._tick_cbs.append(fn)

    def on_error(self, fn: Callable[[BaseException], Any]) -> None:
        """Call ``fn(exc)`` when a tick fails or a callback raises."""
        self._error_cbs.append(fn)

    def watch(self, name: str, fn: Callable[[list[Any]], Any]) -> None:
        """Call ``fn(rows)`` with the tuples collection ``name`` gains in each tick."""
        if name not in self.rt.rels and name not in self.rt.lats:
            raise ProgramError(
                f"watch({name!r}): no collection or lattice variable of that name (have: "
                f"{sorted([*self.rt.rels, *self.rt.lats])})"
            )
        self._watches.setdefault(name, []).append(fn)

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters (see ``Program.stats``)."""
        out = dict(self._stats)
        out["dropped"] = dict(out["dropped"])
        out["send_failures"] = dict(out["send_failures"])
        out["refused"] = dict(out["refused"])
        out["throttled"] = len(self._throttled_now)
        out["slow_lane"] = len(self._slow)
        peers = self.peers()
        out["peers_down"] = sorted(a for a, st in peers.items() if not st["alive"])
        out["undelivered"] = sum(st["unacked"] for st in peers.values() if not st["alive"])
        out["quarantined"] = len(self.quarantined)
        kernel = self._kernel_drops()
        if kernel:
            out["dropped"]["kernel"] = kernel
        out["dropped_total"] = sum(out["dropped"].values())
        out["inbox"] = len(self._inbox)
        out["send_queue_bytes"] = self._pre_start_size + sum(
            p.queued for p in list(self._peers.values())
        )
        # every key docs/net.md lists is present from the start (a dashboard reads them
        # before the first fragment or tick): 0 until there is something to count
        if self._reassembly is not None:
            out["reassembling"] = len(self._reassembly)
            out["fragments_lost"] = dict(self._reassembly.lost)
        else:
            out["reassembling"] = 0
            out["fragments_lost"] = {"timeout": 0, "evicted": 0}
        out["addr"] = str(self.rt.addr)
        out["transport"] = self.transport
        lat = sorted(self._latency)
        if lat:
            out["tick_ms_p50"] = lat[len(lat) // 2] * 1000
            out["tick_ms_p99"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        else:
            out["tick_ms_p50"] = out["tick_ms_p99"] = 0.0
        return out

    def _kernel_drops(self) -> int:
        """Datagrams the kernel dropped because this socket's receive buffer was full (the
        ``drops`` column of ``/proc/net/udp``/``udp6`` for the socket's inode; 0 where there
        is no such file)."""
        if self._udp_inode is None:
            return 0
        inode = str(self._udp_inode)
        for name in ("/proc/net/udp", "/proc/net/udp6"):
            try:
                with open(name) as f:
                    next(f, None)
                    for line in f:
                        cols = line.split()
                        if len(cols) >= 13 and cols[9] == inode:
                            return int(cols[12])
            except (OSError, ValueError):
                continue
        return 0

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped" if self._closing else "not started"
        return f"<Node {self.rt.addr} {self.transport or 'loopback'} {state}>"
