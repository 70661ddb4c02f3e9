"""lbag: examples for every method and error, sharing, pickling, laws as properties."""

from __future__ import annotations

import pickle
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import LatticeTypeError, LatticeValueError, kind_of, lbag, lbool, lmax, lset

elements = st.one_of(st.integers(0, 8), st.sampled_from(["x", "y", ""]), st.just(1.0))
bags = st.dictionaries(elements, st.integers(1, 4), max_size=8).map(lbag)


class TestConstruction:
    def test_bottom(self):
        assert lbag() == lbag.bottom() == lbag({}) == lbag([])
        assert lbag().reveal() == {} and lbag().is_bottom()

    def test_from_iterable_counts_repeats(self):
        assert lbag(["x", "x", "y"]).reveal() == {"x": 2, "y": 1}
        assert lbag(iter([[1], [1]])).reveal() == {(1,): 2}

    def test_from_mapping(self):
        assert lbag({"x": 2}).reveal() == {"x": 2}
        assert lbag(Counter("aab")) == lbag({"a": 2, "b": 1})

    @pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
    def test_rejects_bad_multiplicities(self, bad):
        with pytest.raises(LatticeValueError, match="multiplicity of 'x'") as e:
            lbag({"x": bad})
        assert e.value.lattice == "lbag" and e.value.value is bad

    @pytest.mark.parametrize("bad", [None, "abc", 3])
    def test_rejects_bad_input(self, bad):
        with pytest.raises(LatticeValueError):
            lbag(bad)

    def test_rejects_lattice_elements(self):
        with pytest.raises(LatticeValueError):
            lbag([lmax(1)])
        with pytest.raises(LatticeValueError):
            lbag({lmax(1): 1})

    def test_unhashables_frozen(self):
        b = lbag([{"k": 1}, {"k": 1}])
        assert b.mult({"k": 1}) == lmax(2)


class TestMerge:
    def test_max_per_element(self):
        assert lbag({"x": 2, "y": 1}).merge(lbag({"x": 1, "y": 3, "z": 1})) == lbag(
            {"x": 2, "y": 3, "z": 1}
        )

    def test_sharing(self):
        big = lbag({i: 2 for i in range(100)})
        assert big.merge(lbag({3: 1})) is big
        assert lbag({3: 2}).merge(big) is big
        assert big.merge(big) is big and big.merge(lbag()) is big
        grown = big.merge(lbag({3: 5}))
        assert grown.mult(3) == lmax(5) and big.mult(3) == lmax(2)

    def test_type_error(self):
        with pytest.raises(LatticeTypeError):
            lbag().merge(lset())

    def test_order(self):
        a, b = lbag({"x": 1}), lbag({"x": 2, "y": 1})
        assert a <= b and a < b and b >= a and b > a and not (b <= a)
        assert not (lbag({"z": 1}) <= b) and not (lbag({"x": 3}) <= b)
        assert a <= a and not (a < a)


class TestMethods:
    def test_kinds(self):
        for name in ("intersect", "project", "mult", "contains", "__add__", "merge"):
            assert kind_of(lbag, name) == "morph", name
        assert kind_of(lbag, "size") == "monotone"

    def test_intersect(self):
        a = lbag({"x": 3, "y": 1})
        assert a.intersect(lbag({"x": 2, "z": 5})) == lbag({"x": 2})
        with pytest.raises(LatticeTypeError):
            a.intersect(lset())

    def test_project_keeps_largest_multiplicity(self):
        b = lbag({1: 2, 2: 3, 3: 1})
        assert b.project(lambda x: x % 2) == lbag({1: 2, 0: 3})
        assert b.project(lambda x: None if x == 2 else x) == lbag({1: 2, 3: 1})
        with pytest.raises(LatticeValueError):
            b.project(lmax)

    def test_mult_contains_size(self):
        b = lbag({"x": 2, "y": 1})
        assert b.mult("x") == lmax(2) and b.mult("q") == lmax(0)
        assert b.contains("y") == lbool(True) and b.contains("q") == lbool(False)
        assert b.size() == lmax(3) and lbag().size() == lmax(0)

    def test_add(self):
        a = lbag({"x": 2, "y": 1})
        assert a + lbag({"x": 1, "z": 4}) == lbag({"x": 3, "y": 1, "z": 4})
        assert a + lbag() is a and lbag() + a is a
        with pytest.raises(TypeError):
            _ = a + 1

    def test_add_is_not_a_morphism_in_both_operands(self):
        # The documented finding: merge is max, so summing both merged operands differs.
        x, e = lbag({"x": 1}), lbag()
        assert (x | e) + (e | x) == lbag({"x": 2})
        assert (x + e) | (e + x) == lbag({"x": 1})

    def test_python_conveniences(self):
        b = lbag({"x": 2, "y": 1})
        assert sorted(b) == ["x", "y"] and len(b) == 2 and "x" in b and "q" not in b


class TestValueSemantics:
    @pytest.mark.parametrize("value", [lbag(), lbag({"x": 2}), lbag({1: 1, "a": 3, (1, "b"): 2})])
    def test_repr_round_trip_and_pickle(self, value):
        assert eval(repr(value)) == value
        w = pickle.loads(pickle.dumps(value))
        assert w == value and hash(w) == hash(value)

    def test_repr_text(self):
        assert repr(lbag({"y": 1, "x": 2})) == "lbag({'x': 2, 'y': 1})"


class TestBuilder:
    def test_from_item_and_fold(self):
        assert lbag.from_item("x") == lbag({"x": 1})
        b = lbag({"x": 2})
        assert lbag.from_item(b) is b
        with pytest.raises(LatticeValueError):
            lbag.from_item(lmax(1))
        # merge is max: folding repeated rows does not count them
        assert lbag.fold(["x", "x", lbag({"y": 2})]) == lbag({"x": 1, "y": 2})

    def test_builder(self):
        b = lbag.builder()
        b.add("x").add("x").add([1])
        b.merge(lbag({"x": 3}))
        first = b.freeze()
        assert first == lbag({"x": 3, (1,): 1})
        assert b.freeze() is first
        b.add("x")
        assert b.freeze() is first

    def test_builder_initial_merge_builder_pickle(self):
        base = lbag({i: 1 for i in range(100)})
        b1 = lbag.builder(base)
        b1.add(1000)
        b2 = lbag.builder()
        b2.merge(lbag({5: 7}))
        b2.add("q")
        b1.merge_builder(pickle.loads(pickle.dumps(b2)))
        out = b1.freeze()
        assert out.mult(5) == lmax(7) and out.mult(1000) == lmax(1) and "q" in out
        assert base.mult(5) == lmax(1)

    def test_builder_errors(self):
        b = lbag.builder()
        with pytest.raises(LatticeValueError):
            b.add(lmax(1))
        with pytest.raises(LatticeTypeError):
            b.merge(lset())
        assert b.freeze() == lbag()


# -- laws as properties ---------------------------------------------------------------------------


@given(bags, bags, bags)
def test_merge_is_a_join(a, b, c):
    assert a.merge(b).merge(c) == a.merge(b.merge(c))
    assert a.merge(b) == b.merge(a)
    assert a.merge(a) == a and a.merge(lbag()) == a
    assert (a <= b) == (a.merge(b) == b)
    if a == b:
        assert hash(a) == hash(b)


@given(bags, bags, bags, elements)
def test_morphisms_distribute(a, b, c, v):
    ab = a.merge(b)
    assert ab.intersect(c) == a.intersect(c).merge(b.intersect(c))
    assert ab + c == (a + c).merge(b + c)  # + is a morphism in self for a fixed argument
    f = lambda x: None if x == 0 else str(x)[:1]  # noqa: E731
    assert ab.project(f) == a.project(f).merge(b.project(f))
    assert ab.mult(v) == a.mult(v).merge(b.mult(v))
    assert ab.contains(v) == a.contains(v).merge(b.contains(v))


@given(bags, bags, bags)
def test_monotone_functions_preserve_order(a, b, c):
    ab = a.merge(b)
    assert a.size() <= ab.size()
    assert a + c <= ab + c and c + a <= c + ab  # + is monotone in both operands


@given(st.lists(st.one_of(elements, st.lists(st.integers(0, 2), max_size=2)), max_size=25))
def test_builder_agrees_with_merges(items):
    expected = lbag()
    for x in items:
        expected = expected.merge(lbag.from_item(x))
    assert lbag.fold(items) == expected
