"""Datalog on the engine's core (issue 19, "one core"): a program compiles to the rule IR, the
engine's stratifier orders it and its incremental core maintains it; the DBSP circuit
compilation (``Datalog.to_circuit``) is an independent implementation to compare with."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dataflow_datalog import tc_program

from blooml.dataflow import Datalog, DatalogError, Var, ZSet, where
from blooml.ir import nodes as N

N_NODES = 5
facts_st = st.lists(
    st.tuples(
        st.sampled_from(["edge", "node", "mark"]),
        st.booleans(),
        st.tuples(st.integers(0, N_NODES - 1), st.integers(0, N_NODES - 1)),
    ),
    min_size=1,
    max_size=25,
)


def mixed_program() -> Datalog:
    """Recursion, mutual recursion, negation of a recursive view, constants, repeated
    variables, projections, simple and opaque filters, and two negations in one rule."""
    p = Datalog()
    edge, node, mark = p.relation("edge", 2), p.relation("node", 1), p.relation("mark", 2)
    reach, unreach = p.relation("reach", 2), p.relation("unreach", 2)
    even, odd = p.relation("even", 2), p.relation("odd", 2)
    lonely, up, odd_key = p.relation("lonely", 1), p.relation("up", 2), p.relation("oddk", 1)
    has_out, leaf = p.relation("has_out", 1), p.relation("leaf", 1)
    X, Y, Z = p.vars("X Y Z")
    p.rule(reach(X, Y), edge(X, Y))
    p.rule(reach(X, Z), reach(X, Y), edge(Y, Z), where(lambda x, z: x != z, X, Z))
    p.rule(odd(X, Y), edge(X, Y))
    p.rule(even(X, Z), odd(X, Y), edge(Y, Z))
    p.rule(odd(X, Z), even(X, Y), edge(Y, Z))
    p.rule(unreach(X, Y), node(X), node(Y), ~reach(X, Y))
    p.rule(has_out(X), edge(X, Var("_")))
    p.rule(lonely(X), node(X), ~has_out(X), ~mark(X, 3))
    p.rule(leaf(X), node(X), ~edge(X, Var("_")), ~mark(Var("_"), X))  # existential _
    p.rule(up(X, Y), edge(X, Y), where(lambda x, y: x < y, X, Y))
    p.rule(odd_key(X), mark(X, X), where(lambda x: str(x) in "13", X))  # opaque: runs as Python
    return p


def _feed(facts):  # type: ignore[no-untyped-def]
    for rel, insert, (a, b) in facts:
        row = (a,) if rel == "node" else (a, b)
        yield rel, insert, row


@settings(max_examples=60, deadline=None)
@given(facts_st)
def test_the_view_equals_the_circuit_compilation_and_a_fresh_evaluation(facts) -> None:  # type: ignore[no-untyped-def]
    p = mixed_program()
    view, circuit = p.compile(), p.to_circuit()
    state: dict[str, set] = {"edge": set(), "node": set(), "mark": set()}
    totals: dict[str, dict] = {n: {} for n in p.derived()}
    for rel, insert, row in _feed(facts):
        present = row in state[rel]
        change = view.update(**{"insert" if insert else "delete": {rel: [row]}})
        if insert != present:
            (state[rel].add if insert else state[rel].discard)(row)
            got = circuit.step({rel: ZSet({row: 1 if insert else -1})})
            for name, z in got.items():
                for f, w in z:
                    totals[name][f] = totals[name].get(f, 0) + w
            for name in p.derived():  # the change each update returns is the circuit's
                assert change.get(name, ZSet()) == got.get(name, ZSet())
        else:
            assert change == {}
        fresh = p.evaluate(state)
        for name in p.derived():
            assert set(view[name]) == fresh[name]
            assert set(view[name]) == {f for f, w in totals[name].items() if w > 0}


def test_the_program_compiles_to_the_rule_ir_with_generated_functions() -> None:
    p = mixed_program()
    ir = p.to_ir()
    kinds = {n: c.kind for n, c in ir.collections.items()}
    assert kinds["edge"] == kinds["node"] == kinds["mark"] == "table"
    assert kinds["reach"] == kinds["unreach"] == "scratch"
    assert {n for n in kinds if n.startswith("_dl")} == {
        "_dl5_b0",
        "_dl7_b0",
        "_dl7_b1",
        "_dl8_b0",
        "_dl8_b1",
    }
    assert ir.stratum_of["reach"] < ir.stratum_of["unreach"]
    python = {r.line for r in ir.rules if r.python_functions}
    assert python == {11}  # only the opaque where(); the simple one is rewritten as columns
    assert all(r.where.startswith("datalog:") for r in ir.rules)
    assert "reach <= map(filter(join(reach, edge on reach.c1 == edge.c0)" in str(ir)
    assert "runs Python: where[<lambda>@test_datalog_engine.py" in str(ir)
    view = p.compile()
    assert view.ir.collections.keys() == ir.collections.keys()
    assert any(isinstance(r.body, N.Map) and isinstance(r.body.input, N.NotIn) for r in ir.rules)


def test_an_anonymous_variable_in_a_negated_atom_is_existential() -> None:
    p = Datalog()
    node, edge, sink = p.relation("node", 1), p.relation("edge", 2), p.relation("sink", 1)
    X = Var("X")
    p.rule(sink(X), node(X), ~edge(X, Var("_")))
    assert repr(p.rules[0]) == "sink(X) :- node(X), not edge(X, _)."
    view, circuit = p.compile(), p.to_circuit()
    view.update(insert={"node": [(1,), (2,), (3,)], "edge": [(1, 2), (1, 3), (2, 2)]})
    assert view["sink"] == {(3,)}
    got = circuit.step({"node": ZSet({(1,): 1, (2,): 1, (3,): 1})})
    got = circuit.step({"edge": ZSet({(1, 2): 1, (1, 3): 1, (2, 2): 1})})
    assert got["sink"] == ZSet({(1,): -1, (2,): -1})
    assert view.delete("edge", (1, 2)) == {}  # 1 still has an edge
    assert view.delete("edge", (1, 3)) == {"sink": ZSet({(1,): 1})}
    with pytest.raises(DatalogError, match="cannot appear in a head"):
        p.rule(sink(Var("_")), node(X))


def test_private_scratch_names_never_take_a_relation_name() -> None:
    p = Datalog()
    a, b, c = p.relation("_dl0_b0", 1), p.relation("b", 1), p.relation("c", 1)
    X = Var("X")
    p.rule(c(X), a(X), ~b(X))
    view = p.compile()
    view.update(insert={"_dl0_b0": [(1,), (2,)], "b": [(2,)]})
    assert view["c"] == {(1,)}
    assert view["_dl0_b0"] == {(1,), (2,)}


def test_constants_of_any_hashable_type_names_of_any_spelling_and_nullary_relations() -> None:
    p = Datalog()
    e, out, flag = p.relation("my edge-list", 2), p.relation("out.rel", 2), p.relation("flag", 0)
    on, tagged = p.relation("on", 0), p.relation("tagged", 2)
    X, Y = p.vars("X Y")
    key = frozenset({1, 2})
    nan = float("nan")
    p.rule(out(X, key), e(X, key))  # a constant the generated source cannot spell
    p.rule(on(), flag(), e(Var("_"), Var("_")))
    p.rule(tagged(X, nan), e(X, Y), ~flag())
    view = p.compile()
    view.update(insert={"my edge-list": [(1, key), (2, 3)]})
    assert view["out.rel"] == {(1, key)}
    assert view["on"] == frozenset()
    assert {x for x, _ in view["tagged"]} == {1, 2}
    change = view.update(insert={"flag": [()]})
    assert change["on"] == ZSet({(): 1})
    assert view["tagged"] == frozenset()
    assert view.update(delete={"my edge-list": [(1, key)]})["out.rel"] == ZSet({(1, key): -1})


def test_a_failing_filter_leaves_the_view_as_it_was() -> None:
    p = Datalog()
    e, q = p.relation("edge", 2), p.relation("q", 2)
    X, Y = p.vars("X Y")
    p.rule(q(X, Y), e(X, Y), where(lambda x, y: 1 / (x - 7) != 0, X, Y))
    view = p.compile()
    view.insert("edge", (1, 2))
    with pytest.raises(ZeroDivisionError):
        view.insert("edge", (7, 8))
    assert view["edge"] == {(1, 2)} and view["q"] == {(1, 2)}
    assert view.insert("edge", (3, 4)) == {"q": ZSet({(3, 4): 1})}
    assert view["edge"] == {(1, 2), (3, 4)}


def test_a_lattice_value_in_a_fact_is_refused_clearly() -> None:
    from blooml import lmax

    p = Datalog()
    e, q = p.relation("edge", 2), p.relation("q", 2)
    X, Y = p.vars("X Y")
    p.rule(q(X, Y), e(X, Y))
    view = p.compile()
    with pytest.raises(DatalogError, match=r"lattice value lmax\(1\) at position 0"):
        view.insert("edge", (2, 3), (lmax(1), 2))
    assert view["edge"] == frozenset()
    with pytest.raises(DatalogError, match="plain values"):
        p.evaluate({"edge": [(lmax(1), 2)]})


def test_evaluate_runs_the_engine_and_checks_its_input() -> None:
    p = tc_program()
    chain = [(i, i + 1) for i in range(300)]
    got = p.evaluate({"edge": chain})
    assert len(got["path"]) == 300 * 301 // 2 and got["edge"] == set(chain)
    with pytest.raises(DatalogError, match="not an input relation"):
        p.evaluate({"path": [(1, 2)]})
    with pytest.raises(DatalogError, match="needs 2 values"):
        p.evaluate({"edge": [(1,)]})


def test_a_deleted_edge_in_a_long_chain_is_handled_by_re_derivation_not_a_rerun() -> None:
    """Over a 400-edge chain (80,200 paths), cutting the last edge retracts 400 paths: the
    engine's delete-and-re-derive touches those, not the view (checked by the view's
    operator state, not by time)."""
    p = tc_program()
    view = p.compile()
    view.update(insert={"edge": [(i, i + 1) for i in range(400)]})
    units = [u for us in view._rt.units for u in us if u.recursive]
    assert units and all(u.dred is not None for u in units)
    change = view.delete("edge", (399, 400))
    assert change["path"] == ZSet({(i, 400): -1 for i in range(400)})
    assert len(view["path"]) == 400 * 401 // 2 - 400
