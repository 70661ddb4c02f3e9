"""``blooml run``: a node in a child process, seeded rows, a summary line, a clean stop."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from blooml.cli import main
from blooml.net import NodeProcess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_run_seeds_rows_logs_a_summary_and_stops_on_sigterm(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("secret\n")
    p = NodeProcess(
        f"{EXAMPLES / 'net_kvs.py'}:Replica",
        inserts={"peer": [("127.0.0.1:9",)]},
        args=["--summary-every", "0.2", "--cluster-key-file", str(key)],
    )
    assert p.addr.startswith("127.0.0.1:")
    time.sleep(0.8)
    assert p.stop() == 0
    time.sleep(0.1)
    summaries = [line for line in p.log if "ticks=" in line]
    assert summaries, p.log
    assert any("stopped:" in line for line in p.log)


def test_run_exits_with_status_2_on_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{EXAMPLES / 'net_kvs.py'}:Replica"
    assert main(["run", target, "--address", "127.0.0.1:0", "--insert", "nope=[[1]]"]) == 2
    assert "no collection 'nope'" in capsys.readouterr().err
    assert main(["run", target, "--address", "127.0.0.1:0", "--insert", "peer=[1"]) == 2
    assert "bad JSON" in capsys.readouterr().err
    assert main(["run", "no_such_module:X", "--address", "127.0.0.1:0"]) == 2
    assert main(["run", target, "--address", "127.0.0.1:0", "--drop-rate", "2"]) == 2


def test_run_duration_stops_by_itself() -> None:
    target = f"{EXAMPLES / 'net_kvs.py'}:Replica"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "blooml",
            "run",
            target,
            "--address",
            "127.0.0.1:0",
            "--duration",
            "0.3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0
    assert "Replica at 127.0.0.1:" in out.stdout
