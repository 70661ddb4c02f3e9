"""Network nodes: a program bound to a ``host:port`` address, run on its own asyncio loop.

``P(addr="127.0.0.1:0")`` binds a socket at once (port 0 picks a free port; ``p.addr`` then
says which) and makes a :class:`Node` the program's transport. ``p.start()`` runs the node's
loop in a background thread: it ticks whenever datagrams, timers (``periodic``) or calls from
``sync_do``/``async_do`` arrive. Each node has its own thread, so many nodes (of one class or
of many) run in one process at once, each ticking on its own schedule.

The transport seam (also implemented by ``LocalNetwork`` and by simulations): the runtime calls
``check(rt, addr, chan, row, where)`` at the sending rule (inside the tick: an error rolls it
back) and ``deliver(rt, addr, batch)`` once per destination after the tick commits, with every
``(chan, row, token)`` the tick sends there. Incoming tuples enter through
``Runtime.receive_batch``. See ``docs/net.md``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ipaddress
import logging
import os
import random
import signal
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from blooml.engine._state import Pending
from blooml.errors import BloomlError, CodecError, ProgramError, RuleQuarantinedError
from blooml.net._coltypes import ColumnTypes
from blooml.net._fragment import Reassembler, fragment, is_fragment
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
from blooml.net.codec import (
    ENVELOPE_SLACK,
    MAX_DATAGRAM,
    MAX_MESSAGE,
    ReplayGuard,
    decode_envelope,
    encode_envelope,
    encode_for_channel,
)

__all__ = ["MAX_MESSAGE", "Node", "parse_addr"]

log = logging.getLogger("blooml.net")

#: Deprecated alias of :data:`MAX_MESSAGE` (the TCP frame limit was 64 MiB).
MAX_FRAME = MAX_MESSAGE
_FRAME = struct.Struct(">I")
#: Seconds a resolved host name is used before it is resolved again (in the background).
RESOLVE_TTL = 30.0
#: Seconds a TCP connect may take. Generous: the clock runs while the node's own ticks block
#: its loop (seconds, when they decode large states), and with 2 s a busy node never connected.
CONNECT_TIMEOUT = 30.0


def parse_addr(addr: Any, where: str = "") -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``); raise ``ProgramError`` if it is not one."""
    if isinstance(addr, str):
        host, sep, port = addr.rpartition(":")
        if sep and host and port.isdigit() and int(port) < 65536:
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            return host, int(port)
    raise ProgramError(
        f"{where + ': ' if where else ''}the address {addr!r} is not host:port "
        "(a program bound to a socket sends to host:port addresses)"
    )


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, node: Node) -> None:
        self.node = node

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.node._datagram(data, addr)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable
        self.node._count("send_errors")


class _Peer:
    """An outgoing TCP connection to one address: frames queue here; a task connects (again
    after the peer restarts) and writes them."""

    def __init__(self, node: Node, addr: str, limit: int) -> None:
        self.node = node
        self.addr = addr
        self.frames: deque[bytes] = deque()
        self.limit = limit  # bytes queued at most
        self.queued = 0
        self.inflight = 0  # frames written but not drained yet
        self.event = asyncio.Event()
        self.writer: asyncio.StreamWriter | None = None
        self.task = asyncio.get_running_loop().create_task(self.run())

    def push(self, frame: bytes) -> None:
        if self.queued + len(frame) > self.limit:
            self.node._count("send_dropped")  # a dead or slow peer: drop, never grow
            return
        self.frames.append(frame)
        self.queued += len(frame)
        self.event.set()

    def take(self) -> tuple[bytes, int]:
        data, n = b"".join(self.frames), len(self.frames)
        self.frames.clear()
        self.queued = 0
        return data, n

    async def _watch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await reader.read()  # the peer never writes: EOF or an error means it is gone
        if self.writer is writer:
            self.writer = None
            self.event.set()

    async def run(self) -> None:
        node = self.node
        host, port = parse_addr(self.addr)
        backoff = 0.02
        while True:
            if node._closing and not self.frames:
                break
            if self.writer is None:
                if not self.frames:
                    self.event.clear()
                    await self.event.wait()
                    continue
                try:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), CONNECT_TIMEOUT
                    )
                except (OSError, TimeoutError):
                    node._count("connect_failures")
                    if node._closing:
                        node._count("send_dropped", self.take()[1])
                        break
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                backoff = 0.02
                self.writer = writer
                asyncio.get_running_loop().create_task(self._watch(reader, writer))
            if not self.frames:
                self.event.clear()
                await self.event.wait()
                continue
            data, n = self.take()
            w = self.writer
            if w is None:
                continue
            self.inflight = n
            try:
                w.write(data)
                await w.drain()
            except (OSError, RuntimeError):
                node._count("send_dropped", n)
                self.writer = None
            self.inflight = 0
        if self.writer is not None:
            self.writer.close()

    async def close(self, budget: float) -> None:
        """Flush within ``budget`` seconds; then drop what is left (counted) and close."""
        self.event.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), budget)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()
            self.node._count("send_dropped", self.take()[1] + self.inflight)
        if self.writer is not None:
            self.writer.transport.abort()  # a peer that never reads cannot hold us


class Node:
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

    #: Datagrams applied per tick at most (the rest wait for the following ticks).
    batch_limit = 2000
    #: Bytes of messages applied per tick at most (at least one message): a backlog of large
    #: messages (whole states queued behind a busy tick) is applied over several short ticks,
    #: each of which commits and answers, not in one tick that decodes them all.
    batch_bytes = 4 * 1024 * 1024

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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
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
        self._conns: set[asyncio.StreamWriter] = set()
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
        }
        #: The batches set aside after failed ticks (the most recent 100).
        self.discarded: deque[dict[str, list[Any]]] = deque(maxlen=100)
        self.sock: socket.socket | None = None
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
        rt.network = self if transport is not None else None
        rt.node = self

    def _bind(self, host: str, port: int) -> socket.socket:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_DGRAM if self.transport == "udp" else socket.SOCK_STREAM
        )
        family, type_, proto, _, sockaddr = infos[0]
        sock = socket.socket(family, type_, proto)
        try:
            if self.transport == "udp":
                for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                    with contextlib.suppress(OSError):  # capped by the OS
                        sock.setsockopt(socket.SOL_SOCKET, opt, 4 * 1024 * 1024)
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            if self.transport == "tcp":
                sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise ProgramError(f"cannot bind {host}:{port} ({self.transport}): {exc}") from exc
        return sock

    # -- the transport seam (called by the runtime) -----------------------------------------

    def check(self, rt: Any, addr: Any, chan: str, row: Any, where: str = "") -> Any:
        """At the sending rule: the address must be host:port and the row must encode within
        ``max_message`` bytes (over UDP a row larger than a datagram travels as fragments).
        Returns the encoded row."""
        if addr == rt.addr:
            return None  # loopback: delivered in-process
        parse_addr(addr, f"{where}: channel {chan!r}")
        return encode_for_channel(
            row,
            chan,
            rt.rels[chan].columns,
            rt.addr,
            where,
            udp=self.transport == "udp",
            max_message=self.max_message,
        )

    def deliver(self, rt: Any, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
        """After the tick commits: send the messages for ``addr`` (over UDP as few datagrams
        as hold them, a tuple larger than a datagram in fragments; over TCP, one frame per
        ``max_message`` bytes). Never raises: the tick has committed, so a failure here
        (a name that does not resolve, messages to this node that conflict) is counted in
        ``stats()["send_failures"][addr]`` and logged once per destination."""
        try:
            if addr == rt.addr:
                self._queue(
                    "loopback",
                    rt.receive_batch,
                    addr,
                    _group((chan, [row]) for chan, row, _ in batch),
                )
                self._wake_soon()
                return
            self._deliver(rt, addr, batch)
        except Exception as exc:
            self._send_failed(str(addr), exc)

    def _send_failed(self, addr: str, exc: BaseException) -> None:
        fails = self._stats["send_failures"]
        fails[addr] = fails.get(addr, 0) + 1
        if fails[addr] == 1:
            log.error(
                "%s: sending to %s failed after the tick committed (nothing is rolled back; "
                "counted in stats()['send_failures'], logged once per destination): %s: %s",
                self.rt.addr,
                addr,
                type(exc).__name__,
                exc,
            )

    def _deliver(self, rt: Any, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
        budget = (
            self.max_datagram - ENVELOPE_SLACK - len(str(rt.addr))
            if self.transport == "udp"
            else self.max_message - ENVELOPE_SLACK - len(str(rt.addr))
        )
        groups: dict[str, list[bytes]] = {}
        size = 0
        for chan, _row, wire in batch:
            n = len(wire) + len(chan) + 8
            if size + n > budget and groups:
                self._send(addr, groups)
                groups, size = {}, 0
            groups.setdefault(chan, []).append(wire)
            size += n
        if groups:
            self._send(addr, groups)

    def _send(self, addr: str, groups: dict[str, list[bytes]]) -> None:
        now = time.time()
        data = encode_envelope(str(self.rt.addr), groups.items(), self.key, now)
        self._stats["sent"] += 1
        self._stats["sent_tuples"] += sum(map(len, groups.values()))
        if self.transport == "udp":
            if len(data) <= self.max_datagram:
                self._udp_out(addr, data)
                return
            parts = fragment(data, self.max_datagram, self.key, now)
            self._stats["fragments_sent"] += len(parts)
            for part in parts:
                self._udp_out(addr, part)
            return
        if self.drop_rate and self._rng.random() < self.drop_rate:
            self._stats["injected_drops"] += 1  # fault injection: lost on the way
            return
        frame = _FRAME.pack(len(data)) + data
        self._stats["sent_bytes"] += len(frame)
        if not self.running or not self.on_own_thread():
            limit = self._send_limit()
            if self._pre_start_size + len(frame) > limit:  # bounded until the node starts
                self._count("send_dropped")
                return
            self._pre_start.append((addr, frame))
            self._pre_start_size += len(frame)
            return
        self._peer(addr).push(frame)

    def _send_limit(self) -> int:
        return 2 * self.max_message if self.send_buffer is None else self.send_buffer

    def _peer(self, addr: str) -> _Peer:
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peers[addr] = _Peer(self, addr, self._send_limit())
        return peer

    def _udp_out(self, addr: str, data: bytes) -> None:
        """One datagram on its way: fault injection (loss, delay), then the socket."""
        if self.drop_rate and self._rng.random() < self.drop_rate:
            self._stats["injected_drops"] += 1  # fault injection: lost on the way
            return
        delayed = self.max_delay and self._loop is not None
        if delayed and self.on_own_thread():  # fault injection: delayed (and so reordered)
            assert self._loop is not None
            self._loop.call_later(self._rng.uniform(0.0, self.max_delay), self._sendto, addr, data)
            return
        self._sendto(addr, data)

    def _sendto(self, addr: str, data: bytes) -> None:
        try:
            dest = self._resolve(addr, data)
        except Exception as exc:  # e.g. socket.gaierror: the name does not resolve
            self._send_failed(addr, exc)
            return
        if dest is None:
            return  # waits for its name to resolve
        self._stats["sent_bytes"] += len(data)
        try:
            if self._udp is not None and self.on_own_thread():
                self._udp.sendto(data, dest)
            else:
                assert self.sock is not None
                self.sock.sendto(data, dest)
        except OSError:
            self._count("send_errors")

    def _resolve(self, addr: str, data: bytes) -> tuple[str, int] | None:
        """The socket address of ``addr``. A numeric address is used as it is; a host name
        is resolved off the node's thread (``loop.getaddrinfo``) and again every
        ``RESOLVE_TTL`` seconds in the background; until its first answer, datagrams to it
        wait (a bounded number; they are sent once it resolves, dropped if it does not)."""
        now = time.monotonic()
        hit = self._resolved.get(addr)
        if hit is not None:
            if now >= hit[1] and addr not in self._resolving:
                self._resolved[addr] = (hit[0], now + RESOLVE_TTL)
                self._start_resolve(addr, refresh=True)
            return hit[0]
        host, port = parse_addr(addr)
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(host.split("%")[0])
            dest = (host, port)
            self._resolved[addr] = (dest, float("inf"))
            return dest
        if self._loop is None or not self.on_own_thread():
            # not running (or another thread): nothing to block but the caller
            try:
                info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
            except (OSError, UnicodeError) as exc:
                self._count("resolve_failures")
                self._count("send_errors")
                self._send_failed(addr, exc)  # counted per destination, logged once
                return None
            dest = (str(info[0][4][0]), int(info[0][4][1]))
            self._resolved[addr] = (dest, now + RESOLVE_TTL)
            return dest
        waiting = self._resolving.get(addr)
        if waiting is None:
            waiting = self._resolving[addr] = []
            self._start_resolve(addr, refresh=False)
        if len(waiting) < self.inbox_limit:
            waiting.append(data)
        else:
            self._count("send_dropped")
        return None

    def _start_resolve(self, addr: str, *, refresh: bool) -> None:
        assert self._loop is not None
        self._resolving.setdefault(addr, [])
        self._loop.create_task(self._resolve_async(addr, refresh))

    async def _resolve_async(self, addr: str, refresh: bool) -> None:
        host, port = parse_addr(addr)
        assert self._loop is not None
        try:
            info = await self._loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
            dest: tuple[str, int] | None = (str(info[0][4][0]), int(info[0][4][1]))
        except (OSError, UnicodeError) as exc:
            dest = None
            failure: BaseException = exc
            self._count("resolve_failures")
            if addr not in self._logged_resolve:
                self._logged_resolve.add(addr)
                log.warning("%s: cannot resolve %r: %s", self.rt.addr, addr, exc)
        waiting = self._resolving.pop(addr, [])
        if dest is None:
            if not refresh:
                self._count("send_errors", len(waiting))
                # the messages waiting for this name are lost: a failure after commit,
                # counted per destination (stats()["send_failures"])
                self._send_failed(addr, failure)
            return  # a failed refresh keeps the last good address
        self._resolved[addr] = (dest, time.monotonic() + RESOLVE_TTL)
        for data in waiting:
            self._sendto(addr, data)

    # -- receiving ----------------------------------------------------------------------------

    def _datagram(self, data: bytes, source: Any) -> None:
        """A UDP datagram arrived (on the loop): an envelope, or a fragment of one."""
        self._stats["received_bytes"] += len(data)
        if len(data) > self.max_datagram:
            self._drop("too_large", f"a datagram of {len(data)} bytes from {source!r}")
            return
        if not is_fragment(data):
            self._inbox_put(data)
            return
        self._stats["fragments_received"] += 1
        if self._reassembly is None:
            self._reassembly = Reassembler(
                max_message=self.max_message,
                max_bytes=2 * self.max_message,
                key=self.key,
                window=self.window,
            )
        try:
            whole = self._reassembly.add(source, data, time.monotonic(), time.time())
        except CodecError as exc:
            self._drop(exc.reason, f"a fragment from {source!r}: {exc}")
            return
        if whole is not None:
            self._inbox_put(whole)

    def _inbox_put(self, data: bytes) -> None:
        limit = 4 * self.max_message if self.inbox_bytes is None else self.inbox_bytes
        if len(self._inbox) >= self.inbox_limit or self._inbox_size + len(data) > limit:
            self._drop("inbox_full", "the inbox is full (a flood?)")
            return
        self._inbox.append(data)
        self._inbox_size += len(data)
        if self._wake is not None:
            self._wake.set()

    def _drop(self, reason: str, detail: str) -> None:
        d = self._stats["dropped"]
        d[reason] = d.get(reason, 0) + 1
        if reason not in self._logged:
            self._logged.add(reason)
            log.warning(
                "%s: dropped a datagram (%s): %s (logged once per reason; see p.stats())",
                self.rt.addr,
                reason,
                detail,
            )

    def _count(self, name: str, n: int = 1) -> None:
        self._stats[name] += n

    def accept(self, data: bytes) -> bool:
        """Check one datagram and queue its tuples for the next tick; a bad one is dropped
        and counted (``stats()["dropped"]``). Returns whether it was accepted."""
        rt = self.rt
        try:
            env = decode_envelope(data, self.key, self.guard)
        except CodecError as exc:
            self._drop(exc.reason, str(exc))
            return False
        except Exception as exc:  # never let a datagram stop the node
            self._drop("malformed", f"{type(exc).__name__}: {exc}")
            return False
        for chan, rows in env.batches:
            rel = rt.rels.get(chan)
            if rel is None or rel.info.kind != "channel":
                self._drop("unknown_channel", f"from {env.sender!r}: no channel {chan!r}")
                return False
            for r in rows:
                if len(r) != rel.arity:
                    self._drop(
                        "arity",
                        f"from {env.sender!r}: channel {chan!r} has {rel.arity} columns, "
                        f"got {len(r)}",
                    )
                    return False
        types = self._types
        if types is None:
            types = self._types = ColumnTypes(rt)
        for chan, rows in env.batches:
            why = types.check(chan, rows)
            if why is not None:
                self._drop("ill_typed", f"from {env.sender!r}: {why}")
                return False
        try:
            n = self._queue(
                f"datagram from {env.sender}", rt.receive_batch, env.sender, env.batches
            )
        except BloomlError as exc:
            self._drop("rejected", f"from {env.sender!r}: {exc}")
            return False
        except Exception as exc:
            self._drop("rejected", f"from {env.sender!r}: {type(exc).__name__}: {exc}")
            return False
        self._stats["received"] += 1
        self._stats["received_tuples"] += n
        return True

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(writer)
        try:
            while True:
                head = await reader.readexactly(4)
                (n,) = _FRAME.unpack(head)
                if n > self.max_message:  # refused before a byte of it is read
                    self._drop("too_large", f"a TCP frame of {n} bytes (max_message)")
                    break
                data = await reader.readexactly(n)
                self._stats["received_bytes"] += n + 4
                self._inbox_put(data)
        except (asyncio.IncompleteReadError, OSError, asyncio.CancelledError):
            pass  # the peer went away, or this node is stopping
        finally:
            self._conns.discard(writer)
            writer.close()

    # -- the loop -----------------------------------------------------------------------------

    def on_own_thread(self) -> bool:
        """Whether the caller runs on this node's thread."""
        return threading.current_thread() is self._thread

    def _wake_soon(self) -> None:
        if self._wake is not None and self._loop is not None:
            if self.on_own_thread():
                self._wake.set()
            else:
                self._loop.call_soon_threadsafe(self._wake.set)

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
        try:
            loop.run_until_complete(self._main(ready, failure))
        finally:
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
                self._server = await asyncio.start_server(self._on_conn, sock=self.sock)
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
                if delay is None or delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), delay)
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
        for _ in range(len(self._inbox)):  # arrived too late for stop()'s budget
            self._drop("stopping", "the node stopped before applying it")
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
        for w in list(self._conns):
            w.close()  # peers see EOF now, and reconnect to whoever binds this address next
        if self._udp is not None:
            self._udp.close()
        rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def _work_ready(self) -> bool:
        if self._closing:
            return True
        if self.rt.clock() < self._fail_backoff_until:
            return False  # a rule keeps failing: wait (new datagrams wait in the inbox)
        return bool(self._inbox or self._calls or self._units or self.rt.has_pending())

    def _timer_delay(self) -> float | None:
        now = self.rt.clock()
        if now < self._fail_backoff_until:
            return self._fail_backoff_until - now
        due = self.rt.next_due()
        if due is None:
            return None
        return max(due - now, 0.0)

    def _step(self) -> None:
        """Apply arrived datagrams, run one queued call, tick if there is anything to do."""
        t0 = time.perf_counter()
        rt = self.rt
        if not self._closing and rt.clock() < self._fail_backoff_until:
            return
        inbox = self._inbox
        taken = 0
        for _ in range(min(len(inbox), self.batch_limit)):
            if self._closing and time.monotonic() >= self._stop_deadline:
                break
            if taken and taken + len(inbox[0]) > self.batch_bytes:
                break
            data = inbox.popleft()
            self._inbox_size -= len(data)
            taken += len(data)
            self.accept(data)
        # one queued call per tick (as Bud's sync_do/async_do): what it inserts is applied
        # by a tick of its own
        if self._calls:
            fn, fut, what = self._calls.popleft()
            self._run_call(fn, fut, what)
        due = rt.next_due()
        timer = due is not None and due <= rt.clock()
        if self._units or rt.has_pending() or timer:
            self._tick(t0)

    # -- input, and what happens to it when a tick fails ---------------------------------------

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

    def _call(self, fn: Callable[[Any], Any], arg: Any) -> None:
        try:
            fn(arg)
        except Exception as exc:
            self._stats["callback_errors"] += 1
            self._report(exc, getattr(fn, "__qualname__", repr(fn)))

    def _report(self, exc: BaseException, where: str | None) -> None:
        if where is not None:
            log.error("%s: %s raised: %r", self.rt.addr, where, exc)
        for fn in self._error_cbs:
            try:
                fn(exc)
            except Exception as inner:  # an error handler failing must not stop the node
                log.error("%s: on_error handler %r raised: %r", self.rt.addr, fn, inner)

    # -- the user's handles ---------------------------------------------------------------------

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

    def sync_do(self, fn: Callable[[Any], Any], timeout: float | None = 30.0) -> Any:
        """Run ``fn(program)`` between ticks; return its result after the tick that applies
        what it queued. Raises what ``fn`` raises (nothing it queued is kept), or the
        exception of the tick that could not apply its input (that input is set aside)."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if not self.running or self._loop is None:
            self._run_call(fn, fut, "sync_do")
            if self._units or self.rt.has_pending():
                self._tick()
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
        out["quarantined"] = len(self.quarantined)
        kernel = self._kernel_drops()
        if kernel:
            out["dropped"]["kernel"] = kernel
        out["dropped_total"] = sum(out["dropped"].values())
        out["inbox"] = len(self._inbox)
        out["send_queue_bytes"] = self._pre_start_size + sum(
            p.queued for p in list(self._peers.values())
        )
        if self._reassembly is not None:
            out["reassembling"] = len(self._reassembly)
            out["fragments_lost"] = dict(self._reassembly.lost)
        out["addr"] = str(self.rt.addr)
        out["transport"] = self.transport
        lat = sorted(self._latency)
        if lat:
            out["tick_ms_p50"] = lat[len(lat) // 2] * 1000
            out["tick_ms_p99"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
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


def _group(pairs: Any) -> list[tuple[str, list[Any]]]:
    out: dict[str, list[Any]] = {}
    for chan, rows in pairs:
        out.setdefault(chan, []).extend(rows)
    return list(out.items())
