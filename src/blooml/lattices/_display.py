"""Display helpers shared by every layer (they sit at the bottom so that any layer may use them):
small tables for notebooks (``_repr_html_``) and terminals (``repr``), used by lattice values
and the engine's collection views, and the Graphviz style shared by the program pictures of
:mod:`blooml.ir.dot` and the circuit pictures of :mod:`blooml.dataflow` (one look for both)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "DOT_FONT",
    "DOT_SHAPES",
    "DOT_STYLE",
    "cell_text",
    "dot_header",
    "dot_quote",
    "html_table",
    "text_table",
]

#: Font of every Graphviz drawing (program graphs and dataflow circuits).
DOT_FONT = "Helvetica"

#: Edge and node attributes shared by the drawings; one place for the colours.
DOT_STYLE: dict[str, str] = {
    "monotone": 'color="#333333"',
    "nonmonotone": 'color="#d9822b", arrowhead=odot, penwidth=1.6',
    "point_of_order": 'color="#8e44ad", arrowhead=odot, penwidth=3',
    "cycle": 'color="#d62728", fontcolor="#d62728", penwidth=2.5',
    "next_tick": "style=dotted, constraint=false",
    "channel": "style=dashed, constraint=false",
    "feedback": "style=dashed, constraint=false",
    "bold": "style=bold",
}

#: Node shapes by kind; a program's interface inputs/outputs look like circuit sources/sinks.
DOT_SHAPES: dict[str, str] = {
    "table": "box3d",
    "scratch": "box",
    "channel": "cds",
    "periodic": "doublecircle",
    "input": "invhouse",
    "output": "house",
    "lattice": "ellipse",
    "operator": "box",
    "feedback": "diamond",
    "boundary": "cds",
}


def dot_quote(s: str) -> str:
    """``s`` as a DOT string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot_header(name: str, rankdir: str = "TB") -> list[str]:
    """The opening lines of a drawing (``digraph NAME {`` and the shared defaults)."""
    return [
        f"digraph {dot_quote(name)} {{",
        f"  rankdir={rankdir};",
        f"  node [fontname={DOT_FONT}];",
        f"  edge [fontname={DOT_FONT}, fontsize=10];",
    ]


_CELL = 40


def cell_text(v: Any, width: int = _CELL) -> str:
    """``repr(v)``, cut to ``width`` characters."""
    text = repr(v)
    return text if len(text) <= width else text[: width - 3] + "..."


def html_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    caption: str,
    total: int,
    limit: int = 50,
    keys: int = 0,
) -> str:
    """An HTML table of the first ``limit`` rows (``keys``: how many leading columns are keys,
    underlined) with ``caption`` (none when empty) and a note of the rows left out."""
    head = "".join(
        f"<th>{'<u>' if i < keys else ''}{html.escape(c)}{'</u>' if i < keys else ''}</th>"
        for i, c in enumerate(columns)
    )
    body = []
    for n, row in enumerate(rows):
        if n >= limit:
            break
        body.append(
            "<tr>" + "".join(f"<td>{html.escape(cell_text(c))}</td>" for c in row) + "</tr>"
        )
    more = total - len(body)
    foot = f'<tr><td colspan="{len(columns)}">… {more} more</td></tr>' if more > 0 else ""
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}{foot}</tbody></table>"


def text_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, total: int, limit: int = 10
) -> list[str]:
    """The first ``limit`` rows as aligned text lines (header first), and a note of the rest."""
    cells = [list(columns)]
    for n, row in enumerate(rows):
        if n >= limit:
            break
        cells.append([cell_text(c, 30) for c in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    ]
    if total > len(cells) - 1:
        lines.append(f"  ... {total - len(cells) + 1} more")
    return lines
