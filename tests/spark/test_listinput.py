"""A list input typed by its collection on the driver (no Spark session needed): the known
column types win over inference, None never asks Spark to infer a type, int and float widen
to double, and what does not fit is named before any job."""

from __future__ import annotations

from typing import Any

import pytest

from blooml import lmin, lset
from blooml.errors import ColumnTypeError, ColumnValueError, ProgramError

T = pytest.importorskip("pyspark.sql.types", reason="needs pyspark")
from blooml.spark._listinput import typed_rows  # noqa: E402

COLS = ("src", "dst", "c")


def _types(schema: Any) -> list[str]:
    return [f.dataType.simpleString() for f in schema.fields]


def test_an_all_none_column_takes_the_known_type() -> None:
    known = {1: T.StringType(), 2: T.DoubleType()}
    rows, schema = typed_rows("link", "table", COLS, [("a", None, None)], known)
    assert rows == [("a", None, None)]
    assert _types(schema) == ["string", "string", "double"]
    assert [f.name for f in schema.fields] == list(COLS)
    # no type known: never inferred from None, never void (it matches no NULL in a join)
    with pytest.raises(ColumnValueError, match=r"'link' column 'c'.*declare it: SparkEngine"):
        typed_rows("link", "table", COLS, [("a", None, None)], {1: T.StringType()})


def test_ints_and_floats_in_one_column_widen_to_double() -> None:
    rows, schema = typed_rows("link", "table", COLS, [("a", "b", 3), ("b", "c", 2.5)], {})
    assert rows == [("a", "b", 3.0), ("b", "c", 2.5)] and type(rows[0][2]) is float
    assert _types(schema) == ["string", "string", "double"]
    # a float into a column known as bigint widens it (the state's union widens too)
    rows, schema = typed_rows("link", "table", COLS, [("a", "b", 2.5)], {2: T.LongType()})
    assert _types(schema)[2] == "double"
    # an int into a double column is a float
    rows, schema = typed_rows("link", "table", COLS, [("a", "b", 3)], {2: T.DoubleType()})
    assert rows == [("a", "b", 3.0)] and type(rows[0][2]) is float


def test_lattice_values_become_cells() -> None:
    rows, schema = typed_rows(
        "path", "table", ("k", "d", "s"), [("a", lmin(3), lset({1, 2}))], {1: T.DoubleType()}
    )
    assert rows[0][:2] == ("a", 3.0) and sorted(rows[0][2]) == [1, 2]
    assert _types(schema) == ["string", "double", "array<bigint>"]


def test_wrong_arity_is_a_program_error_naming_the_collection() -> None:
    with pytest.raises(ProgramError, match=r"input 'link': table 'link' has 3 columns") as info:
        typed_rows("link", "table", COLS, [("a", "b", 1), ("a", "b")], {})
    assert "('a', 'b')" in str(info.value)


@pytest.mark.parametrize(
    ("value", "known", "why"),
    [
        ("x", T.DoubleType(), "not a number"),
        (True, T.LongType(), "not an integer"),
        (7, T.StringType(), "not a string"),
        (2**70, T.LongType(), "beyond a 64-bit integer"),
        (2**40, T.IntegerType(), "beyond a 32-bit integer"),
    ],
)
def test_a_value_that_does_not_fit_names_collection_column_and_value(
    value: Any, known: Any, why: str
) -> None:
    with pytest.raises(ColumnValueError) as info:
        typed_rows("link", "table", COLS, [("a", "b", value)], {2: known})
    exc = info.value
    assert isinstance(exc, ColumnTypeError)
    assert (exc.collection, exc.column, exc.value) == ("link", "c", value)
    assert f"'link' column 'c' holds {known.simpleString()}" in str(exc) and why in str(exc)


def test_two_types_in_one_column_are_named() -> None:
    with pytest.raises(ColumnValueError, match=r"'link' column 'c'.* holds 'direct'"):
        typed_rows("link", "table", COLS, [("a", "b", "direct"), ("a", "c", 3)], {})


def test_a_dataframe_column_of_another_kind_is_named() -> None:
    from types import SimpleNamespace

    from blooml.spark._listinput import check_frame_types

    df = SimpleNamespace(
        schema=T.StructType(
            [T.StructField("a", T.StringType()), T.StructField("price", T.StringType())]
        )
    )
    with pytest.raises(ColumnTypeError, match=r"input 'item'.*column 'v', which holds double"):
        check_frame_types("item", ("k", "v"), df, {0: T.StringType(), 1: T.DoubleType()})
    # numbers of another width meet (the state widens); unknown columns pass
    df.schema = T.StructType([T.StructField("a", T.StringType()), T.StructField("p", T.LongType())])
    check_frame_types("item", ("k", "v"), df, {1: T.DoubleType()})
