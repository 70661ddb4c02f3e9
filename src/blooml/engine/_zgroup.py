"""Incremental evaluators of ``group``, ``argmin``/``argmax`` and ``choose``: per-group state
that undoes a retraction (the protocol, ``init``/``step``, is ``blooml.engine._zops``'s).

``group`` keeps per group its row count and, per aggregate, what undoes a retraction: running
sums and counts, and a multiset of values for ``min``/``max``/``count(col)``/``accum``, with a
heap of the distinct values for ``min``/``max``. ``argmin``/``argmax`` and ``choose`` keep each
group's rows by their ordering value, with a heap of the values: when the best rows leave, the
next best is found in O(log n).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from operator import itemgetter
from typing import Any

from blooml.engine._agg_eval import _stable
from blooml.engine._zops import (
    Delta,
    ZOp,
    _input_delta,
    _input_rows,
)
from blooml.engine.relation import MISSING
from blooml.errors import ProgramError
from blooml.ir.aggregates import ExactSum, apply_aggregate

__all__ = ["ZArgAgg", "ZChoose", "ZGroup"]


# -- group ---------------------------------------------------------------------------------


class _Rev:
    """A value in reverse order: a min-heap of them pops the largest value first."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Rev) -> bool:
        return bool(other.v < self.v)


class _Heap:
    """The distinct values of a group in order, for its best one: a binary heap with lazy
    deletion (a value that left stays in the heap until it reaches the top). ``best(live)``
    costs O(log n) amortized per value that left; the heap is rebuilt when stale entries
    outnumber the live ones."""

    __slots__ = ("h", "mx")

    def __init__(self, mx: bool) -> None:
        self.h: list[Any] = []
        self.mx = mx

    def _compact(self, live: Any) -> list[Any]:
        """Drop the stale entries when they outnumber the live ones (values that come and
        go without ever reaching the top would otherwise pile up)."""
        h = self.h
        if len(h) > 2 * len(live) + 16:
            h = [_Rev(v) for v in live] if self.mx else list(live)
            heapify(h)
            self.h = h
        return h

    def push(self, v: Any, live: Any) -> None:
        """Add value ``v``, new among ``live`` (the container of the live values)."""
        h = self._compact(live)
        heappush(h, _Rev(v) if self.mx else v)  # raises, unchanged, on unlike values

    def best(self, live: Any) -> Any:
        """The best value still in ``live`` (a container of the live values), or MISSING."""
        h = self._compact(live)
        mx = self.mx
        while h:
            top = h[0].v if mx else h[0]
            if top in live:
                return top
            heappop(h)
        return MISSING


class _Multiset(dict):  # type: ignore[type-arg]
    """value -> count; for ``min``/``max`` (``track``), the best value kept by a heap of the
    distinct values (O(log n) when the best leaves). ``add`` changes nothing when it raises
    (a comparison of values of unlike types)."""

    __slots__ = ("best", "heap", "mx", "track")

    def __init__(self, mx: bool, track: bool) -> None:
        super().__init__()
        self.mx = mx
        self.track = track
        self.best: Any = None
        self.heap: _Heap | None = _Heap(mx) if track else None

    def add(self, v: Any, w: int) -> None:
        c0 = self.get(v, 0)
        c = c0 + w
        nb = self.best
        heap = self.heap
        if c > 0:
            if heap is not None and not c0:
                better = not self or (v > nb if self.mx else v < nb)  # may raise: unchanged
                heap.push(v, self)
                if better:
                    nb = v
            self[v] = c
        else:
            del self[v]
            if heap is not None and v == nb:
                b = heap.best(self)
                nb = None if b is MISSING else b
        self.best = nb


_INCREMENTAL_AGGS = frozenset({"count", "sum", "min", "max", "avg", "accum", "bool_and", "bool_or"})


class _Group:
    """One group's state: its row count and one slot per aggregate."""

    __slots__ = ("n", "out", "rows", "slots")

    def __init__(self, nslots: int) -> None:
        self.n = 0
        self.slots: list[Any] = [None] * nslots
        self.out: Any = None
        self.rows: dict[Any, int] | None = None


class ZGroup(ZOp):
    """SQL GROUP BY with aggregates, maintained per group (see the module docstring)."""

    __slots__ = ("aggs", "fast", "groups", "inp", "journal", "keys", "kget")

    def __init__(self, inp: ZOp, keys: tuple[int, ...], aggs: tuple[Any, ...]) -> None:
        self.inp = inp
        self.keys = keys
        self.aggs = aggs
        self.kget = itemgetter(*keys) if keys else None
        self.groups: dict[Any, _Group] = {}
        #: this tick's changes to the state, undone in reverse by ``rollback``
        self.journal: list[tuple[Any, ...]] = []
        # every aggregate kept incrementally, or the group's rows kept (and re-aggregated)
        self.fast = all(a.fn in _INCREMENTAL_AGGS for a in aggs)

    def _gkey(self, r: Any) -> Any:
        if self.kget is None:
            return ()
        return (self.kget(r),) if len(self.keys) == 1 else self.kget(r)

    def _new(self) -> _Group:
        g = _Group(len(self.aggs))
        if not self.fast:
            g.rows = {}
            return g
        for i, a in enumerate(self.aggs):
            fn = a.fn
            if fn in ("min", "max", "accum") or (fn == "count" and a.col is not None):
                g.slots[i] = _Multiset(fn == "max", fn in ("min", "max"))
            elif fn in ("sum", "avg"):
                g.slots[i] = [ExactSum(), None]  # ints and floats, a multiset of the others
            elif fn in ("bool_and", "bool_or"):
                g.slots[i] = [0, 0]  # truthy, falsy
        return g

    def _col(self, r: Any, a: Any) -> Any:
        try:
            return r[a.col]
        except IndexError:
            raise ProgramError(
                f"group: aggregate {a!r} refers to column {a.col}, but a row has only "
                f"{len(r)} columns: {r!r}"
            ) from None

    def _add(self, g: _Group, r: Any, w: int) -> None:
        """Add row ``r`` with weight ``w`` to group ``g``: all of it or, when it raises,
        none of it."""
        if g.rows is not None:
            c = g.rows.get(r, 0) + w
            if c > 0:
                g.rows[r] = c
            else:
                del g.rows[r]
            g.n += w
            return
        vals = [None if a.col is None else self._col(r, a) for a in self.aggs]
        done = 0
        try:
            for i, a in enumerate(self.aggs):
                self._slot(g.slots[i], a.fn, vals[i], w)
                done = i + 1
        except BaseException:
            for i in reversed(range(done)):
                self._slot(g.slots[i], self.aggs[i].fn, vals[i], -w)
            raise
        g.n += w

    @staticmethod
    def _slot(s: Any, fn: str, v: Any, w: int) -> None:
        if s is None or v is None:  # count(): the group's row count; NULL is skipped
            return
        if type(s) is _Multiset:
            s.add(v, w)
        elif fn in ("sum", "avg"):
            t = type(v)
            if t is int or t is float or t is bool:
                s[0].add(v, w)
            else:  # other numbers (Decimal, ...) are summed afresh with +
                ms = s[1]
                if ms is None:
                    ms = s[1] = {}
                c = ms.get(v, 0) + w
                if c > 0:
                    ms[v] = c
                else:
                    del ms[v]
        else:  # bool_and, bool_or
            s[0 if v else 1] += w

    def _value(self, g: _Group, i: int, a: Any) -> Any:
        fn = a.fn
        s = g.slots[i]
        if fn == "count":
            return g.n if a.col is None else len(s)
        if fn in ("min", "max"):
            return s.best if s else None
        if fn == "accum":
            return frozenset(s)
        if fn in ("sum", "avg"):
            exact, ms = s
            n = exact.n + (sum(ms.values()) if ms else 0)
            if not n:
                return None
            total = exact.value()
            if ms:
                total = sum((v * c for v, c in ms.items()), 0 if total is None else total)
            if fn == "sum":
                return total
            return (float(total) if type(total) is int else total) / n
        if not (s[0] or s[1]):
            return None
        return s[1] == 0 if fn == "bool_and" else s[0] > 0

    def _out(self, k: Any, g: _Group) -> Any:
        if g.rows is not None:
            rows = [r for r, c in g.rows.items() for _ in range(c)]
            vals = []
            for a in self.aggs:
                if a.col is None:
                    vals.append(apply_aggregate(a.fn, rows, rows))
                else:
                    vals.append(apply_aggregate(a.fn, [self._col(r, a) for r in rows], rows))
            return (*k, *vals)
        return (*k, *(self._value(g, i, a) for i, a in enumerate(self.aggs)))

    def init(self) -> list[Any]:
        self.journal.append(("init", self.groups))
        self.groups = {}
        for r in _input_rows(self.inp):
            k = self._gkey(r)
            g = self.groups.get(k)
            if g is None:
                g = self.groups[k] = self._new()
            self._add(g, r, 1)
        out = []
        for k, g in self.groups.items():
            g.out = self._out(k, g)
            out.append(g.out)
        return out

    def step(self) -> Delta:
        d = _input_delta(self.inp)
        if not d:
            return []
        touched: dict[Any, _Group] = {}
        groups = self.groups
        journal = self.journal
        for r, w in d:
            k = self._gkey(r)
            g = groups.get(k)
            if g is None:
                g = groups[k] = self._new()
                journal.append(("new", k))
            self._add(g, r, w)
            journal.append(("add", g, r, w))
            touched[k] = g
        out: Delta = []
        for k, g in touched.items():
            old = g.out
            new = self._out(k, g) if g.n > 0 else None
            if g.n <= 0:
                del groups[k]
                journal.append(("del", k, g))
            journal.append(("out", g, old))
            g.out = new
            if old != new:
                if old is not None:
                    out.append((old, -1))
                if new is not None:
                    out.append((new, 1))
        return out

    def rollback(self) -> None:
        """Undo this tick's changes (see ``journal``)."""
        for e in reversed(self.journal):
            kind = e[0]
            if kind == "add":
                self._add(e[1], e[2], -e[3])
            elif kind == "out":
                e[1].out = e[2]
            elif kind == "del":
                self.groups[e[1]] = e[2]
            elif kind == "new":
                del self.groups[e[1]]
            else:  # init
                self.groups = e[1]
        self.journal = []

    def memory(self) -> tuple[int, int]:
        n = 0
        for g in self.groups.values():
            n += 1
            if g.rows is not None:
                n += len(g.rows)
            for s in g.slots:
                if type(s) is _Multiset:
                    n += len(s)
        e, b = self.inp.memory()
        return (n + e, n * 120 + b)


class _Keyed(ZOp):
    """Shared by argmin/argmax and choose: each group's rows (with counts), and the group's
    output recomputed when a change reaches it."""

    __slots__ = ("groups", "inp", "journal", "keys", "outs")

    def __init__(self, inp: ZOp, keys: tuple[int, ...]) -> None:
        self.inp = inp
        self.keys = keys
        self.groups: dict[Any, dict[Any, int]] = {}
        self.outs: dict[Any, list[Any]] = {}
        #: this tick's changes to the state, undone in reverse by ``rollback``
        self.journal: list[tuple[Any, ...]] = []

    def _gkey(self, r: Any) -> Any:
        return tuple(r[i] for i in self.keys)

    def _group(self) -> dict[Any, int]:
        """A new, empty group: row -> count."""
        return {}

    def _best(self, rows: dict[Any, int]) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _update(
        self, g: dict[Any, int], old: list[Any], changes: list[tuple[Any, int]]
    ) -> list[Any]:
        """The group's new output: from the old one when no change touches its best rows
        (an insert that does not beat them, a retraction of another row), else recomputed
        over the group."""
        if not old:
            return self._best(g)
        for r, w in changes:
            if w < 0 and r in old:
                return self._best(g)  # a best row (or one of its copies) left
            if w > 0 and not self._worse(r, old[0]):
                return self._best(g)  # as good as the best: a new best or a new tie
        return old

    def _worse(self, r: Any, best: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def init(self) -> list[Any]:
        self.journal.append(("init", self.groups, self.outs))
        self.groups = {}
        groups = self.groups
        for r in _input_rows(self.inp):
            k = self._gkey(r)
            g = groups.get(k)
            if g is None:
                g = groups[k] = self._group()
            g[r] = g.get(r, 0) + 1
        self.outs = {k: self._best(g) for k, g in self.groups.items()}
        return [r for rows in self.outs.values() for r in rows]

    def step(self) -> Delta:
        d = _input_delta(self.inp)
        if not d:
            return []
        touched = set()
        changes: dict[Any, list[tuple[Any, int]]] = {}
        journal = self.journal
        groups = self.groups
        for r, w in d:
            k = self._gkey(r)
            g = groups.get(k)
            if g is None:
                g = groups[k] = self._group()
                journal.append(("new", k))
            c0 = g.get(r, 0)
            c = c0 + w
            if c > 0:
                g[r] = c
            else:
                del g[r]
            journal.append(("set", g, r, c0))
            touched.add(k)
            changes.setdefault(k, []).append((r, w))
        out: Delta = []
        for k in touched:
            g = groups[k]
            old = self.outs.get(k, [])
            new = self._update(g, old, changes[k]) if g else []
            journal.append(("out", k, self.outs.get(k)))
            if not g:
                del groups[k]
                journal.append(("del", k, g))
                self.outs.pop(k, None)
            else:
                self.outs[k] = new
            if old != new:
                out.extend((r, -1) for r in old)
                out.extend((r, 1) for r in new)
        return out

    def rollback(self) -> None:
        """Undo this tick's changes (see ``journal``)."""
        for e in reversed(self.journal):
            kind = e[0]
            if kind == "set":
                g, r, c0 = e[1], e[2], e[3]
                if c0:
                    g[r] = c0
                else:
                    g.pop(r, None)
            elif kind == "out":
                if e[2] is None:
                    self.outs.pop(e[1], None)
                else:
                    self.outs[e[1]] = e[2]
            elif kind == "del":
                self.groups[e[1]] = e[2]
            elif kind == "new":
                del self.groups[e[1]]
            else:  # init
                self.groups, self.outs = e[1], e[2]
        self.journal = []

    def memory(self) -> tuple[int, int]:
        n = sum(len(g) for g in self.groups.values()) + len(self.groups)
        e, b = self.inp.memory()
        return (n + e, n * 120 + b)


class _Ordered(dict):  # type: ignore[type-arg]
    """A group of ``argmin``/``argmax``/``choose``: row -> count, and the rows by their
    ordering value with a heap of the distinct values, so that the best rows are found in
    O(log n) when the best leaves (a priority queue popping its minimum), not O(group)."""

    __slots__ = ("byval", "heap", "val")

    def __init__(self, val: Callable[[Any], Any], mx: bool) -> None:
        super().__init__()
        self.val = val
        self.byval: dict[Any, dict[Any, None]] = {}
        self.heap = _Heap(mx)

    def __setitem__(self, r: Any, c: int) -> None:
        if r not in self:
            v = self.val(r)
            if v is None:  # NULL is never a group's extreme (SQL's min/max skip it)
                dict.__setitem__(self, r, c)
                return
            rows = self.byval.get(v)
            if rows is None:
                self.heap.push(v, self.byval)  # may raise (unlike values): nothing changed
                rows = self.byval[v] = {}
            rows[r] = None
        dict.__setitem__(self, r, c)

    def __delitem__(self, r: Any) -> None:
        dict.__delitem__(self, r)
        v = self.val(r)
        if v is None:
            return
        rows = self.byval[v]
        del rows[r]
        if not rows:
            del self.byval[v]

    def pop(self, r: Any, default: Any = None) -> Any:  # type: ignore[override]
        if r not in self:
            return default
        c = dict.__getitem__(self, r)
        del self[r]
        return c

    def best_rows(self) -> dict[Any, None]:
        """The rows holding the best value (none when the group is empty)."""
        v = self.heap.best(self.byval)
        return {} if v is MISSING else self.byval[v]


class ZArgAgg(_Keyed):
    """Rows whose column is the minimum/maximum of their group (all ties, with repeats)."""

    __slots__ = ("col", "mx")

    def __init__(self, inp: ZOp, how: str, keys: tuple[int, ...], col: int) -> None:
        super().__init__(inp, keys)
        self.col = col
        self.mx = how == "max"

    def _group(self) -> dict[Any, int]:
        return _Ordered(itemgetter(self.col), self.mx)

    def _best(self, rows: dict[Any, int]) -> list[Any]:
        g: Any = rows
        return [r for r in g.best_rows() for _ in range(g[r])]

    def _worse(self, r: Any, best: Any) -> bool:
        v, b = r[self.col], best[self.col]
        if v is None:
            return True
        return bool(v < b) if self.mx else bool(v > b)


class ZChoose(_Keyed):
    """One row per key value: the one with the smallest seeded hash."""

    __slots__ = ("seed",)

    def __init__(self, inp: ZOp, keys: tuple[int, ...], seed: int) -> None:
        super().__init__(inp, keys)
        self.seed = seed

    def _group(self) -> dict[Any, int]:
        seed = self.seed
        return _Ordered(lambda r: _stable(r, seed), False)

    def _best(self, rows: dict[Any, int]) -> list[Any]:
        g: Any = rows
        best = g.best_rows()
        return [next(iter(best))] if best else []

    def _worse(self, r: Any, best: Any) -> bool:
        return _stable(r, self.seed) > _stable(best, self.seed)
