"""ZSet and IndexedZSet: the public contract, errors and the group laws."""

from __future__ import annotations

import pytest
from _dataflow_strategies import indexed, zsets
from hypothesis import given
from hypothesis import strategies as st

from blooml.dataflow import (
    DataflowError,
    IndexedZSet,
    UnhashableElementError,
    WeightError,
    ZSet,
)
from blooml.errors import BloomlError


def test_contract_construction_equality_iteration() -> None:
    a = ZSet({"x": 1, "y": 2, "z": 0})
    assert a == ZSet({"y": 2, "x": 1})
    assert sorted(a) == [("x", 1), ("y", 2)]  # zero weights are never stored
    assert len(a) == 2 and "z" not in a and a["z"] == 0 and a["y"] == 2
    assert ZSet([("x", 1), ("x", 2), ("y", 1), ("y", -1)]) == ZSet({"x": 3})


def test_contract_operators() -> None:
    a = ZSet({0: 1, 1: 1, 2: 2, 3: 1})
    b = ZSet({0: 1, 1: -1, 2: 1})
    assert a + b == ZSet({0: 2, 2: 3, 3: 1})  # the spec's Plus example
    assert a - b == ZSet({1: 2, 2: 1, 3: 1})  # the spec's Minus example
    assert -b == ZSet({0: -1, 1: 1, 2: -1})
    assert ZSet({0: 1, 1: 2, 2: -1}).distinct() == ZSet({0: 1, 1: 1})
    assert ZSet({0: 1, 1: 2, 2: -3}).filter(lambda x: x >= 1) == ZSet({1: 2, 2: -3})
    assert ZSet({1: 1, 2: 1, 3: -1}).map(lambda x: x % 2) == ZSet({0: 1})  # 1 and 3 cancel
    ix = ZSet({(0, 1, 1): 1, (1, 2, 1): 1, (1, 3, 2): -1}).index_with(lambda e: e[0])
    assert isinstance(ix, IndexedZSet)
    assert ix == IndexedZSet({0: {(0, 1, 1): 1}, 1: {(1, 2, 1): 1, (1, 3, 2): -1}})


def test_map_sums_collisions_and_drops_zeros() -> None:
    assert ZSet({1: 1, 3: -1}).map(lambda x: x % 2) == ZSet()
    assert ZSet({1: 1, 3: 2}).map(lambda x: x % 2) == ZSet({1: 3})


def test_values_are_immutable_and_hashable() -> None:
    a = ZSet({1: 1})
    b = a + ZSet({2: 1})
    assert a == ZSet({1: 1}) and b == ZSet({1: 1, 2: 1})
    assert hash(ZSet({1: 1, 2: -1})) == hash(ZSet([(2, -1), (1, 1)]))
    assert {ZSet({1: 1}): "ok"}[ZSet({1: 1})] == "ok"
    assert hash(IndexedZSet({1: {2: 1}})) == hash(IndexedZSet([((1, 2), 1)]))
    with pytest.raises(AttributeError):
        a.foo = 1  # type: ignore[attr-defined]


def test_reprs() -> None:
    assert repr(ZSet()) == "ZSet()"
    assert repr(ZSet({2: 1, 1: -1})) == "ZSet({1: -1, 2: 1})"
    assert repr(ZSet({"a": 1, 1: 1})) in ("ZSet({'a': 1, 1: 1})", "ZSet({1: 1, 'a': 1})")
    assert repr(IndexedZSet({1: {"b": 1, "a": 2}})) == "IndexedZSet({1: {'a': 2, 'b': 1}})"
    assert repr(IndexedZSet()) == "IndexedZSet()"
    big = ZSet({i: 1 for i in range(60)})
    assert "10 more" in repr(big)
    assert eval(repr(ZSet({(1, "a"): 2}))) == ZSet({(1, "a"): 2})


@pytest.mark.parametrize("bad", [1.0, "1", None, True])
def test_non_int_weight_is_rejected(bad: object) -> None:
    with pytest.raises(WeightError) as info:
        ZSet({"x": bad})
    err = info.value
    assert err.weight is bad and err.element == "x"
    assert isinstance(err, DataflowError) and isinstance(err, BloomlError)
    assert isinstance(err, TypeError)
    with pytest.raises(WeightError):
        IndexedZSet({1: {"v": bad}})


def test_unhashable_element_is_rejected() -> None:
    with pytest.raises(UnhashableElementError) as info:
        ZSet({1: 1}).map(lambda x: [x])
    assert info.value.element == [1] and "ZSet.map" in str(info.value)
    with pytest.raises(UnhashableElementError):
        ZSet([([1], 1)])
    with pytest.raises(UnhashableElementError):
        ZSet({1: 1}).index_with(lambda x: {x})
    with pytest.raises(UnhashableElementError):
        ZSet()[[1]]


def test_bad_shapes() -> None:
    with pytest.raises(WeightError):
        ZSet([1, 2])  # type: ignore[list-item]
    with pytest.raises(WeightError):
        IndexedZSet([1])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ZSet({1: 1}) + IndexedZSet()  # type: ignore[operator]
    with pytest.raises(TypeError):
        ZSet({1: 1}) + {1: 1}  # type: ignore[operator]


def test_indexed_zset_reading() -> None:
    ix = IndexedZSet({1: {"foo": 1, "bar": 1}, 2: {"baz": -1}, 3: {}})
    assert len(ix) == 3 and 3 not in ix and 1 in ix
    assert ix[1] == ZSet({"foo": 1, "bar": 1}) and ix[9] == ZSet()
    assert sorted(ix, key=repr) == sorted(
        [((1, "foo"), 1), ((1, "bar"), 1), ((2, "baz"), -1)], key=repr
    )
    assert ix.entries() == ZSet({(1, "foo"): 1, (1, "bar"): 1, (2, "baz"): -1})
    assert IndexedZSet(ix.entries()) == ix
    assert ix.distinct() == IndexedZSet({1: {"foo": 1, "bar": 1}})
    assert ix.filter(lambda k, v: v != "bar") == IndexedZSet({1: {"foo": 1}, 2: {"baz": -1}})
    assert ix - ix == IndexedZSet()


def test_from_elements_and_helpers() -> None:
    z = ZSet.from_elements("aab")
    assert z == ZSet({"a": 2, "b": 1}) and z.total_weight() == 3
    assert z.is_positive() and not z.is_set() and z.distinct().is_set()
    assert 3 * z == z + z + z and z * 0 == ZSet()
    assert ZSet({1: 1}).flat_map(lambda x: [x, x + 1]) == ZSet({1: 1, 2: 1})


@given(zsets, zsets, zsets)
def test_abelian_group(a: ZSet, b: ZSet, c: ZSet) -> None:
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert a + ZSet() == a and a - a == ZSet() and a + (-a) == ZSet()
    assert a - b == a + (-b)
    for _e, w in a + b:
        assert w != 0


@given(indexed, indexed, indexed)
def test_indexed_abelian_group(a: IndexedZSet, b: IndexedZSet, c: IndexedZSet) -> None:
    assert (a + b) + c == a + (b + c) and a + b == b + a
    assert a - a == IndexedZSet() and (a + b).entries() == a.entries() + b.entries()


@given(zsets)
def test_distinct_is_idempotent_and_positive(a: ZSet) -> None:
    d = a.distinct()
    assert d.distinct() == d and d.is_set()
    assert {e for e, w in a if w > 0} == set(d.elements())


@given(zsets, zsets, st.sampled_from([lambda x: x % 3, lambda x: x // 2]))
def test_linear_methods_commute_with_plus(a: ZSet, b: ZSet, f) -> None:  # type: ignore[no-untyped-def]
    assert (a + b).map(f) == a.map(f) + b.map(f)
    assert (a + b).filter(lambda x: x % 2 == 0) == a.filter(lambda x: x % 2 == 0) + b.filter(
        lambda x: x % 2 == 0
    )
    assert (a + b).index_with(f) == a.index_with(f) + b.index_with(f)
    assert -(a + b) == -a + -b


def test_sorted_access() -> None:
    assert ZSet({3: 1, 1: 2, 2: -1}).sorted_items() == [(1, 2), (2, -1), (3, 1)]
    assert ZSet({"b": 1, 2: 1, None: 1}).sorted_items() == [(None, 1), (2, 1), ("b", 1)]
    ix = IndexedZSet({2: {"b": 1, "a": 1}, 1: {"z": -1}})
    assert ix.sorted_items() == [((1, "z"), -1), ((2, "a"), 1), ((2, "b"), 1)]
