"""The Spark engine reports each fixpoint round at INFO on the ``blooml.spark`` logger, on every
path, and every Spark job of a tick says what it is (program, tick, stratum, round, rule)."""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

import pytest
from _reach import BATCHES, Reach

from blooml import Program, bloom, table

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Chain(Program):
    edge = table(["a", "b"])
    path = table(["a", "b"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
    # fmt: on


@pytest.mark.parametrize("path", ["auto", "rdd"])
def test_rounds_logged_at_info(spark: Any, caplog: pytest.LogCaptureFixture, path: str) -> None:
    from blooml.spark import SparkEngine

    with caplog.at_level(logging.INFO, logger="blooml.spark"):
        result = SparkEngine(spark, path=path).run(Chain, {"edge": [(0, 1), (1, 2), (2, 3)]})
    msgs = [r.getMessage() for r in caplog.records if r.name == "blooml.spark"]
    assert len(msgs) == result.rounds[0]
    assert msgs[0] == "Chain stratum 0 round 1: rows new {'path': 3}, lattices grown []"
    assert msgs[1] == "Chain stratum 0 round 2: rows new {'path': 2}, lattices grown []"
    assert msgs[-1].endswith("rows new {'path': 0}, lattices grown []")
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "blooml.spark")


class Divide(Program):
    num = table(["x"])
    out = table(["y"])

    @bloom
    def rules(self):
        self.out <= self.num.map(lambda r: (10 // r.x,))


@pytest.mark.parametrize("path", ["auto", "rdd"])
def test_a_failing_stratum_is_logged_at_warning(
    spark: Any, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    from blooml.spark import SparkEngine

    with caplog.at_level(logging.WARNING, logger="blooml"), pytest.raises(Exception):  # noqa: B017
        SparkEngine(spark, path=path).run(Divide, {"num": [(0,)]})
    (rec,) = [r for r in caplog.records if r.name == "blooml.spark"]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert msg.startswith("Divide stratum 0 failed: ")
    assert "ZeroDivisionError" in msg and "rule 0 (test_spark_logging.py:" in msg


def _seq(seq: Any) -> list[Any]:
    """A Scala ``Seq`` (through py4j) as a list."""
    return [seq.apply(i) for i in range(seq.length())]


def _jobs_since(sc: Any, first: int) -> list[Any]:
    """The status store's jobs from id ``first`` on, once a probe job run after them is in
    (the listener bus delivers events in order): (id, name, description, tags)."""
    sc.setLocalProperty("spark.job.description", "probe")
    sc.parallelize([1], 1).count()
    sc.setLocalProperty("spark.job.description", None)
    store = sc._jsc.sc().statusStore()
    for _ in range(100):
        jobs = []
        for j in _seq(store.jobsList(None)):
            if j.jobId() >= first:
                desc = j.description().get() if j.description().isDefined() else None
                jobs.append((j.jobId(), j.name(), desc, _seq(j.jobTags())))
        if any(d == "probe" for _, _, d, _ in jobs):
            return sorted(jobs)[:-1]
        time.sleep(0.1)
    raise AssertionError("the probe job never reached the status store")


@pytest.mark.parametrize("path", ["dataframe", "rdd"])
def test_every_job_of_a_tick_says_what_it_is(spark: Any, path: str) -> None:
    """Read from Spark's status store (what the UI shows): every job of the ticks carries a
    description and a name naming program, tick, stratum, round and rule, and the tick's tag;
    the user's own description is back afterwards."""
    from blooml.spark import SparkEngine

    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", "the user's own")
    first = max([-1, *sc.statusTracker().getJobIdsForGroup(None)]) + 1
    if path == "dataframe":  # two ticks: temporal rules, their facts, a lattice variable
        engine = SparkEngine(spark, path=path, program=Reach)
        engine.tick({"edge": BATCHES[0]})
        engine.tick({"edge": BATCHES[1]})
        name, tick = "Reach", "tick 1"
    else:
        SparkEngine(spark, path=path).run(Chain, {"edge": [(0, 1), (1, 2)]})
        name, tick = "Chain", "tick run"
    assert sc.getLocalProperty("spark.job.description") == "the user's own"  # restored
    sc.setLocalProperty("spark.job.description", None)
    jobs = _jobs_since(sc, first)
    assert jobs
    for job_id, job_name, desc, tags in jobs:
        assert desc is not None and desc.startswith(f"blooml {name} tick "), (job_id, desc)
        assert job_name.startswith(f"blooml {name} tick "), (job_id, job_name)
        assert any(t.startswith(f"blooml:{name}:tick=") for t in tags), (job_id, tags)
    descriptions = [d for _, _, d, _ in jobs]
    # the round a merge runs in depends on how much of the fixpoint a small tick computes
    # on the driver (tick 1 of Reach reaches it in round 1), so any round will do
    merge = re.compile(
        rf"blooml {name} {tick}, stratum 0 round \d+: merge into path \(rules 0, 1\)"
    )
    assert any(merge.fullmatch(d) for d in descriptions), descriptions
    if path == "dataframe":
        lattice_rule = f"blooml {name} {tick}, stratum 0 round 1: rule 5 (_reach.py:"
        assert any(d.startswith(lattice_rule) for d in descriptions)
        assert (
            f"blooml {name} tick 1: <+ facts for the next tick into back (rule 2)" in descriptions
        )
        # tick 0's <+ facts applied, one labelled job per collection they go into
        assert f"blooml {name} tick 1: <+ facts of the previous tick: insert into back" in (
            descriptions
        )
