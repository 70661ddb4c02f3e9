"""Keeping a failed tick's failure with the input that caused it (used by ``Node``).

A node's input arrives in units (``_input.Unit``: one datagram, one ``sync_do``/``async_do``
call, one loopback delivery, queued input). When a tick fails, :func:`isolate` finds the units
it fails on with *trial ticks* on subsets (group testing by bisection, at most ``budget`` of
them), each rolled back just before it would commit, so that the real tick then runs once on
every other unit. The cost is paid only when a tick fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from blooml.net._input import Unit, combine, take_rows

__all__ = ["Isolation", "isolate", "trial"]


class _Trial(BaseException):
    """Raised in place of the durable write to roll a trial tick back before it commits (a
    ``BaseException``: the runtime does not blame input on it)."""


class _Probe:
    """Stands in for ``rt.durable`` during a trial tick: checks that the durable write would
    encode (``DurableStore.prepare``), then rolls the tick back."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def commit(self, rt: Any) -> None:
        if self.real is not None:
            self.real.prepare(rt)
        raise _Trial


class _QuietTrials(logging.Filter):
    """Drops the runtime's "rolled back" warning of trial ticks (they are not failures)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (isinstance(args, tuple) and any(isinstance(a, _Trial) for a in args))


logging.getLogger("blooml.engine").addFilter(_QuietTrials())


class Isolation:
    """What :func:`isolate` found.

    Attributes:
        good: units the tick succeeds on together (in order).
        bad: ``(unit, exception)`` for each unit a trial failed on alone (with ``good``).
        undecided: units not tried within the budget (they stay queued).
        no_input: the exception of a tick that fails with no input at all (a rule or a
            ``periodic`` failing by itself), else ``None``; then nothing was decided.
        trials: how many trial ticks ran.
    """

    def __init__(self) -> None:
        self.good: list[Unit] = []
        self.bad: list[tuple[Unit, BaseException]] = []
        self.undecided: list[Unit] = []
        self.no_input: BaseException | None = None
        self.trials = 0
        #: whether ``good`` was applied already (by the caller's ``commit``)
        self.committed = False


def trial(rt: Any, units: list[Unit]) -> BaseException | None:
    """Run a tick on ``units`` and roll it back before it commits; return the exception it
    raised, or ``None`` when it would have committed. ``rt.pending`` is left as
    ``combine(units)``."""
    rt.pending = combine(units)
    real = rt.durable
    rt.durable = _Probe(real)
    try:
        rt.tick()
    except _Trial:
        return None
    except Exception as exc:
        return exc
    finally:
        rt.durable = real
    raise AssertionError("a trial tick committed")  # pragma: no cover - the probe raises


def isolate(
    rt: Any,
    units: list[Unit],
    first: BaseException,
    budget: int,
    on_bad: Callable[[Unit], bool] | None = None,
    commit: Callable[[list[Unit]], BaseException | None] | None = None,
    apart: bool = True,
) -> Isolation:
    """Find the units a tick fails on (the tick on all of ``units`` failed with ``first``).

    First a tick on no input: if it fails too, the failure is not the input's (``no_input``).
    When the runtime names the queued rows the failing rule raises on (``pending_input``:
    every row on which a ``map``/``filter`` rule's functions raise alone), they are set aside
    together and the rest is tried once: one trial for all the poison rows it names, however
    many. Otherwise (or when the rest fails unnamed) the units are bisected: a group that
    succeeds together with the units known to be good joins them; a failing group is split,
    and a failing single unit is bad. With one
    bad unit among ``n`` that is about ``2·log2(n)`` trials; after ``budget`` trials, once one
    bad unit is found (that takes at most ``log2(n) + 2``), the untried groups are
    ``undecided``. A failing unit of several rows that nobody waits for (a datagram) is
    bisected further, down to the rows: what is set aside is the poison row alone, in about
    ``2·log2(rows)`` more trials. ``on_bad(unit)`` is called for each unit found bad; when
    it returns true (its sender is throttled), the sender's other units are left undecided,
    as they are when a named row's sender is one of several in the search (``apart``: not
    in the slow lane, whose senders are all throttled). ``commit(units)`` (a real tick on
    ``units``, returning its exception) replaces the trial after named rows when given:
    ``committed`` then says the good units were applied.
    """
    out = Isolation()
    out.trials = 1
    exc = trial(rt, [])
    if exc is not None:
        out.no_input = exc
        return out
    if len(units) == 1 and not units[0].divisible():
        out.bad.append((units[0], first))
        if on_bad is not None:
            on_bad(units[0])
        return out
    # the runtime names the rows a simple rule raised on (``pending_input``, found by calling
    # the rule's functions on each queued row alone): set them aside and try the rest at
    # once, one trial for all the poison rows it names instead of a bisection; without a
    # name, bisect
    hint: BaseException = first
    while out.trials < budget:
        found = _named_rows(units, hint)
        if found is None:
            break
        pieces, units = found
        gone = _set_apart(pieces, hint, out, on_bad, units, apart)
        if gone:
            out.undecided += [u for u in units if u.sender in gone]
            units = [u for u in units if u.sender not in gone]
        if not units:
            return out
        out.trials += 1
        # the rest is tried by a real tick when the caller gives one: if it commits, the
        # search is over and the tick is not run twice (a failing one rolls back as a trial)
        exc = trial(rt, units) if commit is None else commit(units)
        if exc is None:
            out.good = units
            out.committed = commit is not None
            return out
        hint = exc
    # a sender's units side by side: one sender's poison then fails one group, not every
    # group (interleaved arrivals would make every half fail down to single units)
    units = sorted(units, key=_sender_key)
    todo = _halves(units)
    while todo:
        group = todo.pop(0)
        if out.trials >= budget and out.bad:  # (one bad unit is always found: progress)
            out.undecided.extend(group)
            continue
        out.trials += 1
        # the group first: the runtime looks for the row it raised on among the first
        # 10,000 queued rows, and the good ones are known not to be it
        # the last group with every good unit is what the real tick would run: when the
        # caller gives a real tick, run it (it commits, or rolls back as a trial would)
        last = not todo and commit is not None
        run = commit if last and commit is not None else (lambda us: trial(rt, us))
        exc = run(group + out.good)
        named = None if exc is None else _named_rows(group, exc)
        if exc is None:
            out.good.extend(group)
            out.committed = last
        elif named is not None:  # the runtime names the rows: they are bad, retry the rest
            pieces, rest = named
            assert exc is not None
            others = [*rest, *out.good, *(u for g in todo for u in g)]
            gone = _set_apart(pieces, exc, out, on_bad, others, apart)
            if gone:
                out.undecided += [u for g in [rest, *todo] for u in g if u.sender in gone]
                todo = [k for k in ([u for u in g if u.sender not in gone] for g in todo) if k]
                rest = [u for u in rest if u.sender not in gone]
            if rest:
                todo.insert(0, rest)
        elif len(group) == 1 and not group[0].divisible():
            out.bad.append((group[0], exc))
            if on_bad is not None and on_bad(group[0]) and apart:
                # its sender is throttled now: its other units leave this search (they are
                # undecided, and wait in the sender's slow lane, not in everyone's tick)
                who = group[0].sender
                out.undecided += [u for g in todo for u in g if u.sender == who]
                todo = [k for k in ([u for u in g if u.sender != who] for g in todo) if k]
        else:
            todo[:0] = _halves(group)
    return out


def _set_apart(
    pieces: list[Unit],
    exc: BaseException,
    out: Isolation,
    on_bad: Callable[[Unit], bool] | None,
    others: list[Unit],
    apart: bool,
) -> set[str]:
    """Named poison rows (a unit for those of each unit they came from) are bad, each row a
    strike against its sender (``on_bad``). Returns the senders whose other units leave the
    search (``apart``; not in the slow lane, where every sender is throttled already): those
    throttled now, and every sender of a named row when ``others`` (the units still in the
    search) hold another sender's. Its rows beyond the 10,000 the runtime replays, or a
    poison row its rule's functions do not raise on alone, would otherwise be found at
    everyone's cost: one poison sender among ten cost a failed retry of a whole batch per
    10,000 rows, and 0.74-0.77x of clean throughput against 0.86-0.96x apart."""
    senders = {u.sender for u in others if u.sender is not None}
    gone: set[str] = set()
    for piece in pieces:
        out.bad.append((piece, exc))
        throttled = on_bad is not None and on_bad(piece)
        s = piece.sender
        if apart and s is not None and (throttled or len(senders - {s}) > 0):
            gone.add(s)
    return gone


def _named_rows(units: list[Unit], exc: BaseException) -> tuple[list[Unit], list[Unit]] | None:
    """When ``exc`` names queued rows it was raised on (``pending_input``: rows of one
    collection), ``take_rows`` of them; else ``None``."""
    return take_rows(units, getattr(exc, "pending_input", None))


def _sender_key(u: Unit) -> str:
    return "" if u.sender is None else u.sender


def _halves(units: list[Unit]) -> list[list[Unit]]:
    """Two groups of about half of ``units``; a single unit of several rows is cut into
    two halves of its rows (a poison row is then found in about ``2·log2(rows)`` more
    trials, and the other rows of its datagram apply)."""
    if len(units) == 1:
        return [[u] for u in units[0].halves()]
    h = len(units) // 2
    return [units[:h], units[h:]]
