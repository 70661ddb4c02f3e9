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
from collections import namedtuple
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from blooml.errors import BloomError, KeyConstraintError
from blooml.ir.program import CollectionInfo
from blooml.lattices._base import Lattice

__all__ = ["MISSING", "Relation"]

MISSING: Any = object()
_EMPTY: dict[Any, Any] = {}


def _unit(row: Any) -> tuple[()]:
    return ()


def _getter(cols: tuple[int, ...]) -> Any:
    return itemgetter(*cols) if cols else _unit


class Relation:
    """The rows of one collection at run time (see the module docstring)."""

    __slots__ = (
        "_idx_list",
        "_saved",
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
        "nkeys",
        "persistent",
        "removals",
        "row_type",
        "store",
        "tick_new",
        "ttl",
        "undo",
    )

    def __init__(self, info: CollectionInfo) -> None:
        self.info = info
        self.name = info.name
        self.columns = info.columns
        self.row_type = namedtuple(info.name, info.columns)  # type: ignore[misc]
        self.arity = len(info.columns)
        self.nkeys = len(info.keys)
        self.full_key = not info.values
        self.keyfn = None if self.full_key else _getter(tuple(range(self.nkeys)))
        self.persistent = info.persistent
        self.ttl = info.ttl
        self.store: dict[Any, Any] = {}
        self.indexes: dict[tuple[int, ...], dict[Any, dict[Any, Any]]] = {}
        self._idx_list: list[tuple[Any, dict[Any, dict[Any, Any]]]] = []
        self.tick_new: list[Any] = []
        self.lo = 0
        self.hi = 0
        self.undo: list[tuple[Any, Any]] = []
        self.removals = 0
        self.changes = 0
        self.expiry: dict[Any, float] = {}
        self.heap: list[tuple[float, int, Any]] = []
        self._saved: Any = None

    # -- rows ----------------------------------------------------------------------------------

    def make_row(self, r: Any, where: str) -> Any:
        """Convert ``r`` (a tuple, or a value for a one-column collection) into a row."""
        if type(r) is self.row_type:
            return r
        if not isinstance(r, tuple):
            if self.arity == 1:
                r = (r,)
            else:
                raise BloomError(
                    f"{where}: {self.info.kind} {self.name!r} has columns {list(self.columns)}; "
                    f"got the non-tuple {r!r}"
                )
        if len(r) != self.arity:
            raise BloomError(
                f"{where}: {self.info.kind} {self.name!r} has {self.arity} columns "
                f"{list(self.columns)}; got {len(r)} values {tuple(r)!r}"
            )
        return tuple.__new__(self.row_type, r)

    def key_of(self, row: Any) -> Any:
        """The key under which ``row`` is stored."""
        return row if self.keyfn is None else self.keyfn(row)

    def _bad_key(self, row: Any) -> None:
        for i in range(self.nkeys):
            if isinstance(row[i], Lattice):
                raise BloomError(
                    f"{self.info.kind} {self.name!r}: key column {self.columns[i]!r} holds the "
                    f"lattice value {row[i]!r} in {tuple(row)!r}; lattice values cannot be key "
                    "columns (declare the column among the values)"
                )

    # -- changes -------------------------------------------------------------------------------

    def add(self, row: Any, now: float) -> bool:
        """Insert (or merge) ``row``; return whether the stored contents changed."""
        k = row if self.keyfn is None else self.keyfn(row)
        store = self.store
        old = store.get(k, MISSING)
        if old is MISSING:
            for i in range(self.nkeys):
                if isinstance(row[i], Lattice):
                    self._bad_key(row)
            store[k] = row
            self.undo.append((k, MISSING))
            self.tick_new.append(row)
            self.changes += 1
            for get, idx in self._idx_list:
                p = get(row)
                b = idx.get(p)
                if b is None:
                    idx[p] = {k: row}
                else:
                    b[k] = row
            if self.ttl is not None:
                self._touch(k, now)
            return True
        if old == row:
            if self.ttl is not None:
                self._touch(k, now)
            return False
        new = self._merge(k, old, row)
        if self.ttl is not None:
            self._touch(k, now)
        if new == old:
            return False
        self._replace(k, old, new)
        return True

    def _merge(self, k: Any, old: Any, new: Any) -> Any:
        out = list(old)
        for i in range(self.nkeys, self.arity):
            a, b = old[i], new[i]
            if a is b or a == b:
                continue
            if isinstance(a, Lattice) and type(b) is type(a):
                out[i] = a.merge(b)
            elif self.ttl is not None:
                return new
            else:
                key = k if self.keyfn is not None else tuple(k)
                raise KeyConstraintError(self.name, key, tuple(old), tuple(new))
        return tuple.__new__(self.row_type, out)

    def _replace(self, k: Any, old: Any, new: Any) -> None:
        self.store[k] = new
        self.undo.append((k, old))
        self.tick_new.append(new)
        self.changes += 1
        if any(
            old[i] != new[i]
            for i in range(self.nkeys, self.arity)
            if not isinstance(old[i], Lattice)
        ):
            self.removals += 1
        for get, idx in self._idx_list:
            po, pn = get(old), get(new)
            if po != pn:
                b = idx.get(po)
                if b is not None:
                    b.pop(k, None)
                    if not b:
                        del idx[po]
            b = idx.get(pn)
            if b is None:
                idx[pn] = {k: new}
            else:
                b[k] = new

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
        for get, idx in self._idx_list:
            p = get(old)
            b = idx.get(p)
            if b is not None:
                b.pop(k, None)
                if not b:
                    del idx[p]
        if self.ttl is not None:
            self.expiry.pop(k, None)

    def clear(self) -> None:
        """Empty a scratch (start of a tick); the old contents are kept for a rollback."""
        if self._saved is None:
            self._saved = (self.store, self.indexes)
        if self.store:
            self.removals += 1
            self.changes += 1
        self.store = {}
        self.indexes = {cols: {} for cols in self.indexes}
        self._idx_list = [(_getter(c), i) for c, i in self.indexes.items()]

    # -- soft state ----------------------------------------------------------------------------

    def _touch(self, k: Any, now: float) -> None:
        assert self.ttl is not None
        t = now + self.ttl
        self.expiry[k] = t
        heapq.heappush(self.heap, (t, id(k), k))

    def expire(self, now: float) -> None:
        """Drop the soft-state tuples whose lifetime ended at or before ``now``."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            t, _, k = heapq.heappop(heap)
            if self.expiry.get(k) == t:
                del self.expiry[k]
                old = self.store.get(k, MISSING)
                if old is not MISSING:
                    self._delete(k, old)

    # -- indexes -------------------------------------------------------------------------------

    def index(self, cols: tuple[int, ...]) -> dict[Any, dict[Any, Any]]:
        """The hash index on columns ``cols`` (probe value -> {key: row}), built on first use."""
        idx = self.indexes.get(cols)
        if idx is None:
            idx = {}
            get = _getter(cols)
            for k, row in self.store.items():
                p = get(row)
                b = idx.get(p)
                if b is None:
                    idx[p] = {k: row}
                else:
                    b[k] = row
            self.indexes[cols] = idx
            self._idx_list.append((get, idx))
        return idx

    # -- transactions --------------------------------------------------------------------------

    def begin(self) -> Any:
        """Start a tick; return what ``rollback`` needs."""
        self.undo = []
        self._saved = None
        self.tick_new = []
        self.lo = self.hi = 0
        ttl_state = (dict(self.expiry), list(self.heap)) if self.ttl is not None else None
        return (self.removals, self.changes, ttl_state)

    def commit(self) -> None:
        """End a tick successfully."""
        self.undo = []
        self._saved = None

    def rollback(self, token: Any) -> None:
        """Restore the contents as they were at ``begin``."""
        if self._saved is not None:
            self.store, self.indexes = self._saved
            self._idx_list = [(_getter(c), i) for c, i in self.indexes.items()]
        store = self.store
        undo = self.undo if self._saved is None else []
        if undo:
            for k, old in reversed(undo):
                if old is MISSING:
                    store.pop(k, None)
                else:
                    store[k] = old
            # indexes are rebuilt from the restored rows on next use
            self.indexes = {}
            self._idx_list = []
        self.removals, self.changes, ttl_state = token
        if ttl_state is not None:
            self.expiry, self.heap = ttl_state
        self.undo = []
        self._saved = None
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
