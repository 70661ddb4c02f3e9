"""Bad input does not jam a program: a failed tick names the queued input it could not take
(``pending_input`` and a note), ``discard_pending()`` drops what is queued, and the next
``tick()`` runs on the stored state, which the failed tick left as it was."""

from __future__ import annotations

import math

import pytest

from blooml import (
    KeyConstraintError,
    LatticeValueError,
    Program,
    bloom,
    lmax,
    lmin,
    scratch,
    table,
)
from blooml.errors import ColumnTypeError, ColumnValueError, LatticeColumnValueError


def tuples(coll):
    return {tuple(r) for r in coll}


class KV(Program):
    put = scratch(["k", "v"])
    kv = table(["k"], ["v"])

    @bloom
    def rules(self):
        self.kv <= self.put


class Inverse(Program):
    inp = scratch(["x"])
    other = scratch(["y"])
    out = table(["x", "inv"])
    seen = table(["y"])

    @bloom
    def rules(self):
        self.out <= self.inp.map(lambda r: (r.x, 1 / r.x))
        self.seen <= self.other


class High(Program):
    num = scratch(["n"])
    best = lmax()
    t = table(["k"], ["m"])

    @bloom
    def rules(self):
        self.best <= self.num.map(lambda r: lmax(r.n))


def _note_text(exc: BaseException) -> str:
    return "\n".join(getattr(exc, "__notes__", ()))


def test_key_conflict_inside_one_batch_is_named_and_discarded():
    p = KV()
    p.put.insert([("a", 1)])
    p.tick()
    p.put.insert([("b", 2), ("b", 3), ("c", 4)])
    with pytest.raises(KeyConstraintError) as info:
        p.tick()
    exc = info.value
    assert exc.pending_input == {"put": [("b", 3)]}
    assert "could not take the queued input {put: [('b', 3)]}" in _note_text(exc)
    assert "discard_pending()" in _note_text(exc)
    assert tuples(p.kv) == {("a", 1)} and p.tick_count == 1
    with pytest.raises(KeyConstraintError):  # still queued: the same error again
        p.tick()
    dropped = p.discard_pending()
    assert dropped == {"put": [("b", 2), ("b", 3), ("c", 4)]}
    assert dropped["put"][0].k == "b"  # rows come back as named tuples
    p.tick()
    assert tuples(p.kv) == {("a", 1)} and p.tick_count == 2
    p.put.insert([("d", 5)])
    p.tick()
    assert tuples(p.kv) == {("a", 1), ("d", 5)}


def test_rule_raising_on_a_row_names_the_input_it_reads():
    p = Inverse()
    p.inp.insert([(2,)])
    p.tick()
    p.inp.insert([(4,), (0,)])
    p.other.insert([("unrelated",)])
    with pytest.raises(ZeroDivisionError) as info:
        p.tick()
    exc = info.value
    # the failing rule's function raises on (0,) alone: that row is named; other's input,
    # which the rule does not read, is not blamed
    assert exc.pending_input == {"inp": [(0,)]}
    assert "could not take the queued input {inp: [(0,)]}" in _note_text(exc)
    assert tuples(p.out) == {(2, 0.5)} and tuples(p.seen) == set()
    assert p.discard_pending() == {"inp": [(4,), (0,)], "other": [("unrelated",)]}
    p.tick()
    assert tuples(p.out) == {(2, 0.5)} and tuples(p.seen) == set()
    p.inp.insert([(4,)])
    p.tick()
    assert tuples(p.out) == {(2, 0.5), (4, 0.25)}


def test_string_reaching_an_lmax_of_ints_is_blamed_and_discarded():
    p = High()
    p.num.insert([(3,)])
    p.tick()
    p.num.insert([("x",)])
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    exc = info.value
    assert exc.value == "x"  # the offending value, not the stored 3
    assert "lmax('x'): cannot be compared with 3" in str(exc)
    assert exc.pending_input == {"num": [("x",)]}
    assert p.best.value == lmax(3)
    assert p.discard_pending() == {"num": [("x",)]}
    p.num.insert([(7,)])
    p.tick()
    assert p.best.value == lmax(7)


def test_lattice_variable_input_is_named_exactly():
    p = High()
    p.best.insert(lmax(3))
    p.tick()
    p.best.insert(lmax(5))
    p.best.insert(lmax("x"))
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.pending_input == {"best": [lmax("x")]}
    assert p.best.value == lmax(3)
    assert p.discard_pending() == {"best": [lmax(5), lmax("x")]}
    p.tick()
    assert p.best.value == lmax(3)


def test_bad_lattice_value_in_a_table_column_is_named():
    p = High()
    p.t.insert([("a", lmax(1))])
    p.tick()
    p.t.insert([("b", lmax(2)), ("a", lmax("x"))])
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.pending_input == {"t": [("a", lmax("x"))]}
    assert tuples(p.t) == {("a", lmax(1))}
    p.discard_pending()
    p.tick()
    assert tuples(p.t) == {("a", lmax(1))}


def test_discard_pending_returns_deletions_and_next_tick_facts_separately():
    class P(Program):
        t = table(["k"])
        later = table(["k"])

        @bloom
        def rules(self):
            self.later < +self.t

    p = P()
    p.t.insert([(1,), (2,)])
    p.tick()  # t holds 1, 2; later's <+ facts wait
    p.t.delete([(1,)])
    dropped = p.discard_pending()
    assert dropped == {"later": [(1,), (2,)]}
    assert dropped.deletes == {"t": [(1,)]}  # type: ignore[attr-defined]
    p.tick()
    assert tuples(p.t) == {(1,), (2,)} and tuples(p.later) == set()
    assert p.discard_pending() == {}  # nothing left: ticks again queued nothing new


def test_discard_pending_on_nothing_queued_is_empty_and_harmless():
    p = KV()
    assert p.discard_pending() == {}
    p.tick()
    assert p.tick_count == 1


@pytest.mark.parametrize(
    ("left", "right"),
    [("x", 1), (1, "x"), ("x", 2.5), (2.5, "x")],
)
def test_lmax_lmin_blame_the_non_number(left, right):
    from blooml import lmin

    for cls in (lmax, lmin):
        with pytest.raises(LatticeValueError) as info:
            cls(left) | cls(right)
        assert info.value.value == "x"
        assert str(info.value).startswith(f"{cls.__name__}('x'): cannot be compared with")


def test_lmax_bottom_then_string_blames_the_string_for_later_numbers():
    p = High()
    p.best.insert(lmax("x"))  # ⊥ takes it: nothing to compare with yet
    p.tick()
    p.best.insert(lmax(3))
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.value == "x"
    assert "lmax('x'): cannot be compared with 3" in str(info.value)
    assert info.value.pending_input == {"best": [lmax(3)]}


def test_key_conflict_in_direct_table_input_names_the_second_row():
    p = KV()
    p.kv.insert([("a", 1)])
    p.tick()
    p.kv.insert([("z", 0), ("a", 2)])  # conflicts with the stored ("a", 1)
    with pytest.raises(KeyConstraintError) as info:
        p.tick()
    assert info.value.pending_input == {"kv": [("a", 2)]}
    assert tuples(p.kv) == {("a", 1)}
    assert p.discard_pending() == {"kv": [("z", 0), ("a", 2)]}
    p.tick()
    assert tuples(p.kv) == {("a", 1)}


class Joined(Program):
    inp = scratch(["x"])
    factor = table(["x"], ["f"])
    out = table(["x", "v"])

    @bloom
    def rules(self):
        self.out <= self.inp.join(self.factor, self.inp.x == self.factor.x).map(
            lambda i, f: (i.x, 1 / f.f)
        )


def test_rule_raising_after_a_join_names_the_input_it_reads():
    p = Joined()
    p.factor.insert([(1, 2), (2, 0)])
    p.inp.insert([(1,), (2,)])
    with pytest.raises(ZeroDivisionError) as info:
        p.tick()
    # no single row is blamed through a join: all the input the rule reads is named
    assert info.value.pending_input == {"factor": [(1, 2), (2, 0)], "inp": [(1,), (2,)]}
    assert tuples(p.out) == set()
    p.discard_pending()
    p.factor.insert([(1, 2)])
    p.inp.insert([(1,)])
    p.tick()
    assert tuples(p.out) == {(1, 0.5)}


def test_filter_then_map_culprit_row_is_found():
    class FM(Program):
        inp = scratch(["x"])
        out = table(["x", "v"])

        @bloom
        def rules(self):
            self.out <= self.inp.filter(lambda r: r.x < 100).map(lambda r: (r.x, 10 // r.x))

    p = FM()
    p.inp.insert([(5,), (0,), (500,)])
    with pytest.raises(ZeroDivisionError) as info:
        p.tick()
    assert info.value.pending_input == {"inp": [(0,)]}


def test_every_queued_row_a_rule_raises_on_is_named_so_one_discard_clears_them():
    # all of them, not the first: a batch holding several poison rows is then cleared by one
    # discard_pending(exc.pending_input) (and a node's isolation by one retry), not one
    # failed tick per row
    class Root(Program):
        inp = scratch(["x"])
        out = table(["x", "root"])

        @bloom
        def rules(self):
            self.out <= self.inp.map(lambda r: (r.x, math.sqrt(r.x)))

    p = Root()
    p.inp.insert([(4,), (-1,), (9,), (-5,)])
    with pytest.raises(ValueError) as info:
        p.tick()
    assert info.value.pending_input == {"inp": [(-1,), (-5,)]}
    assert "could not take the queued input {inp: [(-1,), (-5,)]}" in _note_text(info.value)
    assert p.discard_pending(info.value.pending_input) == {"inp": [(-1,), (-5,)]}
    p.tick()
    assert tuples(p.out) == {(4, 2.0), (9, 3.0)}


def test_discard_only_the_input_the_tick_could_not_take():
    p = Inverse()
    p.inp.insert([(4,), (0,), (5,)])
    p.other.insert([("kept",)])
    with pytest.raises(ZeroDivisionError) as info:
        p.tick()
    dropped = p.discard_pending(info.value.pending_input)
    assert dropped == {"inp": [(0,)]}
    p.tick()  # the rest of the queue is taken
    assert tuples(p.out) == {(4, 0.25), (5, 0.2)} and tuples(p.seen) == {("kept",)}


def test_discard_only_lattice_values_and_key_conflicts():
    p = High()
    p.best.insert(lmax(3))
    p.tick()
    p.best.insert(lmax(5))
    p.best.insert(lmax("x"))
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert p.discard_pending(info.value.pending_input) == {"best": [lmax("x")]}
    p.tick()
    assert p.best.value == lmax(5)
    q = KV()
    q.put.insert([("b", 2), ("b", 3), ("c", 4)])
    with pytest.raises(KeyConstraintError) as info2:
        q.tick()
    q.discard_pending(info2.value.pending_input)
    q.tick()
    assert tuples(q.kv) == {("b", 2), ("c", 4)}


def test_discard_only_rejects_what_is_not_input():
    from blooml import BloomlError

    p = KV()
    with pytest.raises(BloomlError, match="name no collection"):
        p.discard_pending({"nope": [(1,)]})
    with pytest.raises(BloomlError, match="expected"):
        p.discard_pending([("a", 1)])  # type: ignore[arg-type]
    p.put.insert([("a", 1)])
    assert p.discard_pending({"put": [("z", 9)]}) == {}  # not queued: nothing dropped
    p.tick()
    assert tuples(p.kv) == {("a", 1)}


class LminHead(Program):
    """Issue 27: a string reaches an ``lmin`` column that holds a float (the program of the
    issue: ``SparkEngine`` refuses the string before any job with a ``ColumnValueError``)."""

    link = table(["a", "b"], ["c"])
    path = table(["a", "b"], ["c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.a, 2, lmin(lk.c)))


class LminWide(Program):
    """As ``LminHead`` with two lattice columns after the key (the general merge loop)."""

    link = table(["a", "b"], ["c"])
    path = table(["a"], ["lo", "hi"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.a, lmin(lk.c), lmax(lk.b)))


@pytest.mark.parametrize("incremental", [True, False])
@pytest.mark.parametrize(
    ("program", "column", "held", "after"),
    [
        (LminHead, "c", {(1, 2, lmin(3.0))}, {(1, 2, lmin(1.5))}),
        (LminWide, "lo", {(1, lmin(3.0), lmax(2))}, {(1, lmin(1.5), lmax(4))}),
    ],
)
def test_a_string_into_an_lmin_column_names_collection_column_and_value(
    program, column, held, after, incremental
):
    p = program(incremental=incremental)
    p.link.insert([(1, 2, 3.0)])
    p.tick()
    before = (tuples(p.link), tuples(p.path), p.tick_count)
    p.link.insert([(1, 3, "x")])
    with pytest.raises(ColumnValueError) as info:
        p.tick()
    exc = info.value
    # one class for both engines (SparkEngine raises ColumnValueError), and still the
    # LatticeValueError (a ValueError) that callers caught before
    assert type(exc) is LatticeColumnValueError
    assert isinstance(exc, LatticeValueError) and isinstance(exc, ColumnTypeError)
    assert (exc.collection, exc.column, exc.value) == ("path", column, "x")
    assert exc.spark_type is None and exc.holds == "lmin of float" and exc.lattice == "lmin"
    assert str(exc).startswith(f"'path' column '{column}' holds lmin of float on the local engine")
    assert "it cannot hold 'x' (str)" in str(exc)
    assert isinstance(exc.__cause__, LatticeValueError)
    assert "cannot be compared with 3.0" in str(exc.__cause__)
    assert exc.pending_input == {"link": [(1, 3, "x")]}
    # the tick is atomic: nothing changed, and the next tick goes on from the stored state
    assert (tuples(p.link), tuples(p.path), p.tick_count) == before
    assert tuples(p.path) == held
    p.discard_pending()
    p.link.insert([(1, 4, 1.5)])
    p.tick()
    assert tuples(p.path) == after


def test_an_lmin_column_of_a_keyed_table_names_its_column_on_direct_input():
    class Direct(Program):
        inp = scratch(["k"], ["v"])
        kv = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.kv <= self.inp

    for incremental in (True, False):
        p = Direct(incremental=incremental)
        p.inp.insert([("a", lmin(1))])
        p.tick()
        p.inp.insert([("a", lmin("x"))])
        with pytest.raises(LatticeColumnValueError) as info:
            p.tick()
        assert (info.value.collection, info.value.column, info.value.value) == ("kv", "v", "x")
        assert tuples(p.kv) == {("a", lmin(1))}
        p.discard_pending()
        # straight into the table
        p.kv.insert([("a", lmin("y"))])
        with pytest.raises(LatticeColumnValueError) as info:
            p.tick()
        assert (info.value.collection, info.value.column, info.value.value) == ("kv", "v", "y")
        assert info.value.pending_input == {"kv": [("a", lmin("y"))]}
        assert tuples(p.kv) == {("a", lmin(1))}


@pytest.mark.parametrize("incremental", [True, False])
def test_an_lmin_column_of_a_soft_state_table_names_its_column(incremental):
    """A soft-state table stores one row at a time (``Relation.add``): the same error."""

    class Soft(Program):
        inp = scratch(["k"], ["v"])
        kv = table(["k"], ["v"], ttl=10)

        @bloom
        def rules(self):
            self.kv <= self.inp

    p = Soft(incremental=incremental)
    p.inp.insert([("a", lmin(1))])
    p.tick()
    p.inp.insert([("a", lmin("x"))])
    with pytest.raises(LatticeColumnValueError) as info:
        p.tick()
    assert (info.value.collection, info.value.column, info.value.value) == ("kv", "v", "x")
    assert tuples(p.kv) == {("a", lmin(1))}
