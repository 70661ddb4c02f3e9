"""Every builtin lattice passes the law checker, with every @morph and @monotone claim checked.

Each ``check_laws`` call names the arguments of the methods that need them. Where one value
strategy cannot serve every method (``lmap.filter`` needs ``lbool`` values, ``group_count``
needs tuple rows), the lattice is checked once per strategy and a method that does not apply is
skipped with ``None`` in that run; ``test_every_claim_is_checked_somewhere`` makes sure that no
marked method is skipped in all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from blooml import lbag, lbool, lmap, lmax, lmin, lpset, lset
from blooml.lattices import Lattice
from blooml.testing import LawReport, check_laws, elements
from blooml.testing._collection_strategies import ITEM_FUNCTIONS, NUMBER_FUNCTIONS
from blooml.testing._strategies import Const, named

# The domains the default strategies draw from (see blooml.testing.elements), so that looked-up
# arguments are often present.
NUMBERS = st.integers(-25, 25)
ITEMS = st.integers(0, 13) | st.sampled_from(["a", "b", "c", "z"])
NONNEG = st.integers(0, 13) | st.integers(0, 48).map(lambda q: q / 4)
PAIRS = st.tuples(st.integers(0, 2), st.integers(0, 2))
MAP_KEYS = st.sampled_from(["a", "b", "c", "z", 0, 1, 2, 9, ("flag", 0), ("flag", 1), ("sub", 0)])
HOMOGENEOUS_KEYS = st.sampled_from("abcdefz")


ROW_FUNCTIONS = st.sampled_from(
    [named("left", lambda r: r[0]), named("swap", lambda r: (r[1], r[0])), named("id", lambda r: r)]
)


def ordered_args(*names: str) -> dict[str, Any]:
    return {n: NUMBERS for n in (*names, "__add__", "__radd__", "__sub__")}


def map_args(**overrides: Any) -> dict[str, Any]:
    """Arguments for every lmap method; runs override what their value strategy needs."""
    base: dict[str, Any] = {
        "at": None,
        "has_key": MAP_KEYS,
        "filter": None,
        "apply_morph": None,
        "apply": None,
    }
    base.update(overrides)
    return base


CASES: dict[str, tuple[type[Lattice], st.SearchStrategy[Any] | None, Mapping[str, Any]]] = {
    "lmax": (lmax, None, ordered_args("gt", "gt_eq", "min_of")),
    "lmax of strings": (
        lmax,
        elements(lmax, values=st.text(alphabet="abc", max_size=3)),
        {
            "gt": st.text(alphabet="abc", max_size=3),
            "gt_eq": st.text(alphabet="abc", max_size=3),
            "min_of": st.text(alphabet="abc", max_size=3),
            "__add__": None,  # arithmetic: numbers only, checked in the "lmax" run
            "__radd__": None,
            "__sub__": None,
        },
    ),
    "lmin": (lmin, None, ordered_args("lt", "lt_eq", "max_of")),
    "lbool": (lbool, None, {"when_true": st.one_of(elements(lset), elements(lmax)).map(Const)}),
    "lset": (
        lset,
        None,
        {"contains": ITEMS, "project": ITEM_FUNCTIONS, "group_count": None},
    ),
    "lset of rows": (
        lset,
        elements(lset, values=PAIRS),
        {
            "contains": PAIRS,
            "project": ROW_FUNCTIONS,
            "group_count": st.sampled_from([0, 1, [0, 1], (1, 0)]),
            "eqjoin": {
                "on": st.sampled_from([None, 0, 1, [0, 1], {0: 1}, {1: 0}]),
                "fn": st.sampled_from([None, named("concat", lambda a, b: (*a, *b))]),
            },
        },
    ),
    "lpset": (
        lpset,
        None,
        {
            "contains": NONNEG,
            "project": NUMBER_FUNCTIONS,
            # numbers have no positions, but fields: group by value and by its imaginary part
            "group_count": st.sampled_from(["real", ("imag",), ["real", "imag"]]),
        },
    ),
    "lbag": (lbag, None, {"contains": ITEMS, "mult": ITEMS, "project": ITEM_FUNCTIONS}),
    "lmap of mixed values": (lmap, None, map_args()),
    "lmap of lmax": (
        lmap,
        elements(lmap, values=lmax),
        map_args(
            at=st.tuples(HOMOGENEOUS_KEYS, st.just(lmax)),
            has_key=HOMOGENEOUS_KEYS,
            apply_morph=st.tuples(st.sampled_from(["gt", "gt_eq", "min_of", "__add__"]), NUMBERS),
            apply=st.tuples(st.sampled_from(["gt", "min_of"]), NUMBERS),
            to_collection=st.sampled_from(
                [
                    None,
                    named("key_only", lambda k, v: (k,)),
                    named("key_and_gt3", lambda k, v: (k, v.gt(3))),
                    named("big_keys", lambda k, v: k if v.gt_eq(5) else None),
                ]
            ),
        ),
    ),
    "lmap of lbool": (
        lmap,
        elements(lmap, values=lbool),
        map_args(
            at=st.tuples(HOMOGENEOUS_KEYS, st.just(lbool)), has_key=HOMOGENEOUS_KEYS, filter={}
        ),
    ),
    "lmap of lset": (
        lmap,
        elements(lmap, values=lset),
        map_args(
            at=st.tuples(HOMOGENEOUS_KEYS, st.just(lset)),
            has_key=HOMOGENEOUS_KEYS,
            apply_morph=st.tuples(st.just("contains"), ITEMS)
            | st.tuples(st.just("intersect"), elements(lset)),
            apply=st.tuples(st.just("size")) | st.tuples(st.just("contains"), ITEMS),
        ),
    ),
}

REPORTS: dict[str, LawReport] = {}


@pytest.mark.parametrize("case", list(CASES))
def test_builtin_obeys_its_laws(case):
    cls, strategy, args = CASES[case]
    # the suite's hypothesis profile decides how hard to look
    report = check_laws(cls, strategy, args=args, max_examples=settings.default.max_examples)
    REPORTS[case] = report
    assert "associative" in report.checked


@pytest.mark.parametrize("cls", [lmax, lmin, lbool, lset, lpset, lbag, lmap])
def test_every_claim_is_checked_somewhere(cls):
    """No marked method of a builtin escapes: each is checked in at least one run above."""
    checked: set[str] = set()
    for case, (case_cls, strategy, args) in CASES.items():
        if case_cls is not cls:
            continue
        report = REPORTS.get(case)
        if report is None:  # run on its own (e.g. with -k): compute the plan cheaply
            report = check_laws(cls, strategy, args=args, max_examples=1, seed=0)
        checked |= {label.split(" ", 1)[1] for label in report.checked if " " in label}
    claims = (cls.morphisms() | cls.monotones()) - {"merge"}
    assert claims <= checked, f"never checked: {sorted(claims - checked)}"
