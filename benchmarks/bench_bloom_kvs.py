"""Incrementality of the embedded engine: one put per tick into a store of N keys (issue 3, §5).

The programs are the key-value stores of ``examples/kvs.py``:

* ``KVS``: the store is one ``lmap`` of ``lmax((version, value))``; a put merges one key;
* ``TableKVS``: Bud's store, a table replaced by ``<-`` and ``<+`` (a join of the put with the
  stored row finds the row to delete).

For N = 1,000 and N = 100,000 stored keys, the script loads N keys, then times ``--ticks``
ticks that each carry one put (half overwrite an existing key, half add a new one). The work
of a tick should depend on what changed, not on N, so the target is CPU time per tick at
N = 100,000 / CPU time per tick at N = 1,000 <= 2 (CPU time of the process, robust to other
load on the machine; wall-clock times are printed too). Peak memory (tracemalloc) is measured
in a separate run that loads the store and runs the same ticks. Exit status 1 when a
target is missed or a store holds the wrong contents.

    python benchmarks/bench_bloom_kvs.py [--quick] [--ticks T]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header, load_example, mib, peak_memory

TARGET = 2.0
kvs = load_example("kvs")


def key(i: int) -> str:
    return f"key{i:07d}"


class LatticeStore:
    """Drives ``KVS`` (lmap)."""

    name = "KVS (lmap)"

    def __init__(self, n: int) -> None:
        self.p = kvs.KVS()
        self.reqid = 0
        self.model: dict[str, Any] = {}
        self.put_many([(key(i), f"v{i}") for i in range(n)])
        self.p.tick()

    def put_many(self, items: list[tuple[str, str]]) -> None:
        rows = []
        for k, val in items:
            self.reqid += 1
            rows.append((self.reqid, k, self.reqid, val))  # version = reqid: newer wins
            self.model[k] = val
        self.p.kvput.insert(rows)

    def contents(self) -> dict[str, Any]:
        return kvs.store_dict(self.p)


class TableStore:
    """Drives ``TableKVS`` (a table; a put is a delete plus an insert at the next tick)."""

    name = "TableKVS (table, <- and <+)"

    def __init__(self, n: int) -> None:
        self.p = kvs.TableKVS()
        self.reqid = 0
        self.model: dict[str, Any] = {}
        self.put_many([(key(i), f"v{i}") for i in range(n)])
        self.p.tick()
        self.p.tick()  # <+ lands at the next tick

    def put_many(self, items: list[tuple[str, str]]) -> None:
        rows = []
        for k, val in items:
            self.reqid += 1
            rows.append((self.reqid, k, val))
            self.model[k] = val
        self.p.kvput.insert(rows)

    def contents(self) -> dict[str, Any]:
        self.p.tick()  # let the last put land
        return {r.key: r.value for r in self.p.kvstate}


def tick_puts(
    store: Any, n: int, ticks: int, seed: int, budget: float = 20.0
) -> tuple[float, float]:
    """Run ``ticks`` ticks with one put each (stopping early once ``budget`` seconds have
    passed, so that a slow engine keeps the script short); return (CPU, wall) seconds per
    tick. CPU time is what the ticks cost this process, whatever else loads the machine."""
    rng = random.Random(seed)
    plan = []
    for t in range(ticks):
        k = key(rng.randrange(n)) if t % 2 == 0 else key(n + t)  # overwrite / new key
        plan.append((k, f"t{t}"))
    p = store.p
    done = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for item in plan:
        store.put_many([item])
        p.tick()
        done += 1
        if done >= 20 and time.perf_counter() - t0 > budget:
            break
    return (time.process_time() - c0) / done, (time.perf_counter() - t0) / done


def measure(cls: type, n: int, ticks: int, warmup: int) -> tuple[tuple[float, float], bool, int]:
    """(CPU, wall) seconds per tick at ``n`` keys, whether the contents are right, and peak
    memory."""
    store = cls(n)
    tick_puts(store, n, warmup, seed=n + 1, budget=5.0)
    per_tick = tick_puts(store, n, ticks, seed=n)
    ok = store.contents() == store.model
    del store

    def load_and_tick() -> None:
        s = cls(n)
        tick_puts(s, n, min(ticks, 200), seed=n, budget=5.0)

    return per_tick, ok, peak_memory(load_and_tick)


def run(
    small: int = 1_000, large: int = 100_000, ticks: int = 2_000, warmup: int = 200
) -> Verdicts:
    """Measure both stores at both sizes; print and return the verdicts."""
    header(
        "Bloom^L engine incrementality: one put per tick into a store of N keys",
        {
            "N": f"{small:,} and {large:,}",
            "ticks timed": f"{ticks:,} per size after {warmup} warm-up ticks (at most ~20 s)",
            "target": f"CPU time per tick at N={large:,} / at N={small:,} <= {TARGET:g}",
        },
    )
    v = Verdicts()
    for cls in (LatticeStore, TableStore):
        print(f"\n-- {cls.name}")
        results = {}
        for n in (small, large):
            (cpu, wall), ok, peak = measure(cls, n, ticks, warmup)
            results[n] = (cpu, wall)
            print(
                f"   N={n:>9,}: {cpu * 1e6:8.1f} us CPU, {wall * 1e6:8.1f} us wall per tick"
                f"   peak memory {mib(peak)}"
            )
            v.check(f"{cls.name} contents at N={n:,}", ok, "store == model")
        ratio = results[large][0] / results[small][0]
        wall_ratio = results[large][1] / results[small][1]
        print(f"   ratio {ratio:.2f}x CPU ({wall_ratio:.2f}x wall)")
        v.check(f"{cls.name} incrementality", ratio <= TARGET, f"{ratio:.2f}x <= {TARGET:g} (CPU)")
    print()
    return v


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--ticks", type=int, default=2_000, help="timed ticks per size")
    args = ap.parse_args(argv)
    quick = {"small": 100, "large": 2_000, "ticks": 100, "warmup": 10}
    v = run(**quick) if args.quick else run(ticks=args.ticks)
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
