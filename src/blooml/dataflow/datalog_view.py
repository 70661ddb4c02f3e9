"""The incremental Datalog view: a :class:`~blooml.dataflow.datalog.Datalog` program run by the
engine's incremental core and kept up to date under inserts and deletes.

The program is compiled to the rule IR (:mod:`blooml.dataflow._datalog_ir`): input relations
become tables, derived ones scratch views, and the engine's stratifier orders them. Each
:meth:`DatalogView.update` is one engine tick: the inserted and deleted facts are the tick's
signed changes, every rule runs as an incremental operator over them (joins, anti-joins,
derivation counts; delete-and-re-derive for recursive views), and the change of each derived
relation is read back from the engine's undo logs. So an update costs what it changes, and
the bulk load of a large input runs the engine's semi-naive evaluation.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from blooml.dataflow._datalog_ir import compile_program
from blooml.dataflow.circuit import MemoryReport
from blooml.dataflow.datalog import Datalog, _fact
from blooml.dataflow.errors import DatalogError
from blooml.dataflow.zset import ZSet
from blooml.engine.runtime import Runtime

if TYPE_CHECKING:
    from blooml.dataflow.circuit import Circuit
    from blooml.ir.program import ProgramIR

__all__ = ["DatalogView"]


class _Host:
    """What the engine's rule functions would see as ``self``: nothing (the generated rules
    of a Datalog program read only their rows)."""

    _rt: Any = None


def new_runtime(program: Datalog, incremental: bool) -> Runtime:
    """An engine runtime for ``program`` (see :mod:`blooml.dataflow._datalog_ir`)."""
    ir = compile_program(program)
    host = _Host()
    return Runtime(ir, host, host, addr="datalog", clock=time.monotonic, incremental=incremental)


def _plain(row: Any) -> tuple[Any, ...]:
    return row if type(row) is tuple else tuple(row)


def stored_facts(rt: Runtime, relation: str) -> set[tuple[Any, ...]]:
    """The facts ``rt`` stores for ``relation``, as plain tuples."""
    return {_plain(r) for r in rt.rels[relation].rows()}


class DatalogView:
    """The incrementally maintained result of a :class:`Datalog` program.

    Attributes:
        program: the program.
    """

    def __init__(self, program: Datalog) -> None:
        program.strata()  # a program that cannot be stratified fails here, in Datalog terms
        self.program = program
        self._inputs = program.inputs()
        self._derived = program.derived()
        self._rt = new_runtime(program, incremental=True)
        self._rt.changes_of = set(self._derived)
        self._circuit: Circuit | None = None

    @property
    def ir(self) -> ProgramIR:
        """The rule IR the program compiled to (``print(view.ir)`` shows its tables, scratch
        views, strata and rules): what the engine runs."""
        return self._rt.ir

    @property
    def circuit(self) -> Circuit:
        """Deprecated: the program compiled as a PomoFlow circuit, for drawing
        (``view.circuit.dot()``); use :meth:`Datalog.to_circuit`.

        The view no longer runs on that circuit (it runs on the engine's incremental core), so
        the circuit is compiled on first access and is not fed by :meth:`update`.
        """
        warnings.warn(
            "DatalogView.circuit is deprecated: the view runs on the engine's incremental core; "
            "Datalog.to_circuit() compiles the program as a PomoFlow circuit (not fed by "
            "update())",
            DeprecationWarning,
            stacklevel=2,
        )
        if self._circuit is None:
            self._circuit = self.program.to_circuit()
        return self._circuit

    def update(
        self,
        insert: Mapping[str, Iterable[tuple[Any, ...]]] | None = None,
        delete: Mapping[str, Iterable[tuple[Any, ...]]] | None = None,
    ) -> dict[str, ZSet]:
        """Insert and delete input facts, and return the change of every derived relation.

        Inserting a present fact or deleting an absent one does nothing. The returned Z-sets
        hold ``+1`` for each derived fact that appeared and ``-1`` for each that disappeared
        (relations that did not change are omitted). The update is atomic: when it raises
        (say a ``where`` function fails), the view is as it was before.

        Raises:
            DatalogError: an unknown or derived relation name, a fact of the wrong arity, or a
                fact both inserted and deleted in one update.
        """
        rt = self._rt
        rels = self.program.relations
        deltas: dict[str, dict[tuple[Any, ...], int]] = {}
        for sign, batch in ((1, insert or {}), (-1, delete or {})):
            for name, rows in batch.items():
                if name not in self._inputs:
                    what = "a derived relation" if name in rels else "not a relation"
                    raise DatalogError(
                        f"cannot {'insert into' if sign > 0 else 'delete from'} {name!r}: it "
                        f"is {what} (inputs: {sorted(self._inputs)})"
                    )
                current = rt.rels[name]
                d = deltas.setdefault(name, {})
                for row in rows:
                    fact = _fact(rels[name], row)
                    if d.get(fact, 0) == -sign:
                        raise DatalogError(
                            f"fact {fact!r} of {name!r} is both inserted and deleted in one update"
                        )
                    if (fact in current) != (sign > 0):
                        d[fact] = sign
        if not any(deltas.values()):
            return {}
        for name, d in deltas.items():
            ins = [f for f, w in d.items() if w > 0]
            dels = [f for f, w in d.items() if w < 0]
            if ins:
                rt.pending.add("inserts", name, ins)
            if dels:
                rt.pending.add("deletes", name, dels)
        try:
            rt.tick()
        except BaseException:
            rt.discard_pending()  # the tick rolled back; its facts are not kept for the next
            raise
        changes: dict[str, ZSet] = {}
        for name in self._derived:
            got = rt.tick_changes.get(name)
            if not got:
                continue
            rel = rt.rels[name]
            if rel.row_type is not tuple:
                changes[name] = ZSet._wrap({_plain(r): w for r, w in got})
            elif rel.was_empty:  # every fact is new: the store's keys (their hashes reused)
                changes[name] = ZSet._wrap(dict.fromkeys(rel.store, 1))
            else:  # a fact is either new (+1) or gone (-1): every column is a key
                changes[name] = ZSet._wrap(dict(got))
        return changes

    def insert(self, relation: str, *facts: tuple[Any, ...]) -> dict[str, ZSet]:
        """Shorthand for ``update(insert={relation: facts})``."""
        return self.update(insert={relation: facts})

    def delete(self, relation: str, *facts: tuple[Any, ...]) -> dict[str, ZSet]:
        """Shorthand for ``update(delete={relation: facts})``."""
        return self.update(delete={relation: facts})

    def __getitem__(self, relation: str) -> frozenset[tuple[Any, ...]]:
        """The current facts of an input or derived relation."""
        if relation not in self.program.relations:
            raise DatalogError(
                f"no relation {relation!r} (relations: {sorted(self.program.relations)})"
            )
        return frozenset(stored_facts(self._rt, relation))

    def memory(self) -> MemoryReport:
        """What the view keeps, as the engine reports it (``Program.memory``): per
        collection its stored facts plus the derivation counts kept for a derived one, per
        rule the state of its incremental operator. ``entries`` counts facts, derivation
        counts and operator entries; an empty view reports nothing."""
        rep = self._rt.memory()
        traces: dict[str, tuple[int, int]] = {}
        for name, c in rep["collections"].items():
            n = c["rows"] + c["support"]
            if n:
                traces[name] = (n, c["bytes"] + c["support_bytes"])
        for where, r in rep["rules"].items():
            if r["entries"]:
                traces[f"rule {where} ({r['operator']})"] = (r["entries"], r["bytes"])
        return MemoryReport(
            sum(b for _n, b in traces.values()), sum(n for n, _b in traces.values()), traces
        )

    def compact(self) -> MemoryReport:
        """Report memory (:meth:`memory`). Nothing to compact: the engine keeps each
        relation's current facts and derivation counts, not a history of updates."""
        return self.memory()

    def __repr__(self) -> str:
        sizes = ", ".join(
            f"{n}: {len(self._rt.rels[n].store)}" for n in (*self._inputs, *self._derived)
        )
        return f"<DatalogView {sizes}>"
