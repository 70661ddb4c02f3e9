"""Incremental (signed-delta) evaluators of rule bodies: the engine's incremental core.

Each evaluator answers ``init()`` (its whole output over the current state, a list of rows
with repeats: a multiset, building whatever state it keeps) and ``step()`` (the change of its
output since the last ``init``/``step``: a list of ``(row, weight)`` pairs, weights ``+1``
inserted and ``-1`` retracted, as in DBSP's Z-sets). Inputs are the collections' changes of
the current tick (``Relation.tick_delta``), so a step costs what changed, not what is stored:

* ``map``, ``filter``, ``flat_map`` are linear: they apply their function to the changed rows.
* An inner equi-join of scans is bilinear: ``Δ(A ⋈ B) = ΔA ⋈ B_old + A_new ⋈ ΔB`` (n inputs:
  input ``i``'s change meets the new state of inputs before ``i`` and the old state of those
  after it). Probes use the relations' maintained hash indexes; the old state is the new one
  with the tick's change taken back, per probed key.
* A left join of two scans is the inner join plus ``notin``'s rows paired with ``None``.
* ``notin`` keeps nothing: a changed left row, or a left row under a key whose right side
  changed, is looked up before and after (both sides' indexes), and its output changes when
  its "no match" status does.
* ``group`` keeps per group its row count and, per aggregate, what undoes a retraction:
  running sums and counts, and a multiset of values for ``min``/``max``/``count(col)``/
  ``accum``, with a heap of the distinct values for ``min``/``max``). ``argmin``/``argmax``
  and ``choose`` keep each group's rows by their ordering value, with a heap of the values:
  when the best rows leave, the next best is found in O(log n).
* Everything else (``reduce`` without a declared associative, commutative function, left joins
  of non-scans, lattice nodes, joins of non-scans, rules whose
  functions read lattice variables or ``tick_count``) runs as :class:`ZFull`: re-evaluated in
  full when one of its sources changed, its output diffed against the last one (a counter),
  which is correct for any node and costs what the old engine paid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import repeat
from operator import itemgetter
from typing import Any

from blooml.engine._agg_eval import _stable
from blooml.engine._rel_eval import JoinEval, ScanEval, norm_rows
from blooml.engine.compile import flatten_rows
from blooml.engine.relation import MISSING, Relation
from blooml.errors import ProgramError
from blooml.ir.aggregates import ExactSum, apply_aggregate

__all__ = ["ZFull", "ZOp", "consolidate", "sizeof_rows"]

_E: tuple[Any, ...] = ()
Delta = list[tuple[Any, int]]


def consolidate(delta: Delta) -> dict[Any, int]:
    """Sum the weights of equal rows, dropping those that cancel."""
    out: dict[Any, int] = {}
    for r, w in delta:
        c = out.get(r, 0) + w
        if c:
            out[r] = c
        else:
            out.pop(r, None)
    return out


def sizeof_rows(n: int, sample: Any) -> int:
    """An estimate of the bytes ``n`` entries like ``sample`` (a row) hold in a dict."""
    if n == 0:
        return 0
    per = sys.getsizeof(sample) + 100  # the entry, its hash slot and the count
    return n * per


class ZOp:
    """Base of incremental evaluators (see the module docstring)."""

    __slots__ = ()
    width = 1

    def init(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self) -> Delta:  # pragma: no cover - abstract
        raise NotImplementedError

    def memory(self) -> tuple[int, int]:
        """(entries, estimated bytes) this evaluator keeps for incrementality, children
        included."""
        return (0, 0)

    def children(self) -> list[ZOp]:
        """The evaluators below this one."""
        inp = getattr(self, "inp", None)
        return [inp] if isinstance(inp, ZOp) else []

    def kind(self) -> str:
        """A short name for memory reports."""
        return type(self).__name__[1:].lower()


def _input_rows(inp: ZOp) -> list[Any]:
    """``inp``'s whole output as rows a grouping reads (a join's rows concatenated)."""
    rows = inp.init()
    return [flatten_rows(*t) for t in rows] if inp.width > 1 else rows


def _input_delta(inp: ZOp) -> Delta:
    """``inp``'s change as rows a grouping reads (a join's rows concatenated)."""
    d = inp.step()
    return [(flatten_rows(*t), w) for t, w in d] if d and inp.width > 1 else d


def _split(delta: Delta) -> tuple[list[Any], list[Any]]:
    plus = [r for r, w in delta if w > 0 for _ in range(w)]
    minus = [r for r, w in delta if w < 0 for _ in range(-w)]
    return plus, minus


class ZScan(ZOp):
    """A collection's change this tick."""

    __slots__ = ("rel",)

    def __init__(self, rel: Relation) -> None:
        self.rel = rel

    def init(self) -> list[Any]:
        return list(self.rel.store.values())

    def step(self) -> Delta:
        return self.rel.tick_delta()


class ZMap(ZOp):
    """``fn`` over each row (``fn(*rows)`` after a join); ``raw``: results go to a head."""

    __slots__ = ("fn", "inp", "raw")

    def __init__(self, inp: ZOp, fn: Callable[..., Any], raw: bool) -> None:
        self.inp = inp
        self.fn = fn
        self.raw = raw

    def _apply(self, rows: list[Any]) -> list[Any]:
        fn = self.fn
        out = [fn(*r) for r in rows] if self.inp.width > 1 else [fn(r) for r in rows]
        return [r for r in out if r is not None] if self.raw else norm_rows(out)

    def init(self) -> list[Any]:
        inp = self.inp
        if isinstance(inp, ZJoin):
            out = inp.ev.full(self.fn)
            return [r for r in out if r is not None] if self.raw else norm_rows(out)
        return self._apply(inp.init())

    def step(self) -> Delta:
        d = self.inp.step()
        if not d:
            return d
        fn = self.fn
        star = self.inp.width > 1
        out: Delta = []
        for r, w in d:
            x = fn(*r) if star else fn(r)
            if x is None:
                continue
            if not self.raw and not isinstance(x, tuple):
                x = (x,)
            out.append((x, w))
        return out

    def memory(self) -> tuple[int, int]:
        return self.inp.memory()


class ZFilter(ZOp):
    """Rows for which ``fn`` is true."""

    __slots__ = ("fn", "inp", "width")

    def __init__(self, inp: ZOp, fn: Callable[..., Any]) -> None:
        self.inp = inp
        self.fn = fn
        self.width = inp.width

    def init(self) -> list[Any]:
        fn = self.fn
        rows = self.inp.init()
        if self.width > 1:
            return [r for r in rows if fn(*r)]
        return [r for r in rows if fn(r)]

    def step(self) -> Delta:
        fn = self.fn
        d = self.inp.step()
        if self.width > 1:
            return [(r, w) for r, w in d if fn(*r)]
        return [(r, w) for r, w in d if fn(r)]

    def memory(self) -> tuple[int, int]:
        return self.inp.memory()


class ZFlatMap(ZOp):
    """``fn(row)`` yields rows."""

    __slots__ = ("fn", "inp")

    def __init__(self, inp: ZOp, fn: Callable[..., Any]) -> None:
        self.inp = inp
        self.fn = fn

    def _one(self, r: Any) -> list[Any]:
        res = self.fn(*r) if self.inp.width > 1 else self.fn(r)
        return norm_rows(res) if res is not None else []

    def init(self) -> list[Any]:
        out: list[Any] = []
        for r in self.inp.init():
            out.extend(self._one(r))
        return out

    def step(self) -> Delta:
        out: Delta = []
        for r, w in self.inp.step():
            out.extend((x, w) for x in self._one(r))
        return out

    def memory(self) -> tuple[int, int]:
        return self.inp.memory()


class _OldView:
    """Probes of a relation's state before this tick's change (``old_get(key, default)``):
    its maintained index, less the rows the tick added, plus those it removed."""

    __slots__ = ("get", "minus", "plus")

    def __init__(self, rel: Relation, cols: tuple[int, ...], delta: Delta) -> None:
        self.get = rel.index(cols).get
        key = itemgetter(*cols)
        self.plus = {r for r, w in delta if w > 0}
        self.minus: dict[Any, list[Any]] = {}
        for r, w in delta:
            if w < 0:
                self.minus.setdefault(key(r), []).append(r)

    def __call__(self, k: Any, default: Any = _E) -> Any:
        ms = self.get(k, _E)
        plus = self.plus
        if plus and ms:
            ms = [m for m in ms if m not in plus]
        extra = self.minus.get(k)
        if extra:
            ms = [*ms, *extra]
        return ms


class ZJoin(ZOp):
    """An inner equi-join of two or more scans; rows are tuples of input rows."""

    __slots__ = ("ev", "plans", "rels", "width")

    def __init__(self, rels: list[Relation], preds: tuple[Any, ...]) -> None:
        self.rels = rels
        self.width = len(rels)
        self.ev = JoinEval([ScanEval(r) for r in rels], preds, "inner")
        self.plans = self.ev.plans

    def init(self) -> list[Any]:
        return self.ev.full()

    def step(self) -> Delta:
        deltas = [r.tick_delta() for r in self.rels]
        if not any(deltas):
            return []
        out: Delta = []
        n = self.width
        olds: dict[tuple[int, tuple[int, ...]], _OldView] = {}
        for d, dd in enumerate(deltas):
            if not dd:
                continue
            cur: list[tuple[tuple[Any, ...], int]] = [((r,), w) for r, w in dd]
            order = [d]
            for j, probes, cols in self.plans[d]:
                if not cur:
                    break
                rel = self.rels[j]
                if j < d or not deltas[j]:
                    get = rel.index(cols).get  # the new state (or unchanged)
                else:
                    ov = olds.get((j, cols))
                    if ov is None:
                        ov = olds[(j, cols)] = _OldView(rel, cols, deltas[j])
                    get = ov
                nxt: list[tuple[tuple[Any, ...], int]] = []
                if len(probes) == 1:
                    ((pp, pc),) = probes
                    for t, w in cur:
                        for m in get(t[pp][pc], _E):
                            nxt.append(((*t, m), w))
                else:
                    for t, w in cur:
                        for m in get(tuple(t[pp][pc] for pp, pc in probes), _E):
                            nxt.append(((*t, m), w))
                cur = nxt
                order.append(j)
            if not cur:
                continue
            if order != list(range(n)):
                pos = [order.index(i) for i in range(n)]
                out.extend((tuple(t[p] for p in pos), w) for t, w in cur)
            else:
                out.extend(cur)
        return out


class ZFused(ZOp):
    """``map`` over a scan or an equi-join of scans run by the engine's generated loops
    (``blooml.engine._codegen``), on changed rows; the join rule is ``ZJoin``'s."""

    __slots__ = ("fz", "rels")

    def __init__(self, fz: Any) -> None:
        self.fz = fz
        self.rels = [i.rel for i in fz.inputs]

    def init(self) -> list[Any]:
        return list(self.fz.full())

    def step(self) -> Delta:
        rels = self.rels
        deltas = [r.tick_delta() for r in rels]
        if not any(deltas):
            return []
        fz = self.fz
        out: Delta = []
        for d, dd in enumerate(deltas):
            if not dd:
                continue
            plus, minus = _split(dd)
            if len(rels) == 1:
                gets: list[Any] = []
            else:
                gets = []
                for j, cols in fz.cols[d]:
                    if j < d or not deltas[j]:
                        gets.append(rels[j].index(cols).get)
                    else:
                        gets.append(_OldView(rels[j], cols, deltas[j]))
            run = fz.runs[d]
            if plus:
                out.extend(zip(run(plus, *gets, None), repeat(1), strict=False))
            if minus:
                out.extend(zip(run(minus, *gets, None), repeat(-1), strict=False))
        return out


class ZNotIn(ZOp):
    """Rows of a scan with no match in another scan (equality predicates, optionally a test
    function on the candidate pairs)."""

    __slots__ = ("fn", "lcols", "left", "lget", "rcols", "right")

    def __init__(self, left: Relation, right: Relation, preds: tuple[Any, ...], fn: Any) -> None:
        self.left = left
        self.right = right
        self.fn = fn
        self.lcols = tuple(p.lcol for p in preds)
        self.rcols = tuple(p.rcol for p in preds)
        self.lget = itemgetter(*self.lcols)

    def _free(self, row: Any, get: Any) -> bool:
        ms = get(self.lget(row), _E)
        if not ms:
            return True
        fn = self.fn
        return fn is not None and not any(fn(row, m) for m in ms)

    def init(self) -> list[Any]:
        get = self.right.index(self.rcols).get
        return [r for r in self.left.store.values() if self._free(r, get)]

    def step(self) -> Delta:
        dl = self.left.tick_delta()
        dr = self.right.tick_delta()
        if not dl and not dr:
            return []
        left = self.left
        new_r = self.right.index(self.rcols).get
        old_r: Any = _OldView(self.right, self.rcols, dr) if dr else new_r
        plus = {r for r, w in dl if w > 0}
        minus = {r for r, w in dl if w < 0}
        # the affected left rows: changed ones, and those under a key whose matches changed
        affected = plus | minus
        if dr:
            rget = itemgetter(*self.rcols)
            new_l = left.index(self.lcols).get
            old_l: Any = _OldView(left, self.lcols, dl) if dl else new_l
            for k in {rget(r) for r, _ in dr}:
                affected.update(new_l(k, _E))
                affected.update(old_l(k, _E))
        out: Delta = []
        for r in affected:
            in_new = r in left
            in_old = (in_new and r not in plus) or r in minus
            was = in_old and self._free(r, old_r)
            now = in_new and self._free(r, new_r)
            if now != was:
                out.append((r, 1 if now else -1))
        return out


class ZLeftJoin(ZOp):
    """A left outer join of two scans (equality predicates): the inner join's rows, plus
    ``(row, None)`` for each left row without a match, maintained like ``notin``."""

    __slots__ = ("anti", "inner")
    width = 2

    def __init__(self, left: Relation, right: Relation, preds: tuple[Any, ...]) -> None:
        self.inner = ZJoin([left, right], preds)
        self.anti = ZNotIn(left, right, preds, None)

    def init(self) -> list[Any]:
        return [*self.inner.init(), *((r, None) for r in self.anti.init())]

    def step(self) -> Delta:
        out = self.inner.step()
        anti = self.anti.step()
        if anti:
            out = [*out, *(((r, None), w) for r, w in anti)]
        return out


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


class ZFull(ZOp):
    """Any evaluator, re-run in full when one of its sources changed; its output is diffed
    against the last one (a counter of rows)."""

    __slots__ = ("ev", "journal", "last", "lats", "rels", "tick", "width")

    def __init__(self, ev: Any, extra_lats: list[Any] = (), tick: bool = False) -> None:  # type: ignore[assignment]
        self.ev = ev
        self.width = getattr(ev, "width", 1)
        states = ev.states()
        self.rels = [s for s in states if isinstance(s, Relation)]
        self.lats = [s for s in states if not isinstance(s, Relation)] + list(extra_lats)
        self.tick = tick
        self.last: dict[Any, int] = {}
        self.journal: list[dict[Any, int]] = []  # the outputs this tick replaced

    def _rows(self) -> list[Any]:
        return [r for r in self.ev.full() if r is not None]

    def init(self) -> list[Any]:
        rows = self._rows()
        last: dict[Any, int] = {}
        for r in rows:
            last[r] = last.get(r, 0) + 1
        self.journal.append(self.last)
        self.last = last
        return rows

    def rollback(self) -> None:
        """Put back the output of the last committed tick."""
        if self.journal:
            self.last = self.journal[0]
        self.journal = []

    def dirty(self) -> bool:
        """Whether a source changed this tick."""
        return self.tick or any(v.incs for v in self.lats) or any(r.tick_delta() for r in self.rels)

    def step(self) -> Delta:
        if not self.dirty():
            return []
        old = self.last
        self.init()
        new = self.last
        out: Delta = []
        for r, c in new.items():
            o = old.get(r, 0)
            if c != o:
                out.append((r, c - o))
        for r, o in old.items():
            if r not in new:
                out.append((r, -o))
        return out

    def memory(self) -> tuple[int, int]:
        n = len(self.last)
        return (n, sizeof_rows(n, next(iter(self.last), ())))
