"""Channels (loopback and LocalNetwork), periodics on an injected clock, soft state."""

from __future__ import annotations

import pytest

from blooml import (
    LocalNetwork,
    Program,
    ProgramError,
    bloom,
    channel,
    interface,
    periodic,
    rows,
    scratch,
    table,
)


def tuples(coll):
    return {tuple(r) for r in coll}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Echo(Program):
    send = scratch(["to", "msg"])
    chan = channel(["@addr", "msg"])
    got = table(["msg"], ["tick"])

    @bloom
    def rules(self):
        self.chan < ~self.send.map(lambda s: (s.to, s.msg))
        self.got <= self.chan.map(lambda m: (m.msg, self.tick_count))


def test_loopback_delivers_at_the_next_tick_with_named_field():
    p = Echo(addr="me")
    p.send.insert([("me", "hi")])
    p.tick()
    assert tuples(p.got) == set()
    p.tick()
    assert tuples(p.got) == {("hi", 1)}


def test_loopback_to_another_address_without_network_is_an_error():
    p = Echo(addr="me")
    p.send.insert([("you", "hi")])
    with pytest.raises(ProgramError, match=r"channel 'chan'.*addressed to 'you'"):
        p.tick()
    assert p.tick_count == 0


def test_local_network_delivers_between_programs():
    net = LocalNetwork()
    a = Echo(addr="a", network=net)
    b = Echo(addr="b", network=net)
    a.send.insert([("b", "ping")])
    net.tick()  # a sends; b ticks after a in the same round and sees it
    assert tuples(b.got) == {("ping", 0)}
    b.send.insert([("a", "pong")])
    net.tick()
    net.tick()
    assert tuples(a.got) == {("pong", 2)}
    with pytest.raises(ProgramError, match="already taken"):
        Echo(addr="a", network=net)


def test_network_rejects_unknown_addresses_atomically():
    net = LocalNetwork()
    a = Echo(addr="a", network=net)
    a.send.insert([("nowhere", "x")])
    with pytest.raises(ProgramError, match="not on this network"):
        a.tick()
    assert a.tick_count == 0


def test_seeded_network_delay_and_duplication_keep_monotone_results():
    class Gossip(Program):
        seed_ = scratch(["v"])
        chan = channel(["@to", "v"])
        known = table(["v"])
        peer = table(["addr"])

        @bloom
        def rules(self):
            self.known <= self.seed_
            self.known <= self.chan.map(lambda m: (m.v,))
            self.chan < ~self.known.join(self.peer).map(lambda k, p: (p.addr, k.v))

    results = []
    for seed in range(3):
        net = LocalNetwork(seed=seed, max_delay=2, dup_prob=0.3)
        ps = [Gossip(addr=n, network=net) for n in "xyz"]
        for p in ps:
            p.peer.insert([(q.addr,) for q in ps if q is not p])
        ps[0].seed_.insert([(1,)])
        ps[2].seed_.insert([(2,)])
        net.tick(8)
        results.append([tuples(p.known) for p in ps])
    assert all(r == [{(1,), (2,)}] * 3 for r in results)


def test_periodic_fires_by_the_injected_clock():
    class Timer(Program):
        tock = periodic(10)
        log = table(["ident"], ["time"])

        @bloom
        def rules(self):
            self.log <= self.tock

    clock = Clock()
    p = Timer(clock=clock)
    p.tick()
    assert tuples(p.tock) == set()
    clock.t = 10
    p.tick()
    assert tuples(p.tock) == {(0, 10)}
    p.tick()
    assert tuples(p.tock) == set()  # a periodic is a scratch
    clock.t = 35  # several periods elapsed: one firing, next deadline re-based
    p.tick()
    assert tuples(p.log) == {(0, 10), (1, 35)}


def test_soft_state_refresh_replace_expire():
    class Neighbours(Program):
        hello = scratch(["node"], ["port"])
        nbr = table(["node"], ["port"], ttl=5)

        @bloom
        def rules(self):
            self.nbr <= self.hello

    clock = Clock()
    p = Neighbours(clock=clock)
    p.hello.insert([("a", 1), ("b", 1)])
    p.tick()
    clock.t = 3
    p.hello.insert([("a", 1)])  # refresh a
    p.tick()
    clock.t = 6  # b expired (derived at 0), a lives until 8
    p.hello.insert([("b", 2)])  # re-derived under its key: a new tuple
    p.tick()
    assert tuples(p.nbr) == {("a", 1), ("b", 2)}
    clock.t = 7
    p.hello.insert([("b", 3)])  # a different tuple under b's key replaces it
    p.tick()
    assert tuples(p.nbr) == {("a", 1), ("b", 3)}
    clock.t = 8.5
    p.tick()
    assert tuples(p.nbr) == {("b", 3)}
    clock.t = 12
    p.tick()
    assert tuples(p.nbr) == set()


def test_reliable_delivery_from_the_seed_runs_over_loopback():
    class DeliveryProtocol(Program, abstract=True):
        pipe_in = interface(["dst", "src", "ident"], ["payload"])
        pipe_out = interface(["dst", "src", "ident"], ["payload"], input=False)

    class ReliableDelivery(DeliveryProtocol):
        data_chan = channel(["@dst", "src", "ident"], ["payload"])
        ack_chan = channel(["@src", "dst", "ident"])
        send_buf = table(["dst", "src", "ident"], ["payload"])
        timer = periodic(10)
        delivered = table(["dst", "src", "ident"], ["payload"])

        @bloom
        def send_packet(self):
            self.send_buf <= self.pipe_in
            self.data_chan < ~self.pipe_in

        @bloom
        def timer_retry(self):
            self.data_chan < ~self.send_buf.join(self.timer).map(lambda p, t: p)

        @bloom
        def send_ack(self):
            self.ack_chan < ~self.data_chan.map(lambda p: (p.src, p.dst, p.ident))
            self.delivered <= self.data_chan

        @bloom
        def recv_ack(self):
            got_ack = self.ack_chan.join(self.send_buf, self.ack_chan.ident == self.send_buf.ident)
            self.pipe_out <= got_ack.map(lambda a, sb: sb)
            self.send_buf < -got_ack.map(lambda a, sb: sb)

    clock = Clock()
    p = ReliableDelivery(addr="me", clock=clock)
    p.pipe_in.insert([("me", "me", 1, "hello")])
    p.tick()
    assert len(p.send_buf) == 1
    p.tick()  # data arrives, ack sent
    assert tuples(p.delivered) == {("me", "me", 1, "hello")}
    p.tick()  # ack arrives: pipe_out, and send_buf <- (effective next tick)
    assert tuples(p.pipe_out) == {("me", "me", 1, "hello")}
    p.tick()
    assert len(p.send_buf) == 0


def test_rows_with_async_operator():
    class P(Program):
        chan = channel(["@a", "v"])
        got = table(["v"])

        @bloom
        def rules(self):
            self.chan < ~rows([("localhost", 1)])
            self.got <= self.chan.map(lambda m: (m.v,))

    p = P()
    p.tick(2)
    assert tuples(p.got) == {(1,)}


def test_async_sends_what_is_derived_anew_and_periodic_joins_resend():
    class P(Program):
        t = table(["v"])
        tock = periodic(5)
        chan = channel(["@a", "v"])
        retry = channel(["@a", "v"])
        got = table(["v", "tick"])
        again = table(["v", "tick"])

        @bloom
        def rules(self):
            self.chan < ~self.t.map(lambda r: ("localhost", r.v))
            self.retry < ~self.t.join(self.tock).map(lambda r, k: ("localhost", r.v))
            self.got <= self.chan.map(lambda m: (m.v, self.tick_count))
            self.again <= self.retry.map(lambda m: (m.v, self.tick_count))

    clock = Clock()
    p = P(clock=clock)
    p.t.insert([(1,)])
    p.tick(3)
    assert tuples(p.got) == {(1, 1)}  # sent once, when derived
    clock.t = 5
    p.tick(2)
    clock.t = 10
    p.tick(2)
    assert tuples(p.again) == {(1, 4), (1, 6)}  # re-sent at every firing


def test_columns_named_like_internal_attributes():
    class P(Program):
        a = table(["node", "name", "info", "cls"])
        b = table(["node"], ["name"])

        @bloom
        def rules(self):
            self.b <= self.a.join(self.b, self.a.node == self.b.node).map(
                lambda x, y: (x.name, y.name)
            )

    p = P()
    p.a.insert([("n", "x", 1, 2), ("x", "q", 1, 2)])
    p.b.insert([("n", "x")])
    p.tick()
    assert tuples(p.b) == {("n", "x"), ("x", "x"), ("q", "x")}


def test_network_delay_holds_messages_and_reprs():
    net = LocalNetwork(seed=3, max_delay=3)
    a = Echo(addr="a", network=net)
    b = Echo(addr="b", network=net)
    a.send.insert([("b", f"m{i}") for i in range(6)])
    net.tick()
    assert not net.quiescent() or len(b.got) == 6
    net.tick(5)
    assert net.quiescent() and {r.msg for r in b.got} == {f"m{i}" for i in range(6)}
    assert "round 6" in repr(net) and repr(a) == "<Echo at 'a', tick 6>"
    assert repr(a.got) == "<table got: 0 rows>"
    with pytest.raises(ProgramError):
        LocalNetwork(max_delay=-1)


def test_lattice_view_has_no_truth_value_and_program_needs_init():
    from blooml import lmax

    class P(Program):
        m = lmax()

        def __init__(self):  # forgets super().__init__()
            pass

    class Q(Program):
        m = lmax()

    with pytest.raises(ProgramError, match=r"Program\.__init__ was not called"):
        P().m
    with pytest.raises(TypeError, match="test its value"):
        bool(Q().m)
