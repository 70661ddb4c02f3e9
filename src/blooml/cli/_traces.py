"""Reading tick traces (``blooml.engine.trace``) and merging the traces of several nodes.

:func:`load` reads JSON-lines files; :func:`merge` groups the events into *steps* (one per
attempt at a tick of a node), pairs each ``send`` with the ``recv`` of the same message (by
``msg`` identity, else by content ``key`` in order) and places the steps on rows so that a
message always points down (a space-time diagram: each row is after every row it depends on).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from blooml.cli._target import UsageError

__all__ = ["Merged", "load", "merge"]


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every event of the files, in file order.

    Raises:
        UsageError: a file is missing, a line is not a JSON object, or an event lacks ``ev``
            or ``node`` (the message names the file and line).
    """
    events: list[dict[str, Any]] = []
    for path in paths:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read trace {str(p)!r}: {exc.strerror or exc}") from None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{p}:{lineno}: not a JSON line ({exc.msg}): {line[:80]!r}"
                ) from None
            if not isinstance(ev, dict) or "ev" not in ev or "node" not in ev:
                raise UsageError(
                    f"{p}:{lineno}: not a blooml trace event (no 'ev'/'node'): {line[:80]!r}"
                )
            events.append(ev)
    return events


class Merged:
    """Traces merged: ``nodes`` (name -> its ``run`` event, or ``{}``), ``steps`` (dicts, see
    :func:`merge`), ``arrows`` (``{"src": step id, "dst": step id or None, ...}``)."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.steps: list[dict[str, Any]] = []
        self.arrows: list[dict[str, Any]] = []

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (what the HTML viewer embeds)."""
        return {"nodes": self.nodes, "steps": self.steps, "arrows": self.arrows}


def _new_step(node: str, tick: int, attempt: int, sid: int) -> dict[str, Any]:
    return {
        "id": sid,
        "node": node,
        "tick": tick,
        "attempt": attempt,
        "ok": None,
        "ms": None,
        "inputs": [],
        "derives": [],
        "strata": [],
        "sends": [],
        "recvs": [],
        "errors": [],
        "row": 0,
    }


def merge(events: list[dict[str, Any]]) -> Merged:
    """Group ``events`` into steps, pair messages and lay the steps out in rows."""
    m = Merged()
    current: dict[str, dict[str, Any]] = {}  # node -> its open step
    attempts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    recvs: list[dict[str, Any]] = []
    for ev in events:
        kind, node = ev["ev"], str(ev["node"])
        m.nodes.setdefault(node, {})
        if kind == "run":
            m.nodes[node] = ev
            continue
        if kind == "recv":
            recvs.append(ev)
            continue
        tick = int(ev.get("tick", 0))
        step = current.get(node)
        if kind == "tick" or step is None or step["tick"] != tick:
            tries = attempts.setdefault((node, tick), [])
            step = _new_step(node, tick, len(tries), len(m.steps))
            step["time"] = ev.get("time")
            step["now"] = ev.get("now")
            tries.append(step)
            m.steps.append(step)
            current[node] = step
        if kind == "input":
            step["inputs"].append(ev)
        elif kind == "derive":
            step["derives"].append(ev)
        elif kind == "stratum":
            step["strata"].append(ev)
        elif kind == "send":
            step["sends"].append(ev)
        elif kind == "error":
            step["errors"].append(ev)
        elif kind in ("end", "rollback"):
            step["ok"] = kind == "end"
            step["ms"] = ev.get("ms")
            if kind == "end":
                step["derived"] = ev.get("derived", 0)
            del current[node]
    # a message is taken by the tick that committed under its number (or the last attempt)
    for ev in recvs:
        node, tick = str(ev["node"]), int(ev.get("tick", 0))
        tries = attempts.get((node, tick)) or []
        if not tries:
            tries = [_new_step(node, tick, 0, len(m.steps))]
            tries[0]["ok"] = None  # arrived, never taken within the trace
            attempts[(node, tick)] = tries
            m.steps.append(tries[0])
        taker = next((s for s in tries if s["ok"]), tries[-1])
        taker["recvs"].append(ev)
    _pair(m)
    _layout(m)
    return m


def _pair(m: Merged) -> None:
    by_msg: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    by_key: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for step in m.steps:
        for r in step["recvs"]:
            if r.get("msg"):
                by_msg.setdefault(r["msg"], (step, r))
            by_key.setdefault((str(r["node"]), r.get("key", "")), []).append((step, r))
    used: set[int] = set()
    for step in sorted(m.steps, key=lambda s: (s["node"], s["tick"], s["attempt"])):
        for s in step["sends"]:
            hit = by_msg.get(s.get("msg") or "")
            if hit is not None and id(hit[1]) in used:
                hit = None
            if hit is None:
                queue = by_key.get((str(s.get("to")), s.get("key", "")), [])
                while queue and id(queue[0][1]) in used:
                    queue.pop(0)
                hit = queue[0] if queue else None
            arrow = {
                "src": step["id"],
                "dst": None,
                "chan": s.get("chan"),
                "to": s.get("to"),
                "msg": s.get("msg"),
                "row": s.get("row"),
                "key": s.get("key"),
            }
            if hit is not None:
                used.add(id(hit[1]))
                arrow["dst"] = hit[0]["id"]
                if not hit[1].get("from"):
                    hit[1]["from"] = step["node"]
            m.arrows.append(arrow)
    # duplicated deliveries: receipts no send claimed point from a send of the same message
    for step in m.steps:
        for r in step["recvs"]:
            if id(r) in used:
                continue
            twin = next(
                (a for a in m.arrows if a["key"] == r.get("key") and a["to"] == r["node"]), None
            )
            if twin is not None:
                m.arrows.append({**twin, "dst": step["id"], "dup": True})
                used.add(id(r))
                if not r.get("from"):
                    r["from"] = m.steps[twin["src"]]["node"]


def _layout(m: Merged) -> None:
    """Rows: a step is below its node's previous step and below the sends it received."""
    incoming: dict[int, list[int]] = {}
    for a in m.arrows:
        if a["dst"] is not None:
            incoming.setdefault(a["dst"], []).append(a["src"])
    per_node: dict[str, list[dict[str, Any]]] = {}
    for s in m.steps:
        per_node.setdefault(s["node"], []).append(s)
    prev: dict[int, int | None] = {}
    for steps in per_node.values():
        steps.sort(key=lambda s: (s["tick"], s["attempt"]))
        for i, s in enumerate(steps):
            prev[s["id"]] = steps[i - 1]["id"] if i else None
    succ: dict[int, list[int]] = {s["id"]: [] for s in m.steps}
    indeg = dict.fromkeys(succ, 0)
    for sid, p in prev.items():
        if p is not None:
            succ[p].append(sid)
            indeg[sid] += 1
    for dst, srcs in incoming.items():
        for src in srcs:
            succ[src].append(dst)
            indeg[dst] += 1
    row = dict.fromkeys(succ, 0)
    ready = [sid for sid, d in indeg.items() if d == 0]
    done: set[int] = set()
    while len(done) < len(succ):
        if not ready:  # a pairing against causality left a cycle: release the earliest step
            ready = [min((sid for sid in succ if sid not in done), key=lambda i: indeg[i])]
        sid = ready.pop()
        if sid in done:
            continue
        done.add(sid)
        for nxt in succ[sid]:
            row[nxt] = max(row[nxt], row[sid] + 1)
            indeg[nxt] -= 1
            if indeg[nxt] == 0 and nxt not in done:
                ready.append(nxt)
    for s in m.steps:
        s["row"] = row[s["id"]]
