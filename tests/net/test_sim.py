"""blooml.net.Simulation: virtual clock, links (delay, loss, dup, fifo), partitions, codec,
determinism for a seed, and the same program classes as on sockets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, channel, durable, interface, lmap, lmax, lset, periodic, table
from blooml.errors import CodecError, SimulationError
from blooml.net import Simulation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_example

kvs = load_example("kvs")


class Pinger(Program):
    """Sends a numbered ping to every peer on each ``beat``; logs what it receives."""

    peer = table(["addr"])
    beat = periodic(1.0)
    ping = channel(["@to", "src", "n"])
    got = table(["src", "n"])
    send = interface(["to", "n"])

    # fmt: off
    @bloom
    def rules(self):
        self.ping <~ self.beat.join(self.peer).map(lambda b, p: (p.addr, self.addr, b.ident))
        self.ping <~ self.send.map(lambda s: (s.to, self.addr, s.n))
        self.got <= self.ping.map(lambda m: (m.src, m.n))
    # fmt: on


def _replicas(sim: Simulation, n: int = 3) -> list[Any]:
    ns = [kvs.ReplicatedKVS(addr=f"n{i}", network=sim) for i in range(n)]
    for i, p in enumerate(ns):
        p.peer.insert([(f"n{j}",) for j in range(n) if j != i])
        p.kvput.insert([(1, f"k{i}", i, f"v{i}"), (2, "shared", i, f"from n{i}")])
    return ns


def _converged(ns: list[Any]) -> bool:
    stores = [kvs.store_dict(p) for p in ns]
    return len(stores[0]) == 4 and all(s == stores[0] for s in stores)


def _kvs_run(seed: int) -> tuple[Any, ...]:
    sim = Simulation(seed=seed, delay=(0.01, 0.3), loss=0.2, dup=0.2)
    ns = _replicas(sim)
    sim.partition(["n0"], ["n1", "n2"], heal_after=5.0)
    ok = sim.run_until(lambda s: _converged(ns), limit=120)
    trace = [(m.src, m.dst, m.sent_at, m.delays, m.fate) for m in sim.messages]
    return ok, sim.now, [kvs.store_dict(p) for p in ns], sim.stats(), trace


def test_gossip_replicas_converge_after_a_partition_heals() -> None:
    ok, now, stores, stats, _ = _kvs_run(3)
    assert ok
    assert now >= 5.0  # n0 is cut off until the partition heals
    assert stores[0] == {"k0": "v0", "k1": "v1", "k2": "v2", "shared": "from n2"}
    assert stats["partitioned"] > 0
    assert stats["lost"] > 0


def test_a_run_is_a_function_of_the_seed() -> None:
    a, b = _kvs_run(11), _kvs_run(11)
    assert a == b
    c = _kvs_run(12)
    assert c[4] != a[4]  # another seed, another schedule (same converged stores)
    assert c[2] == a[2]


def test_periodic_fires_by_the_virtual_clock() -> None:
    sim = Simulation(seed=0, delay=0.05)
    a = Pinger(addr="a", network=sim)
    b = Pinger(addr="b", network=sim)
    a.peer.insert([("b",)])
    sim.run_until(10.0)  # ten virtual seconds, no wall-clock wait
    assert sim.now == 10.0
    # beats at t=1, 2, ..., 10 carry idents 0..9; each arrives 0.05 s later
    assert sorted(r.n for r in b.got) == list(range(9))
    sim.run_until(10.06)
    assert sorted(r.n for r in b.got) == list(range(10))
    assert a.tick_count >= 10


def test_loss_duplicates_and_fifo_links() -> None:
    sim = Simulation(seed=5, delay=(0.0, 0.5))
    a = Pinger(addr="a", network=sim)
    b = Pinger(addr="b", network=sim)
    sim.link("a", "b", fifo=True, both=False)
    for n in range(30):
        sim.at(n * 0.01, lambda s, n=n: a.send.insert([("b", n)]))
    sim.settle()
    arrivals = [m for m in sim.messages if m.src == "a"]
    assert len(arrivals) == 30
    times = [m.sent_at + m.delays[0] for m in arrivals]
    assert times == sorted(times)  # fifo: in sending order
    assert sorted(r.n for r in b.got) == list(range(30))

    sim2 = Simulation(seed=5, loss=0.5, dup=0.5)
    c = Pinger(addr="c", network=sim2)
    Pinger(addr="d", network=sim2)
    c.send.insert([("d", n) for n in range(40)])
    for n in range(40):
        sim2.at(n * 0.01, lambda s, n=n: c.send.insert([("d", n)]))
    sim2.settle()
    st = sim2.stats()
    assert st["lost"] > 5 and st["duplicated"] > 5
    assert st["delivered"] == st["messages"] - st["lost"] + st["duplicated"]


def test_unordered_links_reorder() -> None:
    sim = Simulation(seed=2, delay=(0.0, 0.5))
    a = Pinger(addr="a", network=sim)
    b = Pinger(addr="b", network=sim)
    order: list[int] = []
    for n in range(20):
        sim.at(n * 0.01, lambda s, n=n: a.send.insert([("b", n)]))
    while not sim.quiescent():
        sim.step()
        order.extend(r.n for r in b.got if r.n not in order)
    assert sorted(order) == list(range(20))
    assert order != list(range(20))


class Opaque:
    """A value the wire codec does not know."""


class SendsOpaque(Program):
    go = interface(["to"])
    out = channel(["@to"], ["v"])
    got = table(["to"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.out <~ self.go.map(lambda g: (g.to, Opaque()))
        self.got <= self.out
    # fmt: on


def test_a_value_the_codec_refuses_fails_the_sending_tick() -> None:
    sim = Simulation(seed=0)
    a = SendsOpaque(addr="a", network=sim)
    SendsOpaque(addr="b", network=sim)
    a.go.insert([("b",)])
    with pytest.raises(CodecError) as ei:
        sim.settle()
    assert ei.value.reason == "unknown_type"
    assert "channel 'out'" in str(ei.value)
    assert a.tick_count == 0  # rolled back

    # errors="log": as on a socket node, the tick is rolled back, counted, input set aside
    sim2 = Simulation(seed=0, errors="log")
    c = SendsOpaque(addr="c", network=sim2)
    SendsOpaque(addr="d", network=sim2)
    c.go.insert([("d",)])
    assert sim2.settle()
    assert sim2.stats()["errors"] == 1
    assert not c._rt.has_pending()

    # without the codec the object travels (as LocalNetwork would carry it)
    sim3 = Simulation(seed=0, codec=False)
    e = SendsOpaque(addr="e", network=sim3)
    f = SendsOpaque(addr="f", network=sim3)
    e.go.insert([("f",)])
    sim3.settle()
    assert len(f.got) == 1


class Voter(Program):
    vote = channel(["@to", "voter"])
    votes = lset()
    cnt = lmax()

    # fmt: off
    @bloom
    def rules(self):
        self.votes <= self.vote.map(lambda v: v.voter)
        self.cnt <= self.votes.size()
    # fmt: on


def test_unknown_channel_and_no_route_are_dropped_and_counted() -> None:
    sim = Simulation(seed=0)
    p = Pinger(addr="a", network=sim)
    Voter(addr="v", network=sim)
    p.send.insert([("v", 1), ("nowhere", 2)])
    assert sim.settle()
    assert sim.stats()["dropped"] == {"rejected": 1, "no_route": 1}


def test_run_until_a_time_a_predicate_and_its_limits() -> None:
    sim = Simulation(seed=0, delay=0.25)
    a = Pinger(addr="a", network=sim)
    b = Pinger(addr="b", network=sim)
    a.peer.insert([("b",)])
    assert sim.run_until(lambda s: len(b.got) >= 3, limit=100)
    assert 3.25 <= sim.now < 3.3
    assert not sim.run_until(lambda s: False, limit=5.0)
    assert sim.now == 5.0
    with pytest.raises(SimulationError, match="still busy after 10 events"):
        sim.run_until(1000.0, max_events=10)
    quiet = Simulation(seed=0)
    assert not quiet.run_until(lambda s: False)  # nothing can happen: stops at once


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delay": -1}, "finite number >= 0"),
        ({"delay": (2, 1)}, "low <= high"),
        ({"delay": "fast"}, "a delay is seconds"),
        ({"loss": 1.5}, "probability"),
        ({"dup": True}, "probability"),
        ({"errors": "ignore"}, "'raise' or 'log'"),
        ({"tick_interval": 0}, "positive"),
        ({"seed": 1.5}, "seed must be an int"),
    ],
)
def test_bad_settings_are_clear_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(SimulationError, match=match):
        Simulation(**kwargs)


def test_bad_partitions_and_addresses() -> None:
    sim = Simulation(seed=0)
    Pinger(addr="a", network=sim)
    Pinger(addr="b", network=sim)
    with pytest.raises(SimulationError, match="already taken"):
        Pinger(addr="a", network=sim)
    with pytest.raises(SimulationError, match="no node at"):
        sim.partition(["a"], ["zz"])
    with pytest.raises(SimulationError, match="two groups"):
        sim.partition(["a"], ["a", "b"])
    with pytest.raises(SimulationError, match="at least two"):
        sim.partition(["a", "b"])
    with pytest.raises(SimulationError, match="time >= now"):
        sim.at(-1, lambda s: None)


class FastPinger(Pinger):
    """``Pinger`` with a quick beat, for wall-clock runs."""

    beat = periodic(0.05)


def test_the_same_class_runs_on_sockets_by_the_wall_clock(nodes: list[Any]) -> None:
    """The class the simulation runs ticks on UDP by wall clock (``periodic`` timers)."""
    import time

    a = FastPinger(addr="127.0.0.1:0")
    b = FastPinger(addr="127.0.0.1:0")
    nodes += [a, b]
    a.peer.insert([(b.addr,)])
    a.start()
    b.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(b.sync_do(lambda p: list(p.got))) < 3:
        time.sleep(0.05)
    got = b.sync_do(lambda p: sorted(r.n for r in p.got))
    assert got[:3] == [0, 1, 2]

    sim = Simulation(seed=0, delay=0.001)
    c = FastPinger(addr="c", network=sim)
    d = FastPinger(addr="d", network=sim)
    c.peer.insert([("d",)])
    sim.run_until(0.16)
    assert sorted(r.n for r in d.got) == [0, 1, 2]


class SendsBig(Program):
    go = interface(["to", "n"])
    out = channel(["@to"], ["blob"])
    got = table(["to"], ["blob"])

    # fmt: off
    @bloom
    def rules(self):
        self.out <~ self.go.map(lambda g: (g.to, "x" * g.n))
        self.got <= self.out
    # fmt: on


def test_a_tuple_too_large_for_a_message_fails_as_on_sockets() -> None:
    sim = Simulation(seed=0)
    a = SendsBig(addr="a", network=sim)
    b = SendsBig(addr="b", network=sim)
    a.go.insert([("b", 100_000)])  # larger than a datagram: fragmented on sockets, fine here
    sim.settle()
    assert len(b.got) == 1
    a.go.insert([("b", 17 * 1024 * 1024)])  # larger than max_message
    with pytest.raises(CodecError) as ei:
        sim.settle()
    assert ei.value.reason == "too_large" and "max_message" in str(ei.value)
    sim_tcp = Simulation(seed=0, transport="tcp")
    c = SendsBig(addr="c", network=sim_tcp)
    d = SendsBig(addr="d", network=sim_tcp)
    c.go.insert([("d", 100_000)])
    sim_tcp.settle()
    assert len(d.got) == 1 and len(b.got) == 1
    with pytest.raises(SimulationError, match="'udp' or 'tcp'"):
        Simulation(transport="quic")


class DurableReplica(Program):
    """A replica whose store survives a crash (``durable``); gossips it to its peers."""

    peer = table(["addr"])
    put = interface(["key"], ["version", "value"])
    store = durable(lmap())
    sync = channel(["@addr"], ["kv"])
    gossip = periodic(0.5)

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.key, lmax((p.version, p.value))))
        self.sync <~ self.gossip.join(self.peer).map(lambda t, p: (p.addr, self.store))
        self.store <= self.sync.map(lambda s: s.kv)
    # fmt: on


def test_a_crashed_node_restarts_from_its_durable_state(tmp_path: Path) -> None:
    sim = Simulation(seed=4, delay=(0.01, 0.1))
    a = DurableReplica(addr="a", network=sim, data_dir=tmp_path / "a")
    b = DurableReplica(addr="b", network=sim, data_dir=tmp_path / "b")
    a.peer.insert([("b",)])
    b.peer.insert([("a",)])
    a.put.insert([("x", 1, "from a")])
    sim.run_until(2.0)
    assert b.store.value.reveal().keys() == {"x"}  # gossip reached b
    crashed = sim.crash("b")
    assert crashed is b and "b" in sim.down
    a.put.insert([("y", 1, "while b is down")])
    sim.run_until(3.0)
    assert sim.stats()["dropped"]["down"] > 0  # gossip to b was lost
    b2 = DurableReplica(addr="b", network=sim, data_dir=tmp_path / "b")
    assert b2.store.value.reveal().keys() == {"x"}  # what b had committed
    assert list(b2.peer) == []  # not durable: lost in the crash
    b2.peer.insert([("a",)])
    assert sim.run_until(lambda s: b2.store.value == a.store.value, limit=10)
    assert sorted(b2.store.value.reveal()) == ["x", "y"]
    with pytest.raises(SimulationError, match="no node there"):
        sim.crash("zz")


class Divides(Program):
    num = channel(["@addr", "src", "n"])
    out = table(["src", "q"])

    @bloom
    def rules(self):
        self.out <= self.num.map(lambda m: (m.src, 100 // m.n))


class Sends(Program):
    go = interface(["to", "n"])
    num = channel(["@addr", "src", "n"])

    # fmt: off
    @bloom
    def rules(self):
        self.num <~ self.go.map(lambda g: (g.to, self.addr, g.n))
    # fmt: on


def test_errors_log_sets_aside_only_the_blamed_input() -> None:
    """A poison message (a zero divisor) fails the receiver's tick; only it is set aside, and
    the innocent message that arrived for the same tick is applied."""
    sim = Simulation(seed=0, delay=0.01, errors="log")
    sink = Divides(addr="sink", network=sim)
    bad, good = Sends(addr="bad", network=sim), Sends(addr="good", network=sim)
    bad.go.insert([("sink", 0)])
    good.go.insert([("sink", 5)])
    assert sim.settle()
    assert sim.stats()["errors"] == 1
    assert sorted(map(tuple, sink.out)) == [("good", 20)]
