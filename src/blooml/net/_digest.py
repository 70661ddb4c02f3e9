"""Range digests of a collection lattice, maintained with the changes (for anti-entropy).

A store (an ``lmap``, ``lset`` or ``lbag``) is cut by a stable hash of each key (element) into
``LEAVES`` ranges; each range's digest is the sum (mod 2**64) of a stable 64-bit hash of each of
its entries, and the root is the sum of the ranges. Two replicas hold the same entries in a
range exactly when (but for a 2**-64 chance) its digests agree, so comparing 1,024 numbers
finds where two stores of any size differ (the Merkle-tree idea of Dynamo and Cassandra repair,
flattened to two levels under the root: the ranges, and ``FINE`` slots in each).

Each range is cut further into ``FINE`` slots with digests of their own, so that where two
large stores differ in a few keys, a peer can ask for the slots of the ranges that differ
(:meth:`RangeDigest.sub_vector`) and be sent the keys of the slots that differ
(:meth:`RangeDigest.sub_differs`): about ``1/FINE`` of each range, not the whole range.

A sum is updated per entry: a changed entry subtracts its old hash and adds its new one, so
:meth:`RangeDigest.seen` costs the keys a tick changed, never the store. Hashes are stable
across processes (``blake2b`` of a canonical encoding; Python's ``hash`` of a string differs
between processes), and unordered values (sets, maps, bags) are encoded order-free.
"""

from __future__ import annotations

import struct
import zlib
from collections import defaultdict
from hashlib import blake2b
from typing import Any

from rpds import HashTrieMap

from blooml.lattices import Lattice, lbag, lbool, lmap, lmax, lmin, lset
from blooml.lattices.sets import _elems, trie_items

__all__ = ["FINE", "LEAVES", "MAX_DEPTH", "RangeDigest", "split", "stable_hash"]

#: Ranges a store is cut into (a leaf vector is 8 bytes per range).
LEAVES = 1024
#: The depth of the leaves (``2**MAX_DEPTH == LEAVES``): a vector at this depth has a digest
#: per range.
MAX_DEPTH = LEAVES.bit_length() - 1
#: Slots each range is cut into (a range's sub-vector is 8 bytes per slot).
FINE = 16
#: Slots in all: slot ``s`` is in range ``s // FINE``.
SLOTS = LEAVES * FINE
_MASK = (1 << 64) - 1
_ORDERED = (lmax, lmin, lbool)
_pack_u = struct.Struct(">Q").pack
_pack_d = struct.Struct(">d").pack


def _canon(x: Any, out: list[bytes]) -> None:
    """Append a canonical encoding of ``x`` (the same bytes for equal values, in any
    process, whatever the order of a set's iteration)."""
    t = type(x)
    if t is str:
        b = x.encode("utf-8", "surrogatepass")
        out.append(b"s%d:" % len(b))
        out.append(b)
    elif t is int:
        out.append(b"i%d;" % x)
    elif t is tuple or t is list:
        out.append(b"(%d:" % len(x))
        for y in x:
            _canon(y, out)
    elif t is bool or x is None:
        out.append(b"b%r;" % (x,))
    elif t is float:
        out.append(b"f" + _pack_d(x))
    elif t is bytes:
        out.append(b"y%d:" % len(x))
        out.append(x)
    elif isinstance(x, Lattice):
        out.append(b"L" + type(x).__qualname__.encode() + b":")
        _canon(x.reveal(), out)
    elif isinstance(x, (frozenset, set)):
        # order-free: the sum of the members' hashes
        out.append(b"{" + _pack_u(sum(stable_hash(y) for y in x) & _MASK))
    elif isinstance(x, dict):
        out.append(b"{:" + _pack_u(sum(stable_hash((k, v)) for k, v in x.items()) & _MASK))
    else:
        out.append(b"r" + repr(x).encode("utf-8", "surrogatepass") + b";")


def stable_hash(x: Any) -> int:
    """A 64-bit hash of ``x`` that equal values share in every process (unlike ``hash`` of a
    string): ``blake2b`` of a canonical encoding; sets and maps are hashed order-free."""
    out: list[bytes] = []
    _canon(x, out)
    return int.from_bytes(blake2b(b"".join(out), digest_size=8).digest(), "big")


_PLAIN = (str, int, float, bool, bytes, type(None))


def _plain(x: Any) -> bool:
    """Whether ``repr(x)`` is canonical: scalars, and tuples of them (nested)."""
    t = type(x)
    if t in _PLAIN:
        return True
    if t is not tuple:
        return False
    for y in x:  # noqa: SIM110 - a loop: all() over a generator costs twice as much here
        if type(y) not in _PLAIN and not _plain(y):
            return False
    return True


def _b64(data: bytes) -> int:
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big")


def _key_text(key: Any) -> str | None:
    """``repr(key)`` when it is canonical (a plain key), else ``None``."""
    return repr(key) if type(key) is str or _plain(key) else None


def _entry_hash(key: Any, v: Any, kt: str | None) -> int:
    """:func:`stable_hash` of ``(key, v)``, fast for the common entries (a plain key, a value
    ``lmax``/``lmin``/``lbool`` of a plain value: their ``repr`` is canonical). ``kt`` is
    :func:`_key_text` of ``key``."""
    t = type(v)
    if kt is not None and t in _ORDERED:
        raw = v._v
        if type(raw) in _PLAIN or _plain(raw):
            return _b64(f"{t.__name__}{kt}={raw!r}".encode("utf-8", "surrogatepass"))
    return stable_hash((key, v))


def _elem_hash(x: Any, kt: str | None) -> int:
    return _b64(b"e" + kt.encode("utf-8", "surrogatepass")) if kt is not None else stable_hash(x)


def _slot_of(key: Any, kt: str | None) -> int:
    """The slot of a key (spread by CRC-32: its slots need no strength, only spread); its
    range is ``slot // FINE``, the CRC modulo ``LEAVES`` (as before there were slots)."""
    data = kt.encode("utf-8", "surrogatepass") if kt is not None else _pack_u(stable_hash(key))
    c = zlib.crc32(data)
    return (c % LEAVES) * FINE + (c // LEAVES) % FINE


class RangeDigest:
    """The range digests of one store, kept up to date by :meth:`seen` after each tick.

    ``fine[s]`` is slot ``s``'s digest (range ``s // FINE``), ``leaf[i]`` range ``i``'s (the
    sum of its slots', derived),
    ``count[s]`` the slot's number of entries, ``keys[s]`` its keys (boxed as the store's
    trie holds them), ``root`` the sum of the leaves; ``value`` is the store value they
    describe.
    """

    __slots__ = ("count", "fine", "keys", "root", "value", "whole")

    def __init__(self, value: Any) -> None:
        self.rebuild(value)

    def rebuild(self, value: Any) -> None:
        """Compute every digest from ``value`` (once, at start, or after a change that was
        not seen: O(store))."""
        fine = [0] * SLOTS
        self.count = [0] * SLOTS
        self.keys: defaultdict[int, set[Any]] = defaultdict(set)  # the slots used only
        #: a lattice the ranges do not know is one entry, in slot 0
        self.whole = type(value) not in (lmap, lset, lbag)
        self.value = value
        count, keys = self.count, self.keys
        for bk, s, h in self._entries(value, None):
            fine[s] += h
            count[s] += 1
            keys[s].add(bk)
        self.fine = [x & _MASK for x in fine]
        self.root = sum(self.fine) & _MASK

    @property
    def leaf(self) -> list[int]:
        """The digest of each range: the sum of its ``FINE`` slots' (derived from ``fine``,
        read when a vector is sent)."""
        fine = self.fine
        return [sum(fine[i : i + FINE]) & _MASK for i in range(0, SLOTS, FINE)]

    def _entries(self, value: Any, boxed: Any) -> list[tuple[Any, int, int]]:
        """``(boxed key, slot, entry hash)`` of the entries of ``value`` (of those keys
        only, when ``boxed`` is given; an absent key is left out)."""
        t = type(value)
        out: list[tuple[Any, int, int]] = []
        add = out.append
        if t is lmap or t is lbag:
            get = value._v.get
            pairs = trie_items(value._v) if boxed is None else [(bk, get(bk)) for bk in boxed]
            for bk, v in pairs:
                if v is not None:
                    k = bk[0]
                    kt = _key_text(k)
                    add((bk, _slot_of(k, kt), _entry_hash(k, v, kt)))
        elif t is lset:
            elems = _elems(value._v) if boxed is None else [bk[0] for bk in boxed]
            for x in elems:
                if boxed is None or x in value:
                    kt = _key_text(x)
                    add(((x,), _slot_of(x, kt), _elem_hash(x, kt)))
        else:
            add(((None,), 0, stable_hash(value)))
        return out

    def _add(self, bk: Any, s: int, h: int) -> None:
        self.fine[s] = (self.fine[s] + h) & _MASK
        self.root = (self.root + h) & _MASK
        keys = self.keys[s]
        if bk not in keys:
            keys.add(bk)
            self.count[s] += 1

    def seen(self, start: Any, value: Any, incs: list[Any]) -> None:
        """A committed tick merged ``incs`` into the store (``start`` -> ``value``): update
        the digests of the keys they name (O(their size)); a start this digest does not
        describe (a change made some other way) means a rebuild."""
        if start is not self.value or self.whole or any(type(i) is not type(value) for i in incs):
            self.rebuild(value)
            return
        self.value = None  # half updated, should this raise: the next change rebuilds
        if type(value) is lset:
            self._seen_set(start, value, incs)
        else:
            self._seen_map(start, value, incs)
        self.value = value

    def _seen_map(self, start: Any, value: Any, incs: list[Any]) -> None:
        # one increment (the usual case): a key the store lacked holds the increment's
        # value now, so neither store is looked up for it
        if len(incs) == 1:
            pairs = trie_items(incs[0]._v)
            fresh_is_inc = True
        else:
            boxed = {bk for inc in incs for bk, _ in trie_items(inc._v)}
            get = value._v.get
            pairs = [(bk, get(bk)) for bk in boxed]
            fresh_is_inc = False
        keys, fine, count = self.keys, self.fine, self.count
        old_get, new_get = start._v.get, value._v.get
        root = self.root
        for bk, v in pairs:
            k = bk[0]
            kt = _key_text(k)
            s = _slot_of(k, kt)
            ks = keys[s]
            if bk in ks:
                was = old_get(bk)
                now = new_get(bk) if fresh_is_inc else v
                if now is was or now is None:
                    continue
                h0, h = _entry_hash(k, was, kt), _entry_hash(k, now, kt)
                if h0 == h:
                    continue
                h -= h0
            else:
                h = _entry_hash(k, v, kt)
                ks.add(bk)
                count[s] += 1
            fine[s] = (fine[s] + h) & _MASK
            root += h
        self.root = root & _MASK

    def _seen_set(self, start: Any, value: Any, incs: list[Any]) -> None:
        keys = self.keys
        for inc in incs:
            for x in _elems(inc._v):
                kt = _key_text(x)
                s = _slot_of(x, kt)
                if (x,) not in keys[s]:
                    self._add((x,), s, _elem_hash(x, kt))

    def size(self) -> int:
        """Entries in the store."""
        return sum(self.count)

    @staticmethod
    def depth_for(size: int) -> int:
        """The depth of ranges to compare for stores of about ``size`` entries: about 64
        entries a range (``2**depth`` ranges), at most ``LEAVES``."""
        d = 0
        while (1 << d) < LEAVES and (size >> d) > 64:
            d += 1
        return d

    def vector(self, depth: int) -> bytes:
        """The digests of the ``2**depth`` ranges (each the sum of ``LEAVES >> depth``
        leaves), 8 bytes each: what a peer compares with its own."""
        step = LEAVES >> depth
        leaf = self.leaf
        sums = [sum(leaf[i : i + step]) & _MASK for i in range(0, LEAVES, step)]
        return struct.pack(f">{len(sums)}Q", *sums)

    def differs(self, theirs: bytes, depth: int) -> list[int]:
        """The slots in the ranges where ``theirs`` (a peer's :meth:`vector` at ``depth``)
        differs from this store's and this store has entries (those it could send; a range
        only the peer holds is the peer's to send). ``[]`` for a malformed vector."""
        if not (isinstance(depth, int) and depth >= 0 and (1 << depth) <= LEAVES):
            return []
        n = 1 << depth
        if not isinstance(theirs, bytes) or len(theirs) != 8 * n:
            return []
        other = struct.unpack(f">{n}Q", theirs)
        mine = struct.unpack(f">{n}Q", self.vector(depth))
        step = (LEAVES >> depth) * FINE
        count = self.count
        return [
            j
            for i in range(n)
            if other[i] != mine[i]
            for j in range(i * step, (i + 1) * step)
            if count[j]
        ]

    @staticmethod
    def leaves_of(slots: list[int]) -> tuple[int, ...]:
        """The ranges (leaves) ``slots`` lie in, ascending, each once."""
        return tuple(sorted({s // FINE for s in slots}))

    @staticmethod
    def _leaves_ok(leaves: Any) -> bool:
        """Whether ``leaves`` (from the network) is a list of distinct range numbers."""
        return (
            isinstance(leaves, (tuple, list))
            and 0 < len(leaves) <= LEAVES
            and all(type(i) is int and 0 <= i < LEAVES for i in leaves)
            and len(set(leaves)) == len(leaves)
        )

    def sub_vector(self, leaves: Any) -> bytes:
        """The digests of the ``FINE`` slots of each range in ``leaves`` (8 bytes each, in
        order): what a peer that asked for them compares with its own (``sub_differs``).
        ``b""`` when ``leaves`` is malformed (not distinct range numbers)."""
        if not self._leaves_ok(leaves):
            return b""
        fine = self.fine
        sums = [x for i in leaves for x in fine[i * FINE : (i + 1) * FINE]]
        return struct.pack(f">{len(sums)}Q", *sums)

    def sub_differs(self, leaves: Any, theirs: Any) -> list[int]:
        """The slots of the ranges ``leaves`` where ``theirs`` (a peer's :meth:`sub_vector`
        of them) differs from this store's and this store has entries. ``[]`` when either
        is malformed."""
        if not self._leaves_ok(leaves):
            return []
        n = len(leaves) * FINE
        if not isinstance(theirs, bytes) or len(theirs) != 8 * n:
            return []
        other = struct.unpack(f">{n}Q", theirs)
        fine, count = self.fine, self.count
        slots = [s for i in leaves for s in range(i * FINE, (i + 1) * FINE)]
        return [s for s, o in zip(slots, other, strict=True) if o != fine[s] and count[s]]

    def plan(self, slots: list[int], size: int) -> list[tuple[int, ...]]:
        """``slots`` grouped into chunks of about ``size`` entries (consecutive slots; at
        least one slot each)."""
        out: list[tuple[int, ...]] = []
        cur: list[int] = []
        n = 0
        for i in slots:
            if cur and n + self.count[i] > size:
                out.append(tuple(cur))
                cur, n = [], 0
            cur.append(i)
            n += self.count[i]
        if cur:
            out.append(tuple(cur))
        return out

    def chunk(self, value: Any, slots: tuple[int, ...]) -> Any:
        """The entries of ``value`` (the store now) in ``slots``, as a value of its type."""
        t = type(value)
        if self.whole:
            return value
        boxed = [bk for i in slots for bk in self.keys.get(i, ())]
        if t is lmap or t is lbag:
            get = value._v.get
            items = {bk: v for bk in boxed if (v := get(bk)) is not None}
            return t._make(HashTrieMap(items))
        return lset([bk[0] for bk in boxed if bk[0] in value])


def split(value: Any, size: int) -> list[Any]:
    """``value`` cut into values of its type of at most ``size`` entries each (their join is
    ``value``): an ``lmap`` or ``lbag`` by keys, an ``lset`` by elements; any other lattice
    is one part. O(entries); the parts share the entries' values, nothing is copied deep."""
    t = type(value)
    step = max(1, size)
    if t is lmap or t is lbag:
        items = trie_items(value._v)
        if len(items) <= step:
            return [value]
        return [t._make(HashTrieMap(items[i : i + step])) for i in range(0, len(items), step)]
    if t is lset:
        elems = list(_elems(value._v))
        if len(elems) <= step:
            return [value]
        return [lset(elems[i : i + step]) for i in range(0, len(elems), step)]
    return [value]
