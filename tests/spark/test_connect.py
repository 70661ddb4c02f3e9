"""Spark Connect: the DataFrame functions, SparkEngine and tick_stream work on a Connect session
(a local Connect server in a child process: one JVM cannot hold a classic and a Connect-server
session side by side); the RDD-only functions fail at once naming what to use instead.

One child process serves every Connect test of the session (a Connect server takes ~20 s to
start): ``_connect_job.py`` runs each part and prints one ``RESULT`` line of JSON, one entry per
part (or the part's traceback under ``"error"``); the session fixture ``connect_job``
(conftest.py) runs it once."""

from __future__ import annotations

from typing import Any

import pytest
from _reach import BATCHES, STATS_TICKS, Stats, local

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the spark extra")


def test_functions_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    out = connect_job["functions"]
    assert "error" not in out, out.get("error")
    assert out["agg"] == {
        "a": ["lset({1, 2})", "lmax(2)", "lorset({'x': {1}, 'y': {2}})", "lsum(2)", 2],
        "b": ["lset()", "lmax()", "lorset()", "lsum(0)", 1],
    }
    assert out["merge_column"] == {"a": "lset({1, 2})", "b": "lset()"}
    # a lattice class defined in the client's script (__main__) runs on the server's workers
    assert out["main_class"] == {"a": "mymax(2)", "b": "mymax(0)"}
    assert out["worker_error"] == [
        "LatticeValueError",
        "'b'",
        "merge_column(df, ['k'], 'v', lsum)",
    ]
    assert len(out["errors"]) == 3
    for msg in out["errors"]:
        assert "Spark Connect" in msg
    assert "lmerge" in out["errors"][0] and "lfold" in out["errors"][1]
    # every job of the run is tagged with program and tick, and each step with its round and
    # rule; the client's own tags are what is left afterwards
    added, after = out["tags"]
    assert added[0] == "blooml:Closure:tick=run"
    assert "blooml:Closure:tick=run:stratum=0:round=2:rule=1" in added
    assert "blooml:Closure:tick=run:stratum=0:round=1:merge into path (rules 0; 1)" in added
    assert after == ["mine"]
    # SparkEngine on Connect: the program as DataFrame plans
    assert out["closure"] == [[1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4]]
    assert out["touched"][-1][-1] == 0
    # a rule body that does not lower runs as Arrow-batched Python on Connect too
    assert out["python"][0] == out["python"][1] == [[1, 2], [3, 4]]


def test_map_valued_merges_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """MapOf, lbag and CRDT folds and merges (runs of sorted map keys) give on Connect what the
    lattices' own fold and merge give."""
    out = connect_job["maps"]
    assert "error" not in out, out.get("error")
    assert len(out) == 14  # 4 folds and 3 merges, two keys each
    for case, (equal, got, want) in out.items():
        assert equal, (case, got, want)


def test_stream_lfold_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """stream_lfold runs on Connect (applyInPandasWithState on the server): its state is one
    row per group and its results equal the batch lfold's."""
    out = dict(connect_job["state"])
    assert "error" not in out, out.get("error")
    assert out.pop("rows") == 2
    assert out == {
        "a": [True, "lmap({'x': lmax(7), 'y': lmax(2)})", "lmap({'x': lmax(7), 'y': lmax(2)})"],
        "b": [True, "lmap()", "lmap()"],
    }


def test_tick_stream_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """Micro-batches are ticks on Connect too, and a new client continues them after a stop
    between blooml's commit and Spark's: no lost and no doubled tick."""
    out = connect_job["stream"]
    assert "error" not in out, out.get("error")
    assert out["first"] == "None" and out["restarted"] == "None"
    assert out["latest"] == [3, 3]
    assert out["kept"] == ["commits", "meta", "pending", "tables"]
    # Connect has no file system API: the commit log keeps every entry (a file per tick)
    assert out["commits"] == ["tick=0", "tick=1", "tick=2", "tick=3"]
    assert out["ticks"] == ["tick=0", "tick=1", "tick=2", "tick=3"]
    for i in range(4):
        expected = sorted(map(list, local(BATCHES[: i + 1]).path))
        assert out["path"][f"tick={i}"] == expected, i
    # queued by tick 3 for the next tick: every edge reversed (back <+ edge.map(...))
    assert out["back"] == sorted([b, a] for rows in BATCHES for a, b in rows)
    assert out["top"] == {"cell": max(b for rows in BATCHES for _, b in rows)}


def test_small_ticks_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """Small list inputs take the driver-side path on Connect too (inline tables with
    parameters, filters by value) and give the local engine's rows, a delete included."""
    out = connect_job["ticks"]
    assert "error" not in out, out
    p = Stats()
    for i, inputs in enumerate(STATS_TICKS):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        for name in ("link", "fan", "spend", "lo", "hi"):
            assert out[i][name] == sorted(map(list, getattr(p, name))), (i, name)


def test_a_failed_tick_on_connect_reaches_the_client(connect_job: dict[str, Any]) -> None:
    out = connect_job["stream"]
    assert "error" not in out, out.get("error")
    assert out["failed"] is not None, "awaitTermination did not raise"
    name, msg = out["failed"]
    assert name == "StreamingQueryException"
    for text in (msg, out["failed_exception"]):
        assert "blooml.errors.KeyConstraintError: key conflict in 'best' for key 0" in text
        assert "tick 1 of Best (micro-batch 1, input 'edge'); not committed" in text
    assert out["failed_latest"] == [0, 0]
