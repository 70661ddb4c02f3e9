"""A relation's hash indexes agree with its store through repeats, deletions and rollbacks."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, bloom, scratch, table
from blooml.bloom import accum, count
from blooml.engine.relation import Relation


def _check(rel: Relation, cols: tuple[int, ...]) -> None:
    idx = rel.index(cols, build=True)
    from_store: dict[Any, list[Any]] = {}
    for r in rel.store.values():
        k = r[cols[0]] if len(cols) == 1 else tuple(r[c] for c in cols)
        from_store.setdefault(k, []).append(r)
    assert {k: sorted(v) for k, v in idx.items() if v} == {
        k: sorted(v) for k, v in from_store.items()
    }
    for rows in idx.values():  # the very objects stored (a deletion finds them by identity)
        assert all(any(r is s for s in rel.store.values()) for r in rows)


class Edges(Program):
    e = table(["x", "y"])
    r = table(["x", "y"])

    @bloom
    def rules(self) -> None:
        self.r <= self.e.flat_map(lambda t: [(t.x, t.y), (t.x, t.y)])  # repeats in one batch


def test_a_batch_repeating_rows_keeps_one_object_in_store_and_indexes() -> None:
    p = Edges()
    rel = p._rt.rels["r"]
    rel.index((1,))  # an index that replays the change log
    p.e.insert([(1, 2), (2, 3)])
    p.tick()
    _check(rel, (1,))
    p.r.delete([(1, 2)])
    p.tick()
    _check(rel, (1,))


def test_a_rollback_keeps_indexes_consistent() -> None:
    class Boom(Program):
        e = table(["x", "y"])
        bad = scratch(["x"])

        @bloom
        def rules(self) -> None:
            self.bad <= self.e.map(lambda t: (1 // (t.y - 9),))

    p = Boom()
    rel = p._rt.rels["e"]
    p.e.insert([(1, 2), (2, 3)])
    p.tick()
    rel.index((0,))
    p.e.insert([(5, 9)])  # the rule divides by zero: the tick rolls back
    try:
        p.tick()
    except ZeroDivisionError:
        p.discard_pending()
    _check(rel, (0,))
    assert sorted(map(tuple, rel.store.values())) == [(1, 2), (2, 3)]


def test_accum_and_count_of_values_that_do_not_compare() -> None:
    class Mixed(Program):
        t = table(["k", "v"])
        out = scratch(["k"], ["vals", "n"])

        @bloom
        def rules(self) -> None:
            self.out <= self.t.group(["k"], accum("v"), count("v"))

    for incremental in (True, False):
        p = Mixed(incremental=incremental)
        p.t.insert([(1, "a"), (1, 2), (2, None)])
        p.tick()
        p.t.delete([(1, 2)])
        p.tick()
        # None is skipped, as Spark SQL's aggregates skip NULL
        assert sorted(map(tuple, p.out)) == [(1, frozenset({"a"}), 1), (2, frozenset(), 0)]


class Keyed(Program):
    kv = table(["k"], ["v"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["put", "del"]), st.integers(0, 6), st.integers(0, 2)),
        max_size=30,
    )
)
def test_an_index_on_the_key_follows_puts_replacements_and_deletes(ops: Any) -> None:
    """The index on a relation's key is built with one-row tuple buckets (in C); the
    replay of the change log turns a bucket into a list when it changes and keeps it equal
    to the store, a rollback included."""
    p = Keyed()
    rel = p._rt.rels["kv"]
    rel.add_many([(k, 0) for k in range(4)], 0.0)
    assert type(rel.index((0,), build=True)[0]) is tuple
    for op, k, v in ops:
        if op == "put":
            rel.put(k, rel.make_row((k, v), "test"))
        else:
            rel.drop(k)
        _check(rel, (0,))
    token = rel.begin()
    rel.drop(1)
    rel.put(9, rel.make_row((9, 9), "test"))
    rel.rollback(token)
    _check(rel, (0,))


def test_the_store_answers_probes_on_the_key_until_they_pay_for_an_index() -> None:
    """A few probes of a large collection on its key read its store (an insert into a
    recursive view's input probes it once: building the index cost a pass over the view);
    once the probes outnumber the rows, the index is built and kept up to date."""
    p = Keyed()
    rel = p._rt.rels["kv"]
    rel.add_many([(k, k * 10) for k in range(100)], 0.0)
    probe = rel.index((0,))
    assert probe.get(7, ()) == ((7, 70),) and probe.get(700, ()) == ()
    assert 5 in probe and 500 not in probe
    assert rel.indexes == {}
    for k in range(100):
        rel.index((0,)).get(k)
    idx = rel.index((0,))
    assert type(idx) is dict and idx[3] == ((3, 30),)
    rel.drop(3)
    assert 3 not in rel.index((0,))
    _check(rel, (0,))


def test_a_one_column_set_is_probed_by_its_value() -> None:
    class Nodes(Program):
        n = table(["n"])

    p = Nodes()
    rel = p._rt.rels["n"]
    rel.add_many([(1,), (2,)], 0.0)
    probe = rel.index((0,))
    assert probe.get(2, ()) == ((2,),) and probe.get(3) is None
