"""Circuits: building, scheduling, children to a fixed point, errors, DOT, memory."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml.dataflow import (
    Circuit,
    CircuitError,
    CircuitInputError,
    CycleError,
    FixedPointError,
    IndexedZSet,
    Plus,
    Trace,
    Z1Trace,
    ZSet,
)


def test_step_returns_sink_values_and_advances_the_epoch() -> None:
    c = Circuit()
    xs = c.source("xs")
    c.sink("evens", c.filter(xs, lambda x: x % 2 == 0))
    c.sink("all", xs)
    assert c.epoch == 0
    assert c.step({"xs": ZSet({1: 1, 2: 1})}) == {"evens": ZSet({2: 1}), "all": ZSet({1: 1, 2: 1})}
    assert c.epoch == 1
    assert c.step() == {"evens": ZSet(), "all": ZSet()}  # a missing input is empty


def test_node_ids_are_local_indexes_and_global_paths() -> None:
    c = Circuit()
    a = c.source("a")
    child = c.child("loop")
    inner = child.import_(a)
    out = child.export(child.map(inner, lambda x: x))
    assert (a.local_id, a.global_id) == (0, (0,))
    assert inner.global_id == (1, 0) and inner.local_id == 0 and child.path == (1,)
    assert out.global_id == (2,) and c.node((1, 1)).label.startswith("map")
    assert c.node((1, 0)) is inner and child.node((1, 0)) is inner
    with pytest.raises(CircuitError):
        c.node((9,))
    with pytest.raises(TypeError):
        bool(a)
    assert "import a" in repr(inner)


def test_feedback_loop_is_not_a_cycle_and_delays_by_one_step() -> None:
    c = Circuit()
    x = c.source("x")
    fb = c.feedback()
    total = c.plus(x, fb)  # running sum: total = x + z^-1(total)
    c.connect(fb, total)
    c.sink("total", total)
    assert c.step({"x": ZSet({1: 1})})["total"] == ZSet({1: 1})
    assert c.step({"x": ZSet({2: 1})})["total"] == ZSet({1: 1, 2: 1})
    assert c.step({"x": ZSet({1: -1})})["total"] == ZSet({2: 1})


def test_z1_as_a_feed_forward_operator_node() -> None:
    c = Circuit()
    x = c.source("x")
    c.sink("prev", c.z1(x))
    assert c.step({"x": ZSet({1: 1})})["prev"] == ZSet()
    assert c.step({"x": ZSet({2: 1})})["prev"] == ZSet({1: 1})


def test_trace_nodes_and_consolidate() -> None:
    c = Circuit()
    x = c.source("x")
    before = c.feedback(Z1Trace())
    now = c.trace_append(x, before)
    c.connect(before, now)
    c.sink("all", c.consolidate(now))
    c.sink("trace", now)
    c.step({"x": ZSet({"a": 1})})
    out = c.step({"x": ZSet({"a": -1, "b": 1})})
    assert out["all"] == ZSet({"b": 1})
    assert list(out["trace"]) == [("a", None, 0, 1), ("a", None, 1, -1), ("b", None, 1, 1)]


def _reachability() -> Circuit:
    """reach = roots + reach ⋈ edges, as a child circuit over deltas (DBSP style)."""
    c = Circuit()
    roots, edges = c.source("roots"), c.source("edges")
    loop = c.child("reach")
    r_in, e_in = loop.import_(roots), loop.import_(edges)
    prev = loop.feedback(label="reach (previous iteration)")
    by_dst = loop.index_with(prev, lambda n: n)
    e_idx = loop.index_with(e_in, lambda e: e[0])
    step = loop.incremental_join(by_dst, e_idx, lambda k, n, e: e[1])
    new = loop.incremental_distinct(loop.plus(r_in, step))
    loop.connect(prev, new)
    c.sink("reach", loop.export(new, "reach"))
    return c


def _closure(roots: set[int], edges: set[tuple[int, int]]) -> set[int]:
    seen, todo = set(roots), list(roots)
    while todo:
        n = todo.pop()
        for a, b in edges:
            if a == n and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def test_child_circuit_iterates_to_its_fixed_point() -> None:
    c = _reachability()
    out = c.step({"roots": ZSet({0: 1}), "edges": ZSet({(0, 1): 1, (1, 2): 1, (2, 0): 1})})
    assert out["reach"] == ZSet({0: 1, 1: 1, 2: 1})
    out = c.step({"edges": ZSet({(1, 2): -1})})
    assert out["reach"] == ZSet({2: -1})
    out = c.step({"edges": ZSet({(0, 2): 1, (2, 3): 1})})
    assert out["reach"] == ZSet({2: 1, 3: 1})


ops = st.lists(
    st.tuples(st.booleans(), st.tuples(st.integers(0, 5), st.integers(0, 5))), max_size=15
)


@given(ops)
def test_child_circuit_is_incremental_under_inserts_and_deletes(changes) -> None:  # type: ignore[no-untyped-def]
    c = _reachability()
    edges: set[tuple[int, int]] = set()
    view: ZSet = c.step({"roots": ZSet({0: 1})})["reach"]
    for insert, e in changes:
        if insert == (e in edges):
            continue
        (edges.add if insert else edges.discard)(e)
        view = view + c.step({"edges": ZSet({e: 1 if insert else -1})})["reach"]
        assert view == ZSet({n: 1 for n in _closure({0}, edges)})


def test_fixed_point_error_when_a_child_never_settles() -> None:
    c = Circuit()
    x = c.source("x")
    loop = c.child("counter", max_iterations=50)
    inner = loop.import_(x)
    prev = loop.feedback()
    nxt = loop.map(loop.plus(inner, prev), lambda n: n + 1)  # a new element every iteration
    loop.connect(prev, nxt)
    c.sink("out", loop.export(nxt))
    with pytest.raises(FixedPointError) as info:
        c.step({"x": ZSet({0: 1})})
    assert info.value.iterations == 50 and info.value.circuit == "counter"
    assert c.epoch == 0


def test_a_failed_step_changes_nothing() -> None:
    def boom(x: int) -> int:
        if x == 13:
            raise ValueError("unlucky")
        return x

    c = _reachability()
    c.step({"roots": ZSet({0: 1}), "edges": ZSet({(0, 1): 1})})
    fresh = _reachability()
    fresh.step({"roots": ZSet({0: 1}), "edges": ZSet({(0, 1): 1})})
    # break a child mid-iteration: the map raises on 13 at iteration 1
    bad = Circuit()
    src = bad.source("x")
    loop = bad.child("loop")
    prev = loop.feedback()
    nxt = loop.plus(loop.import_(src), loop.map(prev, boom))
    loop.connect(prev, loop.incremental_distinct(nxt))
    bad.sink("out", loop.export(prev))
    bad.step({"x": ZSet({1: 1})})
    with pytest.raises(ValueError, match="unlucky"):
        bad.step({"x": ZSet({13: 1, 2: 1})})
    assert bad.epoch == 1
    # 2 was part of the failed step: had it been kept, distinct would not report it again
    assert bad.step({"x": ZSet({2: 1})})["out"] == ZSet({2: 1})
    assert c.step({"edges": ZSet({(1, 2): 1})}) == fresh.step({"edges": ZSet({(1, 2): 1})})


def test_input_errors() -> None:
    c = Circuit()
    c.source("xs")
    c.source("ix", kind=IndexedZSet)
    with pytest.raises(CircuitInputError) as info:
        c.step({"ys": ZSet()})
    assert info.value.name == "ys" and info.value.expected == ["ix", "xs"]
    with pytest.raises(CircuitInputError, match="expected a ZSet, got dict"):
        c.step({"xs": {1: 1}})
    with pytest.raises(CircuitInputError, match="expected a IndexedZSet"):
        c.step({"ix": ZSet()})
    assert c.epoch == 0


def test_wiring_errors() -> None:
    c = Circuit("main")
    x = c.source("x")
    other = Circuit("other")
    y = other.source("y")
    with pytest.raises(CircuitError, match="belongs to circuit 'other'"):
        c.map(y, str)
    with pytest.raises(CircuitError, match="already exists"):
        c.source("x")
    with pytest.raises(CircuitError, match="takes 2 input"):
        c.operator(Plus(), x)
    with pytest.raises(CircuitError, match="expected an Operator"):
        c.operator(len, x)  # type: ignore[arg-type]
    with pytest.raises(CircuitError, match="is not one"):
        c.connect(x, x)
    with pytest.raises(CircuitError, match="for child circuits"):
        c.import_(x)
    sink = c.sink("out", x)
    with pytest.raises(CircuitError, match="is a sink"):
        c.map(sink, str)
    loop = c.child("loop")
    with pytest.raises(CircuitError, match="import_"):
        loop.map(x, str)
    with pytest.raises(CircuitError, match="is a child circuit"):
        c.map(c.node(loop.path), str)
    with pytest.raises(CircuitError, match="needs a callback"):
        loop.sink("s", loop.import_(x))
    with pytest.raises(CircuitError, match="runs a root circuit"):
        loop.step()
    with pytest.raises(CircuitError, match="sources belong to the root"):
        loop.source("inner")
    fb = c.feedback()
    with pytest.raises(CircuitError, match="never connected"):
        c.step()
    c.connect(fb, x)
    with pytest.raises(CircuitError, match="already connected"):
        c.connect(fb, x)


def test_cycle_without_delay_is_reported() -> None:
    c = Circuit("main")
    x = c.source("x")
    loop = c.child("loop")
    inner = loop.import_(x)
    out = loop.export(inner, "out")
    back = c.plus(x, out)  # depends on the child...
    loop.import_(back)  # ...which now depends on it: a cycle through no delay
    with pytest.raises(CycleError) as info:
        c.step()
    assert "loop" in info.value.cycle and "main" in str(info.value)


def test_inspect_and_child_sink_callbacks() -> None:
    seen: list[Any] = []
    c = Circuit()
    x = c.source("x")
    c.sink("out", c.inspect(x, lambda v, t: seen.append(("inspect", t)), with_time=True))
    loop = c.child("loop")
    loop.sink("debug", loop.import_(x), callback=lambda v: seen.append(("child", v)))
    c.step({"x": ZSet({1: 1})})
    # nothing is fed back, so iteration 1 would be a no-op: the child stops after iteration 0
    assert seen == [("inspect", 0), ("child", ZSet({1: 1}))]


def test_dot_draws_nodes_edges_clusters_and_feedback() -> None:
    dot = _reachability().dot()
    assert dot.startswith('digraph "root" {') and dot.rstrip().endswith("}")
    assert 'subgraph "cluster_n2"' in dot and 'label="child reach"' in dot
    assert 'label="z⁻¹"' in dot and "style=dashed" in dot
    assert 'n0 [label="roots", shape=invhouse];' in dot
    assert "n0 -> n2_0 [style=bold];" in dot  # the import edge from the parent


def test_memory_report_and_compaction_keep_results() -> None:
    c, d = _reachability(), _reachability()
    steps = [
        {"roots": ZSet({0: 1}), "edges": ZSet({(0, 1): 1, (1, 2): 1})},
        {"edges": ZSet({(2, 0): 1})},
        {"edges": ZSet({(0, 1): -1})},
        {"edges": ZSet({(0, 1): 1, (2, 3): 1})},
        {"edges": ZSet({(0, 1): -1})},
    ]
    for i, s in enumerate(steps):
        assert c.step(s) == d.step(s)
        if i >= 1:
            before = d.memory()
            after = d.compact()
            assert after.entries <= before.entries and after.total_bytes > 0
    assert set(after.traces) and all(isinstance(k, str) for k in after.traces)
    for s in [{"edges": ZSet({(0, 1): 1})}, {"edges": ZSet({(1, 2): -1})}]:
        assert c.step(s) == d.step(s)
    with pytest.raises(CircuitError, match="frontier"):
        d.compact(99)


def test_source_values_are_traces_only_when_built() -> None:
    c = Circuit()
    t = c.integrate(c.source("x"))
    assert c.integrate(c.nodes[0]) is t  # one trace per stream
    c.sink("t", t)
    c.step({"x": ZSet({1: 1})})
    assert isinstance(c.step()["t"], Trace)


def test_a_circuit_cannot_grow_after_it_ran() -> None:
    c = Circuit()
    x = c.source("x")
    c.step()
    with pytest.raises(CircuitError, match="already run 1 step"):
        c.map(x, str)
    assert len(c.nodes) == 1


def test_grandchild_circuits_run_at_three_level_times() -> None:
    """reachability computed two levels down; the middle level just passes streams through."""
    times: list[Any] = []
    c = Circuit()
    roots, edges = c.source("roots"), c.source("edges")
    mid = c.child("mid")
    m_roots, m_edges = mid.import_(roots), mid.import_(edges)
    low = mid.child("low")
    r, e = low.import_(m_roots), low.import_(m_edges)
    prev = low.feedback()
    low.inspect(prev, lambda v, t: times.append(t), with_time=True)
    step = low.incremental_join(
        low.index_with(prev, lambda n: n),
        low.index_with(e, lambda ed: ed[0]),
        lambda k, n, ed: ed[1],
    )
    new = low.incremental_distinct(low.plus(r, step))
    low.connect(prev, new)
    c.sink("reach", mid.export(low.export(new)))
    edges_now = {(0, 1), (1, 2), (2, 0), (2, 3)}
    out = c.step({"roots": ZSet({0: 1}), "edges": ZSet({e: 1 for e in edges_now})})
    assert out["reach"] == ZSet({0: 1, 1: 1, 2: 1, 3: 1})
    assert all(len(t) == 3 and t[0] == 0 for t in times) and (0, 0, 0) in times
    out = c.step({"edges": ZSet({(1, 2): -1})})
    assert out["reach"] == ZSet({2: -1, 3: -1})
    out = c.step({"edges": ZSet({(1, 3): 1, (3, 2): 1})})
    assert out["reach"] == ZSet({2: 1, 3: 1})
    assert max(t[0] for t in times) == 2
