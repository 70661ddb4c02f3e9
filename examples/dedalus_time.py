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

from __future__ import annotations

from typing import Any

from blooml import LocalNetwork, Program, bloom, channel, interface, lmax, scratch, table


class Sequence(Program):
    """A per-name sequence that jumps to the current tick on each event, and a gap-free counter."""

    event = interface(["ident"])
    seq = table(["ident"], ["n"])
    counter = lmax(0)

    # fmt: off
    @bloom
    def sequence(self) -> None:
        # seq(A, N)@next <- seq(A, _)@N, event(A)@N   (a first event starts the sequence)
        self.seq <+ self.event.map(lambda e: (e.ident, self.tick_count))
        # seq(A, X)@next <- seq(A, X), notin event(A): the table persists by itself; the old
        # value must go where an event replaces it
        self.seq <- self.seq.join(self.event, self.seq.ident == self.event.ident).map(lambda s, e: s)

    @bloom
    def count_ticks_with_events(self) -> None:
        self.counter <+ self.event.map(lambda e: self.counter + 1)
    # fmt: on


class LamportSender(Program):
    """``q`` rows are sent asynchronously, stamped with the sender's tick (``q(A, B)@N``)."""

    q = interface(["dst", "a"], ["b"])
    p_wait_chn = channel(["@dst", "a", "b", "n"])

    # fmt: off
    @bloom
    def send(self) -> None:
        self.p_wait_chn <~ self.q.map(lambda r: (r.dst, r.a, r.b, self.tick_count))
    # fmt: on


class LamportReceiver(Program):
    """Holds each message in ``p_wait`` until the local tick exceeds its send time."""

    p_wait_chn = channel(["@dst", "a", "b", "n"])
    p_wait = table(["a", "b", "n"])
    release = scratch(["a", "b", "n"])
    p = table(["a", "b"], ["at_tick"])

    # fmt: off
    @bloom
    def wait(self) -> None:
        self.p_wait <= self.p_wait_chn.map(lambda m: (m.a, m.b, m.n))
        self.release <= self.p_wait.filter(lambda w: w.n < self.tick_count)
        self.p <+ self.release.map(lambda w: (w.a, w.b, self.tick_count + 1))
        self.p_wait <- self.release
    # fmt: on


SEQUENCE_EVENTS: dict[int, list[str]] = {
    0: ["x"],
    1: [],
    2: ["x", "y"],
    3: [],
    4: [],
    5: ["y"],
    6: [],
}


def run_sequence() -> list[tuple[int, dict[str, int], int]]:
    """Fire ``SEQUENCE_EVENTS`` (tick -> event idents); return ``(tick, seq, counter)`` as
    they stand after each tick. Ticks are numbered from 0, as ``self.tick_count`` reads."""
    s = Sequence()
    out: list[tuple[int, dict[str, int], int]] = []
    for tick, idents in SEQUENCE_EVENTS.items():
        assert s.tick_count == tick
        s.event.insert([(n,) for n in idents])
        s.tick()
        out.append((tick, {r.ident: r.n for r in s.seq}, s.counter.value.reveal()))
    return out


def run_lamport(head_start: int = 8) -> dict[str, Any]:
    """The sender runs ``head_start`` ticks alone, then sends one message to the receiver.

    Returns the sender's tick at sending, the receiver's tick when the message arrived and
    when ``p`` first held it, and the receiver's log ``(tick, p_wait rows, p rows)``.
    """
    net = LocalNetwork()
    sender = LamportSender(addr="sender", network=net)
    sender.tick(head_start)  # the sender's clock is ahead: it started earlier
    receiver = LamportReceiver(addr="receiver", network=net)
    sender.q.insert([("receiver", "greeting", "hello")])
    sent_at = sender.tick_count  # the tick that will send it
    arrived = released = None
    log: list[tuple[int, list[tuple[Any, ...]], list[tuple[Any, Any]]]] = []
    for _ in range(3 * head_start + 5):
        rtick = receiver.tick_count
        net.tick()
        waiting = sorted(tuple(r) for r in receiver.p_wait)
        got = sorted((r.a, r.b) for r in receiver.p)
        log.append((rtick, waiting, got))
        if waiting and arrived is None:
            arrived = rtick
        if got:
            released = next(iter(receiver.p)).at_tick
            break
    return {"sent_at": sent_at, "arrived": arrived, "released": released, "log": log}


def main() -> dict[str, Any]:
    """Run both; return the sequence trace and the Lamport timings."""
    print("1. A Dedalus sequence: seq jumps to the tick of each event; counter counts them.")
    print("   (ticks are numbered from 0: the value self.tick_count has inside the rules)\n")
    print("  tick  events   seq after the tick   counter")
    trace = run_sequence()
    for tick, seq, counter in trace:
        events = ", ".join(SEQUENCE_EVENTS[tick]) or "-"
        print(f"  {tick:>4}  {events:<7}  {seq!s:<19}  {counter}")
    print("  both change one tick after the event: <+ is the seed's @next")

    print("\n2. Lamport-clock rewriting of p(A, B)@async <- q(A, B).\n")
    lam = run_lamport()
    print(
        f"  the sender has run 8 ticks more than the receiver; it sends "
        f"q('greeting', 'hello') in its tick {lam['sent_at']}"
    )
    shown = [lam["log"][0], ("...", None, None), *lam["log"][-3:]]
    for rtick, waiting, got in shown:
        if waiting is None:
            print("   ...")
            continue
        state = f"p = {got}" if got else f"p_wait = {waiting}, p = []"
        print(f"  receiver tick {rtick:>2}: {state}")
    print(
        f"  it arrived in receiver tick {lam['arrived']}, waited in p_wait until the receiver's "
        f"clock passed {lam['sent_at']},\n  and p holds it from tick {lam['released']}: no "
        "effect is seen before the time of its cause."
    )
    return {"sequence": trace, "lamport": lam}


if __name__ == "__main__":
    main()
