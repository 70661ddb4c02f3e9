"""Durable state survives SIGKILL at any moment: a real child process is killed at random
points (seeded) and restarted on the same data_dir; every restart must find exactly the state
of some tick at or after the last one it reported committed, never half of a tick."""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

CHILD = Path(__file__).resolve().parent / "_durable_child.py"
SRC = Path(__file__).resolve().parents[2] / "src"


def _spawn(data_dir: Path, max_ticks: int, compact: bool = False) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("BLOOML_TEST_COMPACT", None)
    if compact:
        env["BLOOML_TEST_COMPACT"] = "1"
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), str(max_ticks)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise AssertionError(f"the child printed nothing within {timeout} s")
        return proc.stdout.readline()
    finally:
        sel.close()


def kill_and_restart(tmp: Path, kills: int, seed: int, compact: bool = False) -> dict[str, int]:
    rng = random.Random(seed)
    data_dir = tmp / "ledger"
    committed = -1  # the last tick a child reported committed
    restarts_checked = 0
    max_ticks = 10**6  # bounded; a kill always comes first
    for n in range(kills):
        proc = _spawn(data_dir, max_ticks, compact)
        try:
            if n % 3 == 0:
                time.sleep(rng.uniform(0.0, 0.4))  # anywhere, start-up and restore included
            else:
                line = _wait_for_line(proc, 30.0)  # the restore is done: kill mid-ticking
                assert line.startswith("start "), line
                time.sleep(rng.uniform(0.0, 0.08))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.stdout is not None and proc.stderr is not None
            # read through the same buffered streams readline used (the child is dead: EOF)
            out, err = proc.stdout.read(), proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
        if n % 3 != 0:
            out = line + out
        lines = out.splitlines()
        if lines and lines[0].startswith("start "):
            start = int(lines[0].split()[1])
            assert start >= committed + 1, f"kill {n}: restarted at {start}, {committed} was done"
            if len(lines) > 1:
                assert lines[1] == "ok", f"kill {n}: {lines[1]}"
                restarts_checked += 1
        for ln in lines:
            if ln.startswith("committed "):
                committed = max(committed, int(ln.split()[1]))
        assert "Traceback" not in err or "KeyboardInterrupt" in err, err
    # a last run that is not killed: finish a few ticks and check
    proc = _spawn(data_dir, committed + 5, compact)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert int(lines[0].split()[1]) >= committed + 1
    assert lines[1] == "ok", lines[1]
    return {"committed": committed, "restarts_checked": restarts_checked}


def test_sigkill_loses_no_committed_tick_ci(tmp_path: Path) -> None:
    got = kill_and_restart(tmp_path, kills=6, seed=12)
    assert got["committed"] > 0
    assert got["restarts_checked"] >= 3


@pytest.mark.slow
def test_sigkill_loses_no_committed_tick_many_kills(tmp_path: Path) -> None:
    got = kill_and_restart(tmp_path, kills=120, seed=2026)
    assert got["committed"] > 100
    assert got["restarts_checked"] >= 60


def test_sigkill_loses_no_incremental_lattice_write_ci(tmp_path: Path) -> None:
    # lattice variables written as increments from the first tick, compacted every 7
    got = kill_and_restart(tmp_path, kills=6, seed=7, compact=True)
    assert got["committed"] > 0
    assert got["restarts_checked"] >= 3


@pytest.mark.slow
def test_sigkill_loses_no_incremental_lattice_write_many_kills(tmp_path: Path) -> None:
    got = kill_and_restart(tmp_path, kills=80, seed=2027, compact=True)
    assert got["committed"] > 100
    assert got["restarts_checked"] >= 40
