"""CRDTs built on the collection lattices: lvclock, lgcounter, lpncounter, lmvreg, lorset,
l2pset. Laws as direct hypothesis properties, operations, errors, and replica convergence."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import blooml.testing._crdt_strategies  # noqa: F401  (registers the CRDT strategies)
from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices import Lattice, kind_of, lmax, lset
from blooml.lattices.crdts import (
    l2pset,
    lgcounter,
    lmvreg,
    lorset,
    lpncounter,
    lvclock,
)
from blooml.testing._strategies import elements

NS: dict[str, Any] = {
    c.__name__: c for c in (lvclock, lgcounter, lpncounter, lmvreg, lorset, l2pset, lmax, lset)
}
NODES = st.sampled_from(["a", "b", "c"])
ELEMS = st.sampled_from(["x", "y", 1])


def join(x: Any, y: Any) -> Any:
    return y if x is None else x if y is None else x.merge(y)


def check_merge_laws(a: Lattice, b: Lattice, c: Lattice) -> None:
    bot = type(a)()
    assert a.merge(b).merge(c) == a.merge(b.merge(c)), "associativity"
    assert a.merge(b) == b.merge(a), "commutativity"
    assert a.merge(a) == a, "idempotence"
    assert bot.merge(a) == a and a.merge(bot) == a, "⊥ is the identity"
    assert (a <= b) == (a.merge(b) == b), "<= agrees with merge"
    assert a <= a.merge(b) and b <= a.merge(b)
    if a == b:
        assert hash(a) == hash(b)
    assert eval(repr(a), NS) == a
    assert pickle.loads(pickle.dumps(a)) == a


def check_morph(f: Callable[[Any], Any], a: Lattice, b: Lattice) -> None:
    assert f(a.merge(b)) == join(f(a), f(b))


def check_monotone(f: Callable[[Any], Any], a: Lattice, b: Lattice) -> None:
    assert f(a) <= f(a.merge(b))


def triples(cls: type[Lattice]) -> Any:
    return given(elements(cls), elements(cls), elements(cls))


# -- lvclock --------------------------------------------------------------------------------------


@triples(lvclock)
def test_lvclock_laws(a: lvclock, b: lvclock, c: lvclock) -> None:
    check_merge_laws(a, b, c)
    for node in "ad":
        check_morph(lambda x, n=node: x.increment(n), a, b)
        check_morph(lambda x, n=node: x.at(n), a, b)


@given(elements(lvclock), elements(lvclock))
def test_lvclock_relations(a: lvclock, b: lvclock) -> None:
    rel = a.compare(b)
    assert (rel == "before") == a.happened_before(b) == (a < b)
    assert (rel == "concurrent") == a.concurrent_with(b) == b.concurrent_with(a)
    assert (rel == "equal") == (a == b)
    assert not (a.happened_before(b) and b.happened_before(a))
    ca = a.counts()
    cb = b.counts()
    pointwise = all(ca.get(n, 0) <= cb.get(n, 0) for n in set(ca) | set(cb))
    assert (a <= b) == pointwise


def test_lvclock_basics() -> None:
    a = lvclock().increment("a")
    b = a.increment("b")
    assert a.happened_before(b) and not b.happened_before(a)
    assert a.increment("a").concurrent_with(b)
    assert a.increment("a").merge(b) == lvclock({"a": 2, "b": 1})
    assert lvclock({"a": 0}) == lvclock() and lvclock().is_bottom()
    assert b.at("b") == lmax(1) and b.at("zz") == lmax(0)
    assert b.reveal() == {"a": 1, "b": 1} and repr(b) == "lvclock({'a': 1, 'b': 1})"
    assert lvclock(b) == b
    assert b.compare(a) == "after" and a.compare(a) == "equal"
    assert kind_of(lvclock, "happened_before") == "nonmonotone"
    assert kind_of(lvclock, "concurrent_with") == "nonmonotone"
    assert kind_of(lvclock, "increment") == "morph"
    big = lvclock({f"n{i}": i + 1 for i in range(100)})
    assert big.merge(lvclock({"n5": 2})) is big  # a dominated delta shares the larger side


def test_lvclock_errors() -> None:
    with pytest.raises(LatticeValueError, match=r"lvclock\(-1\).*>= 0"):
        lvclock({"a": -1})
    with pytest.raises(LatticeValueError, match="must be an int"):
        lvclock({"a": 1.5})
    with pytest.raises(LatticeValueError, match="must be an int"):
        lvclock({"a": True})
    with pytest.raises(LatticeValueError, match="node id"):
        lvclock({None: 1})
    with pytest.raises(LatticeValueError, match="mapping"):
        lvclock([("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match="mapping"):
        lvclock(lgcounter({"a": 1}))  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match="node id must be hashable"):
        lvclock().increment(["a"])  # type: ignore[arg-type]
    with pytest.raises(LatticeTypeError):
        lvclock().merge(lgcounter())  # type: ignore[arg-type]


# -- lgcounter / lpncounter -----------------------------------------------------------------------


@triples(lgcounter)
def test_lgcounter_laws(a: lgcounter, b: lgcounter, c: lgcounter) -> None:
    check_merge_laws(a, b, c)
    check_monotone(lambda x: x.value(), a, b)
    check_morph(lambda x: x.increment("a", 2), a, b)
    check_morph(lambda x: x.at("b"), a, b)


def test_lgcounter_value_is_not_a_morphism() -> None:
    a, b = lgcounter({"a": 1}), lgcounter({"b": 1})
    assert a.merge(b).value() == lmax(2) != a.value().merge(b.value())
    assert kind_of(lgcounter, "value") == "monotone"


def test_lgcounter_basics() -> None:
    a = lgcounter().increment("a", 2)
    b = lgcounter().increment("b")
    assert a.merge(b).value() == lmax(3) and a.merge(b).merge(b).reveal() == 3
    assert lgcounter().value() == lmax(0) and lgcounter().reveal() == 0
    assert a.merge(b).counts() == {"a": 2, "b": 1}
    assert repr(a) == "lgcounter({'a': 2})" and repr(lgcounter()) == "lgcounter()"
    assert lgcounter.fold([("a", 1), ("a", 3), {"b": 2}]) == lgcounter({"a": 3, "b": 2})
    with pytest.raises(LatticeValueError, match=r"lgcounter\(0\).*>= 1"):
        a.increment("a", 0)
    with pytest.raises(LatticeValueError, match="must be an int"):
        a.increment("a", 1.0)  # type: ignore[arg-type]


@triples(lpncounter)
def test_lpncounter_laws(a: lpncounter, b: lpncounter, c: lpncounter) -> None:
    check_merge_laws(a, b, c)
    check_morph(lambda x: x.increment("a"), a, b)
    check_morph(lambda x: x.decrement("b", 3), a, b)
    check_morph(lambda x: x.increments(), a, b)
    check_morph(lambda x: x.decrements(), a, b)


def test_lpncounter_basics() -> None:
    a = lpncounter().increment("a", 5)
    b = lpncounter().decrement("b", 2)
    assert a.merge(b).value() == 3 == a.merge(b).reveal()
    assert repr(a.merge(b)) == "lpncounter({'a': 5}, {'b': 2})"
    assert repr(a) == "lpncounter({'a': 5})" and repr(lpncounter()) == "lpncounter()"
    assert lpncounter(lgcounter({"a": 1})) == lpncounter({"a": 1})
    # value() is not monotone: a merge that brings decrements in lowers it
    assert a <= a.merge(b) and a.merge(b).value() < a.value()
    assert kind_of(lpncounter, "value") == "nonmonotone"
    with pytest.raises(LatticeValueError, match=r"lpncounter.*decrements.*>= 0"):
        lpncounter({}, {"b": -1})
    with pytest.raises(LatticeValueError, match=r"lpncounter\(-2\)"):
        a.decrement("b", -2)
    with pytest.raises(LatticeValueError, match="increments must be a mapping"):
        lpncounter(5)  # type: ignore[arg-type]


# -- lmvreg ---------------------------------------------------------------------------------------


@triples(lmvreg)
def test_lmvreg_laws(a: lmvreg, b: lmvreg, c: lmvreg) -> None:
    check_merge_laws(a, b, c)
    check_morph(lambda x: x.clock(), a, b)
    check_monotone(lambda x: x.write(7, "a"), a, b)


def test_lmvreg_basics() -> None:
    a = lmvreg().write("tea", node="a")
    b = lmvreg().write("coffee", node="b")
    both = a.merge(b)
    assert both.values() == {"tea", "coffee"} == both.reveal()
    assert both.clock() == lvclock({"a": 1, "b": 1})
    after = both.write("both", node="a")
    assert after.values() == {"both"} and after.clock() == lvclock({"a": 2, "b": 1})
    assert after.merge(a) is after and a.merge(after) is after  # the later write dominates
    assert lmvreg().values() == frozenset() and lmvreg().is_bottom()
    # dominated entries are dropped by the constructor
    assert lmvreg([(lvclock({"a": 1}), "x"), (lvclock({"a": 2}), "y")]) == lmvreg(
        [(lvclock({"a": 2}), "y")]
    )
    # write is monotone but not a morphism
    assert kind_of(lmvreg, "write") == "monotone"
    assert both.write("z", "c") != a.write("z", "c").merge(b.write("z", "c"))


def test_lmvreg_errors() -> None:
    with pytest.raises(LatticeValueError, match=r"pair \(lvclock, value\)"):
        lmvreg([("a", 1)])
    with pytest.raises(LatticeValueError, match="hashable"):
        lmvreg([(lvclock(), [1])])
    with pytest.raises(LatticeValueError, match="iterable"):
        lmvreg("ab")  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match=r"lmvreg\(None\)"):
        lmvreg().write(None, "a")
    with pytest.raises(LatticeValueError, match=r"lmvreg\(None\).*node id"):
        lmvreg().write(1, None)  # type: ignore[arg-type]


# -- lorset ---------------------------------------------------------------------------------------


@triples(lorset)
def test_lorset_laws(a: lorset, b: lorset, c: lorset) -> None:
    check_merge_laws(a, b, c)
    for e in ("x", 1, "zz"):
        check_morph(lambda s, e=e: s.remove(e), a, b)
        check_morph(lambda s, e=e: s.add(e, 9), a, b)


def test_lorset_add_wins() -> None:
    a = lorset().add("milk", ("a", 1))
    b = a.remove("milk")
    c = a.add("milk", ("c", 1))
    assert not b.contains("milk") and c.contains("milk")
    assert b.merge(c).contains("milk") and c.merge(b).elements() == {"milk"}
    # removing after seeing both adds removes for good (until re-added)
    gone = b.merge(c).remove("milk")
    assert not gone.contains("milk") and gone.add("milk", ("a", 2)).contains("milk")
    assert lorset().remove("nothing") == lorset()
    assert kind_of(lorset, "contains") == "nonmonotone" and kind_of(lorset, "remove") == "morph"


def test_lorset_repr_and_fold() -> None:
    s = lorset().add("x", 1).add("x", 2).remove("x").add("y", 3)
    assert repr(s) == "lorset({'x': {1, 2}, 'y': {3}}, {'x': {1, 2}})"
    assert eval(repr(s), NS) == s and s.reveal() == {"y"}
    assert repr(lorset()) == "lorset()" and repr(lorset({"a": {1}})) == "lorset({'a': {1}})"
    assert lorset.fold([("x", 1), ("y", 2)]) == lorset({"x": {1}, "y": {2}})
    assert lorset({"x": set()}) == lorset()  # an element without tags is no entry


def test_lorset_errors() -> None:
    with pytest.raises(LatticeValueError, match="adds must be a mapping"):
        lorset(["x"])  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match="tags of 'x' must be a set"):
        lorset({"x": "t1"})
    with pytest.raises(LatticeValueError, match=r"lorset\(None\).*tag"):
        lorset().add("x", None)
    with pytest.raises(LatticeValueError, match="element must be hashable"):
        lorset().add(["x"], 1)  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match="element must be a plain"):
        lorset().add(lmax(1), 1)
    with pytest.raises(LatticeValueError, match="folded row"):
        lorset.fold(["x"])


# -- l2pset ---------------------------------------------------------------------------------------


@triples(l2pset)
def test_l2pset_laws(a: l2pset, b: l2pset, c: l2pset) -> None:
    check_merge_laws(a, b, c)
    check_morph(lambda s: s.added(), a, b)
    check_morph(lambda s: s.removed(), a, b)
    for e in ("x", 1, "zz"):
        check_morph(lambda s, e=e: s.remove(e), a, b)
        check_morph(lambda s, e=e: s.add(e), a, b)


def test_l2pset_basics() -> None:
    a = l2pset().add("x").add("y")
    b = a.remove("x")
    assert a.add("x").merge(b).elements() == {"y"}
    assert b.add("x").contains("x") is False  # removed for good
    assert l2pset().remove("x") == l2pset()  # never seen: not tombstoned
    assert repr(b) == "l2pset({'x', 'y'}, {'x'})" and repr(l2pset({1})) == "l2pset({1})"
    assert eval(repr(b), NS) == b and b.reveal() == {"y"}
    assert b.added() == lset({"x", "y"}) and b.removed() == lset({"x"})
    assert l2pset.fold(["x", "y"]) == l2pset({"x", "y"})
    assert kind_of(l2pset, "contains") == "nonmonotone"
    with pytest.raises(LatticeValueError, match=r"l2pset.*iterable"):
        l2pset(5)  # type: ignore[arg-type]
    with pytest.raises(LatticeValueError, match=r"l2pset\(None\)"):
        l2pset().add(None)


# -- replicas converge ----------------------------------------------------------------------------

# An operation is (replica index, operation name, argument); "sync" merges another replica in.
ops_counter = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["inc", "dec", "sync"]), NODES, st.integers(1, 3)),
    max_size=20,
)


def run_and_converge(
    replicas: list[Any], apply: Callable[[Any, Any], Any], ops: Any, rnd: Any
) -> Any:
    for op in ops:
        r = op[0]
        if op[1] == "sync":
            replicas[r] = replicas[r].merge(replicas[(r + 1) % len(replicas)])
        else:
            replicas[r] = apply(replicas[r], op)
    order = list(range(len(replicas)))
    rnd.shuffle(order)
    merged = replicas[order[0]]
    for i in order[1:]:
        merged = merged.merge(replicas[i])
    again = replicas[0]
    for x in reversed(replicas):
        again = x.merge(again).merge(x)  # duplicates and another order
    assert merged == again
    return merged


@given(ops_counter, st.randoms(use_true_random=False))
def test_pncounter_replicas_converge(ops: Any, rnd: Any) -> None:
    # Each replica r updates the counter as node "r<r>", so replicas own their entries.
    def apply(c: lpncounter, op: Any) -> lpncounter:
        node = f"r{op[0]}"
        return c.increment(node, op[3]) if op[1] == "inc" else c.decrement(node, op[3])

    merged = run_and_converge([lpncounter()] * 3, apply, ops, rnd)
    expected = sum(o[3] if o[1] == "inc" else -o[3] for o in ops if o[1] != "sync")
    assert merged.value() == expected


@given(ops_counter, st.randoms(use_true_random=False))
def test_gcounter_and_vclock_replicas_converge(ops: Any, rnd: Any) -> None:
    def inc(c: Any, op: Any) -> Any:
        return (
            c.increment(f"r{op[0]}", op[3])
            if isinstance(c, lgcounter)
            else c.increment(f"r{op[0]}")
        )

    merged = run_and_converge([lgcounter()] * 3, inc, ops, rnd)
    assert merged.reveal() == sum(o[3] for o in ops if o[1] != "sync")
    clock = run_and_converge([lvclock()] * 3, inc, ops, rnd)
    assert sum(clock.counts().values()) == sum(1 for o in ops if o[1] != "sync")


ops_set = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["add", "remove", "sync"]), ELEMS), max_size=20
)


@given(ops_set, st.randoms(use_true_random=False))
def test_set_replicas_converge_and_match_a_plain_model(ops: Any, rnd: Any) -> None:
    seq = iter(range(10**6))
    tags: list[Any] = []

    def or_apply(s: lorset, op: Any) -> lorset:
        if op[1] == "add":
            tags.append((op[0], next(seq)))
            return s.add(op[2], tags[-1])
        return s.remove(op[2])

    def tp_apply(s: l2pset, op: Any) -> l2pset:
        return s.add(op[2]) if op[1] == "add" else s.remove(op[2])

    orset = run_and_converge([lorset()] * 3, or_apply, ops, rnd)
    twop = run_and_converge([l2pset()] * 3, tp_apply, ops, rnd)

    # The same operations on plain sets: OR-set = (adds seen, tombstoned adds seen);
    # 2P-set = (added, removed). Syncing unions them.
    tag_iter = iter(tags)
    or_model = [(set(), set()) for _ in range(3)]
    tp_model = [(set(), set()) for _ in range(3)]
    for r, name, e in ops:
        (adds, tomb), (added, removed) = or_model[r], tp_model[r]
        if name == "add":
            adds.add((e, next(tag_iter)))
            added.add(e)
        elif name == "remove":
            tomb |= {a for a in adds if a[0] == e}
            if e in added:
                removed.add(e)
        else:
            o_adds, o_tomb = or_model[(r + 1) % 3]
            o_added, o_removed = tp_model[(r + 1) % 3]
            adds |= o_adds
            tomb |= o_tomb
            added |= o_added
            removed |= o_removed
    all_adds = set().union(*(m[0] for m in or_model))
    all_tomb = set().union(*(m[1] for m in or_model))
    assert orset.elements() == {a[0] for a in all_adds - all_tomb}
    all_added = set().union(*(m[0] for m in tp_model))
    all_removed = set().union(*(m[1] for m in tp_model))
    assert twop.elements() == all_added - all_removed


ops_reg = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["write", "sync"]), st.integers(0, 5)),
    max_size=15,
)


@given(ops_reg, st.randoms(use_true_random=False))
def test_mvreg_replicas_converge_to_the_causally_maximal_writes(ops: Any, rnd: Any) -> None:
    def apply(r: lmvreg, op: Any) -> lmvreg:
        return r.write(op[2], f"r{op[0]}")

    merged = run_and_converge([lmvreg()] * 3, apply, ops, rnd)
    # Model: write i saw the writes its replica had seen; the survivors are the writes no
    # other write saw.
    seen_by: list[frozenset[int]] = []
    values: list[int] = []
    state: list[set[int]] = [set() for _ in range(3)]
    for r, name, v in ops:
        if name == "write":
            seen_by.append(frozenset(state[r]))
            values.append(v)
            state[r].add(len(values) - 1)
        else:
            state[r] |= state[(r + 1) % 3]
    everything = set().union(*state)
    survivors = {w for w in everything if not any(w in seen_by[o] for o in everything)}
    assert merged.values() == {values[w] for w in survivors}


# -- as lattice state in a Bloom^L program --------------------------------------------------------


def test_crdts_as_lattice_state_of_a_program() -> None:
    from blooml import Program, bloom, interface, llww, lmax

    class Replica(Program):
        inc = interface(["node", "n"], input=True)
        adds = interface(["elem", "tag"], input=True)
        writes = interface(["value", "ts", "node"], input=True)
        cnt = lgcounter()
        total = lmax()
        cart = lorset()
        reg = llww()

        @bloom
        def logic(self):  # type: ignore[no-untyped-def]
            self.cnt <= self.inc.map(lambda r: (r.node, r.n))  # rows fold via from_item
            self.total <= self.cnt.value()  # a monotone method feeding an lmax
            self.cart <= self.adds.map(lambda r: (r.elem, r.tag))
            self.reg <= self.writes.map(lambda r: (r.value, r.ts, r.node))

    p = Replica()
    p.inc.insert([("a", 3), ("b", 2)])
    p.adds.insert([("milk", 1), ("eggs", 2)])
    p.writes.insert([("v1", 1, "a"), ("v2", 2, "b")])
    p.tick()
    assert p.cnt.value == lgcounter({"a": 3, "b": 2}) and p.total.value == lmax(5)
    assert p.cart.value.elements() == {"milk", "eggs"} and p.reg.value.reveal() == "v2"
    p.inc.insert([("a", 5)])
    p.tick()
    assert p.total.value == lmax(7)
