"""The aggregates' one definition, shared by the local and the Spark engine."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import ProgramError
from blooml.ir import AGG_NAMES, apply_aggregate


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


@pytest.mark.parametrize("fn", [n for n in AGG_NAMES if n != "count"])
def test_empty_column_is_none(fn):
    assert apply_aggregate(fn, [], [("a",)]) is None


def test_unknown_aggregate_names_the_known_ones():
    with pytest.raises(ProgramError, match=r"unknown aggregate 'median'.*bool_or"):
        apply_aggregate("median", [1], [(1,)])


@given(st.lists(st.integers(-5, 5), min_size=1))
def test_count_is_distinct_and_order_free(vals):
    rows = [(v,) for v in vals]
    assert apply_aggregate("count", vals, rows) == len(set(vals))
    assert apply_aggregate("sum", vals[::-1], rows) == sum(vals)
