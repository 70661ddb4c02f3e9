"""examples/kvs.py: the lmap store (versions win, replicas converge) and Bud's table store."""

from __future__ import annotations

import pytest
from _examples import FakeClock, load_example
from hypothesis import given
from hypothesis import strategies as st

from blooml import KeyConstraintError, LocalNetwork, lmax

kvs = load_example("kvs")

Put = tuple[str, int, str]  # key, version, value
puts_st = st.lists(
    st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 5), st.sampled_from("abc")),
    max_size=10,
)


def lww_model(puts: list[Put]) -> dict[str, str]:
    """The newest version per key; equal versions: the larger value (lmax of the pair)."""
    best: dict[str, tuple[int, str]] = {}
    for key, version, value in puts:
        best[key] = max(best.get(key, (version, value)), (version, value))
    return {k: v for k, (_, v) in best.items()}


def test_main() -> None:
    out = kvs.main()
    assert out["gets"] == {10: "green", 11: "M", 12: None}
    want = {"colour": "blue", "size": "S", "shape": "round"}
    assert out["east"] == want and out["west"] == want
    assert out["table"] == {"colour": "red"}
    assert out["replace"] == {"colour": "red"}


@given(puts_st, st.data())
def test_store_is_order_free(puts: list[Put], data: st.DataObject) -> None:
    order = data.draw(st.permutations(puts))
    split = data.draw(st.integers(0, len(order)))
    p = kvs.KVS()
    reqid = 0
    for batch in (order[:split], order[split:]):
        p.kvput.insert([(reqid + i, k, v, val) for i, (k, v, val) in enumerate(batch)])
        reqid += len(batch)
        p.tick()
    assert kvs.store_dict(p) == lww_model(puts)
    p.kvget.insert([(1000 + i, k) for i, k in enumerate(["k1", "k2", "k3"])])
    p.tick()
    got = {r.key: kvs.value_of(r.value) for r in p.kvget_response}
    assert got == {k: lww_model(puts).get(k) for k in ["k1", "k2", "k3"]}


def test_get_of_missing_key_is_bottom() -> None:
    p = kvs.KVS()
    p.kvget.insert([(1, "nope")])
    p.tick()
    (r,) = list(p.kvget_response)
    assert r.value == lmax()


def test_get_response_grows_with_a_put_in_the_same_tick() -> None:
    p = kvs.KVS()
    p.kvput.insert([(1, "k", 1, "old")])
    p.tick()
    p.kvput.insert([(2, "k", 2, "new")])
    p.kvget.insert([(3, "k")])
    p.tick()
    (r,) = list(p.kvget_response)
    assert r.value == lmax((2, "new"))


@given(puts_st, puts_st)
def test_replicas_converge(east_puts: list[Put], west_puts: list[Put]) -> None:
    clock = FakeClock()
    net = LocalNetwork()
    east = kvs.ReplicatedKVS(addr="east", clock=clock, network=net)
    west = kvs.ReplicatedKVS(addr="west", clock=clock, network=net)
    east.peer.insert([("west",)])
    west.peer.insert([("east",)])
    east.kvput.insert([(i, *p) for i, p in enumerate(east_puts)])
    west.kvput.insert([(i, *p) for i, p in enumerate(west_puts)])
    for _ in range(8):
        clock.now += 0.5
        net.tick()
    want = lww_model(east_puts + west_puts)
    assert kvs.store_dict(east) == want
    assert kvs.store_dict(west) == want


@given(st.lists(st.tuples(st.sampled_from(["k1", "k2"]), st.sampled_from("abc")), max_size=8))
def test_table_kvs_last_put_wins(puts: list[tuple[str, str]]) -> None:
    p = kvs.TableKVS()
    for i, (k, v) in enumerate(puts):  # one put per tick: writers are ordered
        p.kvput.insert([(i, k, v)])
        p.tick()
    p.tick()
    assert {r.key: r.value for r in p.kvstate} == dict(puts)


def test_table_kvs_same_value_put_again_survives() -> None:
    """Delete and re-insert of the same row at one boundary keeps the row (deletes go first)."""
    p = kvs.TableKVS()
    p.kvput.insert([(1, "k", "v")])
    p.tick(2)
    p.kvput.insert([(2, "k", "v")])
    p.tick(2)
    assert {tuple(r) for r in p.kvstate} == {("k", "v")}


def test_table_kvs_two_puts_to_one_key_in_one_tick_conflict() -> None:
    p = kvs.TableKVS()
    p.kvput.insert([(1, "k", "a")])
    p.tick(2)
    before = {tuple(r) for r in p.kvstate}
    p.kvput.insert([(2, "k", "b"), (3, "k", "c")])
    with pytest.raises(KeyConstraintError) as err:
        p.tick(2)
    assert err.value.collection == "kvstate"
    assert err.value.key in ("k", ("k",))
    assert {tuple(r) for r in p.kvstate} == before  # the failed tick changed nothing


@given(puts_st, puts_st, st.integers(0, 2**16))
def test_replicas_converge_on_a_chaotic_network(
    east_puts: list[Put], west_puts: list[Put], seed: int
) -> None:
    clock = FakeClock()
    net = LocalNetwork(seed, max_delay=3, dup_prob=0.3)
    east = kvs.ReplicatedKVS(addr="east", clock=clock, network=net)
    west = kvs.ReplicatedKVS(addr="west", clock=clock, network=net)
    east.peer.insert([("west",)])
    west.peer.insert([("east",)])
    east.kvput.insert([(i, *p) for i, p in enumerate(east_puts)])
    west.kvput.insert([(i, *p) for i, p in enumerate(west_puts)])
    for _ in range(14):
        clock.now += 0.5
        net.tick()
    want = lww_model(east_puts + west_puts)
    assert kvs.store_dict(east) == want
    assert kvs.store_dict(west) == want


@given(st.lists(st.tuples(st.sampled_from(["k1", "k2"]), st.sampled_from("abc")), max_size=8))
def test_replace_kvs_equals_table_kvs(puts: list[tuple[str, str]]) -> None:
    """One `<+-` rule does what `<-` plus `<+` do, tick for tick."""
    a, b = kvs.TableKVS(), kvs.ReplaceKVS()
    for i, (k, v) in enumerate(puts):
        for p in (a, b):
            p.kvput.insert([(i, k, v)])
            p.tick()
        assert {tuple(r) for r in a.kvstate} == {tuple(r) for r in b.kvstate}
    b.tick()
    assert {r.key: r.value for r in b.kvstate} == dict(puts)
