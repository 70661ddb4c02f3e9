"""A node's input as *units*, and the bookkeeping of the runtime's queue by unit (used by
``Node`` and by the search of ``_isolate``).

A node's input arrives in units: one datagram, one ``sync_do``/``async_do`` call, one loopback
delivery, and whatever else is queued (the ``<+`` facts of the last tick, inserts made outside
those paths). The runtime keeps one queue (``rt.pending``); a :class:`Unit` remembers which
items it queued, by identity, so that the queue can be cut back into units after a tick
(``split_units``), combined for a trial (``combine``), marked and truncated around a call
(``marks``/``added``/``truncate``), and rows picked out of the units where they are queued
(``split_by``, ``take_rows``), without copying a row or losing its identity.
"""

from __future__ import annotations

import concurrent.futures
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from blooml.engine._state import Pending
from blooml.engine.relation import CheckedRows

__all__ = [
    "Unit",
    "added",
    "combine",
    "marks",
    "merge_into",
    "split_by",
    "split_units",
    "take_rows",
    "truncate",
]

_KINDS = ("replaces", "deletes", "inserts", "lats")


class Unit:
    """One piece of a node's input: what it is, what it queued, and who waits for it.

    Attributes:
        what: ``"datagram from <addr>"``, ``"sync_do"``, ``"async_do"``, ``"loopback"`` or
            ``"queued input"``.
        pend: the items it queued (a ``Pending``).
        fut: the future of a ``sync_do``/``async_do`` call (or ``None``).
        result: the call's return value (the future's result once the input commits).
    """

    __slots__ = ("_pend", "_received", "_what", "fut", "result", "sender")

    def __init__(
        self,
        what: str | None,
        pend: Pending | None,
        fut: concurrent.futures.Future[Any] | None = None,
        result: Any = None,
        sender: str | None = None,
        received: list[tuple[str, list[Any]]] | None = None,
    ) -> None:
        self._what = what  # None: "datagram from <sender>", spelled out when read
        self._pend = pend
        #: a received message's ``(channel, checked rows)`` pairs, until ``pend`` is read:
        #: a tick that commits (the common case) never builds the ``Pending``
        self._received = received
        self.fut = fut
        self.result = result
        #: the address of the node that sent it (a datagram or frame), else ``None``
        self.sender = sender

    @property
    def pend(self) -> Pending:
        """The items it queued (a ``Pending``; built from the received rows when first
        read)."""
        pend = self._pend
        if pend is None:
            pend = self._pend = Pending()
            inserts = pend.inserts
            for chan, rows in self._received or ():
                have = inserts.get(chan)
                if have is None:
                    inserts[chan] = rows
                else:  # (a channel twice in one envelope)
                    have.extend(rows)
            self._received = None
        return pend

    @pend.setter
    def pend(self, pend: Pending) -> None:
        self._pend = pend
        self._received = None

    @property
    def what(self) -> str:
        """What queued it (see the class docstring)."""
        what = self._what
        return f"datagram from {self.sender}" if what is None else what

    def divisible(self) -> bool:
        """Whether :func:`isolate` may set aside part of it: a unit nobody waits for (a
        datagram, a loopback delivery, queued input) holding more than one row. A
        ``sync_do``/``async_do`` call is applied whole or not at all: its caller is told."""
        return self.fut is None and self.size() > 1

    def take(self, kind: str, name: str, j: int) -> tuple[Unit, Unit | None]:
        """Item ``j`` of ``kind``/``name`` as a unit of its own, and the unit without it
        (``None`` when nothing is left); the same objects, so identity is kept."""
        return self.take_all({(kind, name): {j}})

    def take_all(self, picks: dict[tuple[str, str], set[int]]) -> tuple[Unit, Unit | None]:
        """The items ``picks`` names (``{(kind, name): {index, ...}}``) as one unit, and the
        unit without them (``None`` when nothing is left), in one pass; the same objects,
        so identity is kept."""
        # (each (kind, name) comes once from ``lists``: the new lists go straight in)
        piece, rest = Pending(), Pending()
        for k, n, items in self.lists():
            cls = CheckedRows if type(items) is CheckedRows else list
            idx = picks.get((k, n))
            if not idx:
                getattr(rest, k)[n] = cls(items)
                continue
            mine: list[Any] = []
            others: list[Any] = []
            for j, x in enumerate(items):
                (mine if j in idx else others).append(x)
            if mine:
                getattr(piece, k)[n] = cls(mine)
            if others:
                getattr(rest, k)[n] = cls(others)
        left = Unit(self._what, rest, None, None, self.sender) if rest else None
        return Unit(self._what, piece, None, None, self.sender), left

    def halves(self) -> list[Unit]:
        """The unit cut into two units of about half its rows each (same ``what`` and
        ``sender``; the same row objects, so identity is kept)."""
        items = [(kind, name, x, type(lst)) for kind, name, lst in self.lists() for x in lst]
        h = len(items) // 2
        out = []
        for part in (items[:h], items[h:]):
            pend = Pending()
            for kind, name, x, cls in part:
                pend.add(kind, name, CheckedRows([x]) if cls is CheckedRows else [x])
            out.append(Unit(self._what, pend, None, None, self.sender))
        return out

    def lists(self) -> Iterator[tuple[str, str, list[Any]]]:
        """``(kind, name, items)`` for everything the unit queued."""
        pend = self.pend
        for kind in _KINDS:
            d = getattr(pend, kind)
            if d:
                yield from ((kind, name, items) for name, items in d.items())

    def size(self) -> int:
        """How many rows and values it queued."""
        pend = self.pend
        n = 0
        for kind in _KINDS:
            for items in getattr(pend, kind).values():
                n += len(items)
        return n

    def as_dict(self) -> dict[str, list[Any]]:
        """``{name: [rows or values]}`` (deletions included), as ``Node.discarded`` keeps it."""
        out: dict[str, list[Any]] = {}
        for _, name, items in self.lists():
            out.setdefault(name, []).extend(items)
        return out

    def settle(self, exc: BaseException | None) -> None:
        """Resolve the waiting future: the call's result, or ``exc``."""
        fut = self.fut
        if fut is None or fut.done():
            return
        if exc is None:
            fut.set_result(self.result)
        else:
            fut.set_exception(exc)

    def __repr__(self) -> str:
        return f"<Unit {self.what}: {self.size()} items>"


def combine(units: list[Unit]) -> Pending:
    """One queue holding what ``units`` queued, in their order."""
    out = Pending()
    for u in units:
        for kind, name, items in u.lists():
            out.add(kind, name, items)
    return out


def merge_into(pend: Pending, unit_pend: Pending) -> None:
    """Append what ``unit_pend`` queued to ``pend`` (the same objects: identity is kept)."""
    for kind in _KINDS:
        for name, items in getattr(unit_pend, kind).items():
            pend.add(kind, name, items)


def marks(pend: Pending) -> dict[tuple[str, str], int]:
    """How many items ``pend`` holds per ``(kind, name)`` (for :func:`added`)."""
    return {(k, n): len(items) for k in _KINDS for n, items in getattr(pend, k).items()}


def added(pend: Pending, before: dict[tuple[str, str], int]) -> Pending | None:
    """What was queued in ``pend`` since ``marks(pend)`` gave ``before`` (queues only grow
    at their end), or ``None`` when something was taken out meanwhile (then it is unknown)."""
    out = Pending()
    for kind in _KINDS:
        for name, items in getattr(pend, kind).items():
            n0 = before.get((kind, name), 0)
            if len(items) < n0:
                return None
            if len(items) > n0:
                new = items[n0:]
                out.add(kind, name, CheckedRows(new) if type(items) is CheckedRows else new)
    if len(before) > len(marks(pend)):
        return None
    return out


def truncate(pend: Pending, before: dict[tuple[str, str], int]) -> None:
    """Take out of ``pend`` what was queued since ``marks(pend)`` gave ``before``."""
    for kind in _KINDS:
        d = getattr(pend, kind)
        for name in list(d):
            n0 = before.get((kind, name), 0)
            if n0 == 0:
                del d[name]
            else:
                del d[name][n0:]


def split_units(pend: Pending, units: list[Unit]) -> tuple[list[Unit], list[Unit]]:
    """``pend`` cut into units: ``(live, gone)``. ``live`` starts with a ``"queued input"``
    unit of what no unit claims (when there is any), then each unit restricted to the items
    still in ``pend``; ``gone`` are the units none of whose items is queued any more (a tick
    that ran outside the node took them: they committed)."""
    count: Counter[int] = Counter()
    for kind in _KINDS:
        for items in getattr(pend, kind).values():
            count.update(map(id, items))
    claimed: Counter[int] = Counter()
    for u in units:
        for _, _, items in u.lists():
            claimed.update(map(id, items))
    if claimed == count:  # (the common case: no tick ran outside the node) each unit whole
        return list(units), []
    live: list[Unit] = []
    gone: list[Unit] = []
    for u in units:
        u.pend = _claim(u.lists(), count)
        (live if u.pend else gone).append(u)
    base = _claim(((k, n, items) for k in _KINDS for n, items in getattr(pend, k).items()), count)
    if base:
        live.insert(0, Unit("queued input", base))
    return live, gone


def _claim(lists: Any, count: dict[int, int]) -> Pending:
    """The items of ``lists`` (``(kind, name, items)``) still counted in ``count`` (by
    identity), each taken off the count."""
    out = Pending()
    for kind, name, items in lists:
        keep = []
        for x in items:
            c = count.get(id(x), 0)
            if c:
                count[id(x)] = c - 1
                keep.append(x)
        if keep:
            out.add(kind, name, CheckedRows(keep) if type(items) is CheckedRows else keep)
    return out


def take_rows(units: list[Unit], items: Any) -> tuple[list[Unit], list[Unit]] | None:
    """The rows ``items`` names (``{name: [rows]}``, one collection) out of ``units``: those
    of each unit as a unit of their own, and the other units (each without them), in one
    pass over the units; ``None`` when it names nothing queued. The rows of a ``sync_do``/
    ``async_do`` call are not taken: it applies whole or not at all."""
    if not isinstance(items, dict) or len(items) != 1:
        return None
    ((name, rows),) = items.items()
    if not isinstance(rows, list) or not rows or not all(isinstance(r, tuple) for r in rows):
        return None
    want: dict[tuple[Any, ...], int] = {}  # a row named twice is taken twice (if queued so)
    try:
        for r in rows:
            key = tuple(r)
            want[key] = want.get(key, 0) + 1
    except TypeError:  # an unhashable value in a row: one row at a time, by equality
        return _named_row(units, name, tuple(rows[0]))

    def named(x: Any) -> bool:
        try:  # (a row is a tuple, or a named tuple: equal, the same hash)
            c = want.get(x, 0)
        except TypeError:  # unhashable: not a named row
            return False
        if c == 1:
            del want[x]
        elif c:
            want[x] = c - 1
        return c > 0

    return split_by(units, name, named)


def split_by(
    units: list[Unit], name: str, test: Callable[[Any], bool]
) -> tuple[list[Unit], list[Unit]] | None:
    """The rows of collection ``name`` that ``test`` picks out of ``units``: those of each
    unit as a unit of their own, and the other units (each without them), testing each row
    where it is queued (no second pass to find the rows again); ``None`` when it picks
    none. The rows of a ``sync_do``/``async_do`` call are not taken."""
    pieces: list[Unit] = []
    rest: list[Unit] = []
    for u in units:
        picks: dict[tuple[str, str], set[int]] = {}
        if u.fut is None:
            pend = u.pend
            for kind in ("inserts", "replaces"):
                lst = getattr(pend, kind).get(name)
                if lst:
                    idx = {j for j, x in enumerate(lst) if test(x)}
                    if idx:
                        picks[(kind, name)] = idx
        if picks:
            mine, left = u.take_all(picks)
            pieces.append(mine)
            if left is not None:
                rest.append(left)
        else:
            rest.append(u)
    return (pieces, rest) if pieces else None


def _named_row(
    units: list[Unit], name: str, key: tuple[Any, ...]
) -> tuple[list[Unit], list[Unit]] | None:
    """The first queued row of ``name`` equal to ``key`` as a unit of its own, and the
    other units (its unit without it); ``None`` when none is queued."""
    for i, u in enumerate(units):
        if u.fut is not None:
            continue  # a sync_do/async_do call applies whole or not at all
        for kind in ("inserts", "replaces"):
            lst = getattr(u.pend, kind).get(name)
            for j, x in enumerate(lst or ()):
                if isinstance(x, tuple) and tuple(x) == key:
                    piece, rest = u.take(kind, name, j)
                    others = units[:i] + ([rest] if rest is not None else []) + units[i + 1 :]
                    return [piece], others
    return None
