"""The programs of the streaming tests (tests/spark/test_stream.py, test_connect.py), in a module
of its own so that a Spark Connect server's Python can import it: reachability over edges that
arrive tick by tick, with temporal rules and a lattice variable; and group-bys kept across
ticks of small inserts and a delete (test_tick_cost.py, test_connect.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from blooml import Program, bloom, count, lmax, max_, min_, scratch, sum_, table


class Reach(Program):
    """Reachability over edges that arrive tick by tick; reversed edges arrive a tick later."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    back = table(["a", "b"])
    gone = table(["a", "b"])
    top = lmax()

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.back <+ self.edge.map(lambda e: (e.b, e.a))
        self.gone <+ self.edge.filter(lambda e: e.a == 0)
        self.gone <- self.gone.filter(lambda g: g.b > 1)
        self.top <= self.edge.map(lambda e: e.b)
    # fmt: on


class Best(Program):
    """One successor per node: two edges from one node are a key conflict in ``best``."""

    edge = table(["a", "b"])
    best = table(["a"], ["b"])

    @bloom
    def rules(self):
        self.best <= self.edge


#: the rows of collection ``edge``, one list per micro-batch (tick)
BATCHES = [[(0, 1), (1, 2)], [(2, 3)], [(3, 4), (0, 5)], [(5, 6)]]


def local(batches: list[list[tuple[int, int]]]) -> Program:
    """The program run by the local engine, one tick per batch: the expected state."""
    p = Reach()
    for rows in batches:
        p.edge.insert(rows)
        p.tick()
    return p


def write_batch(folder: Path, i: int, rows: list[tuple[int, int]]) -> None:
    """Batch ``i`` as a JSON file for Spark's file source (one file per micro-batch)."""
    path = folder / f"batch-{i}.json"
    path.write_text("".join(json.dumps({"a": a, "b": b}) + "\n" for a, b in rows))
    t = 1_700_000_000 + i * 10
    os.utime(path, (t, t))  # the file source takes files in modification-time order


class Stats(Program):
    """Group-bys kept up to date across ticks: inserts touch their groups only; a delete (or
    anything else that removes rows) recomputes them."""

    link = table(["src", "dst", "c"])
    drop = scratch(["src", "dst", "c"])
    fan = scratch(["src"], ["n"])
    spend = scratch(["src"], ["total"])
    lo = scratch(["src"], ["m"])
    hi = scratch(["src"], ["m"])

    # fmt: off
    @bloom
    def rules(self):
        self.fan <= self.link.group(["src"], count())
        self.spend <= self.link.group(["src"], sum_("c"))
        self.lo <= self.link.group(["src"], min_("c"))
        self.hi <= self.link.group(["src"], max_("c"))
        self.link <- self.drop
    # fmt: on


STATS_TICKS: list[dict[str, list[tuple[int, ...]]]] = [
    {"link": [(i % 7, i, i % 11 + 1) for i in range(60)]},
    {"link": [(3, 100, 50)]},  # one group grows: count, sum, max change, min does not
    {"link": [(3, 100, 50), (9, 1, 4)]},  # a row stored already, a new group
    {},
    {"link": [(9, 2, -4), (9, 3, 0)], "drop": [(0, 0, 1)]},  # the delete applies next tick
    {"link": [(0, 200, 2)]},  # after the delete: the groups were recomputed, now one grows
    {"link": [(4, 300, 1), (5, 301, 99)]},
]
