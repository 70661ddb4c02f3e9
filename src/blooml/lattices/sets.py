"""Set lattices: ``lset`` (any hashable values) and ``lpset`` (non-negative numbers).

Storage is chosen per value, by how the value was made (the choice never changes its meaning):

* a value built in bulk (the constructor, a bulk merge, ``intersect``, ``project``...) holds a
  ``frozenset``: building, iterating, comparing and bulk union run at C speed;
* a value that receives a *small* delta (at most 1/16 of its size) is stored in an rpds-py
  ``HashTrieSet`` (a persistent hash trie): the merge copies O(small · log n) nodes and shares
  the rest. A frozenset-backed value that receives its first small delta is converted in place,
  once (O(n)), so a value grown by many small merges pays O(n) once, not per merge.

See ``docs/lattices.md`` for the measurements behind this (``benchmarks/bench_lattices.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from numbers import Number
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from pyrsistent import pmap
from rpds import HashTrieMap, HashTrieSet

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import (
    Lattice,
    LatticeBuilder,
    _set_h,
    _set_v,
    check_not_none,
    monotone,
    morph,
)
from blooml.lattices.ordered import lbool, lmax

if TYPE_CHECKING:
    from blooml.lattices.map import lmap

__all__ = ["lpset", "lset"]

S = TypeVar("S", bound="lset")

#: A delta is merged into a persistent trie when ``len(small) * _BULK_RATIO <= len(big)``;
#: otherwise both sides are unioned as frozensets (C speed, O(n + m)). Measured crossover:
#: a trie insert costs ~1.5 µs, a frozenset rebuild ~0.1 µs per element of the big side.
_BULK_RATIO = 16

Store = frozenset[Any] | HashTrieSet

#: Element types that are hashable, immutable and never lattices: no checks needed.
_ATOMIC = frozenset({int, float, str, bytes, bool, complex, type(None)})
_new = object.__new__


# -- element freezing (shared by lbag and lmap) -----------------------------------------------


def freeze_element(owner: str, value: Any) -> Hashable:
    """Return a hashable stand-in for an unhashable element, recursively.

    ``list`` → ``tuple``, ``set`` → ``frozenset``, ``dict`` → pyrsistent ``PMap`` (which compares
    equal to the dict), ``bytearray`` → ``bytes``; tuples (named tuples included) are rebuilt
    with frozen fields. So ``[1, 2]`` and ``(1, 2)`` are the same element.

    Raises:
        LatticeValueError: the value is unhashable and of no freezable kind.
    """
    try:
        hash(value)
    except TypeError:
        pass
    else:
        return value
    if isinstance(value, tuple):
        frozen = [freeze_element(owner, e) for e in value]
        return type(value)(*frozen) if hasattr(value, "_fields") else tuple(frozen)  # type: ignore[arg-type]
    if isinstance(value, list):
        return tuple(freeze_element(owner, e) for e in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze_element(owner, e) for e in value)
    if isinstance(value, Mapping):
        return pmap({freeze_element(owner, k): freeze_element(owner, v) for k, v in value.items()})
    if isinstance(value, bytearray):
        return bytes(value)
    raise LatticeValueError(
        owner,
        value,
        f"{type(value).__name__} values are unhashable and cannot be frozen "
        "(lists, sets, dicts and bytearrays are frozen automatically)",
    )


def reject_lattice(owner: str, value: Any, what: str = "element") -> None:
    """Raise when a lattice value is used where a plain value is required (Bud's rule)."""
    if isinstance(value, Lattice):
        raise LatticeValueError(
            owner,
            value,
            f"an {owner} {what} must be a plain value, not a lattice "
            "(to map plain keys to lattice values use lmap)",
        )


def check_collection_arg(owner: str, value: Any) -> None:
    """Reject the arguments a collection constructor would silently misread."""
    check_not_none(owner, value)
    if isinstance(value, (str, bytes, bytearray)):
        raise LatticeValueError(
            owner,
            value,
            f"a string is not a collection of elements here; wrap it: {owner}([{value!r}])",
        )
    if not isinstance(value, Iterable):
        raise LatticeValueError(
            owner, value, f"expected an iterable of elements, got a {type(value).__name__}"
        )


# -- fast access to persistent structures ------------------------------------------------------
# Two rpds-py quirks shape these helpers:
# * on a hash collision rpds-py calls ``a.__eq__(b)`` directly and panics (an uncatchable
#   ``PanicException``) when it returns ``NotImplemented`` -- e.g. ``1`` vs ``1.0``, ``0`` vs
#   ``""``. Tries therefore hold 1-tuples ``(x,)``: ``tuple.__eq__`` between tuples always
#   answers, with Python's full ``==`` protocol on the elements (so ``1.0`` finds ``1``).
# * rpds-py iterates one Python object at a time (~2 µs per element); its pickle support
#   (``__reduce__``) hands back every element in one list at Rust speed (~0.1 µs each).


def _probe_reduce() -> bool:
    try:
        s = HashTrieSet([1, 2])
        m = HashTrieMap({1: 2})
        return sorted(s.__reduce__()[1][0]) == [1, 2] and list(m.__reduce__()[1][0]) == [(1, 2)]
    except Exception:  # pragma: no cover - depends on rpds-py internals
        return False


_FAST_REDUCE = _probe_reduce()


def trie_items(trie: HashTrieSet | HashTrieMap) -> list[Any]:
    """Raw entries of a ``HashTrieSet`` (or ``(key, value)`` pairs of a ``HashTrieMap``)."""
    if _FAST_REDUCE:
        return trie.__reduce__()[1][0]  # type: ignore[no-any-return, return-value]
    return list(trie.items()) if isinstance(trie, HashTrieMap) else list(trie)  # pragma: no cover


_unbox = itemgetter(0)


def _elems(v: Any) -> Iterable[Any]:
    return v if type(v) is frozenset else [t[0] for t in trie_items(v)]


def _boxed(v: Any) -> Iterable[tuple[Any]]:
    return trie_items(v) if type(v) is not frozenset else [(x,) for x in v]


def _fz(v: Any) -> frozenset[Any]:
    return v if type(v) is frozenset else frozenset(map(_unbox, trie_items(v)))


def _has(v: Any, x: Any) -> bool:
    return x in v if type(v) is frozenset else (x,) in v


def _contains_all(big: Any, small: Any) -> bool:
    if type(big) is frozenset:
        return big.issuperset(_elems(small))
    return all(t in big for t in _boxed(small))


def _field(owner: str, op: str, row: Any, col: Any) -> Any:
    """Column ``col`` (int position or str field name) of ``row``."""
    if isinstance(col, int) and not isinstance(col, bool):
        try:
            return row[col]
        except (IndexError, KeyError, TypeError):
            raise LatticeValueError(
                owner, row, f"{op}: the element has no column at position {col}"
            ) from None
    if isinstance(col, str):
        if isinstance(row, Mapping):
            if col in row:
                return row[col]
        elif hasattr(row, col):
            return getattr(row, col)
        raise LatticeValueError(owner, row, f"{op}: the element has no field {col!r}")
    raise TypeError(f"{owner}.{op}: a column is an int position or a str field name, got {col!r}")


def _columns(op: str, cols: Any) -> tuple[Any, ...]:
    if isinstance(cols, (int, str)) and not isinstance(cols, bool):
        return (cols,)
    if isinstance(cols, Iterable):
        return tuple(cols)
    raise TypeError(f"lset.{op}: expected a column or a sequence of columns, got {cols!r}")


def _sorted_for_repr(items: Iterable[Any]) -> list[Any]:
    items = list(items)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=repr)


# -- lset ---------------------------------------------------------------------------------------


class lset(Lattice):
    """A set that grows by union; ⊥ is the empty set (``lset()``).

    Elements are plain hashable values; unhashable lists, sets and dicts are frozen (see
    :func:`freeze_element`), lattice values are rejected. ``reveal()`` returns a ``frozenset``.

    >>> lset({1, 2}).merge(lset({2, 3}))
    lset({1, 2, 3})
    >>> lset({1, 2}).contains(2), lset({1, 2}).size()
    (lbool(True), lmax(2))
    """

    __slots__ = ()
    wrapper_name = "lset"
    _v: Store

    def __init__(self, elements: Iterable[Any] = ()) -> None:
        super().__init__(self._build(elements))

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def _build(cls, elements: Iterable[Any]) -> frozenset[Any]:
        name = cls.wrapper_name
        if type(elements) is frozenset:
            fs = elements
        else:
            check_collection_arg(name, elements)
            if isinstance(elements, lset):
                fs = _fz(elements._v)
            else:
                if not hasattr(elements, "__len__"):
                    elements = list(elements)  # a one-shot iterator must survive a retry
                try:
                    fs = frozenset(elements)
                except TypeError:
                    fs = frozenset(freeze_element(name, e) for e in elements)
        for t in set(map(type, fs)):
            if issubclass(t, Lattice):
                bad = next(e for e in fs if type(e) is t)
                reject_lattice(name, bad)
        cls._validate(fs)
        return fs

    @classmethod
    def _validate(cls, elements: Iterable[Any]) -> None:
        """Hook for subclasses restricting the element domain (``lpset``)."""

    @classmethod
    def _element(cls, item: Any) -> Any:
        """Check and freeze one element (used by ``from_item`` and the builder)."""
        reject_lattice(cls.wrapper_name, item)
        try:
            hash(item)
        except TypeError:
            item = freeze_element(cls.wrapper_name, item)
        cls._validate((item,))
        return item

    @classmethod
    def from_item(cls: type[S], item: Any) -> S:
        """The singleton set ``{item}`` (a value of this class is returned as it is)."""
        if cls is lset and type(item) in _ATOMIC:
            # the hot path of every fold (one call per row): nothing to check or freeze
            obj = _new(cls)
            _set_v(obj, frozenset((item,)))
            _set_h(obj, None)
            return obj
        if type(item) is cls:
            return item
        return cls._make(frozenset((cls._element(item),)))

    @classmethod
    def builder(cls: type[S], initial: S | None = None) -> LatticeBuilder[S]:
        """A mutable accumulator backed by a plain ``set`` (see :class:`SetBuilder`)."""
        return SetBuilder(cls, initial)  # type: ignore[return-value]

    # -- the lattice -------------------------------------------------------------------------

    def merge(self: S, other: S) -> S:
        """Set union. Costs O(small · log n) when one side is at most 1/16 of the other (the
        larger is shared), O(n + m) otherwise; returns the larger side itself when it already
        contains the smaller."""
        if other is self:
            return self
        a: Any = self._v
        b: Any = other._v
        if len(a) >= len(b):
            big, bv, sv = self, a, b
        else:
            big, bv, sv = other, b, a
        n_small = len(sv)
        if n_small == 0:
            return big
        if n_small * _BULK_RATIO <= len(bv):
            if type(bv) is frozenset:
                if bv.issuperset(_elems(sv)):
                    return big
                bv = big._as_trie()
                boxed = _boxed(sv)
            else:
                boxed = _boxed(sv)
                for t in boxed:  # O(small); stops at the first new element
                    if t not in bv:
                        break
                else:
                    return big
            return type(self)._make(bv.update(boxed))
        fb, fs = _fz(bv), _fz(sv)
        if fb.issuperset(fs):
            return big
        return type(self)._make(fb | fs)

    def _as_trie(self) -> HashTrieSet:
        # Same value, new representation: safe to swap in place (hash and equality do not
        # depend on it), so the O(n) conversion happens once per value.
        v: Any = self._v
        if type(v) is frozenset:
            v = HashTrieSet([(x,) for x in v])
            _set_v(self, v)
        return v

    def reveal(self) -> frozenset[Any]:
        """The elements as a ``frozenset`` (non-monotone; O(1) for bulk-built values, O(n) for
        values grown by small merges)."""
        return _fz(self._v)

    def is_bottom(self) -> bool:
        """Whether the set is empty (non-monotone)."""
        return len(self._v) == 0

    # -- morphisms ---------------------------------------------------------------------------

    @morph
    def intersect(self: S, other: lset) -> S:
        """Elements in both sets; O(min(n, m)). The result has this value's class."""
        if not isinstance(other, lset):
            raise LatticeTypeError(type(self), type(other), "intersect")
        a, b = self._v, other._v
        small, big = (a, b) if len(a) <= len(b) else (b, a)
        if type(small) is frozenset and type(big) is frozenset:
            return type(self)._make(small & big)
        return type(self)._make(frozenset(x for x in _elems(small) if _has(big, x)))

    @morph
    def product(self, other: lset) -> lset:
        """The set of pairs ``(a, b)`` for ``a`` in this set and ``b`` in ``other``; O(n · m).

        Always an ``lset`` (pairs are not numbers, so ``lpset.product`` is an ``lset`` too).
        """
        if not isinstance(other, lset):
            raise LatticeTypeError(type(self), type(other), "product")
        right = list(_elems(other._v))
        return lset._make(frozenset((a, b) for a in _elems(self._v) for b in right))

    @morph
    def project(self: S, fn: Callable[[Any], Any]) -> S:
        """``{fn(x) for x in self}``, dropping ``None`` results (as Bud's ``pro``); O(n).

        Unhashable results are frozen; for ``lpset`` the results must be non-negative numbers.
        """
        cls = type(self)
        out = []
        for x in _elems(self._v):
            y = fn(x)
            if y is not None:
                out.append(y)
        return cls._make(cls._build(out))

    @morph
    def contains(self, value: Any) -> lbool:
        """``lbool`` that holds once ``value`` is in the set; O(log n)."""
        return lbool(value in self)

    @morph
    def eqjoin(
        self,
        other: lset,
        on: Mapping[Any, Any] | Sequence[Any] | int | str | None = None,
        fn: Callable[[Any, Any], Any] | None = None,
    ) -> lset:
        """Equi-join with ``other`` (Bud's ``eqjoin``); O(n + m + output).

        Args:
            other: the right-hand ``lset``.
            on: the join predicate. ``None`` (the default) joins every pair (the cartesian
                product). A mapping ``{left_col: right_col}`` requires
                ``left[left_col] == right[right_col]`` for each entry; a column or a sequence of
                columns names the same columns on both sides. A column is an int position or a
                str field name (named tuples, objects with attributes, mappings).
            fn: called as ``fn(left, right)`` for each matching pair; ``None`` results are
                dropped. Without ``fn`` the result holds ``(left, right)`` pairs.

        Raises:
            LatticeValueError: an element lacks a join column.
        """
        if not isinstance(other, lset):
            raise LatticeTypeError(type(self), type(other), "eqjoin")
        if on is None:
            lcols: tuple[Any, ...] = ()
            rcols: tuple[Any, ...] = ()
        elif isinstance(on, Mapping):
            lcols, rcols = tuple(on.keys()), tuple(on.values())
        else:
            lcols = rcols = _columns("eqjoin", on)
        index: dict[tuple[Any, ...], list[Any]] = {}
        for r in _elems(other._v):
            key = tuple(_field(self.wrapper_name, "eqjoin", r, c) for c in rcols)
            index.setdefault(key, []).append(r)
        out = []
        for left in _elems(self._v):
            key = tuple(_field(self.wrapper_name, "eqjoin", left, c) for c in lcols)
            for right in index.get(key, ()):
                row = (left, right) if fn is None else fn(left, right)
                if row is not None:
                    out.append(row)
        return lset._make(lset._build(out))

    # -- monotone functions --------------------------------------------------------------------

    @monotone
    def size(self) -> lmax:
        """The number of elements as an ``lmax`` (monotone, not a morphism); O(1)."""
        return lmax(len(self._v))

    @monotone
    def group_count(self, cols: Sequence[Any] | int | str) -> lmap:
        """Count elements per group: an ``lmap`` from group key to ``lmax`` count; O(n).

        The group key of an element is the tuple of its columns ``cols`` (int positions or str
        field names; a single column still gives a 1-tuple key), as Bud's ``group_count``.
        Monotone: counts only grow and groups only appear as the set grows.

        Raises:
            LatticeValueError: an element lacks one of the columns.
        """
        from blooml.lattices.map import lmap

        columns = _columns("group_count", cols)
        counts: dict[tuple[Any, ...], int] = {}
        for x in _elems(self._v):
            key = tuple(_field(self.wrapper_name, "group_count", x, c) for c in columns)
            counts[key] = counts.get(key, 0) + 1
        return lmap._make(HashTrieMap({(k,): lmax(n) for k, n in counts.items()}))

    # -- Python conveniences (non-monotone) ----------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        return iter(_elems(self._v))

    def __len__(self) -> int:
        return len(self._v)

    def __contains__(self, value: Any) -> bool:
        try:
            return _has(self._v, value)
        except TypeError:
            try:
                return _has(self._v, freeze_element(self.wrapper_name, value))
            except LatticeValueError:
                return False

    # -- value semantics -----------------------------------------------------------------------

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
        if type(a) is not frozenset:
            a, b = b, a
        if type(a) is frozenset:
            return a.issuperset(_elems(b))  # equal sizes, so superset means equal
        return _fz(a) == _fz(b)

    def __hash__(self) -> int:
        h = self._h
        if h is None:
            h = hash((type(self).__qualname__, _fz(self._v)))
            _set_h(self, h)
        return h

    def _leq(self, other: Any) -> bool:
        """Inclusion, O(len(self)) look-ups into ``other``."""
        return len(self._v) <= len(other._v) and _contains_all(other._v, self._v)

    def __repr__(self) -> str:
        name = type(self).__qualname__
        if not self._v:
            return f"{name}()"
        inner = ", ".join(repr(x) for x in _sorted_for_repr(_elems(self._v)))
        return f"{name}({{{inner}}})"


# -- lpset --------------------------------------------------------------------------------------


def _check_non_negative(owner: str, x: Any) -> None:
    if isinstance(x, bool) or not isinstance(x, Number):
        raise LatticeValueError(
            owner, x, f"{owner} holds non-negative numbers only, got a {type(x).__name__}"
        )
    try:
        ok = x >= 0  # type: ignore[operator]
    except (TypeError, ArithmeticError):
        raise LatticeValueError(owner, x, f"{owner} holds real numbers only") from None
    if ok is not True:
        if isinstance(x, float) and math.isnan(x):
            raise LatticeValueError(owner, x, "NaN is not a number an lpset can hold")
        raise LatticeValueError(owner, x, f"{owner} holds non-negative numbers only")


class lpset(lset):
    """An ``lset`` of non-negative numbers, so that ``sum()`` is monotone; ⊥ is ``lpset()``.

    Bools, NaN, negative numbers and non-numbers are rejected. Like Bud's ``lpset`` it is a set:
    ``sum()`` adds *distinct* values (SQL's ``SUM(DISTINCT ...)``).

    >>> lpset([1, 2, 2]).sum()
    lmax(3)
    """

    __slots__ = ()
    wrapper_name = "lpset"

    def __init__(self, elements: Iterable[Any] = ()) -> None:
        super().__init__(elements)

    @classmethod
    def _validate(cls, elements: Iterable[Any]) -> None:
        for x in elements:
            _check_non_negative(cls.wrapper_name, x)

    @monotone
    def sum(self) -> lmax:
        """The sum of the elements as an ``lmax`` (``lmax(0)`` when empty); O(n).

        With floats the sum is ``math.fsum`` (correctly rounded, so independent of the set's
        iteration order and monotone as the set grows); otherwise it is exact.
        """
        elems = _elems(self._v)
        if any(type(x) is float for x in elems):
            return lmax(math.fsum(elems))
        return lmax(sum(elems, 0))


# -- builder ------------------------------------------------------------------------------------


class SetBuilder(LatticeBuilder[S]):
    """Mutable accumulator for ``lset``/``lpset``: ``add`` is one ``set.add`` on a plain set.

    The builder keeps the (persistent) value it started from plus a plain ``set`` of new
    elements; ``freeze`` merges the new elements in once (O(new · log n) into a large value)
    and empties the set, so it may be called repeatedly. Pickles (Spark uses builders as the
    zero value of ``aggregateByKey``).
    """

    __slots__ = ("_new",)

    def __init__(self, cls: type[S], initial: S | None = None) -> None:
        super().__init__(cls, initial)
        self._new: set[Any] = set()

    def add(self, item: Any) -> SetBuilder[S]:
        """Add one element (a value of the lattice class is merged instead)."""
        if isinstance(item, Lattice):
            if type(item) is self._cls:
                return self.merge(item)
            reject_lattice(self._cls.wrapper_name, item)
        if self._cls is lset:
            try:
                self._new.add(item)
            except TypeError:
                self._new.add(freeze_element("lset", item))
        else:
            self._new.add(self._cls._element(item))  # type: ignore[attr-defined]
        return self

    def merge(self, value: S) -> SetBuilder[S]:
        """Merge a lattice value in; returns the builder."""
        if type(value) is not self._cls:
            raise LatticeTypeError(self._cls, type(value), "merge")
        v = value._v
        if not self._new and len(v) > len(self._value._v):
            self._value = self._value.merge(value)
        elif type(v) is frozenset:  # the common case (singletons from a fold): no conversion
            self._new.update(v)
        else:
            self._new.update(_elems(v))
        return self

    def merge_builder(self, other: LatticeBuilder[S]) -> SetBuilder[S]:
        """Merge another builder of the same lattice in; returns ``self``."""
        if other is self:
            return self
        if type(other) is SetBuilder and other._cls is self._cls:
            self._value = self._value.merge(other._value)
            self._new |= other._new
            return self
        return self.merge(other.freeze())

    def freeze(self) -> S:
        """The accumulated immutable value (the same object until something new is added)."""
        new = self._new
        if new:
            cur = self._value
            cv: Any = cur._v
            if len(cv) <= len(new):
                # The new elements are the bulk: one frozenset of both. (Merging them as a
                # value would turn that fresh frozenset into a trie to insert the few old
                # elements: a fold of singletons starts from its first singleton.)
                new.update(_elems(cv))
                if len(new) != len(cv):  # else every new element was there already
                    self._value = self._cls._make(frozenset(new))
            else:
                self._value = cur.merge(self._cls._make(frozenset(new)))
            self._new = set()
        return self._value
