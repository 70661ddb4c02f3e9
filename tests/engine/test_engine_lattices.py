"""Lattice evaluation in the engine: morphisms on deltas, monotone re-evaluation, reads in
functions, folds, deferred lattice rules, the late-bound lambda trap."""

from __future__ import annotations

from typing import ClassVar

import pytest

from blooml import (
    Lattice,
    Program,
    ProgramError,
    bloom,
    lbool,
    lmax,
    lset,
    morph,
    rows,
    scratch,
    table,
)
from blooml.lattices._base import monotone


def tuples(coll):
    return {tuple(r) for r in coll}


class Counted(Lattice):
    """An lset-like lattice that counts how often its methods run (to observe evaluation)."""

    wrapper_name = "lcounted_test"
    calls: ClassVar[list[tuple[str, frozenset]]] = []

    def __init__(self, value=frozenset()):
        super().__init__(frozenset(value))

    def merge(self, other):
        return self if other._v <= self._v else Counted(self._v | other._v)

    @morph
    def doubled(self):
        Counted.calls.append(("doubled", self._v))
        return Counted(x * 2 for x in self._v)

    @monotone
    def total(self):
        Counted.calls.append(("total", self._v))
        return lmax(sum(self._v))


def test_morphisms_run_on_deltas_and_monotone_methods_on_the_whole_value():
    class P(Program):
        inp = scratch(["v"])
        s = Counted()
        d = Counted()
        t = lmax()

        @bloom
        def rules(self):
            self.s <= self.inp.map(lambda r: Counted([r.v]))
            self.d <= self.s.doubled()
            self.t <= self.s.total()

    Counted.calls.clear()
    p = P()
    p.inp.insert([(1,), (2,)])
    p.tick()
    p.inp.insert([(5,)])
    p.tick()
    assert p.d.value == Counted({2, 4, 10}) and p.t.value == lmax(8)
    doubled = [v for name, v in Counted.calls if name == "doubled"]
    totals = [v for name, v in Counted.calls if name == "total"]
    assert doubled[-1] == frozenset({5})  # the morphism saw only the delta
    assert totals[-1] == frozenset({1, 2, 5})  # the monotone method saw the whole value
    p.tick()  # nothing changed: neither runs again
    assert [v for name, v in Counted.calls if name == "doubled"] == doubled


def test_rule_reading_a_lattice_in_its_function_reruns_when_it_grows_in_the_same_tick():
    class P(Program):
        inp = scratch(["v"])
        hi = lmax()
        t = table(["k"], ["m"])

        @bloom
        def rules(self):
            self.hi <= self.inp.map(lambda r: r.v)
            self.t <= rows([("max",)]).map(lambda r: (r[0], self.hi))

    p = P()
    p.inp.insert([(3,), (9,)])
    p.tick()
    assert tuples(p.t) == {("max", lmax(9))}
    p.inp.insert([(12,)])
    p.tick()
    assert tuples(p.t) == {("max", lmax(12))}


def test_deferred_lattice_rule_and_external_insert():
    class P(Program):
        n = lmax(0)
        go = scratch(["x"])

        @bloom
        def rules(self):
            self.n < +self.go.map(lambda g: self.n + 1)

    p = P()
    p.go.insert([("a",)])
    p.tick()
    assert p.n.value == lmax(0)
    p.tick()
    assert p.n.value == lmax(1)
    p.n.insert(lmax(10))
    p.tick()
    assert p.n.value == lmax(10)


def test_fold_uses_from_item_and_keeps_lattice_values():
    class P(Program):
        inp = scratch(["a", "b"])
        pairs = lset()
        firsts = lset()
        big = lmax()

        @bloom
        def rules(self):
            self.pairs <= self.inp
            self.firsts <= self.inp.map(lambda r: r.a)
            self.big <= self.inp.map(lambda r: lmax(r.b))

    p = P()
    p.inp.insert([(1, 2), (3, 4)])
    p.tick()
    assert p.pairs.value == lset([(1, 2), (3, 4)])  # a two-column row is one pair
    assert p.firsts.value == lset([1, 3])
    assert p.big.value == lmax(4)


def test_merging_the_wrong_lattice_at_run_time_is_a_bloom_error_naming_the_rule():
    class P(Program):
        inp = scratch(["v"])
        m = lmax()

        @bloom
        def rules(self):
            self.m <= self.inp.map(lambda r: lbool(True))

    p = P()
    p.inp.insert([(1,)])
    with pytest.raises(Exception) as ei:
        p.tick()
    assert any("rule 0" in n for n in ei.value.__notes__)
    assert p.m.value == lmax()


def test_late_bound_lambda_trap_and_its_fix():
    class Wrong(Program):
        t = table(["k"])
        out = table(["k"])

        @bloom
        def rules(self):
            for k in ("a", "b"):
                self.out <= self.t.filter(lambda r: r.k == k)  # noqa: B023

    class Right(Program):
        t = table(["k"])
        out = table(["k"])

        @bloom
        def rules(self):
            for k in ("a", "b"):
                self.out <= self.t.filter(lambda r, k=k: r.k == k)

    for cls, want in ((Wrong, {("b",)}), (Right, {("a",), ("b",)})):
        p = cls()
        p.t.insert([("a",), ("b",), ("c",)])
        p.tick()
        assert tuples(p.out) == want


def test_when_true_function_reads_lattices_and_program_attributes():
    class P(Program):
        n = lmax()
        done = lbool()
        out = table(["who"], ["n"])

        def __init__(self, name, **kw):
            super().__init__(**kw)
            self.name = name

        @bloom
        def rules(self):
            self.done <= self.n.gt_eq(2)
            self.out <= self.done.when_true(lambda: [(self.name, self.n)])

    p = P("alice")
    p.n.insert(lmax(3))
    p.tick()
    assert tuples(p.out) == {("alice", lmax(3))}


def test_lattice_values_cannot_be_rows_of_a_collection_without_a_wrapper():
    with pytest.raises(ProgramError, match="when_true"):

        class P(Program):
            t = table(["v"])
            b = lbool()

            @bloom
            def rules(self):
                self.t <= self.b


def test_rule_reading_tick_count_over_a_table_reruns_every_tick():
    class P(Program):
        wait = table(["msg"], ["due"])
        ready = scratch(["msg"])

        @bloom
        def rules(self):
            self.ready <= self.wait.filter(lambda w: w.due <= self.tick_count).map(
                lambda w: (w.msg,)
            )

    p = P()
    p.wait.insert([("a", 2), ("b", 4)])
    seen = []
    for _ in range(6):
        p.tick()
        seen.append(sorted(r.msg for r in p.ready))
    assert seen == [[], [], ["a"], ["a"], ["a", "b"], ["a", "b"]]
