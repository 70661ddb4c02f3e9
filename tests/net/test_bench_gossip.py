"""benchmarks/bench_net_gossip.py, CI size: both idioms catch a restarted replica up over UDP
with a store larger than a datagram (the figures and ratios are printed by the benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_benchmark

bg = load_benchmark("bench_net_gossip")


def test_a_restarted_replica_catches_up_by_deltas_and_by_whole_state() -> None:
    delta = bg.run("delta", "udp", 4_000, 30.0)
    whole = bg.run("whole", "udp", 4_000, 30.0)
    assert delta["converged"] and whole["converged"]
    assert delta["bytes"] > 0 and whole["bytes"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_100k_keys_converge_by_whole_state_and_by_deltas(transport: str) -> None:
    for kind in ("delta", "whole"):
        assert bg.run(kind, transport, 100_000, 300.0)["converged"], kind
