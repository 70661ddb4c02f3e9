"""Two nodes on TCP loopback: sustained tuples/s at zero loss, with tick latency (issue 12, §8).

A ``Source`` node sends batches of 3-column tuples ``(dst, k, lmax(k))`` (``--batch`` per
tick, one TCP frame each) to a ``Sink`` node that folds them into a table; both run on their
own threads in this process, over real sockets on 127.0.0.1. Throughput is the number of
tuples the sink applied divided by the time from the first send to the last tuple applied;
every tuple must arrive (zero loss). The sink's tick latency (the time from taking a batch of
frames off its inbox to the end of the tick that applies them) is printed as p50/p99. Target:
>= 50,000 tuples/s. The same run through the simulator is i12-sim's (``blooml.net.Simulation``).
Exit status 1 when the target is missed or tuples were lost.

    python benchmarks/bench_net_tcp.py [--quick] [--tuples N] [--batch B]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header

from blooml import Program, bloom, channel, interface, lmax, table

TARGET = 50_000


class Source(Program):
    """Sends every row of ``src`` on ``msg``."""

    src = interface(["dst", "k"], ["v"])
    msg = channel(["@dst", "k"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.msg <~ self.src  # noqa: B015
    # fmt: on


class Sink(Program):
    """Keeps the largest value per key mod 1,000."""

    msg = channel(["@dst", "k"], ["v"])
    best = table(["bucket"], ["v"])

    # fmt: off
    @bloom
    def rules(self):
        self.best <= self.msg.map(lambda m: (m.k % 1000, m.v))  # noqa: B015
    # fmt: on


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    ap.add_argument("--tuples", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=2_000)
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else args.tuples
    b = args.batch
    header("two nodes on TCP loopback: sustained tuples/s", {"tuples": n, "batch per tick": b})
    sink = Sink(addr="127.0.0.1:0", transport="tcp").start()
    source = Source(addr="127.0.0.1:0", transport="tcp").start()
    try:
        batches = [
            [(sink.addr, k, lmax(k)) for k in range(i, min(i + b, n))] for i in range(0, n, b)
        ]
        t0 = time.perf_counter()
        for rows in batches:
            source.async_do(lambda p, rows=rows: p.src.insert(rows))
        deadline = time.monotonic() + 120
        while sink.stats()["received_tuples"] < n and time.monotonic() < deadline:
            if sink.stats()["inbox"] == 0 and sink.stats()["received_tuples"] >= n:
                break
            time.sleep(0.002)
        sink.sync_do(lambda p: None)  # the tick applying the last frame has ended
        elapsed = time.perf_counter() - t0
        s_sink, s_src = sink.stats(), source.stats()
        best = sink.sync_do(lambda p: {r.bucket: r.v for r in p.best})
    finally:
        source.stop()
        sink.stop()
    got = s_sink["received_tuples"]
    rate = got / elapsed
    print(f"   sent {s_src['sent_tuples']:,} tuples in {s_src['sent']:,} frames")
    print(f"   applied {got:,} tuples in {elapsed:.2f} s: {rate:,.0f} tuples/s")
    print(
        f"   sink tick latency p50 {s_sink.get('tick_ms_p50', 0):.2f} ms, "
        f"p99 {s_sink.get('tick_ms_p99', 0):.2f} ms over {s_sink['ticks']} ticks"
    )
    print(f"   ratio vs target {rate / TARGET:.2f}x")
    want = {bk: lmax(max(k for k in range(bk, n, 1000))) for bk in range(min(n, 1000))}
    v = Verdicts()
    v.check("zero loss", got == n and best == want, f"{got:,} of {n:,} tuples, contents right")
    v.check("throughput", rate >= TARGET, f"{rate:,.0f} >= {TARGET:,} tuples/s")
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
