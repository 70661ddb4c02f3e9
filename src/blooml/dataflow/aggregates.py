"""Aggregation: builtin and user aggregates, non-incremental and incremental.

An aggregate summarizes the values under each key of an indexed Z-set into one row
``(key, summary)`` of weight 1. User aggregates must be pure; :class:`Aggregator` checks that
they are deterministic by evaluating each group twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from blooml.dataflow.errors import ImpureAggregateError
from blooml.dataflow.incremental import _Scheduled
from blooml.dataflow.operators import Operator, _expect, _fn_name
from blooml.dataflow.timestamps import Time, corners, leq
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet, _add_into

__all__ = [
    "COUNT",
    "MAX",
    "MIN",
    "SUM",
    "Aggregate",
    "AggregateIncremental",
    "Aggregator",
    "aggregate",
]


class Aggregator:
    """A named aggregate: a pure function from a group to a result.

    ``fn`` receives the group as a tuple of ``(value, weight)`` pairs (sorted by value when
    the values are comparable) and returns the group's summary, or ``None`` for "no output
    for this key".

    Args:
        name: shown in drawings and errors.
        fn: the aggregate function; it must be pure.
        check_purity: evaluate ``fn`` twice on every group and raise
            :class:`ImpureAggregateError` when the results differ (doubles the cost; the
            builtins skip it).
    """

    def __init__(
        self, name: str, fn: Callable[[tuple[tuple[Any, int], ...]], Any], check_purity: bool = True
    ) -> None:
        self.name = name
        self.fn = fn
        self.check_purity = check_purity

    def __call__(self, group: tuple[tuple[Any, int], ...]) -> Any:
        r = self.fn(group)
        if self.check_purity:
            again = self.fn(tuple(group))
            if again != r:
                raise ImpureAggregateError(self.name, group, (r, again))
        return r

    def __repr__(self) -> str:
        return f"Aggregator({self.name!r})"


def _count(group: tuple[tuple[Any, int], ...]) -> int:
    return sum(w for _v, w in group)


def _sum(group: tuple[tuple[Any, int], ...]) -> Any:
    return sum(v * w for v, w in group)


def _min(group: tuple[tuple[Any, int], ...]) -> Any:
    return min((v for v, w in group if w > 0), default=None)


def _max(group: tuple[tuple[Any, int], ...]) -> Any:
    return max((v for v, w in group if w > 0), default=None)


#: The sum of the weights (the number of values, counted with multiplicity).
COUNT = Aggregator("count", _count, check_purity=False)
#: The sum of ``value * weight``.
SUM = Aggregator("sum", _sum, check_purity=False)
#: The least value with a positive weight.
MIN = Aggregator("min", _min, check_purity=False)
#: The greatest value with a positive weight.
MAX = Aggregator("max", _max, check_purity=False)

_BUILTIN_AGGREGATES = {"count": COUNT, "sum": SUM, "min": MIN, "max": MAX}


def _aggregator(agg: Any) -> Aggregator:
    if isinstance(agg, Aggregator):
        return agg
    if isinstance(agg, str):
        try:
            return _BUILTIN_AGGREGATES[agg]
        except KeyError:
            raise ValueError(
                f"unknown aggregate {agg!r}: use one of {sorted(_BUILTIN_AGGREGATES)} or an "
                "Aggregator(name, fn)"
            ) from None
    if callable(agg):
        return Aggregator(_fn_name(agg), agg)
    raise TypeError(f"aggregate must be a name, an Aggregator or a function, got {agg!r}")


def _group(vals: dict[Any, int]) -> tuple[tuple[Any, int], ...]:
    items = list(vals.items())
    with contextlib.suppress(TypeError):
        items.sort(key=lambda vw: vw[0])
    return tuple(items)


def aggregate(agg: Aggregator | str | Callable[..., Any], z: IndexedZSet) -> ZSet:
    """Summarize the values under each key: ``{(key, agg(values)): 1}``.

    ``agg`` is ``"count"``, ``"sum"``, ``"min"``, ``"max"``, an :class:`Aggregator`, or a
    function (wrapped in a purity-checked :class:`Aggregator`).
    """
    a = _aggregator(agg)
    _expect(z, IndexedZSet, f"Aggregate({a.name})")
    out: dict[Any, int] = {}
    for k, vals in z._d.items():
        r = a(_group(vals))
        if r is not None:
            _add_into(out, (k, r), 1, f"Aggregate({a.name})")
    return ZSet._wrap(out)


class Aggregate(Operator):
    """Apply an aggregate to each key of an indexed Z-set (not incremental)."""

    name = "aggregate"
    linearity = "non-linear"

    def __init__(self, agg: Aggregator | str | Callable[..., Any]) -> None:
        self.agg = _aggregator(agg)

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        (z,) = inputs
        return aggregate(self.agg, z)

    def label(self) -> str:
        return f"aggregate({self.agg.name})"


class AggregateIncremental(_Scheduled):
    """Incremental aggregate: ``(delta, trace of earlier deltas) -> change of the output``.

    For every key touched now it recomputes the aggregate of the key's integrated values
    before and after (at every corner of the time, in nested circuits) and outputs the
    retraction of the old summary and the insertion of the new one.
    """

    name = "aggregate_incremental"
    arity = 2
    linearity = "non-linear"

    def __init__(self, agg: Aggregator | str | Callable[..., Any]) -> None:
        super().__init__()
        self.agg = _aggregator(agg)

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        delta, trace = inputs
        _expect(delta, IndexedZSet, "AggregateIncremental", "delta input")
        _expect(trace, Trace, "AggregateIncremental", "trace input")
        agg = self.agg
        out: dict[Any, int] = {}
        flat = type(time) is int or time is None
        cs: list[tuple[Any, int]] = [(time, 1), ("before", -1)] if flat else corners(time)
        keys = set(delta._d) if flat else self._candidates(delta._d, time)
        for k in keys:
            entries = trace.entries(k)
            if not flat and entries:
                self._schedule(k, (s for _v, s, _w in entries), time)
            now = delta._d.get(k, {})
            for c, sign in cs:
                vals: dict[Any, int] = {}
                for v, s, w in entries:
                    if flat or leq(s, c):
                        _add_into(vals, v, w, "AggregateIncremental")
                if c == time:
                    for v, w in now.items():
                        _add_into(vals, v, w, "AggregateIncremental")
                if vals:
                    r = agg(_group(vals))
                    if r is not None:
                        _add_into(out, (k, r), sign, "AggregateIncremental")
        return ZSet._wrap(out)

    def label(self) -> str:
        return f"aggregate_incremental({self.agg.name})"
