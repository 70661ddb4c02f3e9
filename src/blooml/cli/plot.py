"""``blooml plot TARGET -o program.svg``: draw a Bloom^L program's dataflow with Graphviz."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from blooml.cli._target import UsageError, load_target

__all__ = ["NAME", "register", "run"]

NAME = "plot"
_DESCRIPTION = """\
Draw a Bloom^L program's dataflow: collections and lattice variables are nodes, each rule is
an edge from what it reads to its head, labelled with its number, operator and operators
(r1 <= join.map). Strata are shaded clusters. Non-monotone edges are orange, the CALM points
of order (non-monotone after a channel) thick purple; <+ <- <+- edges are dotted, <~ (channel
sends) dashed. On a program that cannot be stratified the offending cycle is drawn in red and
the exit status is 1.

TARGET is package.module:Class or path/to/file.py:Class naming a Program subclass. The format
follows the output's suffix: .svg, .png, .pdf, or .dot for the Graphviz source. Layout needs
Graphviz (pip install 'blooml[plot]' and apt-get install graphviz); without it the DOT text is
written next to the output (program.dot) with the command that renders it.

example:
  blooml plot examples/shortest_paths.py:Paths -o paths.svg
  blooml plot mypkg.mod:Program -o program.dot

exit status: 0 drawn, 1 the program cannot be stratified (cycle drawn), 2 usage"""

_FORMATS = ("svg", "png", "pdf", "dot")


def register(subparsers: Any) -> None:
    """Add the ``plot`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        NAME,
        help="draw a Bloom^L program's dataflow (Graphviz: svg, png, pdf or dot)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="package.module:Class or file.py:Class")
    p.add_argument(
        "-o",
        "--output",
        default="program.svg",
        metavar="FILE",
        help="where to write the picture (default program.svg; the suffix picks the format)",
    )
    p.set_defaults(func=run)


def load_program_ir(target: str, name: str) -> tuple[Any, Any, int]:
    """Load ``target`` and return ``(ir, cycle_edges, status)``.

    ``status`` is 0 for a stratified program, 1 when the program cannot be stratified (then
    ``ir`` is the unstratified graph and ``cycle_edges`` the cycle) and 2 when the target is
    unusable (an error was printed; ``ir`` is ``None``).
    """
    from blooml.bloom.program import Program
    from blooml.errors import StratificationError

    try:
        obj = load_target(target)
    except UsageError as exc:
        cause = exc.cause
        if isinstance(cause, StratificationError) and cause.ir is not None:
            print(f"blooml {name}: {cause}", file=sys.stderr)
            return cause.ir, cause.edges, 1
        print(f"blooml {name}: error: {exc}", file=sys.stderr)
        return None, (), 1 if isinstance(cause, StratificationError) else 2
    if not (isinstance(obj, type) and issubclass(obj, Program) and obj is not Program):
        print(f"blooml {name}: error: {target} is not a Program subclass", file=sys.stderr)
        return None, (), 2
    try:
        return obj.ir(), (), 0
    except StratificationError as exc:
        print(f"blooml {name}: {exc}", file=sys.stderr)
        return exc.ir, exc.edges, 1


def run(ns: argparse.Namespace) -> int:
    """Run the subcommand; return the exit status."""
    from blooml.errors import GraphvizNotFound
    from blooml.ir.dot import program_dot, render

    out = Path(ns.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in _FORMATS:
        print(
            f"blooml {NAME}: error: cannot tell the format of {str(out)!r} from its suffix; "
            f"use one of {', '.join('.' + f for f in _FORMATS)}",
            file=sys.stderr,
        )
        return 2
    ir, cycle, status = load_program_ir(ns.target, NAME)
    if ir is None:
        return status
    title = f"program {ir.name}" + (" (cannot be stratified: cycle in red)" if cycle else "")
    dot = program_dot(ir, cycle=cycle, title=title)
    if fmt == "dot":
        out.write_text(dot, encoding="utf-8")
        print(f"wrote {out}")
        return status
    try:
        data = render(dot, fmt)
    except GraphvizNotFound as exc:
        dot_path = out.with_suffix(".dot")
        dot_path.write_text(dot, encoding="utf-8")
        print(
            f"blooml {NAME}: {exc}\nwrote the Graphviz source to {dot_path}; render it with:\n"
            f"  dot -T{fmt} {dot_path} -o {out}",
            file=sys.stderr,
        )
        return status
    out.write_bytes(data)
    print(f"wrote {out}")
    return status
