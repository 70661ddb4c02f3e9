"""Time on a simulated network: the Dedalus Lamport-clock rewrite, and causal delivery.

Run it with ``python examples/sim_time.py``. Everything runs in a ``blooml.net.Simulation``:
nodes tick on a virtual clock (``periodic`` fires by it, so ten virtual seconds take a few
milliseconds), and the network delays, reorders and duplicates messages, the same for every
run with the same seed.

1. **Lamport clocks** (the seed's rewrite of ``p(A, B)@async <- q(A, B)``). A fast sender
   stamps each message with its own time ``N`` (its tick count: it ticks 100 times a second).
   Two slow receivers keep a local clock that advances once per ``beat`` (5 times a second).
   ``NaiveReceiver`` applies a message at once, so it often sees an effect at a local time
   *before* its cause was sent. ``LamportReceiver`` is the rewrite::

       p_wait(A, B, N)@async <- q(A, B)@N;
       p_wait(A, B, N)@next  <- p_wait(A, B, N)@M, N >= M;
       p(A, B)@next          <- p_wait(A, B, N)@M, N < M;

   and, as the seed suggests, instead of ticking through empty timesteps until ``M > N`` its
   clock (an ``lmax``) *jumps* to ``N + 1``: a Lamport clock. Every ``p`` is then seen at a
   local time after it was sent.

2. **Causal delivery with** ``lvclock``: the very ``CausalNode`` class of
   ``examples/net_causal.py`` (which runs it as separate processes on UDP) runs unchanged in
   the simulation. Answers often arrive before their questions; the vector clocks hold them
   back, and no node delivers an answer before its question.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, interface, lmax, min_, periodic, scratch, table
from blooml.net import Simulation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from net_causal import CausalNode


class FastSender(Program):
    """``q`` rows are sent asynchronously, stamped with the sender's time ``N`` (its tick)."""

    beat = periodic(0.01)  # ticks 100 times a (virtual) second
    q = interface(["dst", "a"], ["b"])
    p_wait_chn = channel(["@dst", "a", "b", "n"])

    # fmt: off
    @bloom
    def send(self) -> None:
        self.p_wait_chn <~ self.q.map(lambda r: (r.dst, r.a, r.b, self.tick_count))
    # fmt: on


class SlowClock(Program, abstract=True):
    """A local clock that advances one step per ``beat`` (5 times a second)."""

    beat = periodic(0.2)
    clock = lmax(0)

    # fmt: off
    @bloom
    def advance(self) -> None:
        self.clock <+ self.beat.map(lambda b: self.clock + 1)
    # fmt: on


class NaiveReceiver(SlowClock):
    """Applies each message at once: ``p(A, B)@async`` taken literally."""

    p_wait_chn = channel(["@dst", "a", "b", "n"])
    p = table(["a", "b"], ["sent_at", "seen_at"])

    # fmt: off
    @bloom
    def take(self) -> None:
        self.p <= self.p_wait_chn.map(lambda m: (m.a, m.b, m.n, self.clock.reveal()))
    # fmt: on


class LamportReceiver(SlowClock):
    """The seed's rewrite: hold each message until the local clock has passed its send time,
    and move the clock forward to that time instead of waiting for it."""

    p_wait_chn = channel(["@dst", "a", "b", "n"])
    p_wait = table(["a", "b", "n"])
    release = scratch(["a", "b", "n"])
    oldest = scratch(["n"])
    p = table(["a", "b"], ["sent_at", "seen_at"])

    # fmt: off
    @bloom
    def wait(self) -> None:
        self.p_wait <= self.p_wait_chn.map(lambda m: (m.a, m.b, m.n))
        # p(A, B)@next <- p_wait(A, B, N)@M, N < M   (the rest of p_wait persists)
        self.release <= self.p_wait.filter(lambda w: w.n < self.clock.reveal())
        self.p <+ self.release.map(lambda w: (w.a, w.b, w.n, self.clock.reveal() + 1))
        self.p_wait <- self.release
        # the Lamport step: skip the empty timesteps up to the oldest held message's time
        self.oldest <= self.p_wait.group([], min_("n"))
        self.clock <+ self.oldest.map(lambda o: lmax(o.n + 1))
    # fmt: on


def _insert(coll: Any, rows: list[tuple[Any, ...]], sim: Simulation) -> None:
    """A scheduled input: ``rows`` into collection ``coll`` (``sim.at`` passes the simulation)."""
    coll.insert(rows)


def lamport_demo(seed: int = 7, messages: int = 12) -> dict[str, Any]:
    """Send ``messages`` rows to both receivers over a reordering network; compare."""
    sim = Simulation(seed=seed, delay=(0.01, 0.3))
    sender = FastSender(addr="sender", network=sim)
    naive = NaiveReceiver(addr="naive", network=sim)
    lamport = LamportReceiver(addr="lamport", network=sim)
    for i in range(messages):
        rows = [(dst, f"m{i}", i) for dst in ("naive", "lamport")]
        sim.at(0.25 * (i + 1), partial(_insert, sender.q, rows))
    sim.run_until(0.25 * messages + 2.0)
    out: dict[str, Any] = {"virtual_seconds": sim.now}
    for label, rx in (("naive", naive), ("lamport", lamport)):
        seen = sorted((r.sent_at, r.seen_at) for r in rx.p)
        early = [(s, t) for s, t in seen if t <= s]
        out[label] = {"received": len(seen), "before_cause": len(early), "clock": rx.clock.value}
    out["beats"] = int(sim.now / 0.2)
    return out


def causal_demo(seed: int = 3, questions: int = 5) -> dict[str, Any]:
    """Three ``CausalNode``s on a reordering, duplicating network; questions from node 0."""
    sim = Simulation(seed=seed, delay=(0.0, 0.3), dup=0.2)
    addrs = ["n0", "n1", "n2"]
    nodes = [CausalNode(addr=a, network=sim) for a in addrs]
    for p in nodes:
        p.members.insert([(a,) for a in addrs])
    for i in range(questions):
        sim.at(0.05 * i, partial(_insert, nodes[0].outq, [(f"q:{i}",)]))
    want = questions * 4  # every question and its three answers, on every node
    done = sim.run_until(lambda s: all(len(p.log) == want for p in nodes), limit=60)
    violations: list[tuple[str, str]] = []
    for a, p in zip(addrs, nodes, strict=True):
        order = [r.text for r in sorted(p.log, key=lambda r: r.t)]
        for text in order:
            q = "q:" + text[2:]
            if text.startswith("a:") and (q not in order or order.index(q) > order.index(text)):
                violations.append((a, text))
    return {
        "done": done,
        "delivered": [len(p.log) for p in nodes],
        "held_back": max((p.held.value.reveal() or 0) for p in nodes),
        "violations": violations,
        "stats": sim.stats(),
    }


def main() -> dict[str, Any]:
    """Run both demos and print what they show."""
    lam = lamport_demo()
    print("1. Lamport clocks: a fast sender (100 ticks/s) and two slow receivers (5 beats/s).\n")
    for label in ("naive", "lamport"):
        r = lam[label]
        print(
            f"  {label:<8} received {r['received']:>2}, seen at a local time not after their "
            f"send time: {r['before_cause']:>2}; local clock {r['clock'].reveal()}"
        )
    print(
        f"\n  in {lam['virtual_seconds']:g} virtual seconds the slow clocks beat "
        f"{lam['beats']} times;\n  the Lamport receiver's clock jumped ahead to stay after "
        "every message it received,\n  so nothing it saw came before its cause.\n"
    )
    cau = causal_demo()
    print("2. Causal delivery with lvclock: CausalNode (examples/net_causal.py), unchanged.\n")
    print(f"  deliveries per node: {cau['delivered']} (every question and its three answers)")
    print(f"  most messages held back at once (arrived before their causes): {cau['held_back']}")
    print(f"  answers delivered before their question: {len(cau['violations'])}")
    st = cau["stats"]
    print(f"  network: {st['messages']} messages, {st['duplicated']} duplicated")
    return {"lamport": lam, "causal": cau}


if __name__ == "__main__":
    main()
