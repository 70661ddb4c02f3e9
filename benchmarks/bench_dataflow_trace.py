"""PomoFlow traces: appending small batches to a spine vs one re-sorted array.

An incremental operator appends one small batch of changes per timestamp to its trace and
looks keys up in it. This script appends ``--batches`` batches of ``--size`` updates (random
keys, times ``(epoch, iteration)``) and looks up every key of each batch first, as a join or
distinct does, comparing

* ``spine``: :class:`blooml.dataflow.Trace` (sorted batches merged by size), with
* ``flat``: one sorted column set rebuilt on every append (the obvious sorted structure),

and checks both hold the same updates. It prints the time per appended update and the ratio,
and exits with status 1 if the spine is not at least 5x faster (the ratio grows with the
trace's size: the flat array costs O(n) per append, the spine O(log n) amortized).

Usage: python benchmarks/bench_dataflow_trace.py [--batches B] [--size S] [--seed N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from bisect import bisect_left

from blooml.dataflow import Trace, ZSet

TARGET = 5.0


class FlatTrace:
    """The baseline: one sorted list of (key, time, weight), re-sorted on every append."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, tuple[int, int], int]] = []
        self.keys: list[int] = []

    def insert(self, batch: ZSet, t: tuple[int, int]) -> None:
        self.rows = sorted(self.rows + [(k, t, w) for k, w in batch])
        self.keys = [r[0] for r in self.rows]

    def history(self, key: int) -> list[tuple[tuple[int, int], int]]:
        i = bisect_left(self.keys, key)
        out = []
        while i < len(self.keys) and self.keys[i] == key:
            out.append(self.rows[i][1:])
            i += 1
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--size", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    batches = [
        (
            ZSet({rng.randrange(50_000): rng.choice((1, -1)) for _ in range(args.size)}),
            (e // 10, e % 10),
        )
        for e in range(args.batches)
    ]
    n = sum(len(b) for b, _ in batches)
    print(f"{args.batches} batches of about {args.size} updates ({n} updates), seed {args.seed}")

    t0 = time.process_time()
    spine = Trace()
    found_spine = 0
    for b, t in batches:
        for k, _w in b:
            found_spine += len(spine.history(k))
        spine = spine.insert(b, t)
    t_spine = time.process_time() - t0

    t0 = time.process_time()
    flat = FlatTrace()
    found_flat = 0
    for b, t in batches:
        for k, _w in b:
            found_flat += len(flat.history(k))
        flat.insert(b, t)
    t_flat = time.process_time() - t0

    same = found_spine == found_flat and sorted((k, t, w) for k, _v, t, w in spine) == flat.rows
    ratio = t_flat / t_spine
    print(f"spine: {t_spine * 1e6 / n:7.2f} us per update, batches now {spine.batch_sizes()}")
    print(f"flat:  {t_flat * 1e6 / n:7.2f} us per update")
    print(f"ratio: the spine is {ratio:.1f}x faster; same contents: {same}")
    print(f"memory held by the spine trace: {spine.memory_bytes() / 1e6:.2f} MB")
    if not same:
        print("FAIL: the traces differ")
        return 1
    if ratio < TARGET:
        print(f"FAIL: target {TARGET:.0f}x missed")
        return 1
    print(f"OK: >= {TARGET:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
