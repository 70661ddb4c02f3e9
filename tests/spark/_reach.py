"""The programs of the streaming tests (tests/spark/test_stream.py, test_connect.py), in a module
of its own so that a Spark Connect server's Python can import it: reachability over edges that
arrive tick by tick, with temporal rules and a lattice variable."""

from __future__ import annotations

import json
import os
from pathlib import Path

from blooml import Program, bloom, lmax, table


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
