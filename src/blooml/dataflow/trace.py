"""Traces: the timestamped history of a stream, for incremental operators.

A :class:`Trace` is an immutable collection of ``(key, value, time, weight)`` updates stored as
a *spine* of sorted, consolidated batches. Appending a batch adds a small sorted run and then
merges the newest runs while the older one is not more than twice the size of the newer one,
so each update is merged O(log n) times over its life and the spine holds O(log n) batches.
Each batch stores four parallel columns (keys, values, times, weights) instead of one object
per update, sorted by key (updates of one key keep the order they were appended in, which is
time order); look-ups by key are a binary search per batch, and full sequential access in
order of key, then value, then time sorts each read. Merging batches never compares values
or times, only keys, which is what keeps appends cheap; updates that cancel out are dropped
when a batch is built from one time's changes and by :meth:`Trace.compact`.

Appending returns a new trace that shares every untouched batch with the old one, so a trace
can be held by several operators (or kept as a snapshot) without copying.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from operator import itemgetter, ne
from typing import Any

from blooml.dataflow.errors import (
    TimestampError,
    TraceKindError,
    UnhashableElementError,
    WeightError,
)
from blooml.dataflow.timestamps import Time, check_time, leq, outer
from blooml.dataflow.zset import IndexedZSet, ZSet, _weight

__all__ = ["Trace"]

# Merge the two newest batches while the older one is at most this many times the newer one.
_MERGE_RATIO = 2


def _order_key(x: Any) -> Any:
    """A total order over hashable values of mixed types, consistent with ``==``.

    Used only when a trace holds values that Python cannot compare with ``<`` (ints mixed
    with strings, ``None`` mixed with ints, ...). Numbers sort before strings, strings before
    bytes, then tuples (element-wise) and frozensets; other objects sort by type name and hash.
    """
    if x is None:
        return (0,)
    t = type(x)
    if t is int or t is float or t is bool:
        return (1, x)
    if t is str:
        return (2, x)
    if t is bytes:
        return (3, x)
    if isinstance(x, tuple):
        return (4, tuple(map(_order_key, x)))
    if isinstance(x, frozenset):
        return (5, tuple(sorted(map(_order_key, x))))
    return (6, t.__qualname__, hash(x))


def _row_key(row: tuple[tuple[Any, Any, Any], int]) -> Any:
    return _order_key(row[0])


def _first(row: tuple[tuple[Any, Any, Any], int]) -> tuple[Any, Any, Any]:
    return row[0]


class _Batch:
    """One sorted, consolidated run of updates, stored column-wise."""

    __slots__ = ("keys", "times", "vals", "weights")

    def __init__(
        self, keys: list[Any], vals: list[Any], times: list[Any], weights: list[int]
    ) -> None:
        self.keys = keys
        self.vals = vals
        self.times = times
        self.weights = weights

    def __len__(self) -> int:
        return len(self.keys)

    def rows(self) -> Iterator[tuple[tuple[Any, Any, Any], int]]:
        return zip(zip(self.keys, self.vals, self.times, strict=False), self.weights, strict=False)  # type: ignore[return-value]

    def span(self, key: Any, fallback: bool) -> range:
        """Indices of the updates whose key equals ``key``."""
        keys = self.keys
        if not fallback:
            try:
                i = bisect_left(keys, key)
            except TypeError:
                return range(0)
            j = i
            n = len(keys)
            while j < n and keys[j] == key:
                j += 1
            return range(i, j)
        ok = _order_key(key)
        i = bisect_left(keys, ok, key=_order_key)
        j = i
        n = len(keys)
        while j < n and _order_key(keys[j]) == ok:
            j += 1
        return range(i, j)


def _columns(
    keys: list[Any], vals: list[Any], times: list[Any], weights: list[int], fallback: bool
) -> _Batch:
    """A batch from columns, stably sorted by key; raises TypeError if keys are unorderable.

    Sorting a permutation of indices by key (and gathering the columns with ``itemgetter``)
    keeps the work in C: merging two batches costs about one key comparison per update.
    """
    n = len(keys)
    if n > 1:
        if fallback:
            order = sorted(range(n), key=lambda i: _order_key(keys[i]))
        else:
            order = sorted(range(n), key=keys.__getitem__)
        if order[0] != 0 or any(map(ne, order, range(n))):
            gather = itemgetter(*order)
            return _Batch(
                list(gather(keys)), list(gather(vals)), list(gather(times)), list(gather(weights))
            )
    return _Batch(keys, vals, times, weights)


def _build(rows: list[tuple[tuple[Any, Any, Any], int]], fallback: bool) -> _Batch:
    """A batch from consolidated ``((key, value, time), weight)`` rows."""
    if not rows:
        return _Batch([], [], [], [])
    kvts, ws = zip(*rows, strict=True)
    ks, vs, ts = zip(*kvts, strict=True)
    return _columns(list(ks), list(vs), list(ts), list(ws), fallback)


def _unzip(rows: list[tuple[tuple[Any, Any, Any], int]]) -> tuple[list[Any], ...]:
    kvts, ws = zip(*rows, strict=True)
    ks, vs, ts = zip(*kvts, strict=True)
    return list(ks), list(vs), list(ts), list(ws)


def _merge(a: _Batch, b: _Batch, fallback: bool) -> _Batch:
    """Merge two batches (older first, so equal keys keep time order)."""
    return _columns(
        a.keys + b.keys, a.vals + b.vals, a.times + b.times, a.weights + b.weights, fallback
    )


def _consolidate(parts: Iterable[Iterable[tuple[tuple[Any, Any, Any], int]]]) -> list[Any]:
    acc: dict[tuple[Any, Any, Any], int] = {}
    get = acc.get
    for part in parts:
        for kvt, w in part:
            s = get(kvt, 0) + w
            if s:
                acc[kvt] = s
            else:
                del acc[kvt]
    return list(acc.items())


class Trace:
    """An immutable, timestamped collection of ``(key, value, time, weight)`` updates.

    A trace of a Z-set stream uses each element as the key and ``None`` as the value
    (``indexed=False``); a trace of an indexed Z-set stream keeps both (``indexed=True``).
    Updates with the same key, value and time are summed; zero weights are dropped.

    Args:
        entries: ``(key, value, time, weight)`` 4-tuples.
        indexed: whether the trace holds indexed Z-set batches. ``None`` (the default) decides
            at the first append: a :class:`ZSet` makes it keyed-only, an
            :class:`IndexedZSet` indexed; a non-empty ``entries`` makes it indexed.

    Raises:
        WeightError: a weight is not an ``int``, or an entry is not a 4-tuple.
        TimestampError: a time is not an epoch, a tuple of unsigned ints, or ``None``.
        UnhashableElementError: a key or value is unhashable.

    Example:
        >>> t = Trace().insert(ZSet({"a": 1}), 0).insert(ZSet({"a": -1, "b": 1}), 1)
        >>> list(t)
        [('a', None, 0, 1), ('a', None, 1, -1), ('b', None, 1, 1)]
        >>> t.consolidate()
        ZSet({'b': 1})
    """

    __slots__ = ("_fallback", "_hash", "_indexed", "_spine")

    _spine: tuple[_Batch, ...]
    _indexed: bool | None
    _fallback: bool
    _hash: int | None

    def __init__(
        self,
        entries: Iterable[tuple[Any, Any, Any, int]] = (),
        *,
        indexed: bool | None = None,
    ) -> None:
        rows: list[tuple[tuple[Any, Any, Any], int]] = []
        for entry in entries:
            try:
                k, v, t, w = entry
            except (TypeError, ValueError):
                raise WeightError(
                    None, entry, "Trace(...) (expected (key, value, time, weight) 4-tuples)"
                ) from None
            w = _weight(w, (k, v), "Trace(...)")
            t = check_time(t, "Trace(...)")
            if indexed is False and v is not None:
                raise TraceKindError("ZSet", entry, "Trace(indexed=False)")
            try:
                hash((k, v))
            except TypeError:
                raise UnhashableElementError((k, v), "Trace(...)") from None
            rows.append(((k, v, t), w))
        self._indexed = indexed if indexed is not None else (True if rows else None)
        self._fallback = False
        self._hash = None
        self._spine = ()
        rows = _consolidate([rows])
        if rows:
            self._spine, self._fallback = self._push((), _unzip(rows), False)

    @classmethod
    def _make(cls, spine: tuple[_Batch, ...], indexed: bool | None, fallback: bool) -> Trace:
        t = object.__new__(cls)
        t._spine = spine
        t._indexed = indexed
        t._fallback = fallback
        t._hash = None
        return t

    # -- building --

    @staticmethod
    def _push(
        spine: tuple[_Batch, ...], cols: tuple[list[Any], ...], fallback: bool
    ) -> tuple[tuple[_Batch, ...], bool]:
        """Append a batch (unsorted columns) and merge by size; switch order if needed."""
        try:
            new = list(spine)
            ks, vs, ts, ws = cols
            new.append(_columns(ks, vs, ts, ws, fallback))
            while len(new) >= 2 and len(new[-2]) <= _MERGE_RATIO * len(new[-1]):
                b = new.pop()
                a = new.pop()
                new.append(_merge(a, b, fallback))
            return tuple(new), fallback
        except TypeError:
            if fallback:
                raise
            # Mixed, mutually unorderable types: re-sort everything with a total order key.
            extra = zip(zip(cols[0], cols[1], cols[2], strict=True), cols[3], strict=True)
            everything = _consolidate([*(b.rows() for b in spine), extra])
            return (_build(everything, True),), True

    def insert(self, batch: ZSet | IndexedZSet, time: Time) -> Trace:
        """Append ``batch`` at ``time`` (TraceAppend); an empty batch returns ``self``.

        Raises:
            TraceKindError: a Z-set into an indexed trace or an indexed Z-set into a keyed one.
            TimestampError: ``time`` is not a valid timestamp.
        """
        time = check_time(time, "Trace.insert")
        if isinstance(batch, ZSet):
            if self._indexed:
                raise TraceKindError("IndexedZSet", batch, "Trace.insert")
            if not batch:
                return self
            d = batch._d
            n = len(d)
            cols: tuple[list[Any], ...] = (list(d), [None] * n, [time] * n, list(d.values()))
            indexed = False
        elif isinstance(batch, IndexedZSet):
            if self._indexed is False:
                raise TraceKindError("ZSet", batch, "Trace.insert")
            if not batch:
                return self
            ks: list[Any] = []
            vs: list[Any] = []
            ws: list[int] = []
            for k, vals in batch._d.items():
                ks.extend([k] * len(vals))
                vs.extend(vals)
                ws.extend(vals.values())
            cols = (ks, vs, [time] * len(ks), ws)
            indexed = True
        else:
            raise TraceKindError("ZSet or IndexedZSet", batch, "Trace.insert")
        spine, fallback = self._push(self._spine, cols, self._fallback)
        return Trace._make(spine, indexed, fallback)

    def compact(self, frontier: int) -> Trace:
        """Forget how updates older than epoch ``frontier`` were spread over epochs.

        Every update whose epoch is below ``frontier`` is moved to epoch ``frontier - 1``
        (keeping its inner iteration components), and updates that become equal are summed.
        Every comparison between a compacted time and a time at or after ``frontier`` gives
        the same answer as before, so operators that only read times at or after
        ``frontier`` compute the same results with less memory. The result is one batch.
        """
        if type(frontier) is not int or frontier < 0:
            raise TimestampError(
                frontier, "Trace.compact", "the frontier is an epoch (an int >= 0)"
            )
        target = frontier - 1
        interned: dict[Any, Any] = {}

        def advance(t: Any) -> Any:
            if t is None or outer(t) >= frontier:
                return t
            nt = target if type(t) is int else (target, *t[1:])
            return interned.setdefault(nt, nt)

        rows = _consolidate(
            [
                (((k, v, advance(t)), w) for (k, v, t), w in b.rows())  # type: ignore[misc]
                for b in self._spine
            ]
        )
        if not rows:
            return Trace._make((), self._indexed, self._fallback)
        spine, fallback = self._push((), _unzip(rows), self._fallback)
        return Trace._make(spine, self._indexed, fallback)

    # -- reading --

    @property
    def indexed(self) -> bool | None:
        """``True`` for a trace of indexed Z-sets, ``False`` for Z-sets, ``None`` if empty."""
        return self._indexed

    def __len__(self) -> int:
        """The number of stored updates (before consolidating across batches)."""
        return sum(len(b) for b in self._spine)

    def __bool__(self) -> bool:
        return bool(self._spine)

    def batch_sizes(self) -> list[int]:
        """The sizes of the spine's batches, oldest (largest) first."""
        return [len(b) for b in self._spine]

    def entries(self, key: Any) -> list[tuple[Any, Any, int]]:
        """Every ``(value, time, weight)`` update stored under ``key`` (in no particular order)."""
        out: list[tuple[Any, Any, int]] = []
        fb = self._fallback
        for b in self._spine:
            r = b.span(key, fb)
            if r:
                vals, times, ws = b.vals, b.times, b.weights
                if fb:
                    out.extend((vals[i], times[i], ws[i]) for i in r if b.keys[i] == key)
                else:
                    out.extend(
                        zip(
                            vals[r.start : r.stop],
                            times[r.start : r.stop],
                            ws[r.start : r.stop],
                            strict=False,
                        )
                    )
        return out

    def history(self, key: Any) -> list[tuple[Any, int]]:
        """Every ``(time, weight)`` update of ``key`` (for traces of Z-sets)."""
        out: list[tuple[Any, int]] = []
        fb = self._fallback
        for b in self._spine:
            r = b.span(key, fb)
            if r:
                if fb:
                    out.extend((b.times[i], b.weights[i]) for i in r if b.keys[i] == key)
                else:
                    out.extend(
                        zip(b.times[r.start : r.stop], b.weights[r.start : r.stop], strict=False)
                    )
        return out

    def __iter__(self) -> Iterator[tuple[Any, Any, Any, int]]:
        """Iterate ``(key, value, time, weight)`` in order of key, then value, then time.

        Updates with the same key, value and time (possible across batches) are summed first.
        """
        rows = _consolidate(b.rows() for b in self._spine)
        if self._fallback:
            rows.sort(key=_row_key)
        else:
            try:
                rows.sort(key=_first)
            except TypeError:  # keys order, but values or times of one key do not
                rows.sort(key=_row_key)
        for (k, v, t), w in rows:
            yield k, v, t, w

    def keys(self) -> list[Any]:
        """The distinct keys with at least one stored update, in order."""
        ks: set[Any] = set()
        for b in self._spine:
            ks.update(b.keys)
        if not self._fallback:
            try:
                return sorted(ks)
            except TypeError:  # batches not merged yet may hold keys of unorderable types
                pass
        return sorted(ks, key=_order_key)

    def as_of(self, time: Time) -> ZSet | IndexedZSet:
        """The integral of the stream at ``time``: every update at a time ``<= time`` summed."""
        return self._sum(lambda t: leq(t, time))

    def consolidate(self) -> ZSet:
        """Every update summed over time (Consolidate): a Z-set of keys, or of (key, value)."""
        d: dict[Any, int] = {}
        get = d.get
        idx = bool(self._indexed)
        for b in self._spine:
            for k, v, w in zip(b.keys, b.vals, b.weights, strict=True):
                e = (k, v) if idx else k
                s = get(e, 0) + w
                if s:
                    d[e] = s
                else:
                    del d[e]
        return ZSet._wrap(d)

    def _sum(self, keep: Any) -> ZSet | IndexedZSet:
        if self._indexed:
            nested: dict[Any, dict[Any, int]] = {}
            for b in self._spine:
                for k, v, t, w in zip(b.keys, b.vals, b.times, b.weights, strict=True):
                    if keep(t):
                        inner = nested.setdefault(k, {})
                        s = inner.get(v, 0) + w
                        if s:
                            inner[v] = s
                        else:
                            del inner[v]
                            if not inner:
                                del nested[k]
            return IndexedZSet._wrap(nested)
        flat: dict[Any, int] = {}
        for b in self._spine:
            for k, t, w in zip(b.keys, b.times, b.weights, strict=True):
                if keep(t):
                    s = flat.get(k, 0) + w
                    if s:
                        flat[k] = s
                    else:
                        del flat[k]
        return ZSet._wrap(flat)

    def memory_bytes(self, deep: bool = False) -> int:
        """Approximate bytes held by this trace.

        By default: the column lists and the time tuples they point to (keys and values are
        usually shared with the rest of the program). With ``deep=True`` keys and values are
        counted too (each distinct object once, tuples recursively).
        """
        seen: set[int] = set()
        total = 0

        def size(x: Any) -> int:
            if id(x) in seen or x is None or (type(x) is int and -5 <= x <= 256):
                return 0
            seen.add(id(x))
            n = sys.getsizeof(x)
            if type(x) is tuple:
                n += sum(size(c) for c in x)
            return n

        for b in self._spine:
            total += sys.getsizeof(b) + sum(
                sys.getsizeof(col) for col in (b.keys, b.vals, b.times, b.weights)
            )
            for t in b.times:
                total += size(t)
            for w in b.weights:
                total += size(w)
            if deep:
                for k in b.keys:
                    total += size(k)
                for v in b.vals:
                    total += size(v)
        return total

    # -- value semantics --

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        if self is other:
            return True
        return set(self) == set(other)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self))
        return h

    def __repr__(self) -> str:
        n = len(self)
        shown = []
        for i, entry in enumerate(self):
            if i == 10:
                shown.append("...")
                break
            shown.append(repr(entry))
        kind = {True: "indexed", False: "keyed", None: "empty"}[self._indexed]
        return f"Trace({kind}, {n} updates in {len(self._spine)} batches: [{', '.join(shown)}])"
