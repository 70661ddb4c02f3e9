"""Z-sets and indexed Z-sets: the values that flow along a circuit's edges.

A :class:`ZSet` maps elements to non-zero integer weights (a positive weight counts
derivations, a negative one deletions); an :class:`IndexedZSet` maps keys to Z-sets of values.
Both are immutable values backed by plain dicts, so that ``+``, ``-``, joins and look-ups cost
one dict operation per element. Zero weights are never stored.
"""

from __future__ import annotations

import contextlib
import operator as _operator
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any

from blooml.dataflow.errors import UnhashableElementError, WeightError

__all__ = ["IndexedZSet", "ZSet"]

_REPR_LIMIT = 50


def _weight(w: Any, elem: Any, where: str) -> int:
    if type(w) is int:
        return w
    if isinstance(w, bool) or not hasattr(w, "__index__"):
        raise WeightError(w, elem, where)
    return _operator.index(w)


def _add_into(d: dict[Any, int], elem: Any, w: int, where: str) -> None:
    try:
        s = d.get(elem, 0) + w
    except TypeError:
        raise UnhashableElementError(elem, where) from None
    if s:
        d[elem] = s
    else:
        d.pop(elem, None)


def _sorted_items(items: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    lst = list(items)
    # Mixed types that cannot be compared keep insertion order: still a faithful repr.
    with contextlib.suppress(TypeError):
        lst.sort(key=lambda kv: kv[0])
    return lst


def _merge_dicts(a: dict[Any, int], b: dict[Any, int], sign: int) -> dict[Any, int]:
    if sign == 1 and len(b) > len(a):
        a, b = b, a
    out = dict(a)
    get = out.get
    for k, w in b.items():
        s = get(k, 0) + sign * w
        if s:
            out[k] = s
        else:
            del out[k]
    return out


class ZSet:
    """An immutable Z-set: a finite map from hashable elements to non-zero ``int`` weights.

    Args:
        data: a mapping ``{element: weight}`` or an iterable of ``(element, weight)`` pairs
            (repeated elements are summed). Zero weights are dropped.

    Raises:
        WeightError: a weight is not an ``int``.
        UnhashableElementError: an element is unhashable.

    Example:
        >>> a = ZSet({"x": 1, "y": 2})
        >>> a + ZSet({"x": -1})
        ZSet({'y': 2})
        >>> sorted(a.map(str.upper))
        [('X', 1), ('Y', 2)]
    """

    __slots__ = ("_d", "_hash")

    _d: dict[Any, int]
    _hash: int | None

    def __init__(self, data: Mapping[Any, int] | Iterable[tuple[Any, int]] | None = None) -> None:
        d: dict[Any, int] = {}
        if isinstance(data, ZSet):
            d = data._d
        elif data is not None:
            items: Iterable[Any] = data.items() if isinstance(data, Mapping) else data
            for item in items:
                try:
                    elem, w = item
                except (TypeError, ValueError):
                    raise WeightError(None, item, "ZSet(...)") from None
                w = _weight(w, elem, "ZSet(...)")
                if w:
                    _add_into(d, elem, w, "ZSet(...)")
        self._d = d
        self._hash = None

    @classmethod
    def _wrap(cls, d: dict[Any, int]) -> ZSet:
        """Wrap a dict that already holds only non-zero int weights (no copy, no checks)."""
        z = object.__new__(cls)
        z._d = d
        z._hash = None
        return z

    @classmethod
    def from_elements(cls, elements: Iterable[Hashable]) -> ZSet:
        """The Z-set counting each element once per occurrence (``ZSet.from_elements("aab")``)."""
        d: dict[Any, int] = {}
        for e in elements:
            _add_into(d, e, 1, "ZSet.from_elements")
        return cls._wrap(d)

    # -- reading --

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        """Iterate ``(element, weight)`` pairs."""
        return iter(self._d.items())

    def __len__(self) -> int:
        """The number of elements with a non-zero weight."""
        return len(self._d)

    def __bool__(self) -> bool:
        return bool(self._d)

    def __contains__(self, elem: object) -> bool:
        """Whether ``elem`` has a non-zero weight."""
        try:
            return elem in self._d
        except TypeError:
            return False

    def __getitem__(self, elem: Any) -> int:
        """The weight of ``elem`` (``0`` when absent: a Z-set is a total function to Z)."""
        try:
            return self._d.get(elem, 0)
        except TypeError:
            raise UnhashableElementError(elem, "ZSet[...]") from None

    def weight(self, elem: Any) -> int:
        """The weight of ``elem``; ``0`` when absent."""
        return self[elem]

    def elements(self) -> list[Any]:
        """The elements with a non-zero weight (in insertion order)."""
        return list(self._d)

    def items(self) -> list[tuple[Any, int]]:
        """The ``(element, weight)`` pairs, as a list."""
        return list(self._d.items())

    def to_dict(self) -> dict[Any, int]:
        """A fresh ``{element: weight}`` dict."""
        return dict(self._d)

    def sorted_items(self) -> list[tuple[Any, int]]:
        """The ``(element, weight)`` pairs in element order (a total order for mixed types)."""
        from blooml.dataflow.trace import _order_key

        items = list(self._d.items())
        try:
            items.sort(key=lambda ew: ew[0])
        except TypeError:
            items.sort(key=lambda ew: _order_key(ew[0]))
        return items

    def total_weight(self) -> int:
        """The sum of all weights (the size of the multiset when every weight is positive)."""
        return sum(self._d.values())

    def is_set(self) -> bool:
        """Whether every weight is exactly 1 (the Z-set is a plain set)."""
        return all(w == 1 for w in self._d.values())

    def is_positive(self) -> bool:
        """Whether every weight is positive (the Z-set is a multiset)."""
        return all(w > 0 for w in self._d.values())

    # -- algebra (the abelian group of Z-sets) --

    def __add__(self, other: object) -> ZSet:
        """Plus: add weights element-wise, dropping zeros."""
        if not isinstance(other, ZSet):
            return NotImplemented
        if not other._d:
            return self
        if not self._d:
            return other
        return ZSet._wrap(_merge_dicts(self._d, other._d, 1))

    def __sub__(self, other: object) -> ZSet:
        """Minus: subtract weights element-wise, dropping zeros."""
        if not isinstance(other, ZSet):
            return NotImplemented
        if not other._d:
            return self
        return ZSet._wrap(_merge_dicts(self._d, other._d, -1))

    def __neg__(self) -> ZSet:
        """Negate every weight."""
        return ZSet._wrap({e: -w for e, w in self._d.items()})

    def __pos__(self) -> ZSet:
        return self

    def __mul__(self, k: object) -> ZSet:
        """Scale every weight by the integer ``k``."""
        if type(k) is not int:
            return NotImplemented
        if k == 0:
            return ZSet._wrap({})
        return ZSet._wrap({e: w * k for e, w in self._d.items()})

    __rmul__ = __mul__

    # -- relational operators (all linear except distinct) --

    def distinct(self) -> ZSet:
        """The set of elements with a positive weight, each with weight 1."""
        return ZSet._wrap({e: 1 for e, w in self._d.items() if w > 0})

    def filter(self, pred: Callable[[Any], object]) -> ZSet:
        """The elements for which the pure predicate ``pred`` is true, weights kept."""
        return ZSet._wrap({e: w for e, w in self._d.items() if pred(e)})

    def map(self, fn: Callable[[Any], Any]) -> ZSet:
        """Apply the pure function ``fn`` to every element, summing the weights of collisions."""
        out: dict[Any, int] = {}
        for e, w in self._d.items():
            _add_into(out, fn(e), w, "ZSet.map")
        return ZSet._wrap(out)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> ZSet:
        """Replace each element by every element of ``fn(element)``, with the same weight."""
        out: dict[Any, int] = {}
        for e, w in self._d.items():
            for x in fn(e):
                _add_into(out, x, w, "ZSet.flat_map")
        return ZSet._wrap(out)

    def index_with(self, key_fn: Callable[[Any], Any]) -> IndexedZSet:
        """Group the elements by ``key_fn(element)``: ``{key: {element: weight}}``."""
        out: dict[Any, dict[Any, int]] = {}
        for e, w in self._d.items():
            k = key_fn(e)
            try:
                inner = out.get(k)
            except TypeError:
                raise UnhashableElementError(k, "ZSet.index_with (key)") from None
            if inner is None:
                out[k] = {e: w}
            else:
                inner[e] = w
        return IndexedZSet._wrap(out)

    # -- value semantics --

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ZSet):
            return NotImplemented
        return self._d == other._d

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self._d.items()))
        return h

    def __repr__(self) -> str:
        if not self._d:
            return "ZSet()"
        items = _sorted_items(self._d.items())
        body = ", ".join(f"{e!r}: {w}" for e, w in items[:_REPR_LIMIT])
        if len(items) > _REPR_LIMIT:
            body += f", ... ({len(items) - _REPR_LIMIT} more)"
        return f"ZSet({{{body}}})"


def _check_values(vals: Any, key: Any, where: str) -> dict[Any, int]:
    if isinstance(vals, ZSet):
        return vals._d
    if not isinstance(vals, Mapping):
        raise WeightError(vals, key, where)
    d: dict[Any, int] = {}
    for v, w in vals.items():
        w = _weight(w, (key, v), where)
        if w:
            _add_into(d, v, w, where)
    return d


class IndexedZSet:
    """An immutable indexed Z-set: keys mapped to Z-sets of values, ``{key: {value: weight}}``.

    Iterating yields ``((key, value), weight)`` pairs, so an indexed Z-set reads like a Z-set of
    key-value pairs. Keys with no values are never stored.

    Args:
        data: ``{key: {value: weight}}`` (inner values may be mappings or :class:`ZSet`), or a
            mapping / iterable of ``((key, value), weight)`` pairs.

    Raises:
        WeightError: a weight is not an ``int``, or the data has neither shape.
        UnhashableElementError: a key or value is unhashable.

    Example:
        >>> IndexedZSet({1: {"foo": 1, "bar": 1}, 2: {"baz": 1}}).aggregate("count")
        ZSet({(1, 2): 1, (2, 1): 1})
    """

    __slots__ = ("_d", "_hash", "_len")

    _d: dict[Any, dict[Any, int]]
    _hash: int | None
    _len: int | None

    def __init__(self, data: Mapping[Any, Any] | Iterable[tuple[Any, int]] | None = None) -> None:
        d: dict[Any, dict[Any, int]] = {}
        where = "IndexedZSet(...)"
        if isinstance(data, IndexedZSet):
            d = data._d
        elif data is not None:
            items = list(data.items() if isinstance(data, Mapping) else data)
            nested = bool(items) and all(
                isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], Mapping | ZSet)
                for x in items
            )
            if nested:
                for k, vals in items:
                    inner = _check_values(vals, k, where)
                    if inner:
                        try:
                            d[k] = dict(inner)
                        except TypeError:
                            raise UnhashableElementError(k, where) from None
            else:
                for item in items:
                    try:
                        (k, v), w = item
                    except (TypeError, ValueError):
                        raise WeightError(
                            None, item, where + " (expected ((key, value), weight) pairs)"
                        ) from None
                    w = _weight(w, (k, v), where)
                    if not w:
                        continue
                    try:
                        inner = d.setdefault(k, {})
                    except TypeError:
                        raise UnhashableElementError(k, where) from None
                    _add_into(inner, v, w, where)
                    if not inner:
                        del d[k]
        self._d = d
        self._hash = None
        self._len = None

    @classmethod
    def _wrap(cls, d: dict[Any, dict[Any, int]]) -> IndexedZSet:
        """Wrap a dict of non-empty dicts of non-zero weights (no copy, no checks)."""
        z = object.__new__(cls)
        z._d = d
        z._hash = None
        z._len = None
        return z

    # -- reading --

    def __iter__(self) -> Iterator[tuple[tuple[Any, Any], int]]:
        """Iterate ``((key, value), weight)`` triples."""
        for k, vals in self._d.items():
            for v, w in vals.items():
                yield (k, v), w

    def __len__(self) -> int:
        """The number of ``(key, value)`` pairs with a non-zero weight."""
        n = self._len
        if n is None:
            n = self._len = sum(map(len, self._d.values()))
        return n

    def __bool__(self) -> bool:
        return bool(self._d)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` has at least one value."""
        try:
            return key in self._d
        except TypeError:
            return False

    def __getitem__(self, key: Any) -> ZSet:
        """The values under ``key``, as a Z-set (empty when the key is absent)."""
        try:
            vals = self._d.get(key)
        except TypeError:
            raise UnhashableElementError(key, "IndexedZSet[...]") from None
        return ZSet._wrap(dict(vals)) if vals else ZSet._wrap({})

    def keys(self) -> list[Any]:
        """The keys with at least one value (in insertion order)."""
        return list(self._d)

    def groups(self) -> Iterator[tuple[Any, ZSet]]:
        """Iterate ``(key, values)`` with the values as a :class:`ZSet`."""
        for k, vals in self._d.items():
            yield k, ZSet._wrap(dict(vals))

    def sorted_items(self) -> list[tuple[tuple[Any, Any], int]]:
        """The ``((key, value), weight)`` triples in order of key, then value."""
        return self.entries().sorted_items()

    def entries(self) -> ZSet:
        """Forget the index: the Z-set of ``(key, value)`` pairs."""
        return ZSet._wrap({(k, v): w for k, vals in self._d.items() for v, w in vals.items()})

    # -- algebra --

    def _combine(self, other: IndexedZSet, sign: int) -> IndexedZSet:
        out = dict(self._d)
        for k, vals in other._d.items():
            mine = out.get(k)
            if mine is None:
                out[k] = vals if sign == 1 else {v: -w for v, w in vals.items()}
            else:
                merged = _merge_dicts(mine, vals, sign)
                if merged:
                    out[k] = merged
                else:
                    del out[k]
        return IndexedZSet._wrap(out)

    def __add__(self, other: object) -> IndexedZSet:
        """Plus, key by key and value by value."""
        if not isinstance(other, IndexedZSet):
            return NotImplemented
        if not other._d:
            return self
        if not self._d:
            return other
        return self._combine(other, 1)

    def __sub__(self, other: object) -> IndexedZSet:
        """Minus, key by key and value by value."""
        if not isinstance(other, IndexedZSet):
            return NotImplemented
        if not other._d:
            return self
        return self._combine(other, -1)

    def __neg__(self) -> IndexedZSet:
        """Negate every weight."""
        return IndexedZSet._wrap(
            {k: {v: -w for v, w in vals.items()} for k, vals in self._d.items()}
        )

    # -- relational operators --

    def join(self, other: IndexedZSet, fn: Callable[[Any, Any, Any], Any]) -> ZSet:
        """Join on equal keys: ``fn(key, v1, v2)`` with weight ``w1 * w2`` (JoinStream)."""
        if not isinstance(other, IndexedZSet):
            raise TypeError(f"IndexedZSet.join: expected an IndexedZSet, got {other!r}")
        out: dict[Any, int] = {}
        a, b = self._d, other._d
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        for k in small:
            if k not in large:
                continue
            for v1, w1 in a[k].items():
                for v2, w2 in b[k].items():
                    _add_into(out, fn(k, v1, v2), w1 * w2, "join")
        return ZSet._wrap(out)

    def filter(self, pred: Callable[[Any, Any], object]) -> IndexedZSet:
        """Keep the ``(key, value)`` pairs for which ``pred(key, value)`` is true."""
        out: dict[Any, dict[Any, int]] = {}
        for k, vals in self._d.items():
            kept = {v: w for v, w in vals.items() if pred(k, v)}
            if kept:
                out[k] = kept
        return IndexedZSet._wrap(out)

    def distinct(self) -> IndexedZSet:
        """The pairs with positive weight, each with weight 1."""
        out: dict[Any, dict[Any, int]] = {}
        for k, vals in self._d.items():
            kept = {v: 1 for v, w in vals.items() if w > 0}
            if kept:
                out[k] = kept
        return IndexedZSet._wrap(out)

    def aggregate(self, agg: Any) -> ZSet:
        """Summarize each key's values: ``{(key, agg(values)): 1}`` (see ``Aggregate``)."""
        from blooml.dataflow.aggregates import aggregate

        return aggregate(agg, self)

    # -- value semantics --

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexedZSet):
            return NotImplemented
        return self._d == other._d

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self))
        return h

    def __repr__(self) -> str:
        if not self._d:
            return "IndexedZSet()"
        parts = []
        for k, vals in _sorted_items(self._d.items())[:_REPR_LIMIT]:
            inner = ", ".join(f"{v!r}: {w}" for v, w in _sorted_items(vals.items()))
            parts.append(f"{k!r}: {{{inner}}}")
        body = ", ".join(parts)
        if len(self._d) > _REPR_LIMIT:
            body += f", ... ({len(self._d) - _REPR_LIMIT} more keys)"
        return f"IndexedZSet({{{body}}})"
