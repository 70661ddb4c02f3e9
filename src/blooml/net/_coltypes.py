"""Refusing ill-typed lattice values at a node's door, before they are queued.

The program says, through its rules, what a channel column must hold: a rule
``v <= ch.map(lambda m: m.col)`` folds the column into lattice variable ``v`` (so it must be
something ``v``'s builder takes, as ``_rules.fold`` adds it, that then merges with what ``v``
holds), and a rule ``v <= ch.map(lambda m: (m.k, m.col))`` into an ``lmap`` makes it the value
under key ``m.k`` (so it must merge with what ``v`` holds under that key, or, for a new key,
with a value of its class held under another key). :class:`ColumnTypes` finds those rules
once (from the IR: functions recovered as expressions) and checks each arriving row against
the variable's current value, at a cost of the size of the arriving value. A datagram that
fails is dropped whole (``stats()["dropped"]["ill_typed"]``), so a poison value never reaches
the state where it would fail every later write to its key. Columns the rules do not read so
are not checked (their failures are set aside with their datagram when the tick fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blooml.ir import nodes as N
from blooml.ir.exprs import Arg, Attr, Const, Item, TupleExpr
from blooml.lattices import lmap, lset
from blooml.lattices._keyed import MISSING

__all__ = ["ColumnTypes"]

#: Values of a held ``lmap`` looked at, at most, to find one of a class (a new key's sample).
_SCAN = 256


def _column(expr: Any, cols: tuple[str, ...]) -> int | None:
    """The index of the column ``expr`` reads from its single argument, or ``None``."""
    if isinstance(expr, Attr) and isinstance(expr.obj, Arg) and expr.obj.index == 0:
        return cols.index(expr.name) if expr.name in cols else None
    if isinstance(expr, Item) and isinstance(expr.obj, Arg) and expr.obj.index == 0:
        k = expr.key
        if isinstance(k, Const) and type(k.value) is int and 0 <= k.value < len(cols):
            return int(k.value)
    return None


def _name(cls: type) -> str:
    return str(getattr(cls, "wrapper_name", "") or cls.__qualname__)


class ColumnTypes:
    """The lattice checks of one program's channel columns (see the module docstring)."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        #: channel -> [(column index, column name, variable name, key column or None, rule)]
        #: (key column ``None`` and whole ``True``: the column merges into the variable whole)
        self.checks: dict[str, list[tuple[int, str, str, int | None, bool, str]]] = {}
        for rule in rt.ir.rules:
            if rule.head not in rt.lats or rule.op not in ("<=", "<+"):
                continue
            body = rule.body
            if not isinstance(body, N.Map):
                continue
            scan = body.input
            while isinstance(scan, N.Filter):
                scan = scan.input
            if not isinstance(scan, N.Scan):
                continue
            info = rt.ir.collections.get(scan.name)
            if info is None:
                continue
            cols = info.columns
            expr = body.expr
            where = rule.describe()
            c = _column(expr, cols)
            if c is not None:
                self._add(scan.name, (c, cols[c], rule.head, None, True, where))
                continue
            cls = rt.lats[rule.head].cls
            if isinstance(expr, TupleExpr) and len(expr.items) == 2 and issubclass(cls, lmap):
                c = _column(expr.items[1], cols)
                if c is not None:
                    k = _column(expr.items[0], cols)
                    self._add(scan.name, (c, cols[c], rule.head, k, False, where))

    def _add(self, chan: str, check: tuple[int, str, str, int | None, bool, str]) -> None:
        self.checks.setdefault(chan, []).append(check)

    def check(self, chan: str, rows: Sequence[Any]) -> str | None:
        """Why ``rows`` arriving on (or inserted into) collection ``chan`` cannot be merged
        where the program merges them (``None``: they can, or the program does not say)."""
        checks = self.checks.get(chan)
        if not checks:
            return None
        lats = self.rt.lats
        for row in rows:
            for c, col, var_name, key_col, whole, where in checks:
                var = lats[var_name]
                if whole:
                    item = row[c]
                elif key_col is not None:
                    item = (row[key_col], row[c])
                else:
                    continue
                # what the rule's fold makes of this one row (as the engine's _rules.fold does)
                why: str | None
                try:
                    b = var.cls.builder()
                    b.add(item)
                    value = b.freeze()
                except Exception as exc:
                    why = (
                        f"holds {_show(row[c])}, which the {_name(var.cls)} {var_name!r} "
                        f"cannot take: {type(exc).__name__}: {exc}"
                    )
                else:
                    why = _compatible(var.value, value)
                if why is not None:
                    return f"channel {chan!r} column {col!r} {why} (merged by {where})"
        return None

    def check_pending(self, pend: Any) -> str | None:
        """Why what a local write queued (``Pending``: rows of collections, lattice merges)
        cannot be merged where the program merges it, or ``None``: the check the network
        path makes at the door, for ``sync_do``/``async_do``."""
        for name, rows in pend.inserts.items():
            why = self.check(name, rows)
            if why is not None:
                return why
        lats = self.rt.lats
        for name, values in pend.lats.items():
            var = lats.get(name)
            if var is None:
                continue
            for v in values:
                if type(v) is not var.cls:
                    continue  # the runtime's own merge reports a class mismatch
                why = _compatible(var.value, v)
                if why is not None:
                    return f"lattice variable {name!r} {why}"
        return None


def _show(v: Any) -> str:
    text = repr(v)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(v).__qualname__})"


def _compatible(held: Any, v: Any) -> str | None:
    """Why ``v`` (of ``held``'s class) does not merge with ``held``, or ``None``."""
    if isinstance(held, lmap):
        get = held._v.get
        samples: dict[type, Any] = {}
        for bk, x in v._v.items():  # keys boxed and frozen alike in both maps
            h = get(bk)
            if h is None:
                cls = type(x)
                h = samples.get(cls)
                if h is None:
                    h = samples[cls] = _sample(held, cls)
                if h is MISSING:
                    continue  # nothing of its class is held: nothing to compare with
                why = _compatible(h, x)
                if why is not None:
                    return f"{why} (under the new key {bk[0]!r}, compared with another key's)"
            elif h is x or (type(h) is type(x) and h == x):
                continue
            elif type(h) is not type(x):
                return f"holds {_show(x)} for key {bk[0]!r}, where the {_show(h)} is held"
            else:
                why = _compatible(h, x)
                if why is not None:
                    return f"{why} (under the key {bk[0]!r})"
        return None
    if isinstance(held, lset):
        return None  # a union never fails (elements were checked hashable at decode)
    try:
        held.merge(v)
    except Exception as exc:
        return (
            f"holds {_show(v)}, which does not merge with the {_show(held)} held: "
            f"{type(exc).__name__}: {exc}"
        )
    return None


def _sample(held: lmap, cls: type) -> Any:
    """A value of class ``cls`` held in ``held`` (among its first values), or MISSING."""
    for i, x in enumerate(held._v.values()):
        if type(x) is cls:
            return x
        if i >= _SCAN:
            break
    return MISSING
