"""The Spark engine reports each fixpoint round at INFO on the ``blooml.spark`` logger."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

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


def test_rounds_logged_at_info(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    from blooml.spark import SparkEngine

    with caplog.at_level(logging.INFO, logger="blooml.spark"):
        result = SparkEngine(spark).run(Chain, {"edge": [(0, 1), (1, 2), (2, 3)]})
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


def test_a_failing_stratum_is_logged_at_warning(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from blooml.spark import SparkEngine

    with caplog.at_level(logging.WARNING, logger="blooml"), pytest.raises(Exception):  # noqa: B017
        SparkEngine(spark).run(Divide, {"num": [(0,)]})
    (rec,) = [r for r in caplog.records if r.name == "blooml.spark"]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert msg.startswith("Divide stratum 0 failed: ")
    assert "ZeroDivisionError" in msg and "rule 0 (test_spark_logging.py:" in msg
