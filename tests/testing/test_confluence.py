"""check_confluence: passes on the quorum vote, the lattice KVS and the disorderly cart; catches
the destructive cart (the seed's non-confluent program) with both schedules and outcomes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, channel, interface
from blooml.errors import BloomlError, ConfluenceViolation
from blooml.testing import ConfluenceReport, check_confluence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_example

quorum = load_example("quorum_vote")
kvs = load_example("kvs")
cart = load_example("shopping_cart")


class Ballot(Program):
    """A voter: each ballot becomes a vote message to the coordinator."""

    ballot = interface(["coordinator", "voter_id"])
    vote_chn = channel(["@addr", "voter_id"])

    # fmt: off
    @bloom
    def rules(self):
        self.vote_chn <~ self.ballot
    # fmt: on


def quorum_nodes(sim: Any) -> list[Any]:
    # the seed figure sends its result to "localhost": the coordinator's own address
    return [quorum.QuorumVote(addr="localhost", network=sim)] + [
        Ballot(addr=f"v{i}", network=sim) for i in range(4)
    ]


QUORUM_INPUTS = [
    (0.01 * i, f"v{i}", "ballot", [("localhost", f"voter{i}"), ("localhost", "shared")])
    for i in range(4)
]


def test_the_quorum_vote_is_confluent() -> None:
    report = check_confluence(
        quorum_nodes, QUORUM_INPUTS, outputs=["votes", "cnt", "quorum_done"], runs=30, seed=1
    )
    assert isinstance(report, ConfluenceReport)
    assert report.runs >= 30  # the reference run and the schedules hypothesis drew
    assert report.outcome["localhost"]["cnt"].reveal() == 5
    assert bool(report.outcome["localhost"]["quorum_done"])
    assert report.points_of_order == {"QuorumVote": [], "Ballot": []}
    assert "no points of order" in str(report)


def kvs_nodes(sim: Any) -> list[Any]:
    ns = [kvs.ReplicatedKVS(addr=f"r{i}", network=sim) for i in range(3)]
    for i, p in enumerate(ns):
        p.peer.insert([(f"r{j}",) for j in range(3) if j != i])
    return ns


def test_the_gossiping_lattice_kvs_is_confluent() -> None:
    inputs = {
        "r0": {"kvput": [(1, "colour", 2, "green"), (2, "size", 1, "S")]},
        "r1": {"kvput": [(1, "colour", 3, "blue")]},
        "r2": {"kvput": [(1, "colour", 1, "red"), (2, "size", 2, "M")]},
    }
    report = check_confluence(kvs_nodes, inputs, outputs=["store"], runs=15, seed=2, until=5.0)
    stores = {
        a: {k: kvs.value_of(v) for k, v in o["store"].reveal().items()}
        for a, o in report.outcome.items()
    }
    assert stores == {a: {"colour": "blue", "size": "M"} for a in ("r0", "r1", "r2")}


ACTIONS = cart.SESSION_ACTIONS


def cart_inputs() -> list[Any]:
    out: list[Any] = [(0.0, "client", "client_checkout", [("server", "client", "s1", 5)])]
    for i, (reqid, item, qty) in enumerate(ACTIONS):
        out.append(
            (0.01 * i, "client", "client_action", [("server", "client", "s1", reqid, item, qty)])
        )
    return out


def cart_nodes(server_cls: type) -> Any:
    def make(sim: Any) -> list[Any]:
        return [cart.CartClient(addr="client", network=sim), server_cls(addr="server", network=sim)]

    return make


def test_the_disorderly_cart_is_confluent_and_says_where_it_orders() -> None:
    report = check_confluence(
        cart_nodes(cart.DisorderlyCart), cart_inputs(), outputs={"client": ["response"]}, runs=40
    )
    assert report.outcome["client"]["response"] == [("s1", cart.expected_cart(ACTIONS))]
    points = report.points_of_order["DisorderlyCart"]
    assert points and all("after channel" in p for p in points)
    assert "points of order" in str(report)


def test_the_destructive_cart_is_caught() -> None:
    with pytest.raises(ConfluenceViolation) as ei:
        check_confluence(
            cart_nodes(cart.DestructiveCart),
            cart_inputs(),
            outputs={"client": ["response"]},
            runs=100,
            seed=0,
        )
    v = ei.value
    ref, bad = v.outcomes
    assert ref["client"]["response"] == [("s1", cart.expected_cart(ACTIONS))]
    assert bad["client"]["response"] != ref["client"]["response"]
    assert v.difference == [("client", "response")]
    ref_sched, bad_sched = v.schedules
    assert all(s.endswith("delay 0.000") for s in ref_sched)
    assert any("delay 0.000" not in s for s in bad_sched)
    assert v.points_of_order["DestructiveCart"]
    text = str(v)
    assert "reference schedule" in text and "failing schedule" in text
    assert "points of order" in text and "argmin(queue" in text


def test_the_search_is_deterministic_for_a_seed() -> None:
    def find() -> Any:
        with pytest.raises(ConfluenceViolation) as ei:
            check_confluence(
                cart_nodes(cart.DestructiveCart),
                cart_inputs(),
                outputs={"client": ["response"]},
                runs=100,
                seed=7,
            )
        return ei.value.schedules, ei.value.outcomes

    assert find() == find()


def test_bad_arguments() -> None:
    with pytest.raises(BloomlError, match="runs must be a positive int"):
        check_confluence(quorum_nodes, QUORUM_INPUTS, runs=0)
    with pytest.raises(BloomlError, match="factory made"):
        check_confluence(quorum_nodes, {"nobody": {"ballot": []}}, runs=1)
    with pytest.raises(BloomlError, match="has no collection or lattice variable"):
        check_confluence(quorum_nodes, QUORUM_INPUTS, outputs={"localhost": ["nope"]}, runs=1)
    with pytest.raises(BloomlError, match="max_delay"):
        check_confluence(quorum_nodes, QUORUM_INPUTS, max_delay=0)


crdt = load_example("crdt_cart")


def test_the_replicated_crdt_cart_is_confluent() -> None:
    report = check_confluence(
        crdt.crdt_nodes, crdt.crdt_inputs(), outputs=["cart"], runs=40, seed=3, until=3.0
    )
    want = dict(cart.expected_cart(ACTIONS))
    assert {a: crdt.contents(o["cart"]) for a, o in report.outcome.items()} == {
        "r1": want,
        "r2": want,
    }
    assert report.points_of_order["CrdtCart"] == []


def test_a_crdt_cart_that_is_not_given_time_to_gossip_is_caught() -> None:
    """Compared before the replicas have gossiped, the outcome depends on the schedule:
    the checker reports it (the cart converges, but not by t=0.3)."""
    with pytest.raises(ConfluenceViolation) as ei:
        check_confluence(
            crdt.crdt_nodes, crdt.crdt_inputs(), outputs=["cart"], runs=60, seed=3, until=0.3
        )
    assert ei.value.difference


def test_the_crdt_cart_example_main() -> None:
    out = crdt.main(runs=20)
    assert out["crdt"]["carts"]["r1"] == dict(cart.expected_cart(ACTIONS))
    assert out["destructive"] is not None
    assert out["destructive"]["failing"] != out["destructive"]["reference"]


def test_default_outputs_are_output_interfaces_else_tables_and_lattices() -> None:
    report = check_confluence(cart_nodes(cart.DisorderlyCart), cart_inputs(), runs=10)
    assert set(report.outcome["client"]) == {"response"}  # CartClient's only table
    assert set(report.outcome["server"]) == {"checkout_log", "action_log"}
    assert report.outcome["server"]["checkout_log"] == []  # answered, then deleted
    assert len(report.outcome["server"]["action_log"]) == len(ACTIONS)
