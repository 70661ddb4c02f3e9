"""``lmap``: a map from plain keys to lattice values, merged key by key.

Storage is an rpds-py ``HashTrieMap`` (a persistent hash trie): merging a small map into a
large one copies O(small · log n) nodes and shares the rest. Measured against pyrsistent's
``PMap`` evolver on the growth benchmark (``benchmarks/bench_lattices.py``), rpds-py was
faster (see ``docs/lattices.md``). Keys are boxed in 1-tuples inside the trie for the reason
given in :mod:`blooml.lattices.sets`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

from rpds import HashTrieMap

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import (
    Lattice,
    LatticeBuilder,
    check_not_none,
    kind_of,
    monotone,
    morph,
)
from blooml.lattices._keyed import MISSING as _MISSING
from blooml.lattices._keyed import KeyedTrie
from blooml.lattices.ordered import lbool, lmax
from blooml.lattices.sets import (
    _sorted_for_repr,
    freeze_element,
    lset,
    reject_lattice,
    trie_items,
)

L = TypeVar("L", bound=Lattice)

__all__ = ["lmap"]


def _key(k: Any) -> Any:
    """Check and freeze one key."""
    reject_lattice("lmap", k, "key")
    try:
        hash(k)
    except TypeError:
        return freeze_element("lmap", k)
    return k


def _check_value(k: Any, v: Any) -> None:
    if not isinstance(v, Lattice):
        raise LatticeValueError(
            "lmap",
            v,
            f"the value at key {k!r} is not a lattice; lmap values must be lattice values "
            f"(e.g. lmax({v!r}))",
        )


def _merge_values(k: Any, old: Lattice, new: Lattice) -> Lattice:
    try:
        return old.merge(new)
    except LatticeTypeError:
        raise LatticeTypeError(type(old), type(new), f"merge (lmap key {k!r})") from None


def _merge_into(target: dict[Any, Lattice], k: Any, v: Lattice) -> None:
    old = target.get(k)
    target[k] = v if old is None else _merge_values(k, old, v)


def _merge_all(target: dict[Any, Lattice], pairs: list[tuple[Any, Lattice]]) -> None:
    """Merge ``pairs`` into ``target``; checks every shared key first so that a type clash
    leaves ``target`` unchanged."""
    for k, v in pairs:
        old = target.get(k)
        if old is not None and type(old) is not type(v):
            raise LatticeTypeError(type(old), type(v), f"merge (lmap key {k!r})")
    for k, v in pairs:
        _merge_into(target, k, v)


def _as_pair(item: Any) -> tuple[Any, Any]:
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return item[0], item[1]
    raise LatticeValueError(
        "lmap", item, "expected a (key, lattice value) pair (a row folded into an lmap is a pair)"
    )


class lmap(KeyedTrie):
    """A map from plain keys to lattice values; ⊥ is the empty map (``lmap()``).

    Merge takes the union of the keys and merges the values of shared keys with their own
    lattice's merge. Keys are plain hashable values (lists, sets and dicts are frozen as in
    ``lset``; lattice keys are rejected); values must be lattice values. A key mapped to ⊥ is
    still a key (``has_key`` and ``key_set`` see it). ``reveal()`` returns a ``dict``.

    >>> lmap({"a": lmax(1)}).merge(lmap({"a": lmax(3), "b": lmax(2)}))
    lmap({'a': lmax(3), 'b': lmax(2)})
    """

    __slots__ = ()
    wrapper_name = "lmap"
    # (KeyedTrie.merge returns the larger side itself when no value of it grows)
    merge_is_exact = True
    _v: HashTrieMap

    def __init__(self, values: Mapping[Any, Lattice] | Iterable[tuple[Any, Lattice]] = ()) -> None:
        super().__init__(self._build(values))

    @staticmethod
    def _build(values: Any) -> HashTrieMap:
        check_not_none("lmap", values)
        if isinstance(values, lmap):
            return values._v
        if isinstance(values, Mapping):
            pairs: Iterable[Any] = values.items()
        elif isinstance(values, Iterable) and not isinstance(values, (str, bytes)):
            pairs = (_as_pair(p) for p in values)
        else:
            raise LatticeValueError(
                "lmap", values, "expected a mapping or an iterable of (key, lattice value) pairs"
            )
        out: dict[Any, Lattice] = {}
        for k, v in pairs:
            k = _key(k)
            _check_value(k, v)
            _merge_into(out, k, v)
        return HashTrieMap({(k,): v for k, v in out.items()})

    @classmethod
    def from_item(cls, item: Any) -> lmap:
        """A one-key map from a ``(key, lattice value)`` row; an ``lmap`` is returned as it is.

        Raises:
            LatticeValueError: the row is not a pair, its key is a lattice or its value is not.
        """
        if type(item) is cls:
            return item
        k, v = _as_pair(item)
        k = _key(k)
        _check_value(k, v)
        return cls._make(HashTrieMap({(k,): v}))

    @classmethod
    def builder(cls, initial: lmap | None = None) -> LatticeBuilder[lmap]:
        """A mutable accumulator backed by a plain ``dict`` (see :class:`MapBuilder`)."""
        return MapBuilder(cls, initial)

    # -- the lattice -------------------------------------------------------------------------

    # merge (KeyedTrie): union of keys, merging the values of shared keys. Raises
    # LatticeTypeError when a shared key holds values of two different lattice classes.

    def _join_value(self, key: Any, old: Lattice, new: Lattice) -> Lattice | None:
        """``old ⊔ new``, or ``None`` when that is ``old``."""
        if old is new:
            return None
        m = _merge_values(key, old, new)
        return None if m is old or m == old else m

    def reveal(self) -> dict[Any, Lattice]:
        """A new ``dict`` of key → lattice value (non-monotone); O(n)."""
        return {bk[0]: v for bk, v in trie_items(self._v)}

    def is_bottom(self) -> bool:
        """Whether the map is empty (non-monotone)."""
        return len(self._v) == 0

    # -- morphisms ---------------------------------------------------------------------------

    @morph
    def intersect(self, other: lmap) -> lmap:
        """The keys present in both maps, each with the merge of its two values (as Bud);
        O(min(n, m) · log max(n, m))."""
        if not isinstance(other, lmap):
            raise LatticeTypeError(type(self), type(other), "intersect")
        a, b = self._v, other._v
        small, big = (a, b) if len(a) <= len(b) else (b, a)
        get = big.get
        out = {}
        for bk, v in trie_items(small):
            w = get(bk)
            if w is not None:
                out[bk] = _merge_values(bk[0], v, w)
        return lmap._make(HashTrieMap(out))

    @morph
    def key_set(self) -> lset:
        """The keys as an ``lset``; O(n)."""
        return lset._make(frozenset([bk[0] for bk, _ in trie_items(self._v)]))

    @overload
    def at(self, key: Any, Cls: None = None) -> Lattice: ...
    @overload
    def at(self, key: Any, Cls: type[L]) -> L: ...
    @morph
    def at(self, key: Any, Cls: type[Lattice] | None = None) -> Lattice:
        """The value at ``key``; ``Cls()`` (⊥ of the value lattice) when absent; O(log n).

        Bud's ``at(key, bottom_class)``: a map cannot know the ⊥ of a value it does not hold.

        Raises:
            KeyError: the key is absent and no ``Cls`` was given.
            TypeError: ``Cls`` is not a lattice class.
        """
        if Cls is not None and not (isinstance(Cls, type) and issubclass(Cls, Lattice)):
            raise TypeError(f"lmap.at: Cls must be a lattice class, got {Cls!r}")
        v = self._get(key)
        if v is not _MISSING:
            return v  # type: ignore[no-any-return]
        if Cls is None:
            raise KeyError(
                f"lmap has no key {key!r}; pass the value lattice class to get its ⊥ instead, "
                f"e.g. at({key!r}, lmax)"
            )
        return Cls()

    @morph
    def has_key(self, key: Any) -> lbool:
        """``lbool`` that holds once ``key`` is in the map; O(log n)."""
        return lbool(self._get(key) is not _MISSING)

    @morph
    def filter(self) -> lmap:
        """The keys whose value is ``lbool(True)`` (with that value); O(n).

        Raises:
            TypeError: a value is not an ``lbool``.
        """
        out = {}
        for bk, v in trie_items(self._v):
            if type(v) is not lbool:
                raise TypeError(f"lmap.filter needs lbool values, but key {bk[0]!r} holds {v!r}")
            if v.reveal():
                out[bk] = v
        return lmap._make(HashTrieMap(out))

    @morph
    def apply_morph(self, name: str, *args: Any) -> lmap:
        """Apply the morphism ``name`` (with ``args``) to every value; O(n · cost of ``name``).

        Raises:
            TypeError: ``name`` is not a morphism of some value's lattice class, or it returned
                something that is not a lattice value.
        """
        return self._apply("apply_morph", name, args, ("morph",))

    @morph
    def to_collection(self, fn: Callable[[Any, Lattice], Any] | None = None) -> list[Any]:
        """Rows for the rule layer: a ``list`` (in no particular order) of ``fn(key, value)``
        for each entry, ``None`` results dropped; without ``fn``, the ``(key, value)`` pairs.

        A morphism in Bloom^L's sense (as Bud's ``to_collection``): the rows of a merge are the
        rows of the parts, once rows differing only in lattice columns are merged. O(n).
        """
        items = trie_items(self._v)
        if fn is None:
            return [(bk[0], v) for bk, v in items]
        out = []
        for bk, v in items:
            row = fn(bk[0], v)
            if row is not None:
                out.append(row)
        return out

    # -- monotone functions --------------------------------------------------------------------

    @monotone
    def size(self) -> lmax:
        """The number of keys as an ``lmax`` (monotone, not a morphism); O(1)."""
        return lmax(len(self._v))

    @monotone
    def apply(self, name: str, *args: Any) -> lmap:
        """Apply the monotone function (or morphism) ``name`` to every value; O(n · cost).

        Raises:
            TypeError: ``name`` is neither monotone nor a morphism of some value's class, or it
                returned something that is not a lattice value.
        """
        return self._apply("apply", name, args, ("morph", "monotone"))

    def _apply(self, op: str, name: str, args: tuple[Any, ...], kinds: tuple[str, ...]) -> lmap:
        if not isinstance(name, str):
            raise TypeError(f"lmap.{op}: the method name must be a str, got {name!r}")
        checked: dict[type, None] = {}
        out = {}
        for bk, v in trie_items(self._v):
            t = type(v)
            if t not in checked:
                try:
                    kind = kind_of(t, name)
                except AttributeError:
                    kind = None
                if kind not in kinds:
                    what = "has no method" if kind is None else f"has a {kind} method"
                    raise TypeError(
                        f"lmap.{op}({name!r}): the value at key {bk[0]!r} is a {t.__qualname__}, "
                        f"which {what} {name!r}; {op} needs a {' or '.join(kinds)} method"
                    )
                checked[t] = None
            res = getattr(v, name)(*args)
            if not isinstance(res, Lattice):
                raise TypeError(
                    f"lmap.{op}({name!r}): at key {bk[0]!r} the result {res!r} is not a lattice "
                    "value"
                )
            out[bk] = res
        return lmap._make(HashTrieMap(out))

    def _leq(self, other: lmap) -> bool:
        a, b = self._v, other._v
        if len(a) > len(b):
            return False
        get = b.get
        for bk, v in trie_items(a):
            w = get(bk)
            if w is None or not (v is w or v <= w):
                return False
        return True

    def __repr__(self) -> str:
        if not self._v:
            return "lmap()"
        d = self.reveal()
        inner = ", ".join(f"{k!r}: {d[k]!r}" for k in _sorted_for_repr(d))
        return f"lmap({{{inner}}})"


#: The empty value of each lmap class, shared by builders (values are immutable).
_EMPTY: dict[type[lmap], lmap] = {}


class MapBuilder(LatticeBuilder[lmap]):
    """Mutable accumulator for ``lmap``: ``add((key, value))`` is a ``dict`` lookup and store
    (values of a repeated key are merged immediately).

    ``freeze`` merges the collected entries into the starting value once and empties the dict;
    the builder stays usable and pickles (for Spark's ``aggregateByKey``).
    """

    __slots__ = ("_new",)

    def __init__(self, cls: type[lmap], initial: lmap | None = None) -> None:
        if initial is None:  # the empty map of cls, made once (a fold per tick starts here)
            initial = _EMPTY.get(cls)
            if initial is None:
                initial = _EMPTY[cls] = cls()
        super().__init__(cls, initial)
        self._new: dict[Any, Lattice] = {}

    def add(self, item: Any) -> MapBuilder:
        """Fold one ``(key, lattice value)`` row in (an ``lmap`` is merged instead)."""
        if type(item) is tuple and len(item) == 2:
            k, v = item
        elif type(item) is lmap:
            return self.merge(item)
        else:
            k, v = _as_pair(item)
        if not isinstance(v, Lattice):
            _check_value(k, v)
        if isinstance(k, Lattice):
            reject_lattice("lmap", k, "key")
        new = self._new
        try:
            old = new.get(k)
        except TypeError:
            k = freeze_element("lmap", k)
            old = new.get(k)
        new[k] = v if old is None else _merge_values(k, old, v)
        return self

    def merge(self, value: lmap) -> MapBuilder:
        """Merge an ``lmap`` in; returns the builder."""
        if type(value) is not self._cls:
            raise LatticeTypeError(self._cls, type(value), "merge")
        if not self._new and len(value._v) > len(self._value._v):
            self._value = self._value.merge(value)
        else:
            _merge_all(self._new, [(bk[0], v) for bk, v in trie_items(value._v)])
        return self

    def merge_builder(self, other: LatticeBuilder[lmap]) -> MapBuilder:
        """Merge another ``lmap`` builder in; returns ``self``."""
        if other is self:
            return self
        if type(other) is MapBuilder:
            merged = self._value.merge(other._value)  # may raise: nothing changed yet
            _merge_all(self._new, list(other._new.items()))
            self._value = merged
            return self
        return self.merge(other.freeze())

    def freeze(self) -> lmap:
        """The accumulated immutable value (the same object until something new is added)."""
        if self._new:
            delta = lmap._make(HashTrieMap({(k,): v for k, v in self._new.items()}))
            self._value = self._value.merge(delta)
            self._new = {}
        return self._value
