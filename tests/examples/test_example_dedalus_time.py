"""examples/dedalus_time.py: the sequence, the counter and the Lamport-clock rewriting."""

from __future__ import annotations

from _examples import load_example

from blooml import LocalNetwork

dt = load_example("dedalus_time")


def test_sequence_and_counter_trace() -> None:
    trace = dt.run_sequence()
    seqs = {tick: seq for tick, seq, _ in trace}
    counters = {tick: c for tick, _, c in trace}
    # ticks count from 0 (the value of self.tick_count); seq/counter as after each tick
    assert seqs[0] == {}
    assert seqs[1] == {"x": 0}
    assert seqs[2] == {"x": 0}
    assert seqs[3] == {"x": 2, "y": 2}
    assert seqs[5] == {"x": 2, "y": 2}
    assert seqs[6] == {"x": 2, "y": 5}
    assert [counters[t] for t in range(7)] == [0, 1, 1, 2, 2, 2, 3]


def test_sequence_never_decreases() -> None:
    s = dt.Sequence()
    last: dict[str, int] = {}
    for tick in range(1, 30):
        s.event.insert([(n,) for n in "ab" if (tick * (ord(n) - 95)) % 3 == 0])
        s.tick()
        now = {r.ident: r.n for r in s.seq}
        for k, v in last.items():
            assert now[k] >= v
        last = now


def test_message_from_the_future_waits_for_the_receiver_clock() -> None:
    out = dt.run_lamport(head_start=8)
    assert out["sent_at"] == 8
    assert out["arrived"] is not None and out["arrived"] <= 1
    # released in the receiver tick that exceeds 8, visible in p one tick later
    assert out["released"] == out["sent_at"] + 2
    waits = [w for _, w, _ in out["log"] if w]
    assert all(w == [("greeting", "hello", 8)] for w in waits)


def test_message_from_the_past_is_delivered_at_once() -> None:
    net = LocalNetwork()
    receiver = dt.LamportReceiver(addr="receiver", network=net)
    receiver.tick(10)  # the receiver is ahead this time
    sender = dt.LamportSender(addr="sender", network=net)
    sender.q.insert([("receiver", "k", "v")])
    for _ in range(4):
        net.tick()
    (row,) = list(receiver.p)
    # arrives in the receiver's next tick (10 or 11), is released in that same tick
    assert (row.a, row.b) == ("k", "v")
    assert row.at_tick in (11, 12)
    assert list(receiver.p_wait) == []
