"""Streaming lattice merges whose state is the merged value: ``stream_lfold`` / ``stream_lmerge``.

A streaming ``groupBy(...).agg(lfold(...))`` keeps, as its state, Spark's aggregation buffer:
for a map of ordered values (``MapOf(lmax)``, ``lgcounter``, ``lvclock``) that is each distinct
``(key, value)`` entry, and for an ``lmerge`` of map cells every cell -- the state grows with
the rows seen. Spark has no built-in aggregate that merges maps, and PySpark no UDAF with a
user-defined buffer, so the bounded plan is arbitrary stateful processing:
``groupBy(keys).applyInPandasWithState``, one Python call per group and micro-batch, whose
state per group is the merged lattice value itself: its Spark cell (the column's own
encoding) as msgpack bytes -- never pickle; decoding rebuilds the value through the column
format's validating ``from_cell``. (A Spark-typed state would need map types in the state
schema, which the Python worker of Spark 4.3 cannot parse.) The output (update
mode) is one row per group that the micro-batch touched, holding the whole merged value, in
the same Spark type as the batch ``lfold``/``lmerge`` column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from blooml.errors import CodecError, LatticeValueError, NotSupportedOnSpark
from blooml.spark._formats import (
    ColumnFormat,
    _ArrayFormat,
    _BagFormat,
    _BoolFormat,
    _MapFormat,
    _PickleFormat,
    _StructFormat,
    _ValueFormat,
    check_column_type,
    column_format,
)
from blooml.spark._lazy import check_worker_python, require_dataframe

#: msgpack extension codes of the cell values msgpack has no type for
_EXT_DECIMAL, _EXT_DATETIME, _EXT_DATE, _EXT_TIMEDELTA = 1, 2, 3, 4

#: The struct column carrying each input row's item (or cell) columns into the Python worker:
#: inside a struct, pandas gets Python ints and ``None`` (a top-level nullable ``bigint``
#: column would arrive as ``float64`` with ``NaN``, losing integers above 2**53).
_ROW = "__blooml_row"


def stream_merge(
    df: Any,
    key_cols: str | Sequence[str],
    cols: list[str],
    spec: Any,
    *,
    fold: bool,
    alias: str,
    feature: str,
) -> Any:
    """The streaming DataFrame of ``df``'s groups merged with state = the merged value."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StructField, StructType

    from blooml.spark._columns import _q
    from blooml.spark.functions import _spec_name, lfold, lmerge

    fmt = column_format(spec)
    keys = _keys(feature, df, key_cols, cols)
    if not isinstance(alias, str) or not alias:
        raise ValueError(f"blooml.spark.{feature}: alias must be a non-empty str, got {alias!r}")
    if alias in keys:
        raise ValueError(
            f"blooml.spark.{feature}: alias {alias!r} is also a key column; name the merged "
            "column differently"
        )
    if not fold:
        check_column_type(feature, fmt, cols[0], df.schema[cols[0]].dataType)
    by = [F.col(_q(k)) for k in keys]
    agg = lfold([F.col(_q(c)) for c in cols], spec) if fold else lmerge(F.col(_q(cols[0])), spec)
    # the batch plan of the same merge: its schema is the output's, and it runs on a batch df
    batch = df.groupBy(*by).agg(agg.alias(alias))
    if not df.isStreaming:
        if fold or not fmt.native:
            return batch
        from blooml.spark._columns import merge_column

        merged = merge_column(df, keys, cols[0], spec)  # the linear two-level plan
        return merged if alias == cols[0] else merged.withColumnRenamed(cols[0], alias)
    if isinstance(fmt, _PickleFormat):
        raise NotSupportedOnSpark(
            f"blooml.spark.{feature} of {_spec_name(spec)}",
            "its cells are pickled, and streaming state is never pickle: store the values "
            "natively (a builtin, MapOf(V), or Structured(cls) for lorset, l2pset, lgcounter, "
            "lvclock), or keep groupBy().agg(lfold/lmerge), whose state keeps every row",
        )
    check_worker_python(feature, df.sparkSession)
    out_schema = batch.schema
    row_type = StructType(
        [StructField(f"_{i}", df.schema[c].dataType, True) for i, c in enumerate(cols)]
    )
    call = f"{feature}(df, {keys!r}, {cols[0] if len(cols) == 1 else cols!r}, {_spec_name(spec)})"
    func = _group_function(fmt, row_type, fold=fold, call=call, alias=alias, keys=keys)
    state_schema = StructType([StructField("value", BinaryType(), False)])
    rows = df.select(
        *by, F.struct(*[F.col(_q(c)).alias(f"_{i}") for i, c in enumerate(cols)]).alias(_ROW)
    )
    return rows.groupBy(*by).applyInPandasWithState(
        func, out_schema, state_schema, "update", "NoTimeout"
    )


def _keys(feature: str, df: Any, key_cols: Any, cols: list[str]) -> list[str]:
    require_dataframe(feature, df)
    keys = [key_cols] if isinstance(key_cols, str) else list(key_cols)
    if not keys:
        raise ValueError(f"blooml.spark.{feature}: key_cols must name at least one column")
    for c in [*keys, *cols]:
        if not isinstance(c, str):
            raise TypeError(
                f"blooml.spark.{feature}: columns are given by name (str), got "
                f"{type(c).__qualname__} ({c!r:.80})"
            )
    if not cols:
        raise ValueError(f"blooml.spark.{feature}: give at least one item column")
    missing = [c for c in [*keys, *cols] if c not in df.columns]
    if missing:
        raise ValueError(
            f"blooml.spark.{feature}: no column {missing[0]!r} in the DataFrame "
            f"(columns: {', '.join(df.columns)})"
        )
    both = [c for c in cols if c in keys]
    if both:
        raise ValueError(
            f"blooml.spark.{feature}: column {both[0]!r} is both a key column and merged "
            "(lattice values cannot be keys)"
        )
    return keys


# -- on the workers -----------------------------------------------------------------------------


def _group_function(
    fmt: ColumnFormat,
    row_type: Any,
    *,
    fold: bool,
    call: str,
    alias: str,
    keys: list[str],
) -> Callable[..., Any]:
    """The function ``applyInPandasWithState`` calls per group and micro-batch."""
    read_row = _reader(row_type)
    value_of = _item_value(fmt) if fold else _cell_value(fmt)
    to_cell, from_cell = fmt.to_cell, fmt.from_cell
    cls = fmt.lattice

    def merge_group(key: tuple[Any, ...], pdfs: Any, state: Any) -> Any:
        import pandas as pd

        from blooml.spark._errors import WorkerErrors

        plain_key = tuple(_plain(k) for k in key)
        try:
            b = cls.builder()
            if state.exists:
                b.merge(from_cell(unpack_state(state.get[0])))
            seen: set[Any] = set()
            for pdf in pdfs:
                for raw in pdf[_ROW]:
                    row = read_row(raw)
                    if fold:  # merge is idempotent: a repeated item adds nothing
                        try:
                            if row in seen:
                                continue
                            seen.add(row)
                        except TypeError:  # an unhashable item (an array or map column)
                            pass
                    value = value_of(row)
                    if value is not None:
                        b.merge(value)
            merged = b.freeze()
            cell = to_cell(merged)
            state.update((pack_state(cell),))
        except Exception as exc:
            WorkerErrors(call).raise_for(exc, plain_key[0] if len(keys) == 1 else plain_key)
        out = {k: [v] for k, v in zip(keys, plain_key, strict=True)}
        out[alias] = [cell]
        yield pd.DataFrame(out)

    return merge_group


def _plain(x: Any) -> Any:
    """A numpy scalar as the Python value it holds."""
    item = getattr(x, "item", None)
    return item() if item is not None and type(x).__module__ == "numpy" else x


def _reader(dt: Any) -> Callable[[Any], Any]:
    """Turn a value pandas holds for Spark type ``dt`` into what ``collect()`` gives: maps as
    dicts, arrays (numpy arrays in pandas) as lists, structs (dicts) as tuples."""
    from pyspark.sql import types as T

    if isinstance(dt, T.MapType):
        rk, rv = _reader(dt.keyType), _reader(dt.valueType)

        def read_map(x: Any) -> Any:
            if x is None:
                return None
            pairs = x.items() if hasattr(x, "items") else x
            return {rk(k): rv(v) for k, v in pairs}

        return read_map
    if isinstance(dt, T.ArrayType):
        re = _reader(dt.elementType)
        return lambda x: None if x is None else [re(e) for e in x]
    if isinstance(dt, T.StructType):
        fields = [(f.name, _reader(f.dataType)) for f in dt.fields]

        def read_struct(x: Any) -> Any:
            if x is None:
                return None
            if isinstance(x, dict):
                return tuple(r(x[name]) for name, r in fields)
            return tuple(r(v) for (_, r), v in zip(fields, x, strict=True))

        return read_struct
    return _plain


def _cell_value(fmt: ColumnFormat) -> Callable[[tuple[Any, ...]], Any]:
    """A row ``(cell,)`` as a lattice value (None: a NULL cell, ⊥)."""
    from_cell = fmt.from_cell
    return lambda row: None if row[0] is None else from_cell(row[0])


def _item_value(fmt: ColumnFormat) -> Callable[[tuple[Any, ...]], Any]:
    """A row of item columns as the lattice value its item folds to (None: an item with a NULL,
    ⊥), exactly as the SQL ``lfold`` reads it: each item as its singleton cell."""
    from_cell = fmt.from_cell
    singleton = _singleton_cell(fmt)

    def value(row: tuple[Any, ...]) -> Any:
        if any(v is None for v in row):
            return None
        cell = singleton(row)
        return None if cell is None else from_cell(cell)

    return value


def _singleton_cell(fmt: ColumnFormat) -> Callable[[tuple[Any, ...]], Any]:
    """The cell of one item (a row of item columns, none NULL), as the SQL fold builds it."""
    if isinstance(fmt, (_ValueFormat, _BoolFormat)):
        return lambda row: row[0]
    if isinstance(fmt, _ArrayFormat):
        return lambda row: [row[0]]
    if isinstance(fmt, _BagFormat):
        return lambda row: {row[0]: 1}
    if isinstance(fmt, _MapFormat):
        return lambda row: {row[0]: row[1]}
    if isinstance(fmt, _StructFormat):
        from blooml.lattices.crdts import l2pset, lgcounter, lorset, lvclock

        if fmt.lattice in (lgcounter, lvclock):
            return lambda row: {row[0]: row[1]} if row[1] > 0 else None  # as SQL: counts > 0
        if fmt.lattice is lorset:
            return lambda row: ({row[0]: [row[1]]}, {})
        if fmt.lattice is l2pset:
            return lambda row: ([row[0]], [])
    raise LatticeValueError(repr(fmt.spec), fmt, "no streaming fold for this spec")


# -- the state's bytes: a cell as msgpack ------------------------------------------------------


def pack_state(cell: Any) -> bytes:
    """A Spark cell (what ``to_cell`` returns: scalars, lists, tuples, dicts) as msgpack bytes;
    decimals, dates, timestamps and intervals as extension types."""
    import msgpack

    try:
        return msgpack.packb(cell, default=_ext, use_bin_type=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(
            "unencodable", f"cannot keep {cell!r:.200} as streaming state: {exc}", cell
        ) from None


def unpack_state(data: bytes) -> Any:
    """The cell :func:`pack_state` packed: arrays as tuples (hashable, so struct and array
    keys of maps come back as keys), maps as dicts."""
    import msgpack

    try:
        return msgpack.unpackb(
            data, use_list=False, strict_map_key=False, ext_hook=_from_ext, raw=False
        )
    except Exception as exc:  # msgpack raises several types on garbage
        raise CodecError(
            "malformed", f"the streaming state is not a blooml state value: {exc}"
        ) from None


def _ext(obj: Any) -> Any:
    import datetime
    import decimal

    import msgpack

    if isinstance(obj, decimal.Decimal):
        return msgpack.ExtType(_EXT_DECIMAL, str(obj).encode())
    if isinstance(obj, datetime.datetime):
        return msgpack.ExtType(_EXT_DATETIME, obj.isoformat().encode())
    if isinstance(obj, datetime.date):
        return msgpack.ExtType(_EXT_DATE, obj.isoformat().encode())
    if isinstance(obj, datetime.timedelta):
        parts = (obj.days, obj.seconds, obj.microseconds)
        return msgpack.ExtType(_EXT_TIMEDELTA, msgpack.packb(parts))
    raise TypeError(f"no state encoding for a {type(obj).__qualname__}")


def _from_ext(code: int, data: bytes) -> Any:
    import datetime
    import decimal

    import msgpack

    if code == _EXT_DECIMAL:
        return decimal.Decimal(data.decode())
    if code == _EXT_DATETIME:
        return datetime.datetime.fromisoformat(data.decode())
    if code == _EXT_DATE:
        return datetime.date.fromisoformat(data.decode())
    if code == _EXT_TIMEDELTA:
        days, seconds, micros = msgpack.unpackb(data)
        return datetime.timedelta(days=days, seconds=seconds, microseconds=micros)
    raise ValueError(f"unknown extension type {code}")
