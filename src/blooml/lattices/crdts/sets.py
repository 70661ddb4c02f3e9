"""Sets with removal: the add-wins observed-remove ``lorset`` and the two-phase ``l2pset``.

Both only ever grow internally (removal is recorded as a tombstone, never by forgetting), which is
what makes them lattices; membership is therefore NOT monotone and the rule layer stratifies it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, morph
from blooml.lattices.crdts.pair import lpair
from blooml.lattices.map import lmap
from blooml.lattices.sets import lset

__all__ = ["l2pset", "lorset"]


def _check_plain(name: str, what: str, x: Any) -> None:
    if x is None or isinstance(x, Lattice):
        raise LatticeValueError(name, x, f"{what} must be a plain hashable value, not {x!r}")
    try:
        hash(x)
    except TypeError:
        raise LatticeValueError(
            name, x, f"{what} must be hashable, not {type(x).__name__}"
        ) from None


def _set_repr(items: Iterable[Any]) -> str:
    body = sorted(repr(x) for x in items)
    return "{" + ", ".join(body) + "}" if body else "set()"


def _lset_of(name: str, what: str, one: str, items: Any) -> lset:
    """Validate a collection argument (``what``: its description; ``one``: one item's) as lset."""
    if isinstance(items, lset):
        values: Iterable[Any] = items.reveal()
    elif isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise LatticeValueError(name, items, f"{what} must be a set (an iterable) of values")
    else:
        values = list(items)
    for v in values:
        _check_plain(name, one, v)
    return lset(values)


def _tag_map(name: str, which: str, m: Any) -> lmap:
    """``{elem: {tags}}`` -> ``lmap`` elem -> ``lset`` of tags (elements without tags dropped)."""
    if m is None:
        return lmap()
    if not isinstance(m, Mapping):
        raise LatticeValueError(name, m, f"{which} must be a mapping element -> set of tags")
    entries: dict[Hashable, lset] = {}
    for elem, tags in m.items():
        _check_plain(name, "an element", elem)
        ts = _lset_of(name, f"the tags of {elem!r}", f"a tag of {elem!r}", tags)
        if not ts.is_bottom():
            entries[elem] = ts
    return lmap(entries)


def _tags(m: lmap, elem: Hashable) -> frozenset[Any]:
    return frozenset(m.at(elem, lset).reveal())


class lorset(Lattice):
    """An add-wins observed-remove set (OR-set).

    Every ``add(elem, tag)`` carries a tag unique to that add (a ``(node, sequence)`` pair, a
    UUID); ``remove(elem)`` tombstones the tags of ``elem`` this replica has *observed*. An
    element is in the set while some tag of it is not tombstoned, so an add concurrent with a
    remove survives it (add wins), and an element can be removed and re-added any number of times.

    The state is ``lpair(lmap elem -> lset tags added, lmap elem -> lset tags removed)``; merge is
    componentwise union, so replicas converge whatever order they exchange states in.
    Tombstones are never collected: the state grows with every add and remove.

    Args:
        adds: a mapping element -> set of tags added.
        removes: a mapping element -> set of tags removed (tombstones).

    >>> a = lorset().add("milk", ("a", 1))
    >>> b = a.remove("milk")                    # b saw the add and removes it ...
    >>> c = a.add("milk", ("c", 1))             # ... while c concurrently adds it again
    >>> b.merge(c).contains("milk"), b.contains("milk")
    (True, False)

    Costs: ``add``/``remove``/``contains`` O(log n + tags of the element); ``elements`` O(total
    tags); merge as two ``lmap`` merges.
    """

    __slots__ = ()
    wrapper_name = "lorset"

    _v: lpair

    def __init__(
        self,
        adds: Mapping[Hashable, Iterable[Hashable]] | None = None,
        removes: Mapping[Hashable, Iterable[Hashable]] | None = None,
    ) -> None:
        super().__init__(
            lpair(_tag_map("lorset", "adds", adds), _tag_map("lorset", "removes", removes))
        )

    @classmethod
    def from_item(cls, item: Any) -> lorset:
        """Fold rows: an ``lorset`` or an ``(elem, tag)`` add."""
        if type(item) is cls:
            return item
        if isinstance(item, tuple) and len(item) == 2:
            return cls().add(item[0], item[1])
        raise LatticeValueError("lorset", item, "a folded row must be an (element, tag) pair")

    def _adds(self) -> lmap:
        return self._v.first(lmap)  # type: ignore[no-any-return]

    def _removes(self) -> lmap:
        return self._v.second(lmap)  # type: ignore[no-any-return]

    def merge(self, other: lorset) -> lorset:
        """Union of the adds and of the tombstones."""
        m = self._v.merge(other._v)
        if m is self._v:
            return self
        if m is other._v:
            return other
        return lorset._make(m)

    @morph
    def add(self, elem: Hashable, tag: Hashable) -> lorset:
        """Return this set with ``elem`` added under ``tag`` (unique per add); a morphism."""
        _check_plain("lorset", "an element", elem)
        _check_plain("lorset", "a tag", tag)
        delta = lpair(lmap({elem: lset([tag])}), lmap())
        return self.merge(lorset._make(delta))

    @morph
    def remove(self, elem: Hashable) -> lorset:
        """Return this set with every tag of ``elem`` seen so far tombstoned.

        Adds this replica has not seen are unaffected (they win). Removing an element never
        added here is a no-op. A morphism: the tags observed in ``a ⊔ b`` are those observed in
        ``a`` plus those in ``b``.
        """
        _check_plain("lorset", "an element", elem)
        seen = self._adds().at(elem, lset)
        if seen.is_bottom():
            return self
        return self.merge(lorset._make(lpair(lmap(), lmap({elem: seen}))))

    def contains(self, elem: Hashable) -> bool:
        """Whether ``elem`` is in the set; NOT monotone (a merged-in remove makes it False)."""
        return bool(_tags(self._adds(), elem) - _tags(self._removes(), elem))

    def _live(self) -> Iterator[Hashable]:
        removes = self._removes()
        for elem, tags in self._adds().reveal().items():
            if frozenset(tags.reveal()) - _tags(removes, elem):
                yield elem

    def elements(self) -> frozenset[Hashable]:
        """The elements in the set; non-monotone."""
        return frozenset(self._live())

    def reveal(self) -> frozenset[Hashable]:
        """The same as :meth:`elements`; non-monotone."""
        return self.elements()

    def __repr__(self) -> str:
        def tag_map(m: lmap) -> str:
            items = sorted(m.reveal().items(), key=lambda kv: repr(kv[0]))
            return "{" + ", ".join(f"{k!r}: {_set_repr(v.reveal())}" for k, v in items) + "}"

        adds, removes = self._adds(), self._removes()
        if removes.is_bottom():
            return "lorset()" if adds.is_bottom() else f"lorset({tag_map(adds)})"
        return f"lorset({tag_map(adds)}, {tag_map(removes)})"


class l2pset(Lattice):
    """A two-phase set: an element can be added, then removed, and never added again.

    The state is ``lpair(lset added, lset removed)`` (the removed set holds tombstones); merge
    is componentwise union. An element is in the set iff it was added and not removed. Removal
    wins over any add, earlier or concurrent, which is the difference from :class:`lorset`.

    Args:
        added: the elements ever added.
        removed: the tombstones (elements removed; they can never be members again).

    >>> a = l2pset().add("x").add("y")
    >>> b = a.remove("x")
    >>> a.add("x").merge(b).elements()
    frozenset({'y'})

    Costs: as two ``lset``s; ``elements`` O(|added|).
    """

    __slots__ = ()
    wrapper_name = "l2pset"

    _v: lpair

    def __init__(self, added: Iterable[Hashable] = (), removed: Iterable[Hashable] = ()) -> None:
        super().__init__(
            lpair(
                _lset_of("l2pset", "the added elements", "an element", added),
                _lset_of("l2pset", "the removed elements", "an element", removed),
            )
        )

    @classmethod
    def from_item(cls, item: Any) -> l2pset:
        """Fold rows: an ``l2pset``, or any other value, added."""
        if type(item) is cls:
            return item
        return cls().add(item)

    def merge(self, other: l2pset) -> l2pset:
        """Union of the added elements and of the tombstones."""
        m = self._v.merge(other._v)
        if m is self._v:
            return self
        if m is other._v:
            return other
        return l2pset._make(m)

    @morph
    def added(self) -> lset:
        """Every element ever added, removed or not, as ``lset``; a morphism."""
        return self._v.first(lset)  # type: ignore[no-any-return]

    @morph
    def removed(self) -> lset:
        """The tombstones as ``lset``; a morphism."""
        return self._v.second(lset)  # type: ignore[no-any-return]

    @morph
    def add(self, elem: Hashable) -> l2pset:
        """Return this set with ``elem`` added (no effect if it was removed); a morphism."""
        _check_plain("l2pset", "an element", elem)
        return self.merge(l2pset._make(lpair(lset([elem]), lset())))

    @morph
    def remove(self, elem: Hashable) -> l2pset:
        """Return this set with ``elem`` tombstoned, for good.

        A no-op when this replica never saw ``elem`` added (tombstoning it would ban a future
        add). A morphism.
        """
        _check_plain("l2pset", "an element", elem)
        if not self.added().contains(elem):
            return self
        return self.merge(l2pset._make(lpair(lset(), lset([elem]))))

    def contains(self, elem: Hashable) -> bool:
        """Whether ``elem`` was added and not removed; NOT monotone."""
        return bool(self.added().contains(elem)) and not self.removed().contains(elem)

    def elements(self) -> frozenset[Hashable]:
        """The members (added and not removed); non-monotone."""
        return frozenset(self.added().reveal()) - frozenset(self.removed().reveal())

    def reveal(self) -> frozenset[Hashable]:
        """The same as :meth:`elements`; non-monotone."""
        return self.elements()

    def __repr__(self) -> str:
        added, removed = self.added().reveal(), self.removed().reveal()
        if not removed:
            return "l2pset()" if not added else f"l2pset({_set_repr(added)})"
        return f"l2pset({_set_repr(added)}, {_set_repr(removed)})"
