"""Recursive scratch views under retraction: delete and re-derive (DRed).

A recursive unit whose heads are scratches (reachability, paths) cannot keep derivation
counts: on a cycle they never reach zero. When something the unit reads loses rows (a
deleted edge, the turnover of a scratch input), :class:`DRed` updates its heads in three
steps whose cost follows what depends on the change, not the size of the view:

1. **Over-delete.** Every head row with a derivation, in the state before the change, that
   uses a removed row is marked, and so on transitively: the frontier of removed rows drives
   the rules (generated loops probing the old state: the indexes less this tick's additions,
   plus its removals). Marked rows are removed from the heads.
2. **Re-derive.** A marked row may still have another derivation. Each rule's head key
   columns are plain column reads of one of its inputs (``lambda r, e: (r.x, e.y)``: the key
   ``x`` comes from ``r``), so the rows that could derive a marked key are found by probing
   that input's index with the key, and the rule runs on them alone against the new state.
3. **Insert.** What was re-derived, and what the tick added to the unit's inputs, propagate
   by the ordinary semi-naive rounds (``blooml.engine._units.run_recursive``).

A unit it cannot handle (a rule function run as Python, a head key computed rather than
read, a lattice variable or ``tick_count`` read, a non-monotone input that changed) is
re-derived in full instead, as before.
"""

from __future__ import annotations

from typing import Any

from blooml.engine._codegen import fused_map
from blooml.engine._zops import _E, _OldView
from blooml.engine.relation import Relation
from blooml.ir import exprs as X
from blooml.ir import nodes as N

__all__ = ["DRed"]


class _Rule:
    """One rule of the unit: how it runs on chosen driver rows, and how its head key is
    read from one of its inputs."""

    __slots__ = ("fz", "head", "inv", "rels", "scan")

    def __init__(self, head: Relation, rels: list[Relation], fz: Any, inv: Any) -> None:
        self.head = head
        self.rels = rels
        self.fz = fz  # generated loops (None: the body is a bare scan)
        self.scan = fz is None
        # (input j, its columns, head key positions): the input whose columns give the key
        self.inv = inv

    def drive(self, d: int, rows: list[Any], view: Any) -> list[Any]:
        """The rule's results with input ``d`` restricted to ``rows``, the others probed
        through ``view(rel, cols)``."""
        if self.scan:
            return rows
        fz = self.fz
        gets = [view(self.rels[j], cols) for j, cols in fz.cols[d]]
        return list(fz.runs[d](rows, *gets, None))


def _column(e: X.Expr, rels: list[Relation]) -> tuple[int, int] | None:
    """``(input, column)`` when ``e`` reads one column of one input row as it is."""
    t = type(e)
    if t is X.Attr and type(e.obj) is X.Arg:  # type: ignore[attr-defined]
        j = e.obj.index  # type: ignore[attr-defined]
        cols = rels[j].columns
        return (j, cols.index(e.name)) if e.name in cols else None  # type: ignore[attr-defined]
    if t is X.Item and type(e.obj) is X.Arg and type(e.key) is X.Const:  # type: ignore[attr-defined]
        j = e.obj.index  # type: ignore[attr-defined]
        k = e.key.value  # type: ignore[attr-defined]
        if type(k) is int and 0 <= k < rels[j].arity:
            return (j, k)
    return None


def _inputs(node: N.Node) -> list[str] | None:
    """The scans under a ``map``'s filters (a scan, or an inner join of scans)."""
    while type(node) is N.Filter:
        node = node.input  # type: ignore[attr-defined]
    if type(node) is N.Scan:
        return [node.name]  # type: ignore[attr-defined]
    if type(node) is N.Join and all(type(i) is N.Scan for i in node.inputs):  # type: ignore[attr-defined]
        return [i.name for i in node.inputs]  # type: ignore[attr-defined]
    return None


def _compile(rule: Any, rt: Any) -> _Rule | None:
    head = rt.rels.get(rule.head)
    if head is None or rule.op != "<=" or rule.reads or rule.reads_tick:
        return None
    body = rule.body
    if type(body) is N.Scan:
        src = rt.rels[body.name]  # type: ignore[attr-defined]
        if src.arity != head.arity:
            return None
        keys = tuple(range(head.nkeys))
        return _Rule(head, [src], None, (0, keys, keys))
    if type(body) is not N.Map or body.expr is None or not rt.inline:  # type: ignore[attr-defined]
        return None
    names = _inputs(body.input)  # type: ignore[attr-defined]
    if names is None:
        return None
    fz = fused_map(body, rt, None)
    if fz is None:
        return None
    rels = [rt.rels[n] for n in names]
    expr = body.expr  # type: ignore[attr-defined]
    items = expr.items if type(expr) is X.TupleExpr else (expr,)
    if len(items) != head.arity:
        return None
    by_input: dict[int, list[tuple[int, int]]] = {}
    for i in range(head.nkeys):
        c = _column(items[i], rels)
        if c is not None:
            by_input.setdefault(c[0], []).append((i, c[1]))
    if not by_input:
        return None
    j, pairs = max(by_input.items(), key=lambda kv: len(kv[1]))
    inv = (j, tuple(c for _, c in pairs), tuple(i for i, _ in pairs))
    return _Rule(head, rels, fz, inv)


class DRed:
    """Delete and re-derive for one recursive unit (see the module docstring)."""

    __slots__ = ("heads", "rules")

    def __init__(self, rules: list[_Rule], heads: list[Relation]) -> None:
        self.rules = rules
        self.heads = heads

    @classmethod
    def build(cls, crs: list[Any], rt: Any, heads: list[Relation]) -> DRed | None:
        """The DRed of a unit's compiled rules, or ``None`` when one of them does not fit."""
        names = {h.name for h in heads}
        if not heads or any(cr.rule.head not in names for cr in crs):
            return None  # a table or lattice head in the unit: it keeps what it derived
        rules = []
        for cr in crs:
            r = _compile(cr.rule, rt)
            if r is None:
                return None
            rules.append(r)
        return cls(rules, heads)

    #: Over-deletion stops, and the heads are re-derived in full instead, once it has marked
    #: more than this share of their rows: past it, marking and re-deriving row by row costs
    #: more than one semi-naive evaluation of the whole view.
    limit_share = 0.125

    def run(self, rt: Any, removed: dict[str, list[Any]]) -> bool:
        """Over-delete from ``removed`` (rows gone from the unit's inputs, by collection),
        take the marked rows out of the heads and put back those still derivable. Returns
        ``False``, having changed nothing, when the change reaches too much of the view (see
        ``limit_share``): the caller re-derives it in full."""
        heads = {h.name: h for h in self.heads}
        olds: dict[tuple[str, tuple[int, ...]], Any] = {}

        def old_view(rel: Relation, cols: tuple[int, ...]) -> Any:
            if rel.name in heads:
                return rel.index(cols).get  # heads are unchanged until step 1 ends
            key = (rel.name, cols)
            v = olds.get(key)
            if v is None:
                d = rel.tick_delta()
                v = olds[key] = _OldView(rel, cols, d) if d else rel.index(cols).get
            return v

        marked: dict[str, dict[Any, Any]] = {h: {} for h in heads}
        frontier = {n: rows for n, rows in removed.items() if rows}
        limit = 64 + int(self.limit_share * sum(len(h.store) for h in self.heads))
        total = 0
        while frontier:
            nxt: dict[str, list[Any]] = {}
            for r in self.rules:
                h = r.head
                got = marked[h.name]
                for d, rel in enumerate(r.rels):
                    rows = frontier.get(rel.name)
                    if not rows:
                        continue
                    for out in r.drive(d, rows, old_view):
                        k = h.key_of(out)
                        if k in got:
                            continue
                        stored = h.store.get(k)
                        if stored is None:
                            continue
                        got[k] = stored
                        nxt.setdefault(h.name, []).append(stored)
                        total += 1
                        if total > limit:
                            return False
            frontier = nxt
        for name, keys in marked.items():
            h = heads[name]
            for k in keys:
                h.drop(k)

        def new_view(rel: Relation, cols: tuple[int, ...]) -> Any:
            return rel.index(cols).get

        now = rt.now
        for name, keys in marked.items():
            if not keys:
                continue
            h = heads[name]
            back = [r for r in rt.tick_in.get(name, ()) if h.key_of(r) in keys]
            for r in self.rules:
                if r.head is not h:
                    continue
                j, cols, pos = r.inv
                get = r.rels[j].index(cols).get
                drivers: list[Any] = []
                seen: set[Any] = set()
                for k in keys:
                    kt = k if h.keyfn is None else (k if h.nkeys > 1 else (k,))
                    probe = tuple(kt[p] for p in pos)
                    pk = probe[0] if len(probe) == 1 else probe
                    if pk in seen:
                        continue
                    seen.add(pk)
                    drivers.extend(get(pk, _E))
                if drivers:
                    back.extend(o for o in r.drive(j, drivers, new_view) if h.key_of(o) in keys)
            if back:
                h.add_many(back, now, f"re-derivation of {name}")
        return True
