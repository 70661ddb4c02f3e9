"""Aggregates for ``group``: ``count``, ``sum_``, ``min_``, ``max_``, ``avg``, ``accum``,
``bool_and``, ``bool_or``. Each returns an :class:`AggSpec` that ``group`` resolves against
its input's columns."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = [
    "AggSpec",
    "accum",
    "avg",
    "bool_and",
    "bool_or",
    "count",
    "max_",
    "min_",
    "sum_",
]


def _no_bool(what: str) -> NoReturn:
    raise TypeError(f"{what} has no truth value: it is part of a Bloom rule, not a Python value")


class AggSpec:
    """An aggregate for ``group``: the function name and its column (a name or position)."""

    __slots__ = ("col", "fn")

    def __init__(self, fn: str, col: str | int | None) -> None:
        self.fn = fn
        self.col = col

    def __bool__(self) -> bool:
        _no_bool(f"aggregate {self!r}")

    def __repr__(self) -> str:
        return f"{self.fn}({'' if self.col is None else repr(self.col)})"


def count(col: str | int | None = None) -> Any:
    """Aggregate: the number of rows in the group (set semantics: distinct rows; with ``col``,
    the number of distinct values of that column)."""
    return AggSpec("count", col)


def sum_(col: str | int) -> Any:
    """Aggregate: the sum of column ``col`` over the group's rows."""
    return AggSpec("sum", col)


def min_(col: str | int) -> Any:
    """Aggregate: the minimum of column ``col``."""
    return AggSpec("min", col)


def max_(col: str | int) -> Any:
    """Aggregate: the maximum of column ``col``."""
    return AggSpec("max", col)


def avg(col: str | int) -> Any:
    """Aggregate: the arithmetic mean of column ``col`` (a float)."""
    return AggSpec("avg", col)


def accum(col: str | int) -> Any:
    """Aggregate: the ``frozenset`` of the values of column ``col``."""
    return AggSpec("accum", col)


def bool_and(col: str | int) -> Any:
    """Aggregate: whether column ``col`` is true in every row of the group."""
    return AggSpec("bool_and", col)


def bool_or(col: str | int) -> Any:
    """Aggregate: whether column ``col`` is true in some row of the group."""
    return AggSpec("bool_or", col)
