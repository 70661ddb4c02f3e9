"""benchmarks/bench_net_poison.py runs (quick) and every good row arrives in each workload
(its throughputs and ratios are printed by the benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_benchmark

bp = load_benchmark("bench_net_poison")


def test_quick_run_applies_every_good_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert bp.main(["--quick"]) == 0  # run() exits when a good row is missing
    out = capsys.readouterr().out
    assert "one poison sender" in out and "poison everywhere" in out and "vs clean" in out
    assert "poison frames" in out
