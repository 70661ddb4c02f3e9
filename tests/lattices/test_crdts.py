"""CRDTs built from lattices: laws (as direct hypothesis properties), operations, errors, and
replicas converging whatever order they apply operations and merge in."""

from __future__ import annotations

import doctest
import importlib
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices import Lattice, kind_of, lattice_class, lmax, lmin
from blooml.lattices.crdts import (
    l2pset,
    ldompair,
    lgcounter,
    llww,
    lmvreg,
    lorset,
    lpair,
    lpncounter,
    lvclock,
)
from blooml.testing import LawViolation, check_laws
from blooml.testing._crdt_strategies import METHOD_ARGS

# -- strategies ---------------------------------------------------------------------------------

small = st.integers(-3, 3)
lmaxes = st.one_of(st.just(lmax()), st.builds(lmax, small))
lmins = st.one_of(st.just(lmin()), st.builds(lmin, small))
lpairs = st.one_of(st.just(lpair()), st.builds(lpair, lmaxes, lmins))
# lpair(lmax, lmax) is partially ordered, so ldompairs over it reach the "incomparable" case.
grid = st.builds(lpair, lmaxes, lmaxes)
ldompairs = st.one_of(st.just(ldompair()), st.builds(ldompair, grid, lmaxes))
nodes = st.sampled_from(["", "a", "b"])
llwws = st.one_of(st.just(llww()), st.builds(llww, st.integers(0, 3), st.integers(0, 3), nodes))


# -- law helpers ----------------------------------------------------------------------------------


def join(x: Any, y: Any) -> Any:
    """Merge two method results; ``None`` is "nothing" (⊥ of any lattice)."""
    if x is None:
        return y
    if y is None:
        return x
    return x.merge(y)


def check_merge_laws(a: Lattice, b: Lattice, c: Lattice) -> None:
    bot = type(a)()
    assert a.merge(b).merge(c) == a.merge(b.merge(c)), "associativity"
    assert a.merge(b) == b.merge(a), "commutativity"
    assert a.merge(a) == a, "idempotence"
    assert bot.merge(a) == a and a.merge(bot) == a, "⊥ is the identity"
    assert bot <= a
    assert (a <= b) == (a.merge(b) == b), "<= agrees with merge"
    assert a <= a.merge(b) and b <= a.merge(b)
    if a == b:
        assert hash(a) == hash(b)


def check_value_semantics(a: Lattice, namespace: dict[str, Any]) -> None:
    assert eval(repr(a), namespace) == a
    assert pickle.loads(pickle.dumps(a)) == a
    assert hash(pickle.loads(pickle.dumps(a))) == hash(a)
    with pytest.raises(AttributeError):
        a._v = None  # type: ignore[misc]


def check_morph(f: Callable[[Any], Any], a: Lattice, b: Lattice) -> None:
    assert f(a.merge(b)) == join(f(a), f(b))


def check_monotone(f: Callable[[Any], Any], a: Lattice, b: Lattice) -> None:
    lo, hi = f(a), f(a.merge(b))
    assert lo is None or lo <= hi


NS: dict[str, Any] = {
    "lmax": lmax,
    "lmin": lmin,
    "lpair": lpair,
    "ldompair": ldompair,
    "llww": llww,
}


# -- lpair ----------------------------------------------------------------------------------------


@given(lpairs, lpairs, lpairs)
def test_lpair_laws(a: lpair, b: lpair, c: lpair) -> None:
    check_merge_laws(a, b, c)
    check_value_semantics(a, NS)
    check_morph(lambda p: p.first(), a, b)
    check_morph(lambda p: p.second(), a, b)
    check_morph(lambda p: p.first(lmax), a, b)


def test_lpair_merges_componentwise() -> None:
    p = lpair(lmax(1), lmin(5)).merge(lpair(lmax(3), lmin(7)))
    assert p == lpair(lmax(3), lmin(5))
    assert p.first() == lmax(3) and p.second() == lmin(5)
    assert p.reveal() == (lmax(3), lmin(5))
    assert kind_of(lpair, "first") == "morph" and kind_of(lpair, "second") == "morph"


def test_lpair_typeless_bottom() -> None:
    p = lpair(lmax(), lmin())
    assert lpair() < p and lpair().merge(p) is p
    assert lpair().is_bottom() and not p.is_bottom()
    assert lpair().first() is None and lpair().second(lmin) == lmin()
    assert lpair().reveal() is None and repr(lpair()) == "lpair()"


def test_lpair_merge_shares_sides() -> None:
    big, small_ = lpair(lmax(5), lmin(1)), lpair(lmax(2), lmin(3))
    assert big.merge(small_) is big and small_.merge(big) is big


def test_lpair_errors() -> None:
    with pytest.raises(LatticeValueError, match=r"lpair\(lmax\(1\)\).*both components"):
        lpair(lmax(1))
    with pytest.raises(LatticeValueError, match="second component must be a lattice value"):
        lpair(lmax(1), 2)  # type: ignore[arg-type]
    with pytest.raises(LatticeTypeError, match="lpair first components"):
        lpair(lmax(1), lmin(1)).merge(lpair(lmin(1), lmin(1)))
    with pytest.raises(TypeError, match=r"lpair.first\(Cls=lmin\)"):
        lpair(lmax(1), lmin(1)).first(lmin)
    with pytest.raises(LatticeTypeError):
        lpair().merge(ldompair())  # type: ignore[arg-type]


def test_lpair_fold_from_tuples() -> None:
    assert lpair.fold([(lmax(1), lmin(4)), (lmax(3), lmin(9))]) == lpair(lmax(3), lmin(4))
    with pytest.raises(LatticeValueError, match="2-tuple"):
        lpair.fold([lmax(1)])


# -- ldompair -------------------------------------------------------------------------------------


@given(ldompairs, ldompairs, ldompairs)
def test_ldompair_laws(a: ldompair, b: ldompair, c: ldompair) -> None:
    check_merge_laws(a, b, c)
    check_value_semantics(a, NS)
    check_morph(lambda p: p.first(), a, b)
    check_monotone(lambda p: p.first(), a, b)


def test_ldompair_cases() -> None:
    lo, hi = ldompair(lmax(1), lmax(9)), ldompair(lmax(2), lmax(0))
    assert lo.merge(hi) is hi and hi.merge(lo) is hi  # the larger first wins whole
    assert ldompair(lmax(1), lmax(3)).merge(ldompair(lmax(1), lmax(7))) == ldompair(
        lmax(1), lmax(7)
    )  # a tie merges the seconds
    x = ldompair(lpair(lmax(1), lmax(0)), lmax(5))
    y = ldompair(lpair(lmax(0), lmax(1)), lmax(7))
    # incomparable firsts: their join, with the second reset to ⊥ (the least upper bound)
    assert x.merge(y) == ldompair(lpair(lmax(1), lmax(1)), lmax())


def test_ldompair_is_associative_where_merging_seconds_is_not() -> None:
    # Merging the seconds on incomparable firsts (Hydro's DomPair, Bud's lpair) gives
    # (x ⊔ y) ⊔ z == (c, 7) but x ⊔ (y ⊔ z) == (c, 3): order-dependent. Ours agrees both ways.
    x = ldompair(lpair(lmax(1), lmax(0)), lmax(5))
    y = ldompair(lpair(lmax(0), lmax(1)), lmax(7))
    z = ldompair(lpair(lmax(1), lmax(1)), lmax(3))
    assert x.merge(y).merge(z) == x.merge(y.merge(z)) == z


def test_ldompair_second_is_not_monotone() -> None:
    lo, hi = ldompair(lmax(1), lmax(5)), ldompair(lmax(2), lmax(0))
    assert lo <= hi and not lo.second() <= hi.second()
    assert kind_of(ldompair, "second") == "nonmonotone"
    assert kind_of(ldompair, "first") == "morph"


# -- llww -----------------------------------------------------------------------------------------


@given(llwws, llwws, llwws)
def test_llww_laws(a: llww, b: llww, c: llww) -> None:
    check_merge_laws(a, b, c)
    check_value_semantics(a, NS)
    check_morph(lambda r: r.timestamp(), a, b)
    check_morph(lambda r: r.write(2, 1, "a"), a, b)


def test_llww_last_writer_wins() -> None:
    a = llww().write("draft", ts=1, node="alice")
    b = llww().write("final", ts=2, node="bob")
    assert a.merge(b).reveal() == b.merge(a).reveal() == "final"
    assert a.merge(b).timestamp() == lmax(2) and a.merge(b).node() == "bob"
    assert llww().reveal() is None and llww().node() is None and llww().timestamp() == lmax()
    # a timestamp tie is settled by the node id, then (same stamp) by the larger value
    assert llww("x", 5, "a").merge(llww("y", 5, "b")).reveal() == "y"
    assert llww("y", 5, "a").merge(llww("x", 5, "a")).reveal() == "y"
    # an older write does not change the register
    assert b.write("late", ts=1, node="zed") is b
    assert repr(b) == "llww('final', ts=2, node='bob')" and repr(llww("v", 3)) == "llww('v', ts=3)"


def test_llww_errors() -> None:
    with pytest.raises(LatticeValueError, match=r"llww\(None\).*empty register"):
        llww(None, 1)
    with pytest.raises(LatticeValueError, match="hashable"):
        llww([1], 1)
    with pytest.raises(LatticeValueError, match="both a value and a timestamp"):
        llww("x")
    with pytest.raises(LatticeValueError, match="bad timestamp"):
        llww("x", float("nan"))
    with pytest.raises(LatticeValueError, match="bad timestamp"):
        llww("x", None)
    with pytest.raises(LatticeValueError, match="node id must be a str"):
        llww("x", 1, 7)  # type: ignore[arg-type]
    with pytest.raises(
        LatticeValueError, match=r"llww\('noon'\): the timestamp of .* cannot be compared"
    ):
        llww("x", 1).merge(llww("y", "noon"))
    with pytest.raises(LatticeValueError, match=r"llww\(frozenset\(\{2\}\)\).*own node id"):
        llww(frozenset({1}), 1).merge(llww(frozenset({2}), 1))


def test_llww_fold_rows() -> None:
    reg = llww.fold([("a", 1, "n1"), ("b", 3), llww("c", 2)])
    assert reg == llww("b", 3)
    with pytest.raises(LatticeValueError, match="folded row"):
        llww.fold(["a"])


writes = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 9), st.sampled_from("abc"), st.integers(0, 2)),
    max_size=12,
)


@given(writes, st.randoms(use_true_random=False))
def test_llww_replicas_converge(ws: list[tuple[int, int, str, int]], rnd: Any) -> None:
    replicas = [llww(), llww(), llww()]
    for value, ts, node, r in ws:
        replicas[r] = replicas[r].write(value, ts, node)
    order = list(range(3))
    rnd.shuffle(order)
    left = llww()
    for i in order:
        left = left.merge(replicas[i])
    right = replicas[2].merge(replicas[1]).merge(replicas[0])
    assert left == right
    if ws:
        value, ts, node, _ = max(ws, key=lambda w: (w[1], w[2], w[0]))
        assert left == llww(value, ts, node)


# -- the law checker, on every CRDT -------------------------------------------------------------

ALL_CRDTS = [lpair, ldompair, llww, lvclock, lgcounter, lpncounter, lmvreg, lorset, l2pset]


@pytest.mark.parametrize("cls", ALL_CRDTS, ids=lambda c: c.__name__)
def test_check_laws(cls: type[Lattice]) -> None:
    report = check_laws(cls, args=METHOD_ARGS[cls], max_examples=60)
    assert not report.skipped
    checked = " ".join(report.checked)
    for name in cls.morphisms() | cls.monotones():
        if name != "merge":
            assert name in checked


def test_every_crdt_is_exported_and_registered() -> None:
    import blooml
    import blooml.lattices

    for cls in ALL_CRDTS:
        assert getattr(blooml.lattices, cls.__name__) is cls
        assert getattr(blooml, cls.__name__, cls) is cls
        assert lattice_class(cls.wrapper_name) is cls
        assert cls.wrapper_name == cls.__name__


class _HydroDomPair(ldompair):
    """ldompair with Hydro's rule for incomparable firsts (merge the seconds): not a lattice."""

    __slots__ = ()

    def merge(self, other: _HydroDomPair) -> _HydroDomPair:
        a, b = self._v, other._v
        if a is None or b is None:
            return self if b is None else other
        k = a[0].merge(b[0])
        if k != a[0] and k != b[0]:
            return _HydroDomPair._make((k, a[1].merge(b[1])))
        return _HydroDomPair._make(super().merge(other)._v)


def test_law_checker_rejects_merging_seconds_on_incomparable_firsts() -> None:
    grid = st.builds(lpair, st.builds(lmax, st.integers(0, 1)), st.builds(lmax, st.integers(0, 1)))
    values = st.builds(_HydroDomPair, grid, st.builds(lmax, st.integers(0, 3)))
    with pytest.raises(LawViolation, match="associative"):
        check_laws(_HydroDomPair, values | st.just(_HydroDomPair()), max_examples=200, seed=1)


# -- documentation examples run ---------------------------------------------------------------


@pytest.mark.parametrize(
    "module", ["pair", "registers", "clock", "counters", "sets"], ids=lambda m: m
)
def test_docstring_examples(module: str) -> None:
    mod = importlib.import_module(f"blooml.lattices.crdts.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_docs_crdts_md_examples() -> None:
    text = (Path(__file__).parents[2] / "docs" / "crdts.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    namespace: dict[str, Any] = {}
    exec("from blooml import *", namespace)
    for block in blocks:
        exec(block, namespace)
