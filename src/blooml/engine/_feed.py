"""``head <+ body``, ``head <- body`` and ``head <+- body`` over a collection that does not
persist, at the cost of what changed (:class:`Feed`, :class:`DeleteFeed`, :class:`UpsertFeed`).

The reference (and Bud) evaluates such a rule over the whole scratch every tick and queues
every row for the next tick, where the rows the table already holds change nothing. In
incremental mode (:class:`Feed`) the body is an incremental evaluator whose output ``S`` (the
rows the reference would queue) is kept with counts, together with ``missing``: the rows of
``S`` the head lacks. At the end of a tick ``S`` takes the body's change, ``missing`` that and
the head's own change, and only ``missing`` is queued. One subtlety: before the queued rows
are inserted, the next tick applies deletions and replacements, which may remove a row of
``S`` that the head held; the reference re-inserts it. :func:`refill` does so, from the head's
change in the tick so far (``Runtime``'s input step calls it before inserting).

Only a table head (persistent, no TTL: re-inserting a soft-state row refreshes it) written by
no other ``<+``/``<+-`` rule gets a feed (two rules' rows are checked against each other when
derived). Key conflicts within ``S`` raise when the conflicting row enters ``S``, as the
reference's check of the queued rows does; the tick rolls back, the feed with it.
"""

from __future__ import annotations

from typing import Any

from blooml.engine._zops import ZOp, consolidate
from blooml.engine.relation import MISSING as _ABSENT
from blooml.engine.relation import Relation
from blooml.lattices._base import Lattice

__all__ = ["DeleteFeed", "Feed", "UpsertFeed", "refill", "unfeed"]


class _Journaled:
    """What the three feeds share: the body's evaluator ``z``, the head, S with counts
    (``counts``), S's rows per head key (``bykey``), ``armed`` (whether the last committed
    tick queued S), and a dict of flagged rows or keys named by ``_FLAGGED`` (each feed's
    own: the rows the head lacks, the rows that would delete one, the stale keys), with the
    tick's journal that :meth:`rollback` undoes."""

    __slots__ = ("armed", "bykey", "counts", "head", "journal", "z")
    _FLAGGED: str  # the name of the subclass's flag dict, also its journal entries' kind

    z: ZOp
    counts: dict[Any, int]
    bykey: dict[Any, dict[Any, None]]
    armed: bool
    journal: list[tuple[Any, ...]]

    def rollback(self) -> None:
        """Undo this tick's changes (see ``journal``)."""
        kind_flagged = self._FLAGGED
        flagged: dict[Any, None] = getattr(self, kind_flagged)
        for e in reversed(self.journal):
            kind = e[0]
            if kind == "count":
                if e[2]:
                    self.counts[e[1]] = e[2]
                else:
                    self.counts.pop(e[1], None)
            elif kind == kind_flagged:
                if e[2]:
                    flagged[e[1]] = None
                else:
                    flagged.pop(e[1], None)
            elif kind == "enter":
                rows = self.bykey[e[1]]
                del rows[e[2]]
                if not rows:
                    del self.bykey[e[1]]
            elif kind == "leave":
                self.bykey.setdefault(e[1], {})[e[2]] = None
            elif kind == "armed":
                self.armed = e[1]
            else:  # init: the state before a full evaluation, restored whole
                self.counts, flagged, self.bykey = e[1], e[2], e[3]
                setattr(self, kind_flagged, flagged)
        self.journal = []

    def children(self) -> list[ZOp]:
        """The body's evaluator (its stateful operators journal too)."""
        return [self.z]


class Feed(_Journaled):
    """The state of one ``<+`` rule over a scratch (see the module docstring)."""

    __slots__ = ("missing",)
    _FLAGGED = "missing"

    def __init__(self, z: ZOp, head: Relation) -> None:
        self.z = z
        self.head = head
        self.counts: dict[Any, int] = {}  # S: the rows the reference queues, with counts
        self.missing: dict[Any, None] = {}  # the rows of S the head lacks
        self.bykey: dict[Any, dict[Any, None]] = {}  # keyed head: S's rows per key
        #: whether the last committed tick queued S (the next tick's refill applies)
        self.armed = False
        #: this tick's changes, undone in reverse by ``rollback``
        self.journal: list[tuple[Any, ...]] = []

    def run(self, fresh: bool, where: str) -> list[Any]:
        """Evaluate the rule at the end of a tick; return the rows to queue."""
        head = self.head
        make = head.make_row
        journal = self.journal
        if fresh:
            journal.append(("init", self.counts, self.missing, self.bykey))
            self.counts, self.missing, self.bykey = {}, {}, {}
            delta: Any = [(make(r, where), 1) for r in self.z.init() if r is not None]
        else:
            delta = [(make(r, where), w) for r, w in self.z.step()]
        counts, missing = self.counts, self.missing
        if delta:
            items = consolidate(delta).items()
            # rows leaving first: a row replacing another under its key is no conflict
            for r, w in [
                *((r, w) for r, w in items if w < 0),
                *((r, w) for r, w in items if w > 0),
            ]:
                c0 = counts.get(r, 0)
                c = c0 + w
                if c > 0 and not c0:
                    self._enter(r)
                    journal.append(("count", r, c0))
                    counts[r] = c
                    if r not in head:
                        journal.append(("missing", r, False))
                        missing[r] = None
                elif c > 0:
                    journal.append(("count", r, c0))
                    counts[r] = c
                elif c0:
                    journal.append(("count", r, c0))
                    del counts[r]
                    self._leave(r)
                    if r in missing:
                        journal.append(("missing", r, True))
                        del missing[r]
        if not fresh:
            for r, w in head.tick_delta():
                if r not in counts:
                    continue
                if w < 0 and r not in missing and r not in head:
                    journal.append(("missing", r, False))
                    missing[r] = None
                elif w > 0 and r in missing and r in head:
                    journal.append(("missing", r, True))
                    del missing[r]
        journal.append(("armed", self.armed))
        self.armed = True
        if not missing:
            # a dict keeps its table when emptied, and iterating it costs that table's size
            self.missing = {}
            return []
        return list(missing)

    def _enter(self, r: Any) -> None:
        """``r`` joins S: the key check of the reference's queued rows, then the index."""
        head = self.head
        keyfn = head.keyfn
        if keyfn is None:
            return
        k = keyfn(r)
        rows = self.bykey.get(k)
        if rows:
            acc = next(iter(rows))
            for other in rows:
                if other != acc:
                    acc = head._merge(k, acc, other)
            head._merge(k, acc, r)  # raises KeyConstraintError on a conflict
        if rows is None:
            rows = self.bykey[k] = {}
        rows[r] = None
        self.journal.append(("enter", k, r))

    def _leave(self, r: Any) -> None:
        keyfn = self.head.keyfn
        if keyfn is None:
            return
        k = keyfn(r)
        rows = self.bykey[k]
        del rows[r]
        if not rows:
            del self.bykey[k]
        self.journal.append(("leave", k, r))


def refill(feeds: list[Any], now: float) -> None:
    """The input step of a tick, before queued rows are inserted: put back in each armed
    feed's head the rows of S that this tick's deletions and replacements removed (the
    reference inserts every row of S after those)."""
    for f in feeds:
        if type(f) is not Feed or not f.armed or not f.counts:
            continue
        head = f.head
        gone = [r for r, w in head.tick_delta() if w < 0 and r in f.counts and r not in head]
        if gone:
            head.add_many(gone, now, f"<+ into {head.name}")


def _matches(head: Relation, r: Any) -> bool:
    """Whether ``head.remove(r)`` would delete a row (``Relation.remove``'s test)."""
    keyfn = head.keyfn
    old = head.store.get(r if keyfn is None else keyfn(r), _ABSENT)
    if old is _ABSENT:
        return False
    if old == r:
        return True
    for i in range(head.nkeys, head.arity):
        a, b = old[i], r[i]
        if a != b and not (isinstance(a, Lattice) and type(b) is type(a)):
            return False
    return True


class DeleteFeed(_Journaled):
    """``head <- body`` over a collection that does not persist: the rows of S (what the
    reference queues every tick) that would delete a row of the head (``present``); only
    those are queued. The next tick's replacements run before deletions and may store a row
    that a row of S deletes: :func:`unfeed` deletes it, as the reference would."""

    __slots__ = ("present",)
    _FLAGGED = "present"

    def __init__(self, z: ZOp, head: Relation) -> None:
        self.z = z
        self.head = head
        self.counts: dict[Any, int] = {}
        self.present: dict[Any, None] = {}
        self.bykey: dict[Any, dict[Any, None]] = {}  # S's rows per head key
        self.armed = False
        self.journal: list[tuple[Any, ...]] = []

    def _key(self, r: Any) -> Any:
        keyfn = self.head.keyfn
        return r if keyfn is None else keyfn(r)

    def _mark(self, r: Any) -> None:
        """Set ``r``'s place in ``present`` from the head as it is now."""
        now = r in self.counts and _matches(self.head, r)
        was = r in self.present
        if now and not was:
            self.journal.append(("present", r, False))
            self.present[r] = None
        elif was and not now:
            self.journal.append(("present", r, True))
            del self.present[r]

    def run(self, fresh: bool, where: str) -> list[Any]:
        """Evaluate the rule at the end of a tick; return the rows to queue."""
        head = self.head
        make = head.make_row
        journal = self.journal
        if fresh:
            journal.append(("init", self.counts, self.present, self.bykey))
            self.counts, self.present, self.bykey = {}, {}, {}
            delta: Any = [(make(r, where), 1) for r in self.z.init() if r is not None]
        else:
            delta = [(make(r, where), w) for r, w in self.z.step()]
        counts = self.counts
        for r, w in consolidate(delta).items() if delta else ():
            c0 = counts.get(r, 0)
            c = c0 + w
            if c > 0 and not c0:
                head.info.check_keys(r)  # as the reference checks each row it queues
                k = self._key(r)
                journal.append(("enter", k, r))
                self.bykey.setdefault(k, {})[r] = None
            if c != c0:
                journal.append(("count", r, c0))
                if c > 0:
                    counts[r] = c
                else:
                    del counts[r]
                    k = self._key(r)
                    rows = self.bykey[k]
                    del rows[r]
                    if not rows:
                        del self.bykey[k]
                    journal.append(("leave", k, r))
            self._mark(r)
        if not fresh:
            for r, _ in head.tick_delta():
                for s in list(self.bykey.get(self._key(r), ())):
                    self._mark(s)
        journal.append(("armed", self.armed))
        self.armed = True
        if not self.present:
            self.present = {}  # an emptied dict keeps (and iterates) its table
            return []
        return list(self.present)


def unfeed(feeds: list[Any]) -> None:
    """The input step of a tick, before queued deletions: delete the rows that this tick's
    replacements stored and that a row of an armed feed's S deletes (the reference queues
    every row of S, and deletes after replacing)."""
    for f in feeds:
        if type(f) is not DeleteFeed or not f.armed or not f.counts:
            continue
        head = f.head
        for r, w in head.tick_delta():
            if w > 0:
                for s in list(f.bykey.get(f._key(r), ())):
                    head.remove(s)


class UpsertFeed(_Journaled):
    """``head <+- body`` over a collection that does not persist: the reference queues every
    row of S (the body's rows) every tick; at the next tick each deletes the row stored under
    its key and is inserted. Under a key whose stored row is the one row of S under it, that
    changes nothing; only the rows of S under the other keys (``stale``: no row stored, or
    another, or several rows of S to merge) are queued. Nothing changes the head between the
    end of a tick and the next tick's replacements (no TTL, no other ``<+``/``<+-`` rule), so
    the head is the same after them as the reference's."""

    __slots__ = ("stale",)
    _FLAGGED = "stale"

    def __init__(self, z: ZOp, head: Relation) -> None:
        self.z = z
        self.head = head
        self.counts: dict[Any, int] = {}  # S, with counts
        self.bykey: dict[Any, dict[Any, None]] = {}  # S's rows per head key
        self.stale: dict[Any, None] = {}  # the keys whose rows of S are queued
        self.armed = False
        self.journal: list[tuple[Any, ...]] = []

    def _key(self, r: Any) -> Any:
        keyfn = self.head.keyfn
        return r if keyfn is None else keyfn(r)

    def _mark(self, k: Any) -> None:
        """Set ``k``'s place in ``stale`` from S and the head as they are now."""
        rows = self.bykey.get(k)
        if rows:
            if len(rows) == 1:
                old = self.head.store.get(k, _ABSENT)
                now = old is _ABSENT or old != next(iter(rows))
            else:
                now = True
        else:
            now = False
        was = k in self.stale
        if now and not was:
            self.journal.append(("stale", k, False))
            self.stale[k] = None
        elif was and not now:
            self.journal.append(("stale", k, True))
            del self.stale[k]

    def _enter(self, k: Any, r: Any) -> None:
        """``r`` joins S: the reference's checks of a queued replacement, then the index."""
        head = self.head
        head.info.check_keys(r)
        rows = self.bykey.get(k)
        if rows:
            acc = next(iter(rows))
            for other in rows:
                if other != acc:
                    acc = head._merge(k, acc, other)
            head._merge(k, acc, r)  # raises KeyConstraintError on a conflict
        if rows is None:
            rows = self.bykey[k] = {}
        rows[r] = None
        self.journal.append(("enter", k, r))

    def run(self, fresh: bool, where: str) -> list[Any]:
        """Evaluate the rule at the end of a tick; return the rows to queue."""
        head = self.head
        make = head.make_row
        journal = self.journal
        if fresh:
            journal.append(("init", self.counts, self.stale, self.bykey))
            self.counts, self.stale, self.bykey = {}, {}, {}
            delta: Any = [(make(r, where), 1) for r in self.z.init() if r is not None]
        else:
            delta = [(make(r, where), w) for r, w in self.z.step()]
        counts = self.counts
        touched: dict[Any, None] = {}
        if delta:
            items = consolidate(delta).items()
            # rows leaving first: a row replacing another under its key is no conflict
            for r, w in [
                *((r, w) for r, w in items if w < 0),
                *((r, w) for r, w in items if w > 0),
            ]:
                c0 = counts.get(r, 0)
                c = c0 + w
                if c == c0:
                    continue
                k = self._key(r)
                if c > 0 and not c0:
                    self._enter(k, r)
                journal.append(("count", r, c0))
                if c > 0:
                    counts[r] = c
                else:
                    del counts[r]
                    rows = self.bykey[k]
                    del rows[r]
                    if not rows:
                        del self.bykey[k]
                    journal.append(("leave", k, r))
                touched[k] = None
        if not fresh:
            for r, _ in head.tick_delta():
                k = self._key(r)
                if k in self.bykey or k in self.stale:
                    touched[k] = None
        for k in touched:
            self._mark(k)
        journal.append(("armed", self.armed))
        self.armed = True
        if not self.stale:
            self.stale = {}  # an emptied dict keeps (and iterates) its table
            return []
        bykey = self.bykey
        return [r for k in self.stale for r in bykey[k]]

    def held(self) -> list[Any]:
        """The rows of S the reference queues but this feed does not (their key's stored row
        is theirs): what ``discard_pending()`` reports besides the queued ones."""
        stale = self.stale
        return [r for k, rows in self.bykey.items() if k not in stale for r in rows]
