"""A node on TCP loopback: request latency against an asyncio echo, concurrent requests
against one in flight, and sustained tuples/s between two nodes (issues 12 and 25).

1. **Latency** (issue 25). Three servers: a ``KVS`` node (an ``lmap`` of ``--keys`` keys,
   ``put``/``get`` requests, one ``reply`` each, sent on the node's own connection to the
   request's ``src``), a plain asyncio echo server (streams: read a length-prefixed frame,
   write it back) and the *protocol server* (``_Bare``): the ``KVS`` service without an
   engine, whose requests are decoded and checked by the node's codec, read as a node reads
   them (a buffered protocol), and answered with a reply encoded as a node encodes it, on a
   connection of its own to the client's address: what the transport and codec cost, so
   that the node's excess over it is the tick and the node's bookkeeping. A client in a
   child process, on plain blocking sockets, sends the same request frames (encoded
   envelopes, keys and puts/gets drawn at random, all encoded before the clock starts) to
   the three, one request in flight, and times each round trip, from writing the request to
   reading the reply (or the echo). Replies are kept as they arrive and checked after the
   clock stops, so the client's cost is a write and a read on every side.

   **Each server runs in a process of its own** (``--layout process``, the default), on its
   own thread and loop as a node runs, and reports its address, and on request its thread's
   clocks (CPU, ``/proc/.../schedstat``, the node's stage clocks), as JSON lines on its
   stdout. Until issue 25's eighth round the three ran as threads of this one process
   (``--one-process``, or ``--layout one``; ``--layout both`` runs both, the verdict on the
   default's): they shared one GIL, so a server's work after its reply had left (the node's
   commit bookkeeping) delayed the server the client asked next, and the node waited for
   the others' GIL too. The engine-less protocol server measured 1.9-2.0x the echo with the
   node in the rotation and 1.03x without it. A deployed node owns its process, and so does
   an asyncio server it is compared with.

   Two arrangements, alternating round by round so that the machine's load falls on both:
   **in rotation**, one request to each server in turn (the order rotated every request, so
   that none always follows another), and **back to back**, 20 requests to one server, then
   20 to the next (the first of each block, which follows another server's requests, is not
   timed): a server's work after its reply then lands on its own next request, not on
   another server's. Printed for each: median, p90 and p99 of each server, the node/echo
   and protocol server/echo ratios, each server thread's CPU per request and its time
   runnable but waiting for a CPU (``/proc/.../schedstat``: on a shared machine, the part of
   a round trip that is the machine's); in rotation, the echo's median right after a node
   request and apart from one; the machine's load average at the start and the end.
   Targets: the node within 2x of the echo at the median, 3x at p99, **in both
   arrangements**: when they disagree the output says so and the target is missed (a
   ratio that holds in one arrangement only is the arrangement's, not the node's); node/echo
   medians more than 1.25x apart are said to disagree too. On a 2-CPU machine they do: in
   rotation each server runs after the others have run, its thread spends more CPU a
   request and the echo's round trip about doubles, which flatters the node (docs/net.md).
2. **Concurrency** (issue 25). The same ``KVS`` node served by 16 clients at once (each with
   one request in flight, its own connection and reply address; one ``epoll`` loop in the
   child drives them all), against one client with one request in flight, in alternating
   rounds; then the protocol server and the asyncio echo with the same clients, for scale
   (what concurrency buys a server without an engine, and one that only reads and writes,
   on this machine). Requests that arrive together are applied by one tick. The servers run
   as in the latency section: each in a process of its own by default (``--layout``
   applies to both sections), their clocks and the node's counters read in that process
   at the client's marks (the start and the end of its timed loop). Printed:
   requests/s of each, their ratios, each server thread's and the client's CPU per request,
   the shares of the wall time each spent on a CPU, runnable but waiting for one, and idle
   (is the client saturated? is the server idle?), per tick the node's requests, sends,
   event-loop rounds and reads, with ``--stages`` the node thread's CPU per stage, and the
   bound the node thread's CPU per request sets (with the share of a core it had and the
   CPU a request 10x would need). Target: 16 clients get >= 10x the one-in-flight
   throughput.
3. **Stream** (issue 12, §8). A ``Source`` node sends batches of 3-column tuples
   ``(dst, k, lmax(k))`` (``--batch`` per tick, one TCP frame each) to a ``Sink`` node that folds
   them into a table. Throughput is the number of tuples the sink applied divided by the time
   from the first send to the last tuple applied; every tuple must arrive (zero loss).
   Target: >= 50,000 tuples/s.

Exit status 1 when a target is missed or a reply was wrong or lost. On a shared machine the
absolute numbers move from run to run; the ratios are taken in the same run.

    python benchmarks/bench_net_tcp.py [--quick] [--only latency|concurrency|stream]
        [--keys N] [--requests N] [--clients C] [--tuples N] [--batch B] [--stages]
        [--layout process|one|both | --one-process]

``--stages`` also prints the node thread's CPU a request in each stage (outside the step,
accept, the tick, the reply, the step's own) of the latency section (per arrangement, read
inside the node's process) and of the 16-client rounds, each from the thread's own clock
around the node's methods.

Until issue 25's tenth round the concurrency section ran its three servers as threads of
this process (``--layout one`` still does). On a quiet machine the two layouts measure the
same within the noise (in one run, 16 clients over one in flight: the node 4.00x in
processes of their own, 5.05x as threads); the default is the layout a deployment has and
the latency section's. The stream section runs its two nodes in this process (it measures
what one node sends another, not a server against a baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header

from blooml import Program, bloom, channel, interface, lmap, lmax, table
from blooml.net import node
from blooml.net.codec import (
    decode_envelope,
    encode_envelope,
    encode_envelope_after,
    encode_row,
    envelope_head,
)

TARGET = 50_000
LATENCY_MEDIAN = 2.0
LATENCY_P99 = 3.0
CONCURRENCY = 10.0
DISAGREE = 1.25  # latency: node/echo medians this far apart in the two arrangements disagree
CLIENT_TIMEOUT = 240.0
_FRAME = struct.Struct(">I")


class Source(Program):
    """Sends every row of ``src`` on ``msg``."""

    src = interface(["dst", "k"], ["v"])
    msg = channel(["@dst", "k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.msg <~ self.src  # noqa: B015
    # fmt: on


class Sink(Program):
    """Keeps the largest value per key mod 1,000."""

    msg = channel(["@dst", "k"], ["v"])
    best = table(["bucket"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.best <= self.msg.map(lambda m: (m.k % 1000, m.v))  # noqa: B015
    # fmt: on


class KVS(Program):
    """A key-value store served over the network: each ``put`` or ``get`` gets one
    ``reply`` (the value written, or the value stored) at the request's ``src``."""

    store = lmap()
    put = channel(["@dst", "src", "id"], ["k", "v"])
    get = channel(["@dst", "src", "id"], ["k"])
    reply = channel(["@dst", "id"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.k, lmax(p.v)))  # noqa: B015
        self.reply <~ self.put.map(lambda p: (p.src, p.id, p.v))  # noqa: B015
        self.reply <~ self.get.map(  # noqa: B015
            lambda g: (g.src, g.id, self.store.at(g.k, lmax).reveal())
        )
    # fmt: on


# -- the baseline: a plain asyncio echo server on its own thread ---------------------------


def start_echo() -> tuple[int, Any, threading.Thread]:
    """An asyncio (streams) echo of length-prefixed frames on 127.0.0.1, on its own thread
    and loop as a node runs; returns its port, a function that stops it, and its thread."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                writer.write(head + await reader.readexactly(_FRAME.unpack(head)[0]))
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        server.close()

    def run() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=run, daemon=True, name="echo")
    thread.start()
    ready.wait(10)

    def stop() -> None:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(5)

    return box["port"], stop, thread


class _BareConn(asyncio.BufferedProtocol):
    """One incoming connection of the protocol server: the transport reads into a buffer of
    its own and frames are cut out of it, as a node's connections (``_Frames``) do (a buffer
    of 64 KiB that never grows: the benchmark's requests are under 100 bytes)."""

    def __init__(self, server: _Bare) -> None:
        self.server = server
        self.buf = bytearray(1 << 16)
        self.view = memoryview(self.buf)
        self.end = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        end = self.end + nbytes
        start = 0
        while end - start >= 4:
            (n,) = _FRAME.unpack_from(self.view, start)
            if end - start - 4 < n:
                break
            self.server.handle(bytes(self.view[start + 4 : start + 4 + n]))
            start += 4 + n
        rest = end - start
        if start and rest:
            self.buf[:rest] = self.view[start:end]
        self.end = rest


class _Bare:
    """The ``KVS`` service without an engine: each request frame decoded and checked by the
    node's codec (``decode_envelope``), a ``put`` folded into a dict, a ``get`` looked up,
    and the reply encoded as a node encodes it (``encode_row``, the envelope's head packed
    once per destination, ``encode_envelope_after``) and written to a connection of its own
    to the request's ``src`` (opened at the first request, blocking, before any clock
    starts; then a plain ``send``). What a node's transport and codec cost, with no tick."""

    def __init__(self) -> None:
        self.addr = ""
        self.store: dict[Any, int] = {}
        self.out: dict[str, socket.socket] = {}
        self.heads: dict[str, bytes] = {}
        self.seq = 0

    def handle(self, frame: bytes) -> None:
        env = decode_envelope(frame)
        for chan, rows in env.batches:
            for row in rows:
                if chan == "put":
                    _dst, src, rid, k, v = row
                    self.store[k] = max(self.store.get(k, 0), v)
                else:
                    _dst, src, rid, k = row
                    v = self.store.get(k, 0)
                self.reply(src, encode_row((src, rid, v)))

    def reply(self, src: str, wire: bytes) -> None:
        sock = self.out.get(src)
        if sock is None:
            host, port = src.rsplit(":", 1)
            sock = self.out[src] = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.heads[src] = envelope_head(self.addr, src)
        self.seq += 1
        data = encode_envelope_after(
            self.heads[src], (("reply", [wire]),), None, time.time(), self.seq
        )
        sock.sendall(_FRAME.pack(len(data)) + data)


def start_bare() -> tuple[str, Any, threading.Thread]:
    """The protocol server (``_Bare``) on 127.0.0.1, on its own thread and loop as a node
    runs; returns its address, a function that stops it, and its thread."""
    ready = threading.Event()
    server = _Bare()
    box: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(lambda: _BareConn(server), "127.0.0.1", 0)
        server.addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        srv.close()
        for sock in server.out.values():
            sock.close()

    def run() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=run, daemon=True, name="bare")
    thread.start()
    ready.wait(10)

    def stop() -> None:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(5)

    return server.addr, stop, thread


# -- the client (a child process: it never shares this process's GIL) -----------------------
#
# Plain sockets, no event loop: every request is encoded before the clock starts, and every
# reply is kept as it arrived and checked after the clock stops, so that the client's own
# CPU is a write and a read a request (a few microseconds) on both sides, and neither the
# latency nor the throughput measured is the client's.


def _recv_frame(sock: socket.socket, buf: bytearray) -> bytes:
    """One length-prefixed frame from blocking ``sock`` (``buf`` keeps what came after it)."""
    while True:
        if len(buf) >= 4:
            n = _FRAME.unpack_from(buf)[0]
            if len(buf) >= 4 + n:
                frame = bytes(buf[4 : 4 + n])
                del buf[: 4 + n]
                return frame
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the connection closed before the reply")
        buf += chunk


class _Client:
    """One client: a listening socket for the node's replies (the node connects to the
    request's ``src``), a connection to the node and one to the echo, and its requests,
    encoded before the clock starts."""

    def __init__(self, node: str, rng: random.Random, n: int, keys: int) -> None:
        self.node = node
        self.n = n
        self.frames: list[bytes] = []
        self.expect: list[tuple[int, Any]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        me = f"127.0.0.1:{self.listener.getsockname()[1]}"
        for i in range(n):
            k = rng.randrange(keys)
            if rng.random() < 0.5:
                v = rng.randrange(1, 10**6)
                rows = [("put", [encode_row((node, me, i, k, v))])]
                self.expect.append((i, v))
            else:
                rows = [("get", [encode_row((node, me, i, k))])]
                self.expect.append((i, None))
            body = encode_envelope(me, rows, None, time.time())
            self.frames.append(_FRAME.pack(len(body)) + body)
        self.replies: socket.socket | None = None
        self.buf = bytearray()  # what arrived on the reply connection, not yet cut
        self.got: list[bytes] = []  # the replies (or echoes), checked after the clock

    def open(self, echo_port: int | None) -> None:
        host, port = self.node.rsplit(":", 1)
        self.w = socket.create_connection((host, int(port)))
        self.w.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if echo_port is not None:
            self.e = socket.create_connection(("127.0.0.1", echo_port))
            self.e.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.ebuf = bytearray()

    def first(self) -> None:
        """Request 0, before any clock starts: the node opens its reply connection."""
        self.w.sendall(self.frames[0])
        self.replies, _ = self.listener.accept()
        self.got.append(_recv_frame(self.replies, self.buf))

    def request(self, i: int) -> None:
        self.w.sendall(self.frames[i])
        assert self.replies is not None
        self.got.append(_recv_frame(self.replies, self.buf))

    def echo(self, i: int) -> bytes:
        self.e.sendall(self.frames[i])
        return _recv_frame(self.e, self.ebuf)

    def check(self, i: int, data: bytes) -> bool:
        """Whether ``data`` is the node's reply to request ``i`` (its id; a put's value)."""
        try:
            ((chan, rows),) = decode_envelope(data).batches
            ((_dst, rid, v),) = rows
        except ValueError:
            return False
        want_id, want_v = self.expect[i]
        return chan == "reply" and rid == want_id and (want_v is None or v == want_v)

    def wrong(self) -> int:
        """Replies missing or wrong, in order (after the clock stopped)."""
        bad = sum(not self.check(i, data) for i, data in enumerate(self.got))
        return bad + self.n - len(self.got)


def _latency(
    node: str,
    echo_port: int,
    n: int,
    keys: int,
    seed: int,
    bare: str | None = None,
    block: int = 0,
) -> dict[str, Any]:
    """Requests ``1..n-1`` to the node, the echo and (``bare``) the protocol server, one at a
    time. ``block`` 0: in rotation, one request each in turn (the order rotated every
    request, so that none always follows another). ``block`` B: back to back, B requests to
    one server, then B to the next (the order rotated every block); the first of each block,
    which follows another server's requests, is not kept, so that every time kept is a
    request that followed the same server's previous one."""
    c = _Client(node, random.Random(seed), n, keys)
    c.open(echo_port)
    c.first()
    b = None
    if bare is not None:  # the same requests (same seed), addressed to the protocol server
        b = _Client(bare, random.Random(seed), n, keys)
        b.open(None)
        b.first()
    warm = min(100, n // 10)
    out: dict[str, Any] = {"node": [], "echo": [], "bare": [], "wrong": 0}
    # the echo's round trips right after the node's, and the others (see ``latency``)
    out["echo_after_node"], out["echo_apart"] = [], []
    echoes: list[bytes] = [b""]
    clock = time.perf_counter
    order = ["node", "echo"] if b is None else ["node", "echo", "bare"]
    # (side, indices, which of them are kept): a rotation step is one request of each side
    steps: list[tuple[str, range, range]] = []
    if block <= 0:
        for i in range(1, n):
            k = i % len(order)
            steps += [(side, range(i, i + 1), range(i, i + 1)) for side in order[k:] + order[:k]]
    else:
        for j, start in enumerate(range(1, n, block)):
            idx = range(start, min(n, start + block))
            k = j % len(order)
            steps += [(side, idx, idx[1:]) for side in order[k:] + order[:k]]
    prev = ""
    for side, idx, kept in steps:
        for i in idx:
            t0 = clock()
            if side == "node":
                c.request(i)
            elif side == "bare":
                assert b is not None
                b.request(i)
            else:
                echoes.append(c.echo(i))
            t = clock() - t0
            if i >= warm and i in kept:
                out[side].append(t)
                if side == "echo":
                    out["echo_after_node" if prev == "node" else "echo_apart"].append(t)
            prev = side
    out["wrong"] = c.wrong() + sum(e != c.frames[i][4:] for i, e in enumerate(echoes) if i)
    if b is not None:
        out["wrong"] += b.wrong()
    return out


def _concurrency(
    node: str, echo_port: int | None, clients: int, n: int, keys: int, seed: int
) -> dict[str, Any]:
    """``clients`` clients, each with one request in flight, to the node (or, with
    ``echo_port``, to the echo), driven by one ``epoll`` loop: a reply read, the client's
    next request written."""
    cs = [_Client(node, random.Random(seed + j), n, keys) for j in range(clients)]
    for c in cs:
        c.open(echo_port)
    if echo_port is None:
        for c in cs:  # every reply connection is open before the clock starts
            c.first()
    sel = selectors.DefaultSelector()
    by_fd: dict[int, tuple[_Client, socket.socket, bytearray]] = {}
    for c in cs:
        s = c.e if echo_port is not None else c.replies
        assert s is not None
        s.setblocking(False)
        buf = c.ebuf if echo_port is not None else c.buf
        by_fd[s.fileno()] = (c, s, buf)
        sel.register(s, selectors.EVENT_READ)
    sent = {id(c): 1 for c in cs}
    left = clients * (n - 1)
    sched0 = schedstat()
    print("go", flush=True)  # the parent reads its threads' clocks from here (run_client)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for c in cs:
        (c.e if echo_port is not None else c.w).sendall(c.frames[1])
    while left:
        ready = sel.select(CLIENT_TIMEOUT)
        if not ready:
            raise TimeoutError(f"no reply in {CLIENT_TIMEOUT} s ({left} outstanding)")
        for key, _ in ready:
            c, s, buf = by_fd[key.fd]
            buf += s.recv(1 << 16)
            while len(buf) >= 4 and len(buf) >= 4 + _FRAME.unpack_from(buf)[0]:
                size = 4 + _FRAME.unpack_from(buf)[0]
                c.got.append(bytes(buf[4:size]))
                del buf[:size]
                left -= 1
                i = sent[id(c)] = sent[id(c)] + 1
                if i < n:
                    (c.e if echo_port is not None else c.w).sendall(c.frames[i])
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    sched1 = schedstat()
    print("end", flush=True)  # ... to here
    waited = sched1[1] - sched0[1] if sched0 is not None and sched1 is not None else None
    if echo_port is not None:
        wrong = sum(g != c.frames[i + 1][4:] for c in cs for i, g in enumerate(c.got))
    else:
        wrong = sum(c.wrong() for c in cs)
    return {
        "wrong": wrong,
        "done": clients * (n - 1),
        "seconds": seconds,
        "client_cpu": cpu,
        "client_waited": waited,
    }


def client_main(spec: dict[str, Any]) -> None:
    """The child process: run one measurement and print its result as JSON (a reply that
    never comes fails the whole run after ``CLIENT_TIMEOUT`` s, not each request)."""
    socket.setdefaulttimeout(CLIENT_TIMEOUT)
    if spec["kind"] == "latency":
        out = _latency(
            spec["node"],
            spec["echo"],
            spec["n"],
            spec["keys"],
            spec["seed"],
            spec.get("bare"),
            spec.get("block", 0),
        )
    else:
        out = _concurrency(
            spec["node"], spec.get("echo"), spec["clients"], spec["n"], spec["keys"], spec["seed"]
        )
    print(json.dumps(out))


def run_client(spec: dict[str, Any], timeout: float = 300.0, on_mark: Any = None) -> dict[str, Any]:
    """Run the client in a child process; its JSON result (its last line of output). The
    lines before it mark the start (``go``) and end (``end``) of its timed loop: each is
    passed to ``on_mark`` as it arrives, so that the parent reads its servers' clocks
    over the same stretch of time as the client's (late by a pipe read, well under 1%)."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    with subprocess.Popen(
        [sys.executable, __file__, "--client", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        timer = threading.Timer(timeout, proc.kill)  # a client that hangs fails the run
        timer.start()
        try:
            lines = []
            for line in proc.stdout:
                line = line.strip()
                if line in ("go", "end"):
                    if on_mark is not None:
                        on_mark(line)
                elif line:
                    lines.append(line)
            err = proc.stderr.read()
            code = proc.wait()
        finally:
            timer.cancel()
    if code != 0 or not lines:
        raise RuntimeError(f"the client failed (exit status {code}):\n{err}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- the measurements -----------------------------------------------------------------------


def pct(xs: list[float], p: float) -> float:
    """The ``p`` quantile of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * p))]


def thread_cpu(thread: threading.Thread | None) -> float:
    """CPU seconds ``thread`` has used so far (its own clock: time the machine gave to other
    processes is not counted; the process's CPU where there is no such clock)."""
    try:
        assert thread is not None and thread.ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (AttributeError, AssertionError, OSError):
        return time.process_time()


def schedstat(tid: int | None = None) -> tuple[float, float] | None:
    """``(seconds on a CPU, seconds runnable but waiting for one)`` of thread ``tid`` of this
    process (the calling thread by default), from Linux's ``/proc/.../schedstat``; ``None``
    where there is no such file. What is neither, of a stretch of wall time, the thread spent
    blocked (idle: in ``epoll``/``recv``, waiting for input)."""
    path = f"/proc/self/task/{tid}/schedstat" if tid is not None else "/proc/thread-self/schedstat"
    try:
        with open(path) as f:
            run, wait = f.read().split()[:2]
        return int(run) / 1e9, int(wait) / 1e9
    except (OSError, ValueError):
        return None


class LoopRounds:
    """Counts the rounds of a node's event loop (its selector's ``select`` calls) and the
    ready events they returned (one read of a connection each), by wrapping the loop's
    selector on the instance (asyncio's selector loops; a no-op on others)."""

    def __init__(self, p: Program) -> None:
        self.rounds = 0
        self.events = 0
        self.selector = getattr(node(p)._loop, "_selector", None)
        if self.selector is None:
            return
        select = self.selector.select

        def counted(timeout: float | None = None) -> Any:
            ready = select(timeout)
            self.rounds += 1
            self.events += len(ready)
            return ready

        self.selector.select = counted  # an attribute set is atomic: safe from this thread

    def remove(self) -> None:
        """Take the wrapper away."""
        if self.selector is not None:
            self.selector.__dict__.pop("select", None)

    def read(self) -> tuple[int, int]:
        """``(rounds, events)`` so far."""
        return self.rounds, self.events


def node_cpu(p: Program) -> float:
    """CPU seconds the node's thread has used so far (see ``thread_cpu``)."""
    return thread_cpu(node(p)._thread)


def start_kvs(keys: int) -> KVS:
    """A started ``KVS`` node holding ``keys`` keys."""
    kvs = KVS(addr="127.0.0.1:0", transport="tcp").start()
    kvs.sync_do(lambda p: p.store.insert(lmap({k: lmax(0) for k in range(keys)})))
    return kvs


class Stages:
    """``--stages``: the node thread's CPU in each stage of a request, from the thread's own
    clock around the node's methods (each wrapper adds about a microsecond): ``accept``
    (decode, checks, the row queued as an input unit), the tick without its reply (the
    engine and the node's bookkeeping around it), the reply (envelope and write, the
    ``send`` included), the step's own work, and what is outside the step (the event
    loop, the read, the frame cut out)."""

    NAMES = ("accept", "_commit_tick", "_send", "_step")

    def __init__(self, kvs: KVS) -> None:
        self.node = node(kvs)
        self.cpu = dict.fromkeys(self.NAMES, 0.0)
        self.depth = 0  # a _send inside _commit_tick is counted once, as the reply

    def install(self) -> None:
        """Wrap the node's methods (on the instance; ``remove`` takes them away)."""
        clock = time.thread_time
        for name in self.NAMES:
            fn = getattr(self.node, name)

            def timed(*a: Any, _fn: Any = fn, _name: str = name, **kw: Any) -> Any:
                t0 = clock()
                try:
                    return _fn(*a, **kw)
                finally:
                    self.cpu[_name] += clock() - t0

            setattr(self.node, name, timed)

    def remove(self) -> None:
        """Take the wrappers away."""
        for name in self.NAMES:
            self.node.__dict__.pop(name, None)


# -- where the latency section's servers run ------------------------------------------------
#
# By default each server runs in a process of its own, as a deployed node does and as an
# asyncio echo baseline does: its process's GIL is its own. ``--one-process`` runs the three
# as threads of this process instead (the layout before issue 25's eighth round), where a
# server's work after its reply (the node's commit bookkeeping) delays the server the client
# asks next, and the node waits for the others' GIL too.

SIDES = ("echo", "bare", "node")
BLOCK = 20  # back to back: requests to one server before the client moves to the next


def _clock(
    thread: threading.Thread | None,
    timed: Stages | None,
    kvs: KVS | None = None,
    loop: LoopRounds | None = None,
) -> dict[str, Any]:
    """A server thread's clocks: its CPU so far (``cpu``), its time on a CPU and runnable
    but waiting for one (``run``, ``wait``; ``None`` without ``/proc``), for a node with
    ``--stages`` its CPU per stage (``stages``), and for a node whose loop rounds are counted
    (``loop``, the concurrency section) its ``ticks`` and ``sent`` so far and its loop's
    ``rounds`` and ready ``events``."""
    sched = schedstat(thread.native_id if thread is not None else None)
    out: dict[str, Any] = {
        "cpu": thread_cpu(thread),
        "run": None if sched is None else sched[0],
        "wait": None if sched is None else sched[1],
        "stages": None if timed is None else dict(timed.cpu),
    }
    if kvs is not None and loop is not None:
        stats = kvs.stats()
        out["ticks"], out["sent"] = stats["ticks"], stats["sent"]
        out["rounds"], out["events"] = loop.read()
    return out


def start_server(kind: str, keys: int) -> tuple[str, Any, threading.Thread | None, KVS | None]:
    """Start one server of the latency section in this process: ``node`` (a ``KVS`` of
    ``keys`` keys), ``echo`` or ``bare`` (the protocol server); its address, a function that
    stops it, its thread and (a node) the program."""
    if kind == "node":
        kvs = start_kvs(keys)
        return kvs.addr, kvs.stop, node(kvs)._thread, kvs
    if kind == "echo":
        port, stop, thread = start_echo()
        return f"127.0.0.1:{port}", stop, thread, None
    addr, stop, thread = start_bare()
    return addr, stop, thread, None


def server_main(spec: dict[str, Any]) -> None:
    """A server process (``--server``): start the server ``spec["kind"]``, print its address
    as a JSON line, then answer each ``clock`` line on stdin with the server thread's clocks
    as a JSON line (read on this, the main, thread: the server's thread is not disturbed),
    until ``stop`` or the end of stdin."""
    addr, stop, thread, kvs = start_server(spec["kind"], spec["keys"])
    timed = Stages(kvs) if kvs is not None and spec.get("stages") else None
    if timed is not None:
        timed.install()
    loop = LoopRounds(kvs) if kvs is not None and spec.get("rounds") else None
    print(json.dumps({"addr": addr}), flush=True)
    try:
        for line in sys.stdin:
            if line.strip() == "clock":
                print(json.dumps(_clock(thread, timed, kvs, loop)), flush=True)
            elif line.strip() == "stop":
                break
    finally:
        if timed is not None:
            timed.remove()
        if loop is not None:
            loop.remove()
        stop()


class Servers:
    """The latency section's three servers (``addrs``: ``node``, ``echo``, ``bare``) and
    their threads' clocks; a base of the two layouts."""

    layout = ""
    addrs: dict[str, str]

    def clock(self) -> dict[str, dict[str, Any]]:
        """Each server thread's clocks now (see ``_clock``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the servers this object started."""
        raise NotImplementedError


class OneProcess(Servers):
    """The three servers as threads of this process, one loop each (``--one-process``):
    they share this process's GIL. ``kvs`` is the caller's node (it stays running)."""

    layout = "threads of one process"

    def __init__(self, kvs: KVS, stages: bool = False, rounds: bool = False) -> None:
        self.kvs = kvs
        self.timed = Stages(kvs) if stages else None
        self.loop = LoopRounds(kvs) if rounds else None
        echo, self.stop_echo, echo_thread, _ = start_server("echo", 0)
        try:
            bare, self.stop_bare, bare_thread, _ = start_server("bare", 0)
        except BaseException:
            self.stop_echo()
            raise
        self.addrs = {"node": kvs.addr, "echo": echo, "bare": bare}
        self.threads = {"node": node(kvs)._thread, "echo": echo_thread, "bare": bare_thread}
        if self.timed is not None:
            self.timed.install()

    def clock(self) -> dict[str, dict[str, Any]]:
        """Each server thread's clocks now."""
        return {
            s: _clock(t, self.timed, self.kvs, self.loop) if s == "node" else _clock(t, None)
            for s, t in self.threads.items()
        }

    def close(self) -> None:
        """Stop the echo and the protocol server; take the stage wrappers and the loop's
        round counter off the node."""
        if self.timed is not None:
            self.timed.remove()
        if self.loop is not None:
            self.loop.remove()
        self.stop_echo()
        self.stop_bare()


class Processes(Servers):
    """Each server in a child process of its own (``server_main``), as a deployed node runs:
    no server shares another's GIL. Its clocks are read inside its process, through a line
    on its stdin, answered by a JSON line on its stdout."""

    layout = "a process each"

    def __init__(
        self, keys: int, stages: bool = False, timeout: float = 300.0, rounds: bool = False
    ) -> None:
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[1] / "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.addrs = {}
        try:
            for kind in SIDES:
                spec = {
                    "kind": kind,
                    "keys": keys,
                    "stages": stages and kind == "node",
                    "rounds": rounds and kind == "node",
                }
                self.procs[kind] = subprocess.Popen(
                    [sys.executable, __file__, "--server", json.dumps(spec)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            timer = threading.Timer(timeout, self._kill)  # a server that hangs fails the run
            timer.start()
            try:
                for kind in SIDES:
                    self.addrs[kind] = self._answer(kind)["addr"]
            finally:
                timer.cancel()
        except BaseException:
            self._kill()
            raise

    def _answer(self, kind: str) -> dict[str, Any]:
        proc = self.procs[kind]
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {kind} server process ended (exit status {proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def clock(self) -> dict[str, dict[str, Any]]:
        """Each server thread's clocks now, read in its process."""
        for proc in self.procs.values():
            assert proc.stdin is not None
            proc.stdin.write("clock\n")
            proc.stdin.flush()
        return {kind: self._answer(kind) for kind in self.procs}

    def _kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()

    def close(self) -> None:
        """Stop every server process (killed if it has not ended 10 s later)."""
        for proc in self.procs.values():
            try:
                assert proc.stdin is not None
                proc.stdin.write("stop\n")
                proc.stdin.close()
            except (OSError, ValueError):
                pass
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def load_average() -> str:
    """The machine's load average (1, 5 and 15 minutes) and its CPUs, for the record."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return f"load average unknown, {os.cpu_count()} CPUs"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def show_stages(cpu: dict[str, float], total: float, requests: int, indent: str = "      ") -> None:
    """Print the node thread's CPU a request in each stage (``cpu``: seconds per wrapped
    method, see ``Stages``; ``total``: the thread's CPU over the same requests)."""
    c = {k: v / requests * 1e6 for k, v in cpu.items()}
    tick = c["_commit_tick"] - c["_send"]
    own = c["_step"] - c["accept"] - c["_commit_tick"]
    outside = total / requests * 1e6 - c["_step"]
    print(
        f"{indent}node stages, thread CPU a request: outside the step {outside:.0f} us, accept "
        f"{c['accept']:.0f}, tick with its bookkeeping {tick:.0f}, reply {c['_send']:.0f}, "
        f"the step's own {own:.0f}"
    )


NAMES = {"echo": "asyncio echo", "bare": "protocol, no engine", "node": "blooml node"}


def judge(v: Verdicts, ratios: dict[str, dict[float, float]]) -> None:
    """Check the node/echo ratios (``ratios[arrangement][quantile]``, see ``latency``)
    against the targets: a target is met when it is met in rotation and back to back; when
    the two disagree, that is said plainly and the target is not met. Medians more than
    ``DISAGREE`` times apart are said to disagree too, whatever the verdict."""
    rot, b2b = ratios["rotation"], ratios["back-to-back"]
    apart = max(rot[0.5], b2b[0.5]) / max(1e-9, min(rot[0.5], b2b[0.5]))
    if apart > DISAGREE:
        print(
            f"   THE ARRANGEMENTS DISAGREE on the size of the gap: node/echo at the median "
            f"{rot[0.5]:.2f}x in rotation, {b2b[0.5]:.2f}x back to back ({apart:.2f}x apart)"
        )
    for name, p, target in (("median", 0.5, LATENCY_MEDIAN), ("p99", 0.99, LATENCY_P99)):
        met = (rot[p] <= target, b2b[p] <= target)
        if met[0] != met[1]:
            print(
                f"   THE ARRANGEMENTS DISAGREE at the {name}: node/echo {rot[p]:.2f}x in "
                f"rotation, {b2b[p]:.2f}x back to back, against {target}x. Met in one "
                "arrangement only is not met."
            )
        v.check(
            f"latency {name}",
            all(met),
            f"{rot[p]:.2f}x in rotation, {b2b[p]:.2f}x back to back <= {target}x",
        )


def latency(
    v: Verdicts,
    kvs: KVS | None,
    n: int,
    keys: int,
    rounds: int,
    stages: bool = False,
    verdict: bool = True,
) -> dict[str, dict[float, float]]:
    """Section 1: request round trips through the node against an asyncio echo, and through
    the protocol server (``_Bare``: the node's codec and reads, no engine) for where the
    difference lies; in rotation and back to back (see the module's docstring). With
    ``kvs`` the servers are threads of this process around that node (``--one-process``);
    without, each runs in a process of its own (a node of ``keys`` keys). ``verdict``:
    whether the ratios are checked against the targets (the replies always are). Returns
    the node/echo ratios per arrangement (``rotation``, ``back-to-back``) and quantile."""
    servers: Servers = Processes(keys, stages) if kvs is None else OneProcess(kvs, stages)
    print(
        f"-- latency ({servers.layout}): {n:,} requests per round and arrangement, {rounds} "
        f"rounds, one in flight; {load_average()} at the start"
    )
    modes = {"rotation": 0, "back-to-back": BLOCK}
    via: dict[str, dict[str, list[float]]] = {m: {s: [] for s in SIDES} for m in modes}
    split: dict[str, list[float]] = {"echo_after_node": [], "echo_apart": []}
    cpu = {m: dict.fromkeys(SIDES, 0.0) for m in modes}
    waited = {m: dict.fromkeys(SIDES, 0.0) for m in modes}  # runnable but waiting for a CPU
    staged = {m: dict.fromkeys(Stages.NAMES, 0.0) for m in modes}
    wrong = 0
    try:
        for r in range(rounds):
            # the two arrangements alternate, so that the machine's load falls on both alike
            for mode in modes if r % 2 == 0 else reversed(modes):
                spec = {
                    "kind": "latency",
                    "node": servers.addrs["node"],
                    "echo": int(servers.addrs["echo"].rsplit(":", 1)[1]),
                    "bare": servers.addrs["bare"],
                    "n": n,
                    "keys": keys,
                    "seed": r if mode == "rotation" else 1000 + r,
                    "block": modes[mode],
                }
                c0 = servers.clock()
                out = run_client(spec)
                c1 = servers.clock()
                for s in SIDES:
                    cpu[mode][s] += c1[s]["cpu"] - c0[s]["cpu"]
                    if c0[s]["wait"] is not None and c1[s]["wait"] is not None:
                        waited[mode][s] += c1[s]["wait"] - c0[s]["wait"]
                    via[mode][s] += out[s]
                if c0["node"]["stages"] is not None:
                    for k in Stages.NAMES:
                        staged[mode][k] += c1["node"]["stages"][k] - c0["node"]["stages"][k]
                if mode == "rotation":
                    for key, xs in split.items():
                        xs += out[key]
                wrong += out["wrong"]
    finally:
        servers.close()
    done = n * rounds  # requests each server answered per arrangement
    ratios: dict[str, dict[float, float]] = {}
    for mode in modes:
        ts = via[mode]
        print(
            "   in rotation (one request to each server in turn):"
            if mode == "rotation"
            else f"   back to back ({BLOCK} requests to one server, then the next; the first "
            "of each block not timed):"
        )
        for s in SIDES:
            print(
                f"   {NAMES[s]:>22}: median {pct(ts[s], 0.5) * 1e6:5.0f} us   p90 "
                f"{pct(ts[s], 0.9) * 1e6:5.0f} us   p99 {pct(ts[s], 0.99) * 1e6:5.0f} us   "
                f"(its thread's CPU {cpu[mode][s] / done * 1e6:.0f} us a request, runnable "
                f"but waiting for a CPU {waited[mode][s] / done * 1e6:.0f})"
            )
        if stages:
            show_stages(staged[mode], cpu[mode]["node"], done)
        ratios[mode] = {p: pct(ts["node"], p) / pct(ts["echo"], p) for p in (0.5, 0.9, 0.99)}
        rt = ratios[mode]
        print(
            f"      node/echo: median {rt[0.5]:.2f}x   p90 {rt[0.9]:.2f}x   p99 "
            f"{rt[0.99]:.2f}x   CPU {cpu[mode]['node'] / max(cpu[mode]['echo'], 1e-9):.2f}x\n"
            f"      protocol server/echo: median "
            f"{pct(ts['bare'], 0.5) / pct(ts['echo'], 0.5):.2f}x   CPU "
            f"{cpu[mode]['bare'] / max(cpu[mode]['echo'], 1e-9):.2f}x (the node's codec and "
            "reads without the engine: what the transport costs)"
        )
    # A server's own work after its reply has left (the node's: the commit's bookkeeping,
    # counters, the loop's round) may delay the server the client asks next: through the
    # GIL when they share a process, through the CPUs when the machine has few. The echo
    # comes right after the node in two rotations of three: its median right after the
    # node's request, and apart from it.
    after, apart = split["echo_after_node"], split["echo_apart"]
    if after and apart:
        print(
            f"   in rotation, the echo right after a node request: median "
            f"{pct(after, 0.5) * 1e6:.0f} us, otherwise {pct(apart, 0.5) * 1e6:.0f} us; "
            f"node/echo against the latter: median "
            f"{pct(via['rotation']['node'], 0.5) / pct(apart, 0.5):.2f}x"
        )
    print(f"   {load_average()} at the end")
    v.check("latency replies", wrong == 0, f"{wrong} wrong or lost of {6 * done:,}")
    if not verdict:
        print(f"   (the {servers.layout} layout is for comparison: no verdict on its ratios)")
        return ratios
    judge(v, ratios)
    return ratios


def concurrency(
    v: Verdicts,
    kvs: KVS | None,
    n: int,
    clients: int,
    keys: int,
    rounds: int,
    stages: bool = False,
    verdict: bool = True,
) -> None:
    """Section 2: ``clients`` clients at once against one request in flight, through the
    node and, for scale, through the protocol server and the asyncio echo with the same
    clients: what a server that does nothing but read and write gets from concurrency on
    this machine. With ``kvs`` the servers are threads of this process around that node;
    without, each runs in a process of its own (a node of ``keys`` keys), as in the latency
    section. Printed with it, what bounds it: each side's time on a CPU, waiting for one and
    idle (per request and as shares of the wall time), the node loop's rounds, reads,
    requests and sends per tick and (``stages``) the node thread's CPU per stage; all read
    in the server's process over the client's timed loop. ``verdict``: whether the ratio is
    checked against the target (the replies always are)."""
    servers: Servers = (
        Processes(keys, stages, rounds=True)
        if kvs is None
        else OneProcess(kvs, stages, rounds=True)
    )
    print(
        f"-- concurrency ({servers.layout}): {clients} clients x {n:,} requests vs 1 client x "
        f"{n * clients // 4:,} requests, {rounds} rounds; the node, the protocol server without "
        f"an engine, the asyncio echo; {load_average()} at the start"
    )
    sides = ("node", "bare", "echo")
    keys_ = [(s, c) for s in sides for c in (1, clients)]
    rates: dict[tuple[str, int], list[float]] = {k: [] for k in keys_}
    cpu: dict[tuple[str, int], list[float]] = {k: [] for k in keys_}
    client: dict[tuple[str, int], list[float]] = {k: [] for k in keys_}
    # shares of the wall time: (server thread on a CPU, it waiting for one, the client on a
    # CPU, the client waiting for one)
    shares: dict[tuple[str, int], list[tuple[float, float, float, float]]] = {k: [] for k in keys_}
    # per tick: (loop rounds, reads, requests, sends)
    per_tick: dict[int, list[tuple[float, float, float, float]]] = {1: [], clients: []}
    staged = dict.fromkeys(Stages.NAMES, 0.0)
    staged_cpu = 0.0
    staged_n = 0
    wrong = 0
    try:
        for r in range(rounds):
            for c, each in ((1, n * clients // 4), (clients, n)):
                for side in sides:
                    spec: dict[str, Any] = {
                        "kind": "concurrency",
                        "node": servers.addrs["bare" if side == "bare" else "node"],
                        "clients": c,
                        "n": each,
                        "keys": keys,
                        "seed": 1000 * r + c,
                    }
                    if side == "echo":
                        spec["echo"] = int(servers.addrs["echo"].rsplit(":", 1)[1])
                    marks: dict[str, dict[str, Any]] = {}

                    def mark(
                        name: str, marks: dict[str, dict[str, Any]] = marks, side: str = side
                    ) -> None:
                        marks[name] = servers.clock()[side]

                    before = servers.clock()[side]
                    out = run_client(spec, on_mark=mark)
                    c0, c1 = marks.get("go", before), marks.get("end") or servers.clock()[side]
                    done = max(1, out["done"])
                    secs = out["seconds"]
                    cpu[side, c].append((c1["cpu"] - c0["cpu"]) / done)
                    client[side, c].append(out["client_cpu"] / done)
                    if None not in (c0["run"], c1["run"], out["client_waited"]):
                        shares[side, c].append(
                            (
                                (c1["run"] - c0["run"]) / secs,
                                (c1["wait"] - c0["wait"]) / secs,
                                out["client_cpu"] / secs,
                                out["client_waited"] / secs,
                            )
                        )
                    if side == "node":
                        ticks = max(1, c1["ticks"] - c0["ticks"])
                        per_tick[c].append(
                            (
                                (c1["rounds"] - c0["rounds"]) / ticks,
                                (c1["events"] - c0["events"]) / ticks,
                                out["done"] / ticks,
                                (c1["sent"] - c0["sent"]) / ticks,
                            )
                        )
                        if c0["stages"] is not None and c == clients:
                            for k in Stages.NAMES:
                                staged[k] += c1["stages"][k] - c0["stages"][k]
                            staged_cpu += c1["cpu"] - c0["cpu"]
                            staged_n += done
                    rates[side, c].append(out["done"] / secs)
                    wrong += out["wrong"]
    finally:
        servers.close()
    ratio: dict[str, float] = {}
    med = statistics.median
    for side in sides:
        name = {"node": "blooml node", "bare": "protocol, no engine"}.get(side, "asyncio echo")
        for c in (1, clients):
            print(
                f"   {name}, {c:>2} client{'s' if c > 1 else ' '}: "
                f"{med(rates[side, c]):8,.0f} req/s (rounds: "
                f"{', '.join(f'{x:,.0f}' for x in rates[side, c])}); its thread's CPU "
                f"{med(cpu[side, c]) * 1e6:.0f} us/request, the client's "
                f"{med(client[side, c]) * 1e6:.0f}"
            )
            if shares[side, c]:
                run, wait, crun, cwait = (med(x[i] for x in shares[side, c]) for i in range(4))
                print(
                    f"      of the wall time: its thread on a CPU {run:.0%}, waiting for one "
                    f"{wait:.0%}, idle {max(0.0, 1 - run - wait):.0%}; the client on a CPU "
                    f"{crun:.0%}, waiting {cwait:.0%}, idle {max(0.0, 1 - crun - cwait):.0%}"
                )
            if side == "node" and per_tick[c]:
                rounds_, reads, reqs, sends = (med(x[i] for x in per_tick[c]) for i in range(4))
                print(
                    f"      a tick: {reqs:.1f} requests, {sends:.1f} sends, {rounds_:.1f} rounds "
                    f"of the event loop, {reads:.1f} reads"
                )
        ratio[side] = med(a / b for a, b in zip(rates[side, clients], rates[side, 1], strict=True))
    if staged_n:
        print(f"   node stages at {clients} clients:")
        show_stages(staged, staged_cpu, staged_n, "   ")
    one = med(rates["node", 1])
    busy = med(cpu["node", clients])
    echo_busy = med(cpu["echo", clients])
    bare_busy = med(cpu["bare", clients])
    sh = shares["node", clients]
    had = med(x[0] for x in sh) if sh else med(rates["node", clients]) * busy
    waits = f", and waited for one {med(x[1] for x in sh):.0%} of the time" if sh else ""
    print(
        f"   ratio {clients} clients / 1 in flight: node {ratio['node']:.2f}x, protocol server "
        f"{ratio['bare']:.2f}x, asyncio echo {ratio['echo']:.2f}x (medians of the rounds' "
        "ratios)\n"
        f"   bound: one in flight waits a round trip ({1e6 / one:.0f} us) per request; "
        f"{clients} clients are bound by the node thread's CPU ({busy * 1e6:.0f} us a "
        f"request: at most {1 / busy:,.0f} req/s, {1 / busy / one:.1f}x, on a core of its "
        f"own; it had {had:.0%} of one{waits}, the machine's load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores). {CONCURRENCY:.0f}x needs "
        f"at most {1e6 / one / CONCURRENCY:.0f} us a request on a core of its own (the "
        f"protocol server's thread: {bare_busy * 1e6:.0f}, the echo's: {echo_busy * 1e6:.0f})"
    )
    print(f"   {load_average()} at the end")
    v.check("concurrency replies", wrong == 0, f"{wrong} wrong or lost")
    if not verdict:
        print(f"   (the {servers.layout} layout is for comparison: no verdict on its ratio)")
        return
    v.check(
        f"{clients} clients vs one in flight",
        ratio["node"] >= CONCURRENCY,
        f"{ratio['node']:.2f}x >= {CONCURRENCY}x",
    )


def _insert_src(p: Any, rows: list[tuple[Any, ...]]) -> None:
    p.src.insert(rows)


def stream(v: Verdicts, n: int, b: int) -> None:
    """Section 3: sustained tuples/s from one node to another."""
    print(f"-- stream: {n:,} tuples in batches of {b:,}")
    sink = Sink(addr="127.0.0.1:0", transport="tcp").start()
    source = Source(addr="127.0.0.1:0", transport="tcp").start()
    try:
        batches = [
            [(sink.addr, k, lmax(k)) for k in range(i, min(i + b, n))] for i in range(0, n, b)
        ]
        t0 = time.perf_counter()
        for rows in batches:
            source.async_do(functools.partial(_insert_src, rows=rows))
        deadline = time.monotonic() + 120
        while sink.stats()["received_tuples"] < n and time.monotonic() < deadline:
            time.sleep(0.002)
        sink.sync_do(lambda p: None)  # the tick applying the last frame has ended
        elapsed = time.perf_counter() - t0
        s_sink, s_src = sink.stats(), source.stats()
        best = sink.sync_do(lambda p: {r.bucket: r.v for r in p.best})
    finally:
        source.stop()
        sink.stop()
    got = s_sink["received_tuples"]
    rate = got / elapsed
    print(f"   sent {s_src['sent_tuples']:,} tuples in {s_src['sent']:,} frames")
    print(f"   applied {got:,} tuples in {elapsed:.2f} s: {rate:,.0f} tuples/s")
    print(
        f"   sink tick latency p50 {s_sink.get('tick_ms_p50', 0):.2f} ms, "
        f"p99 {s_sink.get('tick_ms_p99', 0):.2f} ms over {s_sink['ticks']} ticks"
    )
    print(f"   ratio vs target {rate / TARGET:.2f}x")
    want = {bk: lmax(max(k for k in range(bk, n, 1000))) for bk in range(min(n, 1000))}
    v.check("zero loss", got == n and best == want, f"{got:,} of {n:,} tuples, contents right")
    v.check("throughput", rate >= TARGET, f"{rate:,.0f} >= {TARGET:,} tuples/s")


def by_layout(layout: str, keys: int, section: Any) -> None:
    """Run ``section(kvs, verdict)`` in the ``--layout`` asked: with each server in a process
    of its own (``kvs`` None: the section starts them), then with the servers as threads of
    this process around a ``KVS`` of ``keys`` keys started here; the verdict on the first
    when both run."""
    if layout in ("process", "both"):
        section(None, True)
    if layout in ("one", "both"):
        kvs = start_kvs(keys)
        try:
            section(kvs, layout == "one")
        finally:
            kvs.stop()


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    ap.add_argument("--only", choices=["latency", "concurrency", "stream"])
    ap.add_argument("--keys", type=int, default=100_000, help="keys in the KVS node")
    ap.add_argument("--requests", type=int, default=2_000, help="latency: requests per round")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tuples", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=2_000)
    ap.add_argument(
        "--stages",
        action="store_true",
        help="latency and concurrency: time each stage of a request on the node's thread "
        "(adds ~1 us a stage)",
    )
    ap.add_argument(
        "--layout",
        choices=["process", "one", "both"],
        default="process",
        help="latency and concurrency: each server in a process of its own (the default), "
        "all three as threads of this process (the layout before; no verdict unless alone), "
        "or both",
    )
    ap.add_argument("--one-process", action="store_true", help="the same as --layout one")
    ap.add_argument("--client", help=argparse.SUPPRESS)  # the child process
    ap.add_argument("--server", help=argparse.SUPPRESS)  # a server's process
    args = ap.parse_args(argv)
    if args.client:
        client_main(json.loads(args.client))
        return 0
    if args.server:
        server_main(json.loads(args.server))
        return 0
    layout = "one" if args.one_process else args.layout
    quick = args.quick
    keys = 10_000 if quick else args.keys
    n_lat = 300 if quick else args.requests
    n_conc = 60 if quick else 250
    rounds = 1 if quick else args.rounds
    header(
        "a node on TCP loopback: latency, concurrency, stream",
        {
            "KVS keys": keys,
            "clients": args.clients,
            "rounds": rounds,
            **(
                {
                    "servers": {
                        "process": "a process each",
                        "one": "threads of one process",
                        "both": "a process each, then threads of one process",
                    }[layout]
                }
                if args.only in (None, "latency", "concurrency")
                else {}
            ),
            "machine": f"{load_average()} at the start",
        },
    )
    v = Verdicts()
    if args.only in (None, "latency"):
        by_layout(
            layout,
            keys,
            lambda kvs, verdict: latency(v, kvs, n_lat, keys, rounds, args.stages, verdict=verdict),
        )
    if args.only in (None, "concurrency"):
        by_layout(
            layout,
            keys,
            lambda kvs, verdict: concurrency(
                v, kvs, n_conc, args.clients, keys, rounds, args.stages, verdict=verdict
            ),
        )
    if args.only in (None, "stream"):
        stream(v, 20_000 if quick else args.tuples, args.batch)
    print(f"   machine: {load_average()} at the end")
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
