"""The value codec: plain values and lattice values to msgpack bytes and back.

Never pickle: decoding builds only plain values (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, tuples, frozensets, dicts) and lattice values of *registered* classes,
through their validating constructors, so a datagram cannot run code, and a value a lattice
rejects (``lpset([-1])``) is an error, not a half-built value.

Values::

    data = encode(value)           # bytes
    value = decode(data)           # CodecError on anything malformed
    row_bytes = encode_row(row)    # one tuple; an error names the offending column

User lattices: :func:`register` (``blooml.net.register(MyLattice)``) adds a lattice class; its
wire form is ``to_wire(value)`` (default ``value.reveal()``) and it is rebuilt with
``from_wire(state)`` (default ``Cls(state)``). The class is named on the wire by its
``wrapper_name`` (or qualified name): both ends register the same class.

Not here: the envelope a node sends the encoded rows in (format version, sender,
destination, sequence number, timestamp, signature), the size limits of a message and the
replay guard: those are the framing, in :mod:`blooml.net._envelope`, which builds on this
module; this module imports nothing of it (``tests/test_layers.py`` checks). Users import
both from :mod:`blooml.net.codec` (or :mod:`blooml.net`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

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


def encode_fitting(row: Sequence[Any], room: int) -> bytes | None:
    """Tuple ``row`` encoded, if it encodes (plain values and registered lattices) in at
    most ``room`` bytes; else ``None``, and
    :func:`~blooml.net._envelope.encode_for_channel` says why (a node's
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
