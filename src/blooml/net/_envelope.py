"""Envelope framing and authentication: what one datagram or TCP frame carries (all the
tuples one tick sends to one address), signed with a cluster key and checked on receipt.

::

    data = encode_envelope("127.0.0.1:7000", [("vote", [row_bytes, ...]), ...], key=None)
    env = decode_envelope(data, key=None)   # Envelope(version, sender, ts, batches)

``batches`` take rows already encoded with :func:`~blooml.net._valuecodec.encode_row` (the
runtime encodes each row at the sending rule, so an unencodable value fails that rule's
tick). Layout (format version 2)::

    outer = [2, body: bin, signature: bin | nil]
    body  = [sender: str, destination: str, sequence: int, timestamp_ms: int,
             [[channel: str, [row, ...]], ...]]

With a cluster key the signature is HMAC-SHA256 of a domain tag and ``body``, so it covers the
sender, the destination and the sender's sequence number: a receiver refuses a datagram
addressed to another node (``misdirected``), a timestamp more than ``window`` seconds from its
clock (``stale``) and a signature it has seen within the window (``replay``). Format version 1
(``[1, body, sig]``, ``body = [sender, timestamp_ms, batches]``, no destination) is still read
by a node without a key and refused by a node with one (``version``).

Also here: the size limits of a datagram and a message (``MAX_DATAGRAM``, ``MAX_MESSAGE``,
``ENVELOPE_SLACK``) and :func:`encode_for_channel`, the check at a sending rule that a row
encodes and fits in one message; and :func:`split_outer`, which UDP fragments share.

Not here: how a value or a row becomes bytes and back (msgpack, lattices as extension types,
:func:`~blooml.net._valuecodec.register`): that is the value codec,
:mod:`blooml.net._valuecodec`, imported from here, never the other way round. Nor how a
message is fragmented over UDP (:mod:`blooml.net._fragment`) or sent (the transports). Users
import these names from :mod:`blooml.net.codec` (or :mod:`blooml.net`).

The request path of a TCP node runs :func:`envelope_head`, :func:`encode_envelope_after` and
:func:`decode_envelope` for every request: they read the value codec's packers and decoder
(``_local``, ``_packers``, ``_Decoder``) as globals of this module, so the split added no call
or attribute lookup to them (their bytecode is what it was in one module; issue 25 counts the
instructions of a request). Keep it so.
"""

from __future__ import annotations

import heapq
import hmac
import struct
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from hashlib import sha256
from typing import Any, NamedTuple

import msgpack

from blooml.errors import CodecError
from blooml.net._valuecodec import (
    _decode_error,
    _Decoder,
    _local,
    _packb,
    _packers,
    encode_row,
)

#: The envelope format version this codec writes (version 1, unbound, is read without a key).
FORMAT_VERSION = 2
#: Domain tag of the version-2 envelope signature (a version-1 signature covers no
#: destination, so the two can never stand for each other).
_SIG_TAG = b"blooml-envelope-v2\x00"
#: The largest UDP datagram a node sends or accepts (bytes); a larger message is fragmented.
MAX_DATAGRAM = 65_000
#: The largest message (envelope) a node sends or accepts (bytes): one TCP frame, or one
#: envelope reassembled from UDP fragments; a larger tuple is an error at its rule.
MAX_MESSAGE = 16 * 1024 * 1024


#: Bytes of a datagram kept for the envelope around the tuples: header, sender, timestamp,
#: signature (generous).
ENVELOPE_SLACK = 160


def encode_for_channel(
    row: Sequence[Any],
    chan: str,
    columns: Sequence[str],
    sender: Any,
    where: str = "",
    *,
    udp: bool,
    max_datagram: int = MAX_DATAGRAM,
    max_message: int = MAX_MESSAGE,
) -> bytes:
    """Encode one tuple a rule sends on channel ``chan`` (the transports' ``check`` at the
    sending rule): a value that cannot travel is a :class:`CodecError` naming its column, and
    so is a tuple too large for one message of ``max_message`` bytes, on either transport
    (``udp`` and ``max_datagram`` no longer limit it: over UDP a tuple larger than a datagram
    travels in fragments)."""
    try:  # the common case first: the message's origin is spelled out only for an error
        wire = _packb(tuple(row))
    except (CodecError, ValueError, TypeError, OverflowError):
        wire = encode_row(row, f"{where}: channel {chan!r}", columns)  # raises, naming it
    room = max_message - ENVELOPE_SLACK - len(chan) - len(str(sender))
    if len(wire) > room:
        origin = f"{where}: channel {chan!r}"
        raise CodecError(
            "too_large",
            f"the tuple encodes to {len(wire)} bytes, more than one message holds ({room}; "
            f"max_message={max_message}): send smaller tuples (deltas), or raise "
            "blooml.net.node(p).max_message on every node",
            tuple(row),
            origin,
        )
    return wire


#: the msgpack headers of arrays of 0..15 items (one byte each)
_FIX_ARRAYS = [bytes((0x90 | n,)) for n in range(16)]


def _array_header(n: int) -> bytes:
    """The msgpack array header of ``n`` items."""
    if n < 16:
        return _FIX_ARRAYS[n]
    if n < 0x10000:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def encode_envelope(
    sender: str,
    batches: Iterable[tuple[str, Sequence[bytes]]],
    key: bytes | None = None,
    ts: float | None = None,
    *,
    dest: str = "",
    seq: int = 0,
) -> bytes:
    """One datagram: the rows (each already :func:`encode_row`-ed) of each channel.

    Args:
        sender: the sending node's address.
        batches: ``(channel, [row bytes, ...])`` pairs.
        key: a cluster key: the body (sender, destination, sequence, timestamp and rows) is
            signed with HMAC-SHA256.
        ts: the send time in seconds since the epoch (default ``time.time()``).
        dest: the address the datagram is sent to; a keyed receiver refuses a datagram
            whose destination is not one of its addresses (``misdirected``).
        seq: the sender's sequence number (a node numbers its datagrams 1, 2, ...), so
            that two datagrams with the same rows never share a signature.
    """
    return encode_envelope_after(envelope_head(sender, dest), batches, key, ts, seq)


def envelope_head(sender: str, dest: str) -> bytes:
    """The first bytes of the body of every envelope ``sender`` sends to ``dest`` (the
    body's array header and those two fields, packed): the same for every envelope to one
    peer, so a node packs them once per destination and passes them to
    :func:`encode_envelope_after`. They are part of the signed body: a signature covers
    them as it covers the sequence number and timestamp that follow."""
    return b"\x95" + _packb(sender) + _packb(dest)


def encode_envelope_after(
    head: bytes,
    batches: Iterable[tuple[str, Sequence[bytes]]],
    key: bytes | None = None,
    ts: float | None = None,
    seq: int = 0,
) -> bytes:
    """:func:`encode_envelope` with its sender and destination packed already
    (:func:`envelope_head`): the same bytes, and the same signature over the whole body
    (sender, destination, sequence, timestamp and rows) when ``key`` is given."""
    stamp = int((time.time() if ts is None else ts) * 1000)
    try:  # (``_packers()``, without its call)
        plain = _local.packers.plain
    except AttributeError:
        plain = _packers().plain
    # the body, joined once: the head; the sequence and timestamp (plain ints, one call of
    # the plain packer for both: an array of 2 whose one-byte header, 0x92, is dropped, its
    # items following the destination); the batches' array header (set after the loop);
    # each batch's head (its array of 2 and the channel's name), its rows' array header and
    # its rows
    parts = [head, plain.pack((seq, stamp))[1:], b""]
    heads = _CHAN_HEADS
    n = 0
    for chan, rows in batches:
        n += 1
        k = len(rows)
        parts.append(heads.get(chan) or _chan_head(chan))
        parts.append(_FIX_ARRAYS[k] if k < 16 else _array_header(k))
        parts += rows
    parts[2] = _FIX_ARRAYS[n] if n < 16 else _array_header(n)
    body = b"".join(parts)
    sig = _sign(key, body) if key is not None else None
    size = len(body)
    return (
        _OUTER_HEAD
        + (_BIN8[size] if size < 0x100 else _bin_header(size))
        + body
        + (b"\xc0" if sig is None else _bin_header(len(sig)) + sig)
    )


#: the start of each channel's batch in an envelope: its array of 2 and the channel's name,
#: packed (a program has a few channels)
_CHAN_HEADS: dict[str, bytes] = {}


def _chan_head(chan: str) -> bytes:
    hit = _CHAN_HEADS.get(chan)
    if hit is None:
        hit = b"\x92" + _packb(chan)
        if type(chan) is str and len(_CHAN_HEADS) < 1024:
            _CHAN_HEADS[chan] = hit
    return hit


#: ``[FORMAT_VERSION, ...`` of an envelope's outer array of 3, packed.
_OUTER_HEAD = b"\x93" + bytes((FORMAT_VERSION,))
#: the same, followed by the ``bin 8`` header of a body under 256 bytes
_SHORT_HEAD = _OUTER_HEAD + b"\xc4"


#: the msgpack ``bin`` headers of 0..255 bytes
_BIN8 = [b"\xc4" + bytes((n,)) for n in range(0x100)]


def _bin_header(n: int) -> bytes:
    """The msgpack ``bin`` header of ``n`` bytes (what the packer writes before them)."""
    if n < 0x100:
        return _BIN8[n]
    if n < 0x10000:
        return b"\xc5" + struct.pack(">H", n)
    return b"\xc6" + struct.pack(">I", n)


def _sign(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, _SIG_TAG + body, sha256).digest()


_tuple_new = tuple.__new__


class Envelope(NamedTuple):
    """A decoded datagram.

    Attributes:
        version: the format version.
        sender: the sender's address.
        ts: the send time (seconds since the epoch).
        batches: ``(channel, (row, ...))`` pairs, rows as tuples.
        dest: the address it was sent to (``""`` in format version 1).
        seq: the sender's sequence number (``0`` in format version 1).
    """

    version: int
    sender: str
    ts: float
    batches: tuple[tuple[str, tuple[tuple[Any, ...], ...]], ...]
    dest: str = ""
    seq: int = 0


class ReplayGuard:
    """Signatures of the accepted datagrams whose timestamps are still within the window.

    A signature is remembered until its *timestamp* (not its receipt) is more than ``window``
    seconds in the past, that is until the datagram would be refused as ``stale`` anyway: a
    datagram stamped ahead of the receiver's clock is remembered correspondingly longer. At
    most ``capacity`` signatures are kept; when full, the one with the oldest timestamp is
    forgotten and every timestamp up to it is refused from then on (``replay``), so a forgotten
    signature can never be accepted again (a flood of more than ``capacity`` datagrams per
    window makes the node refuse datagrams older than the ones it forgot).
    """

    def __init__(self, window: float = 30.0, capacity: int = 100_000) -> None:
        if not window > 0:
            raise CodecError("bad_option", f"ReplayGuard(window={window!r}): must be > 0", window)
        if not (isinstance(capacity, int) and capacity > 0):
            raise CodecError(
                "bad_option", f"ReplayGuard(capacity={capacity!r}): must be an int > 0", capacity
            )
        self.window = window
        self.capacity = capacity
        self._seen: dict[bytes, float] = {}
        self._heap: list[tuple[float, bytes]] = []
        #: Timestamps at or below this were forgotten to make room: refused.
        self.floor = float("-inf")

    def __len__(self) -> int:
        return len(self._seen)

    def check(self, sig: bytes, ts: float, now: float) -> None:
        """Raise ``CodecError`` if ``ts`` is outside the window or ``sig`` was seen; else
        remember ``sig`` until ``ts + window``."""
        if abs(now - ts) > self.window:
            raise CodecError("stale", f"timestamp {ts:.3f} is outside the {self.window}s window")
        seen, heap = self._seen, self._heap
        while heap and heap[0][0] < now - self.window:  # would be refused as stale now
            seen.pop(heapq.heappop(heap)[1], None)
        if sig in seen:
            raise CodecError("replay", "a datagram with this signature was received before")
        if ts <= self.floor:
            raise CodecError(
                "replay",
                f"timestamp {ts:.3f} is not after {self.floor:.3f}, the newest of the "
                f"signatures forgotten to stay within {self.capacity} (a flood?)",
            )
        while len(seen) >= self.capacity:
            old_ts, old = heapq.heappop(heap)
            del seen[old]
            self.floor = max(self.floor, old_ts)
        seen[sig] = ts
        heapq.heappush(heap, (ts, sig))


#: What a receiver answers to: one address, several, or a predicate on the destination.
Destination = str | Collection[str] | Callable[[str], bool]


def _addressed_to(dest: Destination, to: str) -> bool:
    if isinstance(dest, str):
        return to == dest
    if callable(dest):
        return bool(dest(to))
    return to in dest


def decode_envelope(
    data: bytes,
    key: bytes | None = None,
    guard: ReplayGuard | None = None,
    now: float | None = None,
    *,
    dest: Destination | None = None,
) -> Envelope:
    """Check and decode one datagram.

    Args:
        data: the datagram (or TCP frame).
        key: the cluster key: the datagram must be signed with it, in format version 2.
        guard: refuses replays (signatures seen within the window) and stale timestamps.
        now: the receiver's clock (default ``time.time()``).
        dest: the receiver's address(es), or a predicate on the destination: a datagram sent
            to another address is refused (``misdirected``). With a key, the destination is
            checked before anything is decoded. Without a key it is not checked (anyone can
            forge anything then; and a node reached by a host name would refuse its traffic).

    Raises :class:`~blooml.errors.CodecError` with ``reason`` one of ``malformed``,
    ``version``, ``too_deep``, ``lattice_rejected``, ``unknown_lattice``, ``unsigned``,
    ``bad_signature``, ``misdirected``, ``stale``, ``replay``.
    """
    # the common case read at once (as ``_split_envelope`` reads it first): version 2, a
    # body of under 256 bytes, no signature
    if not key and data[-1:] == b"\xc0" and data[:3] == _SHORT_HEAD and data[3] == len(data) - 5:
        version, body, sig = FORMAT_VERSION, data[4:-1], None
    else:
        version, body, sig = _split_envelope(data)
    if key:
        if version != FORMAT_VERSION:
            raise CodecError(
                "version",
                f"format version {version} does not bind its destination: a node with a "
                f"cluster key reads version {FORMAT_VERSION} only (upgrade the sender)",
                version,
            )
        if sig is None:
            raise CodecError("unsigned", "datagram is not signed")
        if not hmac.compare_digest(sig, _sign(key, body)):
            raise CodecError("bad_signature", "datagram signature does not match")
        _, to, _, stamp = _head(body)
        if dest is not None and not _addressed_to(dest, to):
            raise CodecError("misdirected", f"the datagram is addressed to {to!r}", to)
        if guard is not None:  # a replay is refused before its rows are decoded
            guard.check(sig, stamp / 1000.0, time.time() if now is None else now)
    try:  # (``decode(body)``, one call less)
        inner = msgpack.unpackb(
            body, ext_hook=_Decoder(), use_list=False, raw=False, strict_map_key=False
        )
    except CodecError:
        raise
    except Exception as exc:
        raise _decode_error(exc) from None
    if not isinstance(inner, tuple):
        raise CodecError("malformed", "bad envelope body")
    if version == 1:
        if len(inner) != 3:
            raise CodecError("malformed", "bad envelope body")
        sender, stamp, raw = inner
        to, seq = "", 0
    else:
        if len(inner) != 5:
            raise CodecError("malformed", "bad envelope body")
        sender, to, seq, stamp, raw = inner
    # (``type(x) is``: msgpack decodes these to exactly str, int and tuple, never bool for
    # an int; a value an extension hook built, a lattice even if it subclasses one, is
    # refused here as it should be)
    if not (
        type(sender) is str
        and type(to) is str
        and type(stamp) is int
        and type(seq) is int
        and type(raw) is tuple
    ):
        raise CodecError("malformed", "bad envelope body")
    for b in raw:
        if not (type(b) is tuple and len(b) == 2):
            raise CodecError("malformed", "bad channel batch")
        chan, rows = b
        if not (type(chan) is str and type(rows) is tuple):
            raise CodecError("malformed", "bad channel batch")
        for r in rows:  # (a loop, not all() over a generator: no frame per batch)
            if type(r) is not tuple:
                raise CodecError("malformed", "bad channel batch")
    # (``Envelope(...)`` without its Python ``__new__``: the same named tuple)
    return _tuple_new(Envelope, (version, sender, stamp / 1000.0, raw, to, seq))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _head(body: bytes) -> tuple[str, str, int, int]:
    """``(sender, destination, sequence, timestamp_ms)`` of a version-2 envelope body, read
    without decoding its rows."""
    try:
        u = msgpack.Unpacker(raw=False, max_ext_len=0, max_array_len=0, max_map_len=0)
        u.feed(body)
        if u.read_array_header() != 5:
            raise ValueError("not an array of 5")
        head = (u.unpack(), u.unpack(), u.unpack(), u.unpack())
    except Exception as exc:
        raise CodecError("malformed", f"bad envelope body: {exc}") from None
    sender, to, seq, stamp = head
    if not (isinstance(sender, str) and isinstance(to, str) and _is_int(seq) and _is_int(stamp)):
        raise CodecError("malformed", "bad envelope header", head)
    return sender, to, seq, stamp


def _split_envelope(data: bytes) -> tuple[int, bytes, bytes | None]:
    """``(version, body, signature)`` of an envelope, read by hand from its first bytes.

    Nothing else is decoded before the signature is checked: a forged frame of millions of
    nested msgpack values costs a few byte comparisons, not a full decode.
    """
    n = len(data)
    # the common case read at once: version 2, a body of under 64 KiB, no signature
    if n > 5 and data[-1] == 0xC0 and data[:2] == _OUTER_HEAD:
        head = data[2]
        if head == 0xC4:
            start = 4
            end = start + data[3]
        elif head == 0xC5:
            start = 5
            end = start + ((data[3] << 8) | data[4])
        else:
            end = -1
        if end == n - 1:
            return FORMAT_VERSION, data[start:end], None
    items = split_outer(data, 3)
    if items is None:
        raise CodecError("malformed", "not an envelope")
    version, (body, sig) = items
    if version not in (1, FORMAT_VERSION):
        raise CodecError("version", f"unknown format version {version!r}", version)
    if body is None:
        raise CodecError("malformed", "envelope body is not bytes")
    return version, body, sig


def split_outer(data: bytes, n: int) -> tuple[int, list[bytes | None]] | None:
    """Read a msgpack array of ``n`` items: a small non-negative int, then ``n - 1`` items
    each ``bin`` or ``nil``; ``None`` if ``data`` is not exactly that (a different version
    number is returned for the caller to refuse). Used for envelopes and fragments."""
    if len(data) < 2 or data[0] != 0x90 | n or data[1] > 0x7F:
        return None
    version = data[1]
    pos = 2
    out: list[bytes | None] = []
    end = len(data)
    for _ in range(n - 1):
        if pos >= end:
            return None
        head = data[pos]
        if head == 0xC0:
            out.append(None)
            pos += 1
            continue
        if head == 0xC4 and pos + 2 <= end:
            size, pos = data[pos + 1], pos + 2
        elif head == 0xC5 and pos + 3 <= end:
            size, pos = int.from_bytes(data[pos + 1 : pos + 3], "big"), pos + 3
        elif head == 0xC6 and pos + 5 <= end:
            size, pos = int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
        else:
            return None
        if pos + size > end:
            return None
        out.append(data[pos : pos + size])
        pos += size
    if pos != end:
        return None
    return version, out
