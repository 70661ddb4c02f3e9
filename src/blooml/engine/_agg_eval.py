"""Evaluators of the non-monotone relational nodes: group, argmin/argmax, reduce, choose.

They are evaluated over their whole input, and only when that input changed since they last ran
(stratification guarantees the input is complete by then); otherwise their delta is empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from blooml.engine._rel_eval import Eval, norm_rows
from blooml.errors import ProgramError
from blooml.ir.aggregates import apply_aggregate

__all__ = ["ArgAggEval", "ChooseEval", "GroupEval", "ReduceEval"]


def _flat(row: Any, width: int) -> tuple[Any, ...]:
    if width > 1:
        return tuple(c for r in row for c in (r if r is not None else ()))
    return row  # type: ignore[no-any-return]


class _NonMono(Eval):
    """Shared change tracking: recompute when any source changed since the last run."""

    __slots__ = ("inp", "seen", "srcs")

    def __init__(self, inp: Eval) -> None:
        self.inp = inp
        self.srcs = inp.states()
        self.seen: tuple[int, ...] | None = None

    def _rows(self) -> list[Any]:
        self.seen = tuple(s.changes for s in self.srcs)
        w = self.inp.width
        rows = self.inp.full()
        return [_flat(r, w) for r in rows] if w > 1 else list(rows)

    def delta(self) -> list[Any]:
        if self.seen != tuple(s.changes for s in self.srcs):
            return self.full()  # type: ignore[return-value]
        return []

    def size(self) -> int:
        return self.inp.size()

    def states(self) -> list[Any]:
        return self.srcs


class GroupEval(_NonMono):
    """SQL GROUP BY with aggregates."""

    __slots__ = ("aggs", "keys")

    def __init__(self, inp: Eval, keys: tuple[int, ...], aggs: tuple[Any, ...]) -> None:
        super().__init__(inp)
        self.keys = keys
        self.aggs = aggs

    def full(self) -> list[Any]:
        groups: dict[tuple[Any, ...], list[Any]] = {}
        keys = self.keys
        for r in self._rows():
            groups.setdefault(tuple(r[i] for i in keys), []).append(r)
        out = []
        for k, rows in groups.items():
            vals = []
            for a in self.aggs:
                try:
                    if a.col is None:
                        vals.append(apply_aggregate(a.fn, rows, rows))
                    else:
                        vals.append(apply_aggregate(a.fn, [r[a.col] for r in rows], rows))
                except IndexError:
                    raise ProgramError(
                        f"group: aggregate {a!r} refers to column {a.col}, but a row has only "
                        f"{len(rows[0])} columns: {rows[0]!r}"
                    ) from None
            out.append((*k, *vals))
        return out


class ArgAggEval(_NonMono):
    """Rows whose column is the minimum/maximum of their group (all ties)."""

    __slots__ = ("col", "how", "keys")

    def __init__(self, inp: Eval, how: str, keys: tuple[int, ...], col: int) -> None:
        super().__init__(inp)
        self.how = how
        self.keys = keys
        self.col = col

    def full(self) -> list[Any]:
        best: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}
        c, keys, mx = self.col, self.keys, self.how == "max"
        for r in self._rows():
            k = tuple(r[i] for i in keys)
            v = r[c]
            if v is None:  # NULL is never a group's extreme (SQL's min/max skip it)
                continue
            cur = best.get(k)
            if cur is None or (v > cur[0] if mx else v < cur[0]):
                best[k] = (v, [r])
            elif v == cur[0]:
                cur[1].append(r)
        return [r for _, rows in best.values() for r in rows]


def _stable(row: Any, seed: int) -> bytes:
    return hashlib.blake2b(repr((seed, tuple(row))).encode(), digest_size=8).digest()


class ChooseEval(_NonMono):
    """One row per key value, the one with the smallest seeded hash of its repr."""

    __slots__ = ("keys", "seed")

    def __init__(self, inp: Eval, keys: tuple[int, ...], seed: int) -> None:
        super().__init__(inp)
        self.keys = keys
        self.seed = seed

    def full(self) -> list[Any]:
        best: dict[tuple[Any, ...], tuple[bytes, Any]] = {}
        keys, seed = self.keys, self.seed
        for r in self._rows():
            k = tuple(r[i] for i in keys)
            h = _stable(r, seed)
            cur = best.get(k)
            if cur is None or h < cur[0]:
                best[k] = (h, r)
        return [r for _, r in best.values()]


class ReduceEval(_NonMono):
    """``fn(memo, row)`` folded over the rows in a deterministic order."""

    __slots__ = ("fn", "init")

    def __init__(self, inp: Eval, init: Any, fn: Callable[[Any, Any], Any]) -> None:
        super().__init__(inp)
        self.init = init
        self.fn = fn

    def full(self) -> list[Any]:
        rows = self._rows()
        try:
            rows.sort()
        except TypeError:
            rows.sort(key=repr)
        memo = self.init
        for r in rows:
            memo = self.fn(memo, r)
        return as_result_rows(memo)


def as_result_rows(memo: Any) -> list[Any]:
    """A reduce result: ``None`` is no row, a tuple one row, an iterable several."""
    if memo is None:
        return []
    if isinstance(memo, tuple):
        return [memo]
    if isinstance(memo, (list, set, frozenset)):
        return norm_rows(memo)
    return [(memo,)]
