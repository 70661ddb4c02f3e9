"""``exact_sum``/``exact_avg`` (fsum's algorithm in Spark SQL) equal ``math.fsum`` and the local
engine's ``ExactSum`` on every group, whatever the partitioning: many groups per Spark job."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.ir.aggregates import ExactSum

pytestmark = pytest.mark.spark

#: mixed magnitudes, cancellations, ties to even, subnormals, ints; no value near overflow
VALUES = st.one_of(
    st.floats(-1e30, 1e30, allow_nan=False),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 1.0, 5e-324, -0.0, 2.0**53, 1.5]),
    st.integers(-(2**40), 2**40),
)
GROUPS = st.lists(st.lists(st.one_of(st.none(), VALUES), max_size=12), min_size=1, max_size=60)


def _want(vals: list[Any]) -> Any:
    s = ExactSum()
    for v in vals:
        if v is not None:
            s.add(float(v))
    return s.value()


@settings(max_examples=2, deadline=None)
@given(groups=GROUPS)
def test_exact_sum_is_fsum_on_every_group(spark: Any, groups: list[list[Any]]) -> None:
    _check_groups(spark, groups)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(groups=GROUPS)
def test_exact_sum_is_fsum_on_many_groups(spark: Any, groups: list[list[Any]]) -> None:
    _check_groups(spark, groups)


def _check_groups(spark: Any, groups: list[list[Any]]) -> None:
    """Every group's exact_sum and exact_avg (one Spark job for all) against the local
    ExactSum and math.fsum."""
    from blooml.spark._exactsum import exact_avg, exact_sum

    rows = [(g, None if v is None else float(v)) for g, vs in enumerate(groups) for v in vs]
    rows += [(g, None) for g in range(len(groups))]  # every group exists, NULLs skipped
    df = spark.createDataFrame(rows, "g bigint, v double").repartition(3)
    got = {
        r.g: (r.s, r.a)
        for r in df.groupBy("g").agg(exact_sum("v").alias("s"), exact_avg("v").alias("a")).collect()
    }
    for g, vs in enumerate(groups):
        want = _want(vs)
        s, a = got[g]
        assert s == want, (g, vs)
        kept = [float(v) for v in vs if v is not None]
        if kept:
            assert s == math.fsum(kept)
            assert a == want / len(kept)
        else:
            assert a is None


#: values near the largest double (partial sums overflow), tiny ones, and everything between
HUGE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [1.7976931348623157e308, 2.0**1023, 1e308, 2.0**970, 2.0**100, 1.0, 5e-324]
    ).flatmap(lambda v: st.sampled_from([v, -v])),
)


HUGE_GROUPS = st.lists(st.lists(HUGE, min_size=1, max_size=10), min_size=1, max_size=80)


@settings(max_examples=2, deadline=None)
@given(groups=HUGE_GROUPS)
def test_exact_sum_of_huge_floats_agrees_with_the_local_engine(
    spark: Any, groups: list[list[float]]
) -> None:
    """Partial sums past 1.8e308: the exact total rounded once (±inf only when the total
    itself rounds beyond the largest double), on Spark as locally, on every group."""
    _check_huge(spark, groups)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(groups=HUGE_GROUPS)
def test_exact_sum_of_many_huge_floats_agrees_with_the_local_engine(
    spark: Any, groups: list[list[float]]
) -> None:
    _check_huge(spark, groups)


def _check_huge(spark: Any, groups: list[list[float]]) -> None:
    from blooml.spark._exactsum import exact_sum

    rows = [(g, v) for g, vs in enumerate(groups) for v in vs]
    df = spark.createDataFrame(rows, "g bigint, v double").repartition(2)
    got = {r.g: r.s for r in df.groupBy("g").agg(exact_sum("v").alias("s")).collect()}
    for g, vs in enumerate(groups):
        assert got[g] == _want(vs), (g, vs)


def test_exact_sum_past_the_largest_double_on_fixed_cases(spark: Any) -> None:
    from blooml.spark._exactsum import exact_sum

    big, top = 1e308, 1.7976931348623157e308
    groups = {
        0: [big, big, -big],  # fsum raises: intermediate overflow; exactly 1e308
        1: [big, big],  # the total overflows: inf
        2: [top, 2.0**970, -(2.0**970), 5e-324],  # back below: the largest double
        3: [top, 2.0**970],  # exactly halfway to 2**1024: ties to even, inf
        4: [top, 2.0**970, -5e-324],  # just below halfway: the largest double
        5: [-top, -top, top, top, 1.5],  # cancels to 1.5
        6: [top, top, -top, -top, 5e-324],  # cancels to the smallest subnormal
    }
    rows = [(g, v) for g, vs in groups.items() for v in vs]
    df = spark.createDataFrame(rows, "g bigint, v double")
    got = {r.g: r.s for r in df.groupBy("g").agg(exact_sum("v").alias("s")).collect()}
    want = [big, math.inf, top, math.inf, top, 1.5, 5e-324]
    assert [got[g] for g in range(len(want))] == want
    assert [_want(groups[g]) for g in range(len(want))] == want


def test_non_finite_values_sum_as_ieee_addition_does(spark: Any) -> None:
    from blooml.spark._exactsum import exact_sum

    inf, nan = math.inf, math.nan
    groups = {0: [inf, 1.0], 1: [inf, -inf], 2: [nan, 1.0], 3: [-inf, -inf, 2.0]}
    rows = [(g, v) for g, vs in groups.items() for v in vs]
    df = spark.createDataFrame(rows, "g bigint, v double")
    got = {r.g: r.s for r in df.groupBy("g").agg(exact_sum("v").alias("s")).collect()}
    assert got[0] == inf and math.isnan(got[1]) and math.isnan(got[2]) and got[3] == -inf
    for g, vs in groups.items():
        want = _want(vs)
        assert want == got[g] or (math.isnan(want) and math.isnan(got[g]))
