"""Python rows given as a tick's input, typed by their collection before Spark sees them.

``spark.createDataFrame(rows, names)`` infers each column's type from the values, so a column
of nothing but None fails (``CANNOT_DETERMINE_TYPE``), a column holding 3 and 2.5 fails
(``CANNOT_MERGE_TYPE``), a short row fails with a bare ``IndexError`` and a string bound for a
``double`` column fails later, inside a job (``CAST_INVALID_INPUT``). Here the rows are
checked on the driver against what the collection's columns are known to hold — the declared
schema (``SparkEngine(schemas=...)``), else the stored state's types, else the types learned
from earlier rows — and typed with an explicit schema: an integer in a ``double`` column
becomes a float, a float in a ``bigint`` column widens the column to ``double`` (the local
engine holds both), a column of only None takes its known type (and with none known yet is an
error that says to declare it: a ``void`` column would match no NULL in a join), and anything
else that does not fit is a :class:`ColumnValueError` naming
the collection, the column and the value, raised before any job. A row of the wrong arity is
the local engine's :class:`ProgramError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from blooml.errors import ColumnTypeError, ColumnValueError, ProgramError
from blooml.ir.coltypes import widened
from blooml.lattices import Lattice
from blooml.spark._formats import column_format

__all__ = ["check_frame_types", "typed_rows"]


def typed_rows(
    name: str,
    kind: str,
    columns: tuple[str, ...],
    data: Iterable[Any],
    known: Mapping[int, Any],
) -> tuple[list[tuple[Any, ...]], Any]:
    """The rows of a list input as Spark cells, and the ``StructType`` to build their frame
    with (fields named as the collection's columns).

    Args:
        name: the collection's name (for errors).
        kind: its kind (``table``, ``scratch``, ...; for errors).
        columns: its column names.
        data: the rows: tuples (or lists), or single values for a one-column collection;
            lattice values become their cells.
        known: column index -> the Spark ``DataType`` the column is known to hold.

    Raises:
        ProgramError: a row has a number of values other than the collection's columns.
        ColumnValueError: a value does not fit its column's type, or two values in one column
            have no common type (a string and a number).
    """
    from pyspark.sql.types import DoubleType, NullType, StructField, StructType

    width = len(columns)
    rows: list[tuple[Any, ...]] = []
    for r in data:
        row = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        if len(row) != width:
            raise ProgramError(
                f"input {name!r}: {kind} {name!r} has {width} columns {list(columns)}; got "
                f"{len(row)} values {row!r}"
            )
        rows.append(
            tuple(column_format(type(c)).to_cell(c) if isinstance(c, Lattice) else c for c in row)
        )
    types = []
    for i, col in enumerate(columns):
        t = known.get(i)
        if t is None or isinstance(t, NullType):
            t = _inferred(name, col, (r[i] for r in rows))
        elif _is_integral(t) and any(type(r[i]) is float for r in rows):
            t = DoubleType()  # 3 and 2.5: the column widens, as unionByName widens the state
        types.append(t)
    out = [list(r) for r in rows]
    for i, (col, t) in enumerate(zip(columns, types, strict=True)):
        if isinstance(t, NullType):
            if rows:
                # never a void column: Spark matches no NULL of one with <=> in a join
                raise ColumnValueError(
                    name,
                    col,
                    None,
                    "no known type",
                    "every row holds None there and no type is known yet; declare it: "
                    f"SparkEngine(..., schemas={{{name!r}: '<one Spark type per column>'}})",
                )
            continue
        fit = _fitter(name, col, t)
        for r in out:
            if r[i] is not None:
                r[i] = fit(r[i])
    schema = StructType([StructField(c, t, True) for c, t in zip(columns, types, strict=True)])
    return [tuple(r) for r in out], schema


def check_frame_types(
    name: str, columns: tuple[str, ...], df: Any, known: Mapping[int, Any]
) -> None:
    """Raise :class:`ColumnTypeError` when a column of the DataFrame ``df`` given as input
    for collection ``name`` holds a type the collection's column cannot take: a string or
    a boolean where numbers are known, a number where strings are (Spark would try to cast
    every value inside a job and fail there, ``CAST_INVALID_INPUT``, naming nothing).
    Numbers of any kind meet (the state widens), and types no check here knows pass."""
    from pyspark.sql.types import BooleanType, NullType, NumericType, StringType

    kinds = (NumericType, StringType, BooleanType)
    for i, f in enumerate(df.schema.fields):
        want = known.get(i)
        got = f.dataType
        if want is None or isinstance(want, NullType) or isinstance(got, NullType):
            continue
        k_want = next((k for k in kinds if isinstance(want, k)), None)
        k_got = next((k for k in kinds if isinstance(got, k)), None)
        if k_want is not None and k_got is not None and k_want is not k_got:
            col = columns[i] if i < len(columns) else f.name
            raise ColumnTypeError(
                f"{f.name}",
                got.simpleString(),
                want.simpleString(),
                f"input {name!r}: the DataFrame's column {f.name!r} is for {name!r} column "
                f"{col!r}, which holds {want.simpleString()}; cast it first "
                f"(F.col({f.name!r}).cast({want.simpleString()!r}))",
            )


def _is_integral(t: Any) -> bool:
    from pyspark.sql.types import IntegralType

    return isinstance(t, IntegralType)


def _inferred(name: str, col: str, values: Iterable[Any]) -> Any:
    """The Spark type of a column's values (``void`` when all are None): Spark's own inference
    per value, integers and floats widened to ``double``."""
    from pyspark.sql.types import DoubleType, NullType, _infer_type

    found: Any = NullType()
    first: Any = None
    for v in values:
        if v is None:
            continue
        try:
            t = _infer_type(v)
        except Exception as exc:
            raise ColumnValueError(name, col, v, "no Spark type", str(exc)) from None
        if isinstance(found, NullType):
            found, first = t, v
        elif t != found:
            # the widening rule the local engine's column_types="spark" shares
            if widened(found.simpleString(), t.simpleString()) == "double":
                found = DoubleType()
            else:
                raise ColumnValueError(
                    name,
                    col,
                    v,
                    found.simpleString(),
                    f"the same column holds {first!r}; a Spark column has one type",
                )
    return found


def _fitter(name: str, col: str, t: Any) -> Any:
    """A function that returns a value as a column of type ``t`` holds it (an int as a float
    in a ``double`` column) or raises :class:`ColumnValueError`."""
    from pyspark.sql.types import (
        BooleanType,
        FractionalType,
        IntegralType,
        StringType,
        _make_type_verifier,
    )

    where = t.simpleString()

    def bad(v: Any, why: str = "") -> ColumnValueError:
        return ColumnValueError(name, col, v, where, why)

    if isinstance(t, FractionalType) and not _is_decimal(t):

        def fit_float(v: Any) -> Any:
            if type(v) is float:
                return v
            if isinstance(v, int) and not isinstance(v, bool):
                return float(v)
            raise bad(v, "not a number")

        return fit_float
    if isinstance(t, IntegralType):
        bits = {"tinyint": 8, "smallint": 16, "int": 32}.get(t.simpleString(), 64)

        def fit_int(v: Any) -> Any:
            if isinstance(v, int) and not isinstance(v, bool):
                if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
                    raise bad(v, f"beyond a {bits}-bit integer")
                return v
            raise bad(v, "not an integer")

        return fit_int
    if isinstance(t, StringType):

        def fit_str(v: Any) -> Any:
            if isinstance(v, str):
                return v
            raise bad(v, "not a string")

        return fit_str
    if isinstance(t, BooleanType):

        def fit_bool(v: Any) -> Any:
            if isinstance(v, bool):
                return v
            raise bad(v, "not a boolean")

        return fit_bool
    verify = _make_type_verifier(t, nullable=True)

    def fit_other(v: Any) -> Any:
        try:
            verify(v)
        except (TypeError, ValueError) as exc:
            raise bad(v, str(exc)) from None
        return v

    return fit_other


def _is_decimal(t: Any) -> bool:
    from pyspark.sql.types import DecimalType

    return isinstance(t, DecimalType)
