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


def test_reliable_delivery_under_30_percent_loss() -> None:
    out = load_example("net_reliable").main(messages=40, timeout=30.0)
    assert out["confirmed"] == list(range(40))  # every message delivered and acknowledged
    assert out["buffered"] == 0
    assert out["lost"] > 0  # the network did lose datagrams
    assert out["exit_code"] == 0


def test_two_phase_commit_across_processes() -> None:
    out = load_example("net_2pc").main(timeout=20.0)
    assert out["committed"] == [1] and out["aborted"] == [2]
    assert sorted(d for (x, _), d in out["acks"].items() if x == 1) == ["commit"] * 3
    assert sorted(d for (x, _), d in out["acks"].items() if x == 2) == ["abort"] * 3
    # non-monotone: the static analysis names the rules that need coordination
    assert out["points_of_order"] == ["committed", "waiting"]
    assert out["exit_codes"] == [0, 0, 0]


def test_causal_broadcast_with_vector_clocks_on_a_reordering_network() -> None:
    out = load_example("net_causal").main(questions=6, timeout=30.0)
    assert sorted(out["delivered"].values()) == [24, 24, 24]
    assert out["violations"] == []  # no answer delivered before its question
    assert out["exit_codes"] == [0, 0, 0]


def test_quorum_vote_with_five_voter_nodes_in_one_process() -> None:
    import time

    q = load_example("net_quorum")
    leader = q.Leader(addr="127.0.0.1:0").start()
    voters = [q.Voter(addr="127.0.0.1:0") for _ in range(5)]
    try:
        for v in voters:  # five nodes of one class, each on its own thread
            v.start()
            v.async_do(lambda p: p.leader.insert([(leader.addr,)]))
        deadline = time.monotonic() + 20
        heard: list[bool] = []
        while time.monotonic() < deadline:
            heard = [v.sync_do(lambda p: bool(list(p.heard))) for v in voters]
            if all(heard):
                break
            time.sleep(0.05)
        assert all(heard)
        assert leader.sync_do(lambda p: bool(p.quorum_done.value))
        votes = leader.sync_do(lambda p: sorted(p.votes.value.reveal()))
        assert votes == sorted(v.addr for v in voters)
    finally:
        for p in [*voters, leader]:
            p.stop()


def test_membership_on_a_cluster_started_in_one_command() -> None:
    out = load_example("net_membership").main(timeout=30.0)
    assert out["up"] == out["nodes"] and len(out["nodes"]) == 3
    assert out["still_up"] == sorted(set(out["nodes"]) - {out["victim"]})
    assert (out["victim"], "down") in out["events"]
    # wall clock on a shared machine: the bound, plus slack for a slow tick
    assert out["detected"] <= out["bound"] + 2.0
    # a node was killed: the cluster command says so (and stops the others within the wait)
    assert out["exit_code"] == 1, "\n".join(out["log"][-30:])
    assert out["traces"] == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert out["html"].stat().st_size > 1000
