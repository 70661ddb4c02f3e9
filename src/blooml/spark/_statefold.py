"""Streaming lattice merges whose state is the merged value: ``stream_lfold`` / ``stream_lmerge``.

A streaming ``groupBy(...).agg(lfold(...))`` keeps, as its state, Spark's aggregation buffer:
for a map of ordered values (``MapOf(lmax)``, ``lgcounter``, ``lvclock``) that is each distinct
``(key, value)`` entry, and for an ``lmerge`` of map cells every cell -- the state grows with
the rows seen. Spark has no built-in aggregate that merges maps, and PySpark no UDAF with a
user-defined buffer, so the bounded plan is arbitrary stateful processing:
``groupBy(keys).applyInPandasWithState``, one Python call per group and micro-batch, whose
state per group is the merged lattice value itself, encoded with blooml's wire codec
(:mod:`blooml.net.codec`: msgpack, validated on decoding, never pickle). The output (update
mode) is one row per group that the micro-batch touched, holding the whole merged value, in
the same Spark type as the batch ``lfold``/``lmerge`` column.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from blooml.errors import CodecError, LatticeValueError
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
    wire = _wire_kind(feature, fmt)
    check_worker_python(feature, df.sparkSession)
    out_schema = batch.schema
    row_type = StructType(
        [StructField(f"_{i}", df.schema[c].dataType, True) for i, c in enumerate(cols)]
    )
    call = f"{feature}(df, {keys!r}, {cols[0] if len(cols) == 1 else cols!r}, {_spec_name(spec)})"
    func = _group_function(fmt, row_type, fold=fold, wire=wire, call=call, alias=alias, keys=keys)
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


def _wire_kind(feature: str, fmt: ColumnFormat) -> tuple[Any, ...] | None:
    """How the state's codec knows a pickled spec's class (registered on the workers too):
    ``(to_wire, from_wire, name)``, or None for a builtin lattice."""
    from blooml.net import codec

    kind = codec._BY_CLASS.get(fmt.lattice)
    if kind is None:
        raise CodecError(
            "unknown_type",
            f"blooml.spark.{feature} keeps each group's merged {fmt.lattice.__qualname__} as "
            "streaming state encoded with blooml's codec, which does not know this class: "
            "register it first (blooml.net.register(cls))",
            fmt.lattice,
        )
    if kind.code is not None:
        return None
    return (kind.to_wire, kind.from_wire, kind.name)


# -- on the workers -----------------------------------------------------------------------------


def _group_function(
    fmt: ColumnFormat,
    row_type: Any,
    *,
    fold: bool,
    wire: tuple[Any, ...] | None,
    call: str,
    alias: str,
    keys: list[str],
) -> Callable[..., Any]:
    """The function ``applyInPandasWithState`` calls per group and micro-batch."""
    read_row = _reader(row_type)
    value_of = _item_value(fmt) if fold else _cell_value(fmt)
    to_cell = fmt.to_cell
    cls = fmt.lattice

    def merge_group(key: tuple[Any, ...], pdfs: Any, state: Any) -> Any:
        import pandas as pd

        from blooml.net import codec
        from blooml.spark._errors import WorkerErrors

        if wire is not None and cls not in codec._BY_CLASS:
            to_wire, from_wire, name = wire
            codec.register(cls, to_wire=to_wire, from_wire=from_wire, name=name)
        plain_key = tuple(_plain(k) for k in key)
        try:
            b = cls.builder()
            if state.exists:
                stored = codec.decode(state.get[0])
                if type(stored) is not cls:
                    raise CodecError(
                        "wrong_class",
                        f"the streaming state holds a {type(stored).__qualname__}, not a "
                        f"{cls.__qualname__}: was the checkpoint written by another query?",
                        stored,
                    )
                b.merge(stored)
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
            state.update((codec.encode(merged),))
            cell = to_cell(merged)
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
    if singleton is None:  # pickled: the class's own from_item
        from blooml.spark.functions import _item

        cls = fmt.lattice

        def from_item(row: tuple[Any, ...]) -> Any:
            if any(v is None for v in row):
                return None
            return cls.from_item(_item(row[0] if len(row) == 1 else row))

        return from_item

    def value(row: tuple[Any, ...]) -> Any:
        if any(v is None for v in row):
            return None
        cell = singleton(row)
        return None if cell is None else from_cell(cell)

    return value


def _singleton_cell(fmt: ColumnFormat) -> Callable[[tuple[Any, ...]], Any] | None:
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
    if isinstance(fmt, _PickleFormat):
        return None
    raise LatticeValueError(repr(fmt.spec), fmt, "no streaming fold for this spec")
