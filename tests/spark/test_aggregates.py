"""Every ``group`` aggregate gives the same rows on the local engine, the DataFrame path and
the RDD path (one definition: :func:`blooml.ir.aggregates.apply_aggregate`)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from blooml import Program, accum, avg, bloom, bool_and, bool_or, count, max_, min_, sum_, table

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: duplicate values of c within a key, a NULL c, one-row groups
ROWS = [
    (1, "a", 1, True),
    (1, "a", 2, True),
    (1, "b", 3, False),
    (2, None, 4, True),
    (2, None, 5, True),
    (2, "c", 6, True),
    (3, "d", 7, False),
]


class Aggs(Program):
    t = table(["k", "c", "d", "b"])
    by_k = table(["k", "n", "nc", "s", "lo", "hi", "mean"])
    all_ = table(["n", "nc", "s"])
    # a projection with duplicate rows, grouped by position
    proj = table(["k", "n", "nc"])

    # fmt: off
    @bloom
    def rules(self):
        self.by_k <= self.t.group(
            ["k"], count(), count("c"), sum_("d"), min_("d"), max_("d"), avg("d")
        )
        self.all_ <= self.t.group(None, count(), count("c"), sum_("d"))
        self.proj <= self.t.map(lambda r: (r.k, r.c)).group([0], count(), count(1))
    # fmt: on


class PythonAggs(Program):
    """Aggregates that do not lower to SQL (accum, bool_and, bool_or)."""

    t = table(["k", "c", "d", "b"])
    out = table(["k", "cs", "every", "some"])

    @bloom
    def rules(self):
        self.out <= self.t.group(["k"], accum("c"), bool_and("b"), bool_or("b"))


def _local(program: type[Program]) -> dict[str, list[tuple[Any, ...]]]:
    p = program()
    p.t.insert(ROWS)
    p.tick()
    return {
        name: sorted(map(tuple, getattr(p, name)), key=repr)
        for name in program.ir().collections
        if name != "t"
    }


def _spark(spark: Any, program: type[Program], path: str) -> dict[str, list[tuple[Any, ...]]]:
    from blooml.spark import SparkEngine

    result = SparkEngine(spark, path=path).run(program, {"t": ROWS})
    return {
        name: sorted(result.rows(name), key=repr)
        for name in program.ir().collections
        if name != "t"
    }


@pytest.mark.parametrize("path", ["dataframe", "rdd"])
def test_every_sql_aggregate_matches_the_local_engine(spark: Any, path: str) -> None:
    want = _local(Aggs)
    assert want["by_k"][0][:3] == (1, 3, 2)  # count() counts rows, count("c") distinct values
    assert _spark(spark, Aggs, path) == want


def test_python_aggregates_match_the_local_engine_on_the_rdd_path(spark: Any) -> None:
    assert _spark(spark, PythonAggs, "rdd") == _local(PythonAggs)
