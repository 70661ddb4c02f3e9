"""One definition of ``lmin``/``lmax``'s order (``raw_order`` on the class) drives every hot
path: ``Relation`` (both loops), the generated ``map`` loops and the prioritized frontier; user
subclasses that keep the order take the same paths, ones that change ``merge`` do not."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, lmax, lmin, table
from blooml.engine._priority import Frontier
from blooml.engine.relation import ORDER, Relation
from blooml.ir.program import CollectionInfo
from blooml.lattices import lset
from blooml.lattices.ordered import order_sign

MERGES: list[str] = []


class cost(lmin):
    """A user subclass keeping lmin's order: the fast paths apply."""

    __slots__ = ()
    wrapper_name = "test_order_cost"


class counted_min(lmin):
    """Declares the order again while counting merges (merge still keeps the minimum)."""

    __slots__ = ()
    wrapper_name = "test_order_counted_min"
    raw_order = "min"

    def merge(self, other: Any) -> Any:
        MERGES.append("min")
        return lmin.merge.__wrapped__(self, other)  # type: ignore[attr-defined]


class reversed_min(lmin):
    """Overrides merge without declaring an order: merge decides everywhere."""

    __slots__ = ()
    wrapper_name = "test_order_reversed_min"

    def merge(self, other: Any) -> Any:
        MERGES.append("rev")
        a, b = self._v, other._v
        if a is None:
            return other
        if b is None:
            return self
        return self if a >= b else other  # the maximum, despite the base class


class widest(lmax):
    __slots__ = ()
    wrapper_name = "test_order_widest"


def test_the_order_is_declared_on_the_class_and_inherited():
    assert (lmin.raw_order, lmax.raw_order) == ("min", "max")
    assert cost.raw_order == "min" and widest.raw_order == "max"
    assert counted_min.raw_order == "min"
    assert reversed_min.raw_order is None
    assert [order_sign(c) for c in (lmin, cost, lmax, widest, reversed_min)] == [-1, -1, 1, 1, 0]
    assert order_sign(lset) == 0 and order_sign(int) == 0 and order_sign(3) == 0
    assert ORDER[cost] == -1 and ORDER[reversed_min] == 0 and ORDER[str] == 0


class KV(Program):
    kv = table(["k"], ["v"])
    kv2 = table(["k", "j"], ["v"])


def test_relation_loops_compare_raw_values_of_a_subclass_without_merging():
    MERGES.clear()
    p = KV()
    p.kv.insert([(1, counted_min(5)), (2, counted_min(3))])
    p.kv2.insert([(1, 1, counted_min(5))])
    p.tick()
    p.kv.insert([(1, counted_min(7)), (1, counted_min(4)), (2, counted_min(3))])
    p.kv2.insert([(1, 1, counted_min(9)), (1, 1, counted_min(2))])
    p.tick()
    assert MERGES == []  # every comparison was on raw values
    assert {r.k: r.v for r in p.kv} == {1: counted_min(4), 2: counted_min(3)}
    assert [r.v for r in p.kv2] == [counted_min(2)]


def test_a_subclass_changing_merge_is_merged_by_its_own_merge():
    MERGES.clear()
    p = KV()
    p.kv.insert([(1, reversed_min(5))])
    p.kv2.insert([(1, 1, reversed_min(5))])
    p.tick()
    p.kv.insert([(1, reversed_min(7)), (1, reversed_min(4))])
    p.kv2.insert([(1, 1, reversed_min(9))])
    p.tick()
    assert "rev" in MERGES
    assert [r.v for r in p.kv] == [reversed_min(7)]
    assert [r.v for r in p.kv2] == [reversed_min(9)]


def test_the_frontier_orders_subclass_values():
    rel = Relation(CollectionInfo("d", "table", ("v",), ("d",)))
    f = Frontier(rel)
    f._queue([(1, cost(5)), (2, cost(3)), (3, reversed_min(1))])
    assert sorted(f.buckets) == [3, 5] and f.heap[0] == 3
    assert list(f.now) == [3]  # no declared order: processed next round, not deferred
    g = Frontier(rel)
    g._queue([(1, widest(5)), (2, widest(3))])
    assert g.heap[0].v == 5  # largest first


class Paths(Program):
    link = table(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])
    wide = table(["src", "dst"], ["w"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, cost(lk.c)))
        self.path <= self.path.join(self.link, self.path.dst == self.link.src).map(
            lambda p, lk: (p.src, lk.dst, p.c + lk.c)
        )
        self.wide <= self.link.map(lambda lk: (lk.src, lk.dst, widest(lk.c)))
        self.wide <= self.wide.join(self.link, self.wide.dst == self.link.src).map(
            lambda w, lk: (w.src, lk.dst, w.w.min_of(lk.c))
        )


def _reference(links: list[tuple[int, int, int]]) -> tuple[dict[Any, int], dict[Any, int]]:
    short: dict[Any, int] = {}
    wide: dict[Any, int] = {}
    for s, d, c in links:
        short[s, d] = min(short.get((s, d), c), c)
        wide[s, d] = max(wide.get((s, d), c), c)
    changed = True
    while changed:
        changed = False
        for (s, m), c in list(short.items()):
            for s2, d, c2 in links:
                if s2 == m and short.get((s, d), c + c2 + 1) > c + c2:
                    short[s, d] = c + c2
                    changed = True
        for (s, m), w in list(wide.items()):
            for s2, d, c2 in links:
                if s2 == m and wide.get((s, d), -1) < min(w, c2):
                    wide[s, d] = min(w, c2)
                    changed = True
    return short, wide


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 9)), max_size=14))
def test_subclass_paths_are_right_on_the_fast_paths(links):
    p = Paths()
    from blooml.engine._codegen import FusedMapEval

    assert all(isinstance(r.body, FusedMapEval) for r in p._rt.rules)
    p.link.insert(links)
    p.tick()
    short, wide = _reference(links)
    assert {(r.src, r.dst): r.c for r in p.path} == {k: cost(v) for k, v in short.items()}
    assert {(r.src, r.dst): r.w for r in p.wide} == {k: widest(v) for k, v in wide.items()}
    assert all(type(r.c) is cost for r in p.path)
