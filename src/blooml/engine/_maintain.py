"""Maintained collections and the compiler of rule bodies to incremental evaluators.

With incremental evaluation (``Program(incremental=True)``, the default) a collection that does
not persist (scratch, channel, interface, periodic) is not emptied at the start of each tick
and re-derived: it is *maintained*. Its contents are what a re-derivation would give, kept
with a derivation count per row (:class:`Support`): each rule's signed output change and each
tick's input rows (``+1`` in their tick, ``-1`` in the next: the turnover of scratches and
channels) add to the counts, and a row is stored while its count is positive. A collection
with key columns keeps, per key, the count of each contributing row and stores their merge:
a retracted contribution is undone by re-merging the key's remaining ones (a lattice column
never has to shrink by subtraction). Recursive components of scratches are maintained by
their own unit (``Runtime``), not by counts: counting does not terminate on cycles.
"""

from __future__ import annotations

from typing import Any

from blooml.engine._codegen import fused_map
from blooml.engine._zfold import ZLatRows, ZReduce
from blooml.engine._zgroup import ZArgAgg, ZChoose, ZGroup
from blooml.engine._zops import (
    ZFilter,
    ZFlatMap,
    ZFull,
    ZFused,
    ZJoin,
    ZLeftJoin,
    ZMap,
    ZNotIn,
    ZOp,
    ZScan,
    consolidate,
)
from blooml.engine.compile import compile_node, flatten_rows
from blooml.engine.relation import MISSING, Relation
from blooml.errors import ProgramError
from blooml.ir import nodes as N
from blooml.lattices._base import Lattice

__all__ = ["Support", "zcompile", "zcompile_rule"]


class Support:
    """Derivation counts of one maintained collection (see the module docstring)."""

    __slots__ = ("counts", "journal", "keyed", "rel")

    def __init__(self, rel: Relation) -> None:
        self.rel = rel
        self.keyed = rel.keyfn is not None
        # every column a key: row -> count; else key -> {contributing row: count}
        self.counts: dict[Any, Any] = {}
        #: this tick's count changes, ``(dict, row, count before)``, undone by ``rollback``
        #: (the stored rows are restored by the relation's own undo log)
        self.journal: list[tuple[Any, Any, Any]] = []

    def rollback(self) -> None:
        """Put back the counts of the last committed tick."""
        for d, r, c in reversed(self.journal):
            if type(c) is dict or c:  # a count, or a key's emptied group of contributions
                d[r] = c
            else:
                d.pop(r, None)
        self.journal = []

    def apply(self, delta: list[tuple[Any, int]], where: str) -> None:
        """Add signed rows (already rows of the collection) to the counts and store what
        changed. A key conflict raises :class:`~blooml.errors.KeyConstraintError`, as the
        re-derivation would (the tick rolls back)."""
        if not delta:
            return
        rel = self.rel
        counts = self.counts
        if len(delta) > 1:
            items: Any = consolidate(delta).items()
        else:
            items = delta
        journal = self.journal
        if not self.keyed:
            put, drop = rel.put, rel.drop
            for r, w in items:
                c = counts.get(r, 0)
                n = c + w
                if n > 0:
                    if c <= 0:
                        _check_new(rel, r)
                    journal.append((counts, r, c))
                    counts[r] = n
                    if c <= 0:
                        put(r, r)
                elif n == 0:
                    if c:
                        journal.append((counts, r, c))
                        del counts[r]
                        drop(r)
                else:
                    _broken(rel, r, n, where)
            return
        keyfn: Any = rel.keyfn
        touched: dict[Any, dict[Any, int]] = {}
        for r, w in items:
            k = keyfn(r)
            g = counts.get(k)
            if g is None:
                g = counts[k] = {}
                journal.append((counts, k, 0))
            c0 = g.get(r, 0)
            c = c0 + w
            if c > 0:
                if not c0:
                    _check_new(rel, r)
                journal.append((g, r, c0))
                g[r] = c
            elif c == 0:
                journal.append((g, r, c0))
                g.pop(r, None)
            else:
                _broken(rel, r, c, where)
            touched[k] = g
        for k, g in touched.items():
            if not g:
                journal.append((counts, k, g))
                del counts[k]
                rel.drop(k)
                continue
            it = iter(g)
            acc = next(it)
            for r in it:
                acc = rel._merge(k, acc, r)
            old = rel.store.get(k, MISSING)
            if old is MISSING or old != acc:
                rel.put(k, acc)

    def entries(self) -> int:
        """How many counts are kept."""
        if not self.keyed:
            return len(self.counts)
        return sum(len(g) for g in self.counts.values())


def _check_new(rel: Relation, r: Any) -> None:
    """No lattice value in a key column (checked once, when a row first appears)."""
    for i in range(rel.nkeys):
        if isinstance(r[i], Lattice):
            rel.info.check_keys(r)


def _broken(rel: Relation, r: Any, n: int, where: str) -> None:
    raise ProgramError(
        f"{where}: row {tuple(r)!r} of {rel.name!r} was retracted more often than it was "
        f"derived (count {n}). The incremental engine retracts a row by calling the rule's "
        "functions again on the row that left: a function that returns something else for "
        "the same row (it reads a clock, a random number or outside state) derives a "
        "different retraction. Make the function deterministic, or run the program with "
        "Program(incremental=False); if the functions are deterministic, please report it"
    )


def zcompile_rule(rule: Any, rt: Any, raw: bool, lat_reads: list[Any]) -> ZOp:
    """The incremental evaluator of a rule body. A body whose functions read lattice
    variables or ``tick_count`` is re-evaluated in full when one of those changes (or a
    collection below it does), and diffed: its output depends on more than its rows."""
    if lat_reads or rule.reads_tick:
        return ZFull(compile_node(rule.body, rt, raw=raw), lat_reads, tick=rule.reads_tick)
    z = zcompile(rule.body, rt, raw)
    if z.width > 1:
        z = ZMap(z, flatten_rows, raw)
    return z


def zcompile(node: N.Node, rt: Any, raw: bool = False) -> ZOp:
    """The incremental evaluator of ``node`` (one function per node type; anything without
    an incremental form runs as :class:`~blooml.engine._zops.ZFull`)."""
    t = type(node)
    if t is N.Scan:
        return ZScan(rt.rels[node.name])  # type: ignore[attr-defined]
    if t is N.Map:
        if raw and rt.inline:
            fz = fused_map(node, rt, None)
            if fz is not None:
                return ZFused(fz)
        return ZMap(zcompile(node.input, rt), node.fn, raw)  # type: ignore[attr-defined]
    if t is N.Filter:
        return ZFilter(zcompile(node.input, rt), node.fn)  # type: ignore[attr-defined]
    if t is N.FlatMap:
        return ZFlatMap(zcompile(node.input, rt), node.fn)  # type: ignore[attr-defined]
    if t is N.Join:
        j: ZOp | None = _join(node, rt)  # type: ignore[arg-type]
        if j is None:
            j = _leftjoin(node, rt)  # type: ignore[arg-type]
        if j is not None:
            return ZMap(j, flatten_rows, raw) if raw else j
    if (
        isinstance(node, N.NotIn)
        and node.preds
        and isinstance(node.left, N.Scan)
        and isinstance(node.right, N.Scan)
    ):
        return ZNotIn(rt.rels[node.left.name], rt.rels[node.right.name], node.preds, node.fn)
    if t is N.Group:
        return ZGroup(zcompile(node.input, rt), node.keys, node.aggs)  # type: ignore[attr-defined]
    if t is N.ArgAgg:
        return ZArgAgg(zcompile(node.input, rt), node.how, node.keys, node.col)  # type: ignore[attr-defined]
    if t is N.LatRows:
        z = _latrows(node, rt)  # type: ignore[arg-type]
        if z is not None:
            return z
    if t is N.Reduce and node.combine is not None:  # type: ignore[attr-defined]
        return ZReduce(zcompile(node.input, rt), node.init, node.fn, node.combine)  # type: ignore[attr-defined]
    if t is N.Choose:
        return ZChoose(zcompile(node.input, rt), node.keys, node.seed)  # type: ignore[attr-defined]
    return ZFull(compile_node(node, rt, raw=raw))


def _latrows(node: N.LatRows, rt: Any) -> ZLatRows | None:
    """The rows of a lattice variable (``v.to_collection()``, or ``lmap``'s
    ``to_collection(fn)``), else ``None``."""
    lat = node.lat
    if type(lat) is N.LatVar:
        return ZLatRows(rt.lats[lat.name])
    if (
        type(lat) is N.LatMethod
        and lat.name == "to_collection"
        and type(lat.target) is N.LatVar
        and len(lat.args) <= 1
        and all(callable(a) and not isinstance(a, (N.Node, type)) for a in lat.args)
    ):
        return ZLatRows(rt.lats[lat.target.name], True, lat.args)
    return None


def _leftjoin(node: N.Join, rt: Any) -> ZLeftJoin | None:
    """A left join of two scans with equality predicates (else ``None``)."""
    if node.how != "left" or not node.preds or len(node.inputs) != 2:
        return None
    if not all(type(i) is N.Scan for i in node.inputs):
        return None
    if any((p.left, p.right) != (0, 1) for p in node.preds):
        return None
    a, b = (rt.rels[i.name] for i in node.inputs)  # type: ignore[attr-defined]
    return ZLeftJoin(a, b, node.preds)


def _join(node: N.Join, rt: Any) -> ZJoin | None:
    """An inner equi-join of scans, every input probed by equality (else ``None``)."""
    if node.how != "inner" or not node.preds:
        return None
    if not all(type(i) is N.Scan for i in node.inputs):
        return None
    z = ZJoin([rt.rels[i.name] for i in node.inputs], node.preds)  # type: ignore[attr-defined]
    if any(not probes for plan in z.plans for _, probes, _ in plan):
        return None  # a cross product between some inputs
    return z
