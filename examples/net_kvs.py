"""A replicated key-value store over UDP: three replica processes gossip their ``lmap`` state.

Run it with ``python examples/net_kvs.py``. Each ``Replica`` (started with ``blooml run`` in a
child process) keeps its store as an ``lmap`` from key to ``lmax((version, value))``, as in
``examples/kvs.py``, and replicates it by delta anti-entropy (``blooml.net.antientropy.DeltaGossip``):
it sends each peer a change as a delta at once (acked, resent if lost), repairs whatever else
differs by comparing digests of key ranges every 2 s (what fills a new or restarted replica, or
one that was cut off), and merges what it receives. The merge is a lattice
join, so replicas converge whatever the order, loss or duplication of the gossip, and the
traffic follows the writes, not the size of the store.

The demo drives the replicas from a ``Client`` node in this process, over the same sockets:
``put`` requests, ``link`` requests that add or remove a peer (to cut the network into two
sides and to heal it), and ``dump`` requests answered with the whole store. During the
partition both sides take writes and diverge; once healed they converge to the newest version
of every key.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, interface, lmap, lmax, table
from blooml.net import NodeProcess
from blooml.net.antientropy import DeltaGossip

HERE = Path(__file__).resolve()


class Replica(DeltaGossip):
    """One replica: puts, delta gossip to ``peer`` (declared by ``DeltaGossip``, as are
    ``store`` and ``update``), and remote control."""

    put = channel(["@addr", "key", "version"], ["value"])
    link = channel(["@addr", "peer", "up"])
    dump = channel(["@addr", "reply_to"])
    state = channel(["@addr", "replica"], ["kv"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.update <= self.put.map(lambda p: (p.key, lmap({p.key: lmax((p.version, p.value))})))
        self.peer <+ self.link.filter(lambda k: k.up).map(lambda k: (k.peer,))
        self.peer <- self.link.filter(lambda k: not k.up).map(lambda k: (k.peer,))
        self.state <~ self.dump.map(lambda d: (d.reply_to, self.addr, self.store))
    # fmt: on


class Client(Program):
    """Sends requests to replicas and keeps the last store each one reported."""

    put = channel(["@addr", "key", "version"], ["value"])
    link = channel(["@addr", "peer", "up"])
    dump = channel(["@addr", "reply_to"])
    state = channel(["@addr", "replica"], ["kv"])
    seen = table(["replica"], ["kv"])
    # requests to send: inserted by the demo, sent by the <~ rules below
    put_req = interface(["addr", "key", "version"], ["value"])
    link_req = interface(["addr", "peer", "up"])
    dump_req = interface(["addr"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.put <~ self.put_req
        self.link <~ self.link_req
        self.dump <~ self.dump_req.map(lambda d: (d.addr, self.addr))
        self.seen <+- self.state.map(lambda s: (s.replica, s.kv))
    # fmt: on


def as_dict(kv: lmap) -> dict[str, Any]:
    """``{key: value}`` with the newest version of each key."""
    return {k: v.reveal()[1] for k, v in sorted(kv.reveal().items())}


def stores(client: Client, replicas: list[str], timeout: float = 5.0) -> dict[str, dict[str, Any]]:
    """Ask every replica for its store; return ``{replica: {key: value}}``."""
    client.sync_do(lambda p: p.seen.delete(list(p.seen)))
    client.sync_do(lambda p: p.dump_req.insert([(r,) for r in replicas]))
    deadline = time.monotonic() + timeout
    got: dict[str, Any] = {}
    while time.monotonic() < deadline and len(got) < len(replicas):
        time.sleep(0.05)
        got = client.sync_do(lambda p: {r.replica: as_dict(r.kv) for r in p.seen})
        if len(got) < len(replicas):  # a request or an answer was lost: ask again
            client.sync_do(lambda p: p.dump_req.insert([(r,) for r in replicas]))
    return got


def link(client: Client, a: str, b: str, up: bool) -> None:
    """Connect (or cut) ``a`` and ``b`` in both directions (sent twice: UDP)."""
    for _ in range(2):
        client.sync_do(lambda p: p.link_req.insert([(a, b, up), (b, a, up)]))


def converged(client: Client, replicas: list[str], timeout: float) -> dict[str, Any] | None:
    """The common store once all replicas report the same one, else ``None``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = stores(client, replicas)
        values = list(s.values())
        if len(s) == len(replicas) and all(v == values[0] for v in values):
            return values[0]
        time.sleep(0.1)
    return None


def main(timeout: float = 20.0) -> dict[str, Any]:
    """Three replicas; a partition {a} | {b, c} with writes on both sides; heal; converge."""
    client = Client(addr="127.0.0.1:0").start()
    procs = [NodeProcess(f"{HERE}:Replica") for _ in range(3)]
    a, b, c = (p.addr for p in procs)
    out: dict[str, Any] = {}
    try:
        for x, y in ((a, b), (a, c), (b, c)):
            link(client, x, y, True)
        client.sync_do(lambda p: p.put_req.insert([(a, "colour", 1, "red"), (b, "size", 1, "S")]))
        out["before"] = converged(client, [a, b, c], timeout)
        print("connected, converged:", out["before"])

        link(client, a, b, False)
        link(client, a, c, False)
        time.sleep(0.3)  # gossip in flight before the cut drains
        client.sync_do(
            lambda p: p.put_req.insert([(a, "colour", 2, "blue"), (a, "shape", 1, "square")])
        )
        client.sync_do(lambda p: p.put_req.insert([(c, "colour", 3, "green"), (b, "size", 2, "M")]))
        time.sleep(0.5)
        out["partitioned"] = stores(client, [a, b, c])
        print("partitioned {a} | {b, c}:")
        for name, r in (("a", a), ("b", b), ("c", c)):
            print(f"  {name}: {out['partitioned'].get(r)}")

        link(client, a, b, True)
        link(client, a, c, True)
        out["after"] = converged(client, [a, b, c], timeout)
        print("healed, converged:", out["after"])
    finally:
        out["exit_codes"] = [p.stop() for p in procs]
        client.stop()
    return out


if __name__ == "__main__":
    main()
