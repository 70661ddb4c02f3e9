"""Evaluators of lattice IR nodes, and the lattice-to-rows conversions.

A lattice evaluator answers ``value()`` (over the current state) and ``delta()`` (what to merge
given the current delta, or ``None`` when nothing changed). A ``@morph`` method is applied to
the delta of its target (it distributes over merge); a ``@monotone`` or non-monotone method is
re-evaluated on the whole value when an input changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from blooml.engine._rel_eval import Eval, ScanEval
from blooml.engine._state import LatVarState
from blooml.lattices._base import Lattice
from blooml.lattices.ordered import lbool

__all__ = [
    "EmptyEval",
    "IncludeEval",
    "LatConstEval",
    "LatEval",
    "LatMethodEval",
    "LatRowsEval",
    "LatVarEval",
    "TickEval",
    "as_rows",
]


class LatEval:
    """Base of lattice evaluators."""

    __slots__ = ()

    def value(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def delta(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def states(self) -> list[Any]:
        """The relations and lattice variables read below this node."""
        return []


class LatVarEval(LatEval):
    """A lattice variable: its value; its delta is the merge of this round's increments."""

    __slots__ = ("var",)

    def __init__(self, var: LatVarState) -> None:
        self.var = var

    def value(self) -> Any:
        return self.var.value

    def delta(self) -> Any:
        return self.var.delta_value()

    def states(self) -> list[Any]:
        return [self.var]


class LatConstEval(LatEval):
    """A constant written in the program."""

    __slots__ = ("c",)

    def __init__(self, c: Any) -> None:
        self.c = c

    def value(self) -> Any:
        return self.c

    def delta(self) -> Any:
        return None


class TickEval(LatEval):
    """``self.tick_count`` (rules reading it are re-evaluated every tick)."""

    __slots__ = ("rt",)

    def __init__(self, rt: Any) -> None:
        self.rt = rt

    def value(self) -> Any:
        return self.rt.tick_count

    def delta(self) -> Any:
        return None


class LatMethodEval(LatEval):
    """``target.name(*args)``: on deltas for a morphism, on the whole value otherwise."""

    __slots__ = ("args", "kind", "lat_args", "name", "target")

    def __init__(self, target: Any, name: str, args: list[Any], kind: str) -> None:
        self.target = target
        self.name = name
        self.args = args
        self.kind = kind
        self.lat_args = [a for a in args if isinstance(a, (LatEval, Eval))]

    def _argvals(self) -> list[Any]:
        out = []
        for a in self.args:
            if isinstance(a, LatEval):
                out.append(a.value())
            elif isinstance(a, Eval):
                out.append(list(a.full()))
            else:
                out.append(a)
        return out

    def _target_value(self) -> Any:
        t = self.target
        return t.value() if isinstance(t, LatEval) else list(t.full())

    def value(self) -> Any:
        return getattr(self._target_value(), self.name)(*self._argvals())

    def delta(self) -> Any:
        t = self.target
        if self.kind == "morph" and not self.lat_args and isinstance(t, LatEval):
            d = t.delta()
            if d is None:
                return None
            return getattr(d, self.name)(*self.args)
        changed = (t.delta() is not None) if isinstance(t, LatEval) else bool(t.delta())
        for a in self.lat_args:
            if isinstance(a, LatEval):
                changed = changed or a.delta() is not None
            else:
                changed = changed or bool(a.delta())
        return self.value() if changed else None

    def states(self) -> list[Any]:
        return [*self.target.states(), *(s for a in self.lat_args for s in a.states())]


class IncludeEval(LatEval):
    """``lbool``: whether a row is in a relation."""

    __slots__ = ("inp", "row")

    def __init__(self, inp: Eval, row: tuple[Any, ...]) -> None:
        self.inp = inp
        self.row = row

    def value(self) -> Any:
        inp = self.inp
        if isinstance(inp, ScanEval):
            return lbool(self.row in inp.rel)
        return lbool(any(tuple(r) == self.row for r in inp.full()))

    def delta(self) -> Any:
        return self.value() if self.inp.delta() else None

    def states(self) -> list[Any]:
        return self.inp.states()


class EmptyEval(LatEval):
    """``lbool``: whether a relation is empty (non-monotone)."""

    __slots__ = ("inp", "seen", "srcs")

    def __init__(self, inp: Eval) -> None:
        self.inp = inp
        self.srcs = inp.states()
        self.seen: tuple[int, ...] | None = None

    def value(self) -> Any:
        self.seen = tuple(s.changes for s in self.srcs)
        inp = self.inp
        if isinstance(inp, ScanEval):
            return lbool(len(inp.rel) == 0)
        return lbool(not any(True for _ in inp.full()))

    def delta(self) -> Any:
        if self.seen != tuple(s.changes for s in self.srcs):
            return self.value()
        return None

    def states(self) -> list[Any]:
        return self.srcs


def as_rows(value: Any) -> list[Any]:
    """The rows a lattice value (or a ``when_true`` result) stands for.

    ``None`` is no rows; a set-like lattice gives one row per element; an ``lmap`` one
    ``(key, value)`` row per key; another lattice value one one-column row; a plain iterable
    its items (a non-tuple item is a one-column row).
    """
    if value is None:
        return []
    if isinstance(value, Lattice):
        raw = value.reveal()
        if raw is None:
            return []
        items = getattr(raw, "items", None)
        if callable(items):
            return [(k, v) for k, v in items()]
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
            return [(value,)]
        return [x if isinstance(x, tuple) else (x,) for x in raw]
    if isinstance(value, tuple):
        return [value]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [(value,)]
    return [x if isinstance(x, tuple) else (x,) for x in value if x is not None]


class LatRowsEval(Eval):
    """Rows of a lattice expression (``to_collection()``, ``when_true(fn)``)."""

    __slots__ = ("lat",)

    def __init__(self, lat: LatEval) -> None:
        self.lat = lat

    def full(self) -> list[Any]:
        return as_rows(self.lat.value())

    def delta(self) -> list[Any]:
        return as_rows(self.lat.delta())

    def states(self) -> list[Any]:
        return self.lat.states()
