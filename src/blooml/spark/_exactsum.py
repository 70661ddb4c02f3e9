"""Exact floating-point sums as one Spark SQL aggregate: the value ``math.fsum`` gives.

Spark's ``sum`` of a ``double`` column adds in whatever order the rows reach each task, so
the last bits of a sum change with the partitioning (0.6000000000000001 or 0.6), and they
differ from the local engine's. :func:`exact_sum` collects each group's values and runs, in
higher-order functions inside the one aggregate expression, the algorithm ``math.fsum``
runs (Shewchuk's exact partial sums, then one correctly rounded result, half to even): the
result is the exact sum rounded once, whatever the order, and equal to the local engine's
(:class:`blooml.ir.aggregates.ExactSum`). No Python runs; the cost is a ``collect_list`` per
group and a few additions per value and partial (measured in
``benchmarks/bench_exact_sum.py``).

NaN and infinities give what IEEE addition gives in any order (NaN for a NaN or for both
infinities). Finite values always give their exact total rounded once, even when partial sums
pass the largest double (1e308 + 1e308 - 1e308 is 1e308, where ``math.fsum`` raises
``OverflowError``); a total beyond it rounds to ±inf, as IEEE rounding of that exact value does.
So: values of magnitude 2**100 or more (rare) are summed apart, scaled by 2**-200 (exact, and
far from overflow), the others as they are; the two exact partial lists then combine either
unscaled (the large part below 2**1020: nothing overflows) or in the scaled domain with the
small part reduced to its sign (it then lies below the large part's last bit and only breaks
ties), rounded once and scaled back, where overflow gives the infinity.
"""

from __future__ import annotations

from typing import Any

__all__ = ["exact_avg", "exact_sum", "is_float_type"]

# The partials of Shewchuk's algorithm after one more value x: each partial y merged with x
# (hi = x + y and the exact rounding error lo), nonzero errors kept, x the last partial.
_GROW = """
aggregate(p, named_struct('x', x, 'out', CAST(array() AS array<double>)),
  (s, y) -> named_struct(
    'x', s.x + y,
    'out', CASE WHEN (IF(abs(s.x) < abs(y), s.x - ((s.x + y) - y), y - ((s.x + y) - s.x)))
                     != 0D
           THEN concat(s.out, array(IF(abs(s.x) < abs(y), s.x - ((s.x + y) - y),
                                       y - ((s.x + y) - s.x))))
           ELSE s.out END),
  s -> CASE WHEN s.x != 0D THEN concat(s.out, array(s.x)) ELSE s.out END)
"""

# The partials summed from the largest down until the sum is inexact, then fsum's
# half-to-even correction across the next partial.
_ROUND = """
aggregate(reverse({p}), named_struct('hi', 0D, 'lo', 0D, 'ph', 0),
  (s, y) -> CASE
    WHEN s.ph = 0 THEN named_struct('hi', y, 'lo', 0D, 'ph', 1)
    WHEN s.ph = 1 THEN named_struct(
      'hi', s.hi + y,
      'lo', y - ((s.hi + y) - s.hi),
      'ph', IF(y - ((s.hi + y) - s.hi) != 0D, 2, 1))
    WHEN s.ph = 2 THEN named_struct(
      'hi', IF((s.lo < 0D AND y < 0D) OR (s.lo > 0D AND y > 0D),
               IF(s.lo * 2D = (s.hi + s.lo * 2D) - s.hi, s.hi + s.lo * 2D, s.hi), s.hi),
      'lo', s.lo, 'ph', 3)
    ELSE s END,
  s -> s.hi)
"""


#: |v| from which a value is summed apart, scaled (2**100), the scale (2**-200, and back 2**200),
#: the large part's magnitude below which it combines unscaled (2**820 scaled, 2**1020 unscaled)
#: and the sticky value that stands for the small part's sign (2**-300, below any large unit:
#: values >= 2**100 are multiples of 2**48, scaled multiples of 2**-152)
#: (written as the shortest decimals that parse to those powers of two exactly)
_BIG, _DOWN, _UP, _NEAR, _STICKY = (f"{2.0**e!r}D" for e in (100, -200, 200, 820, -300))


def _partials(vals: str) -> str:
    """Shewchuk's exact partials of the array ``vals`` (increasing magnitude, nonzero)."""
    return f"aggregate({vals}, CAST(array() AS array<double>), (p, x) -> {_GROW})"


def _sql(vals: str) -> str:
    special = f"filter({vals}, v -> isnan(v) OR abs(v) = double('infinity'))"
    small = f"filter({vals}, v -> abs(v) < {_BIG})"
    big = f"transform(filter({vals}, v -> abs(v) >= {_BIG}), v -> v * {_DOWN})"
    # t.b: the large values' partials, scaled; t.s: the small ones'. u.p: the partials to round
    # (both lists' unscaled, or the large ones' with the small ones' sign), u.k: the scale back.
    far = f"(size(t.b) > 0 AND abs(element_at(t.b, -1)) >= {_NEAR})"
    merged = _partials(
        f"IF({far}, concat(t.b, IF(size(t.s) = 0, CAST(array() AS array<double>), "
        f"array(signum(element_at(t.s, -1)) * {_STICKY}))), "
        f"concat(transform(t.b, b -> b * {_UP}), t.s))"
    )
    chosen = (
        f"transform(array(named_struct('b', {_partials(big)}, 's', {_partials(small)})), t -> "
        f"named_struct('p', IF(size(t.b) = 0, t.s, {merged}), 'k', IF({far}, {_UP}, 1D)))[0]"
    )
    rounded = f"transform(array({chosen}), u -> ({_ROUND.format(p='u.p')}) * u.k)[0]"
    return (
        f"CASE WHEN size({vals}) = 0 THEN CAST(NULL AS double) "
        f"WHEN size({special}) > 0 THEN aggregate({special}, 0D, (a, v) -> a + v) "
        f"ELSE {rounded} END"
    )


def exact_sum(column: str) -> Any:
    """The aggregate Column: the exact, correctly rounded sum of ``column``'s non-NULL values
    taken as ``double`` (NULL when there is none): ``math.fsum``'s value, in any order.

    Args:
        column: the column's name (a plain name, quoted here).
    """
    from pyspark.sql import functions as F

    return F.expr(_sql(_values(column)))


def exact_avg(column: str) -> Any:
    """The aggregate Column: :func:`exact_sum` of ``column`` divided by the number of its
    non-NULL values (NULL when there is none)."""
    from pyspark.sql import functions as F

    return F.expr(f"({_sql(_values(column))}) / size({_values(column)})")


def _values(column: str) -> str:
    quoted = column.replace("`", "``")
    return f"collect_list(CAST(`{quoted}` AS double))"


def is_float_type(data_type: Any) -> bool:
    """Whether a Spark type is ``double`` or ``float`` (whose sums :func:`exact_sum` makes
    exact; integers and decimals are summed exactly by Spark's own ``sum``)."""
    from pyspark.sql.types import DoubleType, FloatType

    return isinstance(data_type, (DoubleType, FloatType))
