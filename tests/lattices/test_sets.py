"""lset and lpset: examples for every method and error, sharing, pickling, laws as properties."""

from __future__ import annotations

import math
import pickle
from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import (
    LatticeTypeError,
    LatticeValueError,
    kind_of,
    lbag,
    lbool,
    lmap,
    lmax,
    lpset,
    lset,
)

# -- strategies -----------------------------------------------------------------------------

small_values = st.one_of(
    st.integers(-3, 25), st.text(alphabet="abc", max_size=2), st.tuples(st.integers(0, 3))
)


@st.composite
def lsets(draw, elements=small_values, cls=lset):
    """lset values in both representations (frozenset-built and trie-grown)."""
    chunks = draw(st.lists(st.frozensets(elements, max_size=6), max_size=5))
    value = cls()
    for c in chunks:
        value = value.merge(cls(c))
    if draw(st.booleans()):
        value._as_trie()  # same value, persistent representation
    return value


lpsets = lsets(elements=st.one_of(st.integers(0, 40), st.floats(0, 10)), cls=lpset)


def grown(n: int, step: int = 1) -> lset:
    """A large value grown by small merges (trie-backed)."""
    v = lset(range(n))
    return v.merge(lset([n + step]))


# -- construction -----------------------------------------------------------------------------


class TestConstruction:
    def test_bottom(self):
        assert lset() == lset.bottom() == lset([]) == lset(set())
        assert lset().reveal() == frozenset()
        assert lset().is_bottom() and not lset([1]).is_bottom()

    def test_from_iterables(self):
        assert lset([1, 2, 2]).reveal() == frozenset({1, 2})
        assert lset(x for x in range(3)) == lset({0, 1, 2})
        assert lset({"a": 1}) == lset(["a"])  # like frozenset(dict): the keys

    def test_from_lset_copies_value(self):
        assert lset(lset([1, 2])) == lset([1, 2])
        assert lset(lpset([1, 2])) == lset([1, 2])

    def test_unhashables_are_frozen(self):
        v = lset([[1, 2], {3}, {"k": [4]}])
        assert (1, 2) in v and [1, 2] in v
        assert frozenset({3}) in v
        assert {"k": [4]} in v and {"k": (4,)} in v
        assert lset([[1, 2]]) == lset([(1, 2)])
        assert v.contains([1, 2]) == lbool(True)

    def test_generator_with_unhashables_is_not_lost(self):
        assert lset(x for x in [[1], [2]]) == lset([(1,), (2,)])

    def test_namedtuple_fields_are_frozen(self):
        P = namedtuple("P", "a b")
        v = lset([P([1], 2)])
        (elem,) = v
        assert type(elem) is P and elem == P((1,), 2)

    @pytest.mark.parametrize("bad", [None, "abc", b"xy", 5])
    def test_rejects_non_collections(self, bad):
        with pytest.raises(LatticeValueError) as e:
            lset(bad)
        assert e.value.lattice == "lset" and e.value.value == bad

    def test_rejects_lattice_elements(self):
        with pytest.raises(LatticeValueError, match="lmap") as e:
            lset([lmax(1)])
        assert e.value.value == lmax(1)

    def test_rejects_unfreezable(self):
        class Unhashable:
            __hash__ = None

        with pytest.raises(LatticeValueError, match="Unhashable"):
            lset([Unhashable()])

    def test_contains_unfreezable_is_false(self):
        class Unhashable:
            __hash__ = None

        assert Unhashable() not in lset([1])


class TestLpset:
    @pytest.mark.parametrize("bad", [-1, "a", True, float("nan"), -0.5, 1j, None])
    def test_rejects(self, bad):
        with pytest.raises(LatticeValueError) as e:
            lpset([bad])
        assert e.value.lattice == "lpset"
        assert e.value.value is bad or e.value.value == bad
        assert "lpset" in str(e.value)

    def test_sum_and_size(self):
        assert lpset([1, 2, 2, 3.5]).sum() == lmax(6.5)
        assert lpset().sum() == lmax(0)
        assert lpset([0]).size() == lmax(1)

    def test_sum_of_floats_is_correctly_rounded(self):
        assert lpset([0.1, 0.2, 0.3, 1e16]).sum() == lmax(math.fsum([0.1, 0.2, 0.3, 1e16]))
        assert lpset([2**70, 1]).sum() == lmax(2**70 + 1)  # ints stay exact

    def test_sum_is_distinct(self):
        assert lpset([2, 2]).sum() == lmax(2)

    def test_methods_keep_class(self):
        p = lpset([1, 2, 3])
        assert type(p.merge(lpset([4]))) is lpset
        assert type(p.intersect(lpset([2]))) is lpset
        assert p.project(lambda x: x * 2) == lpset([2, 4, 6])
        assert type(p.product(lpset([1]))) is lset

    def test_project_validates(self):
        with pytest.raises(LatticeValueError, match="non-negative"):
            lpset([1]).project(lambda x: -x)

    def test_not_mergeable_with_lset(self):
        with pytest.raises(LatticeTypeError, match="lpset"):
            lpset([1]).merge(lset([1]))

    def test_from_item_and_builder_validate(self):
        assert lpset.from_item(3) == lpset([3])
        with pytest.raises(LatticeValueError):
            lpset.from_item(-3)
        b = lpset.builder()
        b.add(1)
        with pytest.raises(LatticeValueError):
            b.add(-1)
        assert b.freeze() == lpset([1])

    def test_repr_round_trip(self):
        assert repr(lpset([2, 1])) == "lpset({1, 2})"
        assert eval(repr(lpset([2, 1]))) == lpset([1, 2])

    def test_builder_from_lpset_validates(self):
        with pytest.raises(LatticeValueError):
            lpset(lset([-1]))


# -- merge and structural sharing -------------------------------------------------------------


class TestMerge:
    def test_union(self):
        assert lset([1, 2]).merge(lset([2, 3])) == lset([1, 2, 3])
        assert lset([1]) | lset([2]) == lset([1, 2])

    def test_big_contains_small_returns_big(self):
        big = lset(range(100))
        assert big.merge(lset([3, 4])) is big
        assert lset([3, 4]).merge(big) is big
        assert big.merge(lset()) is big and lset().merge(big) is big
        assert big.merge(big) is big

    def test_bulk_superset_returns_big(self):
        big = lset(range(10))
        assert big.merge(lset(range(5))) is big

    def test_small_delta_goes_to_trie_and_shares(self):
        big = lset(range(1000))
        grown_ = big.merge(lset([5000]))
        assert len(grown_) == 1001 and 5000 in grown_ and 5000 not in big
        assert big == lset(range(1000))  # the input is unchanged
        again = grown_.merge(lset([6000]))
        assert grown_.merge(lset([5000, 1])) is grown_
        assert again == lset([*range(1000), 5000, 6000])

    def test_trie_and_frozenset_values_compare_and_hash_equal(self):
        a = grown(500)
        b = lset(a.reveal())
        assert type(a._v) is not type(b._v)
        assert a == b and hash(a) == hash(b)
        assert {a: 1}[b] == 1

    def test_bulk_merge_of_trie_values(self):
        a, b = grown(200), grown(300, 7)
        assert a.merge(b) == lset(a.reveal() | b.reveal())

    def test_merge_type_error(self):
        with pytest.raises(LatticeTypeError, match="lset"):
            lset([1]).merge(lmax(1))

    def test_order(self):
        a, b = lset([1]), lset([1, 2])
        assert a <= b and a < b and b >= a and b > a
        assert not (b <= a) and not (a < a) and a <= a
        c = lset([3])
        assert not (a <= c) and not (c <= a) and not (a >= c)
        with pytest.raises(LatticeTypeError):
            _ = a <= lmax(1)

    def test_order_on_large_trie(self):
        big = grown(1000)
        assert lset([1, 2]) <= big and not (lset([-5]) <= big)
        assert big >= lset([1]) and big > lset([1])


# -- morphisms and monotone functions -----------------------------------------------------------


class TestMethods:
    def test_kinds(self):
        for name in ("intersect", "product", "project", "contains", "eqjoin", "merge"):
            assert kind_of(lset, name) == "morph", name
        assert kind_of(lset, "size") == "monotone"
        assert kind_of(lset, "group_count") == "monotone"
        assert kind_of(lpset, "sum") == "monotone"
        assert kind_of(lset, "reveal") == "nonmonotone"

    def test_intersect(self):
        assert lset([1, 2, 3]).intersect(lset([2, 3, 4])) == lset([2, 3])
        assert grown(100).intersect(lset([1, 2, -9])) == lset([1, 2])
        with pytest.raises(LatticeTypeError):
            lset([1]).intersect(lmax(1))

    def test_product(self):
        assert lset([1, 2]).product(lset(["a"])) == lset([(1, "a"), (2, "a")])
        assert lset([1]).product(lset()) == lset()
        with pytest.raises(LatticeTypeError):
            lset([1]).product([1])

    def test_project(self):
        assert lset([1, 2, 3]).project(lambda x: x % 2) == lset([0, 1])
        assert lset([1, 2, 3]).project(lambda x: x if x > 1 else None) == lset([2, 3])
        assert lset([1]).project(lambda x: [x, x]) == lset([(1, 1)])
        with pytest.raises(LatticeValueError):
            lset([1]).project(lambda x: lmax(x))

    def test_contains_and_size(self):
        assert lset([1]).contains(1) == lbool(True)
        assert lset([1]).contains(2) == lbool(False)
        assert lset([1, 2]).size() == lmax(2) and lset().size() == lmax(0)

    def test_eqjoin_pairs_without_predicate(self):
        assert lset([1, 2]).eqjoin(lset(["x"])) == lset([(1, "x"), (2, "x")])

    def test_eqjoin_on_positions_and_fn(self):
        left = lset([("a", 1), ("b", 2)])
        right = lset([(1, "one"), (3, "three")])
        assert left.eqjoin(right, {1: 0}) == lset([(("a", 1), (1, "one"))])
        joined = left.eqjoin(right, {1: 0}, lambda a, b: (a[0], b[1]))
        assert joined == lset([("a", "one")])
        assert left.eqjoin(right, {1: 0}, lambda a, b: None) == lset()

    def test_eqjoin_on_named_fields(self):
        Emp = namedtuple("Emp", "name dept")
        Dept = namedtuple("Dept", "dept floor")
        emps = lset([Emp("ann", "x"), Emp("bob", "y")])
        depts = lset([Dept("x", 3)])
        assert emps.eqjoin(depts, "dept", lambda e, d: (e.name, d.floor)) == lset([("ann", 3)])
        assert emps.eqjoin(depts, ["dept"], lambda e, d: e.name) == lset(["ann"])
        dicts = lset([{"dept": "x"}])
        assert dicts.eqjoin(depts, {"dept": "dept"}, lambda a, b: b.floor) == lset([3])

    def test_eqjoin_errors(self):
        with pytest.raises(LatticeValueError, match="no column at position 5"):
            lset([(1,)]).eqjoin(lset([(1,)]), {5: 0})
        with pytest.raises(LatticeValueError, match="no field 'zz'"):
            lset([(1,)]).eqjoin(lset([(1,)]), "zz")
        with pytest.raises(TypeError, match="column"):
            lset([(1,)]).eqjoin(lset([(1,)]), {1.5: 0})
        with pytest.raises(LatticeTypeError):
            lset([1]).eqjoin(lmax(1))

    def test_group_count(self):
        rows = lset([("a", 1), ("a", 2), ("b", 1)])
        assert rows.group_count([0]) == lmap({("a",): lmax(2), ("b",): lmax(1)})
        assert rows.group_count(1) == lmap({(1,): lmax(2), (2,): lmax(1)})
        assert rows.group_count([]) == lmap({(): lmax(3)})
        assert lset().group_count([0]) == lmap()
        with pytest.raises(LatticeValueError, match="position 3"):
            rows.group_count([3])
        with pytest.raises(TypeError):
            rows.group_count(None)

    def test_python_conveniences(self):
        v = lset([1, 2])
        assert sorted(v) == [1, 2] and len(v) == 2 and 1 in v and 3 not in v
        g = grown(50)
        assert len(list(g)) == len(g) == 51


# -- value semantics --------------------------------------------------------------------------


class TestValueSemantics:
    @pytest.mark.parametrize(
        "value", [lset(), lset({1, 2}), lset({"a", (1, "b")}), lset([1, "x"]), lpset([0.5, 2])]
    )
    def test_repr_round_trip(self, value):
        assert eval(repr(value)) == value

    def test_repr_text(self):
        assert repr(lset({2, 1})) == "lset({1, 2})"
        assert repr(lset()) == "lset()"

    def test_pickle_both_representations(self):
        for v in (lset([1, 2]), grown(100), lpset([1.5])):
            w = pickle.loads(pickle.dumps(v))
            assert w == v and type(w) is type(v) and hash(w) == hash(v)

    def test_hash_and_immutability(self):
        assert hash(lset([1, 2])) == hash(lset([2, 1]))
        assert lset([1]) != lpset([1])
        with pytest.raises(AttributeError):
            lset([1]).x = 1  # type: ignore[attr-defined]

    def test_not_equal_to_plain_sets(self):
        assert lset([1]) != frozenset([1])


# -- folding and builders -----------------------------------------------------------------------


class TestBuilder:
    def test_from_item(self):
        assert lset.from_item(3) == lset([3])
        assert lset.from_item([1, 2]) == lset([(1, 2)])
        v = lset([1])
        assert lset.from_item(v) is v
        with pytest.raises(LatticeValueError):
            lset.from_item(lmax(1))

    def test_fold(self):
        assert lset.fold([1, 2, lset([3]), [4]]) == lset([1, 2, 3, (4,)])

    def test_builder_add_merge_freeze(self):
        b = lset.builder()
        for i in range(5):
            b.add(i)
        b.merge(lset([10]))
        first = b.freeze()
        assert first == lset([0, 1, 2, 3, 4, 10])
        assert b.freeze() is first
        b.add(99)
        assert b.freeze() == first | lset([99]) and first == lset([0, 1, 2, 3, 4, 10])

    def test_builder_from_initial_shares(self):
        base = lset(range(1000))
        b = lset.builder(base)
        assert b.freeze() is base
        b.add(3)
        assert b.freeze() is base  # nothing new
        b.add(5000)
        assert b.freeze() == base | lset([5000])

    def test_builder_merge_builder_and_pickle(self):
        b1, b2 = lset.builder(), lset.builder()
        b1.add(1)
        b2.add(2)
        b2.merge(lset(range(10, 20)))
        b3 = pickle.loads(pickle.dumps(b2))
        b1.merge_builder(b3)
        assert b1.freeze() == lset([1, 2, *range(10, 20)])
        assert b1.merge_builder(b1) is b1

    def test_builder_errors(self):
        b = lset.builder()
        with pytest.raises(LatticeTypeError):
            b.merge(lpset([1]))
        with pytest.raises(LatticeValueError):
            b.add(lmax(1))
        with pytest.raises(LatticeTypeError):
            lset.builder(lpset([1]))
        assert b.freeze() == lset()

    def test_builder_lattice_property(self):
        assert lset.builder().lattice is lset

    def test_builder_of_singletons_freezes_in_bulk(self):
        # merge_by_key's shape: the first singleton becomes the value, the rest accumulate;
        # freezing must not turn the accumulated frozenset into a trie for one old element
        b = lset.builder()
        for i in range(200):
            b.merge(lset.from_item(i))
        v = b.freeze()
        assert v == lset(range(200)) and type(v._v) is frozenset
        # a small value with new elements that were all there already is kept as it is
        small = lset([1, 2])
        b = lset.builder(small)
        b.add(2)
        b.add(1)
        assert b.freeze() is small
        b.add(3)
        b.add(4)
        assert b.freeze() == lset([1, 2, 3, 4]) and small == lset([1, 2])


# -- laws as properties ---------------------------------------------------------------------------


@given(lsets(), lsets(), lsets())
def test_merge_is_a_join(a, b, c):
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    assert a.merge(b) == b.merge(a)
    assert a.merge(a) == a
    assert a.merge(lset()) == a
    assert a.merge(b).reveal() == a.reveal() | b.reveal()
    assert (a <= b) == (a.merge(b) == b)
    assert a <= a.merge(b) and b <= a.merge(b)


@given(lsets(), lsets())
def test_merge_does_not_mutate_inputs(a, b):
    ra, rb = a.reveal(), b.reveal()
    a.merge(b)
    assert a.reveal() == ra and b.reveal() == rb


@given(lsets(), lsets())
def test_equality_agrees_with_revealed_sets(a, b):
    assert (a == b) == (a.reveal() == b.reveal())
    if a == b:
        assert hash(a) == hash(b)


@given(lsets(), lsets(), lsets())
def test_morphisms_distribute(a, b, c):
    ab = a.merge(b)
    assert ab.intersect(c) == a.intersect(c).merge(b.intersect(c))
    assert ab.product(c) == a.product(c).merge(b.product(c))
    assert ab.eqjoin(c) == a.eqjoin(c).merge(b.eqjoin(c))
    f = lambda x: None if x == 0 else (x, 1)  # noqa: E731
    assert ab.project(f) == a.project(f).merge(b.project(f))
    for v in (0, "a", (1,)):
        assert ab.contains(v) == a.contains(v).merge(b.contains(v))


@given(lsets(elements=st.tuples(st.integers(0, 3), st.integers(0, 3))), lsets())
def test_eqjoin_on_column_distributes(a, c):
    c = c.project(lambda x: (x, x) if isinstance(x, int) else None)
    halves = (
        a.project(lambda r: r if r[0] % 2 else None),
        a.project(lambda r: r if r[0] % 2 == 0 else None),
    )
    whole = a.eqjoin(c, {1: 0})
    assert whole == halves[0].eqjoin(c, {1: 0}).merge(halves[1].eqjoin(c, {1: 0}))


@given(lsets(elements=st.tuples(st.integers(0, 3), st.integers(0, 3))), st.data())
def test_monotone_functions_preserve_order(a, data):
    b = a.merge(data.draw(lsets(elements=st.tuples(st.integers(0, 3), st.integers(0, 3)))))
    assert a <= b
    assert a.size() <= b.size()
    assert a.group_count([0]) <= b.group_count([0])


@given(lpsets, lpsets)
def test_lpset_sum_is_monotone(a, b):
    assert a.sum() <= a.merge(b).sum()
    assert a.merge(b).merge(a) == a.merge(b)


@given(st.lists(st.one_of(small_values, st.lists(st.integers(0, 3), max_size=2)), max_size=30))
def test_builder_agrees_with_fold_of_merges(items):
    expected = lset()
    for x in items:
        expected = expected.merge(lset.from_item(x))
    b = lset.builder()
    for x in items:
        b.add(x)
    assert b.freeze() == expected == lset.fold(items)


def test_trie_survives_mixed_types_with_equal_hashes():
    # rpds-py panics when a colliding element's __eq__ returns NotImplemented ("" vs 0,
    # 1 vs 1.0); lset boxes trie entries so these behave exactly as in a frozenset.
    big = lset(range(100)).merge(lset([""]))
    assert type(big._v) is not frozenset
    assert "" in big and 0 in big and 1.0 in big and 100 not in big
    assert big.merge(lset([1.0])) is big
    assert len(big.merge(lset([2.5, ()]))) == 103
    assert big == lset([*range(100), ""])


def test_registered_by_wrapper_name():
    from blooml import lattice_class

    for cls in (lset, lpset, lbag, lmap):
        assert lattice_class(cls.wrapper_name) is cls


def test_docstring_examples_of_the_collection_modules():
    import doctest

    import blooml.lattices.bag
    import blooml.lattices.map
    import blooml.lattices.sets

    for module in (blooml.lattices.sets, blooml.lattices.bag, blooml.lattices.map):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize(
    ("cls", "item"), [(lset, 1), (lpset, 1), (lbag, "x"), (lmap, ("k", lmax(1)))]
)
def test_builder_copies_are_independent(cls, item):
    # PySpark deep-copies (or unpickles) aggregateByKey's zero value once per key: the copies
    # must not share their mutable buffer.
    import copy

    zero = cls.builder()
    a, b = copy.deepcopy(zero), pickle.loads(pickle.dumps(zero))
    a.add(item)
    assert b.freeze() == cls() and zero.freeze() == cls()
    assert a.freeze() == cls.from_item(item)


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=3),
        st.binary(max_size=3),
        st.booleans(),
        st.none(),
        st.complex_numbers(allow_nan=False),
    )
)
def test_from_item_fast_path_equals_the_constructor(x):
    assert lset.from_item(x) == lset([x])
    assert hash(lset.from_item(x)) == hash(lset([x]))
    b = lset.builder()
    for v in (lset.from_item(x), lset([x, "other"]), lset.from_item(x)):
        b.merge(v)
    assert b.freeze() == lset([x, "other"])
