"""Causal broadcast with vector clocks (``lvclock``) across processes, on a reordering network.

Run it with ``python examples/net_causal.py``. Three ``CausalNode`` processes (``blooml run``
with ``--max-delay 0.3``: every datagram waits a random 0-0.3 s, so messages overtake each
other) broadcast to each other. A message carries the sender's vector clock: the clock of what
the sender had delivered, with its own entry counting its own messages. A node buffers a
message from ``j`` until it is *deliverable*: ``clock[j] == vc[j] + 1`` (the next one from
``j``) and ``clock[k] <= vc[k]`` for every other ``k`` (everything it depends on has been
delivered); delivering merges the message's clock into the node's ``vc`` (an ``lvclock``).

Each node answers every question ``q:X`` it delivers with ``a:X`` (three answers per
question), so every answer causally follows its question. The demo asks questions from one node and checks on all three that no
answer was delivered before its question, although answers often arrive first (the nodes
report how many messages they had to buffer). Every node reports its deliveries to a
``Monitor`` in this process.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, count, interface, lmax, lvclock, min_, scratch, table
from blooml.net import NodeProcess

HERE = Path(__file__).resolve()
DELAY = 0.3


def deliverable(clock: lvclock, vc: lvclock, sender: str) -> bool:
    """Whether a message stamped ``clock`` from ``sender`` may be delivered at ``vc``."""
    m, v = clock.reveal(), vc.reveal()
    if m.get(sender, 0) != v.get(sender, 0) + 1:
        return False
    return all(n <= v.get(k, 0) for k, n in m.items() if k != sender)


class CausalNode(Program):
    """Causal broadcast to ``members``; answers questions; reports deliveries to ``monitor``."""

    members = table(["addr"])
    monitor = table(["addr"])
    join_ = channel(["@addr", "member"])  # control: add a member
    ask = channel(["@addr", "text"])  # control: broadcast this text
    outq = table(["text"])  # to broadcast, one per tick (each message gets its own number)
    post = scratch(["text"])
    bcast = channel(["@dst", "sender", "text"], ["clock"])
    buf = table(["sender", "text"], ["clock"])
    ready = scratch(["sender", "text"], ["clock"])
    log = table(["t", "sender"], ["text"])
    report = channel(["@addr", "node", "t", "sender"], ["text", "held"])
    vc = lvclock()
    sent = lmax()
    held = lmax()  # the most messages ever held back at once (arrived before their causes)

    # fmt: off
    @bloom
    def control(self) -> None:
        self.members <= self.join_.map(lambda j: (j.member,))
        self.outq <= self.ask.map(lambda a: (a.text,))

    @bloom
    def send(self) -> None:
        self.post <= self.outq.group([], min_("text"))
        self.outq <- self.post
        self.bcast <~ self.post.join(self.members).map(lambda p, m: (
            m.addr, self.addr, p.text,
            self.vc.merge(lvclock({self.addr: (self.sent.reveal() or 0) + 1}))))
        self.sent <+ self.post.map(lambda p: (self.sent.reveal() or 0) + 1)

    @bloom
    def deliver(self) -> None:
        self.buf <= self.bcast.map(lambda b: (b.sender, b.text, b.clock))
        self.ready <= self.buf.filter(lambda m: self.can_deliver(m.clock, m.sender))
        self.vc <+ self.ready.map(lambda m: m.clock)
        self.buf <- self.ready
        self.log <+ self.ready.map(lambda m: (self.tick_count, m.sender, m.text))
        self.held <= self.buf.notin(self.ready).group([], count()).map(lambda c: c[0])

    @bloom
    def answer(self) -> None:
        self.outq <+ self.ready.filter(lambda m: m.text.startswith("q:")) \
            .map(lambda m: ("a:" + m.text[2:],))

    @bloom
    def tell(self) -> None:
        self.report <~ self.log.join(self.monitor).map(
            lambda e, mon: (mon.addr, self.addr, e.t, e.sender, e.text, self.held.reveal() or 0))
    # fmt: on

    def can_deliver(self, clock: lvclock, sender: str) -> bool:
        """``deliverable`` at this node's current ``vc`` (a rule helper: ``self.vc.value`` is a
        read of ``vc`` the engine records and checks, non-monotone since it is revealed)."""
        return deliverable(clock, self.vc.value, sender)


class Control(Program):
    """The demo's remote control: tells nodes their members and what to broadcast."""

    join_ = channel(["@addr", "member"])
    ask = channel(["@addr", "text"])
    add = interface(["addr", "member"])
    say = interface(["addr", "text"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.join_ <~ self.add
        self.ask <~ self.say
    # fmt: on


class Monitor(Program):
    """Collects the delivery logs."""

    report = channel(["@addr", "node", "t", "sender"], ["text", "held"])
    seen = table(["node", "t", "sender"], ["text", "held"])  # held: an lmax (it grows)

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.seen <= self.report.map(lambda r: (r.node, r.t, r.sender, r.text, lmax(r.held)))
    # fmt: on


def main(questions: int = 6, timeout: float = 30.0) -> dict[str, Any]:
    """Three nodes, ``questions`` questions from the first; check causal order everywhere."""
    mon = Monitor(addr="127.0.0.1:0").start()
    procs = [
        NodeProcess(
            f"{HERE}:CausalNode",
            inserts={"monitor": [(mon.addr,)]},
            args=["--max-delay", str(DELAY)],
        )
        for _ in range(3)
    ]
    addrs = [p.addr for p in procs]
    out: dict[str, Any] = {"nodes": addrs}
    ctl = Control(addr="127.0.0.1:0").start()
    try:
        ctl.sync_do(lambda p: p.add.insert([(a, m) for a in addrs for m in addrs]))
        time.sleep(0.5)  # the members arrive (delays are on the nodes' datagrams only)
        # every node delivers every question and the three answers to it
        want = 3 * 4 * questions
        deadline = time.monotonic() + timeout
        for i in range(questions):

            def ask(p: Control, i: int = i) -> None:  # i=i: bind this iteration's i
                p.say.insert([(addrs[0], f"q:{i}")])

            ctl.sync_do(ask)
        seen: list[Any] = []
        while time.monotonic() < deadline and len(seen) < want:
            time.sleep(0.1)
            seen = mon.sync_do(lambda p: sorted(tuple(r) for r in p.seen))
    finally:
        out["exit_codes"] = [p.stop() for p in procs]
        ctl.stop()
        mon.stop()
    violations: list[tuple[str, str]] = []
    for node in addrs:
        order = [r[3] for r in seen if r[0] == node]
        for text in order:
            q = "q:" + text[2:]
            if text.startswith("a:") and (q not in order or order.index(q) > order.index(text)):
                violations.append((node, text))
    out["delivered"] = {n: len([r for r in seen if r[0] == n]) for n in addrs}
    out["violations"] = violations
    out["buffered"] = max((r[4].reveal() or 0 for r in seen), default=0)
    print(f"deliveries per node: {sorted(out['delivered'].values())} (want {4 * questions} each)")
    print(f"answers delivered before their question: {len(violations)}")
    print(f"most messages a node held back at once (arrived too early): {out['buffered']}")
    return out


if __name__ == "__main__":
    main()
