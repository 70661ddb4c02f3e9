"""A node's outgoing TCP connections, one per peer address: bounded queues of frames, and a
task per peer that connects (again after the peer restarts) and writes them."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque

from blooml.net._nodebase import NodeBase
from blooml.net._transport import parse_addr

#: Seconds a TCP connect may take. Generous: the clock runs while the node's own ticks block
#: its loop (seconds, when they decode large states), and with 2 s a busy node never connected.
CONNECT_TIMEOUT = 30.0


def _raw_socket(transport: asyncio.BaseTransport) -> socket.socket | None:
    """The socket of asyncio's selector transport for a TCP connection, which ``push``
    writes while the transport holds nothing (as the transport's own ``write`` does first,
    without its checks and calls: a reply costs some 4,800 instructions less); ``None``
    for any other transport (another event loop's: uvloop's, Windows' proactor), which is
    then written through. Called on the loop."""
    if not isinstance(asyncio.get_running_loop(), asyncio.SelectorEventLoop):
        return None
    sock = getattr(transport, "_sock", None)
    if type(sock) is socket.socket and sock.type == socket.SOCK_STREAM and not sock.getblocking():
        return sock
    return None


class _Peer:
    """An outgoing TCP connection to one address: frames queue here; a task connects (again
    after the peer restarts) and writes them."""

    def __init__(self, node: NodeBase, addr: str, limit: int) -> None:
        self.node = node
        self.addr = addr
        self.frames: deque[bytes] = deque()
        self.limit = limit  # bytes queued at most
        self.queued = 0
        self.inflight = 0  # frames written but not drained yet
        # the sizes of the last frames written to the transport, in order (direct writes
        # and batches alike): what its buffer still holds is the tail of them
        self.written: deque[int] = deque(maxlen=100_000)
        self.event = asyncio.Event()
        self.writer: asyncio.StreamWriter | None = None
        self.out: asyncio.WriteTransport | None = None  # the writer's transport
        # its socket, written directly while the transport holds nothing (``_raw_socket``)
        self.sock: socket.socket | None = None
        self.task = asyncio.get_running_loop().create_task(self.run())

    def push(self, frame: bytes) -> None:
        t = self.out
        if (
            t is not None
            and self.writer is not None
            and not self.frames
            and not t.is_closing()
            and t.get_write_buffer_size() == 0
        ):
            # an idle connection: write now, from the tick that sent it (one syscall,
            # no hand-off to the peer's task); what the socket did not take waits in
            # the transport, and the next frames queue behind it for the task
            sock = self.sock
            if sock is None:
                t.write(frame)
            else:  # what the transport's write does first, without its checks
                try:
                    n = sock.send(frame)
                except (BlockingIOError, InterruptedError):
                    n = 0
                except OSError:  # the transport's write meets it again and closes
                    n = 0
                if n < len(frame):
                    t.write(memoryview(frame)[n:] if n else frame)
            self.written.append(len(frame))
            return
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
                self.out = writer.transport
                self.sock = _raw_socket(writer.transport)
                asyncio.get_running_loop().create_task(self._watch(reader, writer))
            if not self.frames:
                self.event.clear()
                await self.event.wait()
                continue
            sizes = [len(f) for f in self.frames]
            data, n = self.take()
            w = self.writer
            if w is None:
                continue
            self.inflight = n
            self.written.extend(sizes)
            try:
                w.write(data)
                await w.drain()
            except (OSError, RuntimeError):
                node._count("send_dropped", n)
                self.writer = None
            self.inflight = 0
        last = self.writer
        if last is not None:
            if last.transport.get_write_buffer_size():
                # frames push() wrote directly may still sit in the transport: let them
                # leave before closing (close() bounds the wait)
                last.transport.set_write_buffer_limits(high=0)
                with contextlib.suppress(OSError, RuntimeError):
                    await last.drain()
            last.close()

    def _unsent(self) -> int:
        """Frames written to the transport but not wholly handed to the kernel yet (still in
        its buffer: aborting loses them). A frame the kernel took leaves after the close, so
        it is not counted as dropped."""
        w = self.writer
        if w is None:
            return self.inflight
        buffered = w.transport.get_write_buffer_size()
        lost = held = 0
        for size in reversed(self.written):
            if held >= buffered:
                break
            held += size
            lost += 1
        return lost

    async def close(self, budget: float) -> None:
        """Flush within ``budget`` seconds; then drop what is left (counted) and close."""
        self.event.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), budget)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()
            self.node._count("send_dropped", self.take()[1] + self._unsent())
        if self.writer is not None:
            self.writer.transport.abort()  # a peer that never reads cannot hold us


class Peers(NodeBase):
    """The node's outgoing TCP connections (``_peers``: address -> :class:`_Peer`)."""

    def _send_limit(self) -> int:
        return 2 * self.max_message if self.send_buffer is None else self.send_buffer

    def _peer(self, addr: str) -> _Peer:
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peers[addr] = _Peer(self, addr, self._send_limit())
        return peer
