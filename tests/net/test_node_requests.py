"""A node's request path over TCP: frames cut out of the byte stream as it arrives, requests
that arrive together applied by one tick, replies written from the tick (issue 25, item 9).
Real sockets on 127.0.0.1 only, bounded in time; nothing here is timed."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import time
from collections import deque
from typing import Any

from _net import wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, channel, lmap, lmax, table
from blooml.net import decode_envelope, encode_envelope, encode_row, node
from blooml.net._peers import _raw_socket
from blooml.net._transport import Transport, _Frames

_FRAME = struct.Struct(">I")


class KVS(Program):
    """Each ``put``/``get`` gets one ``reply`` at its ``src``: the value written or stored."""

    store = lmap()
    put = channel(["@dst", "src", "id"], ["k", "v"])
    get = channel(["@dst", "src", "id"], ["k"])
    reply = channel(["@dst", "id"], ["v"])

    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.k, lmax(p.v)))
        self.reply < ~self.put.map(lambda p: (p.src, p.id, p.v))
        self.reply < ~self.get.map(lambda g: (g.src, g.id, self.store.at(g.k, lmax).reveal()))


class Seq(Program):
    """Sends each row of ``out`` to its address; ``got`` keeps what arrives."""

    msg = channel(["@dst", "n"], ["pad"])
    out = table(["dst", "n"], ["pad"])
    got = table(["n"], ["pad"])

    @bloom
    def rules(self):
        self.got <= self.msg.map(lambda m: (m.n, m.pad))
        self.msg < ~self.out


def _frame(body: bytes) -> bytes:
    return _FRAME.pack(len(body)) + body


def _read_frames(conn: socket.socket, n: int, timeout: float = 10.0) -> list[bytes]:
    """``n`` length-prefixed frames from ``conn`` (fails after ``timeout`` s)."""
    conn.settimeout(timeout)
    buf = b""
    out = []
    while len(out) < n:
        if len(buf) >= 4 and len(buf) - 4 >= _FRAME.unpack_from(buf)[0]:
            size = _FRAME.unpack_from(buf)[0]
            out.append(buf[4 : 4 + size])
            buf = buf[4 + size :]
            continue
        chunk = conn.recv(65536)
        assert chunk, "the node closed the connection"
        buf += chunk
    return out


def test_requests_that_arrive_together_are_applied_by_one_tick(nodes: list[Any]) -> None:
    """16 requests in one write (as 16 clients' requests arrive at once) are applied by one
    tick, and each gets its own, right, reply."""
    kvs = KVS(addr="127.0.0.1:0", transport="tcp")
    nodes.append(kvs)
    kvs.start()
    kvs.sync_do(lambda p: p.store.insert(lmap({k: lmax(10 * k) for k in range(100)})))
    listener = socket.create_server(("127.0.0.1", 0))
    me = f"127.0.0.1:{listener.getsockname()[1]}"
    frames = []
    for i in range(16):
        if i % 2:
            rows = [("put", [encode_row((kvs.addr, me, i, 200 + i, 7 * i))])]
        else:
            rows = [("get", [encode_row((kvs.addr, me, i, i))])]
        frames.append(_frame(encode_envelope(me, rows, None, time.time())))
    host, port = kvs.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as out:
        # a first request opens the node's connection back to us
        out.sendall(_frame(encode_envelope(me, [("get", [encode_row((kvs.addr, me, 99, 1))])])))
        listener.settimeout(10)
        conn, _ = listener.accept()
        with conn:
            assert len(_read_frames(conn, 1)) == 1
            kvs.sync_do(lambda p: None)  # that tick has ended (its reply left inside it)
            ticks = kvs.stats()["ticks"]
            out.sendall(b"".join(frames))
            replies: dict[int, Any] = {}
            while len(replies) < 16:
                for data in _read_frames(conn, 1):
                    env = decode_envelope(data)
                    for chan, rows in env.batches:
                        assert chan == "reply"
                        for _dst, rid, v in rows:
                            replies[rid] = v
    listener.close()
    kvs.sync_do(lambda p: None)
    assert replies == {i: (7 * i if i % 2 else 10 * i) for i in range(16)}
    assert kvs.stats()["ticks"] == ticks + 1  # one tick applied all 16
    assert kvs.sync_do(lambda p: p.store.value.at(215, lmax)) == lmax(105)


class _FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _FakeNode:
    """What ``_Frames`` uses of a node: limits, counters and the inbox."""

    def __init__(self, max_message: int) -> None:
        self.max_message = max_message
        self._stats = {"received_bytes": 0}
        self.dropped: list[str] = []
        self.inbox: deque[bytes] = deque()
        self._inbox = self.inbox
        self.inbox_limit = 10_000
        self.inbox_bytes: int | None = None
        self._inbox_size = 0
        self._conns: set[Any] = set()

        self.told = 0  # frames queued when the scheduler was last told (``_arrived``)

    def _arrived(self) -> None:
        self.told = len(self.inbox)

    _inbox_capacity = Transport._inbox_capacity

    def _drop(self, reason: str, detail: str) -> None:
        self.dropped.append(reason)


def _feed(proto: _Frames, data: bytes) -> None:
    """``data`` arriving on ``proto``'s connection, as the transport hands it over: read into
    the buffer the protocol gives (``recv_into``), as much as fits each time."""
    while data:
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        del buf  # the transport drops its view after the call, as here
        proto.buffer_updated(n)
        data = data[n:]


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=5_000), max_size=40),
    chunk=st.sampled_from([7, 64, 65_536]),
)
def test_frames_are_cut_out_of_any_chunking_of_the_stream(
    bodies: list[bytes], cuts: list[int], chunk: int
) -> None:
    """However the bytes of a stream of frames are split into reads, the node's inbox gets
    exactly those frames, in order, once each."""
    stream = b"".join(_frame(b) for b in bodies)
    fake = _FakeNode(max_message=1_000)
    proto = _Frames(fake, chunk)  # type: ignore[arg-type]
    transport = _FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    edges = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in itertools.pairwise(edges):
        _feed(proto, stream[a:b])
    assert list(fake.inbox) == bodies and all(type(b) is bytes for b in fake.inbox)
    assert fake._inbox_size == sum(map(len, bodies))
    assert fake.told == len(bodies)  # the scheduler is told of every frame, last included
    assert fake._stats["received_bytes"] == len(stream)
    assert not proto.pending() and not fake.dropped and not transport.closed
    assert len(proto.buf) <= max(chunk, 304)  # grown for a frame at most, shrunk back
    proto.connection_lost(None)
    assert not fake._conns


def test_frames_past_the_inbox_limits_are_dropped_and_counted() -> None:
    """A read of several frames fills the inbox up to ``inbox_limit`` frames and
    ``inbox_bytes`` bytes (with what is queued already); the rest are dropped
    (``inbox_full``), counted as received, and the connection stays open."""
    for most, room, queued in ((2, None, 2), (10, 250, 2), (10, 50, 0)):
        fake = _FakeNode(max_message=1_000)
        fake.inbox_limit, fake.inbox_bytes = most, room
        fake._inbox_size = 10
        proto = _Frames(fake)  # type: ignore[arg-type]
        transport = _FakeTransport()
        proto.connection_made(transport)  # type: ignore[arg-type]
        stream = b"".join(_frame(bytes([i]) * 100) for i in range(3))
        _feed(proto, stream)
        assert list(fake.inbox) == [bytes([i]) * 100 for i in range(queued)]
        assert fake._inbox_size == 10 + 100 * queued
        assert fake.dropped == ["inbox_full"] * (3 - queued)
        assert fake.told == (queued or 0) and not transport.closed
        assert fake._stats["received_bytes"] == len(stream) and not proto.pending()


def test_a_frame_over_max_message_closes_the_connection_before_it_is_read() -> None:
    fake = _FakeNode(max_message=100)
    proto = _Frames(fake)  # type: ignore[arg-type]
    transport = _FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    _feed(proto, _frame(b"ok") + _FRAME.pack(101) + b"x" * 10)
    assert list(fake.inbox) == [b"ok"]  # what came before it is kept
    assert fake.told == 1  # and the scheduler is told of it
    assert fake.dropped == ["too_large"] and transport.closed
    assert not proto.pending()  # nothing of it is buffered


def test_a_peer_writes_its_socket_directly_only_on_asyncios_selector_transport(
    monkeypatch: Any,
) -> None:
    """``push`` writes an idle connection's socket itself only when the transport is
    asyncio's selector transport of a non-blocking TCP socket on a selector loop; any other
    transport (another event loop's, a fake) is written through its ``write``."""

    class Other:
        _sock = socket.socket()  # a blocking socket

    class NoSuchLoop:
        pass

    async def main() -> list[Any]:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            found = [_raw_socket(t) for t in (writer.transport, _FakeTransport(), Other())]
            with monkeypatch.context() as m:  # the same transport on a loop of another kind
                m.setattr(asyncio, "SelectorEventLoop", NoSuchLoop)
                found.append(_raw_socket(writer.transport))
            return found
        finally:
            writer.close()
            server.close()

    loop = asyncio.SelectorEventLoop()
    try:
        found = loop.run_until_complete(main())
    finally:
        loop.close()
        Other._sock.close()
    assert type(found[0]) is socket.socket and found[1:] == [None, None, None]


def test_frames_to_a_peer_arrive_in_order_written_directly_or_queued(nodes: list[Any]) -> None:
    """Frames written from the tick (an idle connection) and frames queued behind them (the
    socket busy with large ones) reach the peer, every one, in order of sending."""
    a = Seq(addr="127.0.0.1:0", transport="tcp")
    b = Seq(addr="127.0.0.1:0", transport="tcp")
    nodes += [a, b]
    a.start()
    b.start()
    order: list[int] = []
    node(b).watch("got", lambda rows: order.extend(r.n for r in rows))
    for n in range(60):
        pad = "x" * (300_000 if n % 7 == 3 else 10)  # some large enough to fill the socket
        a.async_do(lambda p, n=n, pad=pad: p.out.insert([(b.addr, n, pad)]))
    wait_until(lambda: b.sync_do(lambda p: len(p.got)) == 60, timeout=20)
    assert order == list(range(60))
    assert a.stats()["send_dropped"] == 0


def test_stop_delivers_a_frame_written_directly(nodes: list[Any]) -> None:
    """A frame the tick wrote to the peer's connection itself, more than the socket takes at
    once while the peer is busy, is delivered by ``stop()`` (within its budget)."""
    a = Seq(addr="127.0.0.1:0", transport="tcp")
    b = Seq(addr="127.0.0.1:0", transport="tcp")
    nodes.append(b)
    a.start()
    b.start()
    a.sync_do(lambda p: p.out.insert([(b.addr, 0, "first")]))
    wait_until(lambda: b.sync_do(lambda p: len(p.got)) == 1)  # a is connected to b now
    b.async_do(lambda p: time.sleep(1.0))  # b reads nothing for a second
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, "y" * 12_000_000)]))
    a.stop(timeout=8.0)
    wait_until(lambda: b.sync_do(lambda p: len(p.got)) == 2, timeout=10)
    assert a.stats()["send_dropped"] == 0


def test_one_received_row_is_checked_as_a_batch_of_them() -> None:
    """A request's single row takes a shorter check (``Relation.check_rows``): it refuses
    what the batch check refuses (a lattice in a key column, a wrong arity; nothing queued)
    and converts what it converts (to the channel's row type)."""
    p = KVS()
    rt = p._rt
    for rows in ([("a:1", lmax(1), 7, 3, 4)], [("a:1", "b:2", 7, 3)]):
        for batch in (rows, rows * 2):
            try:
                rt.receive_batch("x:1", [("put", batch)])
            except Exception as exc:
                assert type(exc).__name__ == "ProgramError"
            else:
                raise AssertionError(f"{batch!r} was queued")
            assert not rt.pending
    assert rt.receive_batch("x:1", [("put", [("a:1", "b:2", 7, 3, 4)])]) == 1
    (row,) = rt.pending.inserts["put"]
    assert type(row) is rt.rels["put"].row_type and tuple(row) == ("a:1", "b:2", 7, 3, 4)


_ONE_ROW = st.tuples(
    st.sampled_from(["put", "get", "nope"]),
    st.sampled_from(["a:1", "a:1", "a:1", lmax(1)]),  # a lattice in a key column
    st.integers(0, 1),  # the id: a key column (few: conflicts)
    st.sampled_from([1, 1, 2, [3]]),  # a value, or an unhashable one
    st.sampled_from([False, False, False, True]),  # a wrong arity
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_ONE_ROW, min_size=2, max_size=8))
def test_one_received_row_is_queued_as_in_a_batch(msgs: list[Any]) -> None:
    """A message of one row (a request) takes a shorter way through ``receive_checked``:
    every message refused or queued as the general path (the same message with an empty
    batch beside it) does, with the same error, and the same queue after each."""
    one, many = KVS()._rt, KVS()._rt
    for chan, src, i, v, short in msgs:
        row: tuple[Any, ...] = ("me", src, i, 3, v)[: 4 if chan == "get" else 5]
        if short:
            row = row[:-1]
        outcome = []
        for rt, batches in ((one, [(chan, [row])]), (many, [(chan, [row]), (chan, [])])):
            try:
                got = rt.receive_checked("x:1", batches)
            except Exception as exc:
                outcome.append((type(exc), str(exc)))
            else:
                outcome.append([(c, list(rows)) for c, rows in got if rows])
        assert outcome[0] == outcome[1]
        assert one.pending.inserts == many.pending.inserts
        assert one.pending.chan_keys == many.pending.chan_keys


class _FakeLoop:
    """What ``Scheduler._arrived`` reads of asyncio's loop: this round's queue of callbacks
    (``_ready``) and ``call_soon``."""

    def __init__(self, waiting: int) -> None:
        self._ready: deque[Any] = deque(range(waiting))
        self.soon: list[Any] = []

    def call_soon(self, fn: Any) -> None:
        self.soon.append(fn)


def test_a_parked_node_steps_at_once_when_its_read_ends_the_loops_round() -> None:
    """A request reaching a node with nothing to do is applied inside the read's callback
    when no other callback waits in the loop's round (a round of the loop less per request);
    when others wait (other connections' reads), the step comes after them, so that what
    arrives together shares one tick."""
    for waiting in (0, 2):
        kvs = KVS(addr="127.0.0.1:0", transport="tcp")
        n = node(kvs)
        try:
            kvs.sync_do(lambda p: p.store.insert(lmap({1: lmax(5)})))
            loop = _FakeLoop(waiting)
            n._loop, n._wake, n._parked = loop, asyncio.Event(), True  # type: ignore[assignment]
            ticks = kvs.stats()["ticks"]
            me = "127.0.0.1:9"
            body = encode_envelope(me, [("get", [encode_row((kvs.addr, me, 1, 1))])])
            assert n._inbox_put(body)
            if waiting:
                assert kvs.stats()["ticks"] == ticks and loop.soon == [n._step_now]
                loop.soon.pop()()  # the loop's next round
            else:
                assert loop.soon == []  # applied already, inside the callback
            assert kvs.stats()["ticks"] == ticks + 1 and not n._step_soon
            assert not n._wake.is_set()  # nothing more to do: the task stays parked
        finally:
            n._loop = n._wake = None
            kvs.stop()
