"""``blooml analyze TARGET``: print a Bloom^L program's IR, strata and CALM points of order.

``TARGET`` is ``package.module:Class`` or ``path/to/file.py:Class`` naming a ``Program``
subclass. The printout shows the program's state, the rules of each stratum (with their source
lines), the rules run at the end of a tick, the dependency edges (``->`` monotone, ``-!->``
non-monotone, ``~>`` temporal) and the *points of order*: rules with a non-monotone input that
lies downstream of a channel, and ``<-``/``<+-`` rules (deletions, replacements) a channel
feeds, where results may depend on message order and coordination may be
needed (the CALM theorem). Exit status: 0 printed; 1 the program cannot be stratified; 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from blooml.cli._target import UsageError, load_target

__all__ = ["NAME", "points_of_order", "register", "run"]

NAME = "analyze"
_DESCRIPTION = """\
Print a Bloom^L program's state, the rules of each stratum (with their source lines), the
rules run at the end of a tick, the dependency edges (-> monotone, -!-> non-monotone,
~> temporal) and the points of order: rules with a non-monotone input downstream of a
channel, and <-/<+- rules (deletions, replacements) that a channel feeds, where results
may depend on message order and coordination may be needed (the CALM theorem). blooml plot
draws the same graph.

TARGET is package.module:Class or path/to/file.py:Class naming a Program subclass.

example:
  blooml analyze examples/shopping_cart.py:DisorderlyCart
  blooml analyze mypkg.mod:Program

exit status: 0 printed, 1 the program cannot be stratified, 2 usage"""


def register(subparsers: Any) -> None:
    """Add the ``analyze`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        NAME,
        help="print a Bloom^L program's strata, rules and points of order",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target", metavar="TARGET", help="package.module:Class or path/to/file.py:Class (a Program)"
    )
    p.set_defaults(func=run)


def points_of_order(ir: Any) -> list[str]:
    """Lines describing the non-monotone rules downstream of channels (empty if none)."""
    out = []
    for rule, chans in ir.nonmonotone_after_channels():
        out.append(
            f"  [{rule.where}] {rule}    (after channel{'s' if len(chans) > 1 else ''} "
            f"{', '.join(chans)})"
        )
    return out


def run(ns: argparse.Namespace) -> int:
    """Run the subcommand; return the exit status."""
    from blooml.bloom.program import Program
    from blooml.errors import StratificationError

    try:
        obj = load_target(ns.target)
    except StratificationError as exc:
        print(f"blooml {NAME}: {exc}", file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"blooml {NAME}: error: {exc}", file=sys.stderr)
        # the class statement itself raised: the program cannot be stratified
        return 1 if isinstance(exc.cause, StratificationError) else 2
    if not (isinstance(obj, type) and issubclass(obj, Program) and obj is not Program):
        print(f"blooml {NAME}: error: {ns.target} is not a Program subclass", file=sys.stderr)
        return 2
    try:
        ir = obj.ir()
    except StratificationError as exc:
        print(f"blooml {NAME}: {exc}", file=sys.stderr)
        return 1
    print(ir.format())
    print()
    points = points_of_order(ir)
    if points:
        print(
            "points of order (non-monotone after a channel, or a <-/<+- a channel feeds: "
            "coordination may be needed):"
        )
        print("\n".join(points))
    else:
        print(
            "points of order: none (every rule downstream of a channel is monotone and "
            "deletes or replaces nothing)"
        )
    return 0
