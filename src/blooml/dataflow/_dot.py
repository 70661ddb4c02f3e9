"""Graphviz DOT drawings of circuits (``Circuit.dot``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from blooml.dataflow.nodes import CHILD, EXPORT, FEEDBACK, IMPORT, OPERATOR, SINK, SOURCE, Node
from blooml.lattices._display import DOT_SHAPES, DOT_STYLE, dot_header, dot_quote

if TYPE_CHECKING:
    from blooml.dataflow.circuit import Circuit

_SHAPES = {
    SOURCE: DOT_SHAPES["input"],  # drawn as a program's input/output interfaces are
    SINK: DOT_SHAPES["output"],
    OPERATOR: DOT_SHAPES["operator"],
    FEEDBACK: DOT_SHAPES["feedback"],
    IMPORT: DOT_SHAPES["boundary"],
    EXPORT: DOT_SHAPES["boundary"],
}


def to_dot(circuit: Circuit) -> str:
    """The circuit as Graphviz DOT text (children drawn as clusters)."""
    lines = dot_header(circuit.name, "TB")
    _body(circuit, lines, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _body(c: Circuit, lines: list[str], ind: str) -> None:
    for node in c._nodes:
        if node.kind == CHILD:
            child = c._children[node.local_id]
            lines.append(f"{ind}subgraph {_q('cluster_' + _id(node))} {{")
            lines.append(f"{ind}  label={_q('child ' + child.name)}; style=rounded;")
            _body(child, lines, ind + "  ")
            lines.append(f"{ind}}}")
            continue
        lines.append(f"{ind}{_id(node)} [label={_q(node.label)}, shape={_SHAPES[node.kind]}];")
    for node in c._nodes:
        if node.kind == CHILD:
            continue
        for i in c._inputs[node.local_id]:
            if c._nodes[i].kind == CHILD:
                continue
            lines.append(f"{ind}{_id(c._nodes[i])} -> {_id(node)};")
        if node.kind == IMPORT:
            src = c._parent._nodes[c._imports[node.local_id]]  # type: ignore[union-attr]
            lines.append(f"{ind}{_id(src)} -> {_id(node)} [{DOT_STYLE['bold']}];")
        if node.kind == EXPORT:
            child = c._children[c._inputs[node.local_id][0]]
            inner = child._nodes[c._exports[node.local_id]]
            lines.append(f"{ind}{_id(inner)} -> {_id(node)} [{DOT_STYLE['bold']}];")
    for fid, src in c._feedback.items():
        if src is not None:
            lines.append(
                f"{ind}{_id(c._nodes[src])} -> {_id(c._nodes[fid])} "
                f'[{DOT_STYLE["feedback"]}, label="z⁻¹"];'
            )


def _id(node: Node) -> str:
    return "n" + "_".join(map(str, node.global_id))


_q = dot_quote  # one quoting for every drawing
