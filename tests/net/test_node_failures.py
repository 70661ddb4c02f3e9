"""Failures stay where they belong: a bad input sets aside only itself, sync_do/async_do learn
of their own failures, errors after commit roll nothing back, a rule that keeps failing is
quarantined (loopback sockets only, bounded in time)."""

from __future__ import annotations

import concurrent.futures
import socket
from typing import Any

import pytest
from _net import wait_until

from blooml import Program, bloom, channel, lmap, lmax, lset, periodic, table
from blooml.errors import RuleQuarantinedError
from blooml.net import encode_envelope, encode_row, node


def _boom(v: str) -> str:
    if v.startswith("boom"):
        raise ValueError(f"{v} arrived")
    return v


class Fragile(Program):
    """``seen`` takes every message and local row, unless its value starts with "boom"."""

    msg = channel(["@dst", "v"])
    local = table(["v"])
    seen = table(["v"])
    later = table(["v"])

    @bloom
    def rules(self):
        self.seen <= self.msg.map(lambda m: (_boom(m.v),))
        self.seen <= self.local.map(lambda r: (_boom(r.v),))
        self.later < +self.seen


def _datagram(p: Program, v: str, sender: str = "127.0.0.1:9") -> bytes:
    return encode_envelope(sender, [("msg", [encode_row((p.addr, v))])])


def _seen(p: Program) -> set[str]:
    return p.sync_do(lambda q: {r.v for r in q.seen})


def test_one_bad_datagram_sets_aside_itself_only() -> None:
    p = Fragile(addr="127.0.0.1:0")
    n = node(p)
    try:
        # five peers' datagrams and a sync_do batch, all for one tick; one datagram is bad
        for i, v in enumerate(["a", "b", "boom", "c", "d"]):
            assert n.accept(_datagram(p, v, f"127.0.0.1:{9 + i}"))
        assert p.sync_do(lambda q: q.local.insert([("mine",)]) or "done") == "done"
        assert {r.v for r in p.seen} == {"a", "b", "c", "d", "mine"}
        s = n.stats()
        assert s["errors"] == 1 and s["ticks"] == 1
        assert s["discarded_batches"] == 1 and s["discarded_tuples"] == 1
        assert 0 < s["trial_ticks"] <= n.isolation_trials
        assert n.discarded[-1] == {"msg": [(p.addr, "boom")]}
        p.tick()  # the <+ facts of the committed tick were kept
        assert {r.v for r in p.later} == {"a", "b", "c", "d", "mine"}
    finally:
        n.stop()


def test_two_bad_inputs_among_many_are_both_found() -> None:
    p = Fragile(addr="127.0.0.1:0")
    n = node(p)
    try:
        values = [f"v{i}" for i in range(40)]
        values[7] = "boom7"
        values[30] = "boom30"
        for v in values:
            assert n.accept(_datagram(p, v))
        p.sync_do(lambda q: None)
        assert {r.v for r in p.seen} == {v for v in values if not v.startswith("boom")}
        assert n.stats()["discarded_batches"] == 2
    finally:
        n.stop()


def test_sync_do_raises_when_its_own_input_is_set_aside(nodes: list[Any]) -> None:
    p = Fragile(addr="127.0.0.1:0").start()
    nodes.append(p)
    n = node(p)

    def work(q: Any) -> None:  # a peer's datagram lands in the same tick as this batch
        n.accept(_datagram(q, "peer"))
        q.local.insert([("boom-mine",)])

    with pytest.raises(ValueError, match="boom-mine arrived"):
        p.sync_do(work)
    assert _seen(p) == {"peer"}  # the peer's put was applied
    assert p.sync_do(lambda q: q.local.insert([("fine",)]) or 7) == 7
    assert _seen(p) == {"peer", "fine"}


def test_sync_do_raising_keeps_nothing_it_queued(nodes: list[Any]) -> None:
    p = Fragile(addr="127.0.0.1:0").start()
    nodes.append(p)

    def work(q: Any) -> None:
        q.local.insert([("half",)])
        raise KeyError("caller bug")

    with pytest.raises(KeyError):
        p.sync_do(work)
    p.sync_do(lambda q: q.local.insert([("x",)]))
    assert _seen(p) == {"x"}


def test_async_do_returns_a_future_that_fails_with_its_input(nodes: list[Any]) -> None:
    p = Fragile(addr="127.0.0.1:0").start()
    nodes.append(p)
    bad = p.async_do(lambda q: q.local.insert([("boom-async",)]))
    good = p.async_do(lambda q: q.local.insert([("ok",)]) or "ok")
    assert isinstance(bad, concurrent.futures.Future)
    with pytest.raises(ValueError, match="boom-async"):
        bad.result(5)
    assert good.result(5) == "ok"
    raised = p.async_do(lambda q: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        raised.result(5)


class Sender(Program):
    out = table(["dst", "v"])
    msg = channel(["@dst", "v"])
    got = table(["v"])
    note = table(["v"])

    @bloom
    def rules(self):
        self.msg < ~self.out
        self.got <= self.msg.map(lambda m: (m.v,))
        self.note < +self.out.map(lambda o: (o.v,))


class Keyed(Program):
    """A channel keyed on ``k`` alone: two messages with one key and two values conflict."""

    out = table(["dst", "k", "v"])
    msg = channel(["@dst", "k"], ["v"])
    got = table(["k"], ["v"])
    note = table(["k"])

    @bloom
    def rules(self):
        self.msg < ~self.out
        self.got <= self.msg.map(lambda m: (m.k, m.v))
        self.note < +self.out.map(lambda o: (o.k,))


def test_an_unresolvable_destination_rolls_nothing_back(nodes: list[Any]) -> None:
    a = Sender(addr="127.0.0.1:0").start()
    b = Sender(addr="127.0.0.1:0").start()
    nodes += [a, b]
    bad = "no-such-host.blooml.invalid:9"
    a.sync_do(lambda q: q.out.insert([(bad, "x"), (b.addr, "y"), ("bad..name:9", "z")]))
    wait_until(lambda: b.sync_do(lambda q: {r.v for r in q.got}) == {"y"})
    # names resolve off the node's thread: the failures are counted when the resolver answers
    wait_until(lambda: a.stats()["send_failures"] == {bad: 1, "bad..name:9": 1})
    s = a.stats()
    assert s["errors"] == 0 and s["discarded_batches"] == 0
    # the <+ facts of the committed tick were applied by the next tick
    wait_until(lambda: a.sync_do(lambda q: {r.v for r in q.note}) == {"x", "y", "z"})


def test_conflicting_messages_to_itself_roll_nothing_back(nodes: list[Any]) -> None:
    a = Keyed(addr="127.0.0.1:0").start()
    b = Keyed(addr="127.0.0.1:0").start()
    nodes += [a, b]
    a.sync_do(lambda q: q.out.insert([(q.addr, 1, "one"), (q.addr, 1, "uno"), (b.addr, 2, "x")]))
    wait_until(lambda: b.sync_do(lambda q: {tuple(r) for r in q.got}) == {(2, "x")})
    wait_until(lambda: a.sync_do(lambda q: {r.k for r in q.note}) == {1, 2})
    s = a.stats()
    assert s["errors"] == 0 and s["send_failures"] == {a.addr: 1}


class Wedged(Program):
    """A periodic rule that always fails, and an ordinary channel."""

    beat = periodic(0.02)
    ticks = table(["i"])
    msg = channel(["@dst", "v"])
    got = table(["v"])

    @bloom
    def rules(self):
        self.ticks <= self.beat.map(lambda b: (b.ident // 0,))
        self.got <= self.msg.map(lambda m: (m.v,))


def test_a_rule_that_keeps_failing_is_quarantined(nodes: list[Any]) -> None:
    p = Wedged(addr="127.0.0.1:0")
    n = node(p)
    n.quarantine_after = 3
    errors: list[BaseException] = []
    p.on_error(errors.append)
    p.start()
    nodes.append(p)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        host, port = p.addr.rsplit(":", 1)
        s.sendto(
            encode_envelope("127.0.0.1:9", [("msg", [encode_row((p.addr, "early"))])]),
            (host, int(port)),
        )
    wait_until(lambda: n.stats()["quarantined"] == 1)
    quarantined = [e for e in errors if isinstance(e, RuleQuarantinedError)]
    assert len(quarantined) == 1
    q = quarantined[0]
    assert q.index == 0 and q.failures == 3 and isinstance(q.last, ZeroDivisionError)
    assert "ticks <= " in q.rule and "quarantined" in str(q)
    assert list(n.quarantined) == [0]
    # the node runs on without it: the datagram held meanwhile and new input are applied
    p.sync_do(lambda q: None)
    wait_until(lambda: p.sync_do(lambda q: {r.v for r in q.got}) == {"early"})
    s = n.stats()
    assert s["discarded_batches"] == 0 and s["errors"] == 3
    assert n.release_quarantine() == [0]
    assert n.stats()["quarantined"] == 0


def test_quarantine_after_is_checked() -> None:
    from blooml import ProgramError
    from blooml.net.node import Node

    p = Wedged()
    with pytest.raises(ProgramError, match="quarantine_after"):
        Node(p, quarantine_after=0)


class Store(Program):
    """The whole-state gossip idiom: a received store is merged into ``store``."""

    store = lmap()
    best = lmax(0)
    sync = channel(["@dst"], ["kv"])
    top = channel(["@dst"], ["m"])

    @bloom
    def rules(self):
        self.store <= self.sync.map(lambda s: s.kv)
        self.best <= self.top.map(lambda t: t.m)


def _send(p: Program, chan: str, value: Any) -> bytes:
    return encode_envelope("127.0.0.1:9", [(chan, [encode_row((p.addr, value))])])


def test_ill_typed_lattice_columns_are_refused_at_decode() -> None:
    p = Store(addr="127.0.0.1:0")
    n = node(p)
    try:
        assert n.accept(_send(p, "sync", lmap({"j": lmax(1)})))
        p.tick()
        assert not n.accept(_send(p, "sync", lset([1])))  # an lset where an lmap merges
        assert not n.accept(_send(p, "sync", lmap({"j": lmax("evil")})))  # under an int key
        assert not n.accept(_send(p, "sync", lmap({"new": lmax("evil")})))  # ints are held
        assert not n.accept(_send(p, "top", lmax("evil")))  # best holds ints
        assert not n.accept(_send(p, "top", "plain"))
        s = n.stats()
        assert s["dropped"] == {"ill_typed": 5}
        assert not p._rt.has_pending()
        assert n.accept(_send(p, "sync", lmap({"new": lmax(2)})))
        assert n.accept(_send(p, "top", lmax(9)))
        p.tick()
        assert p.store.value == lmap({"j": lmax(1), "new": lmax(2)})
        assert p.best.value == lmax(9) and n.stats()["errors"] == 0
    finally:
        n.stop()


class Entries(Program):
    """Puts as (key, lattice) entries of an lmap."""

    store = lmap()
    put = channel(["@dst", "k"], ["v"])

    @bloom
    def rules(self):
        self.store <= self.put.map(lambda m: (m.k, m.v))


def test_ill_typed_lmap_entries_are_refused_at_decode() -> None:
    p = Entries(addr="127.0.0.1:0")
    n = node(p)

    def put(k: str, v: Any) -> bool:
        return n.accept(encode_envelope("127.0.0.1:9", [("put", [encode_row((p.addr, k, v))])]))

    try:
        assert put("a", lmax(1))
        p.tick()
        # the poison value is refused for a new key too, so it cannot break later writes
        assert not put("a", lmax("evil")) and not put("b", lmax("evil")) and not put("b", 3)
        assert not put("a", lset([1]))
        assert n.stats()["dropped"] == {"ill_typed": 4}
        assert put("b", lmax(2)) and put("c", lset([1]))
        p.tick()
        assert p.store.value == lmap({"a": lmax(1), "b": lmax(2), "c": lset([1])})
    finally:
        n.stop()


class DurableFragile(Fragile):
    kept = table(["v"], durable=True)

    @bloom
    def keep(self):
        self.kept <= self.seen


def test_trial_ticks_write_nothing_durable(tmp_path: Any) -> None:
    from blooml.net.durable import close

    p = DurableFragile(addr="127.0.0.1:0", data_dir=tmp_path)
    n = node(p)
    try:
        for v in ["a", "boom", "b", "c"]:
            assert n.accept(_datagram(p, v))
        p.sync_do(lambda q: None)
        assert n.stats()["trial_ticks"] >= 2 and p.tick_count == 1
    finally:
        n.stop()
        close(p)
    q = DurableFragile(data_dir=tmp_path)
    assert {r.v for r in q.kept} == {"a", "b", "c"} and q.tick_count == 1
    close(q)


def test_inputs_left_undecided_by_the_budget_stay_queued() -> None:
    p = Fragile(addr="127.0.0.1:0")
    n = node(p)
    n.isolation_trials = 3
    try:
        values = [f"v{i}" for i in range(16)]
        values[3], values[12] = "boom3", "boom12"
        for v in values:
            assert n.accept(_datagram(p, v))
        for _ in range(6):
            p.sync_do(lambda q: None)
        assert {r.v for r in p.seen} == {v for v in values if not v.startswith("boom")}
        assert n.stats()["discarded_batches"] == 2
    finally:
        n.stop()
