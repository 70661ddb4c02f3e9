"""Generated evaluators for ``map`` rules whose function is a known expression.

When a rule is ``head <= a.map(f)`` or ``head <= a.join(b, preds).map(f)`` over two stored
collections and ``f`` decompiles to a tuple expression (:func:`blooml.ir.exprs.decompile`),
the engine writes one Python function per driving input that probes the join index and builds
the output rows inline, as a hand-written loop would: no call of ``f`` per row, and column
reads by position (``lk.dst`` is ``lk[1]`` on a row of ``link``). The source is generated from
the IR only (positions and a tuple of constants), compiled once per process for each distinct
source, and registered with ``linecache`` so that tracebacks show it.

The head also learns what the expression guarantees. For a head whose every column is a key,
the loop keeps only rows not stored yet, and when each column is a copy of a key column of an
input (or a plain constant) the results are tuples of the head's arity holding no lattice value:
they are stored without the per-row shape and key checks
(:class:`~blooml.engine.relation.FreshRows`).
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable
from typing import Any

from blooml.engine._rel_eval import Eval, ScanEval
from blooml.engine.relation import ORDER, FreshRows, Relation
from blooml.ir import exprs as X
from blooml.ir import nodes as N

__all__ = ["fused_map"]

_E: tuple[Any, ...] = ()
_serial = itertools.count()


class _Gen:
    """Source of one expression over rows ``r0, r1, ...`` with constants in ``K``."""

    def __init__(self, rels: list[Relation]) -> None:
        self.rels = rels
        self.consts: list[Any] = []

    def src(self, e: X.Expr) -> str | None:
        t = type(e)
        if t is X.Arg:
            return f"r{e.index}"  # type: ignore[attr-defined]
        if t is X.Attr:
            a: Any = e
            if type(a.obj) is X.Arg:
                cols = self.rels[a.obj.index].columns
                if a.name not in cols:
                    return None  # the function would raise AttributeError: let it
                return f"r{a.obj.index}[{cols.index(a.name)}]"
            inner = self.src(a.obj)
            if inner is None or not a.name.isidentifier():
                return None
            return f"{inner}.{a.name}"
        if t is X.Const:
            self.consts.append(e.value)  # type: ignore[attr-defined]
            return f"K[{len(self.consts) - 1}]"
        if t is X.Item:
            i: Any = e
            obj, key = self.src(i.obj), self.src(i.key)
            return None if obj is None or key is None else f"{obj}[{key}]"
        if t is X.BinOp or t is X.Compare:
            b: Any = e
            left, right = self.src(b.left), self.src(b.right)
            return None if left is None or right is None else f"({left} {b.op} {right})"
        if t is X.Unary:
            u: Any = e
            inner = self.src(u.operand)
            return None if inner is None else f"({u.op}{inner})"
        if t is X.LatNew or t is X.Method:
            c: Any = e
            args = [self.src(a) for a in c.args]
            if any(a is None for a in args):
                return None
            if t is X.LatNew:
                self.consts.append(c.cls)
                return f"K[{len(self.consts) - 1}]({', '.join(args)})"  # type: ignore[arg-type]
            obj = self.src(c.obj)
            if obj is None:
                return None
            return f"{obj}.{c.name}({', '.join(args)})"  # type: ignore[arg-type]
        return None


def _key_safe(e: X.Expr, rels: list[Relation]) -> bool:
    """Whether ``e`` can never be a lattice value: a key column of an input row, or a plain
    constant (constants of code objects are never lattice values)."""
    if type(e) is X.Const:
        return True
    if type(e) is X.Attr and type(e.obj) is X.Arg:
        rel = rels[e.obj.index]
        return e.name in rel.columns and rel.columns.index(e.name) < rel.nkeys
    if type(e) is X.Item and type(e.obj) is X.Arg and type(e.key) is X.Const:
        rel = rels[e.obj.index]
        k = e.key.value
        return type(k) is int and -rel.arity <= k < rel.arity and k % rel.arity < rel.nkeys
    return False


_FUNCS: dict[tuple[str, str], Callable[..., Any]] = {}


def _compile(src: str, name: str, consts: tuple[Any, ...]) -> Callable[..., Any]:
    """The function ``run`` that ``src`` defines, with constants ``K = consts``; compiled once
    per process for each distinct source and constants (the ``repr`` tells ``1`` from
    ``1.0`` and ``True``), so that creating many instances of a program costs no compiling
    and adds no ``linecache`` entries."""
    key = (src, repr(consts))
    fn = _FUNCS.get(key)
    if fn is None:
        filename = f"<blooml generated {next(_serial)}: {name}>"
        code = compile(src, filename, "exec")
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns: dict[str, Any] = {"K": consts, "E": _E, "ORD": ORDER}
        exec(code, ns)
        fn = _FUNCS[key] = ns["run"]
    return fn


class FusedMapEval(Eval):
    """``map(f)`` over a scan, or over an inner equi-join of two scans, run by generated code
    (see the module docstring). ``full``/``delta`` match ``MapEval`` over ``JoinEval``."""

    __slots__ = ("cols", "exposed", "fresh", "head", "inputs", "runs")

    def __init__(
        self,
        inputs: list[ScanEval],
        runs: list[Callable[..., Any]],
        cols: list[list[tuple[int, tuple[int, ...]]]],
        fresh: bool,
        head: Relation | None,
    ) -> None:
        self.inputs = inputs
        self.runs = runs  # per driving input: run(drows, *index gets, head store) -> rows
        self.cols = cols  # per driving input: [(other input, its index columns)] in join order
        self.fresh = fresh  # results are FreshRows for the head
        self.head = head
        # the inputs whose rows reach results whole (``lambda r: (r, 1)``): they stay named
        self.exposed: set[str] = set()

    def _drive(self, d: int, rows: Any) -> list[Any]:
        hstore = self.head.store if self.head is not None else None
        ins = self.inputs
        if len(ins) == 1:
            return self.runs[0](rows, hstore)  # type: ignore[no-any-return]
        if len(ins) == 2:
            j, cols = self.cols[d][0]
            return self.runs[d](rows, ins[j].rel.index(cols).get, hstore)  # type: ignore[no-any-return]
        gets = [ins[j].rel.index(cols).get for j, cols in self.cols[d]]
        return self.runs[d](rows, *gets, hstore)  # type: ignore[no-any-return]

    def _out(self, rows: list[Any]) -> list[Any]:
        return FreshRows(rows) if self.fresh else rows

    def full(self) -> list[Any]:
        ins = self.inputs
        # the smallest drives (a map over one input: that one, without sizing it)
        d = 0 if len(ins) == 1 else min(range(len(ins)), key=lambda i: ins[i].size())
        return self._out(self._drive(d, ins[d].full()))

    def delta(self) -> list[Any]:
        out: list[Any] = []
        for d, inp in enumerate(self.inputs):
            rows = inp.delta()
            if rows:
                res = self._drive(d, rows)
                if out:
                    out.extend(res)
                else:
                    out = res
        return self._out(out) if out else out

    def size(self) -> int:
        return max(i.size() for i in self.inputs)

    def states(self) -> list[Any]:
        return [i.rel for i in self.inputs]


def _deps(e: X.Expr) -> set[int]:
    """The arguments (join inputs) ``e`` reads."""
    if type(e) is X.Arg:
        return {e.index}  # type: ignore[attr-defined]
    out: set[int] = set()
    for c in X.children(e):
        out |= _deps(c)
    return out


def _bare(e: X.Expr, out: set[int]) -> set[int]:
    """The arguments ``e`` uses as whole rows (not only to read a column of)."""
    t = type(e)
    if t is X.Arg:
        out.add(e.index)  # type: ignore[attr-defined]
        return out
    for i, c in enumerate(X.children(e)):
        if i == 0 and (t is X.Attr or t is X.Item) and type(c) is X.Arg:
            continue  # a column read
        _bare(c, out)
    return out


def _safe(e: X.Expr, rels: list[Relation]) -> bool:
    """Whether evaluating ``e`` cannot raise (or do anything else): a constant, a row, or a
    column of a row. Only such expressions are hoisted out of the probe loop, where the
    function would not have been called at all for a row without a join partner."""
    t = type(e)
    if t is X.Const or t is X.Arg:
        return True
    if t is X.Attr and type(e.obj) is X.Arg:  # type: ignore[attr-defined]
        return e.name in rels[e.obj.index].columns  # type: ignore[attr-defined]
    if t is X.Item and type(e.obj) is X.Arg and type(e.key) is X.Const:  # type: ignore[attr-defined]
        k = e.key.value  # type: ignore[attr-defined]
        return type(k) is int and -rels[e.obj.index].arity <= k < rels[e.obj.index].arity  # type: ignore[attr-defined]
    return False


def _prefilter(head: Relation | None, op: str) -> bool:
    """Whether candidates for ``head`` that cannot change it may be dropped before they reach
    it, being ones ``Relation.add_many`` would skip: for a same-tick rule into a collection
    without soft state (whose contents only grow within a tick) with every column a key, the
    rows stored already; keyed with one value column, a candidate whose ``lmin``/``lmax``
    value (any class with a raw order, ``relation.ORDER``) is not better than the stored
    one."""
    return (
        head is not None
        and op == "<="
        and head.ttl is None
        and (head.keyfn is None or head.arity - head.nkeys == 1)
    )


def _loop_src(
    d: int,
    nin: int,
    steps: list[tuple[int, str]],
    items: list[str],
    exprs: tuple[X.Expr, ...],
    gen: _Gen,
    nkeys: int | None,
    rels: list[Relation],
    conds: list[str],
    is_tuple: bool,
) -> str:
    """The generated ``run`` for driving input ``d`` (see ``fused_map``): rows of the inputs
    for which every source in ``conds`` (the ``filter`` predicates, in order) is true, mapped
    to ``items`` (a tuple display, or ``items[0]`` alone when not ``is_tuple``). ``nkeys`` is
    given when candidates are prefiltered against the head's store (two inputs at most).
    ``steps`` are the other inputs in join order, each with the source of its probe value:
    input ``steps[k][0]`` is probed with ``g<k>(probe, E)``."""
    gets = "".join(f"g{k}, " for k in range(len(steps)))
    head_line = f"def run(drows, {gets}hstore):"
    if nkeys is None or nkeys == len(exprs):
        # no filter, or (every column a key) the rows not stored yet
        if not is_tuple:
            row = items[0]
        else:
            row = f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        loops = f"for r{d} in drows"
        loops += "".join(f" for r{j} in g{k}({probe}, E)" for k, (j, probe) in enumerate(steps))
        loops += "".join(f" if {c}" for c in conds)
        if nkeys is None:
            return f"{head_line}\n    return [{row} {loops}]\n"
        return f"{head_line}\n    return [t {loops} if (t := {row}) not in hstore]\n"
    assert nin <= 2, "prefiltered loops join two inputs at most"
    o, probe = steps[0] if steps else (d, "")
    # Prefiltered, into a keyed head (keys..., value): a candidate is dropped when the value
    # stored under its key is an lmin (lmax) at least as good. ``c<i>`` holds item i.
    v = len(exprs) - 1
    vexpr = exprs[v]
    hoisted = {i for i, e in enumerate(exprs) if nin == 2 and _deps(e) <= {d} and _safe(e, rels)}
    # ``lmin + int`` with the lattice operand read from the driving row: compare raw values
    # and build the lattice value only for a candidate that survives
    raw = (
        type(vexpr) is X.BinOp
        and vexpr.op in ("+", "-")
        and nin == 2
        and _deps(vexpr.left) <= {d}
        and _safe(vexpr.left, rels)
    )
    hoisted.discard(v)
    key = "c0" if nkeys == 1 else "(" + ", ".join(f"c{i}" for i in range(nkeys)) + ")"
    row = "(" + ", ".join(f"c{i}" for i in range(len(exprs))) + ")"
    out = [head_line, "    hget = hstore.get", "    out = []", "    app = out.append"]
    out.append(f"    for r{d} in drows:")
    out += [f"        c{i} = {items[i]}" for i in sorted(hoisted)]

    def inner(ind: str, body: list[str]) -> list[str]:
        lines = []
        if nin == 2:
            lines.append(f"{ind}for r{o} in g0({probe}, E):")
            ind += "    "
        for c in conds:
            lines += [f"{ind}if not {c}:", f"{ind}    continue"]
        lines += [f"{ind}c{i} = {items[i]}" for i in range(v) if i not in hoisted]
        lines += [ind + b for b in body]
        lines.append(f"{ind}app({row})")
        return lines

    generic = [
        f"c{v} = {items[v]}",
        f"old = hget({key})",
        "if old is not None:",
        "    a = old[-1]",
        f"    if a is c{v}:",
        "        continue",
        "    ta = type(a)",
        "    o = ORD[ta]",
        f"    if o and type(c{v}) is ta:",
        "        try:",
        f"            if (a._v <= c{v}._v) if o < 0 else (a._v >= c{v}._v):",
        "                continue",
        "        except TypeError:",
        "            pass",
    ]
    if not raw:
        out += inner("        ", generic)
    else:
        assert type(vexpr) is X.BinOp
        op = vexpr.op
        out += [
            f"        x = {gen.src(vexpr.left)}",
            "        tx = type(x)",
            "        ox = ORD[tx]",
            "        xr = x._v if ox and type(x._v) is int else None",
            "        if xr is None:",
        ]
        out += inner("            ", generic)
        for test, cmp in (("ox < 0", "<="), ("ox > 0", ">=")):
            out.append(f"        elif {test}:")
            out += inner(
                "            ",
                [
                    f"y = {gen.src(vexpr.right)}",
                    "if type(y) is int:",
                    f"    old = hget({key})",
                    "    if old is not None:",
                    "        a = old[-1]",
                    "        if type(a) is tx:",
                    "            try:",
                    f"                if a._v {cmp} xr {op} y:",
                    "                    continue",
                    "            except TypeError:",
                    "                pass",
                    f"c{v} = x {op} y",
                ],
            )
    out.append("    return out")
    return "\n".join(out) + "\n"


def _plan(
    d: int, preds: tuple[N.Pred, ...], n: int
) -> list[tuple[int, list[tuple[int, int]], tuple[int, ...]]] | None:
    """The join order from driving input ``d``, as ``JoinEval`` plans it: each step is (input
    ``j``, [(bound input, its column)], ``j``'s columns), probing ``j``'s index on every
    predicate that links it to an input bound before it; ``None`` when some input has no such
    predicate (a cross product)."""
    order = [d]
    steps = []
    remaining = [j for j in range(n) if j != d]
    while remaining:
        for j in remaining:
            probes, cols = [], []
            for p in preds:
                if p.left == j and p.right in order:
                    probes.append((p.right, p.rcol))
                    cols.append(p.lcol)
                elif p.right == j and p.left in order:
                    probes.append((p.left, p.lcol))
                    cols.append(p.rcol)
            if probes:
                steps.append((j, probes, tuple(cols)))
                order.append(j)
                remaining.remove(j)
                break
        else:
            return None
    return steps


def fused_map(node: N.Node, rt: Any, head: Relation | None, op: str = "<=") -> FusedMapEval | None:
    """A generated evaluator for ``node`` (a rule body ``head op node``), or ``None`` when it
    does not have a supported shape: ``map`` of a known expression over a scan, or over an
    inner join of scans (two or more) where every input is linked to the others by equality
    predicates, with any number of ``filter``s of known predicates in between."""
    if type(node) is not N.Map:
        return None
    expr = node.expr
    if expr is None:
        return None
    inp = node.input
    filters: list[X.Expr] = []
    while type(inp) is N.Filter:
        pred = inp.expr
        if pred is None:
            return None
        filters.append(pred)
        inp = inp.input
    filters.reverse()  # innermost first: the order they are applied in
    if type(inp) is N.Scan:
        scans = [inp]
        preds: tuple[N.Pred, ...] = ()
    elif (
        type(inp) is N.Join
        and inp.how == "inner"
        and all(type(i) is N.Scan for i in inp.inputs)
        and inp.preds
    ):
        scans = list(inp.inputs)  # type: ignore[arg-type]
        preds = inp.preds
    else:
        return None
    plans = [_plan(d, preds, len(scans)) for d in range(len(scans))]
    if any(plan is None for plan in plans):
        return None  # a cross product between some inputs: not generated
    rels = [rt.rels[s.name] for s in scans]  # type: ignore[attr-defined]
    gen = _Gen(rels)
    is_tuple = type(expr) is X.TupleExpr
    exprs: tuple[X.Expr, ...] = expr.items if is_tuple else (expr,)  # type: ignore[attr-defined]
    srcs = [gen.src(e) for e in (*filters, *exprs)]
    found = [s for s in srcs if s is not None]
    if len(found) != len(srcs):
        return None
    conds, items = found[: len(filters)], found[len(filters) :]
    fits = is_tuple and head is not None and len(items) == head.arity
    nkeys = head.nkeys if fits and _prefilter(head, op) else None  # type: ignore[union-attr]
    if len(scans) > 2 and nkeys != len(items):
        nkeys = None  # the value prefilter is generated for two inputs at most
    name = f"{node!r}"
    runs, cols = [], []
    for d, plan in enumerate(plans):
        steps = []
        for j, probes, _ in plan:  # type: ignore[union-attr]
            bound = [f"r{i}[{c}]" for i, c in probes]
            steps.append((j, bound[0] if len(bound) == 1 else f"({', '.join(bound)})"))
        src = _loop_src(d, len(scans), steps, items, exprs, gen, nkeys, rels, conds, is_tuple)
        runs.append(_compile(src, name, tuple(gen.consts)))
        cols.append([(j, theirs) for j, _, theirs in plan])  # type: ignore[union-attr]
    fresh = nkeys == len(items) and all(_key_safe(e, rels) for e in exprs)
    ev = FusedMapEval([ScanEval(r) for r in rels], runs, cols, fresh, head)
    bare: set[int] = set()
    for e in (*filters, expr):
        _bare(e, bare)
    ev.exposed = {rels[i].name for i in bare}
    return ev
