"""``lbag``: a multiset whose merge takes the larger multiplicity of each element.

Storage is an rpds-py ``HashTrieMap`` from element to multiplicity (elements boxed in 1-tuples,
see :mod:`blooml.lattices.sets`), so merging a small bag into a large one costs
O(small · log n) and shares the rest.

Why max and not sum: merge must be idempotent (``b ⊔ b == b``), so multiset union is the
per-element maximum (as in Bud). Adding multiplicities is the ``+`` operator instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral
from typing import Any

from rpds import HashTrieMap

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import Lattice, LatticeBuilder, monotone, morph
from blooml.lattices._keyed import MISSING as _MISSING
from blooml.lattices._keyed import KeyedTrie
from blooml.lattices.ordered import lbool, lmax
from blooml.lattices.sets import (
    _sorted_for_repr,
    check_collection_arg,
    freeze_element,
    reject_lattice,
    trie_items,
)

__all__ = ["lbag"]


def _element(e: Any) -> Any:
    reject_lattice("lbag", e)
    try:
        hash(e)
    except TypeError:
        return freeze_element("lbag", e)
    return e


def _multiplicity(e: Any, m: Any) -> int:
    if isinstance(m, bool) or not isinstance(m, Integral) or m <= 0:
        raise LatticeValueError(
            "lbag", m, f"the multiplicity of {e!r} must be a positive int, got {m!r}"
        )
    return int(m)


class lbag(KeyedTrie):
    """A multiset; ⊥ is the empty bag (``lbag()``); merge keeps each element's larger count.

    Built from a mapping element → multiplicity (positive ints) or from an iterable, whose
    repeats are counted. Elements follow ``lset``'s rules (unhashables frozen, lattices
    rejected). ``reveal()`` returns a ``dict`` element → multiplicity.

    >>> lbag(["x", "x", "y"])
    lbag({'x': 2, 'y': 1})
    >>> lbag({"x": 2}).merge(lbag({"x": 1, "y": 1}))
    lbag({'x': 2, 'y': 1})
    >>> lbag({"x": 2}) + lbag({"x": 1})
    lbag({'x': 3})
    """

    __slots__ = ()
    wrapper_name = "lbag"
    # (KeyedTrie.merge returns the larger side itself when no multiplicity of it grows)
    merge_is_exact = True
    _v: HashTrieMap

    def __init__(self, values: Mapping[Any, int] | Iterable[Any] = ()) -> None:
        super().__init__(self._build(values))

    @staticmethod
    def _build(values: Any) -> HashTrieMap:
        check_collection_arg("lbag", values)
        if isinstance(values, lbag):
            return values._v
        counts: dict[Any, int] = {}
        if isinstance(values, Mapping):
            for e, m in values.items():
                m = _multiplicity(e, m)
                e = _element(e)
                counts[e] = max(counts.get(e, 0), m)
        else:
            if not hasattr(values, "__len__"):
                values = list(values)  # a one-shot iterator must survive a retry
            try:
                counts = Counter(values)
            except TypeError:
                counts = Counter(_element(e) for e in values)
            for t in set(map(type, counts)):
                if issubclass(t, Lattice):
                    reject_lattice("lbag", next(e for e in counts if type(e) is t))
        return HashTrieMap({(e,): m for e, m in counts.items()})

    @classmethod
    def from_item(cls, item: Any) -> lbag:
        """The singleton bag ``{item: 1}`` (an ``lbag`` is returned as it is).

        Folding rows into an ``lbag`` therefore gives each distinct row multiplicity 1: merge is
        the per-element maximum. Count repeats with ``lbag(rows)`` or ``+``.
        """
        if type(item) is cls:
            return item
        return cls._make(HashTrieMap({(_element(item),): 1}))

    @classmethod
    def builder(cls, initial: lbag | None = None) -> LatticeBuilder[lbag]:
        """A mutable accumulator backed by a plain ``dict`` (see :class:`BagBuilder`)."""
        return BagBuilder(cls, initial)

    # -- the lattice -------------------------------------------------------------------------

    # merge (KeyedTrie): the per-element maximum of multiplicities

    def _join_value(self, key: Any, old: int, new: int) -> int | None:
        """The larger multiplicity, or ``None`` when the stored one is not smaller."""
        return new if new > old else None

    def reveal(self) -> dict[Any, int]:
        """A new ``dict`` element → multiplicity (non-monotone); O(n)."""
        return {be[0]: m for be, m in trie_items(self._v)}

    def is_bottom(self) -> bool:
        """Whether the bag is empty (non-monotone)."""
        return len(self._v) == 0

    # -- morphisms ---------------------------------------------------------------------------

    @morph
    def intersect(self, other: lbag) -> lbag:
        """Elements in both bags with the smaller multiplicity; O(min(n, m) · log)."""
        if not isinstance(other, lbag):
            raise LatticeTypeError(type(self), type(other), "intersect")
        a, b = self._v, other._v
        small, big = (a, b) if len(a) <= len(b) else (b, a)
        get = big.get
        out = {}
        for be, m in trie_items(small):
            w = get(be)
            if w is not None:
                out[be] = min(m, w)
        return lbag._make(HashTrieMap(out))

    @morph
    def project(self, fn: Callable[[Any], Any]) -> lbag:
        """Map every element through ``fn``, dropping ``None`` results; O(n).

        Elements that map to the same image keep the *largest* of their multiplicities (not the
        sum): that is what makes ``project`` a morphism of the max-merge. Summing would only be
        monotone.
        """
        out: dict[Any, int] = {}
        for be, m in trie_items(self._v):
            y = fn(be[0])
            if y is None:
                continue
            y = _element(y)
            if m > out.get(y, 0):
                out[y] = m
        return lbag._make(HashTrieMap({(y,): m for y, m in out.items()}))

    @morph
    def mult(self, value: Any) -> lmax:
        """The multiplicity of ``value`` as an ``lmax`` (``lmax(0)`` when absent); O(log n)."""
        m = self._get(value)
        return lmax(0 if m is _MISSING else m)

    @morph
    def contains(self, value: Any) -> lbool:
        """``lbool`` that holds once ``value`` is in the bag; O(log n)."""
        return lbool(self._get(value) is not _MISSING)

    @morph
    def __add__(self, other: lbag) -> lbag:
        """Bag sum: multiplicities add; O(small · log n), iterating the smaller bag.

        A morphism in ``self`` for a fixed ``other``: per element, ``max(a, b) + c ==
        max(a + c, b + c)``. It is monotone, not a morphism, in both operands at once:
        ``({x:1} ⊔ {}) + ({} ⊔ {x:1}) == {x:2}`` but ``({x:1} + {}) ⊔ ({} + {x:1}) == {x:1}``.
        """
        if not isinstance(other, lbag):
            return NotImplemented
        a, b = self._v, other._v
        if len(b) > len(a):
            a, b = b, a
        if len(b) == 0:
            return self if len(other._v) == 0 else other
        get = a.get
        updates = {be: get(be, 0) + m for be, m in trie_items(b)}
        return lbag._make(a.update(updates))

    # -- monotone functions --------------------------------------------------------------------

    @monotone
    def size(self) -> lmax:
        """The total multiplicity as an ``lmax`` (monotone, not a morphism); O(n)."""
        return lmax(sum(m for _, m in trie_items(self._v)))

    def _leq(self, other: lbag) -> bool:
        a, b = self._v, other._v
        if len(a) > len(b):
            return False
        get = b.get
        return all(get(be, 0) >= m for be, m in trie_items(a))

    def __repr__(self) -> str:
        if not self._v:
            return "lbag()"
        d = self.reveal()
        inner = ", ".join(f"{e!r}: {d[e]!r}" for e in _sorted_for_repr(d))
        return f"lbag({{{inner}}})"


class BagBuilder(LatticeBuilder[lbag]):
    """Mutable accumulator for ``lbag``: ``add(x)`` is one ``dict.setdefault(x, 1)``.

    ``add`` folds ``lbag.from_item(x)`` (multiplicity 1, merged by max), so repeated rows do not
    accumulate; ``merge`` an ``lbag`` to contribute counts. ``freeze`` merges the collected
    counts into the starting value once and empties the dict; the builder pickles.
    """

    __slots__ = ("_new",)

    def __init__(self, cls: type[lbag], initial: lbag | None = None) -> None:
        super().__init__(cls, initial)
        self._new: dict[Any, int] = {}

    def add(self, item: Any) -> BagBuilder:
        """Fold one element in (an ``lbag`` is merged instead)."""
        if isinstance(item, Lattice):
            if type(item) is lbag:
                return self.merge(item)
            reject_lattice("lbag", item)
        try:
            self._new.setdefault(item, 1)
        except TypeError:
            self._new.setdefault(freeze_element("lbag", item), 1)
        return self

    def merge(self, value: lbag) -> BagBuilder:
        """Merge an ``lbag`` in; returns the builder."""
        if type(value) is not self._cls:
            raise LatticeTypeError(self._cls, type(value), "merge")
        if not self._new and len(value._v) > len(self._value._v):
            self._value = self._value.merge(value)
        else:
            self._max_into([(be[0], m) for be, m in trie_items(value._v)])
        return self

    def _max_into(self, pairs: Iterable[tuple[Any, int]]) -> None:
        new = self._new
        get = new.get
        for e, m in pairs:
            if m > get(e, 0):
                new[e] = m

    def merge_builder(self, other: LatticeBuilder[lbag]) -> BagBuilder:
        """Merge another ``lbag`` builder in; returns ``self``."""
        if other is self:
            return self
        if type(other) is BagBuilder:
            self._value = self._value.merge(other._value)
            self._max_into(other._new.items())
            return self
        return self.merge(other.freeze())

    def freeze(self) -> lbag:
        """The accumulated immutable value (the same object until something new is added)."""
        if self._new:
            delta = lbag._make(HashTrieMap({(e,): m for e, m in self._new.items()}))
            self._value = self._value.merge(delta)
            self._new = {}
        return self._value
