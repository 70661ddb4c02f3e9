"""The wire codec: encode + decode of 3-column tuples with an ``lmax`` column (issue 12, §8).

Each tuple ``("key123", 123, lmax(123))`` takes the path a message takes: encoded at the
sending rule (``encode_row``), packed with the other tuples of its tick into an envelope of 500
(``encode_envelope``), and decoded and checked at the receiver (``decode_envelope``, which
rebuilds the ``lmax`` through its validating constructor). Target: >= 300,000 tuples/s. The
baseline, measured in the same run, is plain msgpack (``packb`` + ``unpackb`` of each tuple
with the ``lmax`` column as a bare int: no lattice, no envelope, no checks). Exit status 1 when
the target is missed or a tuple does not round-trip.

    python benchmarks/bench_net_codec.py [--quick] [--tuples N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, best_of_pair_cpu, header

from blooml import lmax
from blooml.net import decode_envelope, encode_envelope, encode_row

TARGET = 300_000
BATCH = 500


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    ap.add_argument("--tuples", type=int, default=200_000)
    args = ap.parse_args(argv)
    n = 10_000 if args.quick else args.tuples
    header("wire codec: encode + decode of 3-column tuples with an lmax column", {"tuples": n})
    rows = [(f"key{i}", i, lmax(i)) for i in range(n)]
    plain = [(f"key{i}", i, i) for i in range(n)]

    def codec() -> list[tuple[object, ...]]:
        wires = [encode_row(r) for r in rows]
        envs = [
            encode_envelope("127.0.0.1:7000", [("msg", wires[i : i + BATCH])])
            for i in range(0, n, BATCH)
        ]
        out: list[tuple[object, ...]] = []
        for e in envs:
            for _chan, batch in decode_envelope(e).batches:
                out.extend(batch)
        return out

    def baseline() -> list[object]:
        pack, unpack = msgpack.packb, msgpack.unpackb
        return [unpack(pack(r)) for r in plain]

    (bc, bw), _, (cc, cw), out = best_of_pair_cpu(3, baseline, codec)
    rate = n / cc
    base_rate = n / bc
    print(f"   plain msgpack: {base_rate:12,.0f} tuples/s ({bw * 1e3:.0f} ms wall)")
    print(f"   blooml codec:  {rate:12,.0f} tuples/s ({cw * 1e3:.0f} ms wall)")
    print(f"   ratio vs target {rate / TARGET:.2f}x; vs plain msgpack {rate / base_rate:.2f}x")
    v = Verdicts()
    v.check("round trip", out == rows, "every tuple decodes to itself")
    v.check("codec speed", rate >= TARGET, f"{rate:,.0f} >= {TARGET:,} tuples/s (CPU)")
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
