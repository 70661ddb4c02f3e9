"""The shared state of ``lvclock`` and ``lgcounter``: an ``lmap`` from node id to ``lmax`` count.

A node that is absent counts 0; stored counts are always >= 1, so one state has exactly one
representation (``{}`` and ``{"a": 0}`` are the same clock) and equality, hashing and the derived
partial order are exact. The merge is the ``lmap`` merge: keys unite, counts take the max.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from typing import Any, TypeVar

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice
from blooml.lattices.map import lmap
from blooml.lattices.ordered import lmax

N = TypeVar("N", bound="NodeCounts")


def check_node(name: str, node: Any) -> None:
    """Reject node ids that cannot be map keys (``None``, lattices, unhashable values)."""
    if node is None or isinstance(node, Lattice):
        raise LatticeValueError(name, node, "a node id must be a plain hashable value (a str)")
    try:
        hash(node)
    except TypeError:
        raise LatticeValueError(
            name, node, f"a node id must be hashable, not {type(node).__name__}"
        ) from None


def check_count(name: str, node: Any, n: Any, *, least: int) -> None:
    """Counts and increments are plain ints (``bool`` excluded) of at least ``least``."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise LatticeValueError(name, n, f"the count for {node!r} must be an int")
    if n < least:
        raise LatticeValueError(name, n, f"the count for {node!r} must be >= {least}")


class NodeCounts(Lattice):
    """Base of lattices whose state is node id -> positive int under pointwise max."""

    __slots__ = ()

    _v: lmap

    def __init__(self, counts: Mapping[Any, int] | None = None) -> None:
        name = type(self).wrapper_name
        if counts is None:
            super().__init__(lmap())
            return
        if isinstance(counts, NodeCounts):
            if type(counts) is not type(self):
                raise LatticeValueError(name, counts, f"expected a mapping node -> int or a {name}")
            super().__init__(counts._v)
            return
        if not isinstance(counts, Mapping):
            raise LatticeValueError(name, counts, "expected a mapping node id -> int count")
        entries: dict[Hashable, lmax] = {}
        for node, n in counts.items():
            check_node(name, node)
            check_count(name, node, n, least=0)
            if n:
                entries[node] = lmax(n)
        super().__init__(lmap(entries))

    @classmethod
    def _wrap(cls: type[N], state: lmap) -> N:
        return cls._make(state)

    def merge(self: N, other: N) -> N:
        """Pointwise maximum of the counts (nodes unite)."""
        m = self._v.merge(other._v)
        if m is self._v:
            return self
        if m is other._v:
            return other
        return self._wrap(m)

    def _count(self, node: Hashable) -> int:
        count = self._v.at(node, lmax).reveal()
        return 0 if count is None else int(count)

    def _bumped(self: N, node: Hashable, n: int) -> N:
        name = type(self).wrapper_name
        check_node(name, node)
        check_count(name, node, n, least=1)
        return self._wrap(self._v.merge(lmap({node: lmax(self._count(node) + n)})))

    def _items(self) -> Iterator[tuple[Hashable, int]]:
        for node, count in self._v.reveal().items():
            yield node, int(count.reveal())

    def counts(self) -> dict[Hashable, int]:
        """The counts as a plain ``dict`` node -> int (absent nodes count 0); non-monotone."""
        return dict(self._items())

    def __repr__(self) -> str:
        items = sorted(self._items(), key=lambda kv: repr(kv[0]))
        if not items:
            return f"{type(self).__qualname__}()"
        body = ", ".join(f"{k!r}: {v!r}" for k, v in items)
        return f"{type(self).__qualname__}({{{body}}})"
