"""``blooml check-laws TARGET``: run the law checker on a lattice class from the command line.

``TARGET`` is ``package.module:Class`` or ``path/to/file.py:Class``, where ``Class`` is a
lattice class (its strategy registered with ``blooml.testing.register`` when the module is
imported, its method arguments derivable from type hints) or a ``LatticeLaws`` subclass (whose
``lattice``, ``elements`` and ``args`` are used). Prints one line per law; exit status 0 when
every law holds, 1 on a violation, 2 when the target or an option is unusable.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from blooml.cli._target import UsageError, describe, load_target

__all__ = ["register", "run"]

NAME = "check-laws"
_DESCRIPTION = """\
Check with hypothesis that a lattice's merge is associative, commutative and idempotent, that
its bottom is an identity, that <= agrees with merge, that merge never mutates its inputs, that
every @morph distributes over merge and every @monotone preserves the order.

The checker tests the laws on generated examples; it cannot prove them. After the random
examples, a deterministic edge pass tries bottom, equal values and incomparable pairs
(--no-edge skips it).

TARGET is package.module:Class or path/to/file.py:Class. Class is a lattice class (register its
strategy with blooml.testing.register when its module is imported) or a LatticeLaws subclass
(its lattice, elements and args are used). Method arguments come from register(..., args=...)
or the LatticeLaws args; otherwise from the parameters' type hints and from the values under
test (the parts of that type inside the generated lattice values). A WARN line says when a
method's arguments came only from a bare type hint: pass them with args= then.

exit status: 0 every law holds, 1 a law is violated, 2 the target or an option is unusable"""


def register(subparsers: Any) -> None:
    """Add the ``check-laws`` subcommand to ``subparsers``."""
    parser = subparsers.add_parser(
        NAME,
        help="check that a lattice class obeys the lattice laws and its @morph/@monotone marks",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "target",
        metavar="TARGET",
        help="package.module:Class or path/to/file.py:Class (a Lattice or LatticeLaws subclass)",
    )
    parser.add_argument(
        "--max-examples",
        type=_positive_int,
        default=None,
        metavar="N",
        help="examples per law (default: the LatticeLaws class's, else 200)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="replay the examples of a reported violation"
    )
    parser.add_argument(
        "--no-edge",
        dest="edge",
        action="store_false",
        help="skip the deterministic edge pass (bottom, equal and incomparable values)",
    )
    parser.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def run(ns: argparse.Namespace) -> int:
    """Run the subcommand; return the exit status."""
    try:
        from blooml.lattices import Lattice
        from blooml.testing import LatticeLaws, LawCheckError, LawCheckWarning
        from blooml.testing._laws import Session
    except ImportError as exc:  # hypothesis missing: the test extra is not installed
        return _fail(str(exc))
    try:
        obj = load_target(ns.target)
    except UsageError as exc:
        return _fail(str(exc))
    elements = args = None
    max_examples = ns.max_examples
    seed = ns.seed
    edge = getattr(ns, "edge", True)
    if isinstance(obj, type) and issubclass(obj, LatticeLaws):
        if obj.lattice is None:
            return _fail(f"{ns.target} is a LatticeLaws class without a lattice attribute")
        cls, elements, args = obj.lattice, obj.elements, obj.args
        max_examples = max_examples or obj.max_examples
        seed = obj.seed if seed is None else seed
        edge = edge and obj.edge
    elif isinstance(obj, type) and issubclass(obj, Lattice) and obj is not Lattice:
        cls = obj
    else:
        return _fail(
            f"{ns.target} is {describe(obj)}, not a lattice class (a Lattice subclass) or a "
            "LatticeLaws subclass"
        )
    try:
        session = Session(cls, elements, args, max_examples or 200, seed, edge=edge)
    except LawCheckError as exc:
        return _fail(str(exc))
    name = cls.__qualname__
    failures = 0
    try:
        for check in session.checks:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", LawCheckWarning)
                violation = session.run(check)
            if violation is None:
                print(f"PASS  {name}: {check.label}", flush=True)
            else:
                failures += 1
                print(f"FAIL  {name}: {check.label}", flush=True)
                print("      " + str(violation).replace("\n", "\n      "), flush=True)
            for w in caught:
                if issubclass(w.category, LawCheckWarning):
                    print(f"WARN  {w.message}", flush=True)
                else:  # not ours: let it through
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    except LawCheckError as exc:
        return _fail(str(exc))
    for method, why in session.skipped:
        print(f"SKIP  {name}: {method} ({why})")
    total = len(session.checks)
    if failures:
        print(f"{name}: {failures} of {total} law checks FAILED (seed {session.seed})")
        return 1
    print(
        f"{name}: all {total} law checks passed "
        f"({session.max_examples} examples each, seed {session.seed})"
    )
    return 0


def _fail(message: str) -> int:
    print(f"blooml {NAME}: error: {message}", file=sys.stderr)
    return 2
