"""The queued input a failed tick could not take, and dropping queued input.

A tick that raises is rolled back with its input still queued; these functions name on the
exception (``pending_input`` and a note) which queued rows or values it was about, and drop
queued input on request (``Program.discard_pending``). Kept apart from the runtime's tick loop:
nothing here runs unless a tick failed or the user asked.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from blooml.engine._state import Pending, PendingInput
from blooml.engine.relation import MISSING
from blooml.errors import KeyConstraintError, LatticeValueError, ProgramError
from blooml.ir.graph import sources
from blooml.ir.program import Rule
from blooml.lattices._base import Lattice

__all__ = [
    "NOTE_MARK",
    "blame",
    "culprits",
    "discard",
    "report_pending",
    "row_test",
    "scanning",
]

#: The prefix of the notes blooml adds to exceptions (one of each kind per exception).
NOTE_MARK = "blooml: "


def culprits(exc: BaseException, items: list[Any]) -> list[Any]:
    """The queued rows (or lattice values) among ``items`` that ``exc`` is about: the new
    tuple of a key conflict, the rows holding a rejected lattice value; none when the error
    does not say."""

    found: list[Any] = []
    if isinstance(exc, KeyConstraintError):
        new = exc.new
        found = [r for r in items if isinstance(r, tuple) and tuple(r) == new]
    elif isinstance(exc, LatticeValueError):
        for bad in (exc.value, getattr(exc, "other", MISSING)):
            found = [r for r in items if _holds(r, bad)]
            if found:
                break
    return found[:1]


def _holds(row: Any, bad: Any) -> bool:
    """Whether ``row`` (a tuple or a lattice value) holds the raw value ``bad``."""
    for cell in row if isinstance(row, tuple) else (row,):
        if cell is bad:
            return True
        if isinstance(cell, Lattice):
            v = cell._v
            if type(v) is type(bad) and v == bad:
                return True
    return False


def show(pending: dict[str, list[Any]], limit: int = 3) -> str:
    """A short description of queued input (at most ``limit`` items per name)."""
    parts = []
    for name, items in pending.items():
        shown = ", ".join(repr(tuple(r) if isinstance(r, tuple) else r) for r in items[:limit])
        more = f", ... ({len(items)} in all)" if len(items) > limit else ""
        parts.append(f"{name}: [{shown}{more}]")
    return "{" + "; ".join(parts) + "}"


def blame(exc: BaseException, items: dict[str, list[Any]]) -> None:
    """Record on ``exc`` the queued input it was raised on (see ``_report_pending``)."""
    if getattr(exc, "pending_input", None) is None:
        exc.pending_input = items  # type: ignore[attr-defined]


def report_pending(rt: Any, exc: Exception, consumed: Pending, failed: Rule | None) -> None:
    """Name on ``exc`` (attribute ``pending_input`` and a note) the queued input the failed
    tick could not take: the row or value being applied when that is known; otherwise,
    when a rule raised, the input queued for the collections that rule reads (directly or
    through other rules), or all of it when it reads none of them."""
    items = getattr(exc, "pending_input", None)
    if not isinstance(items, dict):
        everything = as_dict(consumed)
        reads = upstream(rt.ir, failed) if failed is not None else None
        if reads is not None:
            narrowed = {n: rows for n, rows in everything.items() if n in reads}
            everything = narrowed or everything
        exact = {n: c for n, rows in everything.items() if (c := culprits(exc, rows))}
        if not exact and failed is not None:
            exact = row_culprit(rt, failed, exc, everything)
        items = exact or everything
    items = {n: [named(rt, n, r) for r in rows] for n, rows in items.items()}
    exc.pending_input = items  # type: ignore[attr-defined]
    exc.add_note(
        f"{NOTE_MARK}this tick could not take the queued input {show(items)}; it is still "
        "queued and the next tick() retries it: call discard_pending() on the program to "
        "drop what is queued (the exception's pending_input attribute holds the rows above)"
    )


def row_culprit(
    rt: Any, rule: Rule, exc: Exception, pending: dict[str, list[Any]]
) -> dict[str, list[Any]]:
    """For a rule ``head <= c.filter(...)...map(f)`` reading a collection ``c`` with queued
    rows, every queued row on which the rule's functions raise an exception of the type of
    ``exc`` (the functions are called again, on the state before the tick, on each of the
    first 10,000 queued rows alone); ``{}`` for any other rule shape, or when no row raises
    alone. All of them, not the first: a batch with several poison rows (a flood of them
    over the network) is then cleared by one retry, not one failed tick per row."""
    probe = row_test(rt, rule, type(exc))
    if probe is None or probe[0] not in pending:
        return {}
    name, test = probe
    with scanning(rt):
        found = [row for row in pending[name][:10_000] if test(row)]
    return {name: found} if found else {}


def row_test(
    rt: Any, rule: Rule, etype: type[BaseException]
) -> tuple[str, Callable[[Any], bool]] | None:
    """For a rule ``head <= c.filter(...)...map(f)``: ``(c, test)``, where ``test(row)`` says
    whether the rule's functions raise ``etype`` when called on the row of ``c`` alone (on
    the state as it is); ``None`` for any other rule shape. Call ``test`` inside
    ``scanning(rt)``. A node screens a throttled sender's batch with it before ticking
    (``blooml.net._policy``)."""
    from blooml.ir import nodes as N

    node = rule.body
    fns: list[tuple[str, Any]] = []
    if isinstance(node, N.Map):
        fns.append(("map", node.fn))
        node = node.input
    while isinstance(node, N.Filter):
        fns.append(("filter", node.fn))
        node = node.input
    if not isinstance(node, N.Scan) or not fns:
        return None
    fns.reverse()  # in the order the rule applies them
    rel = rt.rels.get(node.name)
    make: Any = rel.named._make if rel is not None else None
    arity = rel.arity if rel is not None else -1

    def test(row: Any) -> bool:
        # (``named``, with the relation looked up once)
        ok = make is not None and isinstance(row, tuple) and len(row) == arity
        value = make(row) if ok else row
        try:
            for kind, fn in fns:
                if kind == "filter" and not fn(value):
                    return False
                if kind == "map":
                    fn(value)
        except Exception as again:
            return type(again) is etype
        return False

    return node.name, test


@contextmanager
def scanning(rt: Any) -> Iterator[None]:
    """Where ``row_test``'s tests run: the program's reads see ``rt``, and the collector is
    paused as during a tick (``Runtime.pause_gc``): a named tuple a row, outside a tick."""
    prev, rt.proxy._rt = rt.proxy._rt, rt
    paused = getattr(rt, "pause_gc", False) and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        rt.proxy._rt = prev
        if paused:
            gc.enable()


def named(rt: Any, name: str, item: Any) -> Any:
    """``item`` as the named tuple of collection ``name`` when it is one of its rows."""
    rel = rt.rels.get(name)
    if rel is not None and isinstance(item, tuple) and len(item) == rel.arity:
        return rel.named._make(item)
    return item


def upstream(ir: Any, failed: Rule) -> set[str]:
    """The collections and lattice variables rule ``failed`` reads, directly or through
    the rules deriving them."""
    by_head: dict[str, list[Rule]] = {}
    for r in ir.rules:
        by_head.setdefault(r.head, []).append(r)
    seen: set[str] = set()
    todo = [failed]
    while todo:
        rule = todo.pop()
        names = {n for n, _ in sources(rule.body)} | set(rule.reads)
        for n in names - seen:
            seen.add(n)
            todo.extend(by_head.get(n, ()))
    return seen


def as_dict(pend: Pending) -> dict[str, list[Any]]:
    """The input in ``pend`` as ``{name: [rows or lattice values]}``: rows to insert
    (external input, ``<+`` facts, arrived messages), ``<+-`` replacements and lattice
    values; queued deletions are not input rows and are left out."""
    out: dict[str, list[Any]] = {}
    for d in (pend.replaces, pend.inserts, pend.lats):
        for name, items in d.items():
            out.setdefault(name, []).extend(items)
    return out


def discard(rt: Any, only: Any = None) -> PendingInput:
    """Drop what is queued for ``rt``'s next tick (everything, or the items of ``only``);
    return it (see ``Program.discard_pending``)."""
    if only is not None:
        return _discard_some(rt, only)
    pend, rt.pending = rt.pending, Pending()
    out = PendingInput()
    for name, items in as_dict(pend).items():
        out[name] = [named(rt, name, r) for r in items]
    for f in getattr(rt, "feeds", ()):
        # the rows a <+ (<-, <+-) rule over a scratch would have queued, but its table held
        # them (lacked them, stored them; see blooml.engine._feed): dropped, as the
        # reference drops its rows
        if f.armed and f.counts:
            name = f.head.name
            if hasattr(f, "stale"):  # <+-: those whose key's stored row is theirs
                held = f.held()
                if held:
                    out.setdefault(name, []).extend(named(rt, name, r) for r in held)
            elif hasattr(f, "missing"):
                held = [r for r in f.counts if r not in f.missing]
                if held:
                    out.setdefault(name, []).extend(named(rt, name, r) for r in held)
            else:
                idle = [r for r in f.counts if r not in f.present]
                if idle:
                    out.deletes.setdefault(name, []).extend(named(rt, name, r) for r in idle)
        f.armed = False
    for name, rows in pend.deletes.items():
        out.deletes[name] = [named(rt, name, r) for r in rows]
    return out


def _discard_some(rt: Any, only: Any) -> PendingInput:
    """Drop from the queue one occurrence of each item of ``only`` (``{name: [rows or
    values]}``, as ``pending_input`` gives), searching insertions, replacements and
    lattice merges; return what was found and dropped."""
    if not isinstance(only, Mapping):
        raise ProgramError(
            f"discard_pending(only): expected {{name: [rows]}} (e.g. an exception's "
            f"pending_input), got {only!r}"
        )
    unknown = [n for n in only if n not in rt.rels and n not in rt.lats]
    if unknown:
        raise ProgramError(
            f"discard_pending(only): {unknown} name no collection or lattice variable of "
            f"this program (it has {sorted([*rt.rels, *rt.lats])})"
        )
    pend = rt.pending
    out = PendingInput()
    for name, items in only.items():
        for item in items:
            for d in (pend.inserts, pend.replaces, pend.lats):
                lst = d.get(name)
                if not lst:
                    continue
                try:
                    i = lst.index(item)
                except ValueError:
                    continue
                del lst[i]
                if not lst:
                    del d[name]
                out.setdefault(name, []).append(named(rt, name, item))
                break
    return out
