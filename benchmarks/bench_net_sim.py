"""The two-node stream of ``bench_net_tcp.py`` through the simulator, and durable ticks
(issue 12, §4, §6, §8).

1. ``Source`` sends batches of 3-column tuples ``(dst, k, lmax(k))`` to ``Sink`` in a
   ``blooml.net.Simulation`` (every message encoded and decoded with the wire codec, random
   delays, virtual clock). Printed: tuples/s of wall-clock time, and the ratios to the same run
   on a ``LocalNetwork`` (no codec) and on a simulation with ``codec=False``, measured in the
   same process. Every tuple must arrive and the sink's table must be right.
2. A program whose table is ``durable=True`` (one SQLite transaction per tick) against the
   same program without durability: ticks/s and the ratio (the cost of a committed tick on
   disk). The restored state must equal the state written.

Exit status 1 when a tuple is lost or a result is wrong (speeds are printed, not judged).

    python benchmarks/bench_net_sim.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header
from bench_net_tcp import Sink, Source

from blooml import LocalNetwork, Program, bloom, interface, lmax, table
from blooml.net import Simulation
from blooml.net.durable import close


def stream(kind: str, n: int, b: int) -> tuple[float, dict[int, lmax]]:
    """Seconds to stream ``n`` tuples in ticks of ``b`` from a Source to a Sink over
    ``kind`` (``sim``, ``sim-nocodec`` or ``local``); the sink's table."""
    if kind == "local":
        net: object = LocalNetwork()
    else:
        net = Simulation(seed=1, delay=(0.0005, 0.002), codec=kind == "sim")
    source = Source(addr="source", network=net)
    sink = Sink(addr="sink", network=net)
    batches = [[("sink", k, lmax(k)) for k in range(i, min(i + b, n))] for i in range(0, n, b)]
    t0 = time.perf_counter()
    if isinstance(net, Simulation):
        for j, rows in enumerate(batches):
            net.at(0.001 * j, lambda s, rows=rows: source.src.insert(rows))
        net.settle()
    else:
        assert isinstance(net, LocalNetwork)
        for rows in batches:
            source.src.insert(rows)
            net.tick()
        net.tick(2)
    elapsed = time.perf_counter() - t0
    return elapsed, {r.bucket: r.v for r in sink.best}


class Log(Program):
    """One row per tick into a (durable or plain) table."""

    add = interface(["i"], ["v"])
    plain = table(["i"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.plain <= self.add  # noqa: B015
    # fmt: on


class DurableLog(Program):
    add = interface(["i"], ["v"])
    kept = table(["i"], ["v"], durable=True)

    # fmt: off
    @bloom
    def rules(self):
        self.kept <= self.add  # noqa: B015
    # fmt: on


def ticks(p: Program, n: int, rows: int) -> float:
    t0 = time.perf_counter()
    for t in range(n):
        p.add.insert([(t * rows + j, lmax(j)) for j in range(rows)])  # type: ignore[attr-defined]
        p.tick()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    args = ap.parse_args(argv)
    n, b = (10_000, 500) if args.quick else (100_000, 1_000)
    v = Verdicts()
    header("two nodes through the simulator: tuples/s", {"tuples": n, "batch per tick": b})
    want = {bk: lmax(max(range(bk, n, 1000))) for bk in range(min(n, 1000))}
    times = {}
    for kind in ("local", "sim-nocodec", "sim"):
        gc.collect()
        elapsed, best = stream(kind, n, b)
        times[kind] = elapsed
        v.check(f"{kind}: every tuple, right table", best == want, f"{len(best)} buckets")
        print(f"   {kind:<12} {n / elapsed:>12,.0f} tuples/s")
    print(
        f"   simulator with codec vs LocalNetwork: {times['local'] / times['sim']:.2f}x; "
        f"codec share of the simulator's time: {1 - times['sim-nocodec'] / times['sim']:.0%}"
    )

    nt, rows = (300, 10) if args.quick else (2_000, 10)
    header("durable table: committed ticks/s", {"ticks": nt, "rows per tick": rows})
    plain_s = ticks(Log(), nt, rows)
    with tempfile.TemporaryDirectory() as d:
        dp = DurableLog(data_dir=d)
        dur_s = ticks(dp, nt, rows)
        stored = sorted(tuple(r) for r in dp.kept)
        close(dp)
        back = DurableLog(data_dir=d)
        v.check(
            "restored == written",
            sorted(tuple(r) for r in back.kept) == stored and len(stored) == nt * rows,
            f"{len(stored):,} rows",
        )
        close(back)
    print(f"   plain   {nt / plain_s:>10,.0f} ticks/s")
    print(f"   durable {nt / dur_s:>10,.0f} ticks/s (one SQLite transaction each, WAL)")
    print(f"   durable vs plain: {plain_s / dur_s:.2f}x")
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
