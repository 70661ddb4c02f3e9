"""blooml.spark.functions: lmerge / lfold as aggregate Columns, equal to the in-process folds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _spark_helpers import ITEMS, KEYS, SPARK_SETTINGS, merged_by_key, native_specs
from _user_lattice import lsum
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.errors import ColumnTypeError, LatticeValueError
from blooml.lattices import Lattice, lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.lattices.crdts import l2pset, lgcounter, lorset, lvclock
from blooml.spark import (
    MapOf,
    Structured,
    column_format,
    from_spark,
    from_worker_error,
    merge_column,
    spark_type,
    to_spark,
    worker_errors,
)
from blooml.spark.functions import lfold, lmerge

pytestmark = pytest.mark.spark
T = pytest.importorskip("pyspark.sql.types", reason="Spark tests need pyspark")
F = pytest.importorskip("pyspark.sql.functions")
PythonException = pytest.importorskip("pyspark.errors").PythonException


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _python_in(plan: str) -> bool:
    return any(n in plan for n in ("ArrowEvalPython", "BatchEvalPython", "PythonUDF"))


# -- the example: several lattice columns and a builtin in one aggregation ---------------


def test_several_lattice_aggregates_in_one_agg(spark: Any) -> None:
    rows = [("a", 1, 10), ("a", 2, 30), ("b", 3, None), ("a", None, 20), ("c", None, None)]
    df = spark.createDataFrame(rows, "k string, v bigint, ts bigint")
    out = df.groupBy("k").agg(lfold("v", lset), lfold("ts", lmax), F.count("*").alias("n"))
    assert out.columns == ["k", "lfold(v, lset)", "lfold(ts, lmax)", "n"]
    got = {r.k: (from_spark(r[1], lset), from_spark(r[2], lmax), r.n) for r in out.collect()}
    assert got == {
        "a": (lset({1, 2}), lmax(30), 3),
        "b": (lset({3}), lmax(), 1),
        "c": (lset(), lmax(), 1),  # NULL items are ⊥
    }
    assert not _python_in(_plan(out))  # builtins: Spark SQL only
    # and merging the lattice cells again (lmerge) in one more aggregation
    again = out.groupBy(F.lit(1)).agg(
        lmerge("lfold(v, lset)", lset), lmerge("lfold(ts, lmax)", lmax)
    )
    (row,) = again.collect()
    assert (from_spark(row[1], lset), from_spark(row[2], lmax)) == (lset({1, 2, 3}), lmax(30))
    assert not _python_in(_plan(again))


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_lmerge_native_equals_in_process(spark: Any, data: Any) -> None:
    specs = native_specs(T)
    spec = data.draw(st.sampled_from(sorted(specs, key=repr)))
    strategy, element, key = specs[spec]
    pairs = data.draw(st.lists(st.tuples(KEYS, strategy), max_size=25))
    schema = T.StructType(
        [T.StructField("k", T.StringType()), T.StructField("v", spark_type(spec, element, key=key))]
    )
    df = spark.createDataFrame([(k, to_spark(v, spec)) for k, v in pairs], schema)
    out = df.groupBy("k").agg(lmerge("v", spec).alias("v"), F.count("*").alias("n"))
    got = {r.k: from_spark(r.v, spec) for r in out.collect()}
    assert got == merged_by_key(pairs)


_FOLDABLE = {c: ITEMS[c] for c in (lmax, lmin, lbool, lset, lpset, lbag)}


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_lfold_builtins_equal_cls_fold(spark: Any, data: Any) -> None:
    cls = data.draw(st.sampled_from(sorted(_FOLDABLE, key=lambda c: c.__qualname__)))
    items = st.one_of(st.none(), _FOLDABLE[cls])
    pairs = data.draw(st.lists(st.tuples(KEYS, items), max_size=25))
    elem = {lbool: "boolean", lbag: "string"}.get(cls, "bigint")
    df = spark.createDataFrame(pairs, f"k string, v {elem}")
    out = df.groupBy("k").agg(lfold("v", cls).alias("v"))
    got = {r.k: from_spark(r.v, cls) for r in out.collect()}
    want: dict[str, list[Any]] = {}
    for k, item in pairs:
        want.setdefault(k, [])
        if item is not None:
            want[k].append(item)
    assert got == {k: cls.fold(v) for k, v in want.items()}


def test_lfold_map_of_key_value_columns(spark: Any) -> None:
    rows = [("a", "x", 1), ("a", "x", 5), ("a", "y", 2), ("b", None, 3), ("b", "z", None)]
    df = spark.createDataFrame(rows, "k string, mk string, mv bigint")
    out = df.groupBy("k").agg(lfold(["mk", "mv"], MapOf(lmax)).alias("m"))
    got = {r.k: from_spark(r.m, MapOf(lmax)) for r in out.collect()}
    assert got == {"a": lmap({"x": lmax(5), "y": lmax(2)}), "b": lmap()}


# -- CRDTs stored structurally: merged in SQL ----------------------------------------------------


def _orsets() -> st.SearchStrategy[lorset]:
    ops = st.lists(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 3)), max_size=6)

    def build(steps: list[tuple[bool, int, int]]) -> lorset:
        v = lorset()
        for add, elem, tag in steps:
            v = v.add(elem, tag) if add else v.remove(elem)
        return v

    return ops.map(build)


_STRUCTURED: dict[Any, tuple[st.SearchStrategy[Lattice], Any, Any]] = {
    Structured(lorset): (_orsets(), None, None),
    Structured(l2pset): (
        st.tuples(st.frozensets(st.integers(0, 5)), st.frozensets(st.integers(0, 5))).map(
            lambda ar: l2pset(ar[0] | ar[1], ar[1])
        ),
        None,
        None,
    ),
    Structured(lgcounter): (
        st.dictionaries(st.sampled_from("pqr"), st.integers(0, 9)).map(lgcounter),
        None,
        None,
    ),
    Structured(lvclock): (
        st.dictionaries(st.sampled_from("pqr"), st.integers(0, 9)).map(lvclock),
        None,
        None,
    ),
}
_STRUCT_TYPES = {
    lorset: "struct<adds: map<bigint, array<bigint>>, removes: map<bigint, array<bigint>>>",
    l2pset: "struct<added: array<bigint>, removed: array<bigint>>",
    lgcounter: "map<string, bigint>",
    lvclock: "map<string, bigint>",
}


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_structured_crdts_merge_in_sql_equal_in_process(spark: Any, data: Any) -> None:
    spec = data.draw(st.sampled_from(sorted(_STRUCTURED, key=repr)))
    pairs = data.draw(st.lists(st.tuples(KEYS, _STRUCTURED[spec][0]), max_size=20))
    for _, v in pairs:
        assert from_spark(to_spark(v, spec), spec) == v
    schema = f"k string, v {_STRUCT_TYPES[spec.lattice]}"
    df = spark.createDataFrame([(k, to_spark(v, spec)) for k, v in pairs], schema)
    out = merge_column(df, "k", "v", spec)
    assert {r.k: from_spark(r.v, spec) for r in out.collect()} == merged_by_key(pairs)
    assert not _python_in(_plan(out))


def test_lfold_structured_crdts(spark: Any) -> None:
    rows = [("a", "milk", 1), ("a", "milk", 2), ("a", "eggs", 3), ("b", "tea", 1), ("b", None, 9)]
    df = spark.createDataFrame(rows, "k string, elem string, tag bigint")
    out = df.groupBy("k").agg(
        lfold(["elem", "tag"], Structured(lorset)).alias("s"),
        lfold("elem", Structured(l2pset)).alias("p"),
        lfold(["elem", "tag"], Structured(lgcounter)).alias("c"),
    )
    got = {
        r.k: (
            from_spark(r.s, Structured(lorset)),
            from_spark(r.p, Structured(l2pset)),
            from_spark(r.c, Structured(lgcounter)),
        )
        for r in out.collect()
    }
    for k in ("a", "b"):
        items = [(e, t) for kk, e, t in rows if kk == k and e is not None]
        assert got[k] == (
            lorset.fold(items),
            l2pset.fold([e for e, _ in items]),
            lgcounter.fold(items),
        )
    assert not _python_in(_plan(out))


# -- map-valued lattices: linear merges ---------------------------------------------------------

#: Map-valued specs folded from (key, value) item columns: the value column's Spark type, a
#: strategy for its cells, and the Python item of a (key, cell) row for ``Cls.fold``.
_MAP_FOLDS: dict[Any, tuple[str, st.SearchStrategy[Any], Any]] = {
    MapOf(lmax): ("bigint", st.integers(-9, 9), lambda k, c: (k, lmax(c))),
    MapOf(lset): ("array<bigint>", st.lists(st.integers(0, 6), max_size=3), None),
    MapOf(MapOf(lmin)): (
        "map<string, bigint>",
        st.dictionaries(st.sampled_from("uv"), st.integers(-9, 9), max_size=2),
        None,
    ),
    Structured(lorset): ("bigint", st.integers(0, 5), lambda k, c: (k, c)),
    Structured(lgcounter): ("bigint", st.integers(1, 9), lambda k, c: (k, c)),
    Structured(lvclock): ("bigint", st.integers(1, 9), lambda k, c: {k: c}),
}


def _python_item(spec: Any, key: Any, cell: Any) -> Any:
    make = _MAP_FOLDS[spec][2]
    if make is not None:
        return make(key, cell)
    return (key, from_spark(cell, spec.values))  # a MapOf(V): (key, V's value)


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_map_valued_folds_of_large_groups_equal_cls_fold(spark: Any, data: Any) -> None:
    """lfold of map-valued lattices and CRDTs (sorted runs of map keys, one pass) equals the
    lattice's own fold, over groups of many items with repeated keys, NULLs and empty groups."""
    spec = data.draw(st.sampled_from(sorted(_MAP_FOLDS, key=repr)))
    vtype, cells, _ = _MAP_FOLDS[spec]
    map_keys = st.one_of(st.none(), st.sampled_from(["p", "q", "r", "s", "t", "u"]))
    rows = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "c"]), map_keys, st.one_of(st.none(), cells)),
            max_size=120,
        )
    )
    df = spark.createDataFrame(rows, f"k string, mk string, v {vtype}")
    out = df.groupBy("k").agg(lfold(["mk", "v"], spec).alias("m"), F.count("*").alias("n"))
    got = {r.k: from_spark(r.m, spec) for r in out.collect()}
    cls = column_format(spec).lattice
    want = {
        k: cls.fold(
            _python_item(spec, mk, c)
            for kk, mk, c in rows
            if kk == k and mk is not None and c is not None
        )
        for k in {r[0] for r in rows}
    }
    assert got == want
    assert not _python_in(_plan(out))


_MAP_MERGES = {
    spec: value
    for spec, value in native_specs(T).items()
    if isinstance(spec, MapOf) or spec is lbag
} | {s: (v[0], None, None) for s, v in _STRUCTURED.items() if s.lattice is not l2pset}


@settings(**SPARK_SETTINGS)
@given(st.data())
def test_map_valued_merges_of_large_groups_equal_in_process(spark: Any, data: Any) -> None:
    """lmerge of map cells (MapOf, lbag, lorset adds and removes, counters, clocks) over groups
    of many cells, NULL cells and empty maps among them, equals merging with ``merge``."""
    spec = data.draw(st.sampled_from(sorted(_MAP_MERGES, key=repr)))
    strategy, element, key = _MAP_MERGES[spec]
    pairs = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["a", "b"]), st.one_of(st.none(), strategy)), max_size=60
        )
    )
    if isinstance(spec, Structured):
        vtype: Any = _STRUCT_TYPES[spec.lattice]
    else:
        vtype = spark_type(spec, element, key=key).simpleString()
    df = spark.createDataFrame(
        [(k, None if v is None else to_spark(v, spec)) for k, v in pairs], f"k string, v {vtype}"
    )
    out = df.groupBy("k").agg(lmerge("v", spec).alias("v"))
    got = {r.k: from_spark(r.v, spec) for r in out.collect()}
    cls = column_format(spec).lattice
    want = {k: cls() for k, _ in pairs} | merged_by_key((k, v) for k, v in pairs if v is not None)
    assert got == want


@pytest.mark.parametrize(
    "make",
    [
        lambda: lfold(["e", "v"], MapOf(lmax)),
        lambda: lfold(["e", "a"], MapOf(lset)),
        lambda: lfold(["e", "v"], Structured(lorset)),
        lambda: lfold(["e", "v"], Structured(lgcounter)),
        lambda: lmerge("m", MapOf(lmax)),
        lambda: lmerge("m", lbag),
        lambda: lmerge("mm", MapOf(MapOf(lmax))),
        lambda: lmerge("o", Structured(lorset)),
    ],
    ids=[
        "fold-map",
        "fold-map-of-sets",
        "fold-orset",
        "fold-gcounter",
        "merge-map",
        "merge-bag",
        "merge-nested-map",
        "merge-orset",
    ],
)
def test_map_merges_read_the_collected_group_once(spark: Any, make: Any) -> None:
    """The plan reads a group's collected entries once, then sorts them into runs per map key:
    it never filters the whole group once per distinct key (quadratic in the group's size)."""
    df = spark.createDataFrame(
        [],
        "k string, e string, v bigint, a array<bigint>, m map<string, bigint>, "
        "mm map<string, map<string, bigint>>, "
        "o struct<adds: map<bigint, array<bigint>>, removes: map<bigint, array<bigint>>>",
    )
    plan = str(df.groupBy("k").agg(make().alias("r"))._jdf.queryExecution().optimizedPlan())
    assert len(re.findall(r"collect_(?:list|set)\(", plan)) == 1, plan
    assert "sort_array(" in plan


# -- user lattices: an Arrow UDF per batch of groups ---------------------------------------------


def test_user_lattice_merges_in_arrow_batches(spark: Any) -> None:
    pairs = [("a", lsum(3)), ("a", lsum(7)), ("b", lsum(2)), ("b", None)]
    df = spark.createDataFrame(
        [(k, to_spark(v, lsum) if v else None) for k, v in pairs], "k string, v binary"
    )
    out = df.groupBy("k").agg(lmerge("v", lsum).alias("v"), F.count("*").alias("n"))
    got = {r.k: (from_spark(r.v, lsum), r.n) for r in out.collect()}
    assert got == {"a": (lsum(7), 2), "b": (lsum(2), 2)}
    plan = _plan(out)
    assert "ArrowEvalPython" in plan and "BatchEvalPython" not in plan  # batched, never per row
    # lfold of plain items through the same path
    items = spark.createDataFrame([("a", 1), ("a", 4), ("b", None)], "k string, x bigint")
    folded = items.groupBy("k").agg(lfold("x", lsum).alias("v"))
    assert {r.k: from_spark(r.v, lsum) for r in folded.collect()} == {"a": lsum(4), "b": lsum()}


def _local_lattice() -> type[Lattice]:
    class lhigh(Lattice):  # defined in a function: no process finds it by name
        __slots__ = ()

        def __init__(self, value: int = 0) -> None:
            super().__init__(value)

        def merge(self, other: Any) -> Any:
            return self if self._v >= other._v else other

    return lhigh


def test_a_lattice_class_no_module_holds_is_pickled_by_value(spark: Any) -> None:
    """A class defined in a function cannot be pickled by reference: its cells carry it (the
    script case, a class of ``__main__``, is tests/spark/test_running.py)."""
    lhigh = _local_lattice()
    items = spark.createDataFrame([("a", 1), ("a", 4), ("b", 2)], "k string, x bigint")
    folded = items.groupBy("k").agg(lfold("x", lhigh).alias("v"))
    merged = folded.union(folded).groupBy("k").agg(lmerge("v", lhigh).alias("v"))
    assert {r.k: from_spark(r.v, lhigh) for r in merged.collect()} == {
        "a": lhigh(4),
        "b": lhigh(2),
    }
    assert from_spark(to_spark(lhigh(3), lhigh), lhigh) == lhigh(3)


def test_user_merge_raising_on_a_worker_names_key_and_call(spark: Any) -> None:
    df = spark.createDataFrame(
        [
            ("ok", to_spark(lsum(1), lsum)),
            ("bad", to_spark(lsum(13), lsum)),
            ("bad", to_spark(lsum(2), lsum)),
        ],
        "k string, v binary",
    )
    with pytest.raises(PythonException) as info:
        merge_column(df, "k", "v", lsum).collect()
    err = from_worker_error(info.value)
    assert isinstance(err, LatticeValueError)
    assert err.key == "'bad'"  # type: ignore[attr-defined]
    assert err.call == "merge_column(df, ['k'], 'v', lsum)"  # type: ignore[attr-defined]
    with pytest.raises(LatticeValueError, match="13 is unlucky"), worker_errors():
        df.groupBy("k").agg(lmerge("v", lsum)).collect()


# -- types checked before any job ------------------------------------------------------------------


def test_merge_column_checks_the_column_type_first(spark: Any) -> None:
    df = spark.createDataFrame([("a", 1)], "k string, v bigint")
    with pytest.raises(
        ColumnTypeError, match=r"column 'v' of type bigint cannot hold lset"
    ) as info:
        merge_column(df, "k", "v", lset)
    assert "__blooml" not in str(info.value) and "lfold" in str(info.value)
    with pytest.raises(ColumnTypeError, match="cannot hold lbool"):
        merge_column(df, "k", "v", lbool)
    with pytest.raises(ColumnTypeError, match="pickled bytes"):
        merge_column(df, "k", "v", lsum)
    with pytest.raises(TypeError, match="column name or a Column"):
        lmerge(3, lmax)
    with pytest.raises(LatticeValueError, match="two columns"):
        lfold("v", MapOf(lmax))
