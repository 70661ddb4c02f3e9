"""What each aggregate of a ``group`` computes: one definition shared by every engine.

The IR names aggregates (:data:`~blooml.ir.nodes.AGG_NAMES`); this module gives them their
meaning, so that the local engine and the Spark engine cannot drift apart.

NULL (``None``) follows Spark SQL, which is what a Spark user expects and what the Spark
engine computes natively: an aggregate of a column **skips NULL**. ``count()`` counts rows
(NULLs included); ``count(c)`` counts the distinct non-NULL values (SQL's ``count(DISTINCT
c)``); ``sum``, ``min``, ``max``, ``avg``, ``bool_and`` and ``bool_or`` of a group whose
values are all NULL are NULL; ``accum`` collects the non-NULL values (an empty ``frozenset``
when there are none, as ``collect_set`` gives an empty array).

Sums are exact: integers are added as integers; a sum with a float in it is the correctly
rounded sum of its values as floats (:class:`ExactSum`, the value ``math.fsum`` gives), so it
does not depend on the order of the rows, and the Spark engine computes the same value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from blooml.errors import ProgramError
from blooml.ir.nodes import AGG_NAMES

__all__ = ["ExactSum", "apply_aggregate", "exact_sum"]

#: floats as integers over 2**_SCALE: every finite float is one exactly
_SCALE = 1074
#: integers up to this magnitude are floats exactly
_EXACT_INT = 2**53


def _scaled(v: float) -> int:
    n, d = v.as_integer_ratio()
    return n << (_SCALE + 1 - d.bit_length())


class ExactSum:
    """A running exact sum of numbers under insertion and retraction (weights).

    Integers add up exactly as integers. Once a float is in the sum, its value is the sum of
    every value taken as a float (an integer becomes the nearest float, as a Spark ``double``
    column holds it), computed exactly and rounded once: ``math.fsum`` of the values. NaN and
    infinities give what IEEE addition gives in any order (NaN for a NaN or for both
    infinities), and an exact sum beyond the largest float is an infinity.

    Example:
        >>> s = ExactSum()
        >>> for v in (0.1, 0.2, 0.3):
        ...     s.add(v)
        >>> s.value(), 0.1 + 0.2 + 0.3
        (0.6, 0.6000000000000001)
    """

    __slots__ = ("floats", "ints", "n", "nan", "ninf", "pinf", "scaled", "small")

    def __init__(self) -> None:
        self.ints = 0  # the exact sum of the integers
        self.small = 0  # the part of it from integers a float holds exactly (|v| <= 2**53)
        self.scaled = 0  # the exact sum of floats and of the other integers as floats, scaled
        self.n = 0  # values (with weights) in the sum
        self.floats = 0  # floats among them
        self.pinf = self.ninf = self.nan = 0

    def add(self, v: Any, w: int = 1) -> None:
        """Add ``v`` (an ``int``, ``bool`` or ``float``) ``w`` times (``w < 0`` retracts).

        Raises:
            TypeError: ``v`` is not an ``int`` or a ``float``; the sum is left unchanged.
        """
        t = type(v)
        if t is float:
            if v - v == 0.0:  # finite
                n, d = v.as_integer_ratio()
                self.scaled += (n << (_SCALE + 1 - d.bit_length())) * w
            elif v != v:
                self.nan += w
            elif v > 0:
                self.pinf += w
            else:
                self.ninf += w
            self.floats += w
        elif t is int or t is bool:
            self.ints += v * w
            if -_EXACT_INT <= v <= _EXACT_INT:  # a float holds it exactly: summed as ints
                self.small += v * w
            else:
                try:
                    self.scaled += _scaled(float(v)) * w
                except OverflowError:  # beyond the largest float: an infinity as a float
                    if v > 0:
                        self.pinf += w
                    else:
                        self.ninf += w
        else:
            raise TypeError(f"unsupported operand type for an exact sum: {t.__name__}")
        self.n += w

    def value(self) -> Any:
        """The sum (``None`` when nothing is in it): an ``int`` while no float is in it."""
        if not self.n:
            return None
        if not self.floats:
            return self.ints
        return _round(self.scaled + (self.small << _SCALE), self.pinf, self.ninf, self.nan)


def _round(scaled: int, pinf: int, ninf: int, nan: int) -> float:
    if nan or (pinf and ninf):
        return math.nan
    if pinf or ninf:
        return math.inf if pinf else -math.inf
    try:
        return scaled / (1 << _SCALE)  # int / int is correctly rounded (half to even)
    except OverflowError:
        return math.inf if scaled > 0 else -math.inf


def exact_sum(vals: Iterable[Any]) -> Any:
    """The sum of ``vals`` (no ``None`` among them) as :class:`ExactSum` defines it: an exact
    ``int`` for integers, the correctly rounded ``math.fsum`` once a float is among them; any
    other kind of number (``Decimal``, ``Fraction``, ...) adds with ``+`` in the given order.

    Raises:
        TypeError: a value is not a number (as ``sum`` raises it).
    """
    vals = vals if isinstance(vals, list) else list(vals)
    try:
        s = sum(vals)  # fast, and its type says whether a float is among the values
        return math.fsum(vals) if type(s) is float else s
    except (OverflowError, ValueError):  # fsum's intermediate overflow, or inf + -inf
        acc = ExactSum()
        for v in vals:
            acc.add(v)
        return acc.value()


def _without_none(vals: list[Any]) -> list[Any]:
    return [v for v in vals if v is not None]


def apply_aggregate(fn: str, vals: list[Any], rows: list[Any]) -> Any:
    """Aggregate ``fn`` over one group, skipping NULL as Spark SQL does (module docstring).

    Args:
        fn: an aggregate name from ``AGG_NAMES``.
        vals: the aggregated column's values in the group, or ``rows`` itself for ``count()``
            with no column (which counts rows).
        rows: the group's rows.

    ``count()`` counts rows; ``count`` of a column counts its distinct non-``None`` values;
    ``accum`` collects the non-``None`` values into a ``frozenset``; every other aggregate of
    a column without a non-``None`` value is ``None``. ``sum`` and ``avg`` are exact
    (:func:`exact_sum`); ``avg`` is that sum, as a float, divided by the number of values.

    Raises:
        ProgramError: ``fn`` is not an aggregate name.
    """
    if vals is rows and fn == "count":
        return len(rows)
    if fn not in AGG_NAMES:
        raise ProgramError(f"unknown aggregate {fn!r} (known: {', '.join(AGG_NAMES)})")
    if fn in ("count", "accum"):
        distinct = set(vals)
        distinct.discard(None)
        return len(distinct) if fn == "count" else frozenset(distinct)
    if fn in ("sum", "avg", "min", "max"):
        # the common case first: no None (a None makes these raise TypeError, or is min's
        # answer when it is the only value); only then are the Nones filtered out
        try:
            if not vals or (vals[0] is None and len(vals) == 1):
                return None
            return _numeric(fn, vals)
        except TypeError:
            kept = _without_none(vals)
            if len(kept) == len(vals):
                raise
            return _numeric(fn, kept) if kept else None
    kept = _without_none(vals)
    if not kept:
        return None
    if fn == "bool_and":
        return all(kept)
    return any(kept)  # bool_or


def _numeric(fn: str, vals: list[Any]) -> Any:
    if fn == "sum":
        return exact_sum(vals)
    if fn == "min":
        return min(vals)
    if fn == "max":
        return max(vals)
    total = exact_sum(vals)
    return (float(total) if type(total) is int else total) / len(vals)
