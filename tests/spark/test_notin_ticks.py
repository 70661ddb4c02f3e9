"""``notin`` with either side changing, tick after tick, on SparkEngine: random ticks that add
and delete rows on both sides of a ``notin`` into a scratch and into a table, with what reads
the scratch downstream (a ``group``, a global count, another ``notin``, a projection into a
scratch), every collection checked against the local engine after every tick; and what a
tick whose right side changes reads and runs, from Spark's status store."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from blooml import Program, bloom, count, scratch, table
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

from test_tick_cost_random import Meter  # noqa: E402


class Blocked(Program):
    """Links not into a blocked node, as a scratch (this tick's) and a table (ever seen), and
    what reads the scratch in later strata: groups, and notins with it on the right."""

    link = table(["src", "dst"])
    block = table(["node"])
    mark = table(["node"])
    drop = scratch(["src", "dst"])
    unblock = scratch(["node"])
    open = scratch(["src", "dst"])
    ever = table(["src", "dst"])
    per = scratch(["src"], ["n"])
    total = scratch([], ["n"])
    shut = scratch(["src", "dst"])
    calm = scratch(["node"])

    # fmt: off
    @bloom
    def rules(self):
        self.link <- self.drop
        self.block <- self.unblock
        self.open <= self.link.notin(self.block, self.link.dst == self.block.node)
        self.ever <= self.link.notin(self.block, self.link.dst == self.block.node)
        self.per <= self.open.group(["src"], count())
        self.total <= self.open.group([], count())
        self.shut <= self.link.notin(self.open)  # the right side gains and loses rows
        self.calm <= self.mark.notin(self.shut, self.mark.node == self.shut.dst)
    # fmt: on


class SameStratum(Program):
    """A scratch read in the stratum that derives it (so recomputed from nothing when its
    notin's right side changes), by a projection and by another notin."""

    link = table(["src", "dst"])
    block = table(["node"])
    mark = table(["node"])
    drop = scratch(["src", "dst"])
    open = scratch(["src", "dst"])
    back = scratch(["dst", "src"])
    lone = scratch(["src", "dst"])

    # fmt: off
    @bloom
    def rules(self):
        self.link <- self.drop
        self.open <= self.link.notin(self.block, self.link.dst == self.block.node)
        self.back <= self.open.map(lambda o: (o.dst, o.src))
        self.lone <= self.open.notin(self.mark, self.open.src == self.mark.node)
    # fmt: on


def _ticks(rnd: random.Random, nodes: int, n: int) -> list[dict[str, list[tuple[int, ...]]]]:
    """``n`` random ticks: links added or dropped, nodes blocked, unblocked or marked (the
    right sides of the notins gaining and losing rows), or nothing; each kind drawn alike."""
    links: set[tuple[int, int]] = set()
    blocked: set[int] = set()
    out: list[dict[str, list[tuple[int, ...]]]] = []
    for _ in range(n):
        tick: dict[str, list[tuple[int, ...]]] = {}
        for _ in range(rnd.randint(1, 2)):
            kind = rnd.choice(("link", "drop", "block", "unblock", "mark", "empty"))
            if kind == "link":
                new = (rnd.randrange(nodes), rnd.randrange(nodes))
                links.add(new)
                tick.setdefault("link", []).append(new)
            elif kind == "drop" and links:
                tick.setdefault("drop", []).append(rnd.choice(sorted(links)))
            elif kind == "block":
                node = rnd.randrange(nodes)
                blocked.add(node)
                tick.setdefault("block", []).append((node,))
            elif kind == "unblock" and blocked:
                tick.setdefault("unblock", []).append((rnd.choice(sorted(blocked)),))
            elif kind == "mark":
                tick.setdefault("mark", []).append((rnd.randrange(nodes),))
        out.append({k: sorted(set(v)) for k, v in tick.items()})
    return out


def _same(result: Any, p: Program, where: str) -> None:
    for name in Blocked.ir().collections:
        local = sorted(map(tuple, getattr(p, name)))
        assert sorted(result.rows(name)) == local, (where, name)


def _run_alongside(spark: Any, seed: int, nodes: int, n: int) -> None:
    rnd = random.Random(seed)
    first = {
        "link": sorted({(rnd.randrange(nodes), rnd.randrange(nodes)) for _ in range(3 * nodes)}),
        "block": [(rnd.randrange(nodes),)],
    }
    p = Blocked()
    engine = SparkEngine(spark, path="dataframe", program=Blocked)
    for i, inputs in enumerate([first, *_ticks(rnd, nodes, n)]):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        _same(engine.tick(inputs), p, f"seed {seed}, tick {i}: {inputs}")


#: ticks that change each side of each notin both ways: a node blocked (the right side of
#: open's notin gains a row, shut's right side loses rows) with a link added into it, the
#: unblock fact taken, then applied (right side loses a row: its links come back), a link
#: dropped (the fact taken, then applied: the left side loses a row) and a node marked
FIXED = [
    {"link": [(0, 1), (1, 2), (2, 3), (3, 1), (4, 1)], "block": [(3,)], "mark": [(4,)]},
    {"block": [(1,)], "link": [(2, 1)]},
    {"unblock": [(1,)]},
    {"drop": [(0, 1)], "mark": [(2,)]},
    {},
]


def test_notin_with_either_side_changing_equals_the_local_engine(spark: Any) -> None:
    p = Blocked()
    engine = SparkEngine(spark, path="dataframe", program=Blocked)
    meter = Meter(spark)
    for i, inputs in enumerate(FIXED):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        result = engine.tick(inputs)
        jobs, bare, _ = meter.take()
        # after the first tick every notin and group follows the changed keys: a job for the
        # inputs' lookups, one a stratum that looks up more (before: 21-29 a tick, every
        # notin over the whole state and open recomputed from nothing)
        assert bare == [] and (i == 0 or jobs <= 3), (i, inputs, jobs, result)
        _same(result, p, f"tick {i}: {inputs}")
        meter.take()  # the comparison's own jobs
    assert sorted(result.rows("shut")) == [(2, 3)]  # the links into the node still blocked


def _sorted_copies(spark: Any, ticks: list[dict[str, Any]], compact: int | None) -> None:
    from blooml.spark._dflookup import sorted_copy

    p = Blocked()
    engine = SparkEngine(spark, path="dataframe", program=Blocked)
    for i, inputs in enumerate(ticks):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        given = (
            {
                n: spark.createDataFrame(r, "src bigint, dst bigint") if n == "link" else r
                for n, r in inputs.items()
            }
            if i == 0
            else inputs
        )
        _same(engine.tick(given), p, f"tick {i}: {inputs}")
        if i == compact:  # link's overlay (its rows added and dropped) written anew
            engine.compact()
        state = engine._ticks[Blocked.ir().name].state
        if i in (0, compact):  # link's state files (and its copy) are current
            copy = sorted_copy(state["link"], "c1")
            assert copy is not state["link"], i
            assert sorted(copy.collect()) == sorted(state["link"].collect()), i
        assert sorted_copy(state["block"], "c1") is state["block"]


def test_the_columns_other_than_the_first_a_collection_is_looked_up_by() -> None:
    from blooml.spark._dflookup import lookup_columns

    # what gets a copy of its state files sorted by the column: link by dst (the notins by
    # block.node, calm's by shut.dst), shut by dst (calm's notin); not block (looked up by
    # its only column) nor open (by every column, the first prunes)
    got = {n: lookup_columns(Blocked.ir(), n) for n in Blocked.ir().collections}
    assert {n: c for n, c in got.items() if c} == {"link": ("c1",), "shut": ("c1",)}


@pytest.mark.slow
def test_lookups_by_a_second_column_read_its_sorted_copy_and_equal_the_local_engine_long(
    spark: Any, checkpoint_dir: Any
) -> None:
    # link is looked up by dst: its state files get a copy sorted by dst, which those
    # lookups read; the link added by a tick (the overlay) and the one dropped are found by
    # them as by lookups by src; a compaction writes link and its copy anew in step
    _sorted_copies(spark, FIXED, 1)


@pytest.mark.slow
def test_notin_with_either_side_changing_equals_the_local_engine_random(spark: Any) -> None:
    _run_alongside(spark, seed=3, nodes=8, n=8)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 4, 5])
def test_notin_with_either_side_changing_equals_the_local_engine_long(
    spark: Any, seed: int
) -> None:
    _run_alongside(spark, seed=seed, nodes=10, n=24)


def test_a_scratch_derived_from_a_table_that_lost_rows_loses_them(spark: Any) -> None:
    # the deleted link left ``link`` but stayed in ``open`` and ``back`` (scratches whose
    # rules were skipped: their inputs had gained nothing); then a blocked node's link left
    # ``open`` (recomputed) but stayed in ``back`` and ``lone`` (they read it in its stratum)
    engine = SparkEngine(spark, path="dataframe", program=SameStratum)
    engine.tick({"link": [(1, 2), (3, 4), (5, 6)]})
    engine.tick({"drop": [(1, 2)]})
    result = engine.tick({})
    assert sorted(result.rows("open")) == [(3, 4), (5, 6)]
    assert sorted(result.rows("back")) == [(4, 3), (6, 5)]
    result = engine.tick({"block": [(4,)]})
    assert sorted(result.rows("back")) == [(6, 5)]
    assert sorted(result.rows("lone")) == [(5, 6)]


def _blocked_tick_cost(spark: Any, links: int, nodes: int, share: int) -> None:
    rnd = random.Random(7)
    pairs = sorted({(rnd.randrange(nodes), rnd.randrange(nodes)) for _ in range(links)})
    df = spark.createDataFrame(pairs, "src bigint, dst bigint")
    engine = SparkEngine(spark, path="dataframe", program=Blocked)
    loaded = engine.tick({"link": df, "block": [(0,)]})
    total = sum(len(loaded.rows(n)) for n in Blocked.ir().collections)
    meter = Meter(spark)
    node = rnd.choice([d for _, d in pairs if d != 0])
    ran = []
    for inputs in ({"block": [(node,)]}, {"unblock": [(node,)]}, {}):
        result = engine.tick(inputs)
        jobs, bare, records = meter.take()
        ran.append(jobs)
        # the blocked node's links leave open (looked up by dst: a Bloom filter per row
        # group skips the others), per and total follow by the groups they touch, shut and
        # calm by the keys: a few row groups per lookup (before: every rule re-evaluated
        # over the whole state, 8-19 jobs)
        assert bare == [] and jobs <= 3, (inputs, jobs, bare, result)
        assert records * share <= total, (inputs, records, total)
    assert ran[1] == 0  # the tick that takes the unblock fact; the next applies it:
    into = sorted(r for r in pairs if r[1] == node)
    assert sorted(r for r in result.rows("open") if r[1] == node) == into
    assert sorted(r for r in result.rows("ever") if r[1] == node) == into


@pytest.mark.slow
@pytest.mark.parametrize(("links", "share"), [(4000, 3), (40000, 20)], ids=["4k", "40k"])
def test_a_tick_that_blocks_and_unblocks_a_node_reads_its_links_only(
    spark: Any, checkpoint_dir: Any, monkeypatch: Any, links: int, share: int
) -> None:
    monkeypatch.setattr("blooml.spark._dffiles.STATE_ROW_GROUP", 1024)
    # a lookup by 8 keys reads ~8 row groups of ~100 rows in each collection it looks in
    _blocked_tick_cost(spark, links=links, nodes=links // 5, share=share)
