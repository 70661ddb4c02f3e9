"""Every operator of the spec's table: its example, its algebra, its incremental version."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from _dataflow_strategies import elements, indexed, pair_zsets, streams, weights, zsets
from hypothesis import given
from hypothesis import strategies as st

from blooml.dataflow import (
    COUNT,
    Z1,
    Aggregate,
    AggregateIncremental,
    Aggregator,
    Circuit,
    Consolidate,
    Distinct,
    DistinctIncremental,
    DistinctTrace,
    Filter,
    ImpureAggregateError,
    IndexedZSet,
    IndexWith,
    Inspect,
    JoinStream,
    JoinTrace,
    Map,
    Minus,
    Negate,
    Plus,
    Trace,
    TraceAppend,
    TraceKindError,
    UntimedTraceAppend,
    Z1Trace,
    ZSet,
    aggregate,
    consolidate,
    distinct_incremental,
    distinct_trace,
    join_stream,
    join_trace,
    leq,
)


def pair(k: Any, v1: Any, v2: Any) -> Any:
    return (k, (v1, v2))


# -- the spec's examples ----------------------------------------------------------------------


def test_aggregate_example_and_builtins() -> None:
    z = IndexedZSet({1: {"foo": 1, "bar": 1}, 2: {"baz": 1}})
    assert Aggregate("count")(z) == ZSet({(1, 2): 1, (2, 1): 1})
    nums = IndexedZSet({"a": {3: 2, 5: 1, 7: -1}, "b": {4: 1}})
    assert aggregate("sum", nums) == ZSet({("a", 3 * 2 + 5 - 7): 1, ("b", 4): 1})
    assert aggregate("min", nums) == ZSet({("a", 3): 1, ("b", 4): 1})
    assert aggregate("max", nums) == ZSet({("a", 5): 1, ("b", 4): 1})  # 7 has weight -1
    assert aggregate(COUNT, nums) == ZSet({("a", 2): 1, ("b", 1): 1})
    assert nums.aggregate(Aggregator("n_values", len)) == ZSet({("a", 3): 1, ("b", 1): 1})


def test_user_aggregates_must_be_pure() -> None:
    calls = itertools.count()
    with pytest.raises(ImpureAggregateError) as info:
        aggregate(lambda group: next(calls), IndexedZSet({1: {1: 1}}))
    assert info.value.results == (0, 1)
    with pytest.raises(ValueError):
        aggregate("median", IndexedZSet())
    with pytest.raises(TypeError):
        aggregate(3, IndexedZSet())  # type: ignore[arg-type]


def test_consolidate_example() -> None:
    trace = Trace([(0, 0, 0, 1), (0, 0, 0, -1), (0, 1, 0, 1), (0, 1, 0, 1), (1, 2, 0, 2)])
    trace = trace.insert(IndexedZSet({1: {3: 1}}), 0).insert(IndexedZSet({1: {3: -1}}), 0)
    # The spec writes `{1, 4, 0 -1}` and `{2, 4, 0 1}` without a comma; intended 4-tuples.
    trace = Trace([*trace, (1, 4, 0, -1), (2, 2, 0, 1), (2, 4, 0, 1)])
    expect = ZSet({(0, 1): 2, (1, 2): 2, (1, 4): -1, (2, 2): 1, (2, 4): 1})
    assert Consolidate()(trace) == expect == consolidate(trace)
    assert consolidate(Trace().insert(ZSet({"a": 2}), 0)) == ZSet({"a": 2})


def test_distinct_example() -> None:
    assert Distinct()(ZSet({0: 1, 1: 2, 2: -1, 3: 0})) == ZSet({0: 1, 1: 1})


def test_filter_example() -> None:
    # The spec's elements also carry times (0, 0, 1); ZSets flowing on an edge are untimed.
    assert Filter(lambda x: x >= 1)(ZSet({0: 1, 1: 2, 2: -3})) == ZSet({1: 2, 2: -3})


def test_index_with_example() -> None:
    got = IndexWith(lambda e: e[0])(ZSet({(0, 1, 1): 1, (1, 2, 1): 1, (1, 3, 2): -1}))
    assert got == IndexedZSet([((0, (0, 1, 1)), 1), ((1, (1, 2, 1)), 1), ((1, (1, 3, 2)), -1)])


def test_inspect_example() -> None:
    seen: list[Any] = []
    z = ZSet({0: 1, 1: 1})
    assert Inspect(seen.append)(z) is z and seen == [z]
    timed: list[Any] = []
    Inspect(lambda v, t: timed.append((v, t)), with_time=True)(z, time=(3, 1))
    assert timed == [(z, (3, 1))]


def test_map_example() -> None:
    # The spec's Map example is a copy of the Filter example (it even calls `filter`). The
    # intended map applies the function to each element and sums the weights of collisions:
    # 0 -> False (1), 1 -> True (2), 2 -> True (-3).
    assert Map(lambda x: x >= 1)(ZSet({0: 1, 1: 2, 2: -3})) == ZSet({False: 1, True: -1})
    assert Map(lambda x: x * 10)(ZSet({0: 1, 1: 2})) == ZSet({0: 1, 10: 2})


def test_negate_example() -> None:
    assert Negate()(ZSet({0: 1, 1: -1, 2: -2})) == ZSet({0: -1, 1: 1, 2: 2})
    assert Negate()(IndexedZSet({1: {2: 3}})) == IndexedZSet({1: {2: -3}})


def test_plus_and_minus_examples() -> None:
    a = ZSet({0: 1, 1: 1, 2: 2, 3: 1})
    b = ZSet({0: 1, 1: -1, 2: 1})
    assert Plus()(a, b) == ZSet({0: 2, 2: 3, 3: 1})
    assert Minus()(a, b) == ZSet({1: 2, 2: 1, 3: 1})
    ia, ib = a.index_with(lambda x: x % 2), b.index_with(lambda x: x % 2)
    assert Plus()(ia, ib) == (a + b).index_with(lambda x: x % 2)  # indexed Z-sets too
    with pytest.raises(TypeError):
        Plus()(a, ia)


def test_z1_and_z1_trace_delay_by_one_step() -> None:
    z1 = Z1()
    assert z1(ZSet({1: 1})) == ZSet() and z1(ZSet({2: 1})) == ZSet({1: 1})
    zt = Z1Trace()
    t1 = Trace().insert(ZSet({1: 1}), 0)
    assert len(zt(t1)) == 0 and zt(Trace()) is t1
    with pytest.raises(TypeError):
        zt(ZSet())


def test_trace_append_and_untimed_trace_append() -> None:
    t = TraceAppend()(ZSet({"a": 1}), Trace(), time=(2, 1))
    assert list(t) == [("a", None, (2, 1), 1)]
    u = UntimedTraceAppend()(ZSet({"a": 1}), Trace(), time=7)
    assert list(u) == [("a", None, None, 1)]
    assert u.as_of(0) == ZSet({"a": 1})  # untimed updates are below every time


def test_join_stream_example() -> None:
    a = IndexedZSet({"a": {1: 1}, "b": {2: 2}, "c": {2: 1}})
    b = IndexedZSet({"a": {1: 1}, "b": {3: 1, 4: -1}})
    expect = ZSet({("a", (1, 1)): 1, ("b", (2, 3)): 2, ("b", (2, 4)): -2})
    assert JoinStream(pair)(a, b) == expect == join_stream(pair, a, b)


def test_join_trace_example() -> None:
    zset = IndexedZSet([(("a", 0), 1), (("a", 0), -1), (("a", 1), 1), (("b", 2), 2)])
    zset = zset + IndexedZSet({"c": {2: 1}})
    trace = Trace(
        [("a", 1, 0, 1), ("b", -3, 0, -1), ("b", 3, 0, 1), ("b", 4, 0, -1), ("c", 4, 0, 1)]
    )
    # The spec's join_fun builds {key, {v1, v2}} but its result is printed flat ({:a, 1, 1});
    # we test the nested shape the join function produces.
    expect = ZSet(
        {
            ("a", (1, 1)): 1,
            ("b", (2, -3)): -2,
            ("b", (2, 3)): 2,
            ("b", (2, 4)): -2,
            ("c", (2, 4)): 1,
        }
    )
    assert JoinTrace(pair)(zset, trace) == expect == join_trace(pair, zset, trace)
    with pytest.raises(TraceKindError):
        join_trace(pair, zset, Trace().insert(ZSet({1: 1}), 0))


def test_distinct_trace_example() -> None:
    # The spec's rule has typos: `w1 <= =` means `w1 <= 0`, `w1 + w3 + w4 <= 0` means
    # `w1 + w2 + w3 + w <= 0`, and d1 is 0 otherwise. Its traces t01, t10, t11 hold the
    # batches b00, (b00, b01), (b00, b01, b10): the updates of every earlier time.
    b00 = ZSet({0: 1, 2: 1, 3: -1})
    b01 = ZSet({5: 1})
    b10 = ZSet({5: 1})
    b11 = ZSet({0: 1, 1: 1, 2: -1, 3: 1, 4: -1})
    t00 = Trace()
    t01 = t00.insert(b00, (0, 0))
    t10 = t01.insert(b01, (0, 1))
    t11 = t10.insert(b10, (1, 0))
    assert distinct_trace(b00, t00, (0, 0)) == ZSet({0: 1, 2: 1})
    assert distinct_trace(b01, t01, (0, 1)) == ZSet({5: 1})
    assert distinct_trace(b10, t10, (1, 0)) == ZSet({5: 1})
    assert distinct_trace(b11, t11, (1, 1)) == ZSet({1: 1, 2: -1, 5: -1})
    # The operator finds element 5 (no input at (1, 1)) through its schedule.
    op = DistinctTrace()
    outs = [
        op(b, t, time=tm)
        for b, t, tm in [
            (b00, t00, (0, 0)),
            (b01, t01, (0, 1)),
            (b10, t10, (1, 0)),
            (b11, t11, (1, 1)),
        ]
    ]
    assert outs[3] == ZSet({1: 1, 2: -1, 5: -1}) and not op.pending((1,))


def test_distinct_incremental_examples() -> None:
    # The spec writes its traces as {element, time, weight} triples.
    batch = ZSet({0: 2, 2: 1, 3: -1})
    t1 = Trace().insert(ZSet({0: 1}), 0)
    t2 = Trace().insert(ZSet({2: 1, 3: 1}), 1)
    t3 = Trace().insert(ZSet({0: -1}), 2)
    assert distinct_incremental(batch, t1) == ZSet({2: 1})
    assert distinct_incremental(batch, t2) == ZSet({0: 1, 3: -1})
    assert DistinctIncremental()(batch, t3) == ZSet({0: 1, 2: 1})


def test_operators_reject_wrong_input_types() -> None:
    with pytest.raises(TypeError, match="Map: input must be a ZSet"):
        Map(str)(IndexedZSet())
    with pytest.raises(TypeError):
        JoinStream(pair)(ZSet(), IndexedZSet())
    with pytest.raises(TypeError, match="takes 2 input"):
        Plus()(ZSet())
    assert "join_stream(pair)" in JoinStream(pair).label()


# -- linearity ----------------------------------------------------------------------------------

LINEAR = [
    Map(lambda x: x % 3),
    Filter(lambda x: x % 2 == 0),
    Negate(),
    Inspect(lambda z: None),
]


@pytest.mark.parametrize("op", LINEAR, ids=lambda op: op.name)
@given(a=zsets, b=zsets)
def test_linear_operators_commute_with_plus(op, a: ZSet, b: ZSet) -> None:  # type: ignore[no-untyped-def]
    assert op(a + b) == op(a) + op(b)
    assert op(ZSet()) == ZSet()


@given(zsets, zsets)
def test_index_with_is_linear(a: ZSet, b: ZSet) -> None:
    f = IndexWith(lambda x: x % 2)
    assert f(a + b) == f(a) + f(b)


@given(zsets, zsets, zsets, zsets)
def test_plus_and_minus_are_linear(a1: ZSet, a2: ZSet, b1: ZSet, b2: ZSet) -> None:
    assert Plus()(a1 + a2, b1 + b2) == Plus()(a1, b1) + Plus()(a2, b2)
    assert Minus()(a1 + a2, b1 + b2) == Minus()(a1, b1) + Minus()(a2, b2)


@given(streams(zsets), streams(zsets))
def test_z1_is_linear_over_streams(s1: list[ZSet], s2: list[ZSet]) -> None:
    n = min(len(s1), len(s2))

    def run(stream: list[ZSet]) -> list[ZSet]:
        z = Z1()
        return [z(x) for x in stream]

    summed = run([a + b for a, b in zip(s1[:n], s2[:n], strict=True)])
    assert summed == [a + b for a, b in zip(run(s1[:n]), run(s2[:n]), strict=True)]


@given(indexed, indexed, st.integers(0, 3))
def test_consolidate_is_linear(a: IndexedZSet, b: IndexedZSet, t: int) -> None:
    ta, tb = Trace().insert(a, t), Trace().insert(b, t + 1)
    both = ta.insert(b, t + 1)
    assert consolidate(both) == consolidate(ta) + consolidate(tb)


@given(indexed, indexed, indexed)
def test_join_stream_is_bilinear(a1: IndexedZSet, a2: IndexedZSet, b: IndexedZSet) -> None:
    assert join_stream(pair, a1 + a2, b) == join_stream(pair, a1, b) + join_stream(pair, a2, b)
    assert join_stream(pair, b, a1 + a2) == join_stream(pair, b, a1) + join_stream(pair, b, a2)


@given(indexed, indexed, indexed)
def test_join_trace_is_bilinear(a1: IndexedZSet, a2: IndexedZSet, b: IndexedZSet) -> None:
    tb = Trace().insert(b, 0)
    assert join_trace(pair, a1 + a2, tb) == join_trace(pair, a1, tb) + join_trace(pair, a2, tb)
    t12 = Trace().insert(a1, 0).insert(a2, 1)
    assert join_trace(pair, b, t12) == join_trace(pair, b, Trace().insert(a1, 0)) + join_trace(
        pair, b, Trace().insert(a2, 1)
    )
    assert join_trace(pair, a1, Trace().insert(b, 0)) == join_stream(pair, a1, b)


# -- incremental = D ∘ Q ∘ I at the root ------------------------------------------------------


def _integrate(stream: list[Any], zero: Any) -> list[Any]:
    out, acc = [], zero
    for x in stream:
        acc = acc + x
        out.append(acc)
    return out


def _differentiate(stream: list[Any], zero: Any) -> list[Any]:
    return [x - (stream[i - 1] if i else zero) for i, x in enumerate(stream)]


@given(streams(zsets, max_size=8))
def test_incremental_distinct_is_d_distinct_i(xs: list[ZSet]) -> None:
    c = Circuit()
    x = c.source("x")
    c.sink("out", c.incremental_distinct(x))
    got = [c.step({"x": z})["out"] for z in xs]
    assert got == _differentiate([z.distinct() for z in _integrate(xs, ZSet())], ZSet())


@given(streams(pair_zsets, max_size=6), streams(pair_zsets, max_size=6))
def test_incremental_join_is_d_join_i(xs: list[ZSet], ys: list[ZSet]) -> None:
    n = min(len(xs), len(ys))
    xs, ys = xs[:n], ys[:n]
    key = lambda t: t[0]  # noqa: E731
    c = Circuit()
    a = c.index_with(c.source("a"), key)
    b = c.index_with(c.source("b"), key)
    c.sink("out", c.incremental_join(a, b, pair))
    got = [c.step({"a": x, "b": y})["out"] for x, y in zip(xs, ys, strict=True)]
    full = [
        join_stream(pair, ia.index_with(key), ib.index_with(key))
        for ia, ib in zip(_integrate(xs, ZSet()), _integrate(ys, ZSet()), strict=True)
    ]
    assert got == _differentiate(full, ZSet())


@pytest.mark.parametrize("agg", ["count", "sum", "min", "max"])
@given(xs=streams(zsets, max_size=6))
def test_incremental_aggregate_is_d_aggregate_i(agg: str, xs: list[ZSet]) -> None:
    key = lambda x: x % 3  # noqa: E731
    c = Circuit()
    c.sink("out", c.incremental_aggregate(c.index_with(c.source("x"), key), agg))
    got = [c.step({"x": x})["out"] for x in xs]
    full = [aggregate(agg, z.index_with(key)) for z in _integrate(xs, ZSet())]
    assert got == _differentiate(full, ZSet())


# -- incremental = D ∘ Q ∘ I in nested time ----------------------------------------------------

grid_cells = st.dictionaries(elements, weights, max_size=3).map(ZSet)


def _grid(draw_cells: list[ZSet], dims: tuple[int, ...]) -> dict[tuple[int, ...], ZSet]:
    times = list(itertools.product(*(range(d) for d in dims)))
    return {
        t: draw_cells[i % len(draw_cells)] if i < len(draw_cells) else ZSet()
        for i, t in enumerate(times)
    }


def _nested_expected(q: Any, inputs: list[dict], t: tuple[int, ...], zero: Any) -> Any:
    """The Möbius delta at t of q applied to the integrals (product order) of the inputs."""
    out = zero
    for mask in itertools.product((0, 1), repeat=len(t)):
        c = tuple(x - m for x, m in zip(t, mask, strict=True))
        if min(c) < 0:
            continue
        integrals = []
        for grid in inputs:
            acc = None
            for s, z in grid.items():
                if leq(s, c):
                    acc = z if acc is None else acc + z
            integrals.append(acc if acc is not None else type(next(iter(grid.values())))())
        val = q(*integrals)
        out = out - val if sum(mask) % 2 else out + val
    return out


@given(st.lists(grid_cells, min_size=1, max_size=12), st.sampled_from([(3, 4), (2, 2, 2)]))
def test_distinct_trace_is_d_distinct_i_in_nested_time(cells: list[ZSet], dims) -> None:  # type: ignore[no-untyped-def]
    grid = _grid(cells, dims)
    op = DistinctTrace()
    trace = Trace()
    for t in sorted(grid):
        got = op(grid[t], trace, time=t)
        assert got == _nested_expected(lambda z: z.distinct(), [grid], t, ZSet()), t
        assert got == distinct_trace(grid[t], trace, t)
        trace = trace.insert(grid[t], t)
    assert not op.pending(())


@given(
    st.lists(grid_cells, min_size=1, max_size=12),
    st.lists(grid_cells, min_size=1, max_size=12),
)
def test_nested_join_is_d_join_i_in_nested_time(ca: list[ZSet], cb: list[ZSet]) -> None:
    key = lambda x: x % 2  # noqa: E731
    ga = {t: z.index_with(key) for t, z in _grid(ca, (3, 3)).items()}
    gb = {t: z.index_with(key) for t, z in _grid(cb, (3, 3)).items()}
    now, left, right = JoinStream(pair), JoinTrace(pair), JoinTrace(lambda k, y, x: pair(k, x, y))
    ta, tb = Trace(), Trace()
    for t in sorted(ga):
        got = now(ga[t], gb[t], time=t) + left(ga[t], tb, time=t) + right(gb[t], ta, time=t)
        expect = _nested_expected(lambda a, b: join_stream(pair, a, b), [ga, gb], t, ZSet())
        assert got == expect, t
        ta, tb = ta.insert(ga[t], t), tb.insert(gb[t], t)
    assert not left.pending(()) and not right.pending(())


@given(st.lists(grid_cells, min_size=1, max_size=9))
def test_aggregate_incremental_in_nested_time(cells: list[ZSet]) -> None:
    key = lambda x: x % 2  # noqa: E731
    grid = {t: z.index_with(key) for t, z in _grid(cells, (3, 3)).items()}
    op = AggregateIncremental("sum")
    trace = Trace()
    for t in sorted(grid):
        got = op(grid[t], trace, time=t)
        assert got == _nested_expected(lambda z: aggregate("sum", z), [grid], t, ZSet()), t
        trace = trace.insert(grid[t], t)
