"""The aggregates' one definition, shared by the local and the Spark engine."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import ProgramError
from blooml.ir import AGG_NAMES, apply_aggregate
from blooml.ir.aggregates import ExactSum, exact_sum


def test_each_aggregate():
    rows = [("a", 1), ("b", 2), ("c", 2)]
    vals = [1, 2, 2]
    assert apply_aggregate("count", rows, rows) == 3  # count(): rows
    assert apply_aggregate("count", vals, rows) == 2  # count(col): distinct values
    assert apply_aggregate("sum", vals, rows) == 5
    assert apply_aggregate("min", vals, rows) == 1
    assert apply_aggregate("max", vals, rows) == 2
    assert apply_aggregate("avg", vals, rows) == 5 / 3
    assert apply_aggregate("accum", vals, rows) == frozenset({1, 2})
    assert apply_aggregate("bool_and", [True, False], rows) is False
    assert apply_aggregate("bool_or", [True, False], rows) is True


@pytest.mark.parametrize("fn", [n for n in AGG_NAMES if n not in ("count", "accum")])
def test_a_column_of_only_none_is_none(fn):
    """Spark SQL: an aggregate skips NULL; with nothing left it is NULL."""
    assert apply_aggregate(fn, [], [("a",)]) is None
    assert apply_aggregate(fn, [None, None], [("a",), ("b",)]) is None


def test_none_is_skipped_by_every_column_aggregate():
    rows = [("a",), ("b",), ("c",), ("d",)]
    vals = [2, None, 3, None]
    assert apply_aggregate("count", rows, rows) == 4  # count() counts rows, NULLs too
    assert apply_aggregate("count", vals, rows) == 2  # count(c): distinct non-NULL values
    assert apply_aggregate("count", [None], rows[:1]) == 0
    assert apply_aggregate("sum", vals, rows) == 5
    assert apply_aggregate("avg", vals, rows) == 2.5
    assert apply_aggregate("min", vals, rows) == 2
    assert apply_aggregate("max", vals, rows) == 3
    assert apply_aggregate("accum", vals, rows) == frozenset({2, 3})
    assert apply_aggregate("accum", [None], rows[:1]) == frozenset()  # collect_set: []
    assert apply_aggregate("bool_and", [True, None], rows[:2]) is True
    assert apply_aggregate("bool_or", [False, None], rows[:2]) is False


def test_float_sums_are_correctly_rounded():
    rows = [(1,), (2,), (3,)]
    assert apply_aggregate("sum", [0.1, 0.2, 0.3], rows) == 0.6  # 0.1 + 0.2 + 0.3 is not
    assert apply_aggregate("sum", [1e100, 1.0, -1e100], rows) == 1.0
    assert apply_aggregate("sum", [1e308, 1e308, -1e308], rows) == 1e308  # fsum overflows
    assert apply_aggregate("sum", [3, 2.5], rows[:2]) == 5.5
    assert type(apply_aggregate("sum", [3, 2], rows[:2])) is int
    assert math.isnan(apply_aggregate("sum", [math.inf, -math.inf, 1.0], rows))
    assert apply_aggregate("sum", [math.inf, 1.0], rows[:2]) == math.inf


FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**60), 2**60))


@given(st.lists(st.tuples(FLOATS, st.integers(1, 3))), st.randoms())
def test_exact_sum_with_weights_is_fsum_in_any_order(items, rnd):
    """The incremental sum (values added with weights, some retracted again) is the
    non-incremental one, which is ``math.fsum`` when that does not overflow."""
    flat = [v for v, w in items for _ in range(w)]
    s = ExactSum()
    order = list(items)
    rnd.shuffle(order)
    for v, w in order:
        s.add(v, w + 1)
        s.add(v, -1)
    if not flat:
        assert s.value() is None
        return
    got = s.value()
    assert got == exact_sum(flat[::-1])
    if any(type(v) is float for v in flat):
        try:
            want = math.fsum(flat)
        except OverflowError:
            return
        assert got == want or (math.isinf(got) and math.isinf(want))
    else:
        assert got == sum(flat)


#: values near the largest double (partial sums overflow), tiny ones, and everything between
HUGE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7976931348623157e308, 2.0**1023, 1e308, 2.0**970, 1.0, 5e-324]).flatmap(
        lambda v: st.sampled_from([v, -v])
    ),
)


def fraction_sum(vals: list[float]) -> float:
    """The exact total of ``vals`` rounded once (half to even), ±inf when that rounding
    overflows, as IEEE rounding of the exact value gives: the sums' one semantics."""
    from fractions import Fraction

    total = sum((Fraction(v) for v in vals), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


@given(st.lists(HUGE, min_size=1, max_size=12))
def test_exact_sum_of_huge_floats_is_the_exact_total_rounded_once(vals):
    """Partial sums past 1.8e308 do not matter (fsum raises there): the exact total, rounded
    once; ±inf only when the total itself rounds beyond the largest double."""
    s = ExactSum()
    for v in vals:
        s.add(v)
    assert s.value() == fraction_sum(vals)


def test_unknown_aggregate_names_the_known_ones():
    with pytest.raises(ProgramError, match=r"unknown aggregate 'median'.*bool_or"):
        apply_aggregate("median", [1], [(1,)])


@given(st.lists(st.integers(-5, 5), min_size=1))
def test_count_is_distinct_and_order_free(vals):
    rows = [(v,) for v in vals]
    assert apply_aggregate("count", vals, rows) == len(set(vals))
    assert apply_aggregate("sum", vals[::-1], rows) == sum(vals)


def test_exact_sum_of_other_numbers_uses_plus():
    from decimal import Decimal

    assert exact_sum([Decimal("0.1"), Decimal("0.2"), 1]) == Decimal("1.3")
