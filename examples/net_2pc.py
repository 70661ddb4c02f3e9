"""Two-phase commit across processes: a coordinator and three participants over UDP.

Run it with ``python examples/net_2pc.py``. The ``Coordinator`` (in this process) sends
``prepare`` to every participant; each ``Participant`` (a ``blooml run`` child process) votes
yes, unless the transaction is in its ``refuse`` table. The coordinator commits a transaction
once no participant's vote is missing and none voted no, aborts it as soon as one votes no, and
tells every participant, which acknowledges the outcome.

Unlike the quorum vote and the lattice KVS, this program is **not monotone**: "no vote is
missing" is a ``notin`` over votes that arrive on a channel, so deciding early on a partial set
of votes would be wrong. That is the coordination 2PC exists for, and ``blooml analyze`` (and
``P.ir().nonmonotone_after_channels()``) reports these rules as points of order.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, interface, scratch, table
from blooml.net import NodeProcess

HERE = Path(__file__).resolve()


class TwoPC(Program, abstract=True):
    """The messages of the protocol."""

    prepare = channel(["@addr", "xid", "coord"])
    vote = channel(["@coord", "xid", "part"], ["yes"])
    outcome = channel(["@addr", "xid", "coord"], ["decision"])
    ack = channel(["@coord", "xid", "part"], ["decision"])


class Coordinator(TwoPC):
    """Runs transactions begun with ``begin`` against every ``participant``."""

    begin = interface(["xid"])
    participant = table(["addr"])
    xacts = table(["xid"])
    votes = table(["xid", "part"], ["yes"])
    waiting = scratch(["xid", "part"])  # recomputed every tick
    aborted = table(["xid"])
    committed = table(["xid"])
    acks = table(["xid", "part"], ["decision"])

    # fmt: off
    @bloom
    def phase_one(self) -> None:
        self.xacts <= self.begin
        self.prepare <~ self.begin.join(self.participant).map(lambda b, p: (p.addr, b.xid, self.addr))
        self.votes <= self.vote.map(lambda v: (v.xid, v.part, v.yes))

    @bloom
    def decide(self) -> None:
        # non-monotone: which votes are still missing, given the votes received so far
        self.waiting <= self.xacts.join(self.participant).map(lambda x, p: (x.xid, p.addr)) \
            .notin(self.votes, lambda w, v: w[0] == v.xid and w[1] == v.part)
        self.aborted <= self.votes.filter(lambda v: not v.yes).map(lambda v: (v.xid,))
        self.committed <= self.xacts.notin(self.waiting, self.xacts.xid == self.waiting.xid) \
            .notin(self.aborted, lambda x, a: x.xid == a.xid)

    @bloom
    def phase_two(self) -> None:
        self.outcome <~ self.committed.join(self.participant).map(
            lambda c, p: (p.addr, c.xid, self.addr, "commit"))
        self.outcome <~ self.aborted.join(self.participant).map(
            lambda a, p: (p.addr, a.xid, self.addr, "abort"))
        self.acks <= self.ack.map(lambda a: (a.xid, a.part, a.decision))
    # fmt: on


class Participant(TwoPC):
    """Votes yes unless the transaction is in ``refuse``; applies and acknowledges outcomes."""

    refuse = table(["xid"])
    decided = table(["xid"], ["decision"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.vote <~ self.prepare.notin(self.refuse, self.prepare.xid == self.refuse.xid) \
            .map(lambda p: (p.coord, p.xid, self.addr, True))
        self.vote <~ self.prepare.join(self.refuse, self.prepare.xid == self.refuse.xid) \
            .map(lambda p, r: (p.coord, p.xid, self.addr, False))
        self.decided <= self.outcome.map(lambda o: (o.xid, o.decision))
        self.ack <~ self.outcome.map(lambda o: (o.coord, o.xid, self.addr, o.decision))
    # fmt: on


def main(timeout: float = 20.0) -> dict[str, Any]:
    """Transaction 1 (all vote yes) commits; transaction 2 (one refuses) aborts."""
    coord = Coordinator(addr="127.0.0.1:0").start()
    procs = [
        NodeProcess(f"{HERE}:Participant"),
        NodeProcess(f"{HERE}:Participant"),
        NodeProcess(f"{HERE}:Participant", inserts={"refuse": [(2,)]}),
    ]
    parts = [p.addr for p in procs]
    out: dict[str, Any] = {}
    try:
        coord.sync_do(lambda c: c.participant.insert([(a,) for a in parts]))
        coord.sync_do(lambda c: c.begin.insert([(1,), (2,)]))
        deadline = time.monotonic() + timeout
        acks: dict[tuple[int, str], str] = {}
        while time.monotonic() < deadline and len(acks) < 2 * len(parts):
            time.sleep(0.05)
            acks = coord.sync_do(lambda c: {(r.xid, r.part): r.decision for r in c.acks})
        out["acks"] = acks
        out["committed"] = coord.sync_do(lambda c: sorted(r.xid for r in c.committed))
        out["aborted"] = coord.sync_do(lambda c: sorted(r.xid for r in c.aborted))
    finally:
        out["exit_codes"] = [p.stop() for p in procs]
        coord.stop()
    for xid in (1, 2):
        got = sorted({d for (x, _), d in out["acks"].items() if x == xid})
        print(
            f"transaction {xid}: acknowledged by {sum(1 for x, _ in out['acks'] if x == xid)}"
            f" participants as {got}"
        )
    points = Coordinator.ir().nonmonotone_after_channels()
    out["points_of_order"] = sorted({r.head for r, _ in points})
    print(f"points of order (coordination needed) in Coordinator: {out['points_of_order']}")
    return out


if __name__ == "__main__":
    main()
