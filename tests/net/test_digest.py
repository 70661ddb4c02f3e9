"""Range digests (``blooml.net._digest``): kept with each change, they equal a rebuild from the
store, and equal stores have equal digests whatever the order their entries arrived in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.lattices import lbag, lmap, lmax, lset
from blooml.net._digest import FINE, LEAVES, MAX_DEPTH, RangeDigest, split, stable_hash

_keys = st.one_of(st.text(max_size=4), st.integers(-5, 5), st.tuples(st.text(max_size=2)))
_maps = st.dictionaries(_keys, st.tuples(st.integers(0, 3), st.text(max_size=2)), max_size=12).map(
    lambda d: lmap({k: lmax(v) for k, v in d.items()})
)
_sets = st.frozensets(_keys, max_size=12).map(lset)
_bags = st.dictionaries(_keys, st.integers(1, 4), max_size=12).map(lbag)


def _same(d: RangeDigest, value: Any) -> bool:
    r = RangeDigest(value)
    return (d.leaf, d.fine, d.root, d.count) == (r.leaf, r.fine, r.root, r.count)


@settings(max_examples=20, deadline=None)
@given(
    st.one_of(
        st.lists(_maps, min_size=1, max_size=5),
        st.lists(_sets, min_size=1, max_size=5),
        st.lists(_bags, min_size=1, max_size=5),
    )
)
def test_digests_kept_with_the_changes_equal_a_rebuild(incs: list[Any]) -> None:
    value = type(incs[0])()
    d = RangeDigest(value)
    for n in range(len(incs)):  # ticks of one and of two increments
        step = incs[n : n + 2] if n % 2 else incs[n : n + 1]
        new = value
        for inc in step:
            new = new.merge(inc)
        d.seen(value, new, step)
        value = new
        assert _same(d, value)


@settings(max_examples=15, deadline=None)
@given(st.lists(_maps, min_size=1, max_size=4))
def test_equal_stores_have_equal_roots_in_any_order(parts: list[lmap]) -> None:
    a, b = RangeDigest(lmap()), RangeDigest(lmap())
    va = vb = lmap()
    for p in parts:
        new = va.merge(p)
        a.seen(va, new, [p])
        va = new
    for p in reversed(parts):
        new = vb.merge(p)
        b.seen(vb, new, [p])
        vb = new
    assert va == vb and a.root == b.root and a.vector(10) == b.vector(10)


def test_a_difference_shows_in_its_range_only() -> None:
    base = lmap({f"k{i}": lmax(i) for i in range(2_000)})
    a, b = RangeDigest(base), RangeDigest(base.merge(lmap({"k7": lmax(99)})))
    assert a.root != b.root
    depth = RangeDigest.depth_for(2_000)
    slots = b.differs(a.vector(depth), depth)
    assert 0 < len(slots) <= (LEAVES >> depth) * FINE
    assert lmap({"k7": lmax(99)}) <= b.chunk(b.value, tuple(slots))
    assert b.differs(b"short", depth) == [] and b.differs(a.vector(depth), 99) == []


def test_stable_hash_ignores_the_order_of_sets() -> None:
    assert stable_hash(lset(["a", "b", ("c", 1)])) == stable_hash(lset([("c", 1), "b", "a"]))
    assert stable_hash(frozenset({1, 2})) != stable_hash(frozenset({1, 3}))
    assert stable_hash({"x": 1, "y": 2}) == stable_hash({"y": 2, "x": 1})


def test_lat_watch_is_told_what_committed_ticks_merged_and_nothing_else() -> None:
    from blooml import Program, bloom, lmap, scratch

    class P(Program):
        store = lmap()
        put = scratch(["k"], ["v"])

        @bloom
        def rules(self):
            self.store <= self.put.map(lambda r: lmap({r.k: lmax(1 // r.v)}))

    p = P()
    seen: list[tuple[Any, Any, list[Any]]] = []
    p._rt.lat_watch["store"] = [lambda start, value, incs: seen.append((start, value, incs))]
    p.put.insert([("a", 1)])
    p.tick()
    assert seen == [(lmap(), lmap({"a": lmax(1)}), [lmap({"a": lmax(1)})])]
    p.tick()  # nothing merged: not called
    p.put.insert([("b", 0)])  # the rule raises: rolled back, not called
    with pytest.raises(Exception, match="division"):
        p.tick()
    assert len(seen) == 1


@given(st.one_of(_maps, _sets, _bags), st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_split_parts_are_bounded_and_join_to_the_value(value: Any, size: int) -> None:
    parts = split(value, size)
    assert all(type(p) is type(value) and len(p) <= size for p in parts)
    assert sum(len(p) for p in parts) == len(value)
    joined = type(value)()
    for p in parts:
        joined = joined.merge(p)
    assert joined == value
    assert split(lmax(3), size) == [lmax(3)]


def test_a_slot_digest_sums_to_its_range() -> None:
    d = RangeDigest(lmap({f"k{i}": lmax(i) for i in range(5_000)}))
    assert all(sum(d.fine[i * FINE : (i + 1) * FINE]) % 2**64 == d.leaf[i] for i in range(LEAVES))
    assert sum(d.count) == 5_000


def test_a_few_changed_keys_of_a_large_store_show_in_their_slots_only() -> None:
    # a store of 200 keys a range: the ranges that differ, asked for by slot, give the
    # slots of the changed keys (about 1/FINE of each range), and their keys
    base = lmap({f"k{i}": lmax(i) for i in range(200 * LEAVES)})
    change = lmap({f"k{i}": lmax(10**9 + i) for i in (7, 70_000)} | {"new": lmax(1)})
    a, b = RangeDigest(base), RangeDigest(base.merge(change))
    slots = b.differs(a.vector(MAX_DEPTH), MAX_DEPTH)
    leaves = RangeDigest.leaves_of(slots)
    assert len(leaves) == 2 or len(leaves) == 3  # (two keys may share a range)
    assert len(slots) == len(leaves) * FINE  # a range's slots: all of them hold keys
    fine = b.sub_differs(leaves, a.sub_vector(leaves))
    assert 1 <= len(fine) <= 3
    sent = b.chunk(b.value, tuple(fine))
    assert change <= sent and len(sent) <= 3 * 200 * 2 // FINE
    # the peer has no keys in slots only this store has: it sends nothing from them
    assert a.sub_differs(leaves, b.sub_vector(leaves)) == [s for s in fine if a.count[s]]


@pytest.mark.parametrize(
    "leaves", [[], [LEAVES], [-1], [1, 1], ["1"], "ab", None, list(range(LEAVES + 1))]
)
def test_a_malformed_request_for_slots_gets_nothing(leaves: Any) -> None:
    d = RangeDigest(lmap({f"k{i}": lmax(i) for i in range(100)}))
    assert d.sub_vector(leaves) == b""
    assert d.sub_differs(leaves, b"\0" * 8 * FINE) == []
    assert d.sub_differs([1], b"short") == []
    assert d.sub_differs([1, 2], d.sub_vector([1])) == []
