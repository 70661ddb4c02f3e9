"""``blooml.ir.exprs.decompile``: simple rule functions become expressions, verified by
recompiling; everything else is ``None`` (the function is then called as written)."""

from __future__ import annotations

import functools
from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import Program, bloom, lmin, table
from blooml.ir import Map
from blooml.ir.exprs import (
    Arg,
    Attr,
    BinOp,
    Compare,
    Const,
    Item,
    TupleExpr,
    Unary,
    decompile,
    to_source,
)

GLOBAL = 5


def test_join_projection():
    e = decompile(lambda lk, p: (lk.src, p.dst))
    assert e == TupleExpr((Attr(Arg(0, "lk"), "src"), Attr(Arg(1, "p"), "dst")))


def test_path_cost():
    e = decompile(lambda d, lk: (lk.dst, d.d + lk.c))
    assert e == TupleExpr(
        (Attr(Arg(1, "lk"), "dst"), BinOp("+", Attr(Arg(0, "d"), "d"), Attr(Arg(1, "lk"), "c")))
    )


def test_constants_subscripts_unary_and_comparisons():
    e = decompile(lambda r: (r[0], -r.c, "direct", r.x * 2.5, r.a < 3, None))
    assert e == TupleExpr(
        (
            Item(Arg(0, "r"), Const(0)),
            Unary("-", Attr(Arg(0, "r"), "c")),
            Const("direct"),
            BinOp("*", Attr(Arg(0, "r"), "x"), Const(2.5)),
            Compare("<", Attr(Arg(0, "r"), "a"), Const(3)),
            Const(None),
        )
    )


def test_one_value_and_one_item_tuple():
    assert decompile(lambda r: r.a) == Attr(Arg(0, "r"), "a")
    assert decompile(lambda r: (r.a,)) == TupleExpr((Attr(Arg(0, "r"), "a"),))


def test_nested_attribute():
    assert decompile(lambda r: (r.a.b,)) == TupleExpr((Attr(Attr(Arg(0, "r"), "a"), "b"),))


def test_defined_inside_a_function_and_a_method():
    def make():
        return lambda r: (r.a, 1)

    class Holder:
        def fn(self):
            return lambda r: (r.a, 1)

    want = TupleExpr((Attr(Arg(0, "r"), "a"), Const(1)))
    assert decompile(make()) == want
    assert decompile(Holder().fn()) == want


@pytest.mark.parametrize(
    "fn",
    [
        lambda r: (r.a, GLOBAL),  # a global: may be rebound later
        lambda r: (r.a, len(r)),  # a call
        lambda r: (r.a, lmin(r.c)),  # a call of a lattice constructor
        lambda r: (r.a if r.b else r.c,),  # a conditional
        lambda r, k=1: (r.a, k),  # a default
        lambda *rs: (rs[0],),  # *args
        lambda r: (r.a, [1, 2]),  # a list display
        lambda r: (r.a, r.b and r.c),  # short circuit
        lambda r: (r.a, r.b in {1, 2}),  # containment
        lambda r: (*r,),  # unpacking
        lambda r: (x for x in r),  # a generator
    ],
)
def test_rejected(fn):
    assert decompile(fn) is None


def test_closure_variable_rejected():
    x = 5
    assert decompile(lambda r: (r.a, x)) is None


def test_not_a_plain_function():
    assert decompile(len) is None
    assert decompile(functools.partial(lambda r, k: (r, k), k=1)) is None

    class Callable_:
        def __call__(self, r):
            return (r.a,)

    assert decompile(Callable_()) is None


def test_a_def_function_with_one_return():
    def f(r):
        return (r.a, r.b + 1)

    assert decompile(f) == TupleExpr(
        (Attr(Arg(0, "r"), "a"), BinOp("+", Attr(Arg(0, "r"), "b"), Const(1)))
    )

    def g(r):
        y = r.a
        return (y,)

    assert decompile(g) is None  # a local variable


def test_constant_types_are_kept():
    # 1, 1.0 and True are equal but not the same constant
    assert decompile(lambda r: (r.a, 1)).items[1] == Const(1)  # type: ignore[union-attr]
    c = decompile(lambda r: (r.a, 1.0)).items[1]  # type: ignore[union-attr]
    assert type(c.value) is float
    c = decompile(lambda r: (r.a, True)).items[1]  # type: ignore[union-attr]
    assert c.value is True


def test_folded_constants():
    assert decompile(lambda r: (r.a, -1)) == TupleExpr((Attr(Arg(0, "r"), "a"), Const(-1)))
    assert decompile(lambda r: (r.a, (1, 2))) == TupleExpr((Attr(Arg(0, "r"), "a"), Const((1, 2))))


def test_source_round_trip():
    fn = lambda lk, p: (lk.src, p.c + lk.c, -p.x, p[1], "k")  # noqa: E731
    e = decompile(fn)
    assert e is not None
    assert to_source(e) == "(lk.src, (p.c + lk.c), (-p.x), p[1], 'k')"


def test_cached_per_function():
    fn = lambda r: (r.a,)  # noqa: E731
    assert decompile(fn) is decompile(fn)


def test_map_node_exposes_the_expression():
    class P(Program):
        link = table(["src", "dst", "c"])
        path = table(["src", "dst"], ["c"])

        @bloom
        def rules(self):
            self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
            self.path <= self.path.join(self.link, self.path.dst == self.link.src).map(
                lambda p, lk: (p.src, lk.dst, p.c + lk.c)
            )

    first, second = P.ir().rules
    assert isinstance(first.body, Map) and first.body.expr is None  # calls lmin
    assert isinstance(second.body, Map)
    assert second.body.expr == TupleExpr(
        (
            Attr(Arg(0, "p"), "src"),
            Attr(Arg(1, "lk"), "dst"),
            BinOp("+", Attr(Arg(0, "p"), "c"), Attr(Arg(1, "lk"), "c")),
        )
    )


R = namedtuple("R", "a b c")
ints = st.integers(-50, 50)
ops = ["+", "-", "*", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", ">="]
FNS = [eval(f"lambda r, s: (r.a {op} s.b, r[2] {op} 3, -r.c)") for op in ops]


@given(st.sampled_from(FNS), st.tuples(ints, ints, ints), st.tuples(ints, ints, ints))
def test_expression_evaluates_like_the_function(fn, r, s):
    """The recovered expression, evaluated as source, gives what the function gives."""
    e = decompile(fn)
    assert e is not None
    rr, ss = R(*r), R(*s)
    try:
        want = fn(rr, ss)
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            eval(to_source(e), {}, {"r": rr, "s": ss})
        return
    assert eval(to_source(e), {}, {"r": rr, "s": ss}) == want
