"""Every Bloom^L example runs as a script and prints what it claims."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _examples import EXAMPLES, ROOT, load_example

BLOOM_EXAMPLES = [
    "shortest_paths",
    "quorum_vote",
    "reliable_delivery",
    "shopping_cart",
    "priority_queue",
    "kvs",
    "neighbor_table",
    "dedalus_time",
    "choice",
    "sim_time",
    "crdt_cart",
]


@pytest.mark.parametrize("name", BLOOM_EXAMPLES)
def test_main_prints_and_returns(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = load_example(name).main()
    out = capsys.readouterr().out
    assert isinstance(result, dict) and result
    assert len(out.splitlines()) >= 8, out
    assert "MISMATCH" not in out and "Traceback" not in out


@pytest.mark.slow
@pytest.mark.parametrize("name", BLOOM_EXAMPLES)
def test_runs_as_a_script(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert proc.stderr == ""


def test_demo_output_is_verified(capsys: pytest.CaptureFixture[str]) -> None:
    """The `make demo` candidate checks itself against Dijkstra and says so."""
    load_example("shortest_paths").main()
    out = capsys.readouterr().out
    assert out.count("checked against Dijkstra") == 2
    assert out.count(": OK") == 2
    assert "stratum 0:" in out and "path -> path  (monotone" in out


@pytest.mark.slow
def test_blooml_analyze_on_an_example() -> None:
    """`blooml analyze file.py:Class` prints the cart's points of order."""
    proc = subprocess.run(
        [sys.executable, "-m", "blooml", "analyze", "examples/shopping_cart.py:DisorderlyCart"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "points of order" in proc.stdout
    assert "final <= group(action_log" in proc.stdout
