"""Issue 27: one answer and one error from both engines. NULL in aggregates as Spark SQL has
it, list inputs typed by their collection (never inferred from None), errors that name the
collection, column and value before any job, and float sums equal to the last bit."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from _differential import error_class
from test_tick_cost import Meter, _alongside

from blooml import Program, avg, bloom, count, lmin, scratch, sum_, table
from blooml.errors import (
    ColumnTypeError,
    ColumnValueError,
    LatticeColumnValueError,
    LatticeValueError,
    ProgramError,
)
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Cart(Program):
    item = table(["k", "n"], ["v"])
    tot = scratch(["k"], ["s", "rows", "vals", "mean"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.tot <= self.item.group(["k"], sum_("v"), count(), count("v"), avg("v"))
    # fmt: on


class Paths(Program):
    link = table(["src", "dst"], ["c"])
    path = table(["src", "dst"], ["c"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
        self.path <= self.link.join(self.path, self.link.dst == self.path.src).map(
            lambda lk, p: (lk.src, p.dst, p.c + lk.c)
        )
    # fmt: on


def test_aggregates_skip_null_and_float_sums_agree_to_the_last_bit(spark: Any) -> None:
    ticks = [
        {"item": [("a", 1, 1), ("a", 2, None), ("b", 1, None)]},  # sum skips None: ('a', 1, ...)
        {"item": [("c", i, v) for i, v in enumerate([0.1, 0.2, 0.3])]},  # 0.6, not ...0001
        {"item": [("c", 9, 1e16), ("c", 10, 1.0), ("c", 11, -1e16), ("b", 2, 2.5)]},
    ]
    engine = SparkEngine(spark, path="dataframe", program=Cart)
    p = Cart()
    results = [r for _, r in _alongside(engine, p, ticks)]
    got = {r[0]: r for r in results[-1].rows("tot")}
    assert got["a"] == ("a", 1.0, 2, 1, 1.0)
    assert got["b"] == ("b", 2.5, 2, 1, 2.5)
    assert got["c"][1] == 1.6 and got["c"][3] == 6  # 0.1 + 0.2 + 0.3 + 1.0, exactly


def test_an_all_none_column_uses_the_declared_or_known_types(spark: Any) -> None:
    ticks = [
        {"link": [("a", None, 1)]},  # issue 27: CANNOT_DETERMINE_TYPE, even when declared
        {"link": [("a", "b", 3), ("b", "c", 2.5)]},  # CANNOT_MERGE_TYPE (3 and 2.5)
        {"link": [("c", None, 4)]},
    ]
    engine = SparkEngine(
        spark,
        path="dataframe",
        program=Paths,
        schemas={"link": "src string, dst string, c double"},
    )
    result = list(_alongside(engine, Paths(), ticks))[-1][1]
    assert ("a", "c", lmin(5.5)) in result.rows("path")
    # undeclared and never seen: a clear error that says to declare it, before any job
    engine = SparkEngine(spark, path="dataframe", program=Cart)
    with pytest.raises(ColumnValueError, match=r"'item' column 'v'.*declare it"):
        engine.tick({"item": [("a", 1, None)]})
    # once the column's type is known (stored), a later tick's None alone takes it
    ticks = [{"item": [("a", 2, 3), ("b", 1, 2.5)]}, {"item": [("a", 1, None)]}]
    assert list(_alongside(engine, Cart(), ticks))[-1][1].rows("tot")


def test_wrong_arity_is_a_program_error_on_both_engines(spark: Any) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Paths)
    with pytest.raises(ProgramError, match=r"'link' has 3 columns .*got 2 values \('a', 'b'\)"):
        engine.tick({"link": [("a", "b", 1), ("a", "b")]})
    with pytest.raises(ProgramError, match=r"'link' has 3 columns"):
        Paths().link.insert([("a", "b")])


def test_a_string_into_a_double_column_is_named_before_any_job(spark: Any) -> None:
    engine = SparkEngine(spark, path="dataframe", program=Paths)
    engine.tick({"link": [("a", "b", 1.5)]})
    meter = Meter(spark)
    with pytest.raises(ColumnValueError) as info:
        engine.tick({"link": [("b", "c", "x")]})  # was NumberFormatException in a job
    assert meter.take() == 0
    exc = info.value
    assert isinstance(exc, ColumnTypeError)
    assert (exc.collection, exc.column, exc.value, exc.spark_type) == ("link", "c", "x", "double")
    # the same as a DataFrame column of strings: named before any job, not cast inside one
    bad = spark.createDataFrame([("b", "c", "x")], "src string, dst string, c string")
    with pytest.raises(ColumnTypeError, match=r"input 'link'.*cast it first"):
        engine.tick({"link": bad})
    assert meter.take() == 0
    # the failed tick changed nothing: the next one goes on from the stored state
    result = engine.tick({"link": [("b", "c", 2)]})
    assert ("a", "c", lmin(3.5)) in result.rows("path")


class Spend(Program):
    buy = table(["k", "n"], ["v"])
    spend = scratch(["k"], ["s"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.spend <= self.buy.group(["k"], sum_("v"))
    # fmt: on


def test_a_float_sum_kept_across_ticks_is_the_exact_sum(spark: Any) -> None:
    """A group over a table that gains a few rows a tick is updated from its stored sums; a
    float sum is not (0.1 + 0.2 stored, plus 0.3, is 0.6000000000000001): it is recomputed."""
    ticks = [
        {"buy": [("c", 1, 0.1), ("c", 2, 0.2), ("d", 1, 1)]},
        {"buy": [("c", 3, 0.3), ("d", 2, 2)]},
    ]
    engine = SparkEngine(spark, path="dataframe", program=Spend)
    result = list(_alongside(engine, Spend(), ticks))[-1][1]
    assert dict(result.rows("spend"))["c"] == 0.6


class LminHead(Program):
    link = table(["a", "b"], ["c"])
    path = table(["a", "b"], ["c"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.path <= self.link.map(lambda lk: (lk.a, 2, lmin(lk.c)))
    # fmt: on


def test_a_string_into_an_lmin_column_is_one_error_class_on_both_engines(spark: Any) -> None:
    """Issue 27: the same input fails with a ``ColumnValueError`` naming the collection, the
    column and the value on both engines (on the local engine its subclass
    ``LatticeColumnValueError``, also a ``LatticeValueError``), and changes neither."""
    engine = SparkEngine(spark, path="dataframe", program=LminHead)
    p = LminHead()
    list(_alongside(engine, p, [{"link": [(1, 2, 3.0)]}]))
    p.link.insert([(1, 3, "x")])
    with pytest.raises(ColumnValueError) as local:
        p.tick()
    with pytest.raises(ColumnValueError) as remote:
        engine.tick({"link": [(1, 3, "x")]})
    assert isinstance(local.value, LatticeColumnValueError)
    assert isinstance(local.value, LatticeValueError)
    assert (local.value.collection, local.value.column, local.value.value) == ("path", "c", "x")
    assert (remote.value.collection, remote.value.column, remote.value.value) == ("link", "c", "x")
    assert error_class(local.value) == error_class(remote.value)  # the differential's rule
    # neither engine changed: both go on from the stored state, and agree
    p.discard_pending()
    list(_alongside(engine, p, [{"link": [(1, 4, 1.5)]}]))
    assert {tuple(r) for r in p.path} == {(1, 2, lmin(1.5))}
