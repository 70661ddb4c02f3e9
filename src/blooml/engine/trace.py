"""Tick traces: what each tick of a program took in, derived, sent and how long it ran.

``P(trace="run.jsonl")`` (or ``P(trace=Tracer(...))``, to share one file between the nodes of a
network or to set the row limit) writes one JSON object a line. Every event has ``ev`` (its
type), ``node`` (the program's address) and, except ``run``, ``tick`` (the tick's number,
counted from 0; a tick that rolled back is retried under the same number). The events of a
tick are written when it commits or rolls back; ``recv`` when a message arrives.

``run``
    first line per node (written with its first tick or message): ``v`` (schema version,
    1), ``program``, ``time`` (Unix seconds), ``limit`` (rows kept per list), ``rules``
    (``[{index, head, op, where, text, stratum}]``, ``stratum`` being ``"next"`` for rules
    run at the end of a tick) and ``strata`` (rule indices per stratum).
``tick``
    a tick begins: ``time`` (Unix seconds) and ``now`` (the program's clock, e.g. the virtual
    time of a simulation or a test's fake clock).
``input``
    facts the tick took in: ``coll``, ``kind`` (``insert``, ``delete``, ``replace``,
    ``merge`` for a lattice variable, ``periodic``), ``n`` and ``rows`` (at most ``limit``;
    ``more`` is how many were left out). Messages that arrived are ``insert`` into a channel.
``derive``
    one per rule that derived something: ``rule`` (index), ``head``, ``op``, ``stratum``,
    ``evals`` (evaluations in the fixpoint), ``n`` (rows, or lattice values, the body gave),
    ``new`` (rows new or changed in a same-tick head, values that grew a lattice variable;
    ``null`` for ``<+ <- <+- <~``, whose effect is at the next tick), ``rows`` and ``more``.
``stratum``
    ``stratum`` (index) and ``ms`` (milliseconds it took, to fixpoint); ``stratum`` ``"next"``
    is the end-of-tick rules.
``send``
    a message left after the tick committed: ``chan``, ``to`` (address), ``msg`` (its identity,
    ``"<node>#<tick>.<n>"``), ``key`` and ``row``.
``recv``
    a message arrived, to be taken by tick ``tick``: ``chan``, ``from`` (the sender's address
    when the transport tells), ``msg`` (its identity when known), ``key`` and ``row``.
``error``
    the tick raised: ``type``, ``message``, ``rule`` (index of the rule that raised, or
    ``null``) and ``where``.
``rollback``
    the tick's changes were undone (its facts, inputs and messages wait for the next tick).
``end``
    the tick committed: ``ms`` (total milliseconds), ``derived`` (total rows derived).

``key`` identifies a message by content (``chan``, destination and row, hashed): a viewer
merging the traces of several nodes pairs the n-th ``send`` of a key with its n-th ``recv``
when the receiver's trace has no ``msg``. Rows are JSON lists; values JSON cannot hold are
written as their ``repr``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import weakref
from typing import IO, Any

from blooml.errors import ProgramError

__all__ = ["SCHEMA_VERSION", "TickRecorder", "Tracer", "message_key"]

#: Version of the event schema written in each ``run`` event.
SCHEMA_VERSION = 1


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return repr(v)


def message_key(chan: str, to: Any, row: Any) -> str:
    """A message's content identity: the same for its ``send`` and its ``recv``."""
    text = json.dumps([chan, _plain(to), _plain(row)], separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class Tracer:
    """Writes trace events as JSON lines to a file (see the module docstring for the schema).

    Args:
        target: a path (the file is created or truncated) or an open text file.
        limit: rows kept per list (inputs, derivations); the rest are counted in ``more``.

    One tracer may serve several programs (pass the same instance as ``trace=`` to each):
    their events interleave in one file, each tagged with its ``node``.
    """

    def __init__(self, target: str | os.PathLike[str] | IO[str], *, limit: int = 5) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ProgramError(f"Tracer: limit must be a non-negative int, got {limit!r}")
        self.limit = limit
        self._lock = threading.Lock()
        if isinstance(target, (str, os.PathLike)):
            self._file: IO[str] = open(target, "w", encoding="utf-8")  # noqa: SIM115
            self._owned = True
            self.path: str | None = os.fspath(target)
            weakref.finalize(self, self._file.close)  # closed when the tracer goes
        elif hasattr(target, "write"):
            self._file = target
            self._owned = False
            self.path = getattr(target, "name", None)
        else:
            raise ProgramError(
                f"trace must be a file path, an open text file or a Tracer, got {target!r}"
            )

    def write(self, events: list[dict[str, Any]]) -> None:
        """Append ``events`` (one line each) and flush."""
        text = "".join(json.dumps(e, separators=(",", ":"), default=repr) + "\n" for e in events)
        with self._lock:
            self._file.write(text)
            self._file.flush()

    def rows(self, rows: Any) -> tuple[list[Any], int]:
        """The first ``limit`` rows as JSON values, and how many were left out."""
        kept = []
        n = 0
        for r in rows:
            if n < self.limit:
                kept.append(_plain(r))
            n += 1
        return kept, n - len(kept)

    def events(self, rt: Any, events: list[dict[str, Any]]) -> None:
        """Write ``rt``'s events, preceded by its ``run`` event the first time (written late,
        so that it names the address a node bound, not ``host:0``)."""
        if not getattr(rt, "_trace_started", False):
            rt._trace_started = True
            events = [self.run_event(rt), *events]
        self.write(events)

    def run_event(self, rt: Any) -> dict[str, Any]:
        """The ``run`` event of a program."""
        ir = rt.ir
        stratum = {i: s for s, rules in enumerate(ir.strata) for i in rules}
        return {
            "ev": "run",
            "v": SCHEMA_VERSION,
            "node": rt.addr,
            "program": ir.name,
            "time": time.time(),
            "limit": self.limit,
            "rules": [
                {
                    "index": r.index,
                    "head": r.head,
                    "op": r.op,
                    "where": r.where,
                    "text": str(r),
                    "stratum": stratum.get(r.index, "next"),
                }
                for r in ir.rules
            ],
            "strata": [list(s) for s in ir.strata],
        }

    def recv(self, rt: Any, chan: str, row: Any, sender: Any, msg: str | None) -> None:
        """Write a ``recv`` event (a message arrived at ``rt``)."""
        self.events(
            rt,
            [
                {
                    "ev": "recv",
                    "node": rt.addr,
                    "tick": rt.tick_count,
                    "chan": chan,
                    "from": _plain(sender),
                    "msg": msg,
                    "key": message_key(chan, rt.addr, row),
                    "row": _plain(row),
                }
            ],
        )

    def close(self) -> None:
        """Close the file if this tracer opened it."""
        if self._owned and not self._file.closed:
            self._file.close()

    def __repr__(self) -> str:
        return f"<Tracer {self.path or self._file!r} limit={self.limit}>"


class TickRecorder:
    """What one tick did, gathered while it runs (when tracing or DEBUG logging is on)."""

    __slots__ = ("derived", "errors", "events", "limit", "node", "start", "strata", "tick")

    def __init__(self, rt: Any, limit: int) -> None:
        self.node = rt.addr
        self.tick = rt.tick_count
        self.limit = limit
        self.start = time.perf_counter()
        # rule index -> [evals, n, new (or None), kept rows]
        self.derived: dict[int, list[Any]] = {}
        self.strata: list[tuple[Any, float]] = []
        self.errors: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = [
            {
                "ev": "tick",
                "node": self.node,
                "tick": self.tick,
                "time": time.time(),
                "now": rt.now,
            }
        ]

    def _rows(self, rows: Any) -> tuple[list[Any], int]:
        kept = [_plain(r) for r in rows[: self.limit]]
        return kept, len(rows) - len(kept)

    def inputs(self, pend: Any) -> None:
        """Record the facts a tick takes in (a ``Pending``)."""
        for kind, d in (
            ("insert", pend.inserts),
            ("delete", pend.deletes),
            ("replace", pend.replaces),
            ("merge", pend.lats),
        ):
            for coll, rows in d.items():
                kept, more = self._rows(rows)
                self.events.append(
                    {
                        "ev": "input",
                        "node": self.node,
                        "tick": self.tick,
                        "coll": coll,
                        "kind": kind,
                        "n": len(rows),
                        "rows": kept,
                        "more": more,
                    }
                )

    def periodic(self, coll: str, row: Any) -> None:
        """Record a periodic firing."""
        self.events.append(
            {
                "ev": "input",
                "node": self.node,
                "tick": self.tick,
                "coll": coll,
                "kind": "periodic",
                "n": 1,
                "rows": [_plain(row)],
                "more": 0,
            }
        )

    def rule(self, index: int, out: list[Any], new: int | None) -> None:
        """Record one evaluation of rule ``index``: its output and what it added."""
        d = self.derived.get(index)
        if d is None:
            d = self.derived[index] = [0, 0, new if new is None else 0, []]
        d[0] += 1
        d[1] += len(out)
        if new is not None:
            d[2] = (d[2] or 0) + new
        room = self.limit - len(d[3])
        if room > 0:
            d[3].extend(_plain(r) for r in out[:room])

    def stratum(self, which: Any, seconds: float) -> None:
        """Record how long stratum ``which`` (an index, or ``"next"``) took."""
        self.strata.append((which, seconds))

    def error(self, exc: BaseException, rule: Any) -> None:
        """Record the exception a tick raised (``rule``: the ``Rule`` that raised, if any)."""
        self.errors.append(
            {
                "ev": "error",
                "node": self.node,
                "tick": self.tick,
                "type": type(exc).__name__,
                "message": str(exc),
                "rule": None if rule is None else rule.index,
                "where": None if rule is None else rule.where,
            }
        )

    def total_derived(self) -> int:
        """Rows (and lattice values) derived by every rule in the tick."""
        return sum(d[1] for d in self.derived.values())

    def finish(self, rt: Any, ok: bool, sends: list[tuple[Any, str, Any, str]]) -> list[Any]:
        """The tick's events, in order, once it committed (``ok``) or rolled back."""
        ev = self.events
        node, tick = self.node, self.tick
        rules = rt.ir.rules
        stratum = {i: s for s, rs in enumerate(rt.ir.strata) for i in rs}
        for index in sorted(self.derived):
            evals, n, new, rows = self.derived[index]
            r = rules[index]
            ev.append(
                {
                    "ev": "derive",
                    "node": node,
                    "tick": tick,
                    "rule": index,
                    "head": r.head,
                    "op": r.op,
                    "stratum": stratum.get(index, "next"),
                    "evals": evals,
                    "n": n,
                    "new": new,
                    "rows": rows,
                    "more": n - len(rows),
                }
            )
        for which, seconds in self.strata:
            ev.append(
                {
                    "ev": "stratum",
                    "node": node,
                    "tick": tick,
                    "stratum": which,
                    "ms": round(seconds * 1000, 4),
                }
            )
        for to, chan, row, msg in sends:
            ev.append(
                {
                    "ev": "send",
                    "node": node,
                    "tick": tick,
                    "chan": chan,
                    "to": _plain(to),
                    "msg": msg,
                    "key": message_key(chan, to, row),
                    "row": _plain(row),
                }
            )
        ev.extend(self.errors)
        ms = round((time.perf_counter() - self.start) * 1000, 4)
        if ok:
            ev.append(
                {
                    "ev": "end",
                    "node": node,
                    "tick": tick,
                    "ms": ms,
                    "derived": self.total_derived(),
                    # what the program holds after the tick: stored rows, and the derivation
                    # counts the incremental engine keeps for maintained collections (by row,
                    # or by key for collections with value columns)
                    "rows": sum(len(r.store) for r in rt.rels.values()),
                    "counts": sum(len(s.counts) for s in getattr(rt, "support", {}).values()),
                }
            )
        else:
            ev.append({"ev": "rollback", "node": node, "tick": tick, "ms": ms})
        return ev
