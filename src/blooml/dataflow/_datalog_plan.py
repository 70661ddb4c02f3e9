"""Rule planning for Datalog: left-deep join orders, shared by the circuit compiler and the
from-scratch (semi-naive, plain Python sets) evaluator."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from blooml.dataflow.datalog import Atom, Condition, Rule, Var

if TYPE_CHECKING:
    from blooml.dataflow.datalog import Datalog


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


def eval_rule(plan: _Plan, db: Mapping[str, Any], first: Iterable[tuple[Any, ...]]) -> set[Any]:
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


def semi_naive(program: Datalog, stratum: list[str], db: dict[str, set[Any]]) -> None:
    names = set(stratum)
    rules = [r for r in program.rules if r.head.relation.name in names]
    # Every rule is evaluated once in full; then only with a recursive atom bound to the delta.
    delta: dict[str, set[Any]] = {n: set() for n in stratum}
    for r in rules:
        plan = _Plan(r)
        new = eval_rule(plan, db, db[plan.first.relation.name]) - db[r.head.relation.name]
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
            got = eval_rule(plan, db, delta[plan.first.relation.name])
            new_delta[head] |= got - db[head]
        for n in stratum:
            db[n] |= new_delta[n]
        delta = new_delta
