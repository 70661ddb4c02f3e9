"""Counters: the grow-only ``lgcounter`` and the increment/decrement ``lpncounter``."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, monotone, morph
from blooml.lattices.crdts._counts import NodeCounts, check_node
from blooml.lattices.crdts.pair import lpair
from blooml.lattices.ordered import lmax

__all__ = ["lgcounter", "lpncounter"]


class lgcounter(NodeCounts):
    """A grow-only counter: each node counts its own increments; the value is their sum.

    The state is an ``lmap`` node -> ``lmax``; merge is the pointwise maximum, so a replica's
    increments are counted once however often states are exchanged.

    Args:
        counts: a mapping node id -> int >= 0 (how many increments each node has made).

    >>> a = lgcounter().increment("a", 2)
    >>> b = lgcounter().increment("b")
    >>> a.merge(b).value(), a.merge(b).merge(b).value()
    (lmax(3), lmax(3))

    Costs: ``increment``/``at`` O(log n) for n nodes; ``value`` O(n); merge O(k log n) for a
    state of k nodes merged into one of n.
    """

    __slots__ = ()
    wrapper_name = "lgcounter"

    @classmethod
    def from_item(cls, item: Any) -> lgcounter:
        """Fold rows: an ``lgcounter``, a mapping, or a ``(node, count)`` pair."""
        if isinstance(item, tuple) and len(item) == 2:
            return cls({item[0]: item[1]})
        return super().from_item(item)

    @morph
    def increment(self, node: Hashable, n: int = 1) -> lgcounter:
        """Return this counter with ``n`` (an int >= 1) more increments by ``node``.

        A morphism: the new count for ``node`` is its old count plus ``n``, and ``+ n``
        distributes over ``max``.
        """
        return self._bumped(node, n)

    @morph
    def at(self, node: Hashable) -> lmax:
        """How many increments ``node`` made, as ``lmax`` (``lmax(0)`` when absent)."""
        check_node("lgcounter", node)
        return lmax(self._count(node))

    @monotone
    def value(self) -> lmax:
        """The total count as ``lmax`` (monotone: counts only grow; not a morphism)."""
        return lmax(sum(n for _, n in self._items()))

    def reveal(self) -> int:
        """The total count as an ``int``; non-monotone (it escapes the lattice)."""
        return sum(n for _, n in self._items())


def _gcounter(name: str, which: str, x: Any) -> lgcounter:
    if isinstance(x, lgcounter):
        return x
    if x is None or isinstance(x, Mapping):
        try:
            return lgcounter(x)
        except LatticeValueError as e:
            raise LatticeValueError(name, e.value, f"{which}: {e.reason}") from None
    raise LatticeValueError(name, x, f"{which} must be a mapping node -> int or an lgcounter")


def _bump(counter: lgcounter, node: Hashable, n: int) -> lgcounter:
    try:
        return counter.increment(node, n)
    except LatticeValueError as e:
        raise LatticeValueError("lpncounter", e.value, e.reason) from None


class lpncounter(Lattice):
    """A counter that goes up and down: a pair of grow-only counters, increments and decrements.

    The state is ``lpair(lgcounter, lgcounter)``; merge is componentwise. The value
    (increments − decrements) is NOT monotone: a merge that brings in decrements lowers it.

    Args:
        increments: a mapping node id -> increments made by that node (or an ``lgcounter``).
        decrements: a mapping node id -> decrements made by that node (or an ``lgcounter``).

    >>> a = lpncounter().increment("a", 5)
    >>> b = lpncounter().decrement("b", 2)
    >>> a.merge(b).value()
    3
    >>> a.merge(b)
    lpncounter({'a': 5}, {'b': 2})

    Costs: as two ``lgcounter``s.
    """

    __slots__ = ()
    wrapper_name = "lpncounter"

    _v: lpair

    def __init__(
        self,
        increments: Mapping[Any, int] | lgcounter | None = None,
        decrements: Mapping[Any, int] | lgcounter | None = None,
    ) -> None:
        p = _gcounter("lpncounter", "increments", increments)
        n = _gcounter("lpncounter", "decrements", decrements)
        super().__init__(lpair(p, n))

    def merge(self, other: lpncounter) -> lpncounter:
        """Merge increments and decrements separately (pointwise maximum of each)."""
        m = self._v.merge(other._v)
        if m is self._v:
            return self
        if m is other._v:
            return other
        return lpncounter._make(m)

    @morph
    def increments(self) -> lgcounter:
        """The increments as an ``lgcounter`` (a morphism: projection of a product)."""
        return self._v.first(lgcounter)  # type: ignore[no-any-return]

    @morph
    def decrements(self) -> lgcounter:
        """The decrements as an ``lgcounter`` (a morphism: projection of a product)."""
        return self._v.second(lgcounter)  # type: ignore[no-any-return]

    @morph
    def increment(self, node: Hashable, n: int = 1) -> lpncounter:
        """Return this counter with ``n`` (an int >= 1) added by ``node``; a morphism."""
        return lpncounter._make(lpair(_bump(self.increments(), node, n), self.decrements()))

    @morph
    def decrement(self, node: Hashable, n: int = 1) -> lpncounter:
        """Return this counter with ``n`` (an int >= 1) subtracted by ``node``; a morphism."""
        return lpncounter._make(lpair(self.increments(), _bump(self.decrements(), node, n)))

    def value(self) -> int:
        """Increments minus decrements; NOT monotone (merging in decrements lowers it)."""
        return self.increments().reveal() - self.decrements().reveal()

    def reveal(self) -> int:
        """The same as :meth:`value`; non-monotone."""
        return self.value()

    def __repr__(self) -> str:
        p, n = self.increments(), self.decrements()
        if n.is_bottom():
            return "lpncounter()" if p.is_bottom() else f"lpncounter({p.counts()!r})"
        return f"lpncounter({p.counts()!r}, {n.counts()!r})"
