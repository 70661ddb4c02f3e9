"""The column-expression API (``project``, ``filter``/``map``/``notin`` with column
expressions, ``lift``) records the same IR as the equivalent lambdas, runs the same, and keeps
the operator-overloading traps closed."""

from __future__ import annotations

import operator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, ProgramError, bloom, lift, lmax, lmin, table
from blooml.ir import exprs as X


class Lambdas(Program):
    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])
    wide = table(["src", "dst"], ["w"])
    big = table(["src", "dst", "c"])
    hop = table(["a", "b"])
    tri = table(["a", "d", "s"])
    srcs = table(["v"])
    neg = table(["src", "k", "tag"])
    lone = table(["src", "dst", "c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
        self.path <= self.link.join(self.path, self.link.dst == self.path.src).map(
            lambda lk, p: (lk.src, p.dst, p.c + lk.c)
        )
        self.wide <= self.link.map(lambda lk: (lk.src, lk.dst, lmax(lk.c)))
        self.wide <= self.wide.join(self.link, self.wide.dst == self.link.src).map(
            lambda w, lk: (w.src, lk.dst, w.w.min_of(lk.c))
        )
        self.big <= self.link.filter(lambda lk: lk.c > 3)
        self.hop <= self.link.join(self.big, self.link.dst == self.big.src).filter(
            lambda lk, b: lk.c < b.c
        ).map(lambda lk, b: (lk.src, b.dst))
        self.tri <= self.link.join(self.big, self.link.dst == self.big.src).join(
            self.hop, self.big.dst == self.hop.a
        ).map(lambda lk, b, h: (lk.src, h.b, lk.c + b.c * 2))
        self.srcs <= self.link.map(lambda lk: lk.src)
        self.neg <= self.link.map(lambda lk: (lk.src, 1 + -lk.c, "n"))
        self.lone <= self.link.notin(
            self.big, self.link.src == self.big.src, lambda lk, b: lk.dst < b.dst
        )


class Columns(Program):
    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])
    wide = table(["src", "dst"], ["w"])
    big = table(["src", "dst", "c"])
    hop = table(["a", "b"])
    tri = table(["a", "d", "s"])
    srcs = table(["v"])
    neg = table(["src", "k", "tag"])
    lone = table(["src", "dst", "c"])

    @bloom
    def rules(self):
        lk, p, w, b, h = self.link, self.path, self.wide, self.big, self.hop
        self.path <= lk.project(lk.src, lk.dst, lift(lmin, lk.c))
        self.path <= lk.join(p, lk.dst == p.src).project(lk.src, p.dst, p.c + lk.c)
        self.wide <= lk.project(lk.src, lk.dst, lift(lmax, lk.c))
        self.wide <= w.join(lk, w.dst == lk.src).project(w.src, lk.dst, w.w.min_of(lk.c))
        self.big <= lk.filter(lk.c > 3)
        self.hop <= lk.join(b, lk.dst == b.src).filter(lk.c < b.c).project(lk.src, b.dst)
        self.tri <= lk.join(b, lk.dst == b.src).join(h, b.dst == h.a).project(
            lk.src, h.b, lk.c + b.c * 2
        )
        self.srcs <= lk.map(lk.src)
        self.neg <= lk.project(lk.src, 1 + -lk.c, "n")
        self.lone <= lk.notin(b, lk.src == b.src, lk.dst < b.dst)


def test_both_spellings_record_identical_ir():
    la, co = Lambdas.ir(), Columns.ir()
    assert len(la.rules) == len(co.rules) == 10
    for a, c in zip(la.rules, co.rules, strict=True):
        assert a.body == c.body, (a, c)
        assert hash(a.body) == hash(c.body)
        assert c.python_functions == [] and a.python_functions == []
    assert la.strata == co.strata
    # the expressions themselves, not only the nodes
    assert co.rules[1].body.expr == X.TupleExpr(  # type: ignore[attr-defined]
        (
            X.Attr(X.Arg(0, "link"), "src"),
            X.Attr(X.Arg(1, "path"), "dst"),
            X.BinOp("+", X.Attr(X.Arg(1, "path"), "c"), X.Attr(X.Arg(0, "link"), "c")),
        )
    )


def test_the_printout_names_the_collections():
    text = Columns.ir().format()
    assert (
        "map(join(link, path on link.dst == path.src), lambda link, path: "
        "(link.src, path.dst, (path.c + link.c)))" in text
    )
    assert "runs Python" not in text


links = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 9)), max_size=12)


def _state(p: Program) -> dict[str, Any]:
    return {n: sorted(map(tuple, getattr(p, n)), key=repr) for n in p._rt.rels}


@settings(max_examples=40, deadline=None)
@given(st.lists(links, min_size=1, max_size=3))
def test_both_spellings_compute_the_same(batches):
    for inline in (True, False):
        a, c = Lambdas(inline=inline), Columns(inline=inline)
        for batch in batches:
            a.link.insert(batch)
            c.link.insert(batch)
            a.tick()
            c.tick()
            assert _state(a) == _state(c)


# -- traps --------------------------------------------------------------------------------------


def _in_block(check: Any) -> None:
    class P(Program, abstract=True):
        a = table(["x", "y"])
        b = table(["y", "z"])
        out = table(["x", "y"])

        @bloom
        def r(self):
            check(self)

    P.ir()


def test_no_truth_value():
    def check(s: Any) -> None:
        with pytest.raises(TypeError, match="no truth value"):
            bool(s.a.x + 1)
        with pytest.raises(TypeError, match="no truth value"):
            if s.a.x > 3:
                pass
        with pytest.raises(TypeError, match="no truth value"):
            0 < s.a.x < 5  # chained: `and` of two comparisons

    _in_block(check)


def test_hash_is_identity_and_dict_lookups_do_not_compare():
    def check(s: Any) -> None:
        e, y = s.a.x + 1, s.a.y
        d = {e: 1, y: 2}  # no == between keys: that would build expressions
        assert d[e] == 1 and d[y] == 2
        assert e not in {s.a.x + 1: 0}  # equal-looking, but not the same object

    _in_block(check)


def test_unknown_operands_are_not_implemented_and_reflected_ones_keep_their_meaning():
    def check(s: Any) -> None:
        with pytest.raises(TypeError):
            s.a.x + object()
        with pytest.raises(TypeError):
            s.a.x * [1, 2]
        assert repr(1 - s.a.x) == "(1 - a.x)"
        # Python reflects `3 < a.x` to `a.x > 3`: the same meaning
        assert repr(operator.lt(3, s.a.x)) == "(a.x > 3)"
        assert repr(-s.a.x) == "(-a.x)" and repr(~s.a.x) == "(~a.x)"

    _in_block(check)


def test_misuse_is_a_clear_program_error():
    def check(s: Any) -> None:
        with pytest.raises(ProgramError, match=r"reveal.*not one"):
            s.a.x.reveal()
        with pytest.raises(ProgramError, match="lattice class"):
            lift(len, s.a.x)
        with pytest.raises(ProgramError, match="arguments are column expressions"):
            lift(lmin, [1])
        with pytest.raises(ProgramError, match="not an input here"):
            s.a.project(s.b.z)
        with pytest.raises(ProgramError, match="joined more than once"):
            s.a.join(s.a, s.a.x == s.a.y).project(s.a.x)
        with pytest.raises(ProgramError, match="rows have no known collection"):
            s.a.map(lambda r: r).project(s.a.x)
        with pytest.raises(ProgramError, match="at least one"):
            s.a.project()
        with pytest.raises(ProgramError, match="expected column expressions"):
            s.a.project(s.a.x, [1])
        with pytest.raises(ProgramError, match="not a right-hand side"):
            s.out <= s.a.x + 1
        with pytest.raises(ProgramError, match="at most one match test"):
            s.a.notin(s.b, s.a.x < s.b.z, lambda x, y: True)

    _in_block(check)
