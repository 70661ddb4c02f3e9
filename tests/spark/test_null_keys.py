"""None in join, notin, group and delete columns: SparkEngine equals the local engine, which
compares keys as Python does (``None == None``). On DataFrame plans every equality is NULL-safe
(``<=>``); a plain SQL ``=`` drops the rows whose key is NULL."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from test_engine import _local, _same_state
from test_tick_cost import _alongside

from blooml import Program, bloom, count, scratch, table
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # rule functions for RDD workers


class NullJoins(Program):
    """Reachability, a join, a notin and a group, all keyed on columns that hold None."""

    edge = table(["a", "b"])
    tag = table(["k", "t"])
    block = table(["k"])
    path = table(["a", "b"])
    tagged = table(["a", "b", "t"])
    kept = table(["a", "b"])
    fan = scratch(["a"], ["n"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.tagged <= self.edge.join(self.tag, self.edge.a == self.tag.k).map(
            lambda e, t: (e.a, e.b, t.t)
        )
        self.kept <= self.edge.notin(self.block, self.edge.a == self.block.k)
        self.fan <= self.edge.group(["a"], count())
    # fmt: on


class NullKeys(NullJoins):
    """And a delete of rows with None in them."""

    drop = scratch(["a", "b"])

    # fmt: off
    @bloom
    def deletes(self):
        self.edge <- self.drop
    # fmt: on


TICKS: list[dict[str, list[tuple[Any, ...]]]] = [
    {
        "edge": [(None, 1), (1, None), (2, 3), (3, 4)],
        "tag": [(None, "n"), (2, "two")],
        "block": [(None,), (7,)],
    },
    # a later tick's few rows (joined with the state, merged as rows on the driver); (None, 1)
    # is stored already and must not be stored twice
    {"edge": [(4, None), (None, 1), (None, 5)]},
    {"drop": [(None, 1), (4, None)]},  # deletes rows with None in them (applied next tick)
    {"edge": [(5, None), (None, 6)]},  # (a list's column of None alone has no Spark type)
]


def test_none_keys_match_as_in_the_local_engine_tick_after_tick(spark: Any) -> None:
    engine = SparkEngine(spark, path="dataframe", program=NullKeys)
    p = NullKeys()
    ticks = list(_alongside(engine, p, TICKS))  # every collection equal, tick after tick
    assert len(ticks) == len(TICKS)
    # what a plain SQL "=" lost at tick 0: the rows matched through a None key
    assert (None, 1, "n") in p.tagged and (1, 1) in p.path and (None, 1) not in p.kept


@pytest.mark.parametrize("path", ["dataframe", "rdd"])
def test_none_keys_in_one_run_on_either_path(spark: Any, path: str) -> None:
    result = SparkEngine(spark, path=path).run(NullJoins, TICKS[0])
    _same_state(_local(NullJoins, TICKS[0]), result)
