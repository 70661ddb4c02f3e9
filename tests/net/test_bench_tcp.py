"""benchmarks/bench_net_tcp.py, CI size: every request through the KVS node gets its own,
right, reply, one at a time and from clients at once (the timings and ratios are the
benchmark's to print, not a test's to assert)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_benchmark

bt = load_benchmark("bench_net_tcp")


def test_requests_through_the_kvs_node_get_their_replies() -> None:
    v = bt.Verdicts()
    kvs = bt.start_kvs(1_000)
    try:
        bt.latency(v, kvs, 40, 1_000, 1)
    finally:
        kvs.stop()
    assert "latency replies" not in v.missed


@pytest.mark.slow
def test_concurrent_clients_get_their_replies() -> None:
    v = bt.Verdicts()
    kvs = bt.start_kvs(10_000)
    try:
        bt.concurrency(v, kvs, 30, 8, 10_000, 1)
    finally:
        kvs.stop()
    assert "concurrency replies" not in v.missed


def test_the_benchmark_counts_the_node_loops_rounds_and_reads_thread_clocks() -> None:
    kvs = bt.start_kvs(10)
    try:
        rounds = bt.LoopRounds(kvs)
        kvs.sync_do(lambda p: None)  # the loop leaves the select it was in: wrapped from now
        before = rounds.read()
        kvs.sync_do(lambda p: None)  # wakes the wrapped select: a round at least
        after = rounds.read()
        assert after[0] > before[0] and after[1] >= before[1]
        rounds.remove()
        assert "select" not in vars(rounds.selector)  # the wrapper is gone
        kvs.sync_do(lambda p: None)  # (the select entered before removal counts once more)
        settled = rounds.read()
        kvs.sync_do(lambda p: None)
        assert rounds.read() == settled  # and then nothing more
    finally:
        kvs.stop()
    clock = bt.schedstat()
    if sys.platform.startswith("linux"):
        assert clock is not None and clock[0] > 0 and clock[1] >= 0
