"""Rule planning for Datalog circuits: left-deep join orders for ``Datalog.to_circuit``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blooml.dataflow.datalog import Atom, Condition, Rule, Var, _Anon

if TYPE_CHECKING:
    pass


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


def _named(vs: list[Var]) -> list[Var]:
    return [v for v in vs if not isinstance(v, _Anon)]


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
                # a negated atom's anonymous variables are existential: projected away
                vs = b.vars if isinstance(b, Condition) else _named(b.vars())
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
