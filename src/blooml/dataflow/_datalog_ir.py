"""Datalog compiled to the rule IR, so that the engine's stratifier and incremental core run it.

Every input (EDB) relation becomes a ``table`` whose columns are all key columns (a set of
facts); every derived (IDB) relation a ``scratch`` (a view the engine maintains: derivation
counts, and delete-and-re-derive for recursive ones). Each rule becomes one or more IR rules:

* the positive atoms are one scan, or an inner equi-join of scans whose predicates are the
  variables the atoms share (``Join``);
* constants and variables repeated inside an atom, and ``where(...)`` filters, are
  ``Filter`` nodes over the joined rows;
* the head is a ``Map`` of column reads and constants.

Filters and heads are generated as small lambdas reading rows by position
(``lambda r0, r1: (r0[0], r1[1])``), which :func:`blooml.ir.exprs.decompile` recovers: the
engine runs them as its generated loops, and a recursive view keeps the delete-and-re-derive
path (a rule run as Python is re-derived in full on deletions). A ``where`` function is
recovered the same way when it is a simple expression of its variables; otherwise it is
called as written.

A rule with negated atoms first derives its bindings (one column per variable) into a private
scratch named ``_dl<rule>_b0``; each negated atom is an anti-join (``NotIn``) from one such
scratch to the next, and the head is a ``Map`` of the last. Those scratches are internal: they
appear in :attr:`DatalogView.ir` and in memory reports, never among the program's relations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from blooml.dataflow.datalog import Atom, Condition, Datalog, Var, _Anon
from blooml.dataflow.datalog import Rule as DRule
from blooml.ir import exprs as X
from blooml.ir import nodes as N
from blooml.ir.graph import analyze
from blooml.ir.program import CollectionInfo, ProgramIR, Rule

__all__ = ["FILE", "compile_program"]

#: The ``file`` of the IR rules compiled from Datalog (``rule.where`` reads ``datalog:<n>``,
#: ``n`` counting the program's rules from 1).
FILE = "datalog"


def _cols(arity: int) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in range(arity))


def _lam(nargs: int, body: str, env: dict[str, Any] | None = None) -> Callable[..., Any]:
    """``lambda r0, ..., r{n-1}: <body>`` compiled from source (so its bytecode is what
    :func:`~blooml.ir.exprs.decompile` recovers when ``env`` is empty)."""
    params = ", ".join(f"r{i}" for i in range(nargs))
    src = f"lambda {params}: {body}"
    if env:  # values the source cannot spell: bound in a closure (called as written)
        names = ", ".join(env)
        maker = eval(f"lambda {names}: {src}", {"__builtins__": {}})
        fn: Callable[..., Any] = maker(*env.values())
        return fn
    out: Callable[..., Any] = eval(src, {"__builtins__": {}})
    return out


class _Consts:
    """Spells constants in generated source: literals where the expression reader accepts
    them (ints, strings, ...), else names bound in a closure."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = {}

    def __call__(self, value: Any) -> str:
        if X.const_ok(value) and _literal(value):
            return repr(value)
        name = f"k{len(self.env)}"
        self.env[name] = value
        return name


def _literal(v: Any) -> bool:
    """Whether ``repr(v)`` reads back as ``v`` (not ``nan``/``inf``)."""
    if type(v) is tuple:
        return all(_literal(x) for x in v)
    if type(v) in (float, complex):
        return v == v and repr(v) not in ("inf", "-inf") and "inf" not in repr(v)
    return True


def _tuple_src(items: list[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def _substitute(expr: X.Expr, reads: list[tuple[int, int]]) -> X.Expr | None:
    """``expr`` (a ``where`` function's body, over its arguments) with argument ``i`` replaced
    by the column read ``reads[i]``; ``None`` when it calls anything."""
    t = type(expr)
    if t is X.Arg:
        j, col = reads[expr.index]  # type: ignore[attr-defined]
        return X.Item(X.Arg(j, f"r{j}"), X.Const(col))
    if t in (X.LatNew, X.Method):
        return None
    if t is X.Const:
        return expr
    changes: dict[str, Any] = {}
    for f in attrs.fields(t):  # type: ignore[arg-type]
        v = getattr(expr, f.name)
        if isinstance(v, X.Expr):
            nv = _substitute(v, reads)
            if nv is None:
                return None
            changes[f.name] = nv
        elif type(v) is tuple and v and isinstance(v[0], X.Expr):
            items = [_substitute(i, reads) for i in v]
            if any(i is None for i in items):
                return None
            changes[f.name] = tuple(items)
    return attrs.evolve(expr, **changes)  # type: ignore[misc]


class _RuleCompiler:
    """One Datalog rule to IR rules (see the module docstring)."""

    def __init__(self, k: int, rule: DRule, out: _Out) -> None:
        self.k = k
        self.rule = rule
        self.out = out
        pos = rule.positives()
        self.pos = pos
        self.n = len(pos)
        #: each variable's first place: (input, column)
        self.slot: dict[Var, tuple[int, int]] = {}
        preds: list[N.Pred] = []
        self.checks: list[tuple[str, dict[str, Any]]] = []
        consts = _Consts()
        eqs: list[str] = []
        for j, atom in enumerate(pos):
            for c, a in enumerate(atom.args):
                here = f"r{j}[{c}]"
                if not isinstance(a, Var):
                    eqs.append(f"{here} == {consts(a)}")
                    continue
                first = self.slot.get(a)
                if first is None:
                    self.slot[a] = (j, c)
                elif first[0] == j:
                    eqs.append(f"{self.read(a)} == {here}")
                else:
                    preds.append(N.Pred(first[0], first[1], j, c))
        for e in eqs:
            self.checks.append((e, consts.env))
        scans = [N.Scan(a.relation.name, _cols(a.relation.arity)) for a in pos]
        self.body: N.Rel = scans[0] if self.n == 1 else N.Join(tuple(scans), tuple(_dedupe(preds)))

    def read(self, v: Var) -> str:
        j, c = self.slot[v]
        return f"r{j}[{c}]"

    def condition(self, cond: Condition) -> Callable[..., Any]:
        """A ``where`` filter over the joined rows: the user's expression with its arguments
        replaced by column reads when it is simple, else a call of the function."""
        expr = X.decompile(cond.fn)
        if expr is not None and not X.called_classes(expr):
            reads = [self.slot[v] for v in cond.vars]
            sub = _substitute(expr, reads)
            if sub is not None:
                return _lam(self.n, X.to_source(sub))
        args = ", ".join(self.read(v) for v in cond.vars)
        fn = _lam(self.n, f"bool(fn({args}))", {"fn": cond.fn, "bool": bool})
        fn.__name__ = f"where[{N._fn_name(cond.fn)}]"  # as the IR prints it
        return fn

    def compile(self) -> None:
        body = self.body
        for src, env in self.checks:
            body = N.Filter(body, _lam(self.n, src, env))
        negs: list[Atom] = []
        for b in self.rule.body:
            if isinstance(b, Condition):
                body = N.Filter(body, self.condition(b))
            elif b.negated:
                negs.append(b)
        head = self.rule.head
        name = head.relation.name
        if not negs:
            if body is self.body and self.n == 1 and _copies(head, self.pos[0]):
                self.out.rule(name, body)  # ``h(X, Y) :- e(X, Y)``: the scan itself
                return
            consts = _Consts()
            items = [self.read(a) if isinstance(a, Var) else consts(a) for a in head.args]
            self.out.rule(name, N.Map(body, _lam(self.n, _tuple_src(items), consts.env)))
            return
        # bindings, one column per variable, then one anti-join per negated atom
        schema = list(self.slot)
        cur = self.out.scratch(f"_dl{self.k}_b0", len(schema))
        row = _tuple_src([self.read(v) for v in schema])
        self.out.rule(cur, N.Map(body, _lam(self.n, row)))
        for i, atom in enumerate(negs):
            left = N.Scan(cur, _cols(len(schema)))
            right = N.Scan(atom.relation.name, _cols(atom.relation.arity))
            preds: list[N.Pred] = []
            seen: dict[Var, int] = {}
            extra: list[str] = []
            consts = _Consts()
            for c, a in enumerate(atom.args):
                if isinstance(a, _Anon):
                    continue  # existential: any value (``~edge(X, _)``: no edge from X)
                if not isinstance(a, Var):
                    extra.append(f"r1[{c}] == {consts(a)}")
                elif a in seen:
                    extra.append(f"r1[{seen[a]}] == r1[{c}]")
                else:
                    seen[a] = c
                    preds.append(N.Pred(0, schema.index(a), 1, c))
            fn = None
            if extra or not preds:
                fn = _lam(2, " and ".join(extra) if extra else "True", consts.env)
            node = N.NotIn(left, right, tuple(preds), fn)
            if i == len(negs) - 1:
                consts = _Consts()
                items = [
                    f"r0[{schema.index(a)}]" if isinstance(a, Var) else consts(a) for a in head.args
                ]
                self.out.rule(name, N.Map(node, _lam(1, _tuple_src(items), consts.env)))
            else:
                cur = self.out.scratch(f"_dl{self.k}_b{i + 1}", len(schema))
                self.out.rule(cur, node)


def _copies(head: Atom, atom: Atom) -> bool:
    """Whether ``head`` is ``atom``'s row as it is: the same distinct variables in order."""
    args = atom.args
    return (
        head.args == args and all(isinstance(a, Var) for a in args) and len(set(args)) == len(args)
    )


def _dedupe(preds: list[N.Pred]) -> list[N.Pred]:
    out: list[N.Pred] = []
    for p in preds:
        if p not in out:
            out.append(p)
    return out


class _Out:
    """The collections and rules of the IR being built."""

    def __init__(self) -> None:
        self.collections: dict[str, CollectionInfo] = {}
        self.rules: list[Rule] = []
        self.k = 0

    def scratch(self, name: str, arity: int) -> str:
        """Declare a private scratch named ``name`` (with ``_`` added until the name is
        free); returns the name."""
        while name in self.collections:
            name += "_"
        self.collections[name] = CollectionInfo(name, "scratch", _cols(arity))
        return name

    def rule(self, head: str, body: N.Node) -> None:
        self.rules.append(Rule(len(self.rules), head, "<=", body, "datalog", FILE, self.k + 1))


def compile_program(program: Datalog, name: str = "Datalog") -> ProgramIR:
    """The rule IR of ``program``: inputs as tables, derived relations as scratches (see the
    module docstring). The program must be stratifiable (``program.strata()`` checks)."""
    out = _Out()
    inputs = set(program.inputs())
    for rel_name, rel in program.relations.items():
        kind = "table" if rel_name in inputs else "scratch"
        out.collections[rel_name] = CollectionInfo(rel_name, kind, _cols(rel.arity))
    for k, rule in enumerate(program.rules):
        out.k = k
        _RuleCompiler(k, rule, out).compile()
    return analyze(name, out.collections, {}, tuple(out.rules))
