"""Fuzz a live node with generated and mutated datagrams (issue 12, §8).

Two nodes listen on UDP 127.0.0.1: one with a cluster key, one without. Each receives
``--datagrams`` datagrams (default 100,000 in total), a mix of random bytes, truncated and
bit-flipped copies of valid envelopes, and well-formed msgpack in the envelope's shape with
wrong versions, types, channels, arities, unknown extension codes and values that lattices
reject. They are sent in paced bursts so that the kernel's socket buffer never overflows: every
datagram reaches the node and must be counted (accepted, or dropped with a reason).

Checks: 0 crashes (the nodes still run and answer), every datagram counted; the keyed node
accepts none of them (mutations break the signature; an unchanged copy is a replay) and its
state does not change; on the open node, the state is exactly what the datagrams it accepted
carry (each sent datagram is also checked by the codec here to predict the outcome), so no
rejected datagram changed anything. Exit status 1 on any failure.

    python benchmarks/bench_net_fuzz.py [--quick] [--datagrams N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bloom_util import Verdicts, header

from blooml import Lattice, Program, bloom, channel, lmax, table
from blooml.errors import BloomlError
from blooml.net import decode_envelope, encode_envelope, encode_row

KEY = b"fuzz-cluster-key"


class Target(Program):
    """Stores what arrives on ``msg`` (the value column as its ``repr``: any value fits)."""

    msg = channel(["@dst", "k"], ["v"])
    seen = table(["k", "r"])

    # fmt: off
    @bloom
    def rules(self):
        self.seen <= self.msg.map(lambda m: (m.k, repr(m.v)))  # noqa: B015
    # fmt: on


def _valid(rng: random.Random, dst: str, key: bytes | None) -> bytes:
    rows = [
        encode_row((dst, rng.randrange(50), lmax(rng.randrange(1000))))
        for _ in range(rng.randrange(1, 4))
    ]
    return encode_envelope("127.0.0.1:9", [("msg", rows)], key=key)


def _junk_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.randrange(10)
    if depth > 3 or r < 4:
        return rng.choice([None, True, -1, 2**40, 1.5, "x", b"\x00", "msg", 1])
    if r < 6:
        return [_junk_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if r < 8:
        return msgpack.ExtType(rng.randrange(128), rng.randbytes(rng.randrange(6)))
    return {_junk_value(rng, 4): _junk_value(rng, depth + 1) for _ in range(rng.randrange(3))}


def generate(rng: random.Random, dst: str, key: bytes | None) -> bytes:
    """One fuzz datagram."""
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 120))
    if kind in (1, 2):
        data = bytearray(_valid(rng, dst, key))
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(data))
            data[i] = (data[i] + rng.randrange(1, 256)) % 256  # a real change
        return bytes(data)
    if kind == 3:
        data = _valid(rng, dst, key)
        return data[: rng.randrange(len(data))]
    if kind == 4:  # envelope-shaped, with a junk body
        body = msgpack.packb(
            [
                rng.choice(["127.0.0.1:9", 5, None]),
                rng.choice([int(time.time() * 1000), "t", -1]),
                [[rng.choice(["msg", "nope", 3]), [_junk_value(rng) for _ in range(2)]]],
            ]
        )
        sig = rng.choice([None, b"x" * 32, rng.randbytes(32)])
        return msgpack.packb([rng.choice([1, 1, 2, "1"]), body, sig])
    # rows of the right channel whose values are junk (wrong arity, bad lattices, ...)
    row = [dst, rng.randrange(50), _junk_value(rng)][: rng.randrange(1, 5)]
    if rng.random() < 0.5:
        row.append(msgpack.ExtType(rng.choice([16, 17, 19, 20, 22, 30]), rng.randbytes(3)))
    body = msgpack.packb(["127.0.0.1:9", int(time.time() * 1000), [["msg", [row]]]])
    return msgpack.packb([1, body, None])


def _predict(data: bytes, key: bytes | None, arity: int) -> list[tuple[Any, ...]] | None:
    """The rows the node should accept from ``data`` (``None``: it must drop it)."""
    try:
        env = decode_envelope(data, key)
    except BloomlError:
        return None
    rows: list[tuple[Any, ...]] = []
    for chan, batch in env.batches:
        if chan != "msg" or any(len(r) != arity for r in batch):
            return None
        try:
            for r in batch:
                hash(r)
        except TypeError:
            return None
        if any(isinstance(x, Lattice) for r in batch for x in r[:2]):
            return None  # a lattice in a key column
        rows.extend(batch)
    return rows


def snapshot(p: Program) -> frozenset[tuple[Any, ...]]:
    """The node's stored rows."""
    return p.sync_do(lambda q: frozenset(tuple(r) for r in q.seen))


def _counted(p: Program) -> int:
    s = p.stats()
    return int(s["received"] + s["dropped_total"])


def fuzz(n: int, seed: int, key: bytes | None) -> dict[str, Any]:
    """Send ``n`` fuzz datagrams to a fresh node; return what happened."""
    rng = random.Random(seed)
    p = Target(addr="127.0.0.1:0", cluster_key=key).start()
    host, port = p.addr.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    expected: set[tuple[Any, ...]] = set()
    accepted_predicted = 0
    before = snapshot(p)
    t0 = time.perf_counter()
    sent = 0
    try:
        while sent < n:
            burst = min(500, n - sent)
            for _ in range(burst):
                data = generate(rng, p.addr, key)
                if key is None:
                    rows = _predict(data, None, 3)
                    if rows is not None:
                        accepted_predicted += 1
                        expected.update(r[1] for r in rows)
                sock.sendto(data, (host, int(port)))
            sent += burst
            deadline = time.monotonic() + 10
            while _counted(p) < sent and time.monotonic() < deadline:
                time.sleep(0.001)
        elapsed = time.perf_counter() - t0
        alive = p.sync_do(lambda q: q.addr) == p.addr
        after = snapshot(p)
        stats = p.stats()
    finally:
        sock.close()
        p.stop()
    stored_keys = {r[0] for r in after}
    return {
        "sent": sent,
        "counted": stats["received"] + stats["dropped_total"],
        "received": stats["received"],
        "accepted_predicted": accepted_predicted,
        "dropped": stats["dropped"],
        "errors": stats["errors"],
        "alive": alive,
        "unchanged": after == before,
        # every stored row comes from a datagram the codec accepts (a message conflicting with
        # one queued in the same tick is refused on arrival, so accepted <= predicted)
        "state_as_predicted": key is not None or stored_keys <= expected,
        "elapsed": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    ap.add_argument("--datagrams", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=12)
    args = ap.parse_args(argv)
    n = 4_000 if args.quick else args.datagrams
    header("fuzz: generated and mutated datagrams against live nodes", {"datagrams": n})
    v = Verdicts()
    for key in (KEY, None):
        name = "keyed node" if key else "open node"
        r = fuzz(n // 2, args.seed, key)
        print(
            f"   {name}: {r['sent']:,} datagrams in {r['elapsed']:.1f} s, counted "
            f"{r['counted']:,}, accepted {r['received']:,}; dropped by reason: {r['dropped']}"
        )
        v.check(f"{name}: no crash", r["alive"] and r["errors"] == 0, "the node still answers")
        v.check(f"{name}: all counted", r["counted"] == r["sent"], f"{r['counted']:,}")
        if key:
            v.check(f"{name}: 0 accepted", r["received"] == 0, f"{r['received']}")
            v.check(f"{name}: 0 state changes", r["unchanged"], "state as before")
        else:
            v.check(
                f"{name}: accepted as predicted",
                0 < r["received"] <= r["accepted_predicted"],
                f"{r['received']} <= {r['accepted_predicted']}",
            )
            v.check(f"{name}: state as predicted", r["state_as_predicted"], "no rejected change")
    return v.exit_code()


if __name__ == "__main__":
    sys.exit(main())
