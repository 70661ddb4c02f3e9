"""A durable lattice variable costs its change, not its size (issue 20, item 3).

A program holding ``store = durable(lmap())`` of N keys (100,000; 10,000 with ``--quick``)
takes one put per tick; a program with a durable table takes one row per tick. Both write one
SQLite transaction per tick. Printed: the median tick of each (over the same number of ticks,
measured in the same process, interleaved) and their ratio. Target: the lmap's tick within 2x
of the table's (the increment, a one-key ``lmap``, is written, not the whole map). The
restored store must equal the one written (a restore joins the base with the increments).

Exit status 1 when the target is missed or the restored state is wrong.

    python benchmarks/bench_net_durable.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header

from blooml import Program, bloom, durable, interface, lmap, lmax, table
from blooml.net.durable import close


class Store(Program):
    """A KVS whose store is a durable ``lmap`` of ``lmax((version, value))``."""

    put = interface(["key"], ["version", "value"])
    store = durable(lmap())

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.key, lmax((p.version, p.value))))  # noqa: B015
    # fmt: on


class Rows(Program):
    """The same puts into a durable table, one row per key."""

    put = interface(["key"], ["version", "value"])
    kept = table(["key"], ["version", "value"], durable=True)

    # fmt: off
    @bloom
    def rules(self):
        self.kept <= self.put  # noqa: B015
    # fmt: on


def one_tick(p: Program, key: int) -> float:
    """Seconds of one tick taking one put."""
    p.put.insert([(key, 1, f"v{key}")])  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    p.tick()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    args = ap.parse_args(argv)
    n, ticks = (10_000, 200) if args.quick else (100_000, 500)
    v = Verdicts()
    header("durable lmap vs durable table: one put per tick", {"keys": n, "ticks": ticks})
    with tempfile.TemporaryDirectory() as d:
        s = Store(data_dir=Path(d) / "lmap")
        r = Rows(data_dir=Path(d) / "table")
        t0 = time.perf_counter()
        s.put.insert([(k, 0, "x") for k in range(n)])
        s.tick()
        load = time.perf_counter() - t0
        r.put.insert([(k, 0, "x") for k in range(n)])
        r.tick()
        lat, tab = [], []
        for i in range(ticks):
            key = n + i
            lat.append(one_tick(s, key))
            tab.append(one_tick(r, key))
        written = s.store.value
        close(s)
        close(r)
        back = Store(data_dir=Path(d) / "lmap")
        v.check(
            "restored == written",
            back.store.value == written and len(written) == n + ticks,
            f"{len(back.store.value):,} keys",
        )
        close(back)
    m_lat, m_tab = statistics.median(lat), statistics.median(tab)
    ratio = m_lat / m_tab
    print(f"   first tick ({n:,} keys, base written whole): {load * 1000:.0f} ms")
    print(f"   durable table, one row:        median {m_tab * 1000:.3f} ms per tick")
    print(f"   durable lmap of {n:,}, one put: median {m_lat * 1000:.3f} ms per tick")
    print(f"   lmap vs table: {ratio:.2f}x")
    v.check(
        "one-put tick on the durable lmap within 2x of the table's", ratio <= 2.0, f"{ratio:.2f}x"
    )
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
