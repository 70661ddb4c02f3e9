"""lmap: examples for every method and error, sharing, pickling, laws as properties."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import (
    LatticeTypeError,
    LatticeValueError,
    kind_of,
    lbool,
    lmap,
    lmax,
    lmin,
    lset,
)

keys = st.one_of(st.integers(0, 6), st.sampled_from(["a", "b", ""]), st.just(1.0))
lmaxes = st.builds(lmax, st.integers(-3, 5)) | st.just(lmax())
lmax_maps = st.dictionaries(keys, lmaxes, max_size=8).map(lmap)
lbool_maps = st.dictionaries(keys, st.builds(lbool, st.booleans()), max_size=8).map(lmap)
lset_maps = st.dictionaries(
    keys, st.frozensets(st.integers(0, 5), max_size=4).map(lset), max_size=6
).map(lmap)


def big_map(n: int = 200) -> lmap:
    return lmap({i: lmax(i) for i in range(n)})


class TestConstruction:
    def test_bottom(self):
        assert lmap() == lmap.bottom() == lmap({}) == lmap([])
        assert lmap().reveal() == {} and lmap().is_bottom()

    def test_from_mapping_and_pairs(self):
        assert lmap({"a": lmax(1)}).reveal() == {"a": lmax(1)}
        assert lmap([("a", lmax(1)), ("a", lmax(4))]) == lmap({"a": lmax(4)})

    def test_from_lmap(self):
        m = lmap({"a": lmax(1)})
        assert lmap(m) == m

    def test_unhashable_keys_are_frozen(self):
        m = lmap([([1, 2], lmax(1))])
        assert m.has_key((1, 2)) == lbool(True) and [1, 2] in m
        assert m.at([1, 2]) == lmax(1)

    def test_rejects_non_lattice_values(self):
        with pytest.raises(LatticeValueError, match="key 'a'") as e:
            lmap({"a": 1})
        assert e.value.lattice == "lmap" and e.value.value == 1

    def test_rejects_lattice_keys(self):
        with pytest.raises(LatticeValueError, match="key"):
            lmap({lmax(1): lmax(1)})

    @pytest.mark.parametrize("bad", [None, 3, "ab", [("a",)], [("a", lmax(1), 3)]])
    def test_rejects_bad_input(self, bad):
        with pytest.raises(LatticeValueError):
            lmap(bad)

    def test_rejects_clashing_value_classes_for_one_key(self):
        with pytest.raises(LatticeTypeError, match="lmap key 'a'"):
            lmap([("a", lmax(1)), ("a", lmin(1))])


class TestMerge:
    def test_union_and_value_merge(self):
        a = lmap({"a": lmax(1), "b": lset([1])})
        b = lmap({"a": lmax(3), "b": lset([2]), "c": lmin(0)})
        assert a.merge(b) == lmap({"a": lmax(3), "b": lset([1, 2]), "c": lmin(0)})
        assert a | b == b | a

    def test_sharing(self):
        big = big_map()
        assert big.merge(lmap({3: lmax(1)})) is big
        assert lmap({3: lmax(1)}).merge(big) is big
        assert big.merge(big) is big and big.merge(lmap()) is big
        grown = big.merge(lmap({3: lmax(100), 1000: lmax(0)}))
        assert grown.at(3) == lmax(100) and grown.at(1000) == lmax(0)
        assert big.at(3) == lmax(3) and 1000 not in big

    def test_equal_but_distinct_values_still_share(self):
        big = lmap({i: lbool(False) for i in range(50)})
        assert big.merge(lmap({1: lbool(False)})) is big

    def test_type_clash_names_key(self):
        with pytest.raises(LatticeTypeError, match="lmap key 'a'"):
            lmap({"a": lmax(1)}).merge(lmap({"a": lset([1])}))
        with pytest.raises(LatticeTypeError):
            lmap().merge(lset())

    def test_mixed_key_types_with_equal_hashes(self):
        m = big_map(50).merge(lmap({"": lmax(7), 1.0: lmax(99)}))
        assert m.at("") == lmax(7) and m.at(0) == lmax(0) and m.at(1) == lmax(99)

    def test_order(self):
        a, b = lmap({"a": lmax(1)}), lmap({"a": lmax(2), "b": lmax(0)})
        assert a <= b and a < b and b >= a and b > a and not (b <= a)
        c = lmap({"c": lmax(0)})
        assert not (a <= c) and not (c <= a)
        assert not (lmap({"a": lmax(3)}) <= b)
        assert a <= a and not (a < a)
        with pytest.raises(LatticeTypeError):
            _ = a <= lmax(1)


class TestMethods:
    def test_kinds(self):
        for name in ("intersect", "key_set", "at", "has_key", "filter", "apply_morph"):
            assert kind_of(lmap, name) == "morph", name
        assert kind_of(lmap, "to_collection") == "morph"
        assert kind_of(lmap, "size") == "monotone" and kind_of(lmap, "apply") == "monotone"
        assert kind_of(lmap, "reveal") == "nonmonotone"

    def test_intersect_merges_shared_values(self):
        a = lmap({"a": lmax(1), "b": lmax(5)})
        b = lmap({"a": lmax(3), "c": lmax(0)})
        assert a.intersect(b) == lmap({"a": lmax(3)})
        assert big_map().intersect(lmap({5: lmax(50)})) == lmap({5: lmax(50)})
        with pytest.raises(LatticeTypeError):
            a.intersect(lset())

    def test_key_set_size_has_key(self):
        m = lmap({"a": lmax(1), "b": lmax()})
        assert m.key_set() == lset(["a", "b"])
        assert m.size() == lmax(2) and lmap().size() == lmax(0)
        assert m.has_key("b") == lbool(True) and m.has_key("z") == lbool(False)

    def test_at(self):
        m = lmap({"a": lmax(1)})
        assert m.at("a") == lmax(1) and m.at("a", lmax) == lmax(1)
        assert m.at("z", lset) == lset()
        with pytest.raises(KeyError, match="'z'"):
            m.at("z")
        with pytest.raises(TypeError, match="lattice class"):
            m.at("z", int)

    def test_filter(self):
        m = lmap({"a": lbool(True), "b": lbool(False)})
        assert m.filter() == lmap({"a": lbool(True)})
        with pytest.raises(TypeError, match="key 'x'"):
            lmap({"x": lmax(1)}).filter()

    def test_apply_morph(self):
        m = lmap({"a": lmax(1), "b": lmax(5)})
        assert m.apply_morph("gt", 2) == lmap({"a": lbool(False), "b": lbool(True)})
        assert m.apply_morph("gt", 2).filter().key_set() == lset(["b"])
        assert lmap().apply_morph("anything") == lmap()

    def test_apply_morph_checks_kind(self):
        sets = lmap({"a": lset([1])})
        with pytest.raises(TypeError, match="monotone method 'size'"):
            sets.apply_morph("size")
        with pytest.raises(TypeError, match="no method 'nope'"):
            sets.apply_morph("nope")
        with pytest.raises(TypeError, match="nonmonotone method 'reveal'"):
            sets.apply_morph("reveal")
        with pytest.raises(TypeError, match="str"):
            sets.apply_morph(3)

    def test_apply(self):
        sets = lmap({"a": lset([1, 2]), "b": lset()})
        assert sets.apply("size") == lmap({"a": lmax(2), "b": lmax(0)})
        assert sets.apply("contains", 1) == lmap({"a": lbool(True), "b": lbool(False)})
        with pytest.raises(TypeError, match="reveal"):
            sets.apply("reveal")

    def test_apply_rejects_non_lattice_results(self):
        m = lmap({"a": lbool(True)})
        with pytest.raises(TypeError, match="not a lattice value"):
            m.apply_morph("when_true", lambda: 5)

    def test_to_collection(self):
        m = lmap({"a": lmax(1), "b": lmax(2)})
        assert sorted(m.to_collection()) == [("a", lmax(1)), ("b", lmax(2))]
        rows = m.to_collection(lambda k, v: (k, v.reveal()) if k != "b" else None)
        assert rows == [("a", 1)]
        assert lmap().to_collection() == []

    def test_python_conveniences(self):
        m = lmap({"a": lmax(1), "b": lmax(2)})
        assert sorted(m) == ["a", "b"] and len(m) == 2 and "a" in m and "z" not in m


class TestValueSemantics:
    @pytest.mark.parametrize(
        "value",
        [
            lmap(),
            lmap({"a": lmax(1)}),
            lmap({1: lset([1, 2]), "x": lmap({"y": lbool(True)}), (1, 2): lmin()}),
        ],
    )
    def test_repr_round_trip_and_pickle(self, value):
        assert eval(repr(value)) == value
        w = pickle.loads(pickle.dumps(value))
        assert w == value and hash(w) == hash(value)

    def test_repr_text(self):
        assert repr(lmap({"b": lmax(2), "a": lmax(1)})) == "lmap({'a': lmax(1), 'b': lmax(2)})"

    def test_key_with_bottom_value_is_a_key(self):
        assert lmap({"a": lmax()}) != lmap()
        assert lmap() < lmap({"a": lmax()})


class TestBuilder:
    def test_from_item(self):
        assert lmap.from_item(("a", lmax(1))) == lmap({"a": lmax(1)})
        assert lmap.from_item(["a", lmax(1)]) == lmap({"a": lmax(1)})
        m = lmap({"a": lmax(1)})
        assert lmap.from_item(m) is m
        for bad in ("ab", ("a", 1), ("a",), 5, (lmax(1), lmax(1))):
            with pytest.raises(LatticeValueError):
                lmap.from_item(bad)

    def test_fold(self):
        rows = [("a", lmax(1)), ("a", lmax(3)), ("b", lmax(0)), lmap({"c": lmax(1)})]
        assert lmap.fold(rows) == lmap({"a": lmax(3), "b": lmax(0), "c": lmax(1)})

    def test_builder(self):
        b = lmap.builder()
        b.add(("a", lmax(1))).add(("a", lmax(5))).add(([1], lmax(0)))
        b.merge(lmap({"z": lmax(2)}))
        first = b.freeze()
        assert first == lmap({"a": lmax(5), (1,): lmax(0), "z": lmax(2)})
        assert b.freeze() is first
        b.add(("a", lmax(0)))
        assert b.freeze() is first  # nothing grew

    def test_builder_from_initial_and_merge_builder_and_pickle(self):
        base = big_map(100)
        b1 = lmap.builder(base)
        b1.add((1, lmax(1000)))
        b2 = lmap.builder()
        b2.add(("x", lmax(1)))
        b2.merge(big_map(150))
        b2 = pickle.loads(pickle.dumps(b2))
        b1.merge_builder(b2)
        out = b1.freeze()
        assert out.at(1) == lmax(1000) and out.at("x") == lmax(1) and out.size() == lmax(151)
        assert base.at(1) == lmax(1)

    def test_builder_errors_change_nothing(self):
        b = lmap.builder()
        b.add(("a", lmax(1)))
        with pytest.raises(LatticeTypeError):
            b.add(("a", lset()))
        with pytest.raises(LatticeValueError):
            b.add(("a", 1))
        with pytest.raises(LatticeValueError):
            b.add((lmax(1), lmax(1)))
        with pytest.raises(LatticeValueError):
            b.add(7)
        with pytest.raises(LatticeTypeError):
            b.merge(lmap({"b": lmax(1), "a": lset()}))
        with pytest.raises(LatticeTypeError):
            b.merge(lset())
        assert b.freeze() == lmap({"a": lmax(1)})


# -- laws as properties ---------------------------------------------------------------------------


@pytest.mark.parametrize("maps", [lmax_maps, lset_maps])
def test_merge_is_a_join(maps):
    @given(maps, maps, maps)
    def check(a, b, c):
        assert a.merge(b).merge(c) == a.merge(b.merge(c))
        assert a.merge(b) == b.merge(a)
        assert a.merge(a) == a and a.merge(lmap()) == a
        assert (a <= b) == (a.merge(b) == b)
        assert a <= a.merge(b) and b <= a.merge(b)
        if a == b:
            assert hash(a) == hash(b)

    check()


@given(lmax_maps, lmax_maps, lmax_maps, keys)
def test_morphisms_distribute(a, b, c, k):
    ab = a.merge(b)
    assert ab.intersect(c) == a.intersect(c).merge(b.intersect(c))
    assert ab.key_set() == a.key_set().merge(b.key_set())
    assert ab.at(k, lmax) == a.at(k, lmax).merge(b.at(k, lmax))
    assert ab.has_key(k) == a.has_key(k).merge(b.has_key(k))
    assert ab.apply_morph("gt", 1) == a.apply_morph("gt", 1).merge(b.apply_morph("gt", 1))


@given(lbool_maps, lbool_maps)
def test_filter_distributes(a, b):
    assert a.merge(b).filter() == a.filter().merge(b.filter())


@given(lset_maps, lset_maps)
def test_monotone_functions_preserve_order(a, b):
    ab = a.merge(b)
    assert a.size() <= ab.size()
    assert a.apply("size") <= ab.apply("size")


@given(lmax_maps, lmax_maps)
def test_merge_does_not_mutate(a, b):
    ra, rb = a.reveal(), b.reveal()
    a.merge(b)
    assert a.reveal() == ra and b.reveal() == rb


@given(st.lists(st.tuples(keys, lmaxes), max_size=20))
def test_builder_agrees_with_merges(rows):
    expected = lmap()
    for r in rows:
        expected = expected.merge(lmap.from_item(r))
    assert lmap.fold(rows) == expected
