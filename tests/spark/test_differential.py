"""The local engine against ``SparkEngine`` (DataFrame plans), classic and Spark Connect:
random programs (tests/spark/_differential.py: groups with every SQL aggregate, a global
group, a join, a ``notin``, recursion, ``argmin``, an ``lmax`` column, ``<+``, ``<-``,
``<+-``) over random ticks with None, unicode, ints and floats in one column, and deletes;
every collection compared after every tick, errors compared by class.

A case is drawn from a seed (``random.Random(seed)``), so a failure names the seed that
replays it: ``compare(spark, *draw_case(random.Random(seed), ticks))``. The default run draws
few cases (each tick is Spark jobs); the slow-marked versions draw many."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _differential import FIXED, compare, draw_case
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark
HERE = Path(__file__).resolve().parent
SEEDS = st.integers(0, 2**32 - 1)


def _check(spark: Any, seed: int, ticks: int) -> None:
    names, case = draw_case(random.Random(seed), ticks)
    diff = compare(spark, names, case)
    assert diff is None, f"seed {seed}: {diff}"


@settings(max_examples=2, deadline=None, derandomize=True)
@given(seed=SEEDS)
def test_local_and_spark_agree_on_random_programs(spark: Any, seed: int) -> None:
    _check(spark, seed, ticks=3)


@pytest.mark.parametrize("case", sorted(FIXED))
def test_local_and_spark_agree_on_fixed_cases(spark: Any, case: str) -> None:
    names, ticks = FIXED[case]
    diff = compare(spark, names, ticks)
    assert diff is None, f"{case}: {diff}"


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS)
def test_local_and_spark_agree_on_many_random_programs(spark: Any, seed: int) -> None:
    _check(spark, seed, ticks=6)


_CONNECT = textwrap.dedent(
    """
    import json
    import random
    import sys
    import traceback

    import blooml.spark
    from pyspark.sql import SparkSession
    from _differential import FIXED, compare, draw_case

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    out = {"connect": type(spark).__module__, "diffs": []}
    for seed in json.loads(sys.argv[1]):
        try:
            names, case = draw_case(random.Random(seed), int(sys.argv[2]))
            out["diffs"].append([seed, compare(spark, names, case)])
        except Exception:
            out["diffs"].append([seed, traceback.format_exc()])
    print("RESULT " + json.dumps(out))
    spark.stop()
    """
)


def _connect(tmp_path: Path, seeds: list[int], ticks: int) -> None:
    """Compare many seeds in a Connect server of their own (the slow run)."""
    script = tmp_path / "differential_connect.py"
    script.write_text(_CONNECT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYTHONPATH"] = str(HERE)  # the server's Python imports _differential
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(seeds), str(ticks)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd=tmp_path,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(lines[0][len("RESULT ") :])
    assert out["connect"].startswith("pyspark.sql.connect")
    assert [d for d in out["diffs"] if d[1] is not None] == []
    assert len(out["diffs"]) == len(seeds)


def test_local_and_spark_connect_agree_on_random_programs(connect_job: dict[str, Any]) -> None:
    """The default run's seeds and the fixed cases on Connect, in the session's one Connect
    job (_connect_job.py, ``differential``)."""
    out = connect_job["differential"]
    assert "error" not in out, out.get("error")
    assert set(out) >= {"seed 27", *FIXED}
    assert {case: diff for case, diff in out.items() if diff is not None} == {}


@pytest.mark.slow
def test_local_and_spark_connect_agree_on_many_random_programs(tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the extra")
    _connect(tmp_path, list(range(100, 120)), ticks=6)
