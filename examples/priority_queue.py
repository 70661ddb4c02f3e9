"""A per-user priority queue (Dedalus ``m_priority_queue``): ordering through time.

Run it with ``python examples/priority_queue.py``. Jobs that arrive in the same tick are
processed one per user per tick, lowest position first. The queue maps the order of the
positions onto the local clock: at each tick ``omin`` (a ``group`` with ``min_``, a stratified
aggregate) picks each user's smallest position, that job is emitted into ``priority_queue`` at
the next tick (``<+``) and deleted from ``m_priority_queue`` at the same boundary (``<-``),
which changes the aggregate the next tick sees. Rules read ``self.tick_count`` (Dedalus
entanglement) to log when each job ran.

``GlobalPriorityQueue`` overrides the ``queue`` rule block by name: the minimum is taken over
all users, so the jobs come out one per tick in global order (the seed's global FIFO).
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, min_, scratch, table


class PriorityQueue(Program):
    """The seed's rules: per user (``A``), the job (``B``) with the least position (``C``)."""

    # one job per (user, position): positions are the queue order
    m_priority_queue = table(["user", "prio"], ["job"])
    omin = scratch(["user"], ["prio"])
    del_m_priority_queue = scratch(["user", "prio"], ["job"])
    priority_queue = scratch(["user", "prio"], ["job"])
    processed = table(["user", "prio"], ["job", "tick"])

    # fmt: off
    @bloom
    def queue(self) -> None:
        self.omin <= self.m_priority_queue.group(["user"], min_("prio"))
        self.del_m_priority_queue <= self.m_priority_queue.join(
            self.omin,
            self.m_priority_queue.user == self.omin.user,
            self.m_priority_queue.prio == self.omin.prio,
        ).map(lambda q, o: q)
        self.priority_queue <+ self.del_m_priority_queue
        self.m_priority_queue <- self.del_m_priority_queue

    @bloom
    def log(self) -> None:
        self.processed <= self.priority_queue.map(
            lambda p: (p.user, p.prio, p.job, self.tick_count)
        )
    # fmt: on


class GlobalPriorityQueue(PriorityQueue):
    """One job per tick over all users: ``queue`` is redefined without the user column."""

    gmin = scratch(["prio"])

    # fmt: off
    @bloom
    def queue(self) -> None:  # replaces PriorityQueue.queue
        self.gmin <= self.m_priority_queue.group([], min_("prio"))
        self.del_m_priority_queue <= self.m_priority_queue.join(
            self.gmin, self.m_priority_queue.prio == self.gmin.prio
        ).map(lambda q, g: q)
        self.priority_queue <+ self.del_m_priority_queue
        self.m_priority_queue <- self.del_m_priority_queue
    # fmt: on


# the seed's facts, all with the same time suffix (@123): they arrive in one tick
JOBS = [("bob", 200, "bash"), ("eve", 1, "john"), ("alice", 204, "ssh"), ("bob", 205, "ssh")]


def drain(
    p: PriorityQueue, jobs: list[tuple[str, int, str]], max_ticks: int = 100
) -> list[tuple[int, str, str, int]]:
    """Insert ``jobs`` and tick until the queue is empty; return ``(tick, user, job, prio)``."""
    p.m_priority_queue.insert(jobs)
    for _ in range(max_ticks):
        p.tick()
        if len(p.m_priority_queue) == 0 and len(p.processed) == len(jobs):
            break
    return sorted((r.tick, r.user, r.job, r.prio) for r in p.processed)


def _show(title: str, log: list[tuple[int, str, str, int]]) -> None:
    print(title)
    ticks = sorted({t for t, *_ in log})
    for t in ticks:
        jobs = ", ".join(f"{u}:{j}({c})" for tt, u, j, c in log if tt == t)
        print(f"  tick {t}: {jobs}")


def main() -> dict[str, Any]:
    """Drain the seed's queue per user, then globally; return both processing logs."""
    print("Priority queue: four jobs arrive in the same tick (the seed's facts @123);")
    print("they are inserted before tick 0 (ticks count from 0, as self.tick_count reads):")
    for user, prio, job in JOBS:
        print(f"  priority_queue({user!r}, {job!r}, {prio})")
    print()
    per_user = drain(PriorityQueue(), JOBS)
    _show("PriorityQueue (one job per user per tick, lowest position first):", per_user)
    print()
    global_ = drain(GlobalPriorityQueue(), JOBS)
    _show("GlobalPriorityQueue (queue block overridden: one job per tick overall):", global_)
    print(
        "\nThe aggregate omin is recomputed every tick from what is left in m_priority_queue;\n"
        "deleting the emitted job (<-, effective at the next tick) is what advances the queue."
    )
    return {"per_user": per_user, "global": global_}


if __name__ == "__main__":
    main()
