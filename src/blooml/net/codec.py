"""The wire codec: msgpack with lattice values as extension types, in a versioned envelope.

Never pickle: decoding builds only plain values (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, tuples, frozensets, dicts) and lattice values of *registered* classes,
through their validating constructors, so a datagram cannot run code, and a value a lattice
rejects (``lpset([-1])``) is an error, not a half-built value.

Values::

    data = encode(value)           # bytes
    value = decode(data)           # CodecError on anything malformed

Envelopes (what one datagram or TCP frame carries: all the tuples one tick sends to one
address)::

    data = encode_envelope("127.0.0.1:7000", [("vote", [row_bytes, ...]), ...], key=None)
    env = decode_envelope(data, key=None)   # Envelope(version, sender, ts, batches)

``batches`` take rows already encoded with :func:`encode_row` (the runtime encodes each row
at the sending rule, so an unencodable value fails that rule's tick). Layout (format
version 2)::

    outer = [2, body: bin, signature: bin | nil]
    body  = [sender: str, destination: str, sequence: int, timestamp_ms: int,
             [[channel: str, [row, ...]], ...]]

With a cluster key the signature is HMAC-SHA256 of a domain tag and ``body``, so it covers the
sender, the destination and the sender's sequence number: a receiver refuses a datagram
addressed to another node (``misdirected``), a timestamp more than ``window`` seconds from its
clock (``stale``) and a signature it has seen within the window (``replay``). Format version 1
(``[1, body, sig]``, ``body = [sender, timestamp_ms, batches]``, no destination) is still read
by a node without a key and refused by a node with one (``version``).

User lattices: :func:`register` (``blooml.net.register(MyLattice)``) adds a lattice class; its
wire form is ``to_wire(value)`` (default ``value.reveal()``) and it is rebuilt with
``from_wire(state)`` (default ``Cls(state)``). The class is named on the wire by its
``wrapper_name`` (or qualified name): both ends register the same class.
"""

from __future__ import annotations

import heapq
import hmac
import struct
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from hashlib import sha256
from typing import Any, NamedTuple

import msgpack

from blooml.errors import BloomlError, CodecError
from blooml.lattices import (
    Lattice,
    l2pset,
    lbag,
    lbool,
    ldompair,
    lgcounter,
    llww,
    lmap,
    lmax,
    lmin,
    lmvreg,
    lorset,
    lpair,
    lpncounter,
    lpset,
    lset,
    lvclock,
)

__all__ = [
    "ENVELOPE_SLACK",
    "FORMAT_VERSION",
    "MAX_DATAGRAM",
    "MAX_MESSAGE",
    "Envelope",
    "decode",
    "decode_envelope",
    "encode",
    "encode_envelope",
    "encode_for_channel",
    "encode_row",
    "register",
    "registered",
]

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
#: Deepest nesting of lattice values inside lattice values accepted when decoding.
MAX_EXT_DEPTH = 32

_EXT_FROZENSET = 1
_EXT_BIGINT = 2
_EXT_NAMED = 3  # a user lattice: [name, state]
_FIRST_BUILTIN = 16


class _Kind:
    __slots__ = ("cls", "code", "from_wire", "name", "to_wire")

    def __init__(
        self,
        cls: type[Lattice],
        code: int | None,
        name: str,
        to_wire: Callable[[Any], Any],
        from_wire: Callable[[Any], Any],
    ) -> None:
        self.cls = cls
        self.code = code
        self.name = name
        self.to_wire = to_wire
        self.from_wire = from_wire


_BY_CLASS: dict[type, _Kind] = {}
_BY_CODE: dict[int, _Kind] = {}
_BY_NAME: dict[str, _Kind] = {}


def _opt(cls: type[Lattice]) -> Callable[[Any], Any]:
    return lambda s: cls() if s is None else cls(s)


def _pair_from(cls: Any) -> Callable[[Any], Any]:
    def build(s: Any) -> Any:
        if s is None:
            return cls()
        if not (isinstance(s, tuple) and len(s) == 2):
            raise CodecError("lattice_rejected", "a pair lattice needs two components", s)
        return cls(s[0], s[1])

    return build


def _counts(v: Any) -> dict[Any, int]:
    return {k: x.reveal() for k, x in v._v.reveal().items()}


def _lww_to(v: llww) -> Any:
    p = v._v.reveal()
    if p is None:
        return None
    (ts, node), written = p[0].reveal(), p[1].reveal()
    return (written, ts, node)


def _lww_from(s: Any) -> llww:
    if s is None:
        return llww()
    if not (isinstance(s, tuple) and len(s) == 3):
        raise CodecError("lattice_rejected", "llww needs (value, ts, node)", s)
    return llww(s[0], s[1], s[2])


def _tags(m: Any) -> dict[Any, Any]:
    return {k: s.reveal() for k, s in m.reveal().items()}


def _orset_to(v: lorset) -> Any:
    return (_tags(v._adds()), _tags(v._removes()))


def _orset_from(s: Any) -> lorset:
    if not (isinstance(s, tuple) and len(s) == 2 and all(isinstance(x, dict) for x in s)):
        raise CodecError("lattice_rejected", "lorset needs (adds, removes)", s)
    return lorset(s[0], s[1])


def _twop_to(v: l2pset) -> Any:
    a, r = v._v.reveal() or (lset(), lset())
    return (a.reveal(), r.reveal())


def _twop_from(s: Any) -> l2pset:
    if not (isinstance(s, tuple) and len(s) == 2):
        raise CodecError("lattice_rejected", "l2pset needs (added, removed)", s)
    return l2pset(s[0], s[1])


def _pn_to(v: lpncounter) -> Any:
    return (_counts(v.increments()), _counts(v.decrements()))


def _pn_from(s: Any) -> lpncounter:
    if not (isinstance(s, tuple) and len(s) == 2):
        raise CodecError("lattice_rejected", "lpncounter needs (increments, decrements)", s)
    return lpncounter(s[0], s[1])


def _builtin(
    code: int, cls: type[Lattice], to_wire: Callable[[Any], Any], from_wire: Callable[[Any], Any]
) -> None:
    kind = _Kind(cls, code, cls.wrapper_name or cls.__qualname__, to_wire, from_wire)
    _BY_CLASS[cls] = kind
    _BY_CODE[code] = kind
    _BY_NAME[kind.name] = kind


_reveal: Callable[[Any], Any] = Lattice.reveal
_builtin(16, lmax, _reveal, _opt(lmax))
_builtin(17, lmin, _reveal, _opt(lmin))
_builtin(18, lbool, _reveal, lbool)
# lset.reveal, not Lattice.reveal: a set grown by small merges is held as a HashTrieSet
_builtin(19, lset, lambda v: v.reveal(), lset)
_builtin(20, lpset, lambda v: v.reveal(), lpset)
_builtin(21, lbag, lambda v: dict(v.reveal()), lbag)
_builtin(22, lmap, lambda v: dict(v.reveal()), lmap)
_builtin(23, lpair, _reveal, _pair_from(lpair))
_builtin(24, ldompair, _reveal, _pair_from(ldompair))
_builtin(25, lgcounter, _counts, lgcounter)
_builtin(26, lvclock, _counts, lvclock)
_builtin(27, lpncounter, _pn_to, _pn_from)
_builtin(28, llww, _lww_to, _lww_from)
_builtin(29, lmvreg, lambda v: tuple(v._v), lmvreg)
_builtin(30, lorset, _orset_to, _orset_from)
_builtin(31, l2pset, _twop_to, _twop_from)


def register(
    cls: type[Lattice],
    *,
    to_wire: Callable[[Any], Any] | None = None,
    from_wire: Callable[[Any], Any] | None = None,
    name: str | None = None,
) -> type[Lattice]:
    """Let values of the lattice class ``cls`` travel on the wire (returns ``cls``).

    Args:
        cls: a :class:`~blooml.lattices.Lattice` subclass.
        to_wire: the state to send, built from plain values and other registered lattices
            (default ``value.reveal()``).
        from_wire: rebuilds a value from that state, validating it (default ``cls(state)``);
            anything it raises makes the receiver drop the datagram (``lattice_rejected``).
        name: the class's name on the wire (default its ``wrapper_name``, else its qualified
            name); both ends must register the class under the same name.

    Registering a class again replaces its entry; builtin lattices are registered already.
    Usable as a decorator (``@blooml.net.register``).
    """
    if not (isinstance(cls, type) and issubclass(cls, Lattice)):
        raise CodecError("not_a_lattice", f"register() takes a Lattice subclass, got {cls!r}", cls)
    if cls in _BY_CLASS and _BY_CLASS[cls].code is not None:
        raise CodecError(
            "builtin", f"{cls.__qualname__} is a builtin lattice and is registered already", cls
        )
    wire_name = name or cls.wrapper_name or f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(wire_name, str) or not wire_name:
        raise CodecError("bad_name", "register(name=...) must be a non-empty str", wire_name)
    other = _BY_NAME.get(wire_name)
    if other is not None and other.cls is not cls and other.code is not None:
        raise CodecError("bad_name", f"{wire_name!r} names a builtin lattice", wire_name)
    kind = _Kind(cls, None, wire_name, to_wire or _reveal, from_wire or cls)
    _BY_CLASS[cls] = kind
    _BY_NAME[wire_name] = kind
    return cls


def registered() -> dict[str, type[Lattice]]:
    """The lattice classes the codec knows, by wire name."""
    return {n: k.cls for n, k in _BY_NAME.items()}


# -- encoding -------------------------------------------------------------------------------


_SCALARS = frozenset({int, str, float, bool, bytes, type(None)})
#: Deepest nesting of values accepted when encoding (a self-containing value is an error).
MAX_ENCODE_DEPTH = 64


class _Packers:
    """One thread's msgpack packers: one per nesting level of lattice values (a packer is
    not re-entrant, and ``default`` runs in the middle of the outer value), and one plain
    packer for scalar lattice states."""

    __slots__ = ("depth", "plain", "stack")

    def __init__(self) -> None:
        self.plain = msgpack.Packer(use_bin_type=True, autoreset=True, datetime=False)
        self.stack: list[msgpack.Packer] = []
        self.depth = 0

    def pack(self, obj: Any) -> bytes:
        d = self.depth
        stack = self.stack
        if d >= len(stack):
            if d >= MAX_ENCODE_DEPTH:
                raise CodecError("too_deep", f"values nested deeper than {MAX_ENCODE_DEPTH}")
            stack.append(
                msgpack.Packer(default=_default, use_bin_type=True, autoreset=True, datetime=False)
            )
        self.depth = d + 1
        try:
            return stack[d].pack(obj)  # type: ignore[no-any-return]
        finally:
            self.depth = d


_local = threading.local()


def _packers() -> _Packers:
    try:
        return _local.packers  # type: ignore[no-any-return]
    except AttributeError:
        p = _local.packers = _Packers()
        return p


def _default(obj: Any) -> Any:
    kind = _BY_CLASS.get(type(obj))
    if kind is not None:
        state = kind.to_wire(obj)
        ps = _packers()
        if kind.code is None:
            return msgpack.ExtType(_EXT_NAMED, ps.pack((kind.name, state)))
        payload = ps.plain.pack(state) if type(state) in _SCALARS else ps.pack(state)
        return msgpack.ExtType(kind.code, payload)
    if isinstance(obj, (frozenset, set)):
        return msgpack.ExtType(_EXT_FROZENSET, _packb(tuple(obj)))
    if isinstance(obj, int) and not isinstance(obj, bool):
        return msgpack.ExtType(_EXT_BIGINT, str(int(obj)).encode())
    if isinstance(obj, Lattice):
        raise CodecError(
            "unknown_type",
            f"the lattice class {type(obj).__qualname__} is not registered for the wire "
            "(call blooml.net.register(cls) on both ends)",
            obj,
        )
    raise CodecError(
        "unknown_type",
        f"a value of type {type(obj).__qualname__} cannot travel on the wire (plain values: "
        "None, bool, int, float, str, bytes, tuple, list, dict, frozenset, and registered "
        "lattices)",
        obj,
    )


def _packb(obj: Any) -> bytes:
    try:  # (``_packers()``, without its call)
        ps = _local.packers
    except AttributeError:
        ps = _packers()
    return ps.pack(obj)  # type: ignore[no-any-return]


def encode(value: Any) -> bytes:
    """Encode one value; raise :class:`~blooml.errors.CodecError` if it cannot travel."""
    try:
        return _packb(value)
    except CodecError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        raise CodecError("unencodable", f"cannot encode {value!r}: {exc}", value) from None


def encode_row(row: Sequence[Any], where: str = "", columns: Sequence[str] = ()) -> bytes:
    """Encode one tuple; on a value that cannot travel, the error names its column.

    Args:
        row: the tuple.
        where: where it comes from (a rule or a channel), put in the error message.
        columns: the column names, to name the offending one.
    """
    try:
        return _packb(tuple(row))
    except (CodecError, ValueError, TypeError, OverflowError):
        pass
    for i, v in enumerate(row):
        try:
            _packb(v)
        except CodecError as exc:
            col = columns[i] if i < len(columns) else f"#{i}"
            raise CodecError(
                exc.reason, f"column {col!r} of {tuple(row)!r}: {exc}", v, where
            ) from None
        except (ValueError, TypeError, OverflowError) as exc:
            col = columns[i] if i < len(columns) else f"#{i}"
            raise CodecError(
                "unencodable", f"column {col!r} of {tuple(row)!r}: {exc}", v, where
            ) from None
    raise CodecError("unencodable", f"cannot encode {tuple(row)!r}", row, where)  # pragma: no cover


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


def encode_fitting(row: Sequence[Any], room: int) -> bytes | None:
    """Tuple ``row`` encoded, if it encodes (plain values and registered lattices) in at
    most ``room`` bytes; else ``None``, and :func:`encode_for_channel` says why (a node's
    ``check`` at the sending rule takes this short way for every row that travels)."""
    try:  # (``_packb``, without its call)
        ps = _local.packers
    except AttributeError:
        ps = _packers()
    d = ps.depth
    try:
        if d < len(ps.stack):  # (``_Packers.pack``, without its call)
            ps.depth = d + 1
            try:
                wire: bytes = ps.stack[d].pack(tuple(row))
            finally:
                ps.depth = d
        else:
            wire = ps.pack(tuple(row))
    except (CodecError, ValueError, TypeError, OverflowError):
        return None
    return wire if len(wire) <= room else None


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


# -- decoding -------------------------------------------------------------------------------


_SCALAR_CODES = frozenset({16, 17, 18})  # lmax, lmin, lbool
# msgpack first bytes of scalars: fixint, negative fixint, nil, bool, bin, float, int, str
_SCALAR_HEAD = [
    b <= 0x7F
    or b >= 0xE0
    or 0xA0 <= b <= 0xBF
    or b in (0xC0, 0xC2, 0xC3)
    or 0xC4 <= b <= 0xC6
    or 0xCA <= b <= 0xD3
    or 0xD9 <= b <= 0xDB
    for b in range(256)
]


class _Decoder:
    """``ext_hook`` that rebuilds frozensets and lattices, bounding their nesting. One is
    made per decoded value; it has no ``__init__`` (its depth starts at the class's 0, and
    an instance gets its own only when it meets an extension type): one Python call less
    for every value decoded."""

    depth = 0

    def __call__(self, code: int, data: bytes) -> Any:
        if code in _SCALAR_CODES and data and _SCALAR_HEAD[data[0]]:
            # a scalar state (lmax(3), lmin("a")): no nested extension types to watch
            kind = _BY_CODE[code]
            try:
                return kind.from_wire(msgpack.unpackb(data))
            except (BloomlError, ValueError, TypeError) as exc:
                raise CodecError(
                    "lattice_rejected", f"{kind.name} rejects the value: {exc}", data
                ) from None
        self.depth += 1
        try:
            if self.depth > MAX_EXT_DEPTH:
                raise CodecError("too_deep", f"lattice values nested deeper than {MAX_EXT_DEPTH}")
            if code == _EXT_BIGINT:
                try:
                    return int(data.decode("ascii"))
                except (UnicodeDecodeError, ValueError):
                    raise CodecError("malformed", "bad big integer", data) from None
            state = self.unpack(data)
            if code == _EXT_FROZENSET:
                if not isinstance(state, tuple):
                    raise CodecError("malformed", "a set must be an array", state)
                try:
                    return frozenset(state)
                except TypeError:
                    raise CodecError("malformed", "a set element is unhashable", state) from None
            if code == _EXT_NAMED:
                if not (isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], str)):
                    raise CodecError("malformed", "bad named lattice", state)
                named = _BY_NAME.get(state[0])
                if named is None:
                    raise CodecError(
                        "unknown_lattice", f"lattice {state[0]!r} is not registered", state[0]
                    )
                return _build(named, state[1])
            coded = _BY_CODE.get(code)
            if coded is None:
                raise CodecError("unknown_ext", f"unknown extension type {code}", code)
            return _build(coded, state)
        finally:
            self.depth -= 1

    def unpack(self, data: bytes) -> Any:
        return msgpack.unpackb(data, ext_hook=self, use_list=False, raw=False, strict_map_key=False)


def _build(kind: _Kind, state: Any) -> Any:
    try:
        v = kind.from_wire(state)
    except CodecError as exc:
        raise CodecError("lattice_rejected", f"{kind.name}: {exc}", state) from None
    except (BloomlError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise CodecError(
            "lattice_rejected", f"{kind.name} rejects {state!r}: {exc}", state
        ) from None
    if type(v) is not kind.cls:
        raise CodecError("lattice_rejected", f"{kind.name}: from_wire built {v!r}", state)
    return v


def _decode_error(exc: Exception) -> CodecError:
    """The error :func:`decode` raises for ``exc``, raised by msgpack or an ext hook."""
    if isinstance(exc, CodecError):
        return exc
    if isinstance(exc, (msgpack.exceptions.StackError, RecursionError)):
        return CodecError("too_deep", "value nested too deeply")
    return CodecError("malformed", f"not a valid message: {exc}")


def decode(data: bytes) -> Any:
    """Decode one value; raise :class:`~blooml.errors.CodecError` on malformed bytes."""
    try:
        return msgpack.unpackb(  # (``_Decoder().unpack``, one call less)
            data, ext_hook=_Decoder(), use_list=False, raw=False, strict_map_key=False
        )
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises several types on garbage
        raise _decode_error(exc) from None


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
