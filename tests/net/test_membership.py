"""blooml.net.membership: heartbeats, up/down events and the detection bound, in the simulator
(virtual time: the bounds are checked exactly, in milliseconds of wall time), and forged
heartbeats on loopback sockets."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from _net import wait_until

from blooml import Program, bloom, channel, table
from blooml.errors import ProgramError
from blooml.net import Simulation, encode_envelope, encode_row, node
from blooml.net.membership import Membership, detection_bound, membership

PERIOD, TIMEOUT, DELAY = 0.1, 0.5, 0.01


class Watcher(Membership, period=PERIOD, timeout=TIMEOUT):
    """Logs the up/down events it sees, with the virtual time."""

    events = table(["t", "addr", "event"])

    # fmt: off
    @bloom
    def log_events(self) -> None:
        self.events <= self.peer_up.map(lambda u: (self.now(), u.addr, "up"))
        self.events <= self.peer_down.map(lambda d: (self.now(), d.addr, "down"))
    # fmt: on

    def now(self) -> float:
        return round(self._rt.clock(), 6)


def cluster(names: str = "abc", **sim_args: Any) -> tuple[Simulation, dict[str, Any]]:
    sim = Simulation(seed=3, delay=(0.001, DELAY), **sim_args)
    nodes = {a: Watcher(addr=a, network=sim) for a in names}
    for a, p in nodes.items():
        p.member.insert([(o,) for o in names if o != a])
    return sim, nodes


def view(p: Any) -> set[str]:
    return {r.addr for r in p.up}


def events(p: Any, addr: str, kind: str) -> list[float]:
    return sorted(t for t, a, e in p.events if a == addr and e == kind)


def test_every_node_sees_every_other_up_within_one_period() -> None:
    sim, nodes = cluster()
    sim.run_until(PERIOD + DELAY + 0.01)
    assert {a: view(p) for a, p in nodes.items()} == {
        "a": {"b", "c"},
        "b": {"a", "c"},
        "c": {"a", "b"},
    }
    sim.run_until(3.0)  # steady heartbeats: no flapping
    assert all(len(events(p, o, "up")) == 1 for p in nodes.values() for o in view(p))
    assert not any(e == "down" for p in nodes.values() for _, _, e in p.events)


def test_a_crashed_peer_is_declared_down_within_the_bound() -> None:
    sim, nodes = cluster()
    sim.run_until(1.0)
    sim.crash("c")
    crashed = sim.now
    sim.run_until(crashed + 2.0)
    bound = detection_bound(PERIOD, TIMEOUT, DELAY) + sim.tick_interval
    for a in "ab":
        (down,) = events(nodes[a], "c", "down")
        assert crashed < down <= crashed + bound, (a, down - crashed, bound)
        assert view(nodes[a]) == {"a", "b"} - {a}
    # the restarted node is up again at its first heartbeat
    c = Watcher(addr="c", network=sim)
    c.member.insert([("a",), ("b",)])
    back = sim.now
    sim.run_until(back + PERIOD + DELAY + 0.01)
    assert all("c" in view(nodes[a]) for a in "ab") and view(c) == {"a", "b"}


def test_a_partition_splits_the_views_and_healing_joins_them() -> None:
    sim, nodes = cluster()
    sim.run_until(1.0)
    sim.partition(["a"], ["b", "c"])
    cut = sim.now
    sim.run_until(cut + detection_bound(PERIOD, TIMEOUT, DELAY) + 0.01)
    assert view(nodes["a"]) == set()
    assert view(nodes["b"]) == {"c"} and view(nodes["c"]) == {"b"}
    sim.heal()
    healed = sim.now
    sim.run_until(healed + PERIOD + DELAY + 0.01)
    assert view(nodes["a"]) == {"b", "c"} and "a" in view(nodes["b"])
    assert all(len(events(nodes[x], "a", "up")) == 2 for x in "bc")  # up, down, up again


def test_a_new_node_needs_one_address_to_join() -> None:
    sim, nodes = cluster("ab")
    d = Watcher(addr="d", network=sim)
    d.member.insert([("a",)])
    sim.run_until(1.0)
    assert "d" in view(nodes["a"]) and view(d) == {"a"}
    assert "d" not in view(nodes["b"])  # b hears of nobody it was not told of


def test_lost_heartbeats_within_the_timeout_cause_no_false_suspicion() -> None:
    sim, nodes = cluster("ab", loss=0.3)
    sim.run_until(10.0)
    # 100 heartbeats each way at 30% loss: 4 lost in a row (p = 0.8%) would flap a peer
    assert all(len(events(p, o, "up")) <= 2 for p in nodes.values() for o in "ab")
    assert view(nodes["a"]) == {"b"} and view(nodes["b"]) == {"a"}


def test_timings_and_their_errors() -> None:
    assert (Membership.period, Membership.timeout) == (0.5, 2.0)
    m = membership(0.2)
    assert (m.period, m.timeout) == (0.2, pytest.approx(0.8))
    assert m.ir().collections["alive"].ttl == pytest.approx(0.8)
    assert m.ir().collections["heartbeat_timer"].period == 0.2
    assert Watcher.ir().collections["alive"].ttl == TIMEOUT
    assert detection_bound(0.5, 2.0) == 3.0
    with pytest.raises(ProgramError, match="must be longer than the period"):
        membership(1.0, 0.5)
    with pytest.raises(ProgramError, match="period must be a number of seconds, got 'x'"):
        membership("x")  # type: ignore[arg-type]
    with pytest.raises(ProgramError, match="timeout must be > 0 seconds"):
        membership(0.1, -1)


def test_peer_down_is_a_point_of_order() -> None:
    """Failure detection is not monotone: the CALM analysis says so."""
    heads = {r.head for r, _ in Watcher.ir().nonmonotone_after_channels()}
    assert {"peer_down", "peer_up", "up"} <= heads


# -- membership that forged heartbeats cannot poison or amplify (issue 25, item 6) -----------


class Forger(Program):
    """Sends the heartbeats it is given, once (a forger needs no membership of its own)."""

    heartbeat = channel(["@to", "frm"])
    forge = table(["to", "frm"])

    # fmt: off
    @bloom
    def send(self) -> None:
        self.heartbeat <~ self.forge.map(lambda f: (f.to, f.frm))
        self.forge <- self.forge
    # fmt: on


def sent_by(sim: Simulation, src: str, since: float) -> int:
    return sum(1 for m in sim.messages if m.src == src and m.sent_at >= since)


def test_forged_heartbeats_make_a_node_send_no_more_than_it_receives() -> None:
    """1,000 heartbeats from 1,000 forged senders: before, every one became a member for
    ever and got a heartbeat every period (10,010 datagrams/s on sockets, for ever); now each
    gets at most one reply, and the forged members leave once they fall silent."""
    sim, nodes = cluster("ab")
    sim.run_until(1.0)
    forger = Forger(addr="f", network=sim)
    forger.forge.insert([("a", f"ghost{i}") for i in range(1000)])
    start = sim.now
    sim.run_until(start + 3.0)
    received = 1000  # the forged heartbeats (b's own are answered by the configured traffic)
    configured = int(3.0 / PERIOD) + 2  # a's heartbeats to b over the 3 s
    assert sent_by(sim, "a", start) <= received + configured
    a = nodes["a"]
    assert {r.addr for r in a.member} == {"b"}  # the ghosts left when they fell silent
    assert len(a.joined) == 0 and view(a) == {"b"}
    sim.run_until(sim.now + 2.0)  # and it stays quiet: b only
    quiet = sim.now - 1.0
    assert {m.dst for m in sim.messages if m.src == "a" and m.sent_at >= quiet} == {"b"}


def test_a_joined_peer_leaves_member_when_it_falls_silent() -> None:
    sim, nodes = cluster("ab")
    d = Watcher(addr="d", network=sim)
    d.member.insert([("a",)])
    sim.run_until(1.0)
    assert {r.addr for r in nodes["a"].member} == {"b", "d"}
    assert {r.addr for r in nodes["a"].joined} == {"d"}
    sim.crash("d")
    sim.run_until(sim.now + detection_bound(PERIOD, TIMEOUT, DELAY) + 0.01)
    assert {r.addr for r in nodes["a"].member} == {"b"} and view(nodes["a"]) == {"b"}
    assert events(nodes["a"], "d", "down")


def test_a_leave_message_removes_a_member_at_once_and_it_falls_silent() -> None:
    sim, nodes = cluster()
    sim.run_until(1.0)
    nodes["c"].leave_cluster()
    left_at = sim.now
    sim.run_until(left_at + 2 * PERIOD)  # well within the timeout: the leave, not silence
    for a in "ab":
        assert {r.addr for r in nodes[a].member} == set("ab") - {a}
        assert "c" not in view(nodes[a])
        (down,) = events(nodes[a], "c", "down")
        assert down < left_at + TIMEOUT
    quiet = sim.now
    sim.run_until(quiet + 1.0)
    assert sent_by(sim, "c", quiet) == 0
    assert all("c" not in view(nodes[a]) for a in "ab")


def test_a_heartbeat_from_no_address_is_ignored() -> None:
    """A heartbeat whose sender is not an address (an int, the node itself) joins nobody."""
    sim, nodes = cluster("ab")
    forger = Forger(addr="f", network=sim)
    forger.forge.insert([("a", "a"), ("a", "")])
    sim.run_until(1.0)
    assert {r.addr for r in nodes["a"].member} == {"b"} and len(nodes["a"].joined) == 0


# -- on sockets -------------------------------------------------------------------------------


def _forge_heartbeat(to: str, frm: str, key: bytes | None = None) -> None:
    data = encode_envelope("x:1", [("heartbeat", [encode_row((to, frm))])], key=key, dest=to)
    host, port = to.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(data, (host, int(port)))


def _members(p: Any) -> set[str]:
    return p.sync_do(lambda q: {r.addr for r in q.member})


class Patient(Watcher, period=PERIOD, timeout=3.0):
    """A watcher slow to suspect: a loaded test machine must not cause a false suspicion."""


@pytest.mark.parametrize("key", [None, b"k"])
def test_one_forged_heartbeat_from_no_address_poisons_nothing(
    key: bytes | None, nodes: list[Any]
) -> None:
    """Issue 25: one unsigned heartbeat with ``frm="x"`` made "x" a member; sending to it
    failed the heartbeat rule on every tick, the rule was quarantined, and the other nodes
    declared this live node down. With a key the unsigned heartbeat never reaches a rule."""
    a = Patient(addr="127.0.0.1:0", cluster_key=key)
    b = Patient(addr="127.0.0.1:0", cluster_key=key)
    nodes += [a, b]
    a.member.insert([(b.addr,)])
    b.member.insert([(a.addr,)])
    a.start()
    b.start()
    wait_until(lambda: b.sync_do(view) == {a.addr}, timeout=20.0)
    _forge_heartbeat(a.addr, "x")
    if key:
        wait_until(lambda: a.stats()["dropped"].get("unsigned") == 1, timeout=20.0)
    time.sleep(10 * PERIOD)  # more than quarantine_after (5) heartbeat ticks
    assert node(a).quarantined == {}
    assert _members(a) == {b.addr}
    assert b.sync_do(view) == {a.addr}
    assert not b.sync_do(lambda q: [e for e in q.events if e.event == "down"])
