"""The network examples: nodes in separate processes on real loopback sockets."""

from __future__ import annotations

from _examples import load_example


def test_quorum_vote_with_five_voter_processes() -> None:
    out = load_example("net_quorum").main(voters=5, timeout=20.0)
    assert out["done"] is True
    assert out["votes"] == out["voters"] and len(out["votes"]) == 5
    assert out["quiet"] is True  # every voter heard the result
    assert out["exit_codes"] == [0] * 5  # SIGTERM stops a node cleanly


def test_replicated_kvs_converges_after_a_partition_heals() -> None:
    out = load_example("net_kvs").main(timeout=20.0)
    assert out["before"] == {"colour": "red", "size": "S"}
    part = list(out["partitioned"].values())
    assert {"colour": "blue", "shape": "square", "size": "S"} in part
    assert {"colour": "green", "size": "M"} in part
    assert out["after"] == {"colour": "green", "shape": "square", "size": "M"}
    assert out["exit_codes"] == [0, 0, 0]
