"""examples/quorum_vote.py: the seed figure, run over the loopback channel."""

from __future__ import annotations

from _examples import load_example
from hypothesis import given
from hypothesis import strategies as st

from blooml import LocalNetwork, Program, bloom, channel, interface, lbool, lmax, lset

qv = load_example("quorum_vote")


def run(ballots: list[list[str]]) -> tuple[object, list[dict[str, object]]]:
    p = qv.QuorumDemo()
    trace = []
    for cast in ballots:
        p.ballot.insert([(v,) for v in cast])
        p.tick()
        trace.append(
            {
                "votes": set(p.votes.value.reveal()),
                "cnt": p.cnt.value,
                "done": p.quorum_done.value,
                "result": {(r.addr, r.first.reveal()) for r in p.result},
            }
        )
    return p, trace


def test_main_trace() -> None:
    out = qv.main()
    votes = [t["votes"] for t in out["trace"]]
    # a vote cast in tick t is visible in tick t + 1 (the channel delivers at a later tick)
    assert votes[0] == []
    assert votes[1] == ["alice"]
    assert votes[2] == ["alice", "bob"]
    assert votes[4] == ["alice", "bob"]
    assert votes[5] == ["alice", "bob", "carol", "dave"]
    assert [t["cnt"] for t in out["trace"]] == [0, 1, 2, 2, 2, 4, 4]
    assert [t["done"] for t in out["trace"]] == [False] * 5 + [True, True]
    # quorum reached in tick 5: the result message arrives in tick 6 (ticks count from 0)
    assert out["result_tick"] == 6
    assert out["points_of_order"] == 0  # monotone: no coordination needed


def test_result_arrives_one_tick_after_quorum() -> None:
    p, trace = run([["a", "b", "c"], [], [], []])
    assert [t["done"] for t in trace] == [lbool(False), lbool(True), lbool(True), lbool(True)]
    assert trace[1]["result"] == set()
    assert trace[2]["result"] == {(qv.RESULT_ADDR, 2)}
    # when_true keeps deriving the same message, which the table holds once
    assert trace[3]["result"] == {(qv.RESULT_ADDR, 2)}
    assert p.cnt.value == lmax(3)
    assert p.votes.value == lset({"a", "b", "c"})


@given(st.lists(st.lists(st.sampled_from(["v1", "v2", "v3", "v4", "v5"]), max_size=4), max_size=6))
def test_counts_distinct_voters_whatever_the_order(ballots: list[list[str]]) -> None:
    ballots = [*ballots, [], []]  # let the last votes and the result arrive
    _, trace = run(ballots)
    for i, t in enumerate(trace):
        seen = {v for cast in ballots[:i] for v in cast}  # cast before this tick
        assert t["votes"] == seen
        assert t["cnt"] == lmax(len(seen))
        assert bool(t["done"]) == (len(seen) >= qv.QUORUM_SIZE)
    everyone = {v for cast in ballots for v in cast}
    assert bool(trace[-1]["result"]) == (len(everyone) >= qv.QUORUM_SIZE)


class Voter(Program):
    """A separate node that votes by sending to the coordinator's vote channel."""

    ballot = interface(["addr", "voter_id"])
    vote_chn = channel(["@addr", "voter_id"])

    # fmt: off
    @bloom
    def vote(self):
        self.vote_chn <~ self.ballot
    # fmt: on


@given(
    st.lists(st.sampled_from(["v1", "v2", "v3", "v4"]), max_size=8),
    st.integers(0, 2**16),
)
def test_outcome_is_the_same_on_a_chaotic_network(votes: list[str], seed: int) -> None:
    """Votes from three voter nodes, delayed, reordered and duplicated: the coordinator ends
    with the same votes and reaches the quorum exactly when a set model says so."""
    net = LocalNetwork(seed, max_delay=3, dup_prob=0.3)
    coordinator = qv.QuorumDemo(addr=qv.RESULT_ADDR, network=net)
    voters = [Voter(addr=f"voter{i}", network=net) for i in range(3)]
    for i, v in enumerate(votes):
        voters[i % 3].ballot.insert([(qv.RESULT_ADDR, v)])
        net.tick()
    net.tick(10)
    assert set(coordinator.votes.value.reveal()) == set(votes)
    reached = len(set(votes)) >= qv.QUORUM_SIZE
    assert bool(coordinator.quorum_done.value) == reached
    assert bool(list(coordinator.result)) == reached
