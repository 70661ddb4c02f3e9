"""Vector clocks: ``lvclock``, an ``lmap`` from node id to ``lmax`` event count."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Literal

from blooml.lattices._base import morph
from blooml.lattices.crdts._counts import NodeCounts, check_node
from blooml.lattices.ordered import lmax

__all__ = ["lvclock"]


class lvclock(NodeCounts):
    """A vector clock: for each node, how many of its events are known.

    Merge is the pointwise maximum; ``a <= b`` iff every count of ``a`` is at most that of ``b``,
    which is exactly "every event ``a`` knows, ``b`` knows". Absent nodes count 0 and zero counts
    are dropped, so ``lvclock({"a": 0}) == lvclock()``, which is ⊥.

    Args:
        counts: a mapping node id -> int >= 0 (node ids: any hashable plain value, usually str).

    >>> a = lvclock().increment("a")
    >>> b = a.increment("b")
    >>> a.happened_before(b), a.increment("a").concurrent_with(b)
    (True, True)
    >>> a.increment("a").merge(b)
    lvclock({'a': 2, 'b': 1})

    Costs: merging a clock of ``k`` entries into one of ``n`` costs O(k log n) and shares the
    larger; ``increment`` and ``at`` cost O(log n); ``happened_before``/``concurrent_with``
    cost a merge plus an O(n) comparison.
    """

    __slots__ = ()
    wrapper_name = "lvclock"

    @morph
    def increment(self, node: Hashable) -> lvclock:
        """Return this clock with ``node``'s count one higher (a new event at ``node``).

        A morphism: ``(a ⊔ b).increment(n) == a.increment(n) ⊔ b.increment(n)``.
        """
        return self._bumped(node, 1)

    @morph
    def at(self, node: Hashable) -> lmax:
        """``node``'s count as ``lmax`` (``lmax(0)`` when absent); a morphism."""
        check_node("lvclock", node)
        return lmax(self._count(node))

    def happened_before(self, other: lvclock) -> bool:
        """Whether this clock is strictly before ``other`` (``self < other``).

        Non-monotone: a clock that grows can stop being before ``other``.
        """
        return self < other

    def concurrent_with(self, other: lvclock) -> bool:
        """Whether neither clock is ``<=`` the other (concurrent events); non-monotone."""
        return not (self <= other) and not (other <= self)

    def compare(self, other: lvclock) -> Literal["before", "after", "equal", "concurrent"]:
        """How this clock relates to ``other`` in one call; non-monotone."""
        m = self.merge(other)
        if m == other:
            return "equal" if m == self else "before"
        return "after" if m == self else "concurrent"

    def reveal(self) -> dict[Hashable, int]:
        """The clock as a plain ``dict`` node -> count; non-monotone."""
        return self.counts()
