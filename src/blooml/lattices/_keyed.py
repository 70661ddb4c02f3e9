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
    """Base of the lattices whose value is a ``HashTrieMap`` of boxed key -> value."""

    __slots__ = ()

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
