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
* ``group``, ``argmin``/``argmax`` and ``choose`` keep per-group state that undoes a
  retraction: ``blooml.engine._zgroup``. ``reduce`` with a declared ``combine``, and a view
  of a lattice variable: ``blooml.engine._zfold``.
* Everything else (``reduce`` without a declared associative, commutative function, left joins
  of non-scans, lattice nodes, joins of non-scans, rules whose
  functions read lattice variables or ``tick_count``) runs as :class:`ZFull`: re-evaluated in
  full when one of its sources changed, its output diffed against the last one (a counter),
  which is correct for any node and costs what the old engine paid.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import repeat
from operator import itemgetter
from typing import Any

from blooml.engine._rel_eval import JoinEval, ScanEval, norm_rows
from blooml.engine.compile import flatten_rows
from blooml.engine.relation import Relation

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
