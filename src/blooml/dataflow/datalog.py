"""Datalog on circuits: recursive rules compiled to an incremental PomoFlow circuit.

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
head uses any subset of the body's variables, and constants). Each stratum that is recursive
becomes a child circuit iterated to its fixed point at every update; the others are
incremental operators of the root circuit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from blooml.dataflow.circuit import Circuit, MemoryReport, Node
from blooml.dataflow.errors import DatalogError, StratificationError, UnhashableElementError
from blooml.dataflow.operators import Z1
from blooml.dataflow.zset import ZSet

__all__ = ["Atom", "Condition", "Datalog", "DatalogView", "Relation", "Rule", "Var", "where"]

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


# -- rule planning (shared by the circuit compiler and the from-scratch evaluator) ------------


class _Pattern:
    """How to match an atom against a tuple: constants, repeated variables, variable slots."""

    def __init__(self, atom: Atom) -> None:
        self.consts = tuple((i, a) for i, a in enumerate(atom.args) if not isinstance(a, Var))
        first: dict[Var, int] = {}
        eqs = []
        for i, a in enumerate(atom.args):
            if isinstance(a, Var):
                if a in first:
                    eqs.append((first[a], i))
                else:
                    first[a] = i
        self.eqs = tuple(eqs)
        self.slots = first  # var -> first position in the tuple
        self.trivial = not self.consts and not self.eqs
        self.signature = (atom.relation.name, self.consts, self.eqs)

    def matcher(self) -> Callable[[tuple[Any, ...]], bool]:
        consts, eqs = self.consts, self.eqs

        def match(t: tuple[Any, ...]) -> bool:
            for i, c in consts:
                if t[i] != c:
                    return False
            return all(t[i] == t[j] for i, j in eqs)

        match.__name__ = "match"
        return match


def _getter(positions: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    if len(positions) == 1:
        (p,) = positions

        def one(t: tuple[Any, ...]) -> tuple[Any, ...]:
            return (t[p],)

        return one
    if positions == tuple(range(len(positions))):
        n = len(positions)

        def prefix(t: tuple[Any, ...]) -> tuple[Any, ...]:
            return t[:n]

        return prefix

    def pick(t: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t[p] for p in positions)

    return pick


class _Plan:
    """A left-deep evaluation order for one rule body.

    ``steps`` holds ``("join", atom, pattern, left_key, right_key, new_positions)``,
    ``("cond", condition, positions)`` and ``("neg", atom, pattern, left_key, right_key)``;
    bindings are tuples of variable values in the order of ``schema``.
    """

    def __init__(self, rule: Rule) -> None:
        pos = rule.positives()
        first = pos[0]
        self.first = first
        self.first_pattern = _Pattern(first)
        schema: list[Var] = first.vars()
        self.first_proj = tuple(self.first_pattern.slots[v] for v in schema)
        waiting: list[Atom | Condition] = [
            b for b in rule.body if isinstance(b, Condition) or b.negated
        ]
        steps: list[tuple[Any, ...]] = []

        def flush() -> None:
            for b in list(waiting):
                vs = b.vars if isinstance(b, Condition) else b.vars()
                if all(v in schema for v in vs):
                    waiting.remove(b)
                    if isinstance(b, Condition):
                        steps.append(("cond", b, tuple(schema.index(v) for v in b.vars)))
                    else:
                        pat = _Pattern(b)
                        left = tuple(schema.index(v) for v in vs)
                        right = tuple(pat.slots[v] for v in vs)
                        steps.append(("neg", b, pat, left, right))

        flush()
        for atom in pos[1:]:
            pat = _Pattern(atom)
            vs = atom.vars()
            shared = [v for v in vs if v in schema]
            new = [v for v in vs if v not in schema]
            left = tuple(schema.index(v) for v in shared)
            right = tuple(pat.slots[v] for v in shared)
            steps.append(("join", atom, pat, left, right, tuple(pat.slots[v] for v in new)))
            schema.extend(new)
            flush()
        self.steps = steps
        self.schema = schema
        self.head = tuple(
            ("var", schema.index(a)) if isinstance(a, Var) else ("const", a) for a in rule.head.args
        )

    def head_fn(self) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
        spec = self.head
        if all(k == "var" for k, _ in spec):
            return _getter(tuple(p for _k, p in spec))  # type: ignore[misc]

        def head(b: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(b[p] if k == "var" else p for k, p in spec)

        return head


def _project_fn(positions: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    if positions == tuple(range(len(positions))):
        return lambda t: t if len(t) == len(positions) else t[: len(positions)]
    return _getter(positions)


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
                    if v not in bound:
                        raise DatalogError(
                            f"variable {v!r} of {b!r} is not bound by a positive atom", text
                        )
        self._rules.append(rule)
        return rule

    @staticmethod
    def _rename_anonymous(b: Atom | Condition) -> Atom | Condition:
        if isinstance(b, Atom) and any(isinstance(a, Var) and a.name == "_" for a in b.args):
            args = tuple(
                Var(f"_{next(_fresh)}") if isinstance(a, Var) and a.name == "_" else a
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
        derived = set(self.derived())
        edges: dict[str, set[str]] = {n: set() for n in derived}
        negative: set[tuple[str, str]] = set()
        for r in self._rules:
            h = r.head.relation.name
            for b in r.body:
                if isinstance(b, Atom) and b.relation.name in derived:
                    edges[b.relation.name].add(h)
                    if b.negated:
                        negative.add((b.relation.name, h))
        sccs = _tarjan(sorted(derived), edges)
        comp = {n: i for i, scc in enumerate(sccs) for n in scc}
        for src, dst in sorted(negative):
            if comp[src] == comp[dst]:
                raise StratificationError(_path(edges, dst, src, sccs[comp[src]]), (src, dst))
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
        """Compile the program into an incremental circuit; returns its :class:`DatalogView`."""
        return DatalogView(self)

    def evaluate(self, facts: Mapping[str, Iterable[tuple[Any, ...]]]) -> dict[str, set[Any]]:
        """Evaluate from scratch (semi-naive, plain Python sets), without a circuit.

        Returns every relation's set of tuples. Useful as a reference and as the baseline of
        the incremental view.
        """
        db: dict[str, set[tuple[Any, ...]]] = {n: set() for n in self._relations}
        for name, rows in facts.items():
            rel = self._relations.get(name)
            if rel is None or name not in self.inputs():
                raise DatalogError(f"{name!r} is not an input relation of this program")
            db[name] = {_fact(rel, r) for r in rows}
        for stratum in self.strata():
            _semi_naive(self, stratum, db)
        return db


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
    return row


def _tarjan(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components in topological order (sources first)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            out.append(scc)

    for n in nodes:
        if n not in index:
            visit(n)
    return out[::-1]


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


# -- from-scratch evaluation (reference and baseline) ----------------------------------------


def _eval_rule(plan: _Plan, db: Mapping[str, Any], first: Iterable[tuple[Any, ...]]) -> set[Any]:
    match = plan.first_pattern.matcher()
    proj = plan.first_proj
    bindings = [tuple(t[p] for p in proj) for t in first if match(t)]
    for step in plan.steps:
        if not bindings:
            return set()
        kind = step[0]
        if kind == "cond":
            _k, cond, ps = step
            bindings = [b for b in bindings if cond.fn(*(b[p] for p in ps))]
        elif kind == "join":
            _k, atom, pat, left, right, new = step
            index: dict[Any, list[tuple[Any, ...]]] = {}
            m = pat.matcher()
            for t in db[atom.relation.name]:
                if m(t):
                    index.setdefault(tuple(t[p] for p in right), []).append(
                        tuple(t[p] for p in new)
                    )
            bindings = [
                b + extra for b in bindings for extra in index.get(tuple(b[p] for p in left), ())
            ]
        else:  # neg
            _k, atom, pat, left, right = step
            m = pat.matcher()
            present = {tuple(t[p] for p in right) for t in db[atom.relation.name] if m(t)}
            bindings = [b for b in bindings if tuple(b[p] for p in left) not in present]
    head = plan.head_fn()
    return {head(b) for b in bindings}


def _semi_naive(program: Datalog, stratum: list[str], db: dict[str, set[Any]]) -> None:
    names = set(stratum)
    rules = [r for r in program.rules if r.head.relation.name in names]
    # Every rule is evaluated once in full; then only with a recursive atom bound to the delta.
    delta: dict[str, set[Any]] = {n: set() for n in stratum}
    for r in rules:
        plan = _Plan(r)
        new = _eval_rule(plan, db, db[plan.first.relation.name]) - db[r.head.relation.name]
        delta[r.head.relation.name] |= new
    for n in stratum:
        db[n] |= delta[n]
    variants = []
    for r in rules:
        for i, a in enumerate(r.positives()):
            if a.relation.name in names:
                # Put the recursive atom first so that it can be fed the delta alone.
                body = [a] + [b for b in r.body if b is not a]
                variants.append((_Plan(Rule(r.head, tuple(body))), r.head.relation.name, i))
    while any(delta.values()):
        new_delta: dict[str, set[Any]] = {n: set() for n in stratum}
        for plan, head, _i in variants:
            got = _eval_rule(plan, db, delta[plan.first.relation.name])
            new_delta[head] |= got - db[head]
        for n in stratum:
            db[n] |= new_delta[n]
        delta = new_delta


# -- the incremental view -------------------------------------------------------------------


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


class DatalogView:
    """The incrementally maintained result of a :class:`Datalog` program.

    Attributes:
        program: the program.
        circuit: the compiled :class:`Circuit` (draw it with ``view.circuit.dot()``).
    """

    def __init__(self, program: Datalog) -> None:
        self.program = program
        strata = program.strata()
        self._inputs = program.inputs()
        self._derived = program.derived()
        c = self.circuit = Circuit("datalog")
        streams: dict[str, Node] = {n: c.source(n) for n in self._inputs}
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
        for name in self._derived:
            c.sink(name, streams[name])
        self._state: dict[str, set[tuple[Any, ...]]] = {
            n: set() for n in (*self._inputs, *self._derived)
        }

    def update(
        self,
        insert: Mapping[str, Iterable[tuple[Any, ...]]] | None = None,
        delete: Mapping[str, Iterable[tuple[Any, ...]]] | None = None,
    ) -> dict[str, ZSet]:
        """Insert and delete input facts, and return the change of every derived relation.

        Inserting a present fact or deleting an absent one does nothing. The returned Z-sets
        hold ``+1`` for each derived fact that appeared and ``-1`` for each that disappeared
        (relations that did not change are omitted).

        Raises:
            DatalogError: an unknown or derived relation name, a fact of the wrong arity, or a
                fact both inserted and deleted in one update.
        """
        deltas: dict[str, dict[tuple[Any, ...], int]] = {}
        rels = self.program.relations
        for sign, batch in ((1, insert or {}), (-1, delete or {})):
            for name, rows in batch.items():
                if name not in self._inputs:
                    what = "a derived relation" if name in rels else "not a relation"
                    raise DatalogError(
                        f"cannot {'insert into' if sign > 0 else 'delete from'} {name!r}: it "
                        f"is {what} (inputs: {sorted(self._inputs)})"
                    )
                current = self._state[name]
                d = deltas.setdefault(name, {})
                for row in rows:
                    fact = _fact(rels[name], row)
                    if d.get(fact, 0) == -sign:
                        raise DatalogError(
                            f"fact {fact!r} of {name!r} is both inserted and deleted in one update"
                        )
                    if (fact in current) != (sign > 0):
                        d[fact] = sign
        inputs = {n: ZSet._wrap(d) for n, d in deltas.items() if d}
        out = self.circuit.step(inputs)
        for name, d in deltas.items():
            st = self._state[name]
            for fact, w in d.items():
                if w > 0:
                    st.add(fact)
                else:
                    st.discard(fact)
        changes: dict[str, ZSet] = {}
        for name in self._derived:
            z = out[name]
            if z:
                st = self._state[name]
                for fact, w in z:
                    if w > 0:
                        st.add(fact)
                    else:
                        st.discard(fact)
                changes[name] = z
        return changes

    def insert(self, relation: str, *facts: tuple[Any, ...]) -> dict[str, ZSet]:
        """Shorthand for ``update(insert={relation: facts})``."""
        return self.update(insert={relation: facts})

    def delete(self, relation: str, *facts: tuple[Any, ...]) -> dict[str, ZSet]:
        """Shorthand for ``update(delete={relation: facts})``."""
        return self.update(delete={relation: facts})

    def __getitem__(self, relation: str) -> frozenset[tuple[Any, ...]]:
        """The current facts of an input or derived relation."""
        try:
            return frozenset(self._state[relation])
        except KeyError:
            raise DatalogError(
                f"no relation {relation!r} (relations: {sorted(self._state)})"
            ) from None

    def memory(self) -> MemoryReport:
        """Memory held by the circuit's traces."""
        return self.circuit.memory()

    def compact(self) -> MemoryReport:
        """Compact every trace below the current epoch (results unchanged); report memory."""
        return self.circuit.compact()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{n}: {len(s)}" for n, s in self._state.items())
        return f"<DatalogView {sizes}>"


def _union(c: Circuit, comp: _Compiler, rules: list[Rule]) -> Node:
    out = comp.rule(rules[0])
    for r in rules[1:]:
        out = c.plus(out, comp.rule(r))
    return out
