"""Programs as network nodes on real loopback sockets (127.0.0.1 only, bounded in time)."""

from __future__ import annotations

import logging
import socket
import struct
import time
from typing import Any

import msgpack
import pytest
from _net import wait_until

from blooml import Program, ProgramError, bloom, channel, lmax, lset, periodic, table
from blooml.errors import CodecError
from blooml.net import encode_envelope, encode_row, node


class Echo(Program):
    """Sends each row of ``out`` to its address; stores what arrives in ``got``."""

    msg = channel(["@dst", "src", "k"], ["v"])
    out = table(["dst", "k"], ["v"])
    got = table(["src", "k"], ["v"])

    @bloom
    def rules(self):
        self.got <= self.msg.map(lambda m: (m.src, m.k, m.v))
        self.msg < ~self.out.map(lambda o: (o.dst, self.addr, o.k, o.v))


def got(p: Program) -> set[tuple[Any, ...]]:
    return p.sync_do(lambda q: {tuple(r) for r in q.got})


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_two_nodes_exchange_tuples(transport: str, nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0", transport=transport)
    b = Echo(addr="127.0.0.1:0", transport=transport)
    nodes += [a, b]
    assert a.addr.startswith("127.0.0.1:") and not a.addr.endswith(":0")
    a.start()
    b.start()
    a.sync_do(lambda p: p.out.insert([(b.addr, i, lmax(i)) for i in range(50)]))
    wait_until(lambda: len(got(b)) == 50)
    assert got(b) == {(a.addr, i, lmax(i)) for i in range(50)}
    # all 50 tuples of that tick travelled together
    assert a.stats()["sent"] == 1
    assert b.stats()["received"] == 1
    assert b.stats()["received_tuples"] == 50


def test_a_tuple_too_large_for_a_message_fails_its_rule() -> None:
    a = Echo(addr="127.0.0.1:0")
    b = Echo(addr="127.0.0.1:0")
    try:
        node(a).max_message = 50_000
        a.out.insert([(b.addr, 1, "x" * 70_000)])
        with pytest.raises(CodecError, match="max_message") as ei:
            a.tick()
        assert ei.value.reason == "too_large"
        assert "msg" in str(ei.value)
        assert list(a.out) == []  # rolled back
        assert a.stats()["sent"] == 0
    finally:
        node(a).stop()
        node(b).stop()


@pytest.mark.parametrize("key", [None, b"k"])
def test_a_tuple_larger_than_a_datagram_travels_in_fragments(
    key: bytes | None, nodes: list[Any]
) -> None:
    a = Echo(addr="127.0.0.1:0", cluster_key=key).start()
    b = Echo(addr="127.0.0.1:0", cluster_key=key).start()
    nodes += [a, b]
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, "x" * 200_000), (b.addr, 2, "y")]))
    wait_until(lambda: len(got(b)) == 2)
    assert got(b) == {(a.addr, 1, "x" * 200_000), (a.addr, 2, "y")}
    assert a.stats()["fragments_sent"] >= 4
    assert b.stats()["fragments_received"] == a.stats()["fragments_sent"]
    assert b.stats()["dropped"] == {}


def test_big_tuples_travel_over_tcp(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0", transport="tcp").start()
    b = Echo(addr="127.0.0.1:0", transport="tcp").start()
    nodes += [a, b]
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, "x" * 200_000)]))
    wait_until(lambda: got(b))


def test_unknown_type_fails_the_sending_rule_naming_the_column() -> None:
    a = Echo(addr="127.0.0.1:0")
    b = Echo(addr="127.0.0.1:0")
    try:
        a.out.insert([(b.addr, 1, object())])
        with pytest.raises(CodecError, match="column 'v'"):
            a.tick()
    finally:
        node(a).stop()
        node(b).stop()


def test_a_bad_address_is_a_bad_row_not_a_failed_rule() -> None:
    # (issue 25: it used to fail the sending rule, so one bad row silenced the others)
    a = Echo(addr="127.0.0.1:0")
    try:
        a.out.insert([("nowhere", 1, 1)])
        a.tick()
        assert node(a).stats()["send_failures"] == {"nowhere": 1}
    finally:
        node(a).stop()


def _udp_send(addr: str, datagrams: list[bytes]) -> None:
    host, port = addr.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in datagrams:
            s.sendto(d, (host, int(port)))


def _body(sender: str, batches: list[Any], ts_ms: int | None = None) -> bytes:
    return msgpack.packb([sender, ts_ms if ts_ms is not None else int(time.time() * 1000), batches])


def test_bad_datagrams_are_dropped_counted_and_change_nothing(
    nodes: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    b = Echo(addr="127.0.0.1:0").start()
    nodes.append(b)
    deep = msgpack.packb([1, b"\x91" * 3000 + b"\xc0", None])
    bad = [
        b"",  # malformed
        b"\xc1garbage",
        msgpack.packb([7, _body("x:1", []), None]),  # unknown version
        msgpack.packb([1, _body("x:1", [["nope", [[1]]]]), None]),  # unknown channel
        msgpack.packb([1, _body("x:1", [["msg", [[b.addr, "s", 1]]]]), None]),  # arity
        msgpack.packb(  # a value lpset rejects
            [1, _body("x:1", [["msg", [[b.addr, "s", 1, msgpack.ExtType(20, b"\x91\xff")]]]]), None]
        ),
        deep,  # too deep
        msgpack.packb([1, "not bytes", None]),
    ]
    with caplog.at_level(logging.WARNING, logger="blooml.net"):
        _udp_send(b.addr, bad * 3)
        wait_until(lambda: b.stats()["dropped_total"] == len(bad) * 3)
    s = b.stats()
    assert s["received"] == 0 and s["ticks"] == 0 and s["errors"] == 0
    assert set(s["dropped"]) >= {
        "malformed",
        "version",
        "unknown_channel",
        "arity",
        "lattice_rejected",
        "too_deep",
    }
    assert got(b) == set()
    # logged once per reason, not once per datagram
    reasons = [r.getMessage() for r in caplog.records if "dropped a datagram" in r.getMessage()]
    assert len(reasons) == len(s["dropped"])
    # and the node still serves
    good = encode_envelope("127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 1, 2))])])
    _udp_send(b.addr, [good])
    wait_until(lambda: got(b) == {("s", 1, 2)})


def test_cluster_key(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0", cluster_key="k1").start()
    b = Echo(addr="127.0.0.1:0", cluster_key=b"k1").start()
    nodes += [a, b]
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, 1)]))
    wait_until(lambda: got(b) == {(a.addr, 1, 1)})
    unsigned = encode_envelope("127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 2, 2))])])
    wrong = encode_envelope("127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 3, 3))])], key=b"k2")
    _udp_send(b.addr, [unsigned, wrong])
    wait_until(lambda: b.stats()["dropped_total"] == 2)
    assert b.stats()["dropped"] == {"unsigned": 1, "bad_signature": 1}
    # a replayed datagram (captured off the wire) is dropped too
    signed = encode_envelope(
        "127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 4, 4))])], key=b"k1", dest=b.addr
    )
    _udp_send(b.addr, [signed, signed])
    wait_until(lambda: b.stats()["dropped"].get("replay") == 1)
    # the replay is refused on arrival, the first copy applied by the next tick: wait for it
    wait_until(lambda: got(b) == {(a.addr, 1, 1), ("s", 4, 4)})
    assert b.stats()["dropped"]["replay"] == 1


def _capture(transport: str) -> tuple[str, Any]:
    """A fake node B: its address, and a function returning the next datagram (or TCP frame)
    sent to it, as it travelled."""
    kind = socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM
    sock = socket.socket(socket.AF_INET, kind)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5.0)
    if transport == "tcp":
        sock.listen(1)

    def take() -> bytes:
        try:
            if transport == "udp":
                return sock.recvfrom(70_000)[0]
            conn, _ = sock.accept()
            with conn:
                conn.settimeout(5.0)
                head = conn.recv(4, socket.MSG_WAITALL)
                return conn.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL)
        finally:
            sock.close()

    return f"127.0.0.1:{sock.getsockname()[1]}", take


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_a_datagram_captured_on_its_way_to_b_is_refused_at_c(
    transport: str, nodes: list[Any]
) -> None:
    """Issue 25: the signature did not bind the destination and replay guards are per node,
    so a datagram signed for B was accepted by C."""
    a = Echo(addr="127.0.0.1:0", transport=transport, cluster_key=b"k").start()
    c = Echo(addr="127.0.0.1:0", transport=transport, cluster_key=b"k").start()
    nodes += [a, c]
    b_addr, take = _capture(transport)
    a.sync_do(lambda p: p.out.insert([(b_addr, 1, "for b only")]))
    captured = take()
    if transport == "udp":
        _udp_send(c.addr, [captured])
    else:
        host, port = c.addr.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5.0) as s:
            s.sendall(struct.pack(">I", len(captured)) + captured)
    wait_until(lambda: c.stats()["dropped"].get("misdirected") == 1)
    assert got(c) == set() and c.stats()["received"] == 0
    # a datagram addressed to C by name (an alias) passes
    node(c).aliases.add("c.example:1")
    ok = encode_envelope(
        "x:1", [("msg", [encode_row((c.addr, "s", 2, 2))])], key=b"k", dest="c.example:1"
    )
    if transport == "udp":
        _udp_send(c.addr, [ok])
        wait_until(lambda: got(c) == {("s", 2, 2)})


def test_the_inbox_is_bounded() -> None:
    b = Echo(addr="127.0.0.1:0")
    n = node(b)
    n.inbox_limit = 10
    try:
        for _ in range(25):
            n._inbox_put(b"x")
        assert len(n._inbox) == 10
        assert b.stats()["dropped"] == {"inbox_full": 15}
    finally:
        n.stop()


def test_a_flood_keeps_the_inbox_bounded_and_the_node_alive(nodes: list[Any]) -> None:
    b = Echo(addr="127.0.0.1:0")
    node(b).inbox_limit = 50
    b.start()
    nodes.append(b)
    good = encode_envelope("127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 1, 1))])])
    _udp_send(b.addr, [good] * 3000)
    wait_until(lambda: b.stats()["received"] + b.stats()["dropped_total"] > 0)
    time.sleep(0.2)
    s = b.stats()
    assert s["inbox"] <= 50
    assert s["received"] + s["dropped_total"] <= 3000
    assert got(b) == {("s", 1, 1)}


class Fragile(Program):
    """A rule that raises on the value "boom"."""

    msg = channel(["@dst", "v"])
    seen = table(["v"])

    @bloom
    def rules(self):
        self.seen <= self.msg.map(lambda m: (_check(m.v),))


def _check(v: str) -> str:
    if v == "boom":
        raise ValueError("boom arrived")
    return v


def test_a_failing_tick_is_rolled_back_reported_and_set_aside(nodes: list[Any]) -> None:
    a = Fragile(addr="127.0.0.1:0").start()
    b = Fragile(addr="127.0.0.1:0").start()
    nodes += [a, b]
    errors: list[BaseException] = []
    a.on_error(errors.append)

    def send(v: str) -> None:
        _udp_send(a.addr, [encode_envelope("127.0.0.1:9", [("msg", [encode_row((a.addr, v))])])])

    send("ok1")
    wait_until(lambda: a.sync_do(lambda p: len(list(p.seen))) == 1)
    send("boom")
    wait_until(lambda: errors)
    assert isinstance(errors[0], ValueError)
    s = a.stats()
    assert s["errors"] == 1 and s["discarded_batches"] == 1 and s["discarded_tuples"] == 1
    send("ok2")
    wait_until(lambda: a.sync_do(lambda p: {r.v for r in p.seen}) == {"ok1", "ok2"})
    assert b.stats()["errors"] == 0


def test_sync_do_async_do_on_tick_watch(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0").start()
    nodes.append(a)
    ticks: list[int] = []
    seen: list[Any] = []
    a.on_tick(lambda p: ticks.append(p.tick_count))
    a.watch("got", seen.extend)
    assert a.sync_do(lambda p: p.addr) == a.addr
    with pytest.raises(ZeroDivisionError):
        a.sync_do(lambda p: 1 / 0)
    a.async_do(lambda p: p.out.insert([(a.addr, 1, 5)]))  # loopback
    wait_until(lambda: seen)
    assert [tuple(r) for r in seen] == [(a.addr, 1, 5)]
    assert seen[0].k == 1
    assert ticks and ticks == sorted(ticks)
    with pytest.raises(ProgramError, match="no collection"):
        a.watch("nope", print)


class Gossip(Program):
    """Every node sends its own address to every peer; rule functions read ``self``."""

    peer = table(["addr"])
    hello = channel(["@dst", "src"])
    heard = table(["src"])
    tagged = table(["src", "me"])

    @bloom
    def rules(self):
        self.hello < ~self.peer.map(lambda p: (p.addr, self.addr))
        self.heard <= self.hello.map(lambda h: (h.src,))
        self.tagged <= self.hello.map(lambda h: (h.src, self.addr))


def test_many_nodes_of_one_class_tick_concurrently(nodes: list[Any]) -> None:
    ps = [Gossip(addr="127.0.0.1:0") for _ in range(5)]
    nodes += ps
    addrs = [p.addr for p in ps]
    for p in ps:
        p.start()
    for p in ps:
        p.async_do(lambda q: q.peer.insert([(x,) for x in addrs if x != q.addr]))
    for p in ps:
        wait_until(lambda p=p: p.sync_do(lambda q: len(list(q.heard))) == 4)
        tagged = p.sync_do(lambda q: {tuple(r) for r in q.tagged})
        assert tagged == {(x, p.addr) for x in addrs if x != p.addr}


class Ticker(Program):
    beat = periodic(0.02)
    fired = table(["n"])

    @bloom
    def rules(self):
        self.fired <= self.beat.map(lambda t: (t.ident,))


def test_periodic_fires_by_wall_clock_on_a_started_node(nodes: list[Any]) -> None:
    p = Ticker(addr="127.0.0.1:0").start()
    nodes.append(p)
    wait_until(lambda: p.sync_do(lambda q: len(list(q.fired))) >= 5, timeout=5)


def test_a_program_without_a_socket_can_run(nodes: list[Any]) -> None:
    p = Ticker().start()
    nodes.append(p)
    wait_until(lambda: p.sync_do(lambda q: len(list(q.fired))) >= 2, timeout=5)
    assert p.stats()["transport"] is None


def test_tcp_reconnects_after_the_peer_restarts(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0", transport="tcp").start()
    b = Echo(addr="127.0.0.1:0", transport="tcp").start()
    nodes += [a, b]
    a.sync_do(lambda p: p.out.insert([(b.addr, 0, 0)]))
    wait_until(lambda: got(b))
    port = b.addr
    node(b).stop()
    b2 = Echo(addr=port, transport="tcp").start()
    nodes.append(b2)
    # a keeps sending new tuples; after it notices the restart one of them gets through
    for k in range(1, 200):
        a.sync_do(lambda p, k=k: p.out.insert([(port, k, k)]))
        if got(b2):
            break
        time.sleep(0.02)
    wait_until(lambda: got(b2))


def test_stop_applies_what_arrived_and_closes(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0").start()
    a.sync_do(lambda p: p.out.insert([(a.addr, 1, 1)]))
    a.stop()
    assert {tuple(r) for r in a.got} == {(a.addr, 1, 1)}
    with pytest.raises(ProgramError, match="stopped"):
        a.start()


def test_tick_on_a_started_node_runs_on_its_thread(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0").start()
    nodes.append(a)
    n = a.tick_count
    a.tick(3)
    assert a.tick_count >= n + 3


def test_options_are_checked() -> None:
    with pytest.raises(ProgramError, match="transport"):
        Echo(addr="127.0.0.1:0", transport="quic")
    with pytest.raises(ProgramError, match="host:port"):
        Echo(addr="a", cluster_key="k")


def test_state_named_like_a_node_method_shadows_it() -> None:
    class Run(Program):
        start = table(["x"])

        @bloom
        def rules(self):
            pass

    p = Run(addr="127.0.0.1:0")
    try:
        assert node(p).stats()["ticks"] == 0
        assert list(p.start) == []
    finally:
        node(p).stop()


def test_lattice_columns_and_sets_travel(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0").start()
    b = Echo(addr="127.0.0.1:0").start()
    nodes += [a, b]
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, lset([1, 2]))]))
    wait_until(lambda: got(b) == {(a.addr, 1, lset([1, 2]))})


def test_watch_a_lattice_variable(nodes: list[Any]) -> None:
    class Best(Program):
        val = channel(["@dst", "v"])
        best = lmax()

        @bloom
        def rules(self):
            self.best <= self.val.map(lambda m: m.v)

    p = Best(addr="127.0.0.1:0").start()
    nodes.append(p)
    seen: list[Any] = []
    p.watch("best", seen.extend)
    p.sync_do(lambda q: q.val.insert([(q.addr, 3)]))
    p.sync_do(lambda q: q.val.insert([(q.addr, 2)]))  # no growth: no call
    p.sync_do(lambda q: q.val.insert([(q.addr, 5)]))
    assert seen == [lmax(3), lmax(5)]


RUN_SCRIPT = """
import sys
from blooml import Program, bloom, table
class Idle(Program):
    t = table(["x"])
    @bloom
    def rules(self):
        pass
p = Idle(addr="127.0.0.1:0")
print(p.addr, flush=True)
p.run()
print("stopped", p.stats()["ticks"] >= 0, flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_run_in_the_foreground_until_a_signal(sig: str) -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", RUN_SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("127.0.0.1:")
        time.sleep(0.3)
        proc.send_signal(getattr(signal, sig))
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0
        assert "stopped True" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_ipv6_loopback(transport: str, nodes: list[Any]) -> None:
    a = Echo(addr="[::1]:0", transport=transport).start()
    b = Echo(addr="[::1]:0", transport=transport).start()
    nodes += [a, b]
    assert a.addr.startswith("[::1]:")
    a.sync_do(lambda p: p.out.insert([(b.addr, 1, 1)]))
    wait_until(lambda: got(b) == {(a.addr, 1, 1)})


def test_a_too_large_tcp_frame_is_dropped_and_counted(nodes: list[Any]) -> None:
    import struct

    b = Echo(addr="127.0.0.1:0", transport="tcp").start()
    nodes.append(b)
    host, port = b.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">I", 2**31) + b"x" * 100)  # announces 2 GiB
        wait_until(lambda: b.stats()["dropped"].get("too_large") == 1)
    # a well-formed frame on a new connection still gets through
    data = encode_envelope("127.0.0.1:9", [("msg", [encode_row((b.addr, "s", 1, 1))])])
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">I", len(data)) + data)
        wait_until(lambda: got(b) == {("s", 1, 1)})


def test_a_node_bound_to_every_interface_answers_to_this_machine_only() -> None:
    c = Echo(addr="0.0.0.0:0", cluster_key=b"k")
    try:
        n, port = node(c), c.addr.rsplit(":", 1)[1]
        assert n.addressed_to(f"127.0.0.1:{port}") and n.addressed_to(f"localhost:{port}")
        assert n.addressed_to(f"{socket.gethostname()}:{port}")
        assert not n.addressed_to(f"192.0.2.1:{port}")  # TEST-NET-1: not this machine
        assert not n.addressed_to("127.0.0.1:1") and not n.addressed_to("elsewhere:" + port)
    finally:
        node(c).stop()
