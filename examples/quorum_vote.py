"""Quorum vote (the Bloom^L paper's first figure): wait for a quorum, monotonically.

Run it with ``python examples/quorum_vote.py``. ``QuorumVote`` is the seed figure line for line:
votes arrive on a channel and are folded into an ``lset``; its ``size()`` (monotone) feeds an
``lmax``; ``gt_eq`` (a morphism) turns that into an ``lbool``; ``when_true`` sends the result.
Every step only grows, so the program is confluent: the votes may arrive in any order, any
number of times, and the outcome is the same.

``QuorumDemo`` mixes in what a single process needs to run it: a ``ballot`` input that sends
each vote over the loopback channel (a message addressed to the program's own address arrives
at a later tick), and a ``result`` table that records the result message.
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, channel, interface, lbool, lmax, lmin, lset, table

QUORUM_SIZE = 3
RESULT_ADDR = "localhost"  # the result goes back to this very program (loopback)


class QuorumVote(Program):
    """The seed figure: ``result_chn`` gets a message once ``QUORUM_SIZE`` distinct votes."""

    vote_chn = channel(["@addr", "voter_id"])
    result_chn = channel(["@addr"])
    votes = lset()
    cnt = lmax()
    quorum_done = lbool()

    # fmt: off
    @bloom
    def logic(self) -> None:
        self.votes <= self.vote_chn.map(lambda v: v.voter_id)
        self.cnt <= self.votes.size()
        self.quorum_done <= self.cnt.gt_eq(QUORUM_SIZE)
        self.result_chn <~ self.quorum_done.when_true(lambda: [(RESULT_ADDR,)])
    # fmt: on


class QuorumDemo(QuorumVote):
    """``QuorumVote`` plus a ballot box that votes over the loopback channel."""

    ballot = interface(["voter_id"], input=True)
    # when_true keeps sending while the quorum holds: ``first`` (an lmin) keeps the first tick
    result = table(["addr"], ["first"])

    # fmt: off
    @bloom
    def loopback(self) -> None:
        self.vote_chn <~ self.ballot.map(lambda b: (RESULT_ADDR, b.voter_id))
        self.result <= self.result_chn.map(lambda r: (r.addr, lmin(self.tick_count)))
    # fmt: on


BALLOTS: list[list[str]] = [["alice"], ["bob", "alice"], [], ["alice"], ["carol", "dave"], [], []]


def main() -> dict[str, Any]:
    """Cast the ballots tick by tick; return the per-tick trace and the tick of the result."""
    print(f"Quorum vote: a result is sent once {QUORUM_SIZE} distinct voters have voted.\n")
    print("  tick  ballots cast        votes (lset)                 cnt (lmax)  done   result")
    p = QuorumDemo()
    trace: list[dict[str, Any]] = []
    for cast in BALLOTS:
        t = p.tick_count  # ticks are numbered from 0, like Bud's budtime
        p.ballot.insert([(v,) for v in cast])
        p.tick()
        votes = sorted(p.votes.value.reveal())
        cnt = p.cnt.value.reveal()  # None would be ⊥; size() of the empty set is 0
        done = bool(p.quorum_done.value)
        result = sorted((r.addr, r.first.reveal()) for r in p.result)
        trace.append({"tick": t, "votes": votes, "cnt": cnt, "done": done})
        shown_cast = ", ".join(cast) if cast else "-"
        shown_res = f"arrived in tick {result[0][1]}" if result else "-"
        print(
            f"  {t:>4}  {shown_cast:<18}  {'{' + ', '.join(votes) + '}':<27}  "
            f"{cnt!s:>10}  {done!s:<5}  {shown_res}"
        )
    rows = list(p.result)
    points = QuorumVote.ir().nonmonotone_after_channels()
    print(
        f"\nPoints of order in QuorumVote (non-monotone rules after a channel): {len(points)}:"
        "\nthe program is monotone, so it needs no coordination."
    )
    print(
        "\nalice voted three times and was counted once (lset merge is idempotent); a vote is\n"
        "visible one tick after it is cast (the channel delivers at a later tick), and the\n"
        "result message one tick after the quorum (when_true fires once cnt.gt_eq holds)."
    )
    return {
        "trace": trace,
        "result_tick": rows[0].first.reveal() if rows else None,
        "points_of_order": len(points),
    }


if __name__ == "__main__":
    main()
