"""A child process for the durable-state kill test: ticks a durable ledger until killed.

``python _durable_child.py DATA_DIR MAX_TICKS``: prints ``start T`` (the restored tick count),
``ok`` or ``bad <why>`` after checking the restored state, then ``committed I`` after each tick
I is committed. Tick I inserts ``step(I)``, so the state after T ticks is known exactly.
With ``BLOOML_TEST_COMPACT=1`` in the environment, durable lattice variables are written as
increments from the first tick and compacted every few ticks (so kills hit both).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from blooml import Program, bloom, durable, interface, lmap, lmax, lset, table
from blooml.net.durable import DurableStore


class Ledger(Program):
    step = interface(["i"])
    log = table(["i"], ["sq", "best"], durable=True)  # a lattice column too
    last = table(["slot"], ["i"], durable=True)  # replaced every tick (<+-)
    chain = table(["i"], durable=True)  # next-tick facts (<+)
    gone = table(["i"], durable=True)  # rows deleted one tick later (<-)
    hi = durable(lmax(-1))
    book = durable(lmap())  # increments: a new key each tick for 5 ticks, then changed keys
    tags = durable(lset())  # increments: a new element each tick

    # fmt: off
    @bloom
    def rules(self):
        self.log <= self.step.map(lambda s: (s.i, s.i * s.i, lmax(s.i)))
        self.last <+- self.step.map(lambda s: ("x", s.i))
        self.chain <+ self.step.map(lambda s: (s.i,))
        self.gone <= self.step.map(lambda s: (s.i,))
        self.gone <- self.gone.filter(lambda g: g.i < self.tick_count)
        self.hi <= self.step.map(lambda s: lmax(s.i))
        self.book <= self.step.map(lambda s: (s.i % 5, lmax(s.i)))
        self.tags <= self.step.map(lambda s: s.i)
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
    book = {k: v.reveal() for k, v in p.book.value.reveal().items()}
    if book != {i % 5: i for i in range(t)}:
        out.append(f"book={book} after {t} ticks")
    if p.tags.value != lset(range(t)):
        out.append(f"tags has {len(p.tags.value.reveal())} elements after {t} ticks")
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
    if os.environ.get("BLOOML_TEST_COMPACT"):
        DurableStore.whole_below = 0
        DurableStore.compact_min_bytes = 0
        DurableStore.compact_max_increments = 7
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
