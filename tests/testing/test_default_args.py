"""check_laws(Cls) needs no args for blooml's own lattices, and users can register defaults."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

import blooml
from blooml import Lattice, lbool, lmax, morph
from blooml.testing import LawCheckError, LawViolation, check_laws, register
from blooml.testing._strategies import default_args

OWN = [
    blooml.lmax,
    blooml.lmin,
    blooml.lbool,
    blooml.lset,
    blooml.lpset,
    blooml.lbag,
    blooml.lmap,
    blooml.lpair,
    blooml.ldompair,
    blooml.llww,
    blooml.lvclock,
    blooml.lgcounter,
    blooml.lpncounter,
    blooml.lmvreg,
    blooml.lorset,
    blooml.l2pset,
]


@pytest.mark.parametrize("cls", OWN, ids=lambda c: c.__name__)
def test_own_lattices_need_no_args(cls):
    report = check_laws(cls, max_examples=15)
    checked = {label.split(" ", 1)[1] for label in report.checked if " " in label}
    skipped = {name for name, _ in report.skipped}
    # every claim is either checked here or knowingly skipped (and checked in test_laws_builtins)
    assert (cls.morphisms() | cls.monotones()) - {"merge"} <= checked | skipped


class Threshold(Lattice):
    """A user lattice whose morph takes an argument no type hint can describe."""

    wrapper_name = "lthreshold_test"

    def __init__(self, value: int = 0):
        super().__init__(value)

    def merge(self, other):
        return self if self.reveal() >= other.reveal() else other

    @morph
    def above(self, n) -> lbool:
        return lbool(self.reveal() > n)


class BrokenThreshold(Threshold):
    wrapper_name = "lbroken_threshold_test"

    @morph
    def above(self, n) -> lbool:  # wrong: not even monotone
        return lbool(self.reveal() < n)


def test_registered_args_are_used_and_overridable():
    values = st.integers(0, 9).map(Threshold)
    register(Threshold, values)
    with pytest.raises(LawCheckError, match="above"):
        check_laws(Threshold, max_examples=5)
    register(Threshold, values, args={"above": st.integers(0, 9)})
    assert default_args(Threshold) == {"above": default_args(Threshold)["above"]}
    check_laws(Threshold, max_examples=20)
    report = check_laws(Threshold, args={"above": None}, max_examples=5)
    assert ("above", "args['above'] is None") in report.skipped


def test_registered_args_find_a_broken_morph():
    register(
        BrokenThreshold, st.integers(0, 9).map(BrokenThreshold), args={"above": st.integers(0, 9)}
    )
    with pytest.raises(LawViolation) as exc:
        check_laws(BrokenThreshold, max_examples=100, seed=1)  # pinned: found within 100
    assert exc.value.method == "above"


def test_defaults_do_not_apply_to_custom_elements():
    # numeric defaults would be wrong for an lmax of strings: the caller must say
    with pytest.raises(LawCheckError):
        check_laws(lmax, st.text(alphabet="ab", max_size=2).map(lmax), max_examples=5)
