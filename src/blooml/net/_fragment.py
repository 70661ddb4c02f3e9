"""Fragmentation of envelopes larger than one UDP datagram, and their bounded reassembly.

A node sends an envelope that does not fit one datagram as ``count`` fragment datagrams::

    fragment = [1, header: bin, chunk: bin, signature: bin | nil]      (a msgpack array of 4)
    header   = message id (16 random bytes), total length, index, count (u32 each),
               timestamp (ms, i64), all big-endian

With a cluster key each fragment is signed (HMAC-SHA256 of a domain tag, the header and the
chunk) and its timestamp must be within the window, so a forged or stale fragment is refused
before it touches any reassembly buffer; the reassembled envelope is then checked as any other
(its own signature, the replay guard). What a receiver keeps is bounded: per sender at most
``per_peer`` incomplete messages (the oldest is evicted first), at most ``max_bytes`` buffered
over all of them, and an incomplete message is given up ``timeout`` seconds after its first
fragment arrived. A message is lost whole if any of its fragments is lost (UDP: at most once).
"""

from __future__ import annotations

import hmac
import os
import struct
from collections import OrderedDict
from hashlib import sha256
from typing import Any

from blooml.errors import CodecError
from blooml.net._envelope import split_outer

__all__ = ["FRAGMENT_OVERHEAD", "Reassembler", "fragment", "is_fragment"]

_HEADER = struct.Struct(">16sIIIq")
_TAG = b"blooml-fragment\x00"
#: The fragment format version (independent of the envelope's: a fragment carries bytes).
FRAGMENT_VERSION = 1
#: Bytes of a fragment datagram around its chunk (array, version, bin headers, signature).
FRAGMENT_OVERHEAD = 1 + 1 + 2 + _HEADER.size + 5 + 2 + 32


def is_fragment(data: bytes) -> bool:
    """Whether a datagram is a fragment (a msgpack array of 4) rather than an envelope."""
    return len(data) > 1 and data[0] == 0x94


def _bin(b: bytes) -> bytes:
    n = len(b)
    if n < 0x100:
        return b"\xc4" + bytes((n,)) + b
    if n < 0x10000:
        return b"\xc5" + n.to_bytes(2, "big") + b
    return b"\xc6" + n.to_bytes(4, "big") + b


def fragment(data: bytes, max_datagram: int, key: bytes | None, ts: float) -> list[bytes]:
    """Cut ``data`` (an encoded envelope) into fragment datagrams of at most ``max_datagram``
    bytes each, signed under ``key`` if given, stamped ``ts`` (seconds since the epoch)."""
    room = max_datagram - FRAGMENT_OVERHEAD
    if room < 64:
        raise CodecError(
            "bad_option", f"max_datagram={max_datagram} leaves no room for fragments", max_datagram
        )
    count = -(-len(data) // room)
    msg_id = os.urandom(16)
    stamp = int(ts * 1000)
    out = []
    for i in range(count):
        header = _HEADER.pack(msg_id, len(data), i, count, stamp)
        chunk = data[i * room : (i + 1) * room]
        sig = hmac.new(key, _TAG + header + chunk, sha256).digest() if key else None
        out.append(
            b"\x94"
            + bytes((FRAGMENT_VERSION,))
            + _bin(header)
            + _bin(chunk)
            + (b"\xc0" if sig is None else _bin(sig))
        )
    return out


class _Partial:
    __slots__ = ("chunks", "count", "first", "size", "total")

    def __init__(self, total: int, count: int, now: float) -> None:
        self.total = total
        self.count = count
        self.first = now
        self.size = 0
        self.chunks: dict[int, bytes] = {}


class Reassembler:
    """Collects fragments into envelopes, within fixed bounds (see the module docstring).

    Args:
        max_message: the largest envelope reassembled (bytes); a fragment announcing more is
            refused (``too_large``).
        max_bytes: bytes buffered over all incomplete messages; the oldest are evicted.
        per_peer: incomplete messages kept per sender; the oldest is evicted.
        max_partial: incomplete messages kept over all senders; the oldest is evicted.
        timeout: seconds an incomplete message waits for its missing fragments.
        key: the cluster key, if any (fragments must then be signed with it).
        window: seconds a signed fragment's timestamp may differ from the receiver's clock.
    """

    def __init__(
        self,
        *,
        max_message: int,
        max_bytes: int,
        per_peer: int = 8,
        max_partial: int = 1024,
        timeout: float = 5.0,
        key: bytes | None = None,
        window: float = 30.0,
    ) -> None:
        self.max_message = max_message
        self.max_bytes = max_bytes
        self.per_peer = per_peer
        self.max_partial = max_partial
        self.timeout = timeout
        self.key = key
        self.window = window
        self._partial: OrderedDict[tuple[Any, bytes], _Partial] = OrderedDict()
        self._per_source: dict[Any, int] = {}
        self._done: OrderedDict[tuple[Any, bytes], None] = OrderedDict()
        self.buffered = 0
        #: Incomplete messages given up: ``{"timeout": n, "evicted": n}``.
        self.lost: dict[str, int] = {"timeout": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self._partial)

    def add(self, source: Any, data: bytes, now: float, wall: float) -> bytes | None:
        """Take one fragment datagram from ``source`` (the sender's socket address); return
        the whole envelope once its last fragment arrived, else ``None``.

        ``now`` is a monotonic time (for time-outs), ``wall`` the wall clock (for the
        timestamp window). Raises :class:`~blooml.errors.CodecError` (``malformed``,
        ``version``, ``unsigned``, ``bad_signature``, ``stale``, ``too_large``) for a fragment
        that is refused; it then changes nothing.
        """
        self.expire(now)
        items = split_outer(data, 4)
        if items is None:
            raise CodecError("malformed", "not a fragment")
        version, (header, chunk, sig) = items
        if version != FRAGMENT_VERSION:
            raise CodecError("version", f"unknown format version {version!r}", version)
        if header is None or chunk is None or len(header) != _HEADER.size:
            raise CodecError("malformed", "bad fragment header")
        if self.key:
            if sig is None:
                raise CodecError("unsigned", "fragment is not signed")
            good = hmac.new(self.key, _TAG + header + chunk, sha256).digest()
            if not hmac.compare_digest(sig, good):
                raise CodecError("bad_signature", "fragment signature does not match")
        msg_id, total, index, count, stamp = _HEADER.unpack(header)
        if self.key and abs(wall - stamp / 1000.0) > self.window:
            raise CodecError(
                "stale", f"fragment timestamp {stamp / 1000.0:.3f} is outside the window", stamp
            )
        if total > self.max_message:
            raise CodecError(
                "too_large", f"a message of {total} bytes (the limit is {self.max_message})", total
            )
        if not (0 < count <= total and index < count and 0 < len(chunk) <= total):
            raise CodecError("malformed", f"bad fragment {index} of {count} ({total} bytes)")
        ident = (source, msg_id)
        if ident in self._done:
            return None  # a duplicate of a message already reassembled
        part = self._partial.get(ident)
        if part is None:
            while self._per_source.get(source, 0) >= self.per_peer:
                self._evict(next(k for k in self._partial if k[0] == source), "evicted")
            while len(self._partial) >= self.max_partial:
                self._evict(next(iter(self._partial)), "evicted")
            part = self._partial[ident] = _Partial(total, count, now)
            self._per_source[source] = self._per_source.get(source, 0) + 1
        elif part.total != total or part.count != count:
            self._evict(ident, "evicted")  # inconsistent fragments (keyless forgery): give up
            raise CodecError("malformed", "fragment disagrees with the others of its message")
        if index in part.chunks:
            return None
        part.chunks[index] = chunk
        part.size += len(chunk)
        self.buffered += len(chunk)
        if part.size > part.total:
            self._evict(ident, "evicted")
            raise CodecError("malformed", "fragments longer than their message")
        while self.buffered > self.max_bytes and self._partial:
            oldest = next(iter(self._partial))
            self._evict(oldest, "evicted")
            if oldest == ident:
                return None
        if len(part.chunks) < part.count:
            return None
        self._forget(ident)
        self._done[ident] = None
        if len(self._done) > 1024:
            self._done.popitem(last=False)
        whole = b"".join(part.chunks[i] for i in range(part.count))
        if len(whole) != part.total:
            raise CodecError("malformed", "fragments do not add up to their message")
        return whole

    def expire(self, now: float) -> None:
        """Give up the incomplete messages older than the time-out."""
        while self._partial:
            ident, part = next(iter(self._partial.items()))
            if now - part.first <= self.timeout:
                break
            self._evict(ident, "timeout")

    def _evict(self, ident: tuple[Any, bytes], why: str) -> None:
        self._forget(ident)
        self.lost[why] += 1

    def _forget(self, ident: tuple[Any, bytes]) -> None:
        part = self._partial.pop(ident)
        self.buffered -= part.size
        n = self._per_source[ident[0]] - 1
        if n:
            self._per_source[ident[0]] = n
        else:
            del self._per_source[ident[0]]
