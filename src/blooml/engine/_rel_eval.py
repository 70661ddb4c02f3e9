"""Evaluators of the relational IR nodes: scan, literal rows, map/filter/flat_map, joins, notin.

Every evaluator answers ``full()`` (all rows, over the current state) and ``delta()`` (the rows
derived from the current semi-naive delta of its inputs). Evaluation is batch-at-a-time: each
call returns a list (or a view read before anything is inserted), never one row at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from blooml.engine.relation import Relation

__all__ = [
    "Eval",
    "FilterEval",
    "FlatMapEval",
    "JoinEval",
    "LiteralEval",
    "MapEval",
    "NotInEval",
    "ScanEval",
    "norm_rows",
]

_E: tuple[Any, ...] = ()


class Eval:
    """Base of relational evaluators."""

    __slots__ = ()
    width = 1

    def full(self) -> Iterable[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def delta(self) -> Iterable[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def size(self) -> int:
        """A size estimate (chooses the driving input of a full join)."""
        return 1 << 30

    def states(self) -> list[Any]:
        """The relations and lattice variables read below this node."""
        return []


def norm_rows(out: Iterable[Any]) -> list[Any]:
    """Normalise ``map`` results: tuples stay, ``None`` is dropped, anything else is a
    one-column row."""
    res = []
    for x in out:
        if isinstance(x, tuple):
            res.append(x)
        elif x is not None:
            res.append((x,))
    return res


class ScanEval(Eval):
    """Rows of a relation; the delta is ``tick_new[lo:hi]``."""

    __slots__ = ("rel",)

    def __init__(self, rel: Relation) -> None:
        self.rel = rel

    def full(self) -> Iterable[Any]:
        return self.rel.store.values()

    def delta(self) -> Iterable[Any]:
        rel = self.rel
        if rel.lo >= rel.hi:
            return ()
        rows = rel.tick_new[rel.lo : rel.hi]
        if rel.simple:
            return rows
        # A key merged (or replaced) several times in a round: only its latest row matters,
        # it subsumes the earlier ones (lattice columns only grow).
        keyfn = rel.keyfn
        store = rel.store
        keys = dict.fromkeys(rows if keyfn is None else map(keyfn, rows))
        if len(keys) == len(rows):
            return rows
        get = store.get
        return [r for r in map(get, keys) if r is not None]

    def size(self) -> int:
        return len(self.rel.store)

    def states(self) -> list[Any]:
        return [self.rel]


class LiteralEval(Eval):
    """Literal rows; lattice cells are read at run time (re-emitted when they grow)."""

    __slots__ = ("cells", "rows")

    def __init__(self, rows: tuple[tuple[Any, ...], ...], cells: dict[tuple[int, int], Any]):
        self.rows = rows
        self.cells = cells

    def full(self) -> list[Any]:
        if not self.cells:
            return list(self.rows)
        out = []
        for i, row in enumerate(self.rows):
            out.append(
                tuple(
                    self.cells[(i, j)].value() if (i, j) in self.cells else c
                    for j, c in enumerate(row)
                )
            )
        return out

    def delta(self) -> list[Any]:
        if any(c.delta() is not None for c in self.cells.values()):
            return self.full()
        return []

    def size(self) -> int:
        return len(self.rows)

    def states(self) -> list[Any]:
        return [s for c in self.cells.values() for s in c.states()]


class MapEval(Eval):
    """``fn`` over each row (``fn(*rows)`` after a join); fused with a two-way join below."""

    __slots__ = ("fn", "inp", "raw")

    def __init__(self, inp: Eval, fn: Callable[..., Any], raw: bool = False) -> None:
        self.inp = inp
        self.fn = fn
        self.raw = raw  # results go straight to a head, which normalises them

    def _apply(self, rows: Iterable[Any]) -> list[Any]:
        fn = self.fn
        out = [fn(*r) for r in rows] if self.inp.width > 1 else [fn(r) for r in rows]
        return out if self.raw else norm_rows(out)

    def full(self) -> list[Any]:
        inp = self.inp
        if isinstance(inp, JoinEval):
            out = inp.full(self.fn)
            return out if self.raw else norm_rows(out)
        return self._apply(inp.full())

    def delta(self) -> list[Any]:
        inp = self.inp
        if isinstance(inp, JoinEval):
            out = inp.delta(self.fn)
            return out if self.raw else norm_rows(out)
        d = inp.delta()
        return self._apply(d) if d else []

    def size(self) -> int:
        return self.inp.size()

    def states(self) -> list[Any]:
        return self.inp.states()


class FilterEval(Eval):
    """Rows for which ``fn`` is true."""

    __slots__ = ("fn", "inp", "width")

    def __init__(self, inp: Eval, fn: Callable[..., Any]) -> None:
        self.inp = inp
        self.fn = fn
        self.width = inp.width

    def _apply(self, rows: Iterable[Any]) -> list[Any]:
        fn = self.fn
        if self.width > 1:
            return [r for r in rows if fn(*r)]
        return [r for r in rows if fn(r)]

    def full(self) -> list[Any]:
        return self._apply(self.inp.full())

    def delta(self) -> list[Any]:
        d = self.inp.delta()
        return self._apply(d) if d else []

    def size(self) -> int:
        return self.inp.size()

    def states(self) -> list[Any]:
        return self.inp.states()


class FlatMapEval(Eval):
    """``fn(row)`` yields rows."""

    __slots__ = ("fn", "inp")

    def __init__(self, inp: Eval, fn: Callable[..., Any]) -> None:
        self.inp = inp
        self.fn = fn

    def _apply(self, rows: Iterable[Any]) -> list[Any]:
        fn = self.fn
        out: list[Any] = []
        star = self.inp.width > 1
        for r in rows:
            res = fn(*r) if star else fn(r)
            if res is not None:
                out.extend(norm_rows(res))
        return out

    def full(self) -> list[Any]:
        return self._apply(self.inp.full())

    def delta(self) -> list[Any]:
        d = self.inp.delta()
        return self._apply(d) if d else []

    def states(self) -> list[Any]:
        return self.inp.states()


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    return (a, b)


class JoinEval(Eval):
    """An equi-join of two or more inputs; rows are tuples of input rows.

    A delta is the union over inputs ``i`` with a delta of ``Δi ⋈ (every other input, full)``;
    a full evaluation drives from the smallest input. Scans are probed through their relation's
    maintained hash index; other inputs are materialised and indexed per evaluation.
    """

    __slots__ = ("how", "inputs", "n", "plans", "width")

    def __init__(self, inputs: list[Eval], preds: tuple[Any, ...], how: str) -> None:
        self.inputs = inputs
        self.n = len(inputs)
        self.width = self.n
        self.how = how
        self.plans = [self._plan(d, preds) for d in range(self.n)]

    def _plan(
        self, d: int, preds: tuple[Any, ...]
    ) -> list[tuple[int, list[tuple[int, int]], tuple[int, ...]]]:
        """Steps from driver ``d``: (input j, [(bound position, column)], j's columns)."""
        order = [d]
        steps = []
        remaining = [j for j in range(self.n) if j != d]
        while remaining:
            best = None
            for j in remaining:
                probes, cols = [], []
                for p in preds:
                    if p.left == j and p.right in order:
                        probes.append((order.index(p.right), p.rcol))
                        cols.append(p.lcol)
                    elif p.right == j and p.left in order:
                        probes.append((order.index(p.left), p.lcol))
                        cols.append(p.rcol)
                if probes:
                    best = (j, probes, tuple(cols))
                    break
            if best is None:
                best = (remaining[0], [], ())
            steps.append(best)
            order.append(best[0])
            remaining.remove(best[0])
        return steps

    def _index(self, j: int, cols: tuple[int, ...], cache: dict[Any, Any]) -> dict[Any, Any]:
        inp = self.inputs[j]
        if isinstance(inp, ScanEval):
            return inp.rel.index(cols)
        key = (j, cols)
        idx = cache.get(key)
        if idx is None:
            idx = {}
            get = itemgetter(*cols)
            for row in inp.full():
                b = idx.get(get(row))
                if b is None:
                    idx[get(row)] = [row]
                else:
                    b.append(row)
            cache[key] = idx
        return idx

    def _run(
        self, d: int, drows: Iterable[Any], fn: Callable[..., Any] | None, cache: dict[Any, Any]
    ) -> list[Any]:
        steps = self.plans[d]
        if self.n == 2 and self.how == "inner":
            j, probes, cols = steps[0]
            f = fn or _pair
            if probes:
                idx = self._index(j, cols, cache)
                g = idx.get
                if len(cols) == 1:
                    c = probes[0][1]
                    if d == 0:
                        return [f(a, b) for a in drows for b in g(a[c], _E)]
                    return [f(a, b) for b in drows for a in g(b[c], _E)]
                getp = itemgetter(*(c for _, c in probes))
                if d == 0:
                    return [f(a, b) for a in drows for b in g(getp(a), _E)]
                return [f(a, b) for b in drows for a in g(getp(b), _E)]
            other = list(self.inputs[j].full())
            if d == 0:
                return [f(a, b) for a in drows for b in other]
            return [f(a, b) for b in drows for a in other]
        cur: list[tuple[Any, ...]] = [(r,) for r in drows]
        order = [d]
        left = self.how == "left"
        for j, probes, cols in steps:
            nxt: list[tuple[Any, ...]] = []
            if probes:
                idx = self._index(j, cols, cache)
                if len(probes) == 1:
                    ((pp, pc),) = probes
                    for t in cur:
                        ms = idx.get(t[pp][pc])
                        if ms:
                            nxt.extend((*t, m) for m in ms)
                        elif left:
                            nxt.append((*t, None))
                else:
                    for t in cur:
                        ms = idx.get(tuple(t[pp][pc] for pp, pc in probes))
                        if ms:
                            nxt.extend((*t, m) for m in ms)
                        elif left:
                            nxt.append((*t, None))
            else:
                other = list(self.inputs[j].full())
                for t in cur:
                    if other:
                        nxt.extend((*t, m) for m in other)
                    elif left:
                        nxt.append((*t, None))
            cur = nxt
            order.append(j)
        if order != list(range(self.n)):
            pos = [order.index(i) for i in range(self.n)]
            cur = [tuple(t[p] for p in pos) for t in cur]
        if fn is None:
            return cur
        return [fn(*t) for t in cur]

    def full(self, fn: Callable[..., Any] | None = None) -> list[Any]:
        cache: dict[Any, Any] = {}
        if self.how == "left":
            return self._run(0, self.inputs[0].full(), fn, cache)
        d = min(range(self.n), key=lambda i: self.inputs[i].size())
        return self._run(d, self.inputs[d].full(), fn, cache)

    def delta(self, fn: Callable[..., Any] | None = None) -> list[Any]:
        deltas = [inp.delta() for inp in self.inputs]
        if self.how == "left":
            if deltas[1]:
                return self.full(fn)
            return self._run(0, deltas[0], fn, {}) if deltas[0] else []
        out: list[Any] = []
        cache: dict[Any, Any] = {}
        for d, rows in enumerate(deltas):
            if rows:
                out.extend(self._run(d, rows, fn, cache))
        return out

    def size(self) -> int:
        return max(i.size() for i in self.inputs)

    def states(self) -> list[Any]:
        return [s for i in self.inputs for s in i.states()]


class NotInEval(Eval):
    """Rows of ``left`` with no match in ``right``; non-monotone in ``right``."""

    __slots__ = ("fn", "left", "lget", "rcols", "right", "seen", "srcs")

    def __init__(self, left: Eval, right: Eval, preds: tuple[Any, ...], fn: Any) -> None:
        self.left = left
        self.right = right
        self.fn = fn
        self.rcols = tuple(p.rcol for p in preds)
        self.lget = itemgetter(*(p.lcol for p in preds)) if preds else None
        self.srcs = right.states()
        self.seen: tuple[int, ...] | None = None

    def _filter(self, rows: Iterable[Any]) -> list[Any]:
        self.seen = tuple(s.changes for s in self.srcs)
        right, fn, lget = self.right, self.fn, self.lget
        if lget is not None:
            if isinstance(right, ScanEval):
                idx = right.rel.index(self.rcols)
            else:
                idx = {}
                rget = itemgetter(*self.rcols)
                for r in right.full():
                    idx.setdefault(rget(r), []).append(r)
            if fn is None:
                return [r for r in rows if lget(r) not in idx]
            out = []
            for r in rows:
                ms = idx.get(lget(r))
                cands = ms or ()
                if not any(fn(r, m) for m in cands):
                    out.append(r)
            return out
        if fn is not None:
            others = list(right.full())
            return [r for r in rows if not any(fn(r, m) for m in others)]
        if isinstance(right, ScanEval):
            rel = right.rel
            return [r for r in rows if r not in rel]
        bad = {tuple(r) for r in right.full()}
        return [r for r in rows if tuple(r) not in bad]

    def _dirty(self) -> bool:
        return self.seen != tuple(s.changes for s in self.srcs)

    def full(self) -> list[Any]:
        return self._filter(self.left.full())

    def delta(self) -> list[Any]:
        if self._dirty():
            return self.full()
        d = self.left.delta()
        return self._filter(d) if d else []

    def size(self) -> int:
        return self.left.size()

    def states(self) -> list[Any]:
        return self.left.states() + self.srcs
