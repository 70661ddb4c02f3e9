"""Datalog: recursive rules with stratified negation, maintained under inserts and deletes.

Build a program with :class:`Datalog` (relations, variables, rules), then
:meth:`Datalog.compile` it to a :class:`DatalogView` and feed it insertions and deletions of
input facts; every derived relation is kept up to date incrementally::

    p = Datalog()
    edge, path = p.relation("edge", 2), p.relation("path", 2)
    X, Y, Z = p.vars("X Y Z")
    p.rule(path(X, Y), edge(X, Y))
    p.rule(path(X, Z), path(X, Y), edge(Y, Z))
    view = p.compile()
    view.update(insert={"edge": [(1, 2), (2, 3)]})   # {'path': ZSet({(1, 2): 1, ...})}
    view.update(delete={"edge": [(1, 2)]})           # the paths through (1, 2) retracted

Supported: positive atoms (joins on shared variables, constants, repeated variables),
negated atoms (``~rel(X, Y)``, stratified), filters (``where(fn, X, Y)``) and projections (a
head uses any subset of the body's variables, and constants). A program compiles to the rule
IR (:meth:`Datalog.to_ir`) and runs on the engine's stratifier and incremental core;
:meth:`Datalog.to_circuit` compiles it as a PomoFlow circuit instead, to draw or step by hand.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from blooml.dataflow.errors import (
    DatalogError,
    UnhashableElementError,
    _DatalogStratificationError,
)
from blooml.ir.graph import components
from blooml.lattices._base import Lattice

if TYPE_CHECKING:
    from blooml.dataflow.circuit import Circuit
    from blooml.dataflow.datalog_view import DatalogView
    from blooml.ir.program import ProgramIR

__all__ = ["Atom", "Condition", "Datalog", "Relation", "Rule", "Var", "where"]

_fresh = itertools.count()


class Var:
    """A logic variable, named for error messages (``Var("X")``). ``Var("_")`` is anonymous."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise DatalogError(f"a variable name must be a non-empty string, got {name!r}")
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Var) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Var", self.name))

    def __repr__(self) -> str:
        return self.name


class _Anon(Var):
    """One use of the anonymous variable ``_``: a fresh variable that matches anything. In a
    negated atom it is existential: ``~edge(X, _)`` holds when ``X`` has no edge at all."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "_"


class Atom:
    """``relation(args...)`` in a rule; ``~atom`` negates it (only in a rule body)."""

    __slots__ = ("args", "negated", "relation")

    def __init__(self, relation: Relation, args: tuple[Any, ...], negated: bool = False) -> None:
        self.relation = relation
        self.args = args
        self.negated = negated

    def __invert__(self) -> Atom:
        return Atom(self.relation, self.args, not self.negated)

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self!r} is a Datalog atom, not a truth value: pass it to Datalog.rule(head, ...)"
        )

    def vars(self) -> list[Var]:
        """The distinct variables of the atom, in order of first occurrence."""
        out: list[Var] = []
        for a in self.args:
            if isinstance(a, Var) and a not in out:
                out.append(a)
        return out

    def __repr__(self) -> str:
        inner = ", ".join(repr(a) for a in self.args)
        return f"{'not ' if self.negated else ''}{self.relation.name}({inner})"


class Condition:
    """A filter in a rule body: ``fn(*values of vars)`` must be true (see :func:`where`)."""

    __slots__ = ("fn", "vars")

    def __init__(self, fn: Callable[..., object], vars: tuple[Var, ...]) -> None:
        self.fn = fn
        self.vars = vars

    def __repr__(self) -> str:
        name = getattr(self.fn, "__name__", "fn")
        return f"where({name}, {', '.join(map(repr, self.vars))})"


def where(fn: Callable[..., object], *vars: Var) -> Condition:
    """A rule-body filter: keep the bindings for which ``fn(*values)`` is true.

    Example: ``p.rule(lt(X, Y), edge(X, Y), where(lambda x, y: x < y, X, Y))``.
    """
    if not callable(fn):
        raise DatalogError(f"where() needs a function first, got {fn!r}")
    for v in vars:
        if not isinstance(v, Var):
            raise DatalogError(f"where() takes variables after the function, got {v!r}")
    return Condition(fn, vars)


class Relation:
    """A named relation of fixed arity; calling it makes an :class:`Atom`."""

    __slots__ = ("arity", "name", "program")

    def __init__(self, program: Datalog, name: str, arity: int) -> None:
        self.program = program
        self.name = name
        self.arity = arity

    def __call__(self, *args: Any) -> Atom:
        if len(args) != self.arity:
            raise DatalogError(
                f"relation {self.name!r} has arity {self.arity}, got {len(args)} arguments {args!r}"
            )
        for a in args:
            if not isinstance(a, Var):
                try:
                    hash(a)
                except TypeError:
                    raise UnhashableElementError(a, f"{self.name}(...) constant") from None
        return Atom(self, tuple(args))

    def __repr__(self) -> str:
        return f"Relation({self.name!r}, arity={self.arity})"


class Rule:
    """``head :- body``: a head atom and body atoms/conditions (see :meth:`Datalog.rule`)."""

    __slots__ = ("body", "head")

    def __init__(self, head: Atom, body: tuple[Atom | Condition, ...]) -> None:
        self.head = head
        self.body = body

    def positives(self) -> list[Atom]:
        """The positive body atoms."""
        return [b for b in self.body if isinstance(b, Atom) and not b.negated]

    def __repr__(self) -> str:
        return f"{self.head!r} :- {', '.join(map(repr, self.body))}."


class Datalog:
    """A Datalog program: relations, variables and rules, compiled by :meth:`compile`.

    Relations that appear in no rule head are the *inputs* (EDB); the others are derived.
    Derived relations have set semantics.
    """

    def __init__(self) -> None:
        self._relations: dict[str, Relation] = {}
        self._rules: list[Rule] = []

    # -- declaring --

    def relation(self, name: str, arity: int) -> Relation:
        """Declare (or fetch, with the same arity) the relation ``name``."""
        if not isinstance(name, str) or not name:
            raise DatalogError(f"a relation name must be a non-empty string, got {name!r}")
        if type(arity) is not int or arity < 0:
            raise DatalogError(f"relation {name!r}: arity must be an int >= 0, got {arity!r}")
        got = self._relations.get(name)
        if got is not None:
            if got.arity != arity:
                raise DatalogError(
                    f"relation {name!r} was declared with arity {got.arity}, now {arity}"
                )
            return got
        rel = self._relations[name] = Relation(self, name, arity)
        return rel

    @staticmethod
    def vars(names: str) -> tuple[Var, ...]:
        """Variables from a space-separated string: ``X, Y = Datalog.vars("X Y")``."""
        return tuple(Var(n) for n in names.split())

    def rule(self, head: Atom, *body: Atom | Condition) -> Rule:
        """Add ``head :- body``; check it is well formed and safe.

        Raises:
            DatalogError: a foreign relation, a negated head, no positive body atom, or a
                variable of the head, of a negated atom or of a condition that no positive
                body atom binds.
        """
        if not isinstance(head, Atom):
            raise DatalogError(f"a rule head must be an atom like rel(X, Y), got {head!r}")
        if head.negated:
            raise DatalogError("a rule head cannot be negated", repr(head))
        for item in (head, *body):
            if isinstance(item, Atom):
                if item.relation.program is not self:
                    raise DatalogError(
                        f"relation {item.relation.name!r} belongs to another program",
                        repr(head),
                    )
            elif not isinstance(item, Condition):
                raise DatalogError(
                    f"a rule body holds atoms, ~atoms and where(...) filters, got {item!r}",
                    repr(head),
                )
        body = tuple(self._rename_anonymous(b) for b in body)
        rule = Rule(head, body)
        text = repr(rule)
        pos = rule.positives()
        if not pos:
            raise DatalogError("a rule needs at least one positive body atom", text)
        bound = {v for a in pos for v in a.vars()}
        for v in head.vars():
            if v.name == "_":
                raise DatalogError("the anonymous variable _ cannot appear in a head", text)
            if v not in bound:
                raise DatalogError(f"head variable {v!r} is not bound by a positive atom", text)
        for b in body:
            vs = b.vars if isinstance(b, Condition) else b.vars()
            if isinstance(b, Condition) or b.negated:
                for v in vs:
                    if v not in bound and not isinstance(v, _Anon):
                        raise DatalogError(
                            f"variable {v!r} of {b!r} is not bound by a positive atom", text
                        )
        self._rules.append(rule)
        return rule

    @staticmethod
    def _rename_anonymous(b: Atom | Condition) -> Atom | Condition:
        if isinstance(b, Atom) and any(isinstance(a, Var) and a.name == "_" for a in b.args):
            args = tuple(
                _Anon(f"_{next(_fresh)}") if isinstance(a, Var) and a.name == "_" else a
                for a in b.args
            )
            return Atom(b.relation, args, b.negated)
        return b

    # -- structure --

    @property
    def relations(self) -> dict[str, Relation]:
        """Every declared relation, by name."""
        return dict(self._relations)

    @property
    def rules(self) -> list[Rule]:
        """The rules, in the order they were added."""
        return list(self._rules)

    def inputs(self) -> list[str]:
        """The input (EDB) relations: those in no rule head."""
        heads = {r.head.relation.name for r in self._rules}
        return [n for n in self._relations if n not in heads]

    def derived(self) -> list[str]:
        """The derived (IDB) relations."""
        heads = {r.head.relation.name for r in self._rules}
        return [n for n in self._relations if n in heads]

    def strata(self) -> list[list[str]]:
        """The derived relations grouped into strata, in evaluation order.

        Each stratum is a strongly connected set of mutually recursive relations.

        Raises:
            StratificationError: a negated atom refers to its own recursive stratum.
        """
        derived = self.derived()
        edges: dict[str, set[str]] = {n: set() for n in derived}
        negative: set[tuple[str, str]] = set()
        for r in self._rules:
            h = r.head.relation.name
            for b in r.body:
                if isinstance(b, Atom) and b.relation.name in edges:
                    edges[b.relation.name].add(h)
                    if b.negated:
                        negative.add((b.relation.name, h))
        sccs = components(sorted(derived), edges)  # the engine stratifier's decomposition
        comp = {n: i for i, scc in enumerate(sccs) for n in scc}
        for src, dst in sorted(negative):
            if comp[src] == comp[dst]:
                cycle = _path(edges, dst, src, sccs[comp[src]])
                raise _DatalogStratificationError(cycle, (src, dst))
        return [sorted(s) for s in sccs]

    def _recursive(self, stratum: list[str]) -> bool:
        names = set(stratum)
        return any(
            r.head.relation.name in names
            and any(isinstance(b, Atom) and b.relation.name in names for b in r.body)
            for r in self._rules
        )

    # -- running --

    def compile(self) -> DatalogView:
        """Compile the program for the engine's incremental core; returns its
        :class:`DatalogView`, empty, to be fed with ``update``.

        Raises:
            StratificationError: a negated atom refers to its own recursive stratum.
        """
        from blooml.dataflow.datalog_view import DatalogView

        return DatalogView(self)

    def to_ir(self) -> ProgramIR:
        """The rule IR this program compiles to (what :meth:`compile` and :meth:`evaluate`
        run): input relations as tables, derived ones as scratch views, each rule as a scan
        or join of its positive atoms with filters and a head ``map``, negations as
        anti-joins. ``print(p.to_ir())`` shows it with its strata.

        Raises:
            StratificationError: a negated atom refers to its own recursive stratum.
        """
        from blooml.dataflow._datalog_ir import compile_program

        self.strata()
        return compile_program(self)

    def to_circuit(self) -> Circuit:
        """The program compiled as a PomoFlow :class:`~blooml.dataflow.Circuit` of this
        package's operators (incremental joins and distincts, a child circuit per recursive
        stratum), as the DBSP paper compiles Datalog: to draw (``.dot()``) or to step by hand
        (``circuit.step({"edge": ZSet(...)})`` returns the derived relations' changes). The
        view :meth:`compile` returns runs on the engine instead.

        Raises:
            StratificationError: a negated atom refers to its own recursive stratum.
        """
        from blooml.dataflow._datalog_circuit import compile_circuit

        return compile_circuit(self)

    def evaluate(self, facts: Mapping[str, Iterable[tuple[Any, ...]]]) -> dict[str, set[Any]]:
        """Evaluate from scratch: one tick of the engine's bulk (semi-naive) evaluation over
        ``facts``, with no incremental state kept. Returns every relation's set of tuples.
        Useful as a reference and as the baseline of the incremental view.

        Raises:
            DatalogError: a name that is not an input relation, or a malformed fact.
            StratificationError: a negated atom refers to its own recursive stratum.
        """
        inputs = self.inputs()
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for name, got in facts.items():
            rel = self._relations.get(name)
            if rel is None or name not in inputs:
                raise DatalogError(f"{name!r} is not an input relation of this program")
            rows[name] = [_fact(rel, r) for r in got]
        self.strata()
        from blooml.dataflow.datalog_view import new_runtime, stored_facts

        rt = new_runtime(self, incremental=False)
        for name, rs in rows.items():
            if rs:
                rt.pending.add("inserts", name, rs)
        rt.tick()
        return {n: stored_facts(rt, n) for n in self._relations}


def _fact(rel: Relation, row: Any) -> tuple[Any, ...]:
    if not isinstance(row, tuple):
        if isinstance(row, list):
            row = tuple(row)
        else:
            raise DatalogError(f"a fact of {rel.name!r} must be a tuple, got {row!r}")
    if len(row) != rel.arity:
        raise DatalogError(f"a fact of {rel.name!r} needs {rel.arity} values, got {row!r}")
    try:
        hash(row)
    except TypeError:
        raise UnhashableElementError(row, f"fact of {rel.name!r}") from None
    for i, v in enumerate(row):
        if isinstance(v, Lattice):
            raise DatalogError(
                f"a fact of {rel.name!r} holds the lattice value {v!r} at position {i}: "
                f"{row!r}; Datalog facts are plain values (a relation is a set of facts, "
                "every column a key; merge lattice values in a Bloom^L program instead)"
            )
    return row


def _path(edges: dict[str, set[str]], src: str, dst: str, allowed: list[str]) -> list[str]:
    """A shortest path src -> ... -> dst inside one component (for error messages)."""
    prev: dict[str, str | None] = {src: None}
    frontier = [src]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w in allowed and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    path = [dst]
    cur: str | None = dst
    while cur is not None and cur != src:
        cur = prev.get(cur)
        if cur is not None:
            path.append(cur)
    return [*path[::-1], dst] if src == dst else [*path[::-1], path[-1]]
