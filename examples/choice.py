"""Choice (Dedalus, after Greco and Zaniolo): pick one tuple per key, deterministically.

Run it with ``python examples/choice.py``. ``expr.choose(key_cols, seed=...)`` keeps exactly one
tuple per value of ``key_cols``: it enforces the functional dependency ``key_cols -> rest``.
Which tuple is kept is not specified by the program (every choice is a valid model), but it is
a deterministic function of the seed, so a run can be replayed.

* ``Assignment``: every task gets exactly one of the workers able to do it.
* ``AsyncAsChoice``: the seed models an asynchronous rule by *choosing* a delivery time for each
  message. Here each message chooses one of the delays it may suffer, and is delivered that
  many ticks later. A monotone consumer (the set of messages seen) ends the same for every
  seed; an order-sensitive one (which message arrived first) does not.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, interface, scratch, table


class Assignment(Program):
    """Assign each task to one capable worker (the FD task -> worker)."""

    can_do = table(["task", "worker"])
    assigned = table(["task"], ["worker"])

    # fmt: off
    @bloom
    def assign(self) -> None:
        self.assigned <= self.can_do.choose(["task"], seed=0)
    # fmt: on


def assignment_with_seed(seed: int) -> type[Assignment]:
    """``Assignment`` with its ``assign`` block overridden to use ``seed``."""

    class Seeded(Assignment):
        # fmt: off
        @bloom
        def assign(self) -> None:
            self.assigned <= self.can_do.choose(["task"], seed=seed)
        # fmt: on

    Seeded.__name__ = Seeded.__qualname__ = f"Assignment_seed{seed}"
    return Seeded


def assignment(seed: int) -> dict[str, str]:
    """Run ``Assignment`` with ``seed``; return ``{task: worker}``."""
    p = assignment_with_seed(seed)()
    p.can_do.insert(CAN_DO)
    p.tick()
    return {r.task: r.worker for r in p.assigned}


class AsyncAsChoice(Program):
    """Messages choose a delay (the seed's ``time(S), choose((A, B, T), (S))``)."""

    send = interface(["msg"])
    delay = table(["d"])
    option = scratch(["msg", "due"])
    scheduled = table(["msg"], ["due"])
    arrived = scratch(["msg"])
    seen = table(["msg"], ["tick"])

    # fmt: off
    @bloom
    def options(self) -> None:
        self.option <= self.send.join(self.delay).map(lambda m, d: (m.msg, self.tick_count + d.d))

    @bloom
    def schedule(self) -> None:
        self.scheduled <= self.option.choose(["msg"], seed=0)

    @bloom
    def deliver(self) -> None:
        self.arrived <= self.scheduled.filter(lambda s: s.due == self.tick_count).map(
            lambda s: s.msg
        )
        self.seen <= self.arrived.map(lambda a: (a.msg, self.tick_count))
    # fmt: on


def async_with_seed(seed: int) -> type[AsyncAsChoice]:
    """``AsyncAsChoice`` with its ``schedule`` block overridden to use ``seed``."""

    class Seeded(AsyncAsChoice):
        # fmt: off
        @bloom
        def schedule(self) -> None:
            self.scheduled <= self.option.choose(["msg"], seed=seed)
        # fmt: on

    Seeded.__name__ = Seeded.__qualname__ = f"AsyncAsChoice_seed{seed}"
    return Seeded


def async_run(seed: int, messages: list[str], delays: range) -> dict[str, Any]:
    """Send ``messages`` in one tick, each delayed by a chosen element of ``delays``."""
    p = async_with_seed(seed)()
    p.delay.insert([(d,) for d in delays])
    p.send.insert([(m,) for m in messages])
    for _ in range(max(delays) + 2):
        p.tick()
    seen = {r.msg: r.tick for r in p.seen}
    first_tick = min(seen.values())
    return {
        "seen": set(seen),
        "ticks": seen,
        "first": sorted(m for m, t in seen.items() if t == first_tick),
    }


CAN_DO = [
    ("build", "ann"),
    ("build", "bo"),
    ("test", "bo"),
    ("test", "cy"),
    ("test", "ann"),
    ("deploy", "cy"),
]


def main() -> dict[str, Any]:
    """Show assignments and asynchronous deliveries under several seeds."""
    print("1. choose(['task']): one worker per task, chosen deterministically from a seed.\n")
    print("  capable:", ", ".join(f"{t}:{w}" for t, w in CAN_DO))
    assignments = {}
    for seed in range(3):
        a = assignment(seed)
        assignments[seed] = a
        print(f"  seed {seed}: " + ", ".join(f"{t} -> {a[t]}" for t in sorted(a)))
    print(f"  the same seed again: {assignment(0) == assignments[0]}")

    print("\n2. An asynchronous rule as a choice of delivery time (delays 1..4 ticks).\n")
    msgs = ["m1", "m2", "m3", "m4"]
    runs = {}
    for seed in range(4):
        r = async_run(seed, msgs, range(1, 5))
        runs[seed] = r
        print(f"  seed {seed}: seen = {sorted(r['seen'])}   first to arrive = {r['first']}")
    print(
        "  the monotone result (the set seen) is the same under every choice; 'which came\n"
        "  first' is non-monotone and differs: it would need coordination to be agreed on."
    )
    return {"assignments": assignments, "async": runs}


if __name__ == "__main__":
    main()
