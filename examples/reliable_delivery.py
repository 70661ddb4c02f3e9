"""Reliable delivery (the Bud paper's example program): buffer, retry on a timer, stop on ack.

Run it with ``python examples/reliable_delivery.py``. ``DeliveryProtocol`` declares the module's
interfaces; ``ReliableDelivery`` is the seed figure rule block for rule block (``send_packet``,
``timer_retry``, ``send_ack``, ``recv_ack``). ``Node`` adds an inbox and a delivery log so the
demo can show what happened.

``FlakyNode`` overrides the ``send_packet`` block *by name* (the seed's ``declare`` overriding):
the first transmission of every message listed in ``lose`` is dropped, as an unreliable network
would. The periodic ``timer`` then retransmits everything still in ``send_buf`` until the ack
comes back. The clock is a fake one, so the run is exact and fast.
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import LocalNetwork, Program, bloom, channel, interface, lmin, periodic, table

RETRY_SECONDS = 3.0


class DeliveryProtocol(Program):
    """The abstract module: messages go in at ``pipe_in``; confirmations come out of ``pipe_out``."""

    pipe_in = interface(["dst", "src", "ident"], ["payload"], input=True)
    pipe_out = interface(["dst", "src", "ident"], ["payload"], input=False)


class ReliableDelivery(DeliveryProtocol):
    """The seed figure: at-least-once delivery with retransmission and acknowledgements."""

    data_chan = channel(["@dst", "src", "ident"], ["payload"])
    ack_chan = channel(["@src", "dst", "ident"])
    send_buf = table(["dst", "src", "ident"], ["payload"])
    timer = periodic(RETRY_SECONDS)

    # fmt: off
    @bloom
    def send_packet(self) -> None:
        self.send_buf <= self.pipe_in
        self.data_chan <~ self.pipe_in

    @bloom
    def timer_retry(self) -> None:
        self.data_chan <~ self.send_buf.join(self.timer).map(lambda p, t: p)

    @bloom
    def send_ack(self) -> None:
        self.ack_chan <~ self.data_chan.map(lambda p: (p.src, p.dst, p.ident))

    @bloom
    def recv_ack(self) -> None:
        got_ack = self.ack_chan.join(self.send_buf, self.ack_chan.ident == self.send_buf.ident)
        self.pipe_out <= got_ack.map(lambda a, sb: sb)
        self.send_buf <- got_ack.map(lambda a, sb: sb)
    # fmt: on


class Node(ReliableDelivery):
    """A ``ReliableDelivery`` endpoint that records what it received and what was confirmed."""

    # ``first`` is an lmin of the tick: a retransmitted duplicate merges into the first arrival.
    inbox = table(["src", "ident"], ["payload", "first"])
    confirmed = table(["dst", "ident"], ["payload", "first"])

    # fmt: off
    @bloom
    def record(self) -> None:
        self.inbox <= self.data_chan.map(
            lambda d: (d.src, d.ident, d.payload, lmin(self.tick_count))
        )
        self.confirmed <= self.pipe_out.map(
            lambda o: (o.dst, o.ident, o.payload, lmin(self.tick_count))
        )
    # fmt: on


class FlakyNode(Node):
    """A ``Node`` whose link drops the first transmission of each message listed in ``lose``."""

    lose = table(["ident"])

    # fmt: off
    @bloom
    def send_packet(self) -> None:  # replaces ReliableDelivery.send_packet (same name)
        self.send_buf <= self.pipe_in
        self.data_chan <~ self.pipe_in.notin(self.lose, self.pipe_in.ident == self.lose.ident)
    # fmt: on


class FakeClock:
    """A clock the demo advances by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


MESSAGES = [("bob", "alice", 1, "hello"), ("bob", "alice", 2, "are you there?")]


def main() -> dict[str, Any]:
    """Send two messages from alice to bob; the second one's first transmission is lost."""
    print(
        f"Reliable delivery: alice -> bob over a network that loses one packet; retry every "
        f"{RETRY_SECONDS:g} s.\n"
    )
    clock = FakeClock()
    net = LocalNetwork()
    alice = FlakyNode(addr="alice", clock=clock, network=net)
    bob = Node(addr="bob", clock=clock, network=net)
    alice.lose.insert([(2,)])
    alice.pipe_in.insert(MESSAGES)
    print("  clock  tick  alice's timer  alice.send_buf  bob.inbox      alice.confirmed")
    print("                              (unacked ids)   (id@arrival)   (id@ack tick)")
    trace: list[dict[str, Any]] = []
    for _ in range(10):
        clock.now += 1.0
        t = alice.tick_count  # ticks are numbered from 0, like Bud's budtime
        net.tick()
        fired = bool(list(alice.timer))
        buf = sorted(r.ident for r in alice.send_buf)
        inbox = sorted((r.ident, r.first.reveal()) for r in bob.inbox)
        conf = sorted((r.ident, r.first.reveal()) for r in alice.confirmed)
        trace.append(
            {"tick": t, "timer": fired, "send_buf": buf, "inbox": inbox, "confirmed": conf}
        )
        shown_inbox = ", ".join(f"#{i}@{at}" for i, at in inbox) or "-"
        shown_conf = ", ".join(f"#{i}@{at}" for i, at in conf) or "-"
        print(
            f"  {clock.now:>4g}s  {t:>4}  {'fires' if fired else '':<13}  {buf!s:<14}  "
            f"{shown_inbox:<13}  {shown_conf}"
        )
        if not buf and len(conf) == len(MESSAGES):
            break
    print(
        "\n#1 went through at once; #2 was lost, stayed in send_buf, and was retransmitted\n"
        "when the periodic timer fired; the ack removed it from send_buf (<- takes effect at\n"
        "the start of the next tick). A duplicate retransmission merges into bob's inbox: its\n"
        "arrival tick is an lmin, so the row keeps the first arrival instead of conflicting."
    )
    return {
        "trace": trace,
        "inbox": {r.ident: r.payload for r in bob.inbox},
        "confirmed": {r.ident for r in alice.confirmed},
        "send_buf": [tuple(r) for r in alice.send_buf],
    }


if __name__ == "__main__":
    main()
