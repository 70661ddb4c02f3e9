"""The ``blooml`` command line: ``blooml <subcommand> ...`` (also ``python -m blooml``).

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds its
parser and sets ``func`` (``argparse.Namespace -> int``, the exit status) as a default. To add a
subcommand, write such a module and append it to :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from blooml import __version__
from blooml.cli import analyze, check_laws, plot, repl, run, trace

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

#: The subcommand modules, in the order ``blooml --help`` lists them.
SUBCOMMANDS: list[ModuleType] = [check_laws, analyze, plot, trace, repl, run]


_EPILOG = """\
blooml COMMAND --help describes a command.

example:
  blooml analyze examples/shopping_cart.py:DisorderlyCart
  blooml plot examples/shortest_paths.py:Paths -o paths.svg
  blooml trace html client.jsonl server.jsonl -o trace.html
  blooml repl examples/shortest_paths.py:Paths"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="blooml",
        description="Lattices, CRDTs and Bloom^L programs: command-line tools.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"blooml {__version__}")
    subparsers = parser.add_subparsers(title="subcommands", dest="subcommand", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``blooml`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0: success; 1: the command ran and found a problem (e.g. a law violation); 2: bad usage
    (unknown subcommand, bad argument, a target that cannot be imported).
    """
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else 2
    if ns.subcommand is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = ns.func(ns)
    return status
