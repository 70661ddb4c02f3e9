"""Inlined rule functions (``Program(inline=True)``, the default) give exactly what calling
the functions gives (``inline=False``): same rows, same lattice values, same errors, same
atomicity; rows read through views are named tuples either way."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import KeyConstraintError, Program, ProgramError, bloom, lmax, lmin, scratch, table
from blooml.engine._codegen import FusedMapEval

small = st.integers(0, 5)


def snapshot(p: Program) -> dict[str, Any]:
    """Every collection's rows (sorted by repr), each with its type name."""
    out = {}
    for name in p._rt.rels:
        rows = list(getattr(p, name))
        assert all(type(r).__name__ == name for r in rows), name  # named tuples
        out[name] = sorted((tuple(r) for r in rows), key=repr)
        # lattice values keep their exact type
        out[name + ":types"] = sorted({tuple(type(c).__name__ for c in r) for r in rows})
    return out


def run_both(cls: type[Program], batches: list[dict[str, list[Any]]]) -> None:
    """Run ``cls`` inlined and not on the same inputs; states (or errors) must agree."""
    res = []
    for inline in (True, False):
        p = cls(inline=inline)
        trace: list[Any] = []
        for batch in batches:
            for name, rows in batch.items():
                getattr(p, name).insert(rows)
            try:
                p.tick()
            except Exception as exc:
                trace.append(("error", type(exc).__name__))
            trace.append(snapshot(p))
        res.append(trace)
    assert res[0] == res[1]


class TC(Program):
    link = table(["a", "b"])
    path = table(["a", "b"])

    @bloom
    def rules(self):
        self.path <= self.link
        self.path <= self.link.join(self.path, self.link.b == self.path.a).map(
            lambda lk, p: (lk.a, p.b)
        )


class Dist(Program):
    """lmin and lmax values in the same head, with int or float costs."""

    source = table(["v"], ["d"])
    link = table(["src", "dst", "c"])
    dist = table(["v"], ["d"])

    @bloom
    def rules(self):
        self.dist <= self.source
        self.dist <= self.dist.join(self.link, self.dist.v == self.link.src).map(
            lambda d, lk: (lk.dst, d.d + lk.c)
        )


class Paths(Program):
    """Two key columns and an lmin value, the issue's example."""

    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
        self.path <= self.path.join(self.link, self.path.dst == self.link.src).map(
            lambda p, lk: (p.src, lk.dst, p.c + lk.c)
        )


class Calls(Program):
    """Lattice constructors and @morph methods in rule functions (recovered as LatNew and
    Method expressions: run by generated code)."""

    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])
    wide = table(["src", "dst"], ["w"])
    flag = table(["k", "d"], ["f"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, lmin(lk.c)))
        self.path <= self.path.join(self.link, self.path.dst == self.link.src).map(
            lambda p, lk: (p.src, lk.dst, p.c + lk.c)
        )
        self.wide <= self.link.map(lambda lk: (lk.src, lk.dst, lmax(lk.c)))
        self.wide <= self.wide.join(self.link, self.wide.dst == self.link.src).map(
            lambda w, lk: (w.src, lk.dst, w.w.min_of(lk.c))
        )
        self.flag <= self.path.map(lambda p: (p.src, p.dst, p.c.lt(3)))


class ThreeWay(Program):
    """Three-way joins: a chain, a star, into all-key and keyed heads (and a cross product,
    which is not generated)."""

    a = table(["x", "y", "c"])
    b = table(["y", "z", "c"])
    e = table(["z", "w", "c"])
    chain = table(["x", "w"])
    cost = table(["x", "w"], ["c"])
    star = table(["y", "x", "z"])
    cross = table(["x", "w"])

    @bloom
    def rules(self):
        a, b, e = self.a, self.b, self.e
        self.chain <= a.join(b, a.y == b.y).join(e, b.z == e.z).map(lambda r, s, t: (r.x, t.w))
        self.cost <= a.join(b, a.y == b.y).join(e, b.z == e.z).filter(
            lambda r, s, t: r.x != t.w
        ).map(lambda r, s, t: (r.x, t.w, lmin(r.c + s.c + t.c)))
        self.star <= b.join(a, b.y == a.y).join(e, b.z == e.z).map(lambda s, r, t: (s.y, r.x, t.z))
        self.cross <= a.join(b, a.y == b.y).join(e).map(lambda r, s, t: (r.x, t.w))


class Project(Program):
    """Constants, arithmetic on key columns, a value column copied, two-column predicates."""

    a = table(["x", "y"], ["z"])
    b = table(["x", "y", "w"])
    out = table(["k", "tag"], ["v"])
    pairs = table(["p", "q", "r"])

    @bloom
    def rules(self):
        self.out <= self.a.map(lambda r: (r.x * 10 + r.y, "a", r.z))
        self.pairs <= self.a.join(self.b, self.a.x == self.b.x, self.a.y == self.b.y).map(
            lambda r, s: (r.x, s.w, r[1] - s[2])
        )


class Filtered(Program):
    """Filters (chained, over a join), one-value results, None results, tuple-valued cells."""

    a = table(["x", "y"])
    b = table(["y", "z"])
    c = table(["k"], ["t"])
    big = table(["x"])
    pairs = table(["x", "z"], ["y"])
    one = table(["v"])
    nothing = table(["v"])
    div = table(["x"])

    @bloom
    def rules(self):
        self.big <= self.a.filter(lambda r: r.x > 2).map(lambda r: r.x)
        self.pairs <= self.a.join(self.b, self.a.y == self.b.y).filter(
            lambda r, s: r.x != s.z
        ).filter(lambda r, s: (r.x + s.z) % 2 == 0).map(lambda r, s: (r.x, s.z, r.y))
        self.one <= self.c.map(lambda r: r.t)  # a tuple cell is a row, anything else a value
        self.nothing <= self.a.map(lambda r: None)
        # the first filter guards the second: applied in order, nothing divides by zero
        self.div <= self.a.filter(lambda r: r.y != 0).filter(lambda r: 12 // r.y > 3).map(
            lambda r: (r.x,)
        )


rows_dist = st.lists(st.tuples(small, small, st.integers(0, 4)), max_size=12)


def dist_batches(vals: Any, costs: Any) -> Any:
    return st.lists(
        st.fixed_dictionaries(
            {
                "source": st.lists(st.tuples(small, vals), max_size=3),
                "link": st.lists(st.tuples(small, small, costs), max_size=10),
            }
        ),
        min_size=1,
        max_size=3,
    )


# every fixpoint must be finite: lmin with costs >= 0, lmax with costs <= 0, both with 0
lmins = st.one_of(
    st.integers(0, 9).map(lmin), st.just(lmin()), st.floats(0, 9, allow_nan=False).map(lmin)
)
lmaxs = st.one_of(st.integers(0, 9).map(lmax), st.just(lmax()))
dist_inputs = st.one_of(
    dist_batches(lmins, st.one_of(st.integers(0, 4), st.just(1.5))),
    dist_batches(lmaxs, st.one_of(st.integers(-4, 0), st.just(-1.5))),
    dist_batches(st.one_of(lmins, lmaxs), st.just(0)),
)


@settings(max_examples=60)
@given(st.lists(st.lists(st.tuples(small, small), max_size=8), min_size=1, max_size=3))
def test_closure(batches):
    run_both(TC, [{"link": b} for b in batches])


@settings(max_examples=80)
@given(dist_inputs)
def test_shortest_and_widest_with_mixed_values(batches):
    # lmin and lmax under one key is a type error in merge: both modes raise and roll back
    run_both(Dist, batches)


@settings(max_examples=60)
@given(st.lists(rows_dist, min_size=1, max_size=3))
def test_two_key_columns(batches):
    run_both(Paths, [{"link": b} for b in batches])


@settings(max_examples=60)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "a": st.lists(st.tuples(small, small, small), max_size=6),
                "b": st.lists(st.tuples(small, small, small), max_size=6),
            }
        ),
        min_size=1,
        max_size=3,
    )
)
def test_projections_constants_and_two_column_joins(batches):
    # out(k, tag) -> v: two rows of `a` can map to one key with different values: a conflict
    run_both(Project, batches)


@settings(max_examples=60)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "a": st.lists(st.tuples(small, small), max_size=6),
                "b": st.lists(st.tuples(small, small), max_size=6),
                "c": st.lists(
                    st.tuples(small, st.one_of(small, st.tuples(small), st.tuples(small, small))),
                    max_size=3,
                ),
            }
        ),
        min_size=1,
        max_size=3,
    )
)
def test_filters_and_one_value_results(batches):
    # pairs(x, z) -> y conflicts when two y join the same (x, z); c's 2-tuples have the
    # wrong arity for `one`: both modes raise the same errors
    run_both(Filtered, batches)


@settings(max_examples=60)
@given(st.lists(rows_dist, min_size=1, max_size=3))
def test_lattice_constructors_and_methods(batches):
    run_both(Calls, [{"link": b} for b in batches])


@settings(max_examples=60)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "a": st.lists(st.tuples(small, small, st.integers(0, 4)), max_size=6),
                "b": st.lists(st.tuples(small, small, st.integers(0, 4)), max_size=6),
                "e": st.lists(st.tuples(small, small, st.integers(0, 4)), max_size=6),
            }
        ),
        min_size=1,
        max_size=3,
    )
)
def test_three_way_joins(batches):
    run_both(ThreeWay, batches)


def test_three_way_joins_are_generated_unless_a_cross_product():
    p = ThreeWay()
    assert [isinstance(r.body, FusedMapEval) for r in p._rt.rules] == [True, True, True, False]


def test_the_fast_paths_are_taken():
    cases = [(TC, 1), (Dist, 1), (Paths, 0), (Paths, 1), (Project, 0), (Project, 1)]
    cases += [(Calls, i) for i in range(5)]
    cases += [(Filtered, i) for i in range(5)]
    for cls, rule in cases:
        assert isinstance(cls()._rt.rules[rule].body, FusedMapEval), cls
        assert not isinstance(cls(inline=False)._rt.rules[rule].body, FusedMapEval)
    # rows nobody's function receives are plain tuples inside, named outside
    p = Dist()
    assert p._rt.rels["link"].row_type is tuple
    p.link.insert([(0, 1, 2)])
    p.source.insert([(0, lmin(0))])
    p.tick()
    (row,) = [r for r in p.dist if r.v == 1]
    assert row.d == lmin(2) and type(row).__name__ == "dist"


def test_rows_a_function_receives_stay_named():
    seen = []

    class P(Program):
        a = table(["x", "y"])
        b = table(["x", "y"])
        c = table(["x"])

        @bloom
        def rules(self):
            self.b <= self.a.map(lambda r: (r.y, r.x))  # inlined
            self.c <= self.a.map(lambda r: seen.append(r) or (r.x,))  # called

    p = P()
    assert p._rt.rels["a"].row_type is not tuple
    assert p._rt.rels["b"].row_type is tuple
    p.a.insert([(1, 2)])
    p.tick()
    assert seen[0].y == 2
    assert {tuple(r) for r in p.b} == {(2, 1)}


def test_a_whole_row_as_a_value_stays_named():
    class P(Program):
        a = table(["x", "y"])
        b = table(["k"], ["row"])

        @bloom
        def rules(self):
            self.b <= self.a.map(lambda r: (r.x, r))

    for inline in (True, False):
        p = P(inline=inline)
        p.a.insert([(1, 2)])
        p.tick()
        (row,) = p.b
        assert row.row.y == 2 and type(row.row).__name__ == "a"


def test_expression_errors_are_the_same_and_roll_back():
    class P(Program):
        a = table(["k"], ["n", "m"])
        b = table(["k", "z"])
        out = table(["k", "q"])

        @bloom
        def rules(self):
            self.out <= self.a.join(self.b, self.a.k == self.b.k).map(
                lambda a, b: (b.z, a.n // a.m)
            )

    for inline in (True, False):
        p = P(inline=inline)
        # k=2 has no partner in b: its division by zero is never evaluated
        p.a.insert([(1, 6, 3), (2, 1, 0)])
        p.b.insert([(1, "x")])
        p.tick()
        assert {tuple(r) for r in p.out} == {("x", 2)}
        p.b.insert([(2, "y")])
        with pytest.raises(ZeroDivisionError) as ei:
            p.tick()
        assert any("rule" in n for n in ei.value.__notes__)
        assert {tuple(r) for r in p.out} == {("x", 2)}
        assert len(p.b) == 1


def test_key_conflict_is_reported_the_same():
    class P(Program):
        a = table(["x", "y"])
        out = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.out <= self.a.map(lambda r: (r.x, r.y))

    for inline in (True, False):
        p = P(inline=inline)
        p.a.insert([(1, 2), (1, 3)])
        with pytest.raises(KeyConstraintError, match="'out'"):
            p.tick()
        assert len(p.out) == 0


def test_lattice_in_a_key_column_is_still_rejected():
    class P(Program):
        a = table(["x"], ["c"])
        out = table(["k", "v"])

        @bloom
        def rules(self):
            self.out <= self.a.map(lambda r: (r.c, r.x))  # r.c is a value column: checked

    for inline in (True, False):
        p = P(inline=inline)
        p.a.insert([(1, lmin(3))])
        with pytest.raises(ProgramError, match="key column"):
            p.tick()


def test_deferred_and_scratch_heads_are_not_prefiltered():
    class P(Program):
        a = table(["k"], ["c"])
        nxt = table(["k"], ["c"])
        now = scratch(["k"], ["c"])

        @bloom
        def rules(self):
            self.nxt < +self.a.map(lambda r: (r.k, r.c + 1))
            self.now <= self.a.map(lambda r: (r.k, r.c))

    for inline in (True, False):
        p = P(inline=inline)
        p.a.insert([(1, lmin(5))])
        p.tick()
        assert {(r.k, r.c) for r in p.now} == {(1, lmin(5))}
        assert len(p.nxt) == 0
        p.tick()
        assert {(r.k, r.c) for r in p.nxt} == {(1, lmin(6))}
        assert {(r.k, r.c) for r in p.now} == {(1, lmin(5))}  # re-derived each tick


def test_soft_state_refresh_is_kept():
    class P(Program):
        src = table(["k", "v"])
        soft = table(["k"], ["v"], ttl=10)

        @bloom
        def rules(self):
            self.soft <= self.src.map(lambda r: (r.k, r.v))

    now = [0.0]
    p = P(clock=lambda: now[0])
    p.src.insert([(1, "x")])
    p.tick()
    now[0] = 8.0
    p.tick()  # re-derived: lifetime refreshed to 18
    now[0] = 15.0
    p.tick()
    assert {(r.k, r.v) for r in p.soft} == {(1, "x")}


def test_subclass_values_take_the_general_path():
    class lmin2(lmin):
        wrapper_name = "lmin2"

    for inline in (True, False):
        p = Dist(inline=inline)
        p.source.insert([(0, lmin2(0))])
        p.link.insert([(0, 1, 2), (1, 2, 2), (0, 2, 9)])
        p.tick()
        got = {r.v: r.d for r in p.dist}
        assert got[2] == lmin2(4) and type(got[2]) is lmin2


@pytest.mark.parametrize("opt", ["inline", "prioritize"])
def test_options_are_checked(opt):
    with pytest.raises(ProgramError, match=opt):
        TC(**{opt: "yes"})
    assert getattr(TC(**{opt: False})._rt, opt) is False


def test_generated_code_is_shared_and_shown_in_tracebacks():
    import traceback

    from blooml.engine import _codegen

    TC()
    n = len(_codegen._FUNCS)
    for _ in range(5):
        TC()
    assert len(_codegen._FUNCS) == n  # compiled once per process

    class P(Program):
        a = table(["k"], ["n"])
        out = table(["k", "q"])

        @bloom
        def rules(self):
            self.out <= self.a.map(lambda a: (a.k, 1 // a.n))

    p = P()
    p.a.insert([(1, 0)])
    with pytest.raises(ZeroDivisionError) as ei:
        p.tick()
    text = "".join(traceback.format_exception(ei.value))
    assert "blooml generated" in text and "for r0 in drows" in text


def test_a_rebound_lattice_global_is_seen_when_a_program_is_created(monkeypatch):
    class P(Program):
        a = table(["k"], ["v"])
        b = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.b <= self.a.map(lambda r: (r.k, lmin(r.v)))

    def run() -> Any:
        p = P()
        p.a.insert([(1, 3), (2, 5)])
        p.tick()
        return p, {r.k: r.v for r in p.b}

    p, got = run()
    assert isinstance(p._rt.rules[0].body, FusedMapEval) and got == {1: lmin(3), 2: lmin(5)}
    monkeypatch.setitem(globals(), "lmin", lmax)  # the function now builds lmax values
    p, got = run()
    assert isinstance(p._rt.rules[0].body, FusedMapEval) and got == {1: lmax(3), 2: lmax(5)}
    monkeypatch.setitem(globals(), "lmin", lambda v: ("plain", v))  # not a lattice class
    p, got = run()
    assert not isinstance(p._rt.rules[0].body, FusedMapEval)
    assert got == {1: ("plain", 3), 2: ("plain", 5)}
