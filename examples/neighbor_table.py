"""A soft-state neighbour table (declarative networking): heartbeats and time-to-live.

Run it with ``python examples/neighbor_table.py``. Each node greets the nodes it links to every
``HELLO_PERIOD`` seconds (``periodic``, the seed's ``ping(@Y, X) :- periodic(@X, 10),
link(@X, Y)``). A receiver records the sender in ``neighbor``, a table with a time-to-live:
every heartbeat derives a newer tuple under the same key, which replaces the old one and
restarts its lifetime; when the heartbeats stop, the tuple expires after ``TTL`` seconds and
the neighbour is forgotten, with no rule deleting it.

Three nodes run on a ``LocalNetwork`` driven by a fake clock, half a second per tick. Node
``c`` goes silent for a while (its links are removed), drops out of the others' tables after
the TTL, and reappears as soon as it greets them again.
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import LocalNetwork, Program, bloom, channel, periodic, table

HELLO_PERIOD = 1.0
TTL = 3.0


class NeighborTable(Program):
    """Greet every ``link`` each period; remember who greeted us for ``TTL`` seconds."""

    link = table(["nbr"])
    beat = periodic(HELLO_PERIOD)
    hello = channel(["@dst", "src"], ["sent"])
    neighbor = table(["nbr"], ["last_hello"], ttl=TTL)  # soft state

    # fmt: off
    @bloom
    def heartbeat(self) -> None:
        # inside a rule function, self.addr is this node's address
        self.hello <~ self.beat.join(self.link).map(lambda b, lk: (lk.nbr, self.addr, b.time))

    @bloom
    def listen(self) -> None:
        self.neighbor <= self.hello.map(lambda h: (h.src, h.sent))
    # fmt: on


class FakeClock:
    """A clock the demo advances by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


NODES = ("a", "b", "c")


def build(clock: FakeClock) -> tuple[LocalNetwork, dict[str, NeighborTable]]:
    """Three fully linked nodes on one ``LocalNetwork`` sharing ``clock``."""
    net = LocalNetwork()
    nodes = {n: NeighborTable(addr=n, clock=clock, network=net) for n in NODES}
    for name, node in nodes.items():
        node.link.insert([(other,) for other in NODES if other != name])
    return net, nodes


def main() -> dict[str, Any]:
    """Run 16 seconds; ``c`` is silent from t=4 to t=10. Return each node's view over time."""
    print(f"Soft state: heartbeats every {HELLO_PERIOD:g} s, neighbour entries live {TTL:g} s.\n")
    clock = FakeClock()
    net, nodes = build(clock)
    c_links = [(other,) for other in NODES if other != "c"]
    print("  (one line per change; the clock advances 0.5 s per tick)\n")
    print("     t   a's neighbours   b's neighbours   c's neighbours   event")
    timeline: list[dict[str, Any]] = []
    prev: dict[str, list[str]] = {}
    last_from_c: float | None = None
    vanished: float | None = None
    last_before: float | None = None
    for step in range(1, 33):
        clock.now = step * 0.5
        event = ""
        if clock.now == 4.0:
            nodes["c"].link.delete(c_links)
            event = "c goes silent"
        elif clock.now == 10.0:
            nodes["c"].link.insert(c_links)
            event = "c speaks again"
        net.tick()
        views = {n: sorted(r.nbr for r in node.neighbor) for n, node in nodes.items()}
        for r in nodes["a"].neighbor:
            if r.nbr == "c":
                last_from_c = r.last_hello
        if vanished is None and clock.now > 4.0 and "c" not in views["a"]:
            vanished = clock.now
            last_before = last_from_c
        timeline.append({"t": clock.now, **views})
        if event or not prev or views != prev:  # print only what changed
            cells = "".join(f"{','.join(views[n]) or '-':<17}" for n in NODES)
            print(f"  {clock.now:>4g}   {cells}{event}".rstrip())
        prev = views
    print(
        f"\nc's last heartbeat before going silent (sent at t={last_before:g}) reached a at a's\n"
        f"next tick; a's entry for c vanished at t={vanished:g}, TTL = {TTL:g} s after that refresh."
    )
    print(
        "No rule deletes anything: c's entries expire TTL seconds after its last heartbeat,\n"
        "and the next heartbeat after it recovers brings them back."
    )
    return {"timeline": timeline, "last_before": last_before, "vanished": vanished}


if __name__ == "__main__":
    main()
