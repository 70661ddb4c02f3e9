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
import threading
import time
from typing import Any, cast

from blooml.errors import (
    BloomlError,
    CodecError,
    IllTypedValueError,
    ProgramError,
    RowsRefusedError,
)
from blooml.net._coltypes import ColumnTypes
from blooml.net._envelope import (
    ENVELOPE_SLACK,
    decode_envelope,
    encode_envelope,
    encode_envelope_after,
    encode_for_channel,
    envelope_head,
)
from blooml.net._fragment import Reassembler, fragment, is_fragment
from blooml.net._input import Unit
from blooml.net._nodebase import NodeBase, log
from blooml.net._valuecodec import encode_fitting, encode_row

_FRAME = struct.Struct(">I")
#: The channel of refusals: a node tells a peer that rows it sent were set aside (rows of
#: ``(channel, rows, error class, message)``). No program can declare it (not an identifier).
REFUSED_CHANNEL = "blooml.refused"
#: The channel of UDP acknowledgements: a node tells each sender, once per step, how many of
#: its envelopes it has accepted (rows of ``(epoch, total)``: cumulative, so a lost ack is
#: made good by the next; the epoch changes when the receiver restarts).
ACK_CHANNEL = "blooml.ack"
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


_LOCAL: dict[str, bool] = {}


def _local_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, its host name, or an IP address
    assigned to one of its interfaces (a socket can bind it). Cached; never resolves names."""
    hit = _LOCAL.get(host)
    if hit is None:
        if host in ("localhost", socket.gethostname()):
            hit = True
        else:
            try:
                ip = ipaddress.ip_address(host.split("%")[0])
            except ValueError:
                hit = False
            else:
                family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
                try:
                    with socket.socket(family, socket.SOCK_DGRAM) as s:
                        s.bind((host, 0))
                    hit = True
                except OSError:
                    hit = False
        if len(_LOCAL) < 1024:  # forged destinations cannot grow it without bound
            _LOCAL[host] = hit
    return hit


def _is_addr(addr: Any) -> bool:
    """Whether ``addr`` is a ``host:port`` a socket can send to (see ``parse_addr``)."""
    try:
        parse_addr(addr)
    except ProgramError:
        return False
    return True


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, node: NodeBase) -> None:
        self.node = node

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.node._datagram(data, addr)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable
        self.node._count("send_errors")


#: Bytes of a connection's receive buffer: it grows for a larger frame (to the frame's size,
#: once its header is in), then shrinks back; an idle connection holds this much.
FRAMES_CHUNK = 16 * 1024


class _Frames(asyncio.BufferedProtocol):
    """An incoming TCP connection: length-prefixed frames are cut out of the bytes as they
    arrive and put in the node's inbox from the loop's callback, with no reader task per
    connection and no coroutine hand-off per frame (a request's way to the tick).

    A buffered protocol: the transport reads into this connection's own buffer
    (``recv_into``). A plain protocol gets a new ``bytes`` per read from ``recv(256 KiB)``,
    whose allocation cost 18 µs a read here, more than the rest of reading a request."""

    def __init__(self, node: NodeBase, chunk: int = FRAMES_CHUNK) -> None:
        self.node = node
        self.chunk = chunk
        self.buf = bytearray(chunk)
        self.view = memoryview(self.buf)
        self.start = 0  # the first byte not cut out yet
        self.end = 0  # the end of what was read
        self.need = 0  # bytes the frame being read takes in all (header included), or 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream's transport
        self.node._conns.add(self.transport)

    def pending(self) -> int:
        """Bytes read but not cut out into frames yet (a frame still on its way)."""
        return self.end - self.start

    def get_buffer(self, sizehint: int) -> memoryview:
        if not self.end and len(self.buf) == self.chunk:
            return self.view  # empty, of its usual size (the common case): all of it
        size = len(self.buf)
        rest = self.end - self.start
        want = max(self.chunk, self.need, rest + 1)
        if (
            size - self.end < min(1024, self.chunk)
            or size - self.start < self.need
            or (size > self.chunk and want < size and not rest)
        ):
            # room for the frame being read (or a chunk), in a new buffer: the transport
            # may still hold a view of the old one, which therefore never changes size
            buf = bytearray(want)
            buf[:rest] = self.view[self.start : self.end]
            self.buf, self.view = buf, memoryview(buf)
            self.start, self.end = 0, rest
        return self.view[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        # the node's inbox is filled here, not through ``_inbox_put`` (a call a frame): the
        # same limits, read once a read
        node = self.node
        view = self.view
        first = start = self.start
        end = self.end + nbytes
        limit = node.max_message
        need = 0
        queued = False
        inbox = node._inbox
        most = node.inbox_limit
        room = node._inbox_capacity() - node._inbox_size
        while end - start >= 4:
            (n,) = _FRAME.unpack_from(view, start)
            if n > limit:  # refused before a byte of it is read
                node._stats["received_bytes"] += start - first
                node._drop("too_large", f"a TCP frame of {n} bytes (max_message)")
                self.start = self.end = self.need = 0
                if self.transport is not None:
                    self.transport.close()
                if queued:
                    node._arrived()
                return
            if end - start - 4 < n:
                need = 4 + n  # the rest of this frame is still on its way
                break
            if len(inbox) >= most or n > room:
                node._drop("inbox_full", "the inbox is full (a flood?)")
            else:
                inbox.append(bytes(view[start + 4 : start + 4 + n]))  # one copy of the frame
                node._inbox_size += n
                room -= n
                queued = True
            start += 4 + n
        if start != first:
            node._stats["received_bytes"] += start - first
            if start == end:
                start = end = 0  # all cut out: the next read starts at the front
        self.start, self.end, self.need = start, end, need
        if queued:  # once the buffer is consistent: the node may step now, on every frame
            node._arrived()

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
        """At the sending rule: the row must encode within ``max_message`` bytes (over UDP a
        row larger than a datagram travels as fragments). Returns the encoded row.

        A row whose address is not ``host:port`` (``"127.0.0.1:70000"``, no port) is a bad
        row, not a bad rule: it is refused here (never sent), and counted per address in
        ``stats()["send_failures"]`` once its tick commits (``deliver``); the rule's other
        rows are sent, and the rule is never quarantined for it."""
        if addr == rt.addr:
            return None  # loopback: delivered in-process
        if not (type(addr) is str and addr in _PARSED) and not _is_addr(addr):  # seen good
            return None  # refused in deliver (after commit: trial ticks count nothing)
        room = self.max_message - ENVELOPE_SLACK - len(chan) - len(str(rt.addr))
        wire = encode_fitting(row, room)
        if wire is not None:  # (the common case: the checks below, and their errors, else)
            return wire
        return encode_for_channel(
            row,
            chan,
            rt.rels[chan].columns,
            rt.addr,
            where,
            udp=self.transport == "udp",
            max_message=self.max_message,
        )

    def address_ok(self, addr: Any) -> bool:
        """Whether this node can send to ``addr`` (a ``host:port``); used by membership to
        refuse joins from no address."""
        return _is_addr(addr)

    def addressed_to(self, dest: str) -> bool:
        """Whether a datagram sent to ``dest`` is for this node (checked with a cluster key):
        its address, one of ``aliases``, or, for a node bound to every interface (``0.0.0.0``,
        ``::``), its port on an IP address of this machine, ``localhost`` or the host name."""
        if dest == self.rt.addr or dest in self.aliases:
            return True
        if self._wildcard_port is None:
            return False
        try:
            host, port = parse_addr(dest)
        except ProgramError:
            return False
        return port == self._wildcard_port and _local_host(host)

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
            if not (type(addr) is str and addr in _PARSED) and not _is_addr(addr):
                try:
                    parse_addr(addr, f"channel {batch[0][0]!r}")
                except ProgramError as exc:
                    self._send_failed(str(addr), exc, len(batch))  # one per refused row
                return
            if len(batch) == 1:  # one row (a reply): one envelope, its size checked at its rule
                chan, _row, wire = batch[0]
                self._send(addr, {chan: [wire]}, 1)
            else:
                self._deliver(rt, addr, batch)
        except Exception as exc:
            self._send_failed(str(addr), exc)

    def _send_failed(self, addr: str, exc: BaseException, n: int = 1) -> None:
        fails = self._stats["send_failures"]
        fails[addr] = fails.get(addr, 0) + n
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
        """Several rows for ``addr``: as few envelopes as hold them (``deliver``)."""
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

    def _head(self, addr: str) -> bytes:
        """The packed start (sender, destination) of every envelope to ``addr``, packed
        once per destination (again when this node's address changes, as at binding)."""
        sender = str(self.rt.addr)
        heads = self._heads
        if sender != self._heads_of or len(heads) >= 10_000:
            heads.clear()  # bounded: many one-off destinations cost a repack, not memory
            self._heads_of = sender
        head = heads[addr] = envelope_head(sender, addr)
        return head

    def _send(self, addr: str, groups: dict[str, list[bytes]], tuples: int = 0) -> None:
        """One envelope of ``groups`` (encoded rows per channel) to ``addr``; ``tuples``:
        how many rows it holds, when the caller knows (else they are counted here)."""
        now = time.time()
        seq = self._seq = self._seq + 1
        head = self._heads.get(addr)
        if head is None or self._heads_of != self.rt.addr:
            head = self._head(addr)
        # signed (with a key) over the whole body: the head's sender and destination, the
        # sequence number and the timestamp included
        data = encode_envelope_after(head, groups.items(), self.key, now, seq)
        stats = self._stats
        stats["sent"] += 1
        stats["sent_tuples"] += tuples or sum(map(len, groups.values()))
        if self.transport == "udp":
            if REFUSED_CHANNEL not in groups:
                self._sent_to(addr)
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
        stats["sent_bytes"] += len(frame)
        if not self.running or threading.get_ident() != self._ident:  # (not on_own_thread)
            limit = self._send_limit()
            if self._pre_start_size + len(frame) > limit:  # bounded until the node starts
                self._count("send_dropped")
                return
            self._pre_start.append((addr, frame))
            self._pre_start_size += len(frame)
            return
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peer(addr)
        peer.push(frame)

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

    def _refused(self, peer: str, batches: Any) -> None:
        """A peer refused rows this node sent (their rule raised there): counted per peer
        (``stats()["refused"]``), kept in ``refusals`` (the last 100), logged once per peer
        and passed to ``on_error`` as ``RowsRefusedError``. Never answered."""
        for _, rows in batches:
            for r in rows:
                if not (isinstance(r, (tuple, list)) and len(r) == 4):
                    self._drop("malformed", f"from {peer!r}: a refusal {r!r}")
                    continue
                chan, n, cls, msg = r
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    n = 0
                counts = self._stats["refused"]
                counts[str(peer)] = counts.get(str(peer), 0) + n
                self._stats["refused_rows"] += n
                err = RowsRefusedError(str(peer), str(chan), n, str(cls), str(msg))
                self.refusals.append(err)
                if str(peer) not in self._logged_refusals:
                    self._logged_refusals.add(str(peer))
                    log.warning("%s: %s (logged once per peer)", self.rt.addr, err)
                self._report(err, None)

    def _refuse(self, sender: str, chan_rows: dict[str, int], exc: BaseException) -> None:
        """Tell ``sender`` that its rows were set aside: one small message per sender and
        tick at most (its size is bounded; never more than what it sent)."""
        if sender == self.rt.addr or not _is_addr(sender) or self.transport is None:
            return
        msg = f"{exc}"[:200]
        rows = [encode_row((chan, n, type(exc).__name__, msg)) for chan, n in chan_rows.items()]
        self._stats["refusals_sent"] += 1
        try:
            self._send(sender, {REFUSED_CHANNEL: rows})
        except Exception as exc2:  # never fail a tick over a courtesy message
            self._send_failed(sender, exc2)

    # -- per-peer liveness over UDP: cumulative acks ------------------------------------------

    def _ack_later(self, sender: str) -> None:
        """Count an accepted envelope of ``sender``, to be acknowledged at the step's end."""
        due = self._acks_due
        if sender in due or len(due) < 10_000:
            due[sender] = due.get(sender, 0) + 1
        total = self._received_from
        if sender in total or len(total) < 10_000:
            total[sender] = total.get(sender, 0) + 1

    def _flush_acks(self) -> None:
        """Send each sender of this step's envelopes one ack: ``(epoch, total accepted)``.
        One small datagram per sender and step, never more than the envelopes received."""
        due, self._acks_due = self._acks_due, {}
        for sender in due:
            if sender == self.rt.addr or not _is_addr(sender):
                continue
            row = encode_row((self._epoch, self._received_from.get(sender, 0)))
            data = encode_envelope(str(self.rt.addr), [(ACK_CHANNEL, [row])], self.key)
            self._stats["acks_sent"] += 1
            self._udp_out(sender, data)

    def _sent_to(self, addr: str) -> None:
        """An envelope left for ``addr`` (UDP): one more it should acknowledge."""
        st = self._liveness.get(addr)
        if st is None:
            if len(self._liveness) >= 10_000:
                return
            # [sent, acked in earlier epochs, acked in this epoch, epoch, last ack, first send]
            st = self._liveness[addr] = [0, 0, 0, None, None, time.monotonic()]
        st[0] += 1

    def _acked(self, peer: str, batches: Any) -> None:
        """A peer's ack: its epoch and how many of our envelopes it has accepted in it."""
        st = self._liveness.get(str(peer))
        if st is None:
            return
        for _, rows in batches:
            for r in rows:
                if not (isinstance(r, (tuple, list)) and len(r) == 2):
                    continue
                epoch, total = r
                if not isinstance(total, int) or isinstance(total, bool):
                    continue
                if epoch != st[3]:  # the peer restarted: its count starts again
                    st[1] += st[2]
                    st[2], st[3] = 0, epoch
                st[2] = min(max(st[2], total), st[0] - st[1])
                st[4] = time.monotonic()
        if st[4] is not None and str(peer) in self._down:
            self._down.discard(str(peer))
            log.warning("%s: %s acknowledges again", self.rt.addr, peer)

    def peers(self) -> dict[str, dict[str, Any]]:
        """Per UDP destination: envelopes ``sent``, ``acked`` by the peer, ``unacked``,
        ``last_ack_s`` (seconds since its last ack, ``None`` if none) and ``alive``: it
        acknowledged within ``peer_timeout`` seconds, or nothing sent to it is unacked.
        (Over TCP, see ``connect_failures`` and ``send_dropped``.)"""
        now = time.monotonic()
        out: dict[str, dict[str, Any]] = {}
        for addr, (sent, before, acked, _epoch, last, first) in list(self._liveness.items()):
            done = before + acked
            since = last if last is not None else first
            alive = done >= sent or now - since < self.peer_timeout
            if not alive and addr not in self._down:
                self._down.add(addr)
                log.warning(
                    "%s: %s has not acknowledged for %.1f s; %d envelopes sent to it are "
                    "unacknowledged (stats()['peers'], ['undelivered'])",
                    self.rt.addr,
                    addr,
                    now - since,
                    sent - done,
                )
            out[addr] = {
                "sent": sent,
                "acked": done,
                "unacked": sent - done,
                "last_ack_s": None if last is None else now - last,
                "alive": alive,
            }
        return out

    def _drain_udp(self) -> None:
        """Read the datagrams waiting in the UDP socket (on the node's thread, between
        ticks), at most until the inbox holds ``batch_limit``: the event loop hands over one
        datagram per readiness event, and a tick after each would apply one at a time."""
        sock = self.sock
        if self._udp is None or sock is None or self._closing:
            return
        for _ in range(self.batch_limit - len(self._inbox)):
            try:
                data, source = sock.recvfrom(65_536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. an ICMP error reported on the socket
                self._count("send_errors")
                return
            self._datagram(data, source)

    def _inbox_capacity(self) -> int:
        """The bytes the inbox may hold (``inbox_bytes``, by default four messages)."""
        return 4 * self.max_message if self.inbox_bytes is None else self.inbox_bytes

    def _inbox_put(self, data: bytes, notify: bool = True) -> bool:
        """Queue a received message for the next step; whether it was queued (a full inbox
        drops it). ``notify``: tell the scheduler (``_arrived``) now; a caller queuing
        several at once tells it once, after the last."""
        if (
            len(self._inbox) >= self.inbox_limit
            or self._inbox_size + len(data) > self._inbox_capacity()
        ):
            self._drop("inbox_full", "the inbox is full (a flood?)")
            return False
        self._inbox.append(data)
        self._inbox_size += len(data)
        if notify:
            self._arrived()
        return True

    def accept(self, data: bytes) -> bool:
        """Check one datagram and queue its tuples for the next tick; a bad one is dropped
        and counted (``stats()["dropped"]``). Returns whether it was accepted."""
        try:
            key = self.key  # (the destination is checked with a key only)
            if key:
                env = decode_envelope(data, key, self.guard, dest=self.addressed_to)
            else:
                env = decode_envelope(data)
        except CodecError as exc:
            self._drop(exc.reason, str(exc))
            return False
        except Exception as exc:  # never let a datagram stop the node
            self._drop("malformed", f"{type(exc).__name__}: {exc}")
            return False
        batches = env.batches
        sender = env.sender
        if batches:
            first = batches[0][0]
            if first == REFUSED_CHANNEL:
                self._refused(sender, batches)  # a peer's refusal of rows we sent
                return True
            if first == ACK_CHANNEL:
                self._acked(sender, batches)
                return True
        # every channel known and every row of its arity (the codec made each row a tuple)
        arities = self._arities
        if arities is None:
            arities = self._arities = {
                name: rel.arity for name, rel in self.rt.rels.items() if rel.info.kind == "channel"
            }
        types = self._types
        if types is None:
            types = self._types = ColumnTypes(self.rt)
        typed = types.checks
        for chan, rows in batches:
            arity = arities.get(chan)
            if arity is None:
                self._drop("unknown_channel", f"from {sender!r}: no channel {chan!r}")
                return False
            for r in rows:
                if len(r) != arity:
                    self._drop(
                        "arity",
                        f"from {sender!r}: channel {chan!r} has {arity} columns, got {len(r)}",
                    )
                    return False
        if typed:  # values the program's folds would refuse (see _coltypes)
            for chan, rows in batches:
                why = types.check(chan, rows)
                if why is not None:
                    self._drop("ill_typed", f"from {sender!r}: {why}")
                    err = IllTypedValueError(f"datagram from {sender}", why)
                    self._refuse(sender, {c: len(r) for c, r in batches}, err)
                    return False
        if self._strikes or self.throttle_after <= 0:
            if self._throttled(sender, batches):
                return True  # waits in the sender's slow lane (see _policy)
            # other input than a throttled sender's: the slow lane runs on its credit only
            # (its share of tick time) until none has come for ``throttle_idle`` seconds.
            # Read here, not from the inbox: a step empties the inbox, which the loop
            # refills only between steps, so an empty one does not say the node is idle;
            # and a throttled sender's own datagrams are not other input.
            self._last_input = time.perf_counter()
        return self._enqueue(sender, batches)

    def _enqueue(self, sender: str, batches: Any) -> bool:
        """Queue a checked datagram's rows for the next tick, as one input unit.

        ``rt.receive_batch`` of the rows, remembered as one input unit: what ``_queue`` does
        for any call, at the cost of the datagram's rows (``receive_checked`` returns the
        checked rows it queued, which the unit keeps; ``_queue`` would compare every queued
        list before and after)."""
        rt = self.rt
        pend = rt.pending
        try:  # all or nothing: raises with nothing queued
            checked = rt.receive_checked(sender, batches)
        except BloomlError as exc:
            self._drop("rejected", f"from {sender!r}: {exc}")
            return False
        except Exception as exc:
            self._drop("rejected", f"from {sender!r}: {type(exc).__name__}: {exc}")
            return False
        n = 0
        for _chan, rows in checked:
            n += len(rows)
        if rt.pending is pend and n:  # (else a receive hook that ticked: the general way)
            # what: "datagram from <sender>"; its Pending built only if something reads it
            self._units.append(Unit(None, None, None, n, sender, checked))
        stats = self._stats
        stats["received"] += 1
        stats["received_tuples"] += n
        if self.transport == "udp":
            self._ack_later(sender)
        return True


def _group(pairs: Any) -> list[tuple[str, list[Any]]]:
    out: dict[str, list[Any]] = {}
    for chan, rows in pairs:
        out.setdefault(chan, []).extend(rows)
    return list(out.items())
