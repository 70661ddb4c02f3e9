"""SparkEngine(path="dataframe"): Bloom^L strata as DataFrame plans, equal to the local engine."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import Closure, Unreached, Widest, _example, _graph, _local, _same_state

from blooml import Program, bloom, lmin, table
from blooml.errors import KeyConstraintError, NotSupportedOnSpark
from blooml.spark import SparkEngine
from blooml.spark._dfengine import DataFramePlan

pytestmark = pytest.mark.spark


def _df_engine(spark: Any, **kw: Any) -> SparkEngine:
    return SparkEngine(spark, path="dataframe", **kw)


def test_shortest_paths_as_dataframe_plans_equal_local_engine(spark: Any) -> None:
    sp = _example("shortest_paths")
    plan = DataFramePlan(sp.Paths.ir())
    assert plan.lattice_cols["path"] == {3: lmin} and plan.lattice_cols["best"] == {2: lmin}
    inputs = {"link": sp.ROADS}
    result = _df_engine(spark, checkpoint_every=2).run(sp.Paths, inputs)
    _same_state(_local(sp.Paths, inputs), result)
    best = {(r.src, r.dst): r.c for r in result["best"].collect()}  # lmin stored as its value
    nodes = {s for s, _, _ in sp.ROADS}
    assert best == {(s, d): c for s in nodes for d, c in sp.dijkstra(sp.ROADS, s).items()}
    # semi-naive: each round touches only the rows that changed, ending with none
    (touched,) = [t for t in result.touched if len(t) > 1]
    assert touched[-1] == 0 and sum(touched) >= len(result.rows("path"))


@settings(max_examples=3, deadline=None)
@given(st.integers(2, 7), st.integers(0, 12), st.integers(0, 10**6))
def test_closure_as_dataframe_plans_random_graphs(spark: Any, n: int, m: int, seed: int) -> None:
    inputs = {"edge": [(a, b) for a, b, _ in _graph(n, m, seed)]}
    _same_state(_local(Closure, inputs), _df_engine(spark).run(Closure, inputs))


def test_widest_paths_with_morphisms_as_dataframe_plans(spark: Any) -> None:
    inputs = {"link": [(0, 1, 5), (1, 2, 3), (0, 2, 1), (2, 3, 9)]}
    result = _df_engine(spark).run(Widest, inputs)
    _same_state(_local(Widest, inputs), result)


def test_untranslatable_rules_fail_before_any_job_naming_the_rule(spark: Any) -> None:
    with pytest.raises(NotSupportedOnSpark, match=r"fanout .*the aggregate accum") as info:
        _df_engine(spark).run(Unreached, {"edge": "not even rows"})  # raised before reading
    assert "rule" in str(info.value) or "<=" in str(info.value)


class Owner(Program):
    claim = table(["item", "who"])
    owner = table(["item"], ["who"])

    # fmt: off
    @bloom
    def rules(self):
        self.owner <= self.claim.map(lambda c: (c.item, c.who))
    # fmt: on


def test_key_conflict_is_a_key_constraint_error(spark: Any) -> None:
    ok = _df_engine(spark).run(Owner, {"claim": [("pen", "ann"), ("cup", "bob")]})
    assert sorted(ok.rows("owner")) == [("cup", "bob"), ("pen", "ann")]
    with pytest.raises(KeyConstraintError, match="owner") as info:
        _df_engine(spark).run(Owner, {"claim": [("pen", "ann"), ("pen", "bob")]})
    # the report names the key and the two rows that disagree, as the local engine does
    assert info.value.key == "pen"
    assert {info.value.old, info.value.new} == {("pen", "ann"), ("pen", "bob")}
    # against a row stored by an earlier tick: the stored row is the old one
    engine = _df_engine(spark)
    engine.tick({"claim": [("pen", "ann")]}, program=Owner)
    with pytest.raises(KeyConstraintError) as info:
        engine.tick({"claim": [("pen", "cid")]}, program=Owner)
    assert (info.value.key, info.value.old, info.value.new) == (
        "pen",
        ("pen", "ann"),
        ("pen", "cid"),
    )


def test_many_rounds_keep_spark_size_estimates_small(spark: Any) -> None:
    # Spark estimates a join's size as the product of its inputs' and a checkpoint keeps the
    # estimate of the plan it came from: a state merged by joining it, fed back round after
    # round, doubled the estimate's digits every round until planning alone took seconds, then
    # minutes. The merge is one aggregation: the estimate grows by a bounded factor per round.
    hops = 16
    sp = _example("shortest_paths")  # path: keyed by (src, dst, hop), an lmin cost
    inputs = {"link": [(f"n{i}", f"n{i + 1}", 1) for i in range(hops)]}
    result = _df_engine(spark).run(sp.Paths, inputs)
    _same_state(_local(sp.Paths, inputs), result)
    assert max(result.rounds) >= hops
    estimate = int(result["path"]._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    # a bounded factor a round (one product with the link table's estimate); the old merge
    # reached 8 million bits after 16 rounds
    assert estimate.bit_length() < 128 * hops


class Feedback(Program):
    """A rule joining two recursive collections, one round per few steps along a chain."""

    start = table(["x"])
    e = table(["x", "y"])
    r = table(["x"])
    q = table(["x"])
    w = table(["x"])

    # fmt: off
    @bloom
    def rules(self):
        self.r <= self.start
        self.q <= self.r
        self.w <= self.r.join(self.q, self.r.x == self.q.x).map(lambda a, b: (a.x,))
        self.r <= self.w.join(self.e, self.w.x == self.e.x).map(lambda a, b: (b.y,))
    # fmt: on


def test_joins_of_two_recursive_collections_keep_size_estimates_small(spark: Any) -> None:
    # r joined with q, both growing: each round multiplies the estimates of two checkpoints
    # that carry earlier products, so the digits double every few rounds. Checkpoints whose
    # estimate passes 2**63 are reset on classic sessions (without that, the estimates here
    # reach ~10,000 digits, and planning time doubles with them).
    steps = 8
    inputs = {"start": [(0,)], "e": [(i, i + 1) for i in range(steps)]}
    result = _df_engine(spark).run(Feedback, inputs)
    _same_state(_local(Feedback, inputs), result)
    assert result.rounds[-1] > 2 * steps
    for name in ("r", "q", "w"):
        estimate = int(result[name]._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
        assert estimate.bit_length() <= 4 * 63, name
