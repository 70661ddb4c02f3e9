"""Lattice-valued DataFrame columns: conversions and ``merge_column``.

``merge_column`` merges as ``groupBy(keys).agg(lmerge(column, spec))`` does: natively stored
builtins and ``Structured`` CRDTs in Spark SQL (sets and maps as the explode-and-aggregate plans
a Spark user writes), pickled values (user lattices) in an Arrow UDF.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blooml.lattices._base import Lattice
from blooml.spark._formats import (
    ColumnFormat,
    check_column_type,
    column_format,
    plain_hashable,
    spec_of,
)
from blooml.spark._lazy import (
    check_worker_python,
    is_connect,
    no_rdds_on_connect,
    require_dataframe,
    require_pyspark,
    require_rdd,
)

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
        NotSupportedOnSpark: ``df`` is a Spark Connect DataFrame (Connect has no RDDs; the
            message names the DataFrame functions to use instead).
    """
    require_dataframe("to_rdd", df, needs_rdd=True)
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
        NotSupportedOnSpark: ``spark`` is a Spark Connect session (Connect has no RDDs).
        ValueError: the key tuple's length differs from ``key_cols`` (inside the job).
    """
    if spark is not None and is_connect(spark):
        raise no_rdds_on_connect("to_dataframe")
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

    The result equals ``df.groupBy(*key_cols).agg(lmerge(column, spec))``
    (:func:`blooml.spark.functions.lmerge`), planned as a Spark user would write it by hand:
    ``lmax``/``lmin`` → ``max``/``min``, ``lbool`` → ``bool_or``, ``lset``/``lpset`` → the
    elements exploded and ``collect_set`` per key, ``lbag``/``MapOf(V)`` → the two-level
    aggregation (entries exploded, V's merge per ``(key, map key)``, ``map_from_entries`` per
    key), ``Structured`` CRDTs → their parts' merges. No Python worker runs for these. Any
    other spec (a user lattice, a pickled CRDT, ``Pickled``) merges each key's cells in a
    vectorized Arrow UDF. Works on classic and Spark Connect sessions.

    On a streaming DataFrame (which cannot chain aggregations) map-valued cells (``lbag``,
    ``MapOf``, ``Structured`` CRDTs) merge as
    :func:`blooml.spark.functions.stream_lmerge` merges them: the state per key is the merged
    value, the output is in ``update`` mode. The other specs merge in one streaming aggregate.

    Args:
        df: the DataFrame.
        key_cols: the key column name or names.
        column: the lattice column's name.
        spec: what the column holds (``lmax``, ``lset``, ``MapOf(lmax)``, a CRDT class, ...).
        num_partitions: partitions of the result (default: ``spark.sql.shuffle.partitions``).

    Raises:
        ValueError: a named column is missing, or the lattice column is a key column.
        TypeError: ``df`` is not a DataFrame, or ``spec`` is not a column spec.
        ColumnTypeError: the column's Spark type cannot hold ``spec``'s cells (checked before
            any job runs).

    Example::

        df = spark.createDataFrame([("a", 1), ("a", 5), ("b", 2)], ["k", "best"])
        merge_column(df, "k", "best", lmax).collect()   # [Row(k='a', best=5), Row(k='b', best=2)]
    """
    require_dataframe("merge_column", df)
    from pyspark.sql import functions as F

    from blooml.spark.functions import _spec_name, merge_aggregate

    keys = _key_list("merge_column", df, key_cols, column)
    fmt = column_format(spec)
    if num_partitions is not None and (
        isinstance(num_partitions, bool)
        or not isinstance(num_partitions, int)
        or num_partitions < 1
    ):
        raise ValueError(
            f"blooml.spark.merge_column: num_partitions must be a positive int or None, got "
            f"{num_partitions!r}"
        )
    check_column_type("merge_column", fmt, column, df.schema[column].dataType)
    if not fmt.native:
        check_worker_python("merge_column", df.sparkSession)
    call = f"merge_column(df, {keys!r}, {column!r}, {_spec_name(spec)})"
    src = df if num_partitions is None else df.repartition(num_partitions, *[_q(k) for k in keys])
    if df.isStreaming and fmt.kind in ("bag", "map", "struct"):
        # one aggregate's buffer would hold every cell: keep the merged value as the state
        from blooml.spark._statefold import stream_merge

        return stream_merge(
            src, keys, [column], spec, fold=False, alias=column, feature="merge_column"
        )
    if not fmt.native:
        key = F.struct(*[F.col(_q(k)) for k in keys])
        agg = merge_aggregate(fmt, F.col(_q(column)), call, key=key)
        return src.groupBy(*[F.col(_q(k)) for k in keys]).agg(agg.alias(column))
    return _merged(src, keys, column, fmt, call, df.isStreaming, 0)


def _merged(
    df: Any, keys: list[str], column: str, fmt: ColumnFormat, call: str, streaming: bool, depth: int
) -> Any:
    """``df`` grouped by ``keys``, ``column`` merged as ``fmt`` cells: the plan that a Spark
    user writes by hand for each family, linear in the rows.

    Sets: the elements exploded, then ``collect_set`` per key (the buffer is the merged set).
    Maps and bags: the two-level aggregation -- entries exploded, their values merged per
    ``(key, map key)`` (recursively for nested maps), then ``map_from_entries`` per key. A
    streaming DataFrame cannot chain two aggregations, so there maps merge in one aggregate
    (:func:`blooml.spark.functions.merge_aggregate`: sorted runs per map key), as do the
    other families.
    """
    from pyspark.sql import functions as F

    from blooml.spark._formats import _ArrayFormat, _BagFormat, _MapFormat
    from blooml.spark.functions import _entry_format, merge_aggregate

    by = [F.col(_q(k)) for k in keys]
    cell = F.col(_q(column))
    if isinstance(fmt, _ArrayFormat):
        # explode_outer keeps the keys whose cells are all NULL or empty: they merge to []
        elements = df.select(*by, F.explode_outer(cell).alias(column))
        return elements.groupBy(*by).agg(F.collect_set(_q(column)).alias(column))
    if isinstance(fmt, (_BagFormat, _MapFormat)) and not streaming:
        mk, mv = f"__blooml_key{depth}", f"__blooml_value{depth}"
        entries = df.select(*by, F.explode_outer(cell).alias(mk, mv))
        inner = _merged(entries, [*keys, mk], mv, _entry_format(fmt), call, streaming, depth + 1)
        # a key with no entries keeps one row whose map key is NULL: it merges to {}
        entry = F.when(F.col(mk).isNotNull(), F.struct(F.col(mk), F.col(_q(mv))))
        merged = F.map_from_entries(F.collect_list(entry))
        return inner.groupBy(*by).agg(merged.alias(column))
    return df.groupBy(*by).agg(merge_aggregate(fmt, cell, call).alias(column))


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
