"""The incremental Datalog view: a :class:`~blooml.dataflow.datalog.Datalog` program compiled
to a :class:`~blooml.dataflow.circuit.Circuit` and kept up to date under inserts and deletes.

Each rule body becomes a left-deep plan of incremental joins; the rules of a relation are
added and made a set with an incremental distinct. A non-recursive stratum lives in the root
circuit; a recursive one becomes a child circuit with one feedback node per relation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from blooml.dataflow._datalog_plan import _getter, _Pattern, _Plan
from blooml.dataflow.circuit import Circuit, MemoryReport, Node
from blooml.dataflow.datalog import Atom, Datalog, Rule, _fact
from blooml.dataflow.errors import DatalogError
from blooml.dataflow.operators import Z1
from blooml.dataflow.zset import ZSet

__all__ = ["DatalogView"]


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
