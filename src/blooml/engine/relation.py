"""Storage of one collection: rows by key, lattice-column merging, hash indexes, soft state, undo.

Rows are named tuples of the collection's columns, stored in a dict by key (the whole row when
every column is a key). Tuples equal on every non-lattice column merge their lattice columns;
any other disagreement under one key is a :class:`~blooml.errors.KeyConstraintError` (a soft
state table replaces the old tuple instead). Hash indexes on join columns are built on first use
and maintained on every change, so a join probes them instead of scanning the table.

Within a tick every change is logged (``undo``) so the tick can be rolled back exactly; rows new
or changed in the tick are appended to ``tick_new``, whose slice ``[lo:hi]`` is the current
semi-naive delta.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, namedtuple
from collections.abc import Iterable
from itertools import chain, repeat
from keyword import iskeyword
from operator import itemgetter
from typing import Any

from blooml.errors import (
    BloomlError,
    KeyConstraintError,
    LatticeColumnValueError,
    LatticeValueError,
    ProgramError,
)
from blooml.ir.program import CollectionInfo
from blooml.lattices._base import Lattice
from blooml.lattices.ordered import order_sign

__all__ = ["MISSING", "ORDER", "CheckedRows", "FreshRows", "KeyProbe", "Relation"]

MISSING: Any = object()
_EMPTY: dict[Any, Any] = {}


# ``map(tuple.__new__, repeat(cls), rows)`` converts tuples to named tuples about twice as
# fast as ``map(partial(tuple.__new__, cls), rows)`` or ``cls._make``
_new_tuple: Any = tuple.__new__


_first: Any = itemgetter(0)


def _unit(row: Any) -> tuple[()]:
    return ()


def _getter(cols: tuple[int, ...]) -> Any:
    return itemgetter(*cols) if cols else _unit


class CheckedRows(list):  # type: ignore[type-arg]
    """Rows validated and converted by ``Relation.check_rows`` (external input): storing them
    needs no second check. ``Pending`` keeps the mark only while every row queued for a
    relation carries it."""

    __slots__ = ()


class FreshRows(list):  # type: ignore[type-arg]
    """Rule results for a collection whose every column is a key, known (from a generated
    ``map``: ``blooml.engine._codegen``) to be tuples of its arity holding no lattice value,
    none of them stored yet (duplicates among them are possible): stored without checks."""

    __slots__ = ()


class _Del:
    """A deletion in the change log that lazy indexes replay."""

    __slots__ = ("k", "old")

    def __init__(self, k: Any, old: Any) -> None:
        self.k = k
        self.old = old


_BATCH: Any = object()
_RAW_MERGE: dict[type, Any] = {}


def _raw_merge(cls: Any) -> Any:
    """``cls.merge`` without the base's same-class check (the caller checked the types)."""
    fn = _RAW_MERGE.get(cls)
    if fn is None:
        fn = getattr(cls.merge, "__wrapped__", cls.merge)
        _RAW_MERGE[cls] = fn
    return fn


_SAME: Any = object()


class _Order(dict):  # type: ignore[type-arg]
    """``type -> order_sign(type)``, filled on first look-up: ``-1`` for a class whose values
    merge to the smaller raw value (``lmin`` and subclasses that keep its order), ``1`` the
    larger (``lmax``), ``0`` for anything else. The order is declared once, on the lattice
    class (``raw_order``); every hot path (this module, the generated ``map`` loops, the
    prioritized frontier) reads it from here."""

    __slots__ = ()

    def __missing__(self, t: Any) -> int:
        o = self[t] = order_sign(t)
        return o


ORDER: dict[Any, int] = _Order()


def _join_one(a: Any, b: Any) -> Any:
    """The value of a one-value-column row after ``b`` arrives where ``a`` is stored: ``_SAME``
    when ``a`` already holds ``b``, ``None`` when the two are not values of one lattice class
    (equal plain values or a key conflict: ``Relation._merge`` decides), else their merge.
    Values of a class with a raw order (``lmin``/``lmax``, see ``ORDER``) are compared on their
    raw values first (shortest and widest paths)."""
    if a is b:
        return _SAME
    ta = type(a)
    if ta is not type(b) or not issubclass(ta, Lattice):
        return None
    o = ORDER[ta]
    if o:
        try:
            if (a._v <= b._v) if o < 0 else (a._v >= b._v):
                return _SAME
            if (b._v < a._v) if o < 0 else (b._v > a._v):
                return b
        except TypeError:  # ⊥ on a side, or incomparable values: the lattice decides
            pass
    m = _raw_merge(ta)(a, b)
    return _SAME if m is a or m == a else m


#: value types that are never a lattice (a key of these alone needs no lattice check)
_PLAIN_TYPES = frozenset({int, str, float, bool, bytes, type(None)})


def _has_lattice(rows: Iterable[Any]) -> bool:
    return any(issubclass(t, Lattice) for t in set(map(type, chain.from_iterable(rows))))


class KeyProbe:
    """``Relation.index`` on the key columns, read from the store: ``get(probe, default)``
    gives the one row stored under that key as a 1-tuple, and counts the probe towards
    building the index (see ``Relation.index``). Made for one evaluation: the store it
    reads is the relation's at that time."""

    __slots__ = ("one", "rel", "store")

    def __init__(self, rel: Relation) -> None:
        self.rel = rel
        self.store = rel.store
        # a one-column set: its store key is the row, a 1-tuple; else the probe is the key
        self.one = rel.keyfn is None and rel.arity == 1

    def get(self, p: Any, default: Any = None) -> Any:
        """The rows stored under key ``p`` (one), or ``default``."""
        self.rel._kprobes += 1
        row = self.store.get((p,) if self.one else p)
        return default if row is None else (row,)

    def __contains__(self, p: Any) -> bool:
        self.rel._kprobes += 1
        return ((p,) if self.one else p) in self.store


class Relation:
    """The rows of one collection at run time (see the module docstring)."""

    __slots__ = (
        "_dcache",
        "_empty_at_begin",
        "_key_cols",
        "_kprobes",
        "_log",
        "_row_types",
        "_saved",
        "_ttl_log",
        "arity",
        "changes",
        "columns",
        "expiry",
        "full_key",
        "heap",
        "hi",
        "indexes",
        "info",
        "keyfn",
        "lo",
        "name",
        "named",
        "nkeys",
        "persistent",
        "removals",
        "row_type",
        "simple",
        "store",
        "tick_new",
        "ttl",
        "undo",
    )

    def __init__(self, info: CollectionInfo) -> None:
        self.info = info
        self.name = info.name
        self.columns = info.columns
        # the DSL's names are identifiers; front ends such as Datalog may use any string
        typename = info.name if info.name.isidentifier() and not iskeyword(info.name) else "Row"
        self.named: Any = namedtuple(typename, info.columns)  # type: ignore[misc]
        # the type of stored rows: the named tuple, or ``tuple`` after ``set_plain``
        self.row_type: Any = self.named
        self._row_types = {self.row_type}
        self.arity = len(info.columns)
        self.nkeys = len(info.keys)
        self.full_key = not info.values
        self.keyfn = None if self.full_key else _getter(tuple(range(self.nkeys)))
        self._key_cols = tuple(range(self.nkeys)) if self.nkeys else None
        # probes on the key columns read from the store since the index on them was last
        # dropped (``index``: it is built once they pay for it)
        self._kprobes = 0
        self.persistent = info.persistent
        self.ttl = info.ttl
        self.simple = self.full_key and self.ttl is None
        self.store: dict[Any, Any] = {}
        # cols -> [index dict (probe value -> {key: row}), position in _log it reflects]
        self.indexes: dict[tuple[int, ...], list[Any]] = {}
        self._log: list[Any] = []
        self.tick_new: list[Any] = []
        self.lo = 0
        self.hi = 0
        self.undo: list[tuple[Any, Any]] = []
        self.removals = 0
        self.changes = 0
        self.expiry: dict[Any, float] = {}
        self.heap: list[tuple[float, int, Any]] = []
        # this tick's soft-state changes, undone by ``rollback``: ("e", key, old expiry or
        # MISSING), ("push", heap entry), ("pop", heap entry)
        self._ttl_log: list[tuple[str, Any, Any]] = []
        self._saved: Any = None
        self._dcache: Any = None
        # whether the store was empty when the tick began: its change is then its rows
        self._empty_at_begin = False

    # -- rows ----------------------------------------------------------------------------------

    def set_plain(self) -> None:
        """Store rows as plain tuples (before any row is stored): for a collection whose rows
        no user function receives, as the runtime decides; ``named_rows`` names them for
        readers. A plain tuple converts to a row for free (``tuple(t) is t``)."""
        assert not self.store, "set_plain on a relation holding rows"
        self.row_type = tuple
        self._row_types = {tuple}

    def named_rows(self) -> list[Any]:
        """The stored rows as named tuples (a copy)."""
        rows = list(self.store.values())
        if self.row_type is self.named:
            return rows
        return list(map(_new_tuple, repeat(self.named, len(rows)), rows))

    def make_row(self, r: Any, where: str) -> Any:
        """Convert ``r`` (a tuple, or a value for a one-column collection) into a row."""
        if type(r) is self.row_type and (len(r) == self.arity or self.row_type is not tuple):
            return r
        if not isinstance(r, tuple):
            if self.arity == 1:
                r = (r,)
            else:
                raise ProgramError(
                    f"{where}: {self.info.kind} {self.name!r} has columns {list(self.columns)}; "
                    f"got the non-tuple {r!r}"
                )
        if len(r) != self.arity:
            raise ProgramError(
                f"{where}: {self.info.kind} {self.name!r} has {self.arity} columns "
                f"{list(self.columns)}; got {len(r)} values {tuple(r)!r}"
            )
        return tuple.__new__(self.row_type, r)

    def check_rows(self, rows: list[Any], where: str) -> list[Any]:
        """Validate and convert external input: every row well-formed, no lattice in a key
        column (all or nothing: raises before anything is queued)."""
        rt = self.row_type
        if len(rows) == 1:  # one row (a request): its checks without the sets built below
            r = rows[0]
            if (type(r) is tuple or type(r) is rt) and len(r) == self.arity:
                row = _new_tuple(rt, r)
                key = row if self.full_key else row[: self.nkeys]
                if not _PLAIN_TYPES.issuperset(map(type, key)):  # (else no lattice in it)
                    for v in key:
                        if isinstance(v, Lattice):
                            self.info.check_keys(row)
                return CheckedRows([row])
        if set(map(type, rows)) <= {tuple, rt} and set(map(len, rows)) <= {self.arity}:
            out = list(map(_new_tuple, repeat(rt, len(rows)), rows))
        else:
            out = [self.make_row(r, where) for r in rows]
        if self.full_key:
            lat = _has_lattice(out)
        elif self.nkeys == 1:
            lat = any(issubclass(t, Lattice) for t in set(map(type, map(_first, out))))
        else:
            lat = _has_lattice(map(_getter(tuple(range(self.nkeys))), out))
        if lat:
            for r in out:
                self.info.check_keys(r)
        return CheckedRows(out)

    @property
    def key_cols(self) -> tuple[int, ...] | None:
        """The positions of the key columns (``None`` for a collection without keys): the
        columns of the index that holds one row per probe value."""
        return self._key_cols

    def key_of(self, row: Any) -> Any:
        """The key under which ``row`` is stored."""
        return row if self.keyfn is None else self.keyfn(row)

    # -- changes -------------------------------------------------------------------------------

    def add_many(self, rows: list[Any], now: float, where: str = "insert") -> None:
        """Insert (or merge) each of ``rows``: rule results (tuples of this relation's arity,
        or values for a one-column relation; ``None`` is skipped). Plain tuples are converted
        to rows only when stored; ``where`` names the rule in errors."""
        if len(rows) == 1 and type(rows) is CheckedRows and self.ttl is None:
            # one row checked at arrival (a request): under a new key it is stored as is
            row = rows[0]
            keyfn = self.keyfn
            k = row if keyfn is None else keyfn(row)
            if k not in self.store:
                self._store_new(k, row)
                return
        if not self.simple:
            if self.ttl is None and self.keyfn is not None:
                self._add_many_keyed(rows, where)
                return
            add = self.add
            make = self.make_row
            for r in rows:
                if r is not None:
                    add(make(r, where), now)
            return
        store = self.store
        if type(rows) is FreshRows:
            rt = self.row_type
            if rt is not tuple:
                rows = list(map(_new_tuple, repeat(rt, len(rows)), rows))
            self._store_fresh(rows)
            return
        if type(rows) is CheckedRows:  # external input: rows already, checked at insert
            self._store_fresh([r for r in rows if r not in store] if store else rows)
            return
        # plain tuples hash and compare like rows: look up first, convert only the new ones
        try:
            fresh = [r for r in rows if r not in store]
        except TypeError:  # an unhashable result: let make_row explain
            fresh = [self.make_row(r, where) for r in rows if r is not None]
            fresh = [r for r in fresh if r not in store]
        if not fresh:
            return
        ok = {tuple, self.row_type}
        types = set(map(type, fresh))
        if not types <= ok or set(map(len, fresh)) != {self.arity}:
            make = self.make_row
            fresh = [make(r, where) for r in fresh if r is not None]
            fresh = [r for r in fresh if r not in store]
            if not fresh:
                return
            types = set(map(type, fresh))
        if _has_lattice(fresh):
            for r in fresh:
                self.info.check_keys(r)
        if types != self._row_types:
            fresh = list(map(_new_tuple, repeat(self.row_type, len(fresh)), fresh))
        self._store_fresh(fresh)

    def _store_fresh(self, fresh: list[Any]) -> None:
        """Store ``fresh``: checked rows of a simple relation, none stored yet."""
        if not fresh:
            return
        store = self.store
        before = len(store)
        store.update(zip(fresh, fresh, strict=True))
        if len(store) - before != len(fresh):
            # repeats: store (and log for the indexes) one object per row, the first, so that
            # a later deletion finds in the indexes the very row it removes from the store
            fresh = list(dict.fromkeys(fresh))
            store.update(zip(fresh, fresh, strict=True))
        self.undo.append((_BATCH, fresh))
        self.tick_new.extend(fresh)
        self.changes += len(fresh)
        if self.indexes:
            self._log.extend(fresh)
            self._trim()

    def _add_many_keyed(self, rows: list[Any], where: str) -> None:
        """``add`` for each row of a hard-state relation with value columns, inlined (this
        loop carries lattice-column merges such as shortest-path costs; the commonest shape,
        one key and one value, has its own loop with ``lmin``/``lmax`` compared inline)."""
        if self.nkeys == 1 and self.arity == 2:
            self._add_many_kv(rows, where)
            return
        store = self.store
        get = store.get
        keyfn: Any = self.keyfn
        rt = self.row_type
        new_row = tuple.__new__
        undo = self.undo
        tick_new = self.tick_new
        one_value = self.arity - self.nkeys == 1
        nkeys = self.nkeys
        logging = bool(self.indexes)
        changed = 0
        arity = self.arity
        for row in rows:
            if (type(row) is not tuple and type(row) is not rt) or len(row) != arity:
                if row is None:
                    continue
                row = self.make_row(row, where)
            k = keyfn(row)
            old = get(k, MISSING)
            if old is MISSING:
                if type(row) is not rt:
                    row = new_row(rt, row)
                for i in range(nkeys):
                    if isinstance(row[i], Lattice):
                        self.info.check_keys(row)
                store[k] = row
                undo.append((k, MISSING))
                tick_new.append(row)
                changed += 1
                if logging:
                    self._log.append(row)
                continue
            if old is row:
                continue
            if one_value:
                try:
                    m = _join_one(old[-1], row[-1])
                except (LatticeValueError, TypeError) as exc:
                    raise self._column_error(exc, arity - 1, old, row) from exc
                if m is _SAME:
                    continue
                if m is not None:
                    new = new_row(rt, (*old[:-1], m))
                    store[k] = new
                    undo.append((k, old))
                    tick_new.append(new)
                    changed += 1
                    if logging:
                        self._log.append(_Del(k, old))
                        self._log.append(new)
                    continue
            new = self._merge(k, old, row)
            if new is not old:
                self.changes += changed
                changed = 0
                self._replace(k, old, new)
        self.changes += changed
        if logging:
            self._trim()

    def _add_many_kv(self, rows: list[Any], where: str) -> None:
        """``_add_many_keyed`` for the commonest shape, one key column and one value column
        (``dist(v, d)``), with ``lmin``/``lmax`` values compared raw (``ORDER``): a candidate
        that does not improve the stored value costs a lookup and one comparison."""
        store = self.store
        get = store.get
        rt = self.row_type
        new_row = tuple.__new__
        undo_add = self.undo.append
        new_add = self.tick_new.append
        log = self._log if self.indexes else None
        order = ORDER
        changed = 0
        for row in rows:
            tr = type(row)
            if tr is tuple or tr is rt:
                try:
                    k, b = row
                except ValueError:
                    row = self.make_row(row, where)  # raises: the wrong number of columns
                    raise
            else:
                if row is None:
                    continue
                row = self.make_row(row, where)
                k, b = row
            old = get(k, MISSING)
            if old is MISSING:
                if isinstance(k, Lattice):
                    self.info.check_keys(row)
                if type(row) is not rt:
                    row = new_row(rt, row)
                store[k] = row
                undo_add((k, MISSING))
                new_add(row)
                changed += 1
                if log is not None:
                    log.append(row)
                continue
            a = old[1]
            if a is b:
                continue
            m: Any
            ta = type(a)
            o = order[ta]
            if o:  # lmin, lmax (or a subclass keeping their order): compare raw values
                if type(b) is ta:
                    # most candidates do not improve the stored value: one comparison for
                    # them; ⊥ (None) on either side raises TypeError and is sorted out below
                    try:
                        if (a._v <= b._v) if o < 0 else (a._v >= b._v):
                            continue
                        better = (b._v < a._v) if o < 0 else (b._v > a._v)
                    except TypeError:
                        better = None
                    if better:
                        m = b
                    else:
                        try:  # ⊥ or incomparable: the lattice decides
                            m = _raw_merge(ta)(a, b)
                        except (LatticeValueError, TypeError) as exc:
                            raise self._column_error(exc, 1, old, row) from exc
                        if m is a:
                            continue
                else:
                    m = None
            else:
                try:
                    m = _join_one(a, b)
                except (LatticeValueError, TypeError) as exc:
                    raise self._column_error(exc, 1, old, row) from exc
                if m is _SAME:
                    continue
            if m is None:  # not two values of one lattice: equal, or a key conflict
                new = self._merge(k, old, row)
                if new is not old:
                    self._replace(k, old, new)
                continue
            new = new_row(rt, (old[0], m))
            store[k] = new
            undo_add((k, old))
            new_add(new)
            changed += 1
            if log is not None:
                log.append(_Del(k, old))
                log.append(new)
        self.changes += changed
        if log is not None:
            self._trim()

    def _store_new(self, k: Any, row: Any) -> None:
        """Store ``row`` (a checked row of ``row_type``) under ``k``, which holds nothing:
        undo-logged, counted as this tick's and logged for the indexes."""
        self.store[k] = row
        self.undo.append((k, MISSING))
        self.tick_new.append(row)
        self.changes += 1
        if self.indexes:
            self._log.append(row)
            self._trim()

    def add(self, row: Any, now: float) -> bool:
        """Insert (or merge) ``row`` (a tuple of this relation's arity); return whether the
        stored contents changed."""
        k = row if self.keyfn is None else self.keyfn(row)
        store = self.store
        old = store.get(k, MISSING)
        if old is MISSING:
            if type(row) is not self.row_type:
                row = tuple.__new__(self.row_type, row)
                if self.keyfn is None:
                    k = row
            for i in range(self.nkeys):
                if isinstance(row[i], Lattice):
                    self.info.check_keys(row)
            self._store_new(k, row)
            if self.ttl is not None:
                self._touch(k, now)
            return True
        if old is row:
            if self.ttl is not None:
                self._touch(k, now)
            return False
        if self.arity - self.nkeys == 1:  # the common shape (keys, one value)
            try:
                m = _join_one(old[-1], row[-1])
            except (LatticeValueError, TypeError) as exc:
                raise self._column_error(exc, self.arity - 1, old, row) from exc
            if m is _SAME:
                new = old
            elif m is None:
                new = self._merge(k, old, row)
            else:
                new = tuple.__new__(self.row_type, (*old[:-1], m))
        else:
            new = self._merge(k, old, row)
        if self.ttl is not None:
            self._touch(k, now)
        if new is old:
            return False
        if type(new) is not self.row_type:
            new = tuple.__new__(self.row_type, new)
        self._replace(k, old, new)
        return True

    def _merge(self, k: Any, old: Any, new: Any) -> Any:
        """The row stored after ``new`` arrives under ``old``'s key (``old`` if unchanged)."""
        out = None
        for i in range(self.nkeys, self.arity):
            a, b = old[i], new[i]
            if a is b:
                continue
            ta = type(a)
            if ta is type(b) and issubclass(ta, Lattice):
                try:
                    m = _raw_merge(ta)(a, b)
                except (LatticeValueError, TypeError) as exc:
                    raise self._column_error(exc, i, old, new) from exc
                if m is a or m == a:
                    continue
                if out is None:
                    out = list(old)
                out[i] = m
            elif a == b:
                continue
            elif self.ttl is not None:
                return new
            else:
                key = k if self.keyfn is not None else tuple(k)
                raise KeyConstraintError(self.name, key, tuple(old), tuple(new))
        if out is None:
            return old
        return tuple.__new__(self.row_type, out)

    def _column_error(self, exc: Exception, i: int, old: Any, new: Any) -> Exception:
        """What to raise when merging column ``i`` of ``new`` into ``old`` raised ``exc``: a
        :class:`LatticeColumnValueError` naming this collection, the column and the offending
        value when the lattice refused the values (a :class:`LatticeValueError`, or a plain
        ``TypeError`` from a user lattice's merge); ``exc`` itself otherwise (another blooml
        error, such as merging two lattice classes, keeps its class)."""
        if isinstance(exc, LatticeColumnValueError) or (
            isinstance(exc, BloomlError) and not isinstance(exc, LatticeValueError)
        ):
            return exc
        a, b = old[i], new[i]
        held = getattr(a, "_v", a)
        holds = f"{type(a).__qualname__} of {type(held).__name__}"
        lattice = getattr(type(b), "wrapper_name", None) or type(b).__qualname__
        value = exc.value if isinstance(exc, LatticeValueError) else b
        return LatticeColumnValueError(self.name, self.columns[i], value, lattice, holds, str(exc))

    def _replace(self, k: Any, old: Any, new: Any) -> None:
        self.store[k] = new
        self.undo.append((k, old))
        self.tick_new.append(new)
        self.changes += 1
        for i in range(self.nkeys, self.arity):
            a = old[i]
            if not isinstance(a, Lattice) and a != new[i]:
                self.removals += 1
                break
        if self.indexes:
            self._log.append(_Del(k, old))
            self._log.append(new)
            self._trim()

    def remove(self, row: Any) -> bool:
        """Delete ``row`` (matched on its non-lattice columns); return whether it was there."""
        k = row if self.keyfn is None else self.keyfn(row)
        old = self.store.get(k, MISSING)
        if old is MISSING:
            return False
        if old != row:
            for i in range(self.nkeys, self.arity):
                a, b = old[i], row[i]
                if a != b and not (isinstance(a, Lattice) and type(b) is type(a)):
                    return False
        self._delete(k, old)
        return True

    def remove_key(self, row: Any) -> None:
        """Delete whatever tuple is stored under ``row``'s key (for ``<+-``)."""
        k = row if self.keyfn is None else self.keyfn(row)
        old = self.store.get(k, MISSING)
        if old is not MISSING:
            self._delete(k, old)

    def _delete(self, k: Any, old: Any) -> None:
        del self.store[k]
        self.undo.append((k, old))
        self.removals += 1
        self.changes += 1
        if self.indexes:
            self._log.append(_Del(k, old))
            self._trim()
        if self.ttl is not None:
            t = self.expiry.pop(k, MISSING)
            if t is not MISSING:
                self._ttl_log.append(("e", k, t))

    def clear(self) -> None:
        """Empty a scratch (start of a tick); the old contents are kept for a rollback."""
        if self._saved is None:
            self._saved = self.store
        if self.store:
            self.removals += 1
            self.changes += 1
        self.store = {}
        self.indexes = {}
        self._log = []
        self._kprobes = 0

    def put(self, k: Any, row: Any) -> None:
        """Store ``row`` (of this relation's row type) under key ``k``, replacing what is
        there: the maintained collections' write (``blooml.engine._maintain``), logged for
        undo, indexes and the semi-naive delta."""
        old = self.store.get(k, MISSING)
        if old is MISSING:
            self._store_new(k, row)
        elif old is not row and old != row:
            self._replace(k, old, row)

    def drop(self, k: Any) -> None:
        """Delete whatever is stored under key ``k`` (logged, see ``put``)."""
        old = self.store.get(k, MISSING)
        if old is not MISSING:
            self._delete(k, old)

    @property
    def was_empty(self) -> bool:
        """Whether the store was empty when the current (or last committed) tick began: its
        change is then every stored row, new."""
        return self._empty_at_begin

    def tick_delta(self) -> list[tuple[Any, int]]:
        """This tick's change so far as signed rows: ``(row, -1)`` for a row gone (or replaced),
        ``(row, 1)`` for a row new (or replacing); rows stored before and after are left out.
        Read from the undo log, so it costs what changed; cached until the next change."""
        undo = self.undo
        c = self._dcache
        if c is not None and c[0] == len(undo) and c[1] is undo:
            return c[2]  # type: ignore[no-any-return]
        out: list[tuple[Any, int]]
        if self._empty_at_begin:  # everything stored is new (a bulk load): no log to read
            if not undo:
                return []
            out = [(r, 1) for r in self.store.values()]
            self._dcache = (len(undo), undo, out)
            return out
        saved = self._saved
        if saved is not None:  # emptied whole this tick (``clear``): compare the two
            cur = self.store
            out = [(r, -1) for k, r in saved.items() if cur.get(k, MISSING) != r]
            out += [(r, 1) for k, r in cur.items() if saved.get(k, MISSING) != r]
            self._dcache = (len(undo), undo, out)
            return out
        first: dict[Any, Any] = {}
        for k, old in undo:
            if k is _BATCH:
                for r in old:
                    if r not in first:
                        first[r] = MISSING
            elif k not in first:
                first[k] = old
        out = []
        get = self.store.get
        for k, old in first.items():
            cur = get(k, MISSING)
            if old is cur:
                continue
            if old is not MISSING:
                if cur is not MISSING and old == cur:
                    continue
                out.append((old, -1))
            if cur is not MISSING:
                out.append((cur, 1))
        self._dcache = (len(undo), undo, out)
        return out

    # -- soft state ----------------------------------------------------------------------------

    def _touch(self, k: Any, now: float) -> None:
        assert self.ttl is not None
        t = now + self.ttl
        log = self._ttl_log
        log.append(("e", k, self.expiry.get(k, MISSING)))
        self.expiry[k] = t
        entry = (t, id(k), k)
        heapq.heappush(self.heap, entry)
        log.append(("push", entry, None))

    def expire(self, now: float) -> None:
        """Drop the soft-state tuples whose lifetime ended at or before ``now``."""
        heap = self.heap
        log = self._ttl_log
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            log.append(("pop", entry, None))
            t, _, k = entry
            if self.expiry.get(k) == t:
                del self.expiry[k]
                log.append(("e", k, t))
                old = self.store.get(k, MISSING)
                if old is not MISSING:
                    self._delete(k, old)

    def _undo_ttl(self) -> None:
        """Undo this tick's soft-state changes: expiries restored, the heap rebuilt without
        the entries pushed and with those popped (linear in the heap: rollbacks only)."""
        pushed: set[int] = set()
        popped = []
        for kind, a, b in reversed(self._ttl_log):
            if kind == "e":
                if b is MISSING:
                    self.expiry.pop(a, None)
                else:
                    self.expiry[a] = b
            elif kind == "push":
                pushed.add(id(a))
            else:
                popped.append(a)
        heap = [e for e in self.heap if id(e) not in pushed]
        heap.extend(e for e in popped if id(e) not in pushed)
        heapq.heapify(heap)
        self.heap = heap
        self._ttl_log = []

    # -- indexes -------------------------------------------------------------------------------

    def _trim(self) -> None:
        # An index that is not probed would make the log grow without bound: past the size
        # of the relation, rebuilding on the next probe is cheaper than replaying.
        if len(self._log) > 1024 and 2 * len(self._log) > len(self.store):
            self.indexes = {}
            self._log = []
            self._kprobes = 0

    def index(self, cols: tuple[int, ...], build: bool = False) -> Any:
        """The hash index on columns ``cols`` (probe value -> the rows holding it, a list or
        a tuple): ``get(probe, default)`` and ``probe in index``.

        Built on first use; afterwards it replays the relation's change log when probed, so
        an index nobody probes costs nothing to maintain. On the key columns, which hold one
        row per probe value, the store answers (:class:`KeyProbe`) until the probes read
        through it outnumber the rows: building that index costs a pass over the rows, which
        one insert probing a large view (or the re-derivation of a recursive one) would pay
        for a handful of probes. ``build`` builds it at once.
        """
        entry = self.indexes.get(cols)
        log = self._log
        if entry is not None and entry[1] == len(log):  # up to date (every round's probe)
            return entry[0]
        get = _getter(cols)
        if entry is None:
            idx: dict[Any, Any]
            if cols == self._key_cols:
                if not build and self._kprobes < len(self.store):
                    return KeyProbe(self)
                # one row per probe value: no grouping, and each bucket the 1-tuple that
                # ``zip`` makes, so that the whole build runs in C (a third faster than a
                # comprehension of lists; the replay below turns a tuple bucket into a list
                # when it changes)
                rows = self.store.values()
                idx = dict(zip(map(get, rows), zip(rows), strict=True))
                self.indexes[cols] = [idx, len(log)]
                return idx
            groups: defaultdict[Any, list[Any]] = defaultdict(list)
            if len(cols) == 1:
                c = cols[0]
                for row in self.store.values():
                    groups[row[c]].append(row)
            else:
                for row in self.store.values():
                    groups[get(row)].append(row)
            idx = dict(groups)  # a plain dict: probes never insert
            self.indexes[cols] = [idx, len(log)]
            return idx
        idx, pos = entry
        n = len(log)
        if pos < n:
            for i in range(pos, n):
                item = log[i]
                if type(item) is _Del:
                    old = item.old
                    p = get(old)
                    b = idx.get(p)
                    if b is not None:
                        if type(b) is tuple:  # a key index's bucket as built
                            b = idx[p] = list(b)
                        for j, r in enumerate(b):
                            if r is old:
                                del b[j]
                                break
                        if not b:
                            del idx[p]
                    continue
                p = get(item)
                b = idx.get(p)
                if b is None:
                    idx[p] = [item]
                elif type(b) is tuple:
                    idx[p] = [*b, item]
                else:
                    b.append(item)
            entry[1] = n
            if all(e[1] == n for e in self.indexes.values()):
                log.clear()
                for e in self.indexes.values():
                    e[1] = 0
        return idx

    # -- transactions --------------------------------------------------------------------------

    def begin(self) -> Any:
        """Start a tick; return what ``rollback`` needs."""
        self.undo = []
        self._saved = None
        self._empty_at_begin = not self.store
        self.tick_new = []
        self.lo = self.hi = 0
        # soft state is journaled (``_ttl_log``), not copied: a tick costs what it changed
        self._ttl_log = []
        ttl_state = None
        return (self.removals, self.changes, ttl_state)

    def commit(self) -> None:
        """End a tick successfully."""
        self._dcache = None
        self._ttl_log = []
        self.undo = []
        self._saved = None
        # the tick's deltas are spent: let rows replaced during the tick go now
        self.tick_new = []
        self.lo = self.hi = 0

    def rollback(self, token: Any) -> None:
        """Restore the contents as they were at ``begin``. The hash indexes are kept: the
        undone changes go to their change log like any other (a failed tick costs what it
        changed, not a rebuild of every index)."""
        self._dcache = None
        if self._saved is not None:
            self.store = self._saved
            self.indexes = {}  # a scratch emptied whole: rebuilt on next use
            self._log = []
        else:
            store = self.store
            log = self._log if self.indexes else None
            for k, old in reversed(self.undo):
                if k is _BATCH:
                    for r in old:
                        cur = store.pop(r, MISSING)
                        if log is not None and cur is not MISSING:
                            log.append(_Del(r, cur))
                    continue
                cur = store.get(k, MISSING)
                if cur is old:
                    continue
                if log is not None and cur is not MISSING:
                    log.append(_Del(k, cur))
                if old is MISSING:
                    store.pop(k, None)
                else:
                    store[k] = old
                    if log is not None:
                        log.append(old)
            if log is not None:
                self._trim()
        self.removals, self.changes, _ = token
        if self._ttl_log:
            self._undo_ttl()
        self.undo = []
        self._saved = None
        self._empty_at_begin = not self.store
        self.tick_new = []
        self.lo = self.hi = 0

    # -- reading -------------------------------------------------------------------------------

    def rows(self) -> Iterable[Any]:
        """The stored rows (a live view: copy before changing the relation)."""
        return self.store.values()

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, row: Any) -> bool:
        k = row if self.keyfn is None else self.keyfn(row)
        old = self.store.get(k, MISSING)
        return old is not MISSING and old == row
