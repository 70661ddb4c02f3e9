"""``blooml trace show|html``: summarise tick traces, or draw them as a space-time diagram."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from blooml.cli._target import UsageError

__all__ = ["NAME", "register", "run_html", "run_show", "summary"]

NAME = "trace"
_DESCRIPTION = """\
Work with the traces a program writes when created with trace="run.jsonl" (JSON lines, one
event a line; the schema is in docs/tools.md and blooml.engine.trace).

  show  prints, per node, the ticks run and rolled back, messages sent and received, the rows
        each rule derived, the time per stratum, the errors and one line per tick.
  html  writes one self-contained HTML page (no network access needed to open it): a
        timeline per node, ticks as steps, messages as arrows between nodes (a space-time
        diagram); click a tick to see its inputs, derivations, messages and errors. Traces
        of several nodes (one file each, or one file shared) merge by message identity.

example:
  blooml trace show run.jsonl
  blooml trace html client.jsonl server.jsonl -o trace.html"""


def register(subparsers: Any) -> None:
    """Add the ``trace`` subcommand (with ``show`` and ``html``) to ``subparsers``."""
    p = subparsers.add_parser(
        NAME,
        help="summarise tick traces (show) or draw them as a space-time diagram (html)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(title="actions", dest="action", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show",
        help="summarise traces in the terminal",
        description="Summarise tick traces in the terminal.\n\nexample:\n"
        "  blooml trace show run.jsonl\n  blooml trace show run.jsonl --ticks 0",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("files", nargs="+", metavar="FILE", help="trace files (JSON lines)")
    show.add_argument(
        "--ticks",
        type=int,
        default=20,
        metavar="N",
        help="one line for each of the first N ticks per node (default 20; 0: none)",
    )
    show.set_defaults(func=run_show)
    html = sub.add_parser(
        "html",
        help="write a self-contained HTML space-time viewer",
        description="Write one self-contained HTML page showing the traces as a space-time "
        "diagram.\n\nexample:\n  blooml trace html client.jsonl server.jsonl -o trace.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    html.add_argument("files", nargs="+", metavar="FILE", help="trace files (JSON lines)")
    html.add_argument(
        "-o", "--output", default="trace.html", metavar="FILE", help="default trace.html"
    )
    html.add_argument("--title", default=None, help="the page's title")
    html.set_defaults(func=run_html)


def _load(files: list[str]) -> Any:
    from blooml.cli._traces import load, merge

    return merge(load(files))


def summary(merged: Any, ticks: int = 20) -> str:
    """The text ``blooml trace show`` prints for merged traces."""
    lines: list[str] = []
    for node, run in merged.nodes.items():
        steps = [s for s in merged.steps if s["node"] == node]
        done = [s for s in steps if s["ok"]]
        rolled = [s for s in steps if s["ok"] is False]
        sent = sum(len(s["sends"]) for s in steps)
        got = sum(len(s["recvs"]) for s in steps)
        ms = sum(s["ms"] or 0 for s in steps)
        prog = run.get("program", "?")
        lines.append(f"node {node} ({prog})")
        lines.append(
            f"  ticks: {len(done)} committed, {len(rolled)} rolled back, {ms:.2f} ms in all; "
            f"messages: {sent} sent, {got} received"
        )
        rules = {r["index"]: r for r in run.get("rules", [])}
        per_rule: dict[int, list[Any]] = {}
        for s in done:
            for d in s["derives"]:
                t = per_rule.setdefault(d["rule"], [0, 0, None])
                t[0] += 1
                t[1] += d["n"]
                if d["new"] is not None:  # None: <+ <- <+- <~ act at the next tick
                    t[2] = (t[2] or 0) + d["new"]
        if per_rule:
            lines.append("  rules (ticks fired, rows derived, rows new; - for next-tick rules):")
            for i in sorted(per_rule):
                f, n, new = per_rule[i]
                r = rules.get(i, {})
                text = r.get("text", f"rule {i}")
                text = text if len(text) <= 70 else text[:67] + "..."
                new_text = "-" if new is None else str(new)
                lines.append(
                    f"    r{i:<3} {f:>5} {n:>8} {new_text:>8}  [{r.get('where', '?')}] {text}"
                )
        strata: dict[Any, float] = {}
        for s in done:
            for st in s["strata"]:
                strata[st["stratum"]] = strata.get(st["stratum"], 0.0) + st["ms"]
        if strata:
            lines.append(
                "  time per stratum: "
                + ", ".join(
                    f"{k if k == 'next' else 's' + str(k)} {v:.2f} ms" for k, v in strata.items()
                )
            )
        errors = [e for s in steps for e in s["errors"]]
        if errors:
            lines.append("  errors:")
            for e in errors:
                where = f" in rule {e['rule']} [{e['where']}]" if e.get("rule") is not None else ""
                lines.append(f"    tick {e['tick']}: {e['type']}: {e['message']}{where}")
        if ticks:
            lines.append("  ticks:")
            for s in steps[:ticks]:
                lines.append("    " + _tick_line(s))
            if len(steps) > ticks:
                lines.append(f"    ... {len(steps) - ticks} more (--ticks N)")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _tick_line(s: dict[str, Any]) -> str:
    status = {True: "", False: " ROLLED BACK", None: " (not run)"}[s["ok"]]
    n_in = sum(i["n"] for i in s["inputs"])
    parts = []
    if n_in:
        colls = ", ".join(f"{i['coll']} {i['kind']} {i['n']}" for i in s["inputs"])
        parts.append(f"in {n_in} ({colls})")
    derived = sum(d["n"] for d in s["derives"])
    parts.append(f"derived {derived}")
    if s["sends"]:
        parts.append(f"sent {len(s['sends'])}")
    if s["recvs"]:
        parts.append(f"took {len(s['recvs'])} msg")
    if s["errors"]:
        parts.append(f"error {s['errors'][0]['type']}")
    if s["ms"] is not None:
        parts.append(f"{s['ms']:.3f} ms")
    return f"tick {s['tick']}{status}: " + ", ".join(parts)


def run_show(ns: argparse.Namespace) -> int:
    """``blooml trace show``; return the exit status."""
    try:
        merged = _load(ns.files)
    except UsageError as exc:
        print(f"blooml {NAME} show: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(summary(merged, max(ns.ticks, 0)))
    return 0


def run_html(ns: argparse.Namespace) -> int:
    """``blooml trace html``; return the exit status."""
    from blooml.cli._trace_html import page

    try:
        merged = _load(ns.files)
    except UsageError as exc:
        print(f"blooml {NAME} html: error: {exc}", file=sys.stderr)
        return 2
    out = Path(ns.output)
    title = ns.title or "blooml trace: " + ", ".join(Path(f).name for f in ns.files)
    out.write_text(page(merged, title), encoding="utf-8")
    print(
        f"wrote {out} ({len(merged.nodes)} nodes, {len(merged.steps)} ticks, "
        f"{len(merged.arrows)} messages)"
    )
    return 0
