"""The law checker does not pass a wrong mark quietly: method arguments are also drawn from the
values under test, a deterministic edge pass always tries ⊥, equal values and incomparable
pairs, and a warning says when a method's arguments came only from a bare type hint."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import strategies as st

from blooml import Lattice, LatticeValueError, lbool, lmax, monotone, morph
from blooml.testing import LawCheckWarning, LawViolation, check_laws, register


class Hull(Lattice):
    """The interval hull [lo, hi] of the ints seen; ⊥ is the empty hull."""

    wrapper_name = "lhull_i11"

    def __init__(self, lo: int | None = None, hi: int | None = None) -> None:
        if lo is None and hi is None:
            super().__init__(None)
            return
        if lo is None or hi is None or lo > hi:
            raise LatticeValueError("lhull_i11", (lo, hi), "expected lo <= hi, or no bounds")
        super().__init__((lo, hi))

    def merge(self, other: Hull) -> Hull:
        a, b = self.reveal(), other.reveal()
        if b is None:
            return self
        if a is None:
            return other
        return type(self)(min(a[0], b[0]), max(a[1], b[1]))

    @morph  # wrong: only monotone (a point between two hulls is covered by their merge only)
    def covers(self, x: int) -> lbool:
        v = self.reveal()
        return lbool(v is not None and v[0] <= x <= v[1])

    @morph
    def top(self) -> lmax:
        v = self.reveal()
        return lmax() if v is None else lmax(v[1])


def _hulls(lo: int = -1000, hi: int = 1000) -> st.SearchStrategy[Hull]:
    ends = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(sorted)
    return st.just(Hull()) | ends.map(lambda t: Hull(t[0], t[1]))


register(Hull, _hulls())


@pytest.mark.parametrize("seed", range(5))
def test_wrong_morph_on_hull_covers_fails_without_args(seed):
    with pytest.raises(LawViolation) as info:
        check_laws(Hull, max_examples=200, seed=seed, edge=False)
    assert (info.value.law, info.value.method) == ("morphism", "covers")


def test_wrong_morph_fails_with_few_examples_thanks_to_values_under_test():
    with pytest.raises(LawViolation) as info:
        check_laws(Hull, max_examples=50, seed=0, edge=False)  # pinned: found within 50
    assert info.value.method == "covers"


def test_right_marks_on_hull_pass():
    class GoodHull(Hull):
        wrapper_name = "lgoodhull_i11"

        @monotone
        def covers(self, x: int) -> lbool:
            return super().covers(x)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # args are drawn from the values too: no warning
        report = check_laws(GoodHull, _hulls().map(lambda h: GoodHull(*(h.reveal() or ()))))
    assert "monotone covers" in report.checked


class Tagged(Lattice):
    """Max of ints; a method taking a str no value holds: arguments come only from the hint."""

    wrapper_name = "ltagged_i11"

    def __init__(self, n: int = 0) -> None:
        super().__init__(n)

    def merge(self, other: Tagged) -> Tagged:
        return self if self.reveal() >= other.reveal() else other

    @monotone
    def labelled(self, tag: str) -> lmax:
        return lmax(self.reveal() + len(tag))


def test_warning_when_arguments_come_only_from_a_bare_type_hint():
    strat = st.integers(0, 5).map(Tagged)
    with pytest.warns(LawCheckWarning, match=r"Tagged\.labelled.*'tag'.*type hint str"):
        check_laws(Tagged, strat, max_examples=10, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_laws(Tagged, strat, args={"labelled": st.text(max_size=2)}, max_examples=10)


class ByParity(Lattice):
    """Wrong merge: keeps the left operand unless the right one is larger and even.
    Random pairs rarely expose it at few examples; the edge pass always does (equal values
    and ⊥ are tried first)."""

    wrapper_name = "lbyparity_i11"

    def __init__(self, n: int = 0) -> None:
        super().__init__(n)

    def merge(self, other: ByParity) -> ByParity:
        return self if self.reveal() >= other.reveal() or other.reveal() % 2 else other


def test_edge_mode_tries_bottom_equal_and_incomparable_pairs_deterministically():
    from blooml.testing._laws import Session

    session = Session(Hull, None, None, 5, 0)
    samples = session.edge_samples
    assert samples[0] == Hull()  # ⊥ first
    assert any(not (x <= y) and not (y <= x) for x in samples for y in samples)
    assert any(x < y for x in samples for y in samples)
    again = Session(Hull, None, None, 5, 99).edge_samples
    assert again == samples  # deterministic: independent of the seed
    pairs = session.edge_examples(session.find("commutative"))
    assert {"a": Hull(), "b": Hull()} in pairs
    assert any(ex["a"] == ex["b"] and ex["a"] is not ex["b"] for ex in pairs)


def test_edge_pass_finds_a_wrong_merge_that_one_random_example_misses():
    strat = st.integers(0, 50).map(ByParity)
    check_laws(ByParity, strat, max_examples=1, seed=0, edge=False)  # passes quietly
    with pytest.raises(LawViolation, match="found by the edge pass") as info:
        check_laws(ByParity, strat, max_examples=1, seed=0)
    assert info.value.law in ("commutative", "associative", "order_agrees")


HULL_MODULE = """
from hypothesis import strategies as st
from blooml import Lattice, lbool, morph
from blooml.testing import register


class Hull(Lattice):
    wrapper_name = "lhull_cli_{tag}"

    def __init__(self, lo=None, hi=None):
        super().__init__(None if lo is None else (lo, hi))

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        if a is None or b is None:
            return other if a is None else self
        return Hull(min(a[0], b[0]), max(a[1], b[1]))

    @morph
    def covers(self, x: int) -> lbool:
        v = self.reveal()
        return lbool(v is not None and v[0] <= x <= v[1])

    @morph
    def labelled(self, tag: str) -> lbool:
        return lbool(self.reveal() is not None and bool(tag))


ends = st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000)).map(sorted)
register(Hull, st.just(Hull()) | ends.map(lambda t: Hull(*t)))
"""


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_cli_fails_the_wrong_hull_mark_without_args_and_warns_on_bare_hints(
    tmp_path, monkeypatch, capsys, seed
):
    import sys

    from blooml.cli import main

    path = tmp_path / f"hull_cli_{seed}.py"
    path.write_text(HULL_MODULE.format(tag=seed))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check-laws", f"{path}:Hull", "--seed", seed]) == 1
    out = capsys.readouterr().out
    assert "FAIL  Hull: morphism covers" in out
    assert "PASS  Hull: morphism labelled" in out
    assert "WARN  Hull.labelled: the arguments 'tag' (type hint str) came only from" in out


def test_cli_help_says_where_arguments_come_from_and_that_it_tests(capsys):
    from blooml.cli import main

    try:
        code = main(["check-laws", "--help"])
    except SystemExit as exc:
        code = exc.code
    assert code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "The checker tests the laws on generated examples; it cannot prove them" in out
    assert "register(..., args=...)" in out
    assert "from the values under test" in out
    assert "--no-edge" in out
