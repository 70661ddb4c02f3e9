"""A relation's hash indexes agree with its store through repeats, deletions and rollbacks."""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, scratch, table
from blooml.bloom import accum, count
from blooml.engine.relation import Relation


def _check(rel: Relation, cols: tuple[int, ...]) -> None:
    idx = rel.index(cols)
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
