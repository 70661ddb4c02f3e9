"""The state every part of a network node shares, and the helpers they all use.

:class:`blooml.net.node.Node` is assembled from one class per concern: the transport
(``_transport``: sockets, sending, receiving, name resolution), its TCP peers
(``_peers``), the tick scheduling loop (``_schedule``) and the isolation policy
(``_policy``: what happens to input when a tick fails). Each is a mixin of
:class:`NodeBase`, which declares the attributes ``Node.__init__`` sets (for the type
checker) and holds the counting and reporting helpers every part uses.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import socket
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blooml.errors import RuleQuarantinedError
from blooml.net._coltypes import ColumnTypes
from blooml.net._envelope import ReplayGuard
from blooml.net._fragment import Reassembler
from blooml.net._input import Unit

if TYPE_CHECKING:
    from blooml.net._peers import _Peer

log = logging.getLogger("blooml.net")


class NodeBase:
    """The attributes a node's parts share (set by ``Node.__init__``) and their helpers."""

    rt: Any
    program: Any
    transport: str | None
    key: bytes | None
    guard: ReplayGuard | None
    aliases: set[str]
    _seq: int
    _heads: dict[str, bytes]
    _heads_of: str
    _wildcard_port: int | None
    inbox_limit: int
    max_datagram: int
    max_message: int
    send_buffer: int | None
    inbox_bytes: int | None
    window: float
    quarantine_after: int
    isolation_trials: int
    quarantined: dict[int, RuleQuarantinedError]
    discarded: deque[dict[str, list[Any]]]
    running: bool
    drop_rate: float
    max_delay: float
    batch_limit: int
    batch_bytes: int
    sock: socket.socket | None
    _units: list[Unit]
    _types: ColumnTypes | None
    _arities: dict[str, int] | None
    _streak: dict[int | None, int]
    _inbox_size: int
    _reassembly: Reassembler | None
    _closing: bool
    _thread: threading.Thread | None
    _ident: int | None
    _loop: asyncio.AbstractEventLoop | None
    _wake: asyncio.Event | None
    _parked: bool
    _step_soon: bool
    _inbox: deque[bytes]
    _calls: deque[tuple[Callable[[Any], Any], concurrent.futures.Future[Any], str]]
    _last_error: BaseException | None
    _tick_cbs: list[Callable[[Any], Any]]
    _error_cbs: list[Callable[[BaseException], Any]]
    _watches: dict[str, list[Callable[[list[Any]], Any]]]
    _logged: set[str]
    _latency: deque[float]
    _pre_start: list[tuple[str, bytes]]
    _pre_start_size: int
    _peers: dict[str, _Peer]
    _resolved: dict[str, tuple[tuple[str, int], float]]
    _resolving: dict[str, list[bytes]]
    _logged_resolve: set[str]
    _udp_inode: int | None
    _server: asyncio.Server | None
    _conns: set[asyncio.Transport]
    _udp: asyncio.DatagramTransport | None
    _fail_backoff_until: float
    _stop_deadline: float
    _rng: random.Random
    _stats: dict[str, Any]
    throttle_after: int
    throttle_share: float
    throttle_queue: int
    throttle_idle: float
    refusals: deque[Any]
    _logged_refusals: set[str]
    _strikes: dict[str, int]
    _throttled_now: set[str]
    _slow: deque[tuple[str, Any]]
    _in_slow: bool
    _suspect: tuple[Any, type[BaseException]] | None
    _slow_credit: float
    _last_input: float
    peer_timeout: float
    _epoch: int
    _acks_due: dict[str, int]
    _received_from: dict[str, int]
    _liveness: dict[str, list[Any]]
    _down: set[str]

    if TYPE_CHECKING:  # provided by the other parts (see the module docstring)

        def sync_do(self, fn: Callable[[Any], Any], timeout: float | None = 30.0) -> Any: ...
        def accept(self, data: bytes) -> bool: ...
        def _datagram(self, data: bytes, source: Any) -> None: ...
        def _inbox_put(self, data: bytes, notify: bool = True) -> bool: ...
        def _arrived(self) -> None: ...
        def _queue(
            self,
            what: str,
            fn: Callable[..., Any],
            *args: Any,
            fut: concurrent.futures.Future[Any] | None = None,
            sender: str | None = None,
        ) -> Any: ...
        def _run_call(
            self, fn: Callable[[Any], Any], fut: concurrent.futures.Future[Any], what: str
        ) -> None: ...
        def _tick(self, t0: float | None = None) -> bool: ...
        def _peer(self, addr: str) -> _Peer: ...
        def _send_limit(self) -> int: ...
        def _send(self, addr: str, groups: dict[str, list[bytes]], tuples: int = 0) -> None: ...
        def _inbox_capacity(self) -> int: ...
        def _send_failed(self, addr: str, exc: BaseException, n: int = 1) -> None: ...
        def _refuse(self, sender: str, chan_rows: dict[str, int], exc: BaseException) -> None: ...
        def _enqueue(self, sender: str, batches: Any) -> bool: ...
        def _throttled(self, sender: str, batches: Any) -> bool: ...
        def _slow_step(self, idle: bool) -> None: ...
        def _credit(self, seconds: float) -> None: ...
        def _drain_udp(self) -> None: ...
        def _flush_acks(self) -> None: ...

    def _count(self, name: str, n: int = 1) -> None:
        self._stats[name] += n

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

    def on_own_thread(self) -> bool:
        """Whether the caller runs on this node's thread."""
        return threading.get_ident() == self._ident

    def _wake_soon(self) -> None:
        if self._wake is not None and self._loop is not None:
            if self.on_own_thread():
                self._wake.set()
            else:
                self._loop.call_soon_threadsafe(self._wake.set)
