"""What a tick begins and runs (``blooml.engine._tick``): a tick begins only the collections
it changes and runs only the units and end-of-tick rules whose inputs changed; every tick is
what a tick that begins every collection and runs every rule makes of the same input (the
same state, messages, failures with the same row named, channel contents between ticks),
and leaves no collection with an open transaction (an undo log, rows new in the tick)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, channel, durable, lmap, lmax, scratch, table
from blooml.bloom import count
from blooml.engine._rules import CompiledRule
from blooml.engine.runtime import Runtime


@contextmanager
def everything() -> Iterator[None]:
    """Ticks that begin every collection and run every unit and end-of-tick rule."""
    with mock.patch.object(Runtime, "_scoped", False):
        yield


def _closed(p: Any) -> None:
    """Every collection's transaction is closed between ticks."""
    for name, rel in p._rt.rels.items():
        assert not rel.undo and not rel.tick_new and rel._saved is None, name


class Capture:
    """A transport that keeps what each tick sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def register(self, program: Any) -> None:
        program._rt.network = self

    def check(self, rt: Any, addr: Any, chan: str, row: Any, where: str = "") -> Any:
        if addr == "nowhere":
            raise ValueError(f"{where}: cannot send to {addr!r}")
        return None

    def deliver(self, rt: Any, addr: Any, batch: list[tuple[str, Any, Any]]) -> None:
        self.sent.extend((addr, chan, tuple(row)) for chan, row, _ in batch)


class KV(Program):
    """Puts into a map and a table, a reply per put (``v == 0``: the rule raises), gets
    answered from the map and, through a join, from the table; gets of a known name counted
    into a table through a join with a table no rule writes."""

    store = lmap()
    best = table(["k"], ["v"])
    names = table(["k"])
    hits = table(["k"], ["n"])
    put = channel(["@dst", "src", "id"], ["k", "v"])
    get = channel(["@dst", "src", "id"], ["k"])
    reply = channel(["@dst", "id"], ["v"])
    found = channel(["@dst", "id"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.k, lmax(p.v)))
        self.best <= self.put.filter(lambda p: p.v > 1).map(lambda p: (p.k, lmax(p.v)))
        self.reply <~ self.put.map(lambda p: (p.src, p.id, 100 // p.v))
        self.reply <~ self.get.map(
            lambda g: (g.src, g.id, self.store.at(g.k, lmax).reveal())
        )
        self.found <~ self.get.join(self.best, self.get.k == self.best.k).map(
            lambda g, b: (g.src, g.id, b.v)
        )
        self.hits <= self.get.join(self.names, self.get.k == self.names.k).map(
            lambda g, n: (n.k, lmax(g.id))
        )
    # fmt: on


def _new() -> tuple[KV, Capture]:
    net = Capture()
    p = KV(addr="me", network=net)
    p.names.insert([("a",), ("c",)])
    return p, net


def test_a_channel_row_begins_what_it_reaches() -> None:
    p, net = _new()
    p.tick()
    rt = p._rt
    p._rt.receive_batch("c", [("put", [("me", "c", 1, "a", 5)])])
    run = CompiledRule.evaluate
    with mock.patch.object(CompiledRule, "evaluate", autospec=True, side_effect=run) as ev:
        p.tick()
    assert {r.name for r in rt._touched} == {"put", "best"}
    # the rules over put, and the reply through the join with best (which changed); not the
    # reply to get (no get row) nor the count of hits (neither get nor names changed)
    assert sorted(c.args[0].rule.index for c in ev.call_args_list) == [0, 1, 2, 4]
    p._rt.receive_batch("c", [("get", [("me", "c", 2, "a")])])
    p.tick()  # the put rows leave; get rows arrive; hits is written (a join with names)
    assert {r.name for r in rt._touched} == {"put", "get", "hits"}
    p.tick()  # an empty tick: the get rows leave
    assert {r.name for r in rt._touched} == {"get"}
    assert net.sent == [
        ("c", "reply", ("c", 1, 20)),
        ("c", "reply", ("c", 2, 5)),
        ("c", "found", ("c", 2, lmax(5))),  # through the join with the table
    ]
    assert {tuple(r) for r in p.hits} == {("a", lmax(2))}
    assert p._rt.lats["store"].value == lmap({"a": lmax(5)})
    assert {tuple(r) for r in p.best} == {("a", lmax(5))}
    _closed(p)


def test_a_failed_tick_undoes_what_it_began() -> None:
    p, _ = _new()
    p.tick()
    rt = p._rt
    rt.receive_batch("c", [("put", [("me", "c", 1, "a", 3)])])
    p.tick()
    rt.receive_batch("c", [("put", [("me", "c", 2, "a", 0), ("me", "c", 3, "b", 4)])])
    with pytest.raises(ZeroDivisionError):
        p.tick()  # the reply of the put of 0 raises after the map and the table took both
    _closed(p)
    assert rt.lats["store"].value == lmap({"a": lmax(3)})
    assert {tuple(r) for r in p.best} == {("a", lmax(3))}
    assert {tuple(r) for r in p.put} == {("me", "c", 1, "a", 3)}  # the last tick's row
    p.discard_pending()
    p.tick()
    assert not list(p.put)
    _closed(p)


_MSG = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(["c1", "c2"]),
        st.integers(0, 3),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 4),
    ),
    st.tuples(
        st.just("get"),
        st.sampled_from(["c1", "c2", "nowhere"]),
        st.integers(0, 3),
        st.sampled_from(["a", "b", "c"]),
    ),
)


def _run(ticks: list[list[tuple[Any, ...]]]) -> list[Any]:
    """What happens, tick by tick: refusals at arrival, the tick's failure (and the row it
    names), the state, the channels' contents and the messages sent."""
    p, net = _new()
    rt = p._rt
    out: list[Any] = []
    for msgs in ticks:
        for chan, src, i, *rest in msgs:
            try:
                rt.receive_batch(src, [(chan, [("me", src, i, *rest)])])
            except Exception as exc:
                out.append(("refused", type(exc).__name__, str(exc)))
        try:
            p.tick()
            out.append("ok")
        except Exception as exc:
            named = getattr(exc, "pending_input", None)
            out.append(("failed", type(exc).__name__, str(exc), named))
            p.discard_pending()
        _closed(p)
        out.append(
            (
                p.tick_count,
                rt.lats["store"].value,
                sorted((tuple(r) for r in p.best), key=repr),
                sorted((tuple(r) for r in p.hits), key=repr),
                sorted((tuple(r) for r in p.put), key=repr),
                sorted((tuple(r) for r in p.get), key=repr),
                list(net.sent),
            )
        )
    return out


def _same(ticks: list[list[tuple[Any, ...]]]) -> None:
    scoped = _run(ticks)
    with everything():
        full = _run(ticks)
    assert scoped == full


_TICKS = st.lists(st.lists(_MSG, max_size=6), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None)
@given(_TICKS)
def test_a_scoped_tick_is_a_full_tick(ticks: list[list[tuple[Any, ...]]]) -> None:
    _same(ticks)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(_TICKS)
def test_a_scoped_tick_is_a_full_tick_at_length(ticks: list[list[tuple[Any, ...]]]) -> None:
    _same(ticks)


class DurableKV(Program):
    """``KV`` with its map and its table durable."""

    store = durable(lmap())
    best = table(["k"], ["v"], durable=True)
    put = channel(["@dst", "src", "id"], ["k", "v"])
    get = channel(["@dst", "src", "id"], ["k"])
    reply = channel(["@dst", "id"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.k, lmax(p.v)))
        self.best <= self.put.filter(lambda p: p.v > 1).map(lambda p: (p.k, lmax(p.v)))
        self.reply <~ self.put.map(lambda p: (p.src, p.id, 100 // p.v))
    # fmt: on


def test_a_durable_program_restores_what_scoped_ticks_committed(tmp_path: Any) -> None:
    """Ticks that begin what they change write what they commit (nothing of one that
    failed)."""
    d = str(tmp_path / "kv")
    p = DurableKV(addr="me", network=Capture(), data_dir=d)
    p.tick()
    rt = p._rt
    for i, (k, v) in enumerate([("a", 3), ("b", 1), ("a", 2)]):
        rt.receive_batch("c", [("put", [("me", "c", i, k, v)])])
        p.tick()
    rt.receive_batch("c", [("put", [("me", "c", 9, "b", 0)])])  # its reply rule raises
    with pytest.raises(ZeroDivisionError):
        p.tick()
    want = lmap({"a": lmax(3), "b": lmax(1)})
    assert rt.lats["store"].value == want
    rt.durable.close()
    q = DurableKV(addr="me", network=Capture(), data_dir=d)
    assert q._rt.lats["store"].value == want
    assert {tuple(r) for r in q.best} == {("a", lmax(3))}
    assert q.tick_count == p.tick_count == 4


class Mixed(Program):
    """Many shapes at once: a table fed by input and by ``<+``/``<-`` rules, a scratch that
    two rules feed (from a channel and from a table), a notin, a group, a lattice variable
    folded from rows, messages from a join of tables (``t.v == 0`` raises in one rule)."""

    t = table(["k"], ["v"])
    gone = table(["k"])
    seen = table(["k"], ["v"])
    s = scratch(["k"], ["v"])
    kept = scratch(["k"], ["v"])
    per = table(["v"], ["n"])
    top = lmax()
    msg = channel(["@dst", "k"], ["v"])
    out = channel(["@dst", "k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.s <= self.msg.map(lambda m: (m.k, m.v))
        self.s <= self.t.map(lambda r: (r.k, r.v))
        self.kept <= self.s.notin(self.gone, self.s.k == self.gone.k)
        self.per <= self.kept.group(["v"], count())
        self.top <= self.kept.map(lambda r: lmax(r.v))
        self.seen <= self.msg.map(lambda m: (m.k, 10 // m.v))
        self.gone <+ self.msg.filter(lambda m: m.v > 3).map(lambda m: (m.k,))
        self.t <- self.t.join(self.gone, self.t.k == self.gone.k).map(lambda r, g: r)
        self.out <~ self.t.join(self.seen, self.t.k == self.seen.k).map(
            lambda r, x: ("peer", r.k, x.v)
        )
    # fmt: on


_STEP = st.lists(
    st.one_of(
        st.tuples(st.just("msg"), st.sampled_from("abcd"), st.integers(0, 5)),
        st.tuples(st.just("ins"), st.sampled_from("abcd"), st.integers(0, 5)),
        st.tuples(st.just("del"), st.sampled_from("abcd"), st.integers(0, 5)),
    ),
    max_size=4,
)


def _run_mixed(steps: list[list[tuple[str, str, int]]]) -> list[Any]:
    net = Capture()
    p = Mixed(addr="me", network=net)
    rt = p._rt
    out: list[Any] = []
    for step in steps:
        for kind, k, v in step:
            if kind == "msg":
                try:
                    rt.receive_batch("x", [("msg", [("me", k, v)])])
                except Exception as exc:
                    out.append(("refused", type(exc).__name__))
            elif kind == "ins":
                p.t.insert([(k, v)])
            else:
                p.t.delete([(k, v)])
        try:
            p.tick()
            out.append("ok")
        except Exception as exc:
            out.append(("failed", type(exc).__name__, str(exc)))
            p.discard_pending()
        _closed(p)
        out.append(
            (
                p.tick_count,
                rt.lats["top"].value,
                {
                    n: sorted((tuple(r) for r in rt.rels[n].store.values()), key=repr)
                    for n in rt.rels
                },
                list(net.sent),
            )
        )
    return out


def _same_mixed(steps: list[list[Any]]) -> None:
    scoped = _run_mixed(steps)
    with everything():
        full = _run_mixed(steps)
    assert scoped == full


_STEPS = st.lists(_STEP, min_size=1, max_size=8)


@settings(max_examples=20, deadline=None)
@given(_STEPS)
def test_a_scoped_tick_is_a_full_tick_in_many_shapes(steps: list[list[Any]]) -> None:
    _same_mixed(steps)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_STEPS)
def test_a_scoped_tick_is_a_full_tick_in_many_shapes_at_length(steps: list[list[Any]]) -> None:
    _same_mixed(steps)
