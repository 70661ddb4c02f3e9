"""Lattice columns: the schema mapping both ways, and merge_column (SQL and Python paths)."""

from __future__ import annotations

from typing import Any

import pytest
from _spark_helpers import (
    COLLECTIONS,
    CRDTS,
    KEYS,
    ORDERED,
    SPARK_SETTINGS,
    merged_by_key,
    native_specs,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices import Lattice, lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.spark import (
    MapOf,
    Pickled,
    column_format,
    from_spark,
    merge_column,
    spark_type,
    to_dataframe,
    to_rdd,
    to_spark,
)

pytestmark = pytest.mark.spark
T = pytest.importorskip("pyspark.sql.types", reason="Spark tests need pyspark")
NATIVE = native_specs(T)
_NATIVE_SPECS = st.sampled_from(sorted(NATIVE, key=repr))


def _schema(spec: Any, element: Any = None, key: Any = None) -> Any:
    return T.StructType(
        [
            T.StructField("k", T.StringType(), True),
            T.StructField("v", spark_type(spec, element, key=key), True),
        ]
    )


def _df(
    spark: Any, pairs: list[tuple[str, Lattice]], spec: Any, element: Any = None, key: Any = None
) -> Any:
    rows = [(k, to_spark(v, spec)) for k, v in pairs]
    return spark.createDataFrame(rows, _schema(spec, element, key))


def _read(df: Any, spec: Any) -> dict[Any, Lattice]:
    return {row["k"]: from_spark(row["v"], spec) for row in df.collect()}


def _types(df: Any) -> list[tuple[str, Any]]:
    # nullability may differ (an aggregate's result is never NULL, say); the types may not
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


# -- the schema mapping ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (lmax(3), 3),
        (lmax(), None),
        (lmin("x"), "x"),
        (lmin(), None),
        (lbool(True), True),
        (lbool(), False),
        (lset({3, 1, 2}), [1, 2, 3]),
        (lset(), []),
        (lpset({0.5, 2}), [0.5, 2]),
        (lbag(["x", "x", "y"]), {"x": 2, "y": 1}),
        (lbag(), {}),
    ],
)
def test_to_spark_native_cells(value: Lattice, cell: Any) -> None:
    assert to_spark(value) == cell
    assert from_spark(cell, type(value)) == value


def test_lmap_cells() -> None:
    m = lmap({"a": lmax(1), "b": lmax()})
    assert to_spark(m) == {"a": 1, "b": None}  # spec inferred: MapOf(lmax)
    assert from_spark({"a": 1, "b": None}, MapOf(lmax)) == m  # a key mapped to ⊥ stays a key
    nested = lmap({"a": lmap({"x": lset([1])})})
    assert to_spark(nested) == {"a": {"x": [1]}}
    assert from_spark({"a": {"x": [1]}}, MapOf(MapOf(lset))) == nested
    assert from_spark(None, MapOf(lmax)) == lmap() == from_spark({}, MapOf(lmax))
    assert to_spark(lmap(), MapOf(lbool)) == {}
    with pytest.raises(TypeError, match=r"empty lmap: pass the spec"):
        to_spark(lmap())
    mixed = lmap({"a": lmax(1), "b": lmin(1)})
    assert column_format(MapOf(lmax)).native and not column_format(Pickled(lmap)).native
    assert from_spark(to_spark(mixed), Pickled(lmap)) == mixed  # mixed values: pickled


def test_structs_and_arrays_come_back_as_tuples() -> None:
    from pyspark.sql import Row

    assert from_spark([Row(a=1, b="x"), Row(a=2, b="y")], lset) == lset([(1, "x"), (2, "y")])
    assert from_spark(Row(a=1, b="x"), lmax) == lmax((1, "x"))
    assert from_spark({(1, 2): 3}, lbag) == lbag({(1, 2): 3})


def test_from_spark_null_is_bottom() -> None:
    for cls in (lmax, lmin, lbool):
        assert from_spark(None, cls) == cls()
    assert from_spark(None, Pickled(lmax)) == lmax()


def test_spark_types() -> None:
    assert spark_type(lmax, T.LongType()) == T.LongType()
    assert spark_type(lmin, T.StringType()) == T.StringType()
    assert spark_type(lbool) == T.BooleanType()
    assert spark_type(Pickled(lmax)) == T.BinaryType()
    assert spark_type(lset, T.LongType()) == T.ArrayType(T.LongType(), False)
    assert spark_type(lbag, T.StringType()) == T.MapType(T.StringType(), T.LongType(), False)
    assert spark_type(MapOf(lbool), key=T.StringType()) == T.MapType(
        T.StringType(), T.BooleanType(), True
    )
    assert spark_type(MapOf(MapOf(lset)), T.LongType(), key=T.StringType()) == T.MapType(
        T.StringType(), T.MapType(T.StringType(), T.ArrayType(T.LongType(), False)), True
    )
    with pytest.raises(TypeError, match=r"needs the Spark type of the keys"):
        spark_type(MapOf(lmax), T.LongType())
    with pytest.raises(TypeError, match=r"needs the Spark type of the elements"):
        spark_type(lmax)


@pytest.mark.parametrize(
    ("spec", "element", "values"),
    [
        (lmax, T.LongType(), [lmax(-(2**62)), lmax(), lmax(7)]),
        (lmin, T.StringType(), [lmin("b"), lmin(), lmin("ä")]),
        (lmax, T.DoubleType(), [lmax(1.5), lmax(-0.25)]),
        (
            lmax,
            T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())]),
            [lmax((1, "z")), lmax((2, "a")), lmax()],
        ),
        (lbool, None, [lbool(True), lbool(False)]),
        (Pickled(lmax), None, [lmax(3), lmax()]),
    ],
)
def test_round_trip_through_a_dataframe(spark: Any, spec: Any, element: Any, values: Any) -> None:
    pairs = [(str(i), v) for i, v in enumerate(values)]
    assert _read(_df(spark, pairs, spec, element), spec) == dict(pairs)


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_round_trip_of_every_native_spec(spark: Any, data: Any) -> None:
    spec = data.draw(_NATIVE_SPECS)
    strategy, element, key = NATIVE[spec]
    values = data.draw(st.lists(strategy, max_size=6))
    pairs = [(str(i), v) for i, v in enumerate(values)]
    assert column_format(spec).native
    assert _read(_df(spark, pairs, spec, element, key), spec) == dict(pairs)


@settings(max_examples=6, deadline=None)
@given(st.data())
def test_round_trip_of_crdts_pickled(spark: Any, data: Any) -> None:
    cls = data.draw(st.sampled_from(sorted(CRDTS, key=lambda c: c.__qualname__)))
    value = data.draw(CRDTS[cls])
    assert column_format(cls).kind == "pickle"
    df = _df(spark, [("a", value), ("b", cls())], cls)
    assert _read(df, cls) == {"a": value, "b": cls()}


def test_to_spark_errors() -> None:
    with pytest.raises(LatticeTypeError, match="lmin"):
        to_spark(lmin(1), lmax)
    with pytest.raises(LatticeValueError, match="expected a lmax value"):
        to_spark(3, lmax)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="column spec"):
        to_spark(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="column spec"):
        from_spark(3, int)
    with pytest.raises(LatticeValueError):
        from_spark(float("nan"), lmax)
    with pytest.raises(LatticeTypeError):
        from_spark(to_spark(lmin(1), Pickled(lmin)), Pickled(lmax))


def test_lmap_needs_the_value_class() -> None:
    with pytest.raises(TypeError, match=r"MapOf\(lmax\)"):
        column_format(lmap)
    with pytest.raises(TypeError, match="lattice class of the map's values"):
        MapOf(int)


# -- merge_column ---------------------------------------------------------------------------


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_merge_column_native_equals_in_process(spark: Any, data: Any) -> None:
    spec = data.draw(_NATIVE_SPECS)
    strategy, element, key = NATIVE[spec]
    pairs = data.draw(st.lists(st.tuples(KEYS, strategy), max_size=30))
    df = _df(spark, pairs, spec, element, key).repartition(data.draw(st.integers(1, 4)))
    out = merge_column(df, "k", "v", spec)
    assert out.columns == ["k", "v"]
    assert _types(out) == _types(df)
    assert _read(out, spec) == merged_by_key(pairs)


_EVERY_CLASS = {**ORDERED, **COLLECTIONS, **CRDTS}


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_merge_column_pickled_equals_in_process(spark: Any, data: Any) -> None:
    cls = data.draw(st.sampled_from(sorted(_EVERY_CLASS, key=lambda c: c.__qualname__)))
    pairs = data.draw(st.lists(st.tuples(KEYS, _EVERY_CLASS[cls]), max_size=30))
    spec = cls if cls in CRDTS else Pickled(cls)
    df = _df(spark, pairs, spec).repartition(data.draw(st.integers(1, 4)))
    out = merge_column(df, "k", "v", spec)
    assert _types(out) == _types(df)
    assert _read(out, spec) == merged_by_key(pairs)


@pytest.mark.parametrize(
    ("spec", "values", "want"),
    [
        (lmax, "1L, 5L, 2L", {"a": lmax(5), "b": lmax(2)}),
        (lset, "array(1, 2), array(2, 3), array()", {"a": lset([1, 2, 3]), "b": lset()}),
        (
            MapOf(lmin),
            "map('x', 4), map('x', 2, 'y', 9), map()",
            {"a": lmap({"x": lmin(2), "y": lmin(9)}), "b": lmap()},
        ),
        (lbag, "map('p', 1), map('p', 3), map('q', 1)", {"a": lbag({"p": 3}), "b": lbag(["q"])}),
    ],
)
def test_native_merge_runs_no_python(spark: Any, spec: Any, values: str, want: Any) -> None:
    a1, a2, b = (v.strip() for v in _split(values))
    df = spark.sql(f"SELECT * FROM VALUES ('a', {a1}), ('a', {a2}), ('b', {b}) AS t(k, v)")
    out = merge_column(df, "k", "v", spec)
    plan = _plan(out)
    assert "LocalTableScan" in plan and "Python" not in plan and "ExistingRDD" not in plan, plan
    assert _read(out, spec) == want


@pytest.mark.parametrize(
    ("spec", "vtype", "levels"),
    [
        (lset, "array<bigint>", 1),
        (lbag, "map<string, bigint>", 2),
        (MapOf(lmax), "map<string, bigint>", 2),
        (MapOf(MapOf(lmax)), "map<string, map<string, bigint>>", 3),
    ],
)
def test_merge_column_explodes_and_aggregates_per_entry(
    spark: Any, spec: Any, vtype: str, levels: int
) -> None:
    """merge_column plans what a Spark user writes by hand: sets exploded into one collect_set
    of elements (its buffer is the merged set), maps aggregated per (key, map key), then per
    key -- no aggregate over the whole group's cells. A streaming DataFrame (which cannot chain
    aggregations) gets one aggregate for sets, and for maps the stateful merge whose state is
    the merged map (an aggregate's buffer would keep every cell)."""
    df = spark.createDataFrame([], f"k string, v {vtype}")
    plan = str(merge_column(df, "k", "v", spec)._jdf.queryExecution().optimizedPlan())
    assert plan.count("Aggregate [") == levels, plan
    assert "Generate explode" in plan, plan
    assert "sort_array(" not in plan and "flatten(" not in plan, plan
    stream = (
        spark.readStream.format("rate").load().selectExpr("'a' AS k", f"CAST(NULL AS {vtype}) AS v")
    )
    out = merge_column(stream, "k", "v", spec)
    assert out.isStreaming
    streaming_plan = str(out._jdf.queryExecution().analyzed())
    if levels == 1:
        assert streaming_plan.count("Aggregate [") == 1, streaming_plan
    else:
        assert "Aggregate [" not in streaming_plan, streaming_plan
        assert "FlatMapGroupsInPandasWithState" in streaming_plan, streaming_plan


def _split(values: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in values:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return [*parts, cur]


def test_python_path_for_contrast(spark: Any) -> None:
    pairs = [("a", lmax(1)), ("a", lmax(5)), ("b", lmax(2))]
    py = merge_column(_df(spark, pairs, Pickled(lmax)), "k", "v", Pickled(lmax))
    assert "ExistingRDD" in _plan(py)  # the Python path, for contrast
    assert _read(py, Pickled(lmax)) == {"a": lmax(5), "b": lmax(2)}


def test_merge_column_several_keys_and_odd_names(spark: Any) -> None:
    rows = [("x", 1, True), ("x", 1, False), ("x", 2, False), ("y", 1, None)]
    df = spark.createDataFrame(rows, "`the key` string, `n.o` int, `done!` boolean")
    out = merge_column(df, ["the key", "n.o"], "done!", lbool)
    assert out.columns == ["the key", "n.o", "done!"]
    got = {(r[0], r[1]): r[2] for r in out.collect()}
    assert got == {("x", 1): True, ("x", 2): False, ("y", 1): False}
    py = merge_column(
        df.selectExpr("`the key`", "`n.o`", "`done!`"), ["the key", "n.o"], "done!", lbool
    )
    assert {(r[0], r[1]): r[2] for r in py.collect()} == got


def test_merge_column_multi_key_python_path(spark: Any) -> None:
    pairs = [(("a", 1), lmin(4)), (("a", 1), lmin(2)), (("a", 2), lmin(9))]
    rows = [(k1, k2, to_spark(v, Pickled(lmin))) for (k1, k2), v in pairs]
    df = spark.createDataFrame(rows, "k1 string, k2 int, v binary")
    out = merge_column(df, ["k1", "k2"], "v", Pickled(lmin), num_partitions=2)
    got = {(r.k1, r.k2): from_spark(r.v, Pickled(lmin)) for r in out.collect()}
    assert got == {("a", 1): lmin(2), ("a", 2): lmin(9)}


def test_to_rdd_and_to_dataframe(spark: Any) -> None:
    pairs = [("a", lmax(1)), ("b", lmax(2))]
    df = _df(spark, pairs, lmax, T.LongType())
    assert sorted(to_rdd(df, "k", "v", lmax).collect()) == sorted(pairs)
    back = to_dataframe(to_rdd(df, "k", "v", lmax), "k", "v", lmax, schema=df.schema)
    assert _read(back, lmax) == dict(pairs)
    inferred = to_dataframe(to_rdd(df, "k", "v", lmax), ["k"], "v", lmax)
    assert inferred.columns == ["k", "v"] and _read(inferred, lmax) == dict(pairs)
    multi = spark.sparkContext.parallelize([(("a", 1), lmin(3))])
    out = to_dataframe(multi, ["s", "n"], "m", lmin).collect()
    assert [tuple(r) for r in out] == [("a", 1, 3)]


def test_merge_column_errors(spark: Any) -> None:
    df = spark.createDataFrame([("a", 1)], "k string, v long")
    with pytest.raises(ValueError, match=r"no column 'w' in the DataFrame \(columns: k, v\)"):
        merge_column(df, "k", "w", lmax)
    with pytest.raises(ValueError, match="cannot also be a key column"):
        merge_column(df, ["k", "v"], "v", lmax)
    with pytest.raises(ValueError, match="at least one column"):
        merge_column(df, [], "v", lmax)
    with pytest.raises(TypeError, match="expects a pyspark DataFrame"):
        merge_column(df.rdd, "k", "v", lmax)
    with pytest.raises(TypeError, match="column spec"):
        merge_column(df, "k", "v", "lmax")
