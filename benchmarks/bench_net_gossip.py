"""Whole-state gossip vs delta anti-entropy: a replica restarted empty catches up.

Three replicas of an ``lmap`` of N keys (default 100,000), as three socket nodes in this process
(UDP, then TCP). Every replica holds the same N keys; one is stopped and restarted empty at the
same address. Measured until the restarted replica holds the whole store again: the time, and
the bytes all three replicas sent meanwhile, for

* **whole**: the idiom of the old ``examples/net_kvs.py``, every replica sends its whole store
  to each peer every period (over UDP in fragments: one envelope is ~1.9 MB at 100k keys);
* **delta**: :class:`blooml.net.antientropy.DeltaGossip`, each peer gets the changes it has not
  acked; a restarted peer the whole store once.

Both gossip every 0.1 s. Before the restart, with every replica holding the N keys and no
writes, the steady-state traffic is measured too (bytes/s over 3 s). Prints the figures and the
ratios whole/delta; exits non-zero if either does not converge (whole-state gossip of stores
larger than a datagram never converged over UDP before issue 20), if delta sends more bytes to
converge than whole-state gossip, or more than a tenth of its steady-state traffic. Bounded:
each run gives up after ``--limit`` seconds.

    python benchmarks/bench_net_gossip.py [--keys 100000] [--transport udp|tcp|both] [--quick]
"""

from __future__ import annotations

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.
# ruff: noqa: B015
import argparse
import sys
import time
from typing import Any

from blooml import Program, ProgramError, bloom, channel, lmap, lmax, periodic, table
from blooml.net import node
from blooml.net.antientropy import DeltaGossip


class Whole(Program):
    """Whole-state gossip: the store to every peer every period."""

    peer = table(["addr"])
    store = lmap()
    gossip = periodic(0.1)
    sync = channel(["@addr"], ["kv"])

    @bloom
    def rules(self):
        self.sync < ~self.gossip.join(self.peer).map(lambda t, p: (p.addr, self.store))
        self.store <= self.sync.map(lambda s: s.kv)


class Delta(DeltaGossip):
    """Delta anti-entropy (the mixin's rules only)."""


#: Seconds over which the steady-state traffic (bytes/s, no writes) is measured.
STEADY = 3.0


#: Seconds a sync_do may wait for a busy replica (decoding 100k-key states on a loaded machine).
TIMEOUT = 300.0


def _size(p: Any) -> int:
    return p.sync_do(lambda q: len(q.store.value.reveal()), TIMEOUT)


def _acked(q: Any) -> bool:
    """Whether every peer of a DeltaGossip replica has acked (deltas, not whole states, flow)."""
    return len(q.ae_acks) == 2 and all(q.ae_usable(r.state) for r in q.ae_acks)


def _sent(ps: list[Any]) -> int:
    return sum(p.stats()["sent_bytes"] for p in ps)


def _rebind(cls: type, addr: str, transport: str) -> Any:
    """The restarted replica, at the address of the old one (once its socket is closed)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return cls(addr=addr, transport=transport)
        except ProgramError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run(kind: str, transport: str, keys: int, limit: float) -> dict[str, Any]:
    """One run: returns ``{"converged", "seconds", "bytes", "messages"}``."""
    cls = Whole if kind == "whole" else Delta
    value = lmap({f"key{i}": lmax((1, f"value{i}")) for i in range(keys)})
    ps = [cls(addr="127.0.0.1:0", transport=transport) for _ in range(3)]
    addrs = [p.addr for p in ps]
    for p in ps:
        p.peer.insert([(a,) for a in addrs if a != p.addr])
        p.store.insert(value)
        p.start()
    out: dict[str, Any] = {
        "converged": False,
        "seconds": None,
        "bytes": 0,
        "messages": 0,
        "steady": None,
    }
    try:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and min(_size(p) for p in ps) < keys:
            time.sleep(0.1)
        while kind == "delta" and time.monotonic() < deadline:  # every peer acked the start
            if all(p.sync_do(_acked, TIMEOUT) for p in ps):
                break
            time.sleep(0.1)
        time.sleep(2.0)  # what is still on its way arrives; then the steady state, no writes
        before, t1 = _sent(ps), time.monotonic()
        time.sleep(STEADY)
        out["steady"] = (_sent(ps) - before) / (time.monotonic() - t1)
        node(ps[2]).stop(10.0)
        ps[2] = _rebind(cls, addrs[2], transport)
        ps[2].peer.insert([(a,) for a in addrs[:2]])
        before = _sent(ps[:2])
        msgs = sum(p.stats()["sent"] for p in ps[:2])
        t0 = time.monotonic()
        ps[2].start()
        deadline = t0 + limit
        while time.monotonic() < deadline:
            if _size(ps[2]) == keys:
                out["converged"] = True
                out["seconds"] = time.monotonic() - t0
                break
            time.sleep(0.05)
        out["bytes"] = _sent(ps) - before
        out["messages"] = sum(p.stats()["sent"] for p in ps) - msgs
        if out["converged"]:
            assert ps[2].sync_do(lambda q: q.store.value, TIMEOUT) == value
    finally:
        for p in ps:
            node(p).stop(10.0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--transport", choices=["udp", "tcp", "both"], default="both")
    ap.add_argument("--limit", type=float, default=120.0, help="seconds per run at most")
    ap.add_argument("--quick", action="store_true", help="4,000 keys, UDP only (CI)")
    args = ap.parse_args(argv)
    keys, transports = args.keys, ["udp", "tcp"] if args.transport == "both" else [args.transport]
    if args.quick:
        keys, transports = 4_000, ["udp"]
    ok = True
    print(f"3 replicas, {keys:,} keys, one restarted empty; gossip every 0.1 s")
    for transport in transports:
        res = {kind: run(kind, transport, keys, args.limit) for kind in ("delta", "whole")}
        for kind, r in res.items():
            secs = f"{r['seconds']:.2f} s" if r["converged"] else f"not within {args.limit} s"
            steady = "" if r["steady"] is None else f"; steady state {r['steady'] / 1e6:.2f} MB/s"
            print(
                f"  {transport} {kind:5}: converged {secs}, "
                f"{r['bytes'] / 1e6:.1f} MB in {r['messages']} messages{steady}"
            )
        d, w = res["delta"], res["whole"]
        if d["converged"] and w["converged"]:
            print(
                f"  {transport} whole/delta: time to converge {w['seconds'] / d['seconds']:.1f}x, "
                f"bytes to converge {w['bytes'] / max(d['bytes'], 1):.1f}x, "
                f"steady-state bytes/s {w['steady'] / max(d['steady'], 1):.0f}x"
            )
        if not (
            d["converged"]
            and w["converged"]
            and d["bytes"] <= w["bytes"]
            and d["steady"] * 10 <= w["steady"]
        ):
            print(
                f"  {transport}: MISS (both must converge; delta with no more bytes than whole "
                "state, and a tenth of its steady-state traffic at most)"
            )
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
