"""Reliable delivery over a lossy network: 30% of all datagrams lost, every message delivered.

Run it with ``python examples/net_reliable.py``. The protocol is the Bud paper's (see
``examples/reliable_delivery.py``): the sender buffers each message, retransmits everything
still buffered on a timer, and forgets a message when its acknowledgement arrives. Here the
``Receiver`` runs in a child process (``blooml run ... --drop-rate 0.3``: it loses 30% of the
acks it sends) and the ``Sender`` in this process loses 30% of its data datagrams too
(``blooml.net.node(p).drop_rate``). The demo sends 40 messages and waits until every one is
acknowledged; an acknowledgement is only ever sent for a message that arrived.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, interface, periodic, table
from blooml.net import NodeProcess, node

HERE = Path(__file__).resolve()
LOSS = 0.3


class Receiver(Program):
    """Acknowledges every data message; keeps what arrived."""

    data_chan = channel(["@dst", "src", "ident"], ["payload"])
    ack_chan = channel(["@src", "dst", "ident"])
    inbox = table(["src", "ident"], ["payload"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.inbox <= self.data_chan.map(lambda d: (d.src, d.ident, d.payload))
        self.ack_chan <~ self.data_chan.map(lambda d: (d.src, d.dst, d.ident))
    # fmt: on


class Sender(Program):
    """Buffers messages, retransmits the unacknowledged ones every ``timer``, drops on ack."""

    pipe_in = interface(["dst", "src", "ident"], ["payload"])
    data_chan = channel(["@dst", "src", "ident"], ["payload"])
    ack_chan = channel(["@src", "dst", "ident"])
    send_buf = table(["dst", "src", "ident"], ["payload"])
    confirmed = table(["dst", "ident"])
    timer = periodic(0.05)

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.send_buf <= self.pipe_in
        self.data_chan <~ self.pipe_in
        self.data_chan <~ self.send_buf.join(self.timer).map(lambda p, t: p)
        got_ack = self.ack_chan.join(self.send_buf, self.ack_chan.ident == self.send_buf.ident)
        self.confirmed <= got_ack.map(lambda a, sb: (sb.dst, sb.ident))
        self.send_buf <- got_ack.map(lambda a, sb: sb)
    # fmt: on


def main(messages: int = 40, timeout: float = 30.0) -> dict[str, Any]:
    """Send ``messages`` through a 30%-lossy network both ways; wait for every ack."""
    sender = Sender(addr="127.0.0.1:0")
    node(sender).drop_rate = LOSS
    sender.start()
    receiver = NodeProcess(f"{HERE}:Receiver", args=["--drop-rate", str(LOSS)])
    try:
        print(f"sender {sender.addr} -> receiver {receiver.addr}, {LOSS:.0%} loss both ways")
        for i in range(messages):  # one message per tick: one datagram each

            def send(p: Sender, i: int = i) -> None:  # i=i: bind this iteration's i
                p.pipe_in.insert([(receiver.addr, p.addr, i, f"m{i}")])

            sender.sync_do(send)
        deadline = time.monotonic() + timeout
        confirmed: set[int] = set()
        while time.monotonic() < deadline and len(confirmed) < messages:
            time.sleep(0.05)
            confirmed = sender.sync_do(lambda p: {r.ident for r in p.confirmed})
        buffered = sender.sync_do(lambda p: len(list(p.send_buf)))
        stats = sender.stats()
    finally:
        code = receiver.stop()
        sender.stop()
    print(f"confirmed {len(confirmed)}/{messages}; still buffered: {buffered}")
    print(
        f"sender: {stats['sent']} datagrams sent, {stats['injected_drops']} of them lost; "
        f"{stats['received']} acks arrived"
    )
    return {
        "confirmed": sorted(confirmed),
        "buffered": buffered,
        "lost": stats["injected_drops"],
        "sent": stats["sent"],
        "exit_code": code,
    }


if __name__ == "__main__":
    main()
