"""``blooml.ir.exprs.decompile``: simple rule functions become expressions, verified by
recompiling; everything else is ``None`` (the function is then called as written)."""

from __future__ import annotations

import functools
from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import Program, bloom, lmax, lmin, lset, table
from blooml.ir import Map, NotIn
from blooml.ir.exprs import (
    Arg,
    Attr,
    BinOp,
    Compare,
    Const,
    Item,
    LatNew,
    Method,
    TupleExpr,
    Unary,
    decompile,
    to_source,
)

GLOBAL = 5
NOT_A_LATTICE = abs


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
        lambda r: (r.a, NOT_A_LATTICE(r.c)),  # a call of a global that is no lattice class
        lambda r: (r.a, r.c.reveal()),  # a non-monotone lattice method
        lambda r: (r.a, r.c.gt(n=3)),  # a keyword argument
        lambda r: (r.a, (r.c)(3)),  # a call of a value
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
    assert isinstance(first.body, Map)
    assert first.body.expr == TupleExpr(
        (
            Attr(Arg(0, "lk"), "src"),
            Attr(Arg(0, "lk"), "dst"),
            LatNew(lmin, (Attr(Arg(0, "lk"), "c"),)),
        )
    )
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


# -- calls, three-way joins, notin --------------------------------------------------------------


def test_lattice_constructor_call():
    e = decompile(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
    assert e == TupleExpr(
        (
            Attr(Arg(0, "lk"), "src"),
            Attr(Arg(0, "lk"), "dst"),
            LatNew(lmin, (Attr(Arg(0, "lk"), "c"),)),
        )
    )
    assert to_source(e) == "(lk.src, lk.dst, lmin(lk.c))"
    # a constant argument, a tuple argument, no argument
    assert decompile(lambda s: (s.v, lmin(0))).items[1] == LatNew(lmin, (Const(0),))  # type: ignore[union-attr]
    e = decompile(lambda p: (p.key, lmax((p.version, p.value))))
    assert e.items[1] == LatNew(  # type: ignore[union-attr]
        lmax, (TupleExpr((Attr(Arg(0, "p"), "version"), Attr(Arg(0, "p"), "value"))),)
    )
    assert decompile(lambda r: (r.k, lset())).items[1] == LatNew(lset, ())  # type: ignore[union-attr]


def test_monotone_method_calls():
    e = decompile(lambda p, lk: (p.src, p.c.min_of(lk.c)))
    assert e == TupleExpr(
        (
            Attr(Arg(0, "p"), "src"),
            Method(Attr(Arg(0, "p"), "c"), "min_of", (Attr(Arg(1, "lk"), "c"),), "morph"),
        )
    )
    assert to_source(e) == "(p.src, p.c.min_of(lk.c))"
    f = decompile(lambda r: r.flag.gt(3))
    assert f == Method(Attr(Arg(0, "r"), "flag"), "gt", (Const(3),), "morph")


def test_three_way_join_projection():
    e = decompile(lambda a, b, c: (a.x, b.y + c.z, lmin(c.w)))
    assert e == TupleExpr(
        (
            Attr(Arg(0, "a"), "x"),
            BinOp("+", Attr(Arg(1, "b"), "y"), Attr(Arg(2, "c"), "z")),
            LatNew(lmin, (Attr(Arg(2, "c"), "w"),)),
        )
    )


def test_rebinding_the_global_is_seen(monkeypatch):
    fn = lambda r: (r.a, lmin(r.c))  # noqa: E731
    assert decompile(fn) is not None
    monkeypatch.setitem(fn.__globals__, "lmin", lmax)
    assert decompile(fn).items[1] == LatNew(lmax, (Attr(Arg(0, "r"), "c"),))  # type: ignore[union-attr]
    monkeypatch.setitem(fn.__globals__, "lmin", len)
    assert decompile(fn) is None


@given(st.sampled_from([1, 2, 3]), st.integers(0, 9), st.integers(0, 9))
def test_calls_evaluate_like_the_function(which, a, c):
    fns = {
        1: lambda r: (r.a, lmin(r.c), lmax((r.a, r.c))),
        2: lambda r, s: (r.a, lmin(r.c) + s.c, lmax(r.a).min_of(s.c)),
        3: lambda r, s: lmin(r.c).lt(s.a),
    }
    fn = fns[which]
    e = decompile(fn)
    assert e is not None
    rr, ss = R(a, 0, c), R(c, 0, a)
    args = (rr,) if which == 1 else (rr, ss)
    names = {"r": rr, "s": ss, "lmin": lmin, "lmax": lmax}
    assert eval(to_source(e), names) == fn(*args)


def test_arg_names_are_not_compared_but_constant_types_are():
    assert decompile(lambda a: (a.x, 1)) == decompile(lambda b: (b.x, 1))
    assert decompile(lambda a: (a.x, 1)) != decompile(lambda a: (a.x, 1.0))
    assert decompile(lambda a: (a.x, 1)) != decompile(lambda a: (a.x, True))
    assert decompile(lambda a: (a.x, (1, 2))) != decompile(lambda a: (a.x, (1, 2.0)))


def test_nodes_compare_by_expression():
    class P(Program):
        a = table(["x", "y"])
        b = table(["x", "y"])

        @bloom
        def rules(self):
            self.b <= self.a.map(lambda r: (r.y, lmin(r.x)))
            self.b <= self.a.map(lambda s: (s.y, lmin(s.x)))
            self.b <= self.a.map(lambda s: (s.y, lmax(s.x)))
            self.b <= self.a.map(lambda s: (s.y, len(s)))
            self.b <= self.a.map(lambda s: (s.y, len(s)))

    r = P.ir().rules
    assert r[0].body == r[1].body and hash(r[0].body) == hash(r[1].body)
    assert r[1].body != r[2].body
    assert r[3].body != r[4].body  # not recovered: compared by identity


def test_notin_match_function_expression():
    class P(Program):
        a = table(["x", "y"])
        b = table(["x", "y"])
        c = table(["x", "y"])

        @bloom
        def rules(self):
            self.c <= self.a.notin(self.b, self.a.x == self.b.x, lambda x, y: x.y < y.y)
            self.c <= self.a.notin(self.b)

    first, second = P.ir().rules
    assert isinstance(first.body, NotIn)
    assert first.body.expr == Compare("<", Attr(Arg(0, "x"), "y"), Attr(Arg(1, "y"), "y"))
    assert "lambda x, y: (x.y < y.y)" in repr(first.body)
    assert "a.x == b.x" in repr(first.body)
    assert second.body.expr is None  # type: ignore[attr-defined]


def test_format_prints_expressions_and_marks_python_rules():
    class P(Program):
        link = table(["src", "dst", "c"])
        path = table(["src", "dst"], ["c"])
        n = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
            self.n <= self.link.map(lambda lk: (lk.src, len(lk)))

    text = P.ir().format()
    line0 = next(x for x in text.splitlines() if "path <=" in x)
    line1 = next(x for x in text.splitlines() if "n <=" in x)
    assert "map(link, lambda lk: (lk.src, lk.dst, lmin(lk.c)))" in line0
    assert "runs Python" not in line0
    assert "# runs Python: <lambda>@test_ir_exprs.py:" in line1
    assert P.ir().rules[0].python_functions == []
    assert len(P.ir().rules[1].python_functions) == 1
