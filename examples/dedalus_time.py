"""Time as data (Dedalus): a sequence, and the Lamport-clock rewriting of an asynchronous rule.

Run it with ``python examples/dedalus_time.py``.

* ``Sequence``: the seed's two inductive rules. On an ``event(A)`` the sequence ``seq(A, N)``
  takes the current tick (rules read ``self.tick_count``: the time suffix *entangled* into the
  tuple), otherwise it persists; it only increases, with gaps. ``counter`` is the gap-free
  version with arithmetic, written as a lattice: ``self.counter <+ self.event.map(lambda e:
  self.counter + 1)`` adds one per tick with an event, and needs no deletion at all.
* ``LamportSender``/``LamportReceiver``: the seed rewrites ``p(A, B)@async <- q(A, B)`` into

      p_wait(A, B, N)@async <- q(A, B)@N;
      p_wait(A, B, N)@next  <- p_wait(A, B, N)@M, N >= M;
      p(A, B)@next          <- p_wait(A, B, N)@M, N < M;

  so a message is held until the receiver's clock has passed the sender's clock at sending
  time: a receiver never sees an effect before (its own notion of) the time of its cause.

``main()`` returns what it printed, for the test suite.
"""

# Bloom rules are statements written as comparisons (``a <= b``, ``a <+ b``): B015 is moot.
# ruff: noqa: B015

from __future__ import annotations

from typing import Any

from blooml import LocalNetwork, Program, bloom, channel, interface, lmax, scratch, table


class Sequence(Program):
    """A per-name sequence that jumps to the current tick on each event, and a gap-free counter."""

    event = interface(["name"])
    seq = table(["name"], ["n"])
    counter = lmax(0)

    @bloom
    def sequence(self):
        # seq(A, N)@next <- seq(A, _)@N, event(A)@N   (a first event starts the sequence)
        self.seq < +self.event.map(lambda e: (e.name, self.tick_count))
        # seq(A, X)@next <- seq(A, X), notin event(A): the table persists by itself; the old
        # value must go where an event replaces it
        self.seq < -self.seq.join(self.event, self.seq.name == self.event.name).map(lambda s, e: s)

    @bloom
    def count_ticks_with_events(self):
        self.counter < +self.event.map(lambda e: self.counter + 1)


class LamportSender(Program):
    """``q`` rows are sent asynchronously, stamped with the sender's tick (``q(A, B)@N``)."""

    q = interface(["dst", "a"], ["b"])
    p_wait_chn = channel(["@dst", "a", "b", "n"])

    @bloom
    def send(self):
        self.p_wait_chn < ~self.q.map(lambda r: (r.dst, r.a, r.b, self.tick_count))


class LamportReceiver(Program):
    """Holds each message in ``p_wait`` until the local tick exceeds its send time."""

    p_wait_chn = channel(["@dst", "a", "b", "n"])
    p_wait = table(["a", "b", "n"])
    release = scratch(["a", "b", "n"])
    p = table(["a", "b"], ["at_tick"])

    @bloom
    def wait(self):
        self.p_wait <= self.p_wait_chn.map(lambda m: (m.a, m.b, m.n))
        self.release <= self.p_wait.filter(lambda w: w.n < self.tick_count)
        self.p < +self.release.map(lambda w: (w.a, w.b, self.tick_count + 1))
        self.p_wait < -self.release


def run_sequence() -> list[tuple[int, dict[str, int], int]]:
    """Fire events at chosen ticks; return ``(tick, seq, counter)`` after each."""
    s = Sequence()
    plan = {1: ["x"], 2: [], 3: ["x", "y"], 4: [], 5: [], 6: ["y"], 7: []}
    out = []
    for tick, names in plan.items():
        s.event.insert([(n,) for n in names])
        s.tick()
        assert s.tick_count == tick
        out.append((tick, {r.name: r.n for r in s.seq}, s.counter.value.reveal()))
    return out


def run_lamport(head_start: int = 8) -> dict[str, Any]:
    """The sender runs ``head_start`` ticks alone, then sends one message to the receiver.

    Returns the send tick, the tick the message arrived and the tick ``p`` saw it.
    """
    net = LocalNetwork()
    sender = LamportSender(addr="sender", network=net)
    sender.tick(head_start)  # the sender's clock is ahead: it started earlier
    receiver = LamportReceiver(addr="receiver", network=net)
    sender.q.insert([("receiver", "greeting", "hello")])
    arrived = released = None
    sent_at = sender.tick_count + 1
    log = []
    for _ in range(3 * head_start + 5):
        net.tick()
        waiting = sorted(tuple(r) for r in receiver.p_wait)
        got = sorted((r.a, r.b) for r in receiver.p)
        log.append((receiver.tick_count, waiting, got))
        if waiting and arrived is None:
            arrived = receiver.tick_count
        if got:
            released = next(iter(receiver.p)).at_tick
            break
    return {"sent_at": sent_at, "arrived": arrived, "released": released, "log": log}


def main() -> dict[str, Any]:
    """Run both; return the sequence trace and the Lamport timings."""
    print("1. A Dedalus sequence: seq jumps to the tick of each event; counter counts them.\n")
    print("  tick  events   seq                counter")
    plan = {1: "x", 2: "-", 3: "x, y", 4: "-", 5: "-", 6: "y", 7: "-"}
    trace = run_sequence()
    for tick, seq, counter in trace:
        print(f"  {tick:>4}  {plan[tick]:<7}  {seq!s:<17}  {counter}")
    print("  (both are visible one tick after the event: <+ is the seed's @next)")

    print("\n2. Lamport-clock rewriting of p(A, B)@async <- q(A, B).\n")
    lam = run_lamport()
    print(f"  the sender, 8 ticks ahead, sends q('greeting', 'hello') at its tick {lam['sent_at']}")
    for rtick, waiting, got in lam["log"]:
        state = f"p_wait = {waiting}" if waiting else "p_wait = []"
        if got:
            state = f"p = {got}"
        print(f"  receiver tick {rtick:>2}: {state}")
    print(
        f"  arrived at receiver tick {lam['arrived']}, held until its clock passed "
        f"{lam['sent_at']}, visible in p at tick {lam['released']}"
    )
    return {"sequence": trace, "lamport": lam}


if __name__ == "__main__":
    main()
