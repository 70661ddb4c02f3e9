"""Prioritized semi-naive evaluation: the delta of an ``lmin``/``lmax``-valued relation is
processed best value first (the semi-naive analogue of Dijkstra's algorithm).

Plain semi-naive evaluation processes, in each round, every row that changed in the previous
round. For a shortest-path rule that relaxes from nodes whose tentative distance is not final
yet: the row is improved later and processed again. A :class:`Frontier` instead keeps the
changed rows of one relation in a heap keyed on their ``lmin`` value (smallest first; largest
first for ``lmax``) and lets the next round process only the rows sharing the best value; the
others are deferred to later rounds of the same fixpoint. A row improved while it waits is
processed once, with its best value.

Why the result is the same least fixpoint: the rules of an eligible stratum are monotone (see
:func:`eligible_heads`), and chaotic iteration of monotone rules reaches the same fixpoint in
any order provided every change is eventually processed as a delta against the then-current
full relations (the join of a deferred row's key with the other inputs still happens, later, and
a delta of another input already joins with the stored, deferred row) and the fixpoint does not
stop while rows are deferred (``narrow`` reports them as live).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from blooml.engine.relation import ORDER, Relation
from blooml.ir import nodes as N
from blooml.ir.program import Rule

__all__ = ["Frontier", "eligible_heads"]


class _Rev:
    """A heap key ordering ``lmax`` values largest first."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: object) -> bool:
        if type(other) is not _Rev:
            return NotImplemented  # an lmin value: the heap raises TypeError, stop deferring
        return bool(other.v < self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rev) and bool(self.v == other.v)

    __hash__ = None  # type: ignore[assignment]


def _monotone_body(node: N.Node) -> bool:
    """Whether ``node`` is built only of operators monotone in their inputs (scans, literal
    rows without lattice cells, map/filter/flat_map, inner joins)."""
    t = type(node)
    if t is N.Scan:
        return True
    if t is N.Literal:
        return not any(isinstance(c, N.Node) for row in node.rows for c in row)  # type: ignore[attr-defined]
    if t in (N.Map, N.Filter, N.FlatMap):
        return _monotone_body(node.input)  # type: ignore[attr-defined]
    if t is N.Join:
        return node.how == "inner" and all(_monotone_body(i) for i in node.inputs)  # type: ignore[attr-defined]
    return False


def _scans(node: N.Node, out: set[str]) -> None:
    t = type(node)
    if t is N.Scan:
        out.add(node.name)  # type: ignore[attr-defined]
    elif t in (N.Map, N.Filter, N.FlatMap):
        _scans(node.input, out)  # type: ignore[attr-defined]
    elif t is N.Join:
        for i in node.inputs:  # type: ignore[attr-defined]
            _scans(i, out)


def eligible_heads(rules: Iterable[Rule], rels: dict[str, Relation]) -> list[Relation]:
    """The relations of a stratum whose deltas may be prioritized (empty: keep the stratum on
    plain semi-naive evaluation).

    The stratum must consist of same-tick (``<=``) rules into collections, with monotone bodies
    that read no lattice variable and not the tick; a prioritized relation is a head of the
    stratum that the stratum also reads (it is recursive), a table or a scratch view with hard
    state, key columns and exactly one value column (``dist = table(["v"], ["d"])``, ``d =
    scratch(["n"], ["d"])``). Whether that column holds
    ``lmin``/``lmax`` values is checked row by row at run time (other rows are not deferred).
    """
    rules = list(rules)
    heads: list[str] = []
    read: set[str] = set()
    for r in rules:
        if r.op != "<=" or r.head not in rels or r.reads or r.reads_tick:
            return []
        if not _monotone_body(r.body):
            return []
        _scans(r.body, read)
        if r.head not in heads:
            heads.append(r.head)
    out = []
    for h in heads:
        rel = rels[h]
        if (
            h in read
            and rel.keyfn is not None
            and rel.ttl is None
            and (rel.persistent or rel.info.kind == "scratch")
            and rel.arity - rel.nkeys == 1
        ):
            out.append(rel)
    return out


class Frontier:
    """The changed, not yet processed rows of one relation within one fixpoint, best first.

    After each round ``narrow`` takes the rows the round added (the window ``tick_new[lo:hi]``
    the runtime just opened), queues them, and replaces the window with the rows of the best
    queued value (appended again to ``tick_new``, so that scans read them as the delta).

    The queue is a bucket queue: rows are grouped by their raw value (``buckets``) and the heap
    holds each distinct value once, so a round costs one heap operation per distinct value
    rather than one per row (path costs repeat a lot: a graph with 10,000 nodes has a few
    hundred distinct distances).
    """

    __slots__ = ("broken", "buckets", "heap", "keyfn", "now", "rel")

    def __init__(self, rel: Relation) -> None:
        self.rel = rel
        self.keyfn: Any = rel.keyfn
        self.heap: list[Any] = []  # distinct queued values (``_Rev`` for lmax), best first
        self.buckets: dict[Any, list[Any]] = {}  # raw value -> rows queued with it
        self.now: dict[Any, None] = {}  # keys to process next round whatever their value
        self.broken = False  # values that cannot be ordered: stop deferring

    def _queue(self, rows: list[Any]) -> None:
        now = self.now
        if self.broken:
            now.update(dict.fromkeys(map(self.keyfn, rows)))
            return
        buckets = self.buckets
        bget = buckets.get
        fresh: list[Any] = []  # values new to the queue
        order = ORDER
        for row in rows:
            v = row[-1]
            o = order[type(v)]
            if o:  # lmin (-1: smallest first), lmax (1: largest first) or a subclass
                x = v._v
                if x is not None:
                    b = bget(x)
                    if b is None:
                        buckets[x] = [row]
                        fresh.append(x if o < 0 else _Rev(x))
                    else:
                        b.append(row)
                    continue
            now[self.keyfn(row)] = None  # not an ordered lattice value (or ⊥): no deferral
        if not fresh:
            return
        heap = self.heap
        try:
            if len(fresh) > len(heap):
                heap.extend(fresh)
                heapq.heapify(heap)
            else:
                push = heapq.heappush
                for x in fresh:
                    push(heap, x)
        except TypeError:  # incomparable values (lmin(1), lmin("a")), or lmin with lmax
            self._break()

    def _break(self) -> None:
        """Give up ordering: every queued row is processed next round."""
        self.broken = True
        keyfn = self.keyfn
        for rows in self.buckets.values():
            self.now.update(dict.fromkeys(map(keyfn, rows)))
        self.buckets.clear()
        self.heap.clear()

    def narrow(self) -> bool:
        """Queue the round's new rows and open the next round's window on the best of the
        queued ones; return whether any row is left to process."""
        rel = self.rel
        tn = rel.tick_new
        if rel.hi > rel.lo:
            self._queue(tn[rel.lo : rel.hi])
        get = rel.store.get
        sel: dict[Any, Any] = {}
        if self.now:  # rows not ordered by value: processed next round, as stored now
            sel = {k: get(k) for k in self.now}
            self.now = {}
        heap = self.heap
        keyfn = self.keyfn
        pop = heapq.heappop
        buckets = self.buckets
        while heap and not sel:
            x = pop(heap)
            rows = buckets.pop(x.v if type(x) is _Rev else x)
            for row in rows:
                k = keyfn(row)
                if get(k) is row:  # else superseded by a better row, queued before it
                    sel[k] = row
        start = len(tn)
        if sel:
            tn.extend(r for r in sel.values() if r is not None)
        rel.lo = start
        rel.hi = len(tn)
        return rel.hi > start
