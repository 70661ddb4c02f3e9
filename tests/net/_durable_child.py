"""A child process for the durable-state kill test: ticks a durable ledger until killed.

``python _durable_child.py DATA_DIR MAX_TICKS``: prints ``start T`` (the restored tick count),
``ok`` or ``bad <why>`` after checking the restored state, then ``committed I`` after each tick
I is committed. Tick I inserts ``step(I)``, so the state after T ticks is known exactly.
"""

from __future__ import annotations

import sys
from typing import Any

from blooml import Program, bloom, durable, interface, lmax, table


class Ledger(Program):
    step = interface(["i"])
    log = table(["i"], ["sq", "best"], durable=True)  # a lattice column too
    last = table(["slot"], ["i"], durable=True)  # replaced every tick (<+-)
    chain = table(["i"], durable=True)  # next-tick facts (<+)
    gone = table(["i"], durable=True)  # rows deleted one tick later (<-)
    hi = durable(lmax(-1))

    # fmt: off
    @bloom
    def rules(self):
        self.log <= self.step.map(lambda s: (s.i, s.i * s.i, lmax(s.i)))
        self.last <+- self.step.map(lambda s: ("x", s.i))
        self.chain <+ self.step.map(lambda s: (s.i,))
        self.gone <= self.step.map(lambda s: (s.i,))
        self.gone <- self.gone.filter(lambda g: g.i < self.tick_count)
        self.hi <= self.step.map(lambda s: lmax(s.i))
    # fmt: on


def problems(p: Any) -> list[str]:
    """What is wrong with the state of a ledger that committed ``p.tick_count`` ticks."""
    t = p.tick_count
    out = []
    log = sorted((r.i, r.sq, r.best.reveal()) for r in p.log)
    if log != [(i, i * i, i) for i in range(t)]:
        out.append(f"log has {len(log)} rows, expected {t}")
    if p.hi.value.reveal() != t - 1:
        out.append(f"hi={p.hi.value} after {t} ticks")
    last = sorted(tuple(r) for r in p.last)
    if last != ([("x", t - 2)] if t >= 2 else []):
        out.append(f"last={last} after {t} ticks")
    chain = sorted(r.i for r in p.chain)
    if chain != list(range(max(t - 1, 0))):
        out.append(f"chain has {len(chain)} rows after {t} ticks")
    gone = sorted(r.i for r in p.gone)
    if gone != list(range(max(t - 2, 0), t)):
        out.append(f"gone={gone} after {t} ticks")
    pend = p._rt.pending
    want_gone = [(t - 2,)] if t >= 2 else []
    if [tuple(r) for r in pend.deletes.get("gone", [])] != want_gone:
        out.append(f"queued deletions {pend.deletes.get('gone')} after {t} ticks")
    want_chain = [(t - 1,)] if t >= 1 else []
    if [tuple(r) for r in pend.inserts.get("chain", [])] != want_chain:
        out.append(f"queued chain facts {pend.inserts.get('chain')} after {t} ticks")
    want_last = [("x", t - 1)] if t >= 1 else []
    if [tuple(r) for r in pend.replaces.get("last", [])] != want_last:
        out.append(f"queued last facts {pend.replaces.get('last')} after {t} ticks")
    return out


def main() -> None:
    data_dir, max_ticks = sys.argv[1], int(sys.argv[2])
    p = Ledger(data_dir=data_dir)
    print(f"start {p.tick_count}", flush=True)
    bad = problems(p)
    print("bad " + "; ".join(bad) if bad else "ok", flush=True)
    while p.tick_count < max_ticks:
        i = p.tick_count
        p.step.insert([(i,)])
        p.tick()
        print(f"committed {i}", flush=True)


if __name__ == "__main__":
    main()
