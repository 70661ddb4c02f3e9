"""``Program(column_types="spark")`` on the local engine: the rows a tick queues and stores
are checked against the type family each column holds (``blooml.ir.coltypes``, the rules
``SparkEngine`` types its columns by), learned as committed ticks store values.

``check_input_families`` runs at a tick's start on its queued input, ``check_families`` at
its end on every row it stored (the families it returns are kept once the tick commits, in
``Runtime.col_families``); a network arrival is checked on receipt (``_net_entry``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blooml.ir.coltypes import check_column_types

if TYPE_CHECKING:
    from blooml.engine._state import Pending
    from blooml.engine.runtime import Runtime

__all__ = ["check_families", "check_input_families", "families"]


def check_input_families(rt: Runtime, pend: Pending) -> None:
    """``column_types="spark"``: check the rows queued for this tick (inserts, network input,
    ``<+`` and ``<+-`` rows) against the type family each column holds, before any of them
    is stored or any rule runs on them (a rule would otherwise meet the value first: an
    ``lmin`` merge or a user function's arithmetic on a string).

    Raises:
        ColumnValueError: a queued value its column cannot hold.
    """
    for queued in (pend.inserts, pend.replaces):
        for name, rows in queued.items():
            r = rt.rels.get(name)
            if r is None or not rows:
                continue
            width = r.arity
            # a malformed row is left to the store's own check (a ProgramError naming it)
            ok = [
                row
                for row in (x if isinstance(x, tuple) else (x,) for x in rows)
                if len(row) == width
            ]
            check_column_types(name, r.columns, ok, families(rt, name))


def check_families(rt: Runtime) -> dict[str, list[str | None]]:
    """``column_types="spark"``: check the rows this tick stored (``tick_new``: inputs and
    derived rows) against the type family each column holds, and return the families
    learned, to keep once the tick commits.

    Raises:
        ColumnValueError: a value its column cannot hold; the tick then rolls back.
    """
    out: dict[str, list[str | None]] = {}
    for name, r in rt.rels.items():
        if not r.tick_new:
            continue
        known = rt.col_families.get(name)
        fams = check_column_types(name, r.columns, r.tick_new, families(rt, name))
        if fams != known:
            out[name] = fams
    return out


def families(rt: Runtime, name: str) -> list[str | None]:
    """The families collection ``name``'s columns hold as of the last committed tick; the
    first time, learned from the rows it holds (a restored durable table's rows teach)."""
    known = rt.col_families.get(name)
    if known is None:
        r = rt.rels[name]
        known = [None] * r.arity
        if r.store and not r.tick_new:
            known = rt.col_families[name] = check_column_types(
                name, r.columns, r.store.values(), known
            )
        elif r.store:  # mid-tick: what it held before the tick is not told apart; learn later
            new = set(map(id, r.tick_new))
            known = check_column_types(
                name, r.columns, (x for x in r.store.values() if id(x) not in new), known
            )
    return known
