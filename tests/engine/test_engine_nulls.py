"""NULL (None) in aggregates, as Spark SQL has it and the Spark engine computes it: an
aggregate of a column skips NULL (``count(c)`` counts distinct non-NULL values; ``sum``,
``min``, ``max``, ``avg`` of nothing but NULL are NULL), and ``argmin``/``argmax`` never pick
a row whose value is NULL. Sums are exact (``math.fsum``), so they do not depend on the
order the rows arrive in. Checked on the incremental core and the reference evaluator, tick
after tick, against a reference written here."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import Program, accum, avg, bloom, bool_and, count, max_, min_, scratch, sum_, table


class Cart(Program):
    item = table(["k", "n"], ["v"])
    tot = scratch(["k"], ["s", "rows", "vals", "mean", "lo", "hi"])
    every = scratch([], ["s", "rows", "vals"])
    cheapest = scratch(["k", "n"], ["v"])
    seen = scratch(["k"], ["vs"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.tot <= self.item.group(
            ["k"], sum_("v"), count(), count("v"), avg("v"), min_("v"), max_("v")
        )
        self.every <= self.item.group(None, sum_("v"), count(), count("v"))
        self.cheapest <= self.item.argmin(["k"], "v")
        self.seen <= self.item.group(["k"], accum("v"))
    # fmt: on


def _sum(vals: list[Any]) -> Any:
    if not vals:
        return None
    if all(type(v) is int for v in vals):
        return sum(vals)
    return math.fsum(vals)


def _reference(rows: set[tuple[Any, ...]]) -> dict[str, set[tuple[Any, ...]]]:
    """What Spark SQL computes, written out plainly."""
    groups: dict[Any, list[Any]] = {}
    for k, _n, v in rows:
        groups.setdefault(k, []).append(v)
    tot, cheapest, seen = set(), set(), set()
    for k, vs in groups.items():
        nn = [v for v in vs if v is not None]
        mean = None if not nn else float(_sum(nn)) / len(nn)
        tot.add((k, _sum(nn), len(vs), len(set(nn)), mean, min(nn, default=None),
                 max(nn, default=None)))  # fmt: skip
        seen.add((k, frozenset(nn)))
        if nn:
            lo = min(nn)
            cheapest |= {r for r in rows if r[0] == k and r[2] is not None and r[2] == lo}
    allv = [v for _k, _n, v in rows if v is not None]
    every = {(_sum(allv), len(rows), len(set(allv)))} if rows else set()
    return {"tot": tot, "every": every, "cheapest": cheapest, "seen": seen}


def _state(p: Program) -> dict[str, set[tuple[Any, ...]]]:
    return {n: set(map(tuple, getattr(p, n))) for n in ("tot", "every", "cheapest", "seen")}


def test_sum_over_a_none_skips_it_as_spark_sql_does() -> None:
    """Issue 27: the local engine raised a bare TypeError where SparkEngine gave ('a', 1, 2)."""

    class P(Program):
        t = table(["k", "n"], ["v"])
        s = scratch(["k"], ["s", "n"])

        @bloom
        def rules(self) -> None:
            self.s <= self.t.group(["k"], sum_("v"), count("v"))

    for incremental in (True, False):
        p = P(incremental=incremental)
        p.t.insert([("a", 1, 1), ("a", 2, None), ("b", 1, None)])
        p.tick()
        assert set(map(tuple, p.s)) == {("a", 1, 1), ("b", None, 0)}


def test_bool_and_skips_none_and_accum_of_only_none_is_empty() -> None:
    class P(Program):
        t = table(["k", "n"], ["b"])
        s = scratch(["k"], ["every", "acc"])

        @bloom
        def rules(self) -> None:
            self.s <= self.t.group(["k"], bool_and("b"), accum("b"))

    p = P()
    p.t.insert([("a", 1, True), ("a", 2, None), ("b", 1, None)])
    p.tick()
    assert set(map(tuple, p.s)) == {("a", True, frozenset({True})), ("b", None, frozenset())}


def test_float_sums_are_exact_whatever_the_order() -> None:
    vals = [0.1, 0.2, 0.3, 1e16, 1.0, -1e16]
    for incremental in (True, False):
        p = Cart(incremental=incremental)
        p.item.insert([("a", i, v) for i, v in enumerate(vals)])
        p.tick()
        (row,) = [r for r in p.tot if r.k == "a"]
        assert row.s == math.fsum(vals) == 1.6
        assert row.mean == 1.6 / 6


VALUES = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.sampled_from([0.1, 0.2, 0.3, 2.5, -0.7, 1e16, -1e16, 1e-300]),
)
ROW = st.tuples(st.sampled_from("ab"), st.integers(0, 3), VALUES)


@settings(max_examples=60, deadline=None)
@given(ticks=st.lists(st.tuples(st.lists(ROW, max_size=4), st.lists(ROW, max_size=2)), max_size=6))
@pytest.mark.parametrize("incremental", [True, False])
def test_aggregates_skip_null_tick_after_tick(
    incremental: bool, ticks: list[tuple[list[Any], list[Any]]]
) -> None:
    p = Cart(incremental=incremental)
    stored: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for ins, dels in ticks:
        ins = list({(k, n): (k, n, v) for k, n, v in ins if (k, n) not in stored}.values())
        dels = [stored[(k, n)] for k, n, _ in dels if (k, n) in stored]
        p.item.insert(ins)
        p.item.delete(dels)
        p.tick()
        for r in dels:
            stored.pop(r[:2], None)
        stored.update({r[:2]: r for r in ins})
        assert _state(p) == _reference(set(stored.values()))


def test_a_row_holding_none_folds_into_a_lattice_as_bottom() -> None:
    """A collection folded into a lattice variable skips a None (NULL is ⊥), as Spark's
    ``lfold`` does; ``lmax.from_item(None)`` raised, and an ``lset`` gained None."""
    from blooml import lmax, lset

    class P(Program):
        t = table(["k", "v"])
        top = lmax()
        vals = lset()
        pairs = lset()

        @bloom
        def rules(self) -> None:
            self.top <= self.t.map(lambda r: r.v)
            self.vals <= self.t.map(lambda r: r.v)
            self.pairs <= self.t.map(lambda r: (r.k, r.v))

    p = P()
    p.t.insert([("a", None), ("b", 3), (None, 4)])
    p.tick()
    assert p.top.value == lmax(4)
    assert p.vals.value == lset({3, 4})
    assert p.pairs.value == lset({("b", 3)})
