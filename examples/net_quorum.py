"""A 5-node quorum vote over real UDP sockets: each voter is a separate process.

Run it with ``python examples/net_quorum.py``. The ``Leader`` (in this process) folds the votes
arriving on ``vote_chn`` into an ``lset``, exactly as the Bloom^L paper's quorum figure
(``examples/quorum_vote.py``): ``size()`` feeds an ``lmax``, ``gt_eq`` an ``lbool``, and once
it holds the leader tells every voter. Each ``Voter`` is started with ``blooml run`` in a child
process; it re-sends its vote every 0.1 s until it hears the result (UDP may lose a datagram;
the vote is idempotent, so duplicates are harmless). Everything only grows: the program is
confluent, whatever the order in which the votes arrive.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, lbool, lmax, lset, periodic, table
from blooml.net import NodeProcess

QUORUM_SIZE = 3
VOTERS = 5
HERE = Path(__file__).resolve()


class Leader(Program):
    """Counts distinct votes; once ``QUORUM_SIZE`` have arrived, answers every voter."""

    vote_chn = channel(["@addr", "voter"])
    result_chn = channel(["@addr", "leader", "votes"])
    voters = table(["addr"])
    votes = lset()
    cnt = lmax()
    quorum_done = lbool()
    decided = table(["ok"])

    # fmt: off
    @bloom
    def logic(self) -> None:
        self.votes <= self.vote_chn.map(lambda v: v.voter)
        self.voters <= self.vote_chn.map(lambda v: (v.voter,))
        self.cnt <= self.votes.size()
        self.quorum_done <= self.cnt.gt_eq(QUORUM_SIZE)
        self.decided <= self.quorum_done.when_true(lambda: [(True,)])
        self.result_chn <~ self.voters.join(self.decided).map(
            lambda v, d: (v.addr, self.addr, self.cnt.reveal())
        )
    # fmt: on


class Voter(Program):
    """Votes for the leader in ``leader`` every ``beat`` until a result arrives."""

    leader = table(["addr"])
    beat = periodic(0.1)
    vote_chn = channel(["@addr", "voter"])
    result_chn = channel(["@addr", "leader", "votes"])
    heard = table(["leader"], ["votes"])

    # fmt: off
    @bloom
    def logic(self) -> None:
        self.vote_chn <~ self.leader.notin(self.heard, self.leader.addr == self.heard.leader) \
            .join(self.beat).map(lambda ld, b: (ld.addr, self.addr))
        self.heard <= self.result_chn.map(lambda r: (r.leader, lmax(r.votes)))
    # fmt: on


def main(voters: int = VOTERS, timeout: float = 20.0) -> dict[str, Any]:
    """Start a leader here and ``voters`` voter processes; return who heard the result."""
    leader = Leader(addr="127.0.0.1:0")
    leader.start()
    print(f"leader at {leader.addr}; starting {voters} voter processes (quorum {QUORUM_SIZE})")
    procs: list[NodeProcess] = []
    try:
        for _ in range(voters):
            procs.append(NodeProcess(f"{HERE}:Voter", inserts={"leader": [(leader.addr,)]}))
        addrs = sorted(p.addr for p in procs)
        print("voters:", ", ".join(addrs))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answered = leader.sync_do(lambda p: sorted(r.addr for r in p.voters))
            if leader.sync_do(lambda p: bool(p.quorum_done.value)) and len(answered) == voters:
                break
            time.sleep(0.05)
        done = leader.sync_do(lambda p: bool(p.quorum_done.value))
        votes = leader.sync_do(lambda p: sorted(p.votes.value.reveal()))
        print(f"quorum reached: {done}; votes from {len(votes)} voters")
        # every voter heard the result when the votes stop coming
        quiet = False
        while time.monotonic() < deadline and not quiet:
            before = leader.stats()["received"]
            time.sleep(0.4)
            quiet = leader.stats()["received"] == before
        print(f"all voters heard the result and stopped voting: {quiet}")
        stats = leader.stats()
        print(f"leader: {stats['received']} datagrams in, {stats['sent']} out")
    finally:
        exit_codes = [p.stop() for p in procs]
        leader.stop()
    print(f"voters stopped cleanly: {all(c == 0 for c in exit_codes)}")
    return {
        "done": done,
        "votes": votes,
        "voters": addrs,
        "quiet": quiet,
        "exit_codes": exit_codes,
    }


if __name__ == "__main__":
    main()
