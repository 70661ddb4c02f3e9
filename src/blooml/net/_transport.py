"""A node's transport: its socket (UDP or TCP), sending what a tick derived, receiving and
checking what arrives, and resolving peer names.

The transport seam (also implemented by ``LocalNetwork`` and by simulations): the runtime calls
``check(rt, addr, chan, row, where)`` at the sending rule (inside the tick: an error rolls it
back) and ``deliver(rt, addr, batch)`` once per destination after the tick commits, with every
``(chan, row, token)`` the tick sends there. Incoming tuples enter through
``Runtime.receive_batch``. See ``docs/net.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
import time
from typing import Any, cast

from blooml.errors import BloomlError, CodecError, ProgramError
from blooml.net._coltypes import ColumnTypes
from blooml.net._fragment import Reassembler, fragment, is_fragment
from blooml.net._nodebase import NodeBase, log
from blooml.net.codec import (
    ENVELOPE_SLACK,
    decode_envelope,
    encode_envelope,
    encode_for_channel,
)

_FRAME = struct.Struct(">I")
#: Seconds a resolved host name is used before it is resolved again (in the background).
RESOLVE_TTL = 30.0


#: Addresses already split by ``parse_addr`` (every row a rule sends is checked; a node
#: talks to few addresses). Bounded: emptied when full.
_PARSED: dict[str, tuple[str, int]] = {}
_PARSED_MAX = 4096


def parse_addr(addr: Any, where: str = "") -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``); raise ``ProgramError`` if it is not one."""
    if type(addr) is str:
        hit = _PARSED.get(addr)
        if hit is not None:
            return hit
    if isinstance(addr, str):
        host, sep, port = addr.rpartition(":")
        if sep and host and port.isdigit() and int(port) < 65536:
            if host.startswith("[") and host.endswith("]"):
                host = host[1:-1]
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            out = _PARSED[str(addr)] = (host, int(port))
            return out
    raise ProgramError(
        f"{where + ': ' if where else ''}the address {addr!r} is not host:port "
        "(a program bound to a socket sends to host:port addresses)"
    )


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, node: NodeBase) -> None:
        self.node = node

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.node._datagram(data, addr)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable
        self.node._count("send_errors")


class _Frames(asyncio.Protocol):
    """An incoming TCP connection: length-prefixed frames are cut out of the bytes as they
    arrive and put in the node's inbox from the loop's callback, with no reader task per
    connection and no coroutine hand-off per frame (a request's way to the tick)."""

    def __init__(self, node: NodeBase) -> None:
        self.node = node
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream's transport
        self.node._conns.add(self.transport)

    def data_received(self, data: bytes) -> None:
        node = self.node
        buf = self.buf
        buf += data
        start, end = 0, len(buf)
        while end - start >= 4:
            (n,) = _FRAME.unpack_from(buf, start)
            if n > node.max_message:  # refused before a byte of it is read
                node._drop("too_large", f"a TCP frame of {n} bytes (max_message)")
                buf.clear()
                if self.transport is not None:
                    self.transport.close()
                return
            if end - start - 4 < n:
                break  # the rest of this frame is still on its way
            with memoryview(buf) as view:  # one copy of the frame, not two
                frame = bytes(view[start + 4 : start + 4 + n])
            start += 4 + n
            node._stats["received_bytes"] += n + 4
            node._inbox_put(frame)
        if start:
            del buf[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.node._conns.discard(self.transport)


class Transport(NodeBase):
    """The node's socket: binding it, sending (``check``/``deliver``, the transport seam),
    receiving (``accept``) and name resolution."""

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
        self._arrived()

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


def _group(pairs: Any) -> list[tuple[str, list[Any]]]:
    out: dict[str, list[Any]] = {}
    for chan, rows in pairs:
        out.setdefault(chan, []).extend(rows)
    return list(out.items())
