"""A :class:`~blooml.dataflow.datalog.Datalog` program drawn as a PomoFlow circuit.

:meth:`Datalog.to_circuit` compiles the rules the way the DBSP paper does: each rule body a
left-deep plan of incremental joins, the rules of a relation added and made a set with an
incremental distinct, a non-recursive stratum in the root circuit and a recursive one as a
child circuit with one feedback node per relation. It shows (``circuit.dot()``) and runs
(``circuit.step``) Datalog as circuits of this package's operators. The maintained view,
:class:`~blooml.dataflow.DatalogView`, does not use it: it runs on the engine's core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blooml.dataflow._datalog_plan import _getter, _Pattern, _Plan
from blooml.dataflow.circuit import Circuit, Node
from blooml.dataflow.datalog import Atom, Datalog, Rule
from blooml.dataflow.operators import Z1

__all__ = ["compile_circuit"]


class _Compiler:
    """Turns rules into nodes of one circuit scope, sharing indexes between rules."""

    def __init__(self, circuit: Circuit, streams: Callable[[str], Node]) -> None:
        self.c = circuit
        self.streams = streams
        self.memo: dict[Any, Node] = {}

    def matched(self, atom: Atom, pat: _Pattern) -> Node:
        key = ("match", pat.signature)
        got = self.memo.get(key)
        if got is None:
            got = self.streams(atom.relation.name)
            if not pat.trivial:
                got = self.c.filter(got, pat.matcher())
            self.memo[key] = got
        return got

    def indexed(self, atom: Atom, pat: _Pattern, positions: tuple[int, ...]) -> Node:
        key = ("index", pat.signature, positions)
        got = self.memo.get(key)
        if got is None:
            got = self.c.index_with(self.matched(atom, pat), _getter(positions))
            self.memo[key] = got
        return got

    def rule(self, rule: Rule) -> Node:
        plan = _Plan(rule)
        c = self.c
        pat = plan.first_pattern
        cur = self.matched(plan.first, pat)
        if plan.first_proj != tuple(range(plan.first.relation.arity)):
            cur = c.map(cur, _getter(plan.first_proj))
        for step in plan.steps:
            kind = step[0]
            if kind == "cond":
                _k, cond, ps = step
                fn = cond.fn

                def check(b: tuple[Any, ...], fn: Any = fn, ps: Any = ps) -> bool:
                    return bool(fn(*(b[p] for p in ps)))

                cur = c.filter(cur, check)
            elif kind == "join":
                _k, atom, apat, left, right, new = step
                lidx = c.index_with(cur, _getter(left))
                ridx = self.indexed(atom, apat, right)
                pick = _getter(new) if new else None

                def extend(k: Any, b: tuple[Any, ...], t: tuple[Any, ...], pick: Any = pick) -> Any:
                    return b + pick(t) if pick is not None else b

                cur = c.incremental_join(lidx, ridx, extend)
            else:  # neg: bindings - bindings semijoin (projection of the negated relation)
                _k, atom, apat, left, right = step
                key = ("neg", apat.signature, right)
                keys = self.memo.get(key)
                if keys is None:
                    proj = c.map(self.matched(atom, apat), _getter(right))
                    if len(right) != atom.relation.arity:  # projection may merge tuples
                        proj = c.incremental_distinct(proj)
                    keys = self.memo[key] = c.index_with(proj, _identity)
                lidx = c.index_with(cur, _getter(left))
                semi = c.incremental_join(lidx, keys, _keep_left)
                cur = c.minus(cur, semi)
        return c.map(cur, plan.head_fn())


def _identity(t: Any) -> Any:
    return t


def _keep_left(_k: Any, b: Any, _t: Any) -> Any:
    return b


def compile_circuit(program: Datalog) -> Circuit:
    """``program`` as a circuit: one source per input relation, one sink per derived one;
    ``circuit.step({input: ZSet of changes})`` returns the derived relations' changes."""
    strata = program.strata()
    c = Circuit("datalog")
    streams: dict[str, Node] = {n: c.source(n) for n in program.inputs()}
    by_head: dict[str, list[Rule]] = {}
    for r in program.rules:
        by_head.setdefault(r.head.relation.name, []).append(r)
    root = _Compiler(c, streams.__getitem__)
    for k, stratum in enumerate(strata):
        if not program._recursive(stratum):
            (name,) = stratum
            streams[name] = root.c.incremental_distinct(_union(c, root, by_head[name]))
            continue
        child = c.child(f"stratum {k}: {', '.join(stratum)}")
        local: dict[str, Node] = {}
        for name in stratum:
            local[name] = child.feedback(Z1(), label=f"{name} (previous iteration)")

        def stream(name: str, child: Circuit = child, local: dict[str, Node] = local) -> Node:
            got = local.get(name)
            if got is None:
                got = local[name] = child.import_(streams[name])
            return got

        comp = _Compiler(child, stream)
        exports = {}
        for name in stratum:
            new = child.incremental_distinct(_union(child, comp, by_head[name]))
            child.connect(local[name], new)
            exports[name] = child.export(new, name)
        streams.update(exports)
    for name in program.derived():
        c.sink(name, streams[name])
    return c


def _union(c: Circuit, comp: _Compiler, rules: list[Rule]) -> Node:
    out = comp.rule(rules[0])
    for r in rules[1:]:
        out = c.plus(out, comp.rule(r))
    return out
