"""The plumbing shared by lattices stored as an rpds-py ``HashTrieMap`` (``lbag``, ``lmap``).

Keys are boxed in 1-tuples (rpds-py panics when two colliding keys compare with
``NotImplemented``, e.g. ``0`` and ``""``); unhashable keys are looked up frozen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, _set_h
from blooml.lattices.sets import freeze_element, trie_items

__all__ = ["MISSING", "KeyedTrie"]

#: Returned by ``KeyedTrie._get`` for an absent key.
MISSING: Any = object()


class KeyedTrie(Lattice):
    """Base of the lattices whose value is a ``HashTrieMap`` of boxed key -> value.

    A subclass says how two values under one key join (:meth:`_join_value`); the union of the
    keys, the sharing and the growth fast path are here.
    """

    __slots__ = ()

    def _join_value(self, key: Any, old: Any, new: Any) -> Any:
        """The join of ``old`` (stored under ``key`` in the larger side) and ``new``, or
        ``None`` when it is ``old`` itself (nothing to update)."""
        raise NotImplementedError  # pragma: no cover - lbag and lmap override it

    def merge(self, other: Any) -> Any:
        """Union of the keys, joining the values of shared keys; O(small · log n), iterating the
        smaller side only. Returns the larger side itself when the join changes none of its
        values."""
        if other is self:
            return self
        a, b = self._v, other._v
        if len(a) >= len(b):
            big, bv, sv = self, a, b
        else:
            big, bv, sv = other, b, a
        if len(sv) == 0:
            return big
        items = trie_items(sv)
        get = bv.get
        first = get(items[0][0])
        if first is None:
            # Probably disjoint keys (growth): one Rust-side update, no Python loop (one key:
            # an insert, half the cost of an update with a one-entry dict)
            if len(items) == 1:
                return type(self)._make(bv.insert(*items[0]))
            grown = bv.update(dict(items))  # a dict argument: ~25% faster than a trie
            if len(grown) == len(bv) + len(sv):
                return type(self)._make(grown)
        join = big._join_value
        updates = {}
        if len(items) == 1:  # one key, stored already (a put into a large map): one lookup
            bk, v = items[0]
            m = join(bk[0], first, v)
            return big if m is None else type(self)._make(bv.insert(bk, m))
        for bk, v in items:
            old = get(bk)
            if old is None:
                updates[bk] = v
            else:
                m = join(bk[0], old, v)
                if m is not None:
                    updates[bk] = m
        if not updates:
            return big
        if len(updates) == 1:  # one changed key (a put into a large map): an insert
            return type(self)._make(bv.insert(*next(iter(updates.items()))))
        return type(self)._make(bv.update(updates))

    def _get(self, key: Any) -> Any:
        """The value stored under ``key``, or :data:`MISSING`; O(log n)."""
        try:
            return self._v.get((key,), MISSING)
        except TypeError:
            try:
                return self._v.get((freeze_element(type(self).wrapper_name, key),), MISSING)
            except LatticeValueError:
                return MISSING

    def __iter__(self) -> Iterator[Any]:
        """The distinct keys (a bag's distinct elements, as ``Counter`` iterates)."""
        return iter([bk[0] for bk, _ in trie_items(self._v)])

    def __len__(self) -> int:
        """The number of distinct keys (for a bag, ``size()`` is the total multiplicity)."""
        return len(self._v)

    def __contains__(self, key: Any) -> bool:
        return self._get(key) is not MISSING

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented if not isinstance(other, Lattice) else False
        a, b = self._v, other._v  # type: ignore[attr-defined]
        if a is b:
            return True
        if len(a) != len(b):
            return False
        ha, hb = self._h, other._h  # type: ignore[attr-defined]
        if ha is not None and hb is not None and ha != hb:
            return False
        get = b.get
        return all(get(bk, MISSING) == v for bk, v in trie_items(a))

    def __hash__(self) -> int:
        h = self._h
        if h is None:
            h = hash((type(self).__qualname__, frozenset(trie_items(self._v))))
            _set_h(self, h)
        return h
