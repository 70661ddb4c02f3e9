"""LatticeLaws: the law checker as a pytest base class, one test per law and per method."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import ClassVar

import pytest
from hypothesis import strategies as st

from blooml import Lattice, lbool, lmax, monotone, morph
from blooml.testing import LatticeLaws, LawCheckError, LawViolation


class Longest(Lattice):
    wrapper_name = "llongest_ll"

    def __init__(self, value: str = ""):
        super().__init__(value)

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        return self if (len(a), a) >= (len(b), b) else other

    @monotone
    def length(self) -> lmax:
        return lmax(len(self.reveal()))

    @morph
    def longer_than(self, n: int) -> lbool:
        return lbool(len(self.reveal()) > n)


class TestLongestLaws(LatticeLaws):
    """Collected and run by this suite: the base class in action."""

    lattice = Longest
    elements = st.text(alphabet="ab", max_size=4).map(Longest)
    args: ClassVar[dict] = {"longer_than": st.integers(0, 5)}
    max_examples = 25


def test_subclass_attributes_and_collection_flags():
    assert LatticeLaws.__test__ is False
    assert TestLongestLaws.__test__ is True

    class Intermediate(LatticeLaws):
        args: ClassVar[dict] = {"x": st.just(1)}

    assert Intermediate.__test__ is False  # no lattice: a base for others, not collected

    class Concrete(Intermediate):
        lattice = Longest

    assert Concrete.__test__ is True


def test_a_violation_is_raised_from_the_law_test():
    class Liar(Longest):
        wrapper_name = "lliar_ll"

        @morph
        def length(self) -> lmax:  # a morphism here, in fact (max of lengths)...
            return lmax(len(self.reveal()))

        @monotone
        def shorter_than_three(self) -> lbool:  # ...but this is not monotone
            return lbool(len(self.reveal()) < 3)

    class TestLiar(LatticeLaws):
        lattice = Liar
        elements = st.text(alphabet="ab", max_size=4).map(Liar)
        args: ClassVar[dict] = {"longer_than": st.integers(0, 5)}
        max_examples = 25
        seed = 1  # pinned: the violation must be found within 25 examples

    TestLiar().test_morphisms("length")  # holds
    with pytest.raises(LawViolation) as info:
        TestLiar().test_monotones("shorter_than_three")
    assert (info.value.law, info.value.method) == ("monotone", "shorter_than_three")


def test_missing_args_fail_only_the_test_of_that_method():
    class TestNoArgs(LatticeLaws):
        lattice = Longest
        elements = st.text(alphabet="ab", max_size=4).map(Longest)
        args: ClassVar[dict] = {"longer_than": None}
        max_examples = 5

    TestNoArgs().test_associative()
    with pytest.raises(pytest.skip.Exception, match="knowingly not checked"):
        TestNoArgs().test_morphisms("longer_than")


MODULE = textwrap.dedent(
    """
    from hypothesis import strategies as st
    from blooml import Lattice, lmax, monotone, morph
    from blooml.testing import LatticeLaws


    class GSet(Lattice):
        wrapper_name = "lgset_sub"

        def __init__(self, items=frozenset()):
            super().__init__(frozenset(items))

        def merge(self, other):
            return GSet(self.reveal() | other.reveal())

        @morph
        def size(self) -> lmax:  # wrong: size is monotone, not a morphism
            return lmax(len(self.reveal()))

        @morph
        def top(self) -> lmax:
            return lmax(max(self.reveal())) if self.reveal() else lmax()


    class Plain(Lattice):
        wrapper_name = "lplain_sub"

        def __init__(self, v: int = 0):
            super().__init__(v)

        def merge(self, other):
            return self if self.reveal() >= other.reveal() else other


    class TestGSet(LatticeLaws):
        lattice = GSet
        elements = st.frozensets(st.integers(0, 5), max_size=4).map(GSet)
        max_examples = 20


    class TestPlain(LatticeLaws):
        lattice = Plain
        elements = st.integers(0, 5).map(Plain)
        max_examples = 20
    """
)


def test_collected_by_pytest_one_test_per_law_and_method(tmp_path):
    test_file = tmp_path / "test_user_laws.py"
    test_file.write_text(MODULE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(test_file),
            "-v",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "LatticeLaws::" not in out  # the imported base class is not collected
    for law in (
        "associative",
        "commutative",
        "idempotent",
        "bottom_identity",
        "order_agrees",
        "hash_agrees",
        "no_mutation",
    ):
        assert f"TestGSet::test_{law} PASSED" in out
        assert f"TestPlain::test_{law} PASSED" in out
    assert "TestGSet::test_morphisms[size] FAILED" in out
    assert "TestGSet::test_morphisms[top] PASSED" in out
    assert "TestGSet::test_monotones[none] SKIPPED" in out
    assert "TestPlain::test_morphisms[none] SKIPPED" in out
    assert "GSet.size violates the morphism law" in out
    assert "1 failed, 15 passed, 3 skipped" in out


def test_a_setup_error_in_a_method_test_is_clear():
    class TestUnderivable(LatticeLaws):
        lattice = Longest
        elements = st.text(alphabet="ab", max_size=4).map(Longest)
        max_examples = 5

    TestUnderivable().test_morphisms("longer_than")  # int hint: derived
    TestUnderivable().test_commutative()

    class Opaque(Longest):
        wrapper_name = "lopaque_ll"

        @morph
        def pick(self, x) -> lbool:
            return lbool(bool(x))

    class TestOpaque(LatticeLaws):
        lattice = Opaque
        elements = st.text(alphabet="ab", max_size=4).map(Opaque)
        max_examples = 5

    with pytest.raises(LawCheckError, match=r"Opaque.pick\(x\): parameter 'x' has no type hint"):
        TestOpaque().test_morphisms("pick")
    TestOpaque().test_idempotent()  # the merge laws do not need the method's arguments
