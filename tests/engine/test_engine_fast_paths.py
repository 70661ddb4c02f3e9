"""Edge cases of the engine's fast paths: keyed (one key, one value) heads with lattice
columns, the single-column index build, and external rows converted once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import (
    KeyConstraintError,
    Program,
    ProgramError,
    bloom,
    lmax,
    lmin,
    lset,
    scratch,
    table,
)
from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice


def tuples(coll):
    return {tuple(r) for r in coll}


class KV(Program):
    """Rows of ``inp`` (key, value) go to the keyed head ``kv`` through a rule."""

    inp = table(["i"], ["k", "v"])
    kv = table(["k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.kv <= self.inp.map(lambda r: (r.k, r.v))
    # fmt: on


def run_kv(rows):
    p = KV()
    p.inp.insert([(i, k, v) for i, (k, v) in enumerate(rows)])
    p.tick()
    return p


def snapshot(p):
    return {name: tuples(getattr(p, name)) for name in ("inp", "kv")}


# -- lmin / lmax values compared raw -----------------------------------------------------------


def test_lmin_column_keeps_the_smallest_and_ignores_bottom():
    p = run_kv([("a", lmin(5)), ("a", lmin()), ("a", lmin(3)), ("a", lmin(4)), ("b", lmin())])
    assert {r.k: r.v for r in p.kv} == {"a": lmin(3), "b": lmin()}


def test_bottom_stored_first_is_replaced_by_a_value():
    p = run_kv([("a", lmin()), ("a", lmin(7)), ("b", lmax()), ("b", lmax(2)), ("b", lmax(1))])
    assert {r.k: r.v for r in p.kv} == {"a": lmin(7), "b": lmax(2)}


def test_lmax_column_keeps_the_largest():
    p = run_kv([("a", lmax(1)), ("a", lmax(9)), ("a", lmax(4)), ("a", lmax(9))])
    assert {r.k: r.v for r in p.kv} == {"a": lmax(9)}


def test_incomparable_ordered_values_raise_and_the_tick_is_atomic():
    p = KV()
    p.inp.insert([(0, "a", lmin(1))])
    p.tick()
    before = snapshot(p)
    p.inp.insert([(1, "a", lmin("x"))])
    with pytest.raises(LatticeValueError) as ei:
        p.tick()
    assert any("kv <= " in n for n in getattr(ei.value, "__notes__", ()))
    assert snapshot(p) == before and p.tick_count == 1


def test_two_lattice_classes_under_one_key_are_a_key_conflict():
    p = KV()
    p.inp.insert([(0, "a", lmin(1)), (1, "a", lmax(1))])
    with pytest.raises(KeyConstraintError):
        p.tick()
    assert tuples(p.kv) == set() and tuples(p.inp) == set()


def test_plain_value_conflict_raises_and_rolls_back():
    p = KV()
    p.inp.insert([(0, "a", 1), (1, "b", 2)])
    p.tick()
    before = snapshot(p)
    p.inp.insert([(2, "c", 3), (3, "a", 5)])  # "c" is stored before "a" conflicts
    with pytest.raises(KeyConstraintError) as ei:
        p.tick()
    assert "a" in str(ei.value)
    assert snapshot(p) == before
    with pytest.raises(KeyConstraintError):  # the input is still pending: the same conflict
        p.tick()
    assert snapshot(p) == before


def test_equal_plain_values_are_no_change():
    p = run_kv([("a", 1), ("a", 1), ("b", "x"), ("b", "x")])
    assert tuples(p.kv) == {("a", 1), ("b", "x")}


def test_mixed_lattice_and_plain_value_is_a_key_conflict():
    p = KV()
    p.inp.insert([(0, "a", lmin(1)), (1, "a", 1)])
    with pytest.raises(KeyConstraintError):
        p.tick()


class Longest(Lattice):
    """A user lattice: the longest string (ties broken by value)."""

    wrapper_name = "llongest_fastpath_test"

    def __init__(self, value: str = ""):
        super().__init__(value)

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        return self if (len(a), a) >= (len(b), b) else other


def test_user_lattice_column_is_merged():
    p = run_kv([("a", Longest("ab")), ("a", Longest("abcd")), ("a", Longest("x"))])
    assert {r.k: r.v for r in p.kv} == {"a": Longest("abcd")}


def test_lset_column_is_merged():
    p = run_kv([("a", lset([1])), ("a", lset([2])), ("a", lset([1]))])
    assert {r.k: r.v for r in p.kv} == {"a": lset([1, 2])}


def test_lattice_in_the_key_column_is_rejected_atomically():
    p = KV()
    p.inp.insert([(0, "a", 1), (1, lmin(3), 2)])
    with pytest.raises(ProgramError, match="key column"):
        p.tick()
    assert tuples(p.kv) == set()


class BadArity(Program):
    inp = table(["i"])
    kv = table(["k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.kv <= self.inp.map(lambda r: (r.i, r.i, r.i) if r.i == 2 else (r.i, r.i))
    # fmt: on


def test_wrong_arity_from_a_rule_is_reported():
    p = BadArity()
    p.inp.insert([(1,), (2,)])
    with pytest.raises(ProgramError, match="2 columns"):
        p.tick()
    assert tuples(p.kv) == set()


class Grow(Program):
    """The head is also indexed (joined on its value), so its change log is replayed."""

    inp = table(["i"], ["k", "v"])
    kv = table(["k"], ["v"])
    tag = table(["k"], ["t"])
    out = table(["k", "t"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.kv <= self.inp.map(lambda r: (r.k, r.v))
        self.out <= self.kv.join(self.tag, self.kv.k == self.tag.k).map(
            lambda a, b: (a.k, b.t, a.v)
        )
    # fmt: on


def test_keyed_head_changes_reach_an_index_across_ticks():
    p = Grow()
    p.tag.insert([("a", 1), ("b", 2)])
    p.inp.insert([(0, "a", lmin(9)), (1, "b", lmin(4))])
    p.tick()
    p.inp.insert([(2, "a", lmin(3)), (3, "b", lmin(8))])
    p.tick()
    assert {(r.k, r.t): r.v for r in p.out} == {("a", 1): lmin(3), ("b", 2): lmin(4)}


# -- a reference model -------------------------------------------------------------------------

values = st.one_of(
    st.builds(lmin, st.integers(-5, 5)),
    st.just(lmin()),
    st.builds(lmax, st.integers(-5, 5)),
    st.just(lmax()),
)


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from("abc"), values), max_size=12), st.integers(1, 3))
def test_keyed_lattice_head_equals_a_fold_by_key(rows, ticks):
    want: dict[str, object] = {}
    conflict = False
    for k, v in rows:
        if k in want:
            if type(want[k]) is not type(v):
                conflict = True
                break
            want[k] = want[k].merge(v)
        else:
            want[k] = v
    p = KV()
    chunks = [rows[i::ticks] for i in range(ticks)]
    try:
        for n, chunk in enumerate(chunks):
            p.inp.insert([(f"{n}.{i}", k, v) for i, (k, v) in enumerate(chunk)])
            p.tick()
    except KeyConstraintError:
        assert conflict
        return
    assert not conflict
    assert {r.k: r.v for r in p.kv} == want


# -- external input is converted to rows once ------------------------------------------------


def test_inserted_rows_are_rows_and_a_second_insert_is_deduplicated():
    class T(Program):
        link = table(["src", "dst"])

    p = T()
    p.link.insert([(1, 2), (2, 3)])
    p.link.insert([(1, 2)])
    p.tick()
    rows = list(p.link)
    assert sorted(rows) == [(1, 2), (2, 3)]
    assert all(r.src in (1, 2) for r in rows)


def test_a_row_of_the_collections_own_type_with_a_lattice_key_is_rejected():
    class T(Program):
        a = table(["x", "y"])

        # fmt: off
        @bloom
        def rules(self):
            self.a <= self.a.map(lambda r: r._replace(x=lmin(r.x)) if r.x == 2 else r)
        # fmt: on

    p = T()
    p.a.insert([(1, 1), (2, 2)])
    with pytest.raises(ProgramError, match="key column"):
        p.tick()
    assert tuples(p.a) == set()


def test_pending_keeps_the_checked_mark_only_for_all_checked_rows():
    from blooml.engine._state import Pending
    from blooml.engine.relation import CheckedRows

    p = Pending()
    p.add("inserts", "a", CheckedRows([(1,)]))
    assert type(p.inserts["a"]) is CheckedRows
    p.add("inserts", "a", CheckedRows([(2,)]))
    assert type(p.inserts["a"]) is CheckedRows
    p.add("inserts", "a", [(3,)])
    assert type(p.inserts["a"]) is list and p.inserts["a"] == [(1,), (2,), (3,)]
    p.add("inserts", "b", [(1,)])
    p.add("inserts", "b", CheckedRows([(2,)]))
    assert type(p.inserts["b"]) is list


class Deferred(Program):
    src = table(["x"])
    a = table(["x"])

    # fmt: off
    @bloom
    def rules(self):
        self.a <+ self.src.map(lambda s: (lmin(s.x),) if s.x < 0 else (s.x,))
    # fmt: on


def test_unchecked_deferred_rows_mixed_with_checked_input_are_still_checked():
    p = Deferred()
    p.src.insert([(-1,), (2,)])
    p.tick()  # queues a <+ row with a lattice in its key column
    p.a.insert([(7,)])  # checked external input for the same relation
    with pytest.raises(ProgramError, match="key column"):
        p.tick()
    assert tuples(p.a) == set()


def test_checked_input_is_stored_and_visible_next_tick():
    p = Deferred()
    p.a.insert([(1,), (2,), (1,)])
    assert tuples(p.a) == set()
    p.tick()
    assert tuples(p.a) == {(1,), (2,)}
    assert all(type(r).__name__ == "a" and r.x in (1, 2) for r in p.a)


# -- key conflicts among facts for the next tick are raised by the rule deriving them ---------


class Deferring(Program):
    put = table(["reqid"], ["k", "v"])
    kv = table(["k"], ["v"])
    rep = table(["k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.kv <+ self.put.map(lambda p: (p.k, p.v))
        self.rep <+- self.put.map(lambda p: (p.k, p.v))
    # fmt: on


def test_replace_facts_conflicting_with_each_other_raise_in_the_deriving_tick():
    p = Deferring()
    p.put.insert([(1, "k", "a"), (2, "k", "b")])
    with pytest.raises(KeyConstraintError) as ei:
        p.tick()
    assert p.tick_count == 0 and tuples(p.put) == set()
    assert any("kv <+" in n or "rep <+-" in n for n in ei.value.__notes__)


def test_equal_and_lattice_valued_deferred_facts_do_not_conflict():
    p = Deferring()
    p.put.insert([(1, "k", lmin(3)), (2, "k", lmin(1)), (3, "j", "x"), (4, "j", "x")])
    p.tick()
    p.tick()
    assert {r.k: r.v for r in p.kv} == {"k": lmin(1), "j": "x"}
    assert {r.k: r.v for r in p.rep} == {"k": lmin(1), "j": "x"}


def test_a_deferred_fact_may_differ_from_the_stored_row_under_its_key():
    class KVS(Program):
        put = scratch(["reqid"], ["k", "v"])
        kv = table(["k"], ["v"])

        # fmt: off
        @bloom
        def rules(self):
            self.kv <+ self.put.map(lambda p: (p.k, p.v))
            self.kv <- self.kv.join(self.put, self.kv.k == self.put.k).map(lambda s, p: s)
        # fmt: on

    p = KVS()
    p.put.insert([(1, "k", "a")])
    p.tick(2)
    p.put.insert([(2, "k", "b")])
    p.tick(2)
    assert tuples(p.kv) == {("k", "b")}
