"""The direct tick (``blooml.engine._direct``): a program whose every rule maps over one
channel ticks on channel rows without the strata, and every tick is what the general path
makes of the same input: the same state, the same messages, the same failures (with the
same row named), the same channel contents between ticks."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, channel, durable, lmap, lmax, table
from blooml.engine import _direct, _tick


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


def test_a_program_of_channel_maps_ticks_directly() -> None:
    p, net = _new()
    p.tick()  # the first tick builds the state: the general path
    assert _direct.direct_plan(p._rt) is not None
    with mock.patch.object(_tick, "apply_inputs", side_effect=AssertionError("general path")):
        p._rt.receive_batch("c", [("put", [("me", "c", 1, "a", 5)])])
        p.tick()
        p._rt.receive_batch("c", [("get", [("me", "c", 2, "a")])])
        p.tick()
    assert net.sent == [
        ("c", "reply", ("c", 1, 20)),
        ("c", "reply", ("c", 2, 5)),
        ("c", "found", ("c", 2, lmax(5))),  # through the join with the table
    ]
    assert {tuple(r) for r in p.hits} == {("a", lmax(2))}  # a join with a table into one
    assert p._rt.lats["store"].value == lmap({"a": lmax(5)})
    assert {tuple(r) for r in p.best} == {("a", lmax(5))}
    assert {tuple(r) for r in p.get} == {("me", "c", 2, "a")}  # this tick's, as always
    assert not list(p.put)  # the last tick's rows left


def test_other_input_and_other_shapes_take_the_general_path() -> None:
    p, _ = _new()
    p.tick()
    with mock.patch.object(_tick, "apply_inputs", wraps=_tick.apply_inputs) as general:
        p.best.insert([("z", lmax(1))])  # input to a table: not channel rows
        p.tick()
    assert general.call_count == 1

    class Loop(Program):  # a rule over a table: no plan
        t = table(["k"])
        c = channel(["@a", "k"])

        # fmt: off
        @bloom
        def rules(self):
            self.t <= self.c.map(lambda m: (m.k,))
            self.c <~ self.t.map(lambda r: ("me", r.k))
        # fmt: on

    assert _direct.DirectPlan.build(Loop(addr="me")._rt) is None

    class Chain(Program):  # a <= rule reading a table another <= rule writes: a fixpoint
        a = table(["k"])
        b = table(["k"])
        c = channel(["@x", "k"])

        # fmt: off
        @bloom
        def rules(self):
            self.a <= self.c.map(lambda m: (m.k,))
            self.b <= self.c.join(self.a, self.c.k == self.a.k).map(lambda m, r: (r.k,))
        # fmt: on

    assert _direct.DirectPlan.build(Chain(addr="me")._rt) is None


def test_a_quarantined_rule_is_planned_out() -> None:
    p, net = _new()
    p.tick()
    p._rt.disable_rule(2)  # the put's reply
    p.tick()  # a reset: the general path
    p._rt.receive_batch("c", [("put", [("me", "c", 1, "a", 0)])])  # would raise in rule 2
    p.tick()
    assert net.sent == [] and p._rt.lats["store"].value == lmap({"a": lmax(0)})


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
    p, _ = _new()
    assert _direct.DirectPlan.build(p._rt) is not None  # the program is planned: compared
    direct = _run(ticks)
    with mock.patch.object(_direct.DirectPlan, "build", return_value=None):
        general = _run(ticks)
    assert direct == general


_TICKS = st.lists(st.lists(_MSG, max_size=6), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None)
@given(_TICKS)
def test_the_direct_tick_is_the_general_tick(ticks: list[list[tuple[Any, ...]]]) -> None:
    _same(ticks)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(_TICKS)
def test_the_direct_tick_is_the_general_tick_at_length(ticks: list[list[tuple[Any, ...]]]) -> None:
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


def test_a_durable_program_restores_what_direct_ticks_committed(tmp_path: Any) -> None:
    """Direct ticks write what they commit (and nothing of one that failed)."""
    d = str(tmp_path / "kv")
    p = DurableKV(addr="me", network=Capture(), data_dir=d)
    p.tick()
    rt = p._rt
    assert _direct.direct_plan(rt) is not None
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
