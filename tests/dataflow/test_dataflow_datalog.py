"""Datalog on circuits: incremental results equal recomputation from scratch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.dataflow import (
    Datalog,
    DatalogError,
    StratificationError,
    UnhashableElementError,
    Var,
    ZSet,
    where,
)

N = 6
edges_st = st.tuples(st.integers(0, N - 1), st.integers(0, N - 1))
changes_st = st.lists(
    st.tuples(st.booleans(), st.lists(edges_st, min_size=1, max_size=3)), min_size=1, max_size=10
)


# -- independent oracles ------------------------------------------------------------------------


def closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    reach = set(edges)
    while True:
        more = {(a, d) for (a, b) in reach for (c, d) in edges if b == c} - reach
        if not more:
            return reach
        reach |= more


def same_generation(par: set[tuple[int, int]]) -> set[tuple[int, int]]:
    sg = {(x, y) for (x, p) in par for (y, q) in par if p == q and x != y}
    while True:
        more = {
            (x, y)
            for (x, a) in par
            for (a2, b) in sg
            if a2 == a
            for (y, b2) in par
            if b2 == b and x != y
        } - sg
        if not more:
            return sg
        sg |= more


# -- programs -----------------------------------------------------------------------------------


def tc_program() -> Datalog:
    p = Datalog()
    edge, path = p.relation("edge", 2), p.relation("path", 2)
    X, Y, Z = p.vars("X Y Z")
    p.rule(path(X, Y), edge(X, Y))
    p.rule(path(X, Z), path(X, Y), edge(Y, Z))
    return p


def sg_program() -> Datalog:
    p = Datalog()
    par, sg = p.relation("par", 2), p.relation("sg", 2)
    X, Y, P, A, B = p.vars("X Y P A B")
    ne = where(lambda x, y: x != y, X, Y)
    p.rule(sg(X, Y), par(X, P), par(Y, P), ne)
    p.rule(sg(X, Y), par(X, A), sg(A, B), par(Y, B), ne)
    return p


def negation_program() -> Datalog:
    p = Datalog()
    node, edge = p.relation("node", 1), p.relation("edge", 2)
    reach, unreach = p.relation("reach", 2), p.relation("unreach", 2)
    has_out, sink = p.relation("has_out", 1), p.relation("sink", 1)
    X, Y, Z = p.vars("X Y Z")
    p.rule(reach(X, Y), edge(X, Y))
    p.rule(reach(X, Z), reach(X, Y), edge(Y, Z))
    p.rule(unreach(X, Y), node(X), node(Y), ~reach(X, Y))
    p.rule(has_out(X), edge(X, Var("_")))
    p.rule(sink(X), node(X), ~has_out(X))
    return p


def apply(view, state: dict[str, set], rel: str, insert: bool, facts: list) -> None:  # type: ignore[no-untyped-def]
    before = {n: set(view[n]) for n in view.program.derived()}
    delta = view.update(**{"insert" if insert else "delete": {rel: facts}})
    for f in facts:
        (state[rel].add if insert else state[rel].discard)(f)
    for name in view.program.derived():  # the returned deltas are exactly the changes
        after = set(view[name])
        expect = ZSet({f: 1 for f in after - before[name]}) + ZSet(
            {f: -1 for f in before[name] - after}
        )
        assert delta.get(name, ZSet()) == expect


# -- the required properties --------------------------------------------------------------------


@given(changes_st)
def test_transitive_closure_under_inserts_and_deletes(changes) -> None:  # type: ignore[no-untyped-def]
    p = tc_program()
    view = p.compile()
    state: dict[str, set] = {"edge": set()}
    for insert, facts in changes:
        apply(view, state, "edge", insert, facts)
        assert set(view["path"]) == closure(state["edge"])
        assert set(view["path"]) == p.evaluate(state)["path"]
        assert set(view["edge"]) == state["edge"]


@given(changes_st)
def test_same_generation_under_inserts_and_deletes(changes) -> None:  # type: ignore[no-untyped-def]
    p = sg_program()
    view = p.compile()
    state: dict[str, set] = {"par": set()}
    for insert, facts in changes:
        apply(view, state, "par", insert, facts)
        assert set(view["sg"]) == same_generation(state["par"])
        assert set(view["sg"]) == p.evaluate(state)["sg"]


@given(changes_st, st.lists(st.tuples(st.booleans(), st.integers(0, N - 1)), max_size=6))
def test_stratified_negation_under_inserts_and_deletes(changes, node_changes) -> None:  # type: ignore[no-untyped-def]
    p = negation_program()
    view = p.compile()
    state: dict[str, set] = {"edge": set(), "node": set()}
    apply(view, state, "node", True, [(i,) for i in range(0, N, 2)])
    steps = [("edge", ins, facts) for ins, facts in changes]
    steps += [("node", ins, [(n,)]) for ins, n in node_changes]
    steps.sort(key=lambda s: hash(repr(s)))  # interleave
    for rel, insert, facts in steps:
        apply(view, state, rel, insert, facts)
        nodes = {n for (n,) in state["node"]}
        reach = closure(state["edge"])
        assert set(view["reach"]) == reach
        assert set(view["unreach"]) == {(x, y) for x in nodes for y in nodes} - reach
        assert set(view["sink"]) == {
            (n,) for n in nodes if not any(a == n for a, _ in state["edge"])
        }
        got = p.evaluate(state)
        for name in ("reach", "unreach", "has_out", "sink"):
            assert set(view[name]) == got[name]


@settings(max_examples=30)
@given(changes_st)
def test_mutual_recursion_even_and_odd_paths(changes) -> None:  # type: ignore[no-untyped-def]
    p = Datalog()
    edge, even, odd = p.relation("edge", 2), p.relation("even", 2), p.relation("odd", 2)
    X, Y, Z = p.vars("X Y Z")
    p.rule(odd(X, Y), edge(X, Y))
    p.rule(even(X, Z), odd(X, Y), edge(Y, Z))
    p.rule(odd(X, Z), even(X, Y), edge(Y, Z))
    assert p.strata() == [["even", "odd"]]
    view = p.compile()
    state: dict[str, set] = {"edge": set()}
    for insert, facts in changes:
        apply(view, state, "edge", insert, facts)
        got = p.evaluate(state)
        assert set(view["even"]) == got["even"] and set(view["odd"]) == got["odd"]


@settings(max_examples=15)
@given(changes_st)
def test_compaction_keeps_the_view_exact(changes) -> None:  # type: ignore[no-untyped-def]
    p = tc_program()
    view = p.compile()
    state: dict[str, set] = {"edge": set()}
    for i, (insert, facts) in enumerate(changes):
        apply(view, state, "edge", insert, facts)
        if i % 2:
            report = view.compact()
            assert report.entries >= 0
        assert set(view["path"]) == closure(state["edge"])


# -- features -------------------------------------------------------------------------------------


def test_constants_repeated_variables_anonymous_and_filters() -> None:
    p = Datalog()
    edge = p.relation("edge", 2)
    loop, from0, tagged, up = (
        p.relation("loop", 1),
        p.relation("from0", 1),
        p.relation("tagged", 2),
        p.relation("up", 2),
    )
    X, Y = p.vars("X Y")
    p.rule(loop(X), edge(X, X))
    p.rule(from0(Y), edge(0, Y))
    p.rule(tagged(X, "has-edge"), edge(X, Var("_")))
    p.rule(up(X, Y), edge(X, Y), where(lambda x, y: x < y, X, Y))
    view = p.compile()
    view.insert("edge", (0, 0), (0, 2), (3, 1), (2, 2))
    assert view["loop"] == {(0,), (2,)}
    assert view["from0"] == {(0,), (2,)}
    assert view["tagged"] == {(0, "has-edge"), (3, "has-edge"), (2, "has-edge")}
    assert view["up"] == {(0, 2)}
    assert view.delete("edge", (0, 0), (0, 2)) == {
        "loop": ZSet({(0,): -1}),
        "from0": ZSet({(0,): -1, (2,): -1}),
        "tagged": ZSet({(0, "has-edge"): -1}),
        "up": ZSet({(0, 2): -1}),
    }


def test_inserting_a_present_fact_or_deleting_an_absent_one_is_a_no_op() -> None:
    view = tc_program().compile()
    assert view.insert("edge", (1, 2)) == {"path": ZSet({(1, 2): 1})}
    assert view.insert("edge", (1, 2)) == {}
    assert view.delete("edge", (5, 5)) == {}
    assert view.update(insert={"edge": [[2, 3]]}) == {"path": ZSet({(2, 3): 1, (1, 3): 1})}


def test_strata_and_circuit_shape() -> None:
    p = negation_program()
    assert p.inputs() == ["node", "edge"]
    strata = p.strata()
    assert sorted(strata) == [["has_out"], ["reach"], ["sink"], ["unreach"]]
    assert strata.index(["reach"]) < strata.index(["unreach"])  # negation reads a lower stratum
    assert strata.index(["has_out"]) < strata.index(["sink"])
    view = p.compile()
    dot = p.to_circuit().dot()
    assert "cluster" in dot and "reach" in dot
    assert "stratum" in dot
    with pytest.warns(DeprecationWarning, match="to_circuit"):
        assert "stratum" in view.circuit.dot()
    assert repr(view).startswith("<DatalogView")
    assert view.memory().total_bytes == 0


def test_program_errors() -> None:
    p = Datalog()
    edge, path = p.relation("edge", 2), p.relation("path", 2)
    X, Y, Z = p.vars("X Y Z")
    with pytest.raises(DatalogError, match="arity 2, got 3"):
        edge(X, Y, Z)
    with pytest.raises(DatalogError, match="declared with arity 2"):
        p.relation("edge", 3)
    with pytest.raises(DatalogError, match="head variable Z is not bound"):
        p.rule(path(X, Z), edge(X, Y))
    with pytest.raises(DatalogError, match="variable Z of not path"):
        p.rule(path(X, Y), edge(X, Y), ~path(X, Z))
    with pytest.raises(DatalogError, match="variable Z of where"):
        p.rule(path(X, Y), edge(X, Y), where(lambda z: z, Z))
    with pytest.raises(DatalogError, match="at least one positive"):
        p.rule(path(1, 2), ~edge(1, 2))
    with pytest.raises(DatalogError, match="cannot be negated"):
        p.rule(~path(X, Y), edge(X, Y))
    with pytest.raises(DatalogError, match="another program"):
        p.rule(path(X, Y), Datalog().relation("e", 2)(X, Y))
    with pytest.raises(DatalogError, match="got 3"):
        p.rule(path(X, Y), edge(X, Y), 3)  # type: ignore[arg-type]
    with pytest.raises(UnhashableElementError):
        edge(X, [1])
    with pytest.raises(TypeError, match="not a truth value"):
        bool(edge(X, Y))
    with pytest.raises(DatalogError):
        Var("")


def test_unstratifiable_program_is_rejected() -> None:
    p = Datalog()
    edge, win = p.relation("move", 2), p.relation("win", 1)
    X, Y = p.vars("X Y")
    p.rule(win(X), edge(X, Y), ~win(Y))
    with pytest.raises(StratificationError) as info:
        p.compile()
    assert info.value.cycle == ["win", "win"] and info.value.negated == ("win", "win")


def test_update_errors_leave_the_view_unchanged() -> None:
    view = tc_program().compile()
    view.insert("edge", (1, 2))
    with pytest.raises(DatalogError, match="it is a derived relation"):
        view.insert("path", (1, 1))
    with pytest.raises(DatalogError, match="not a relation"):
        view.insert("nope", (1,))
    with pytest.raises(DatalogError, match="needs 2 values"):
        view.insert("edge", (1, 2, 3))
    with pytest.raises(DatalogError, match="must be a tuple"):
        view.insert("edge", 5)  # type: ignore[arg-type]
    with pytest.raises(DatalogError, match="both inserted and deleted"):
        view.update(insert={"edge": [(2, 3)]}, delete={"edge": [(2, 3)]})
    with pytest.raises(DatalogError, match="no relation"):
        view["nope"]
    assert view["path"] == {(1, 2)} and view["edge"] == {(1, 2)}
    assert view.insert("edge", (2, 3)) == {"path": ZSet({(2, 3): 1, (1, 3): 1})}


mixed_nodes = st.sampled_from([0, 1, 2, "a", "b", None, (1, "x")])
mixed_changes = st.lists(
    st.tuples(st.booleans(), st.lists(st.tuples(mixed_nodes, mixed_nodes), min_size=1, max_size=3)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30)
@given(mixed_changes)
def test_values_of_mutually_unorderable_types(changes) -> None:  # type: ignore[no-untyped-def]
    """ints, strings, None and tuples in one relation: traces fall back to a total order."""
    p = tc_program()
    view = p.compile()
    state: dict[str, set] = {"edge": set()}
    for insert, facts in changes:
        apply(view, state, "edge", insert, facts)
        assert set(view["path"]) == closure(state["edge"])
