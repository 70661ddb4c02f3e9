"""Lattice-valued DataFrame columns: conversions and ``merge_column``.

``merge_column`` lowers the merge of a natively stored builtin lattice to Spark SQL aggregates
(no Python worker runs); any other column goes through the RDD path (``merge_by_key``) with
the values pickled in a ``binary`` column.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from blooml.lattices._base import Lattice
from blooml.spark._formats import (
    ColumnFormat,
    _ArrayFormat,
    _BagFormat,
    _BoolFormat,
    _MapFormat,
    _ValueFormat,
    column_format,
    plain_hashable,
    spec_of,
)
from blooml.spark._lazy import require_dataframe, require_pyspark, require_rdd
from blooml.spark._rdd import merge_by_key

__all__ = [
    "from_spark",
    "merge_column",
    "spark_type",
    "to_dataframe",
    "to_rdd",
    "to_spark",
]


def to_spark(value: Lattice, spec: Any = None) -> Any:
    """Return the cell Spark stores for a lattice value (a field of a Row you create).

    ``lmax(3)`` → ``3``, ``lmax()`` → ``None``, ``lbool(True)`` → ``True``, ``lset({1, 2})`` →
    ``[1, 2]``, ``lbag`` → ``{elem: count}``, ``lmap`` of ``V`` → ``{key: V's cell}``; a CRDT or
    user lattice (or any value under ``Pickled(cls)``) → pickled bytes.

    Args:
        value: the lattice value.
        spec: the column spec (default: the value's own class; ``MapOf(V)`` for an ``lmap``).

    Raises:
        LatticeTypeError: ``value`` is a lattice of another class than the spec's.
        LatticeValueError: ``value`` is not a lattice value.
        TypeError: the spec is not a column spec, or an empty ``lmap`` without a spec.
    """
    if spec is None:
        if not isinstance(value, Lattice):
            column_format(type(value))  # raises the spec TypeError naming the value's type
        spec = spec_of(value)
    return column_format(spec).to_cell(value)


def from_spark(cell: Any, spec: Any) -> Lattice:
    """Return the lattice value stored in a collected cell (the inverse of :func:`to_spark`).

    ``None`` reads as ⊥ for every format. Structs (Rows) come back as tuples, and arrays inside
    set elements and map keys as tuples.

    Raises:
        LatticeValueError: the cell holds a value outside the lattice's domain.
        LatticeTypeError: a pickled cell holds a value of another lattice class.
        TypeError: ``spec`` is not a column spec.
    """
    return column_format(spec).from_cell(cell)


def spark_type(spec: Any, element: Any = None, *, key: Any = None) -> Any:
    """Return the Spark ``DataType`` of a lattice column, for an explicit schema.

    Args:
        spec: the column spec (``lmax``, ``lset``, ``MapOf(lmax)``, ``Pickled(cls)``, a CRDT).
        element: the Spark type of the stored values (``lmax``/``lmin``), set elements
            (``lset``/``lpset``), bag elements (``lbag``) or, under ``MapOf``, of the values'
            elements; not needed for ``lbool`` and pickled columns.
        key: the Spark type of the map keys (``MapOf``; nested maps share it).

    Example::

        spark_type(lset, LongType())                    # ArrayType(LongType(), False)
        spark_type(MapOf(lmax), LongType(), key=StringType())

    Raises:
        TypeError: a type the spec needs is missing.
    """
    require_pyspark("spark_type")
    return column_format(spec).spark_type(element, key)


def _key_list(feature: str, df: Any, key_cols: Any, column: str) -> list[str]:
    keys = [key_cols] if isinstance(key_cols, str) else list(key_cols)
    if not keys:
        raise ValueError(f"blooml.spark.{feature}: key_cols must name at least one column")
    missing = [c for c in [*keys, column] if c not in df.columns]
    if missing:
        raise ValueError(
            f"blooml.spark.{feature}: no column {missing[0]!r} in the DataFrame "
            f"(columns: {', '.join(df.columns)})"
        )
    if column in keys:
        raise ValueError(
            f"blooml.spark.{feature}: the lattice column {column!r} cannot also be a key column "
            "(lattice values cannot be keys)"
        )
    return keys


def to_rdd(df: Any, key_cols: str | Sequence[str], column: str, spec: Any) -> Any:
    """Return the RDD of ``(key, lattice value)`` stored in a DataFrame's lattice column.

    The key is the single key column's value, or a tuple of the key columns' values (structs as
    tuples, arrays as tuples).

    Raises:
        ValueError: a named column is missing or the lattice column is also a key column.
        TypeError: ``df`` is not a DataFrame or ``spec`` is not a column spec.
    """
    require_dataframe("to_rdd", df)
    keys = _key_list("to_rdd", df, key_cols, column)
    fmt = column_format(spec)
    return _to_rdd(df, keys, column, fmt)


def _to_rdd(df: Any, keys: list[str], column: str, fmt: ColumnFormat) -> Any:
    from_cell = fmt.from_cell
    n = len(keys)
    sub = df.select(*keys, column)
    if n == 1:
        return sub.rdd.map(lambda row: (plain_hashable(row[0]), from_cell(row[1])))
    return sub.rdd.map(lambda row: (plain_hashable(tuple(row[:n])), from_cell(row[n])))


def to_dataframe(
    rdd: Any,
    key_cols: str | Sequence[str],
    column: str,
    spec: Any = None,
    *,
    schema: Any = None,
    spark: Any = None,
) -> Any:
    """Return a DataFrame of an RDD of ``(key, lattice value)``, the values stored as ``spec``.

    A tuple key fills several key columns (``key_cols`` names one per element).

    Args:
        rdd: an RDD of ``(key, lattice value)`` pairs (as ``merge_by_key`` returns).
        key_cols: the key column name, or one name per key tuple element.
        column: the lattice column's name.
        spec: the column spec; default: the lattice class of the values, which must then be
            given for ``lmap`` (``MapOf(V)``).
        schema: an explicit ``StructType`` (key columns then the lattice column); default:
            inferred by Spark from the rows, which fails for a column that is ⊥ (NULL or empty)
            in every row — pass a schema built with :func:`spark_type` then.
        spark: the SparkSession (default: the active one).

    Raises:
        TypeError: ``rdd`` is not an RDD or ``spec`` is missing for ``lmap``.
        ValueError: the key tuple's length differs from ``key_cols`` (inside the job).
    """
    require_rdd("to_dataframe", rdd)
    keys = [key_cols] if isinstance(key_cols, str) else list(key_cols)
    if not keys:
        raise ValueError("blooml.spark.to_dataframe: key_cols must name at least one column")
    if spec is None:
        raise TypeError(
            "blooml.spark.to_dataframe needs the column spec (lmax, lset, MapOf(lmax), ...)"
        )
    fmt = column_format(spec)
    session = spark or _active_session("to_dataframe")
    rows = rdd.map(_row_maker(keys, fmt))
    return session.createDataFrame(rows, schema if schema is not None else [*keys, column])


def _row_maker(keys: list[str], fmt: ColumnFormat) -> Any:
    to_cell = fmt.to_cell
    n = len(keys)
    if n == 1:
        return lambda kv: (kv[0], to_cell(kv[1]))

    def row(kv: tuple[Any, Any]) -> tuple[Any, ...]:
        key = kv[0]
        if not isinstance(key, tuple) or len(key) != n:
            raise ValueError(
                f"blooml.spark.to_dataframe: key {key!r} does not fill the {n} key columns {keys!r}"
            )
        return (*key, to_cell(kv[1]))

    return row


def _active_session(feature: str) -> Any:
    require_pyspark(feature)
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError(f"blooml.spark.{feature}: no active SparkSession; pass spark=...")
    return session


def merge_column(
    df: Any,
    key_cols: str | Sequence[str],
    column: str,
    spec: Any,
    *,
    num_partitions: int | None = None,
) -> Any:
    """Merge a DataFrame's lattice column per key: one row per distinct key.

    The result has the key columns and the merged lattice column (other columns are dropped),
    with the input's column types. A row whose cell is NULL contributes ⊥.

    Natively stored builtins merge with Spark SQL aggregates alone, so no Python worker runs:
    ``lmax``/``lmin`` → ``max``/``min``, ``lbool`` → ``bool_or``, ``lset``/``lpset`` → explode +
    ``collect_set``, ``lbag`` and ``MapOf(V)`` → explode, V's merge per (key, map key), and
    ``map_from_entries``. Any other spec (CRDTs, user lattices, ``Pickled``) reads the pickled
    cells into Python and merges with :func:`merge_by_key`.

    Args:
        df: the DataFrame.
        key_cols: the key column name or names.
        column: the lattice column's name.
        spec: what the column holds (``lmax``, ``lset``, ``MapOf(lmax)``, a CRDT class, ...).
        num_partitions: partitions of the Python path's shuffle (the SQL path uses
            ``spark.sql.shuffle.partitions``).

    Raises:
        ValueError: a named column is missing, or the lattice column is a key column.
        TypeError: ``df`` is not a DataFrame, or ``spec`` is not a column spec.

    Example::

        df = spark.createDataFrame([("a", 1), ("a", 5), ("b", 2)], ["k", "best"])
        merge_column(df, "k", "best", lmax).collect()   # [Row(k='a', best=5), Row(k='b', best=2)]
    """
    require_dataframe("merge_column", df)
    keys = _key_list("merge_column", df, key_cols, column)
    fmt = column_format(spec)
    if fmt.native:
        return _merge_native(df, keys, column, fmt)
    return _merge_python(df, keys, column, fmt, num_partitions)


def _merge_python(
    df: Any, keys: list[str], column: str, fmt: ColumnFormat, num_partitions: int | None
) -> Any:
    schema = df.select(*keys, column).schema
    merged = merge_by_key(_to_rdd(df, keys, column, fmt), num_partitions, lattice=fmt.lattice)
    rows = merged.map(_row_maker(keys, fmt))
    return df.sparkSession.createDataFrame(rows, schema)


_fresh = itertools.count()


def _merge_native(df: Any, keys: list[str], column: str, fmt: ColumnFormat) -> Any:
    from pyspark.sql import functions as F

    tag = next(_fresh)
    groups = [f"__blooml_g{tag}_{i}" for i in range(len(keys))]
    value = f"__blooml_v{tag}"
    src = df.select(
        *[F.col(_q(k)).alias(g) for k, g in zip(keys, groups, strict=True)],
        F.col(_q(column)).alias(value),
    )
    out = _merge_groups(src, groups, value, fmt, f"{tag}_0")
    return out.select(
        *[F.col(g).alias(k) for g, k in zip(groups, keys, strict=True)],
        F.col(value).alias(column),
    )


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _merge_groups(df: Any, groups: list[str], value: str, fmt: ColumnFormat, tag: str) -> Any:
    """Merge ``value`` per ``groups`` with Spark SQL only; returns groups + value columns."""
    from pyspark.sql import functions as F

    if isinstance(fmt, (_ValueFormat, _BoolFormat)):
        return df.groupBy(*groups).agg(fmt.aggregate(F.col(value)).alias(value))
    if isinstance(fmt, _ArrayFormat):
        return (
            df.select(*groups, F.explode_outer(value).alias(value))
            .groupBy(*groups)
            .agg(F.collect_set(value).alias(value))
        )
    if isinstance(fmt, (_BagFormat, _MapFormat)):
        k, v = f"__blooml_mk{tag}", f"__blooml_mv{tag}"
        exploded = df.select(*groups, F.explode_outer(value).alias(k, v))
        # an lbag is a map element -> multiplicity whose multiplicities merge by max
        inner = fmt.values if isinstance(fmt, _MapFormat) else _ValueFormat(int, Lattice, "max")
        per_key = _merge_groups(exploded, [*groups, k], v, inner, tag + "_1")
        entry = F.when(F.col(k).isNotNull(), F.struct(F.col(k), F.col(v)))
        return per_key.groupBy(*groups).agg(F.map_from_entries(F.collect_list(entry)).alias(value))
    raise AssertionError(f"no native merge for {fmt!r}")  # pragma: no cover - fmt.native
