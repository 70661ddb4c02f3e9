"""examples/reliable_delivery.py: at-least-once delivery with retries, over a lossy link."""

from __future__ import annotations

import pytest
from _examples import FakeClock, load_example
from hypothesis import given
from hypothesis import strategies as st

from blooml import LocalNetwork, ProgramError

rd = load_example("reliable_delivery")


def run_pair(n: int, lose: set[int], ticks: int = 15) -> tuple[object, object, list[int]]:
    """alice (flaky) sends ``n`` messages to bob; returns both nodes and alice's buffer sizes."""
    clock = FakeClock()
    net = LocalNetwork()
    alice = rd.FlakyNode(addr="alice", clock=clock, network=net)
    bob = rd.Node(addr="bob", clock=clock, network=net)
    alice.lose.insert([(i,) for i in lose])
    alice.pipe_in.insert([("bob", "alice", i, f"m{i}") for i in range(n)])
    sizes = []
    for _ in range(ticks):
        clock.now += 1.0
        net.tick()
        sizes.append(len(alice.send_buf))
    return alice, bob, sizes


def test_main_delivers_and_confirms_everything() -> None:
    out = rd.main()
    assert out["inbox"] == {1: "hello", 2: "are you there?"}
    assert out["confirmed"] == {1, 2}
    assert out["send_buf"] == []
    last = out["trace"][-1]
    first_arrival = dict(last["inbox"])
    # #1 arrives at once (bob's next tick); #2 only after a retransmission
    assert first_arrival[1] in (0, 1)
    assert first_arrival[2] > first_arrival[1] + 1


@given(st.integers(1, 5), st.data())
def test_every_message_is_delivered_once_and_confirmed(n: int, data: st.DataObject) -> None:
    lose = data.draw(st.sets(st.integers(0, n - 1)))
    alice, bob, sizes = run_pair(n, lose)
    assert {(r.src, r.ident, r.payload) for r in bob.inbox} == {
        ("alice", i, f"m{i}") for i in range(n)
    }
    assert {(r.dst, r.ident) for r in alice.confirmed} == {("bob", i) for i in range(n)}
    assert list(alice.send_buf) == []
    assert sizes[0] == n  # everything is buffered until acknowledged
    arrival = {r.ident: r.first.reveal() for r in bob.inbox}
    for i in range(n):
        # ticks are numbered from 0 and the clock reads tick + 1 seconds during a tick
        if i in lose:
            # only the timer can deliver a lost message: not before the first retry period
            assert arrival[i] + 1.0 >= rd.RETRY_SECONDS
        else:
            assert arrival[i] in (0, 1)  # sent in tick 0, delivered at bob's next tick


def test_loopback_single_program() -> None:
    """One node sending to its own address: data, ack and confirmation all loop back."""
    clock = FakeClock()
    p = rd.Node(addr="localhost", clock=clock)
    p.pipe_in.insert([("localhost", "localhost", 7, "to myself")])
    for _ in range(6):
        clock.now += 1.0
        p.tick()
    assert {(r.ident, r.payload) for r in p.inbox} == {(7, "to myself")}
    assert {(r.ident, r.payload) for r in p.confirmed} == {(7, "to myself")}
    assert list(p.send_buf) == []


def test_flaky_override_replaces_send_packet_block() -> None:
    """FlakyNode's send_packet replaces the inherited one (no rule from it survives)."""
    clock = FakeClock()
    p = rd.FlakyNode(addr="localhost", clock=clock)
    p.lose.insert([(1,)])
    p.pipe_in.insert([("localhost", "localhost", 1, "x")])
    clock.now += 0.5
    p.tick()
    clock.now += 0.5
    p.tick()
    # the first transmission was dropped; no timer yet (period 3 s): nothing arrived
    assert list(p.inbox) == []
    assert len(p.send_buf) == 1


def test_sending_elsewhere_without_a_network_is_an_error() -> None:
    p = rd.Node(addr="alice", clock=FakeClock())
    p.pipe_in.insert([("bob", "alice", 1, "x")])
    with pytest.raises(ProgramError) as err:
        p.tick()
    msg = str(err.value)
    assert "data_chan" in msg and "bob" in msg


@given(st.integers(1, 4), st.integers(0, 2**16), st.data())
def test_delivery_survives_delay_reordering_and_duplication(
    n: int, seed: int, data: st.DataObject
) -> None:
    lose = data.draw(st.sets(st.integers(0, n - 1)))
    clock = FakeClock()
    net = LocalNetwork(seed, max_delay=2, dup_prob=0.3)
    alice = rd.FlakyNode(addr="alice", clock=clock, network=net)
    bob = rd.Node(addr="bob", clock=clock, network=net)
    alice.lose.insert([(i,) for i in lose])
    alice.pipe_in.insert([("bob", "alice", i, f"m{i}") for i in range(n)])
    for _ in range(25):
        clock.now += 1.0
        net.tick()
    assert {(r.ident, r.payload) for r in bob.inbox} == {(i, f"m{i}") for i in range(n)}
    assert {r.ident for r in alice.confirmed} == set(range(n))
    assert list(alice.send_buf) == []
