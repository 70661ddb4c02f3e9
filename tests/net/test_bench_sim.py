"""benchmarks/bench_net_sim.py runs (quick) and checks its results (its speeds are printed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_benchmark

bs = load_benchmark("bench_net_sim")


def test_the_stream_arrives_whole_on_every_transport() -> None:
    for kind in ("local", "sim-nocodec", "sim"):
        _, best = bs.stream(kind, 2_000, 200)
        assert best == {bk: bs.lmax(max(range(bk, 2_000, 1000))) for bk in range(1000)}


def test_quick_run_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert bs.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "simulator with codec vs LocalNetwork" in out and "durable vs plain" in out
