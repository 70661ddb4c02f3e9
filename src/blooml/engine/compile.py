"""Compile IR nodes to evaluators: one function per node type (the Ibis model).

``compile_node`` walks a rule body once, when a program instance is created, and returns a
tree of evaluator objects bound to that instance's relations and lattice variables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blooml.engine._agg_eval import ArgAggEval, ChooseEval, GroupEval, ReduceEval
from blooml.engine._lat_eval import (
    EmptyEval,
    IncludeEval,
    LatConstEval,
    LatEval,
    LatMethodEval,
    LatRowsEval,
    LatVarEval,
    TickEval,
)
from blooml.engine._rel_eval import (
    Eval,
    FilterEval,
    FlatMapEval,
    JoinEval,
    LiteralEval,
    MapEval,
    NotInEval,
    ScanEval,
)
from blooml.ir import nodes as N

__all__ = ["compile_node", "flatten_rows"]


def flatten_rows(*rows: Any) -> tuple[Any, ...]:
    """A bare join as a rule body: concatenate the joined rows (a missing side adds nothing)."""
    return tuple(c for r in rows if r is not None for c in r)


def compile_node(node: N.Node, rt: Any, raw: bool = False) -> Any:
    """Return the evaluator of ``node`` for runtime ``rt``.

    ``raw``: the results go straight into a head (which normalises ``map`` results itself).
    """
    fn = _COMPILERS.get(type(node))
    if fn is None:  # pragma: no cover - every node type is registered
        raise TypeError(f"no evaluator for IR node {type(node).__name__}")
    return fn(node, rt, raw)


def _scan(node: N.Scan, rt: Any, raw: bool) -> Eval:
    return ScanEval(rt.rels[node.name])


def _literal(node: N.Literal, rt: Any, raw: bool) -> Eval:
    cells = {}
    for i, row in enumerate(node.rows):
        for j, c in enumerate(row):
            if isinstance(c, N.Node):
                cells[(i, j)] = compile_node(c, rt)
    return LiteralEval(node.rows, cells)


def _map(node: N.Map, rt: Any, raw: bool) -> Eval:
    return MapEval(compile_node(node.input, rt), node.fn, raw)


def _filter(node: N.Filter, rt: Any, raw: bool) -> Eval:
    return FilterEval(compile_node(node.input, rt), node.fn)


def _flat_map(node: N.FlatMap, rt: Any, raw: bool) -> Eval:
    return FlatMapEval(compile_node(node.input, rt), node.fn)


def _join(node: N.Join, rt: Any, raw: bool) -> Eval:
    ev = JoinEval([compile_node(i, rt) for i in node.inputs], node.preds, node.how)
    if raw:
        return MapEval(ev, flatten_rows, raw)
    return ev


def _notin(node: N.NotIn, rt: Any, raw: bool) -> Eval:
    left = _row_eval(node.left, rt)
    return NotInEval(left, _row_eval(node.right, rt), node.preds, node.fn)


def _row_eval(node: N.Node, rt: Any) -> Eval:
    ev: Eval = compile_node(node, rt)
    if ev.width > 1:  # a join used as a row source: concatenate its rows
        return MapEval(ev, flatten_rows)
    return ev


def _group(node: N.Group, rt: Any, raw: bool) -> Eval:
    return GroupEval(compile_node(node.input, rt), node.keys, node.aggs)


def _argagg(node: N.ArgAgg, rt: Any, raw: bool) -> Eval:
    return ArgAggEval(compile_node(node.input, rt), node.how, node.keys, node.col)


def _reduce(node: N.Reduce, rt: Any, raw: bool) -> Eval:
    return ReduceEval(compile_node(node.input, rt), node.init, node.fn)


def _choose(node: N.Choose, rt: Any, raw: bool) -> Eval:
    return ChooseEval(compile_node(node.input, rt), node.keys, node.seed)


def _latrows(node: N.LatRows, rt: Any, raw: bool) -> Eval:
    return LatRowsEval(compile_node(node.lat, rt))


def _latvar(node: N.LatVar, rt: Any, raw: bool) -> LatEval:
    return LatVarEval(rt.lats[node.name])


def _latconst(node: N.LatConst, rt: Any, raw: bool) -> LatEval:
    return LatConstEval(node.value)


def _tick(node: N.TickCount, rt: Any, raw: bool) -> LatEval:
    return TickEval(rt)


def _latmethod(node: N.LatMethod, rt: Any, raw: bool) -> LatEval:
    args = [compile_node(a, rt) if isinstance(a, N.Node) else a for a in node.args]
    return LatMethodEval(compile_node(node.target, rt), node.name, args, node.kind)


def _include(node: N.Include, rt: Any, raw: bool) -> LatEval:
    return IncludeEval(_row_eval(node.input, rt), node.row)


def _empty(node: N.Empty, rt: Any, raw: bool) -> LatEval:
    return EmptyEval(compile_node(node.input, rt))


_COMPILERS: dict[type, Callable[[Any, Any, bool], Any]] = {
    N.Scan: _scan,
    N.Literal: _literal,
    N.Map: _map,
    N.Filter: _filter,
    N.FlatMap: _flat_map,
    N.Join: _join,
    N.NotIn: _notin,
    N.Group: _group,
    N.ArgAgg: _argagg,
    N.Reduce: _reduce,
    N.Choose: _choose,
    N.LatRows: _latrows,
    N.LatVar: _latvar,
    N.LatConst: _latconst,
    N.TickCount: _tick,
    N.LatMethod: _latmethod,
    N.Include: _include,
    N.Empty: _empty,
}
