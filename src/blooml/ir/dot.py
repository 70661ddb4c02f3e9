"""Pictures of a program's dataflow: Graphviz DOT text and its rendering (``blooml plot``).

:func:`program_dot` draws a :class:`~blooml.ir.ProgramIR`: collections and lattice variables
are nodes (one shape per kind), each rule is an edge from every state its body reads to its
head, labelled ``r<index> <op> <operators>``. Monotone edges are black, non-monotone ones
orange with an open-dot head, and those that are CALM points of order (non-monotone after a
channel, see :meth:`ProgramIR.nonmonotone_after_channels`) purple and thick. Rules that act
at the next tick (``<+ <- <+-``) are dotted; ``<~`` (a channel send) is dashed. Strata are
clusters. On a program that cannot be stratified the offending cycle is red
(``StratificationError.ir`` and ``.edges`` hold what is needed).

The same style (font, shapes of sources and sinks, quoting: ``blooml.lattices._display``) is
used by the circuits of :mod:`blooml.dataflow` (``Circuit.dot``). Rendering needs the
``graphviz`` Python package (the ``plot`` extra) and Graphviz's ``dot`` program (``apt-get
install graphviz``); where either is missing :func:`render` raises
:class:`~blooml.errors.GraphvizNotFound` and the DOT text can be rendered later with
``dot -Tsvg program.dot -o program.svg``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from blooml.errors import GraphvizNotFound
from blooml.ir import nodes as N
from blooml.ir.program import _DESTRUCTIVE_OPS
from blooml.lattices._display import DOT_FONT, DOT_SHAPES, DOT_STYLE, dot_header, dot_quote

if TYPE_CHECKING:
    from blooml.ir.program import Edge, ProgramIR

__all__ = [
    "FONT",
    "STYLE",
    "graph_header",
    "graphviz_available",
    "operator_label",
    "program_dot",
    "quote",
    "render",
]

#: Font of every drawing (program graphs and dataflow circuits).
FONT = DOT_FONT
#: Edge and node attributes shared by the drawings.
STYLE = DOT_STYLE
#: Node shapes by collection kind.
SHAPES = DOT_SHAPES
quote = dot_quote
graph_header = dot_header


def operator_label(body: Any) -> str:
    """The operators of a rule body from input to output, e.g. ``join.map`` or ``group``."""
    ops: list[str] = []
    node = body
    while node is not None and len(ops) < 4:
        if isinstance(node, N.Scan | N.LatVar):
            break
        if isinstance(node, N.LatMethod):
            ops.append(node.name)
            node = node.target
            continue
        if isinstance(node, N.ArgAgg):
            ops.append(node.how)
        elif isinstance(node, N.Join) and node.how != "inner":
            ops.append(f"{node.how}_join")
        else:
            ops.append(type(node).__name__.lower())
        kids = N.children(node)
        node = kids[0] if kids else None
    return ".".join(reversed(ops))


def _node_line(ir: ProgramIR, name: str, ind: str) -> str:
    """The DOT line of a collection or lattice variable."""
    info = ir.collections.get(name)
    if info is not None:
        kind = info.direction if info.kind == "interface" and info.direction else info.kind
        label = f"{name}\n{info.kind} [{', '.join(info.columns)}]"
        shape = SHAPES.get(kind, "box")
    else:
        lat = ir.lattices[name]
        wn = getattr(lat.cls, "wrapper_name", "") or lat.cls.__qualname__
        label, shape = f"{name}\n{wn}", SHAPES["lattice"]
    return f"{ind}{quote('s_' + name)} [label={quote(label)}, shape={shape}];"


def program_dot(ir: ProgramIR, *, cycle: Iterable[Edge] = (), title: str | None = None) -> str:
    """The program's dataflow as Graphviz DOT text (see the module docstring for the style).

    Args:
        ir: the program (``P.ir()``), or the unstratified graph of an
            :class:`~blooml.errors.StratificationError` (its ``ir``; it has no strata).
        cycle: edges drawn in red (``StratificationError.edges``).
        title: the graph's label (default: the program's name).
    """
    bad = {(e.src, e.dst, e.rule) for e in cycle}
    points = {rule.index for rule, _ in ir.nonmonotone_after_channels()}
    lines = graph_header(ir.name, "LR")
    lines.append(f"  label={quote(title if title is not None else 'program ' + ir.name)};")
    lines.append("  labelloc=t; compound=true;")
    names = [*ir.collections, *ir.lattices]
    if ir.strata:
        by_stratum: dict[int, list[str]] = {}
        for n in names:
            by_stratum.setdefault(ir.stratum_of.get(n, 0), []).append(n)
        for s in sorted(by_stratum):
            lines.append(f"  subgraph {quote(f'cluster_stratum_{s}')} {{")
            lines.append(
                f'    label={quote(f"stratum {s}")}; style="rounded,filled"; '
                'fillcolor="#f5f7fa"; color="#b0b8c4";'
            )
            lines.extend(_node_line(ir, n, "    ") for n in by_stratum[s])
            lines.append("  }")
    else:
        lines.extend(_node_line(ir, n, "  ") for n in names)
    seen: set[tuple[str, str, int]] = set()
    for e in ir.edges:
        key = (e.src, e.dst, e.rule)
        if key in seen:
            continue
        seen.add(key)
        rule = ir.rules[e.rule]
        attrs: list[str] = []
        label = f"r{rule.index} {rule.op} {operator_label(rule.body)}".rstrip()
        if rule.op == "<~":
            attrs.append(STYLE["channel"])
        elif rule.temporal:
            attrs.append(STYLE["next_tick"])
        nonmono = e.kind == "nonmonotone" or (
            e.kind == "temporal" and _reads_nonmonotonically(rule.body, e.src)
        )
        # a deletion or replacement fed by a channel: a point of order through its head
        nonmono = nonmono or (rule.op in _DESTRUCTIVE_OPS and rule.index in points)
        if key in bad:
            attrs.append(STYLE["cycle"])
            label += "\n(cycle)"
        elif nonmono and rule.index in points:
            attrs.append(STYLE["point_of_order"])
            label += "\npoint of order"
        elif nonmono:
            attrs.append(STYLE["nonmonotone"])
        else:
            attrs.append(STYLE["monotone"])
        attrs.append(f"label={quote(label)}")
        attrs.append(f"tooltip={quote(rule.describe())}")
        lines.append(f"  {quote('s_' + e.src)} -> {quote('s_' + e.dst)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _reads_nonmonotonically(body: Any, src: str) -> bool:
    """Whether ``body`` reads ``src`` through a non-monotone position."""
    from blooml.ir.graph import sources

    return any(nm for name, nm in sources(body) if name == src)


def graphviz_available() -> bool:
    """Whether both the ``graphviz`` Python package and Graphviz's ``dot`` program exist."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def render(dot: str, fmt: str = "svg") -> bytes:
    """Lay out ``dot`` with Graphviz and return the picture in format ``fmt`` (svg, png, pdf).

    Raises:
        GraphvizNotFound: the ``graphviz`` package (``pip install blooml[plot]``) or the
            ``dot`` program (``apt-get install graphviz``) is missing.
    """
    try:
        import graphviz
    except ImportError:
        raise GraphvizNotFound(
            "the graphviz Python package is not installed: pip install 'blooml[plot]'",
            missing="graphviz (Python package)",
        ) from None
    if shutil.which("dot") is None:
        raise GraphvizNotFound(
            "Graphviz's dot program is not on PATH: apt-get install graphviz "
            "(or brew install graphviz)",
            missing="dot (Graphviz program)",
        )
    out: bytes = graphviz.Source(dot).pipe(format=fmt)
    return out
