"""A user-defined lattice, checked with blooml's law checker.

``Span`` is the smallest interval covering every timestamp seen so far: replicas that each saw
some events agree on the span of all of them by merging, in any order. Its methods are marked
``@morph`` or ``@monotone``, and ``check_laws`` verifies both the lattice laws and those marks.
The second half shows the checker catching a wrong mark.

Run it with ``python examples/custom_lattice.py``; ``main()`` returns what it printed, so the
test suite checks it. The same check from the command line::

    blooml check-laws examples/custom_lattice.py:SpanLaws
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from blooml import Lattice, LatticeValueError, lbool, lmax, lmin, monotone, morph
from blooml.testing import LatticeLaws, LawViolation, check_laws, register


class Span(Lattice):
    """The interval [first, last] covering every timestamp seen; ⊥ is the empty span."""

    wrapper_name = "lspan"

    def __init__(self, first: int | None = None, last: int | None = None) -> None:
        if first is None and last is None:
            super().__init__(None)
            return
        if first is None or last is None or first > last:
            raise LatticeValueError("lspan", (first, last), "expected first <= last, or no bounds")
        super().__init__((first, last))

    @classmethod
    def at(cls, t: int) -> Span:
        """The span of one timestamp."""
        return cls(t, t)

    def merge(self, other: Span) -> Span:
        """The smallest span covering both (the hull)."""
        a, b = self.reveal(), other.reveal()
        if b is None:
            return self
        if a is None:
            return other
        first, last = min(a[0], b[0]), max(a[1], b[1])
        if (first, last) == a:
            return self
        if (first, last) == b:
            return other
        return type(self)(first, last)

    @morph
    def first(self) -> lmin:
        """The earliest timestamp: the first of a merge is the earlier of the two firsts."""
        v = self.reveal()
        return lmin() if v is None else lmin(v[0])

    @morph
    def last(self) -> lmax:
        """The latest timestamp."""
        v = self.reveal()
        return lmax() if v is None else lmax(v[1])

    @monotone
    def width(self) -> lmax:
        """How long the span is; it only grows, but is not a morphism (gaps get covered)."""
        v = self.reveal()
        return lmax() if v is None else lmax(v[1] - v[0])

    @monotone
    def covers(self, t: int) -> lbool:
        """Whether ``t`` lies within the span; once true it stays true."""
        v = self.reveal()
        return lbool(v is not None and v[0] <= t <= v[1])

    def __repr__(self) -> str:
        v = self.reveal()
        return "Span()" if v is None else f"Span({v[0]}, {v[1]})"


def spans(cls: type[Span] = Span) -> st.SearchStrategy[Span]:
    """Short spans over a small range of timestamps, ⊥ included.

    Small and short on purpose: drawn spans then often overlap, touch or leave gaps, which is
    where the laws and the marks are put to the test.
    """
    bounds = st.tuples(st.integers(0, 20), st.integers(0, 4))
    return st.just(cls()) | bounds.map(lambda b: cls(b[0], b[0] + b[1]))


register(Span, spans())

#: Arguments for the methods that take one. ``covers(t: int)`` would get integers from its type
#: hint, but integers near the spans find a wrong claim far sooner than arbitrary ones.
ARGS = {"covers": st.integers(0, 25)}


class SpanLaws(LatticeLaws):
    """The same checks as pytest tests (one per law and per method), and a command-line target:
    ``blooml check-laws examples/custom_lattice.py:SpanLaws``."""

    lattice = Span
    args = ARGS


class SpanWrongMark(Span):
    """The same lattice with a mistake: ``covers`` claimed to be a morphism.

    The span of [0, 1] and [5, 6] is [0, 6], which covers 3 although neither part does, so
    ``covers`` does not distribute over merge: it is only monotone.
    """

    wrapper_name = "lspan_wrong_mark"

    @morph
    def covers(self, t: int) -> lbool:
        """Whether ``t`` lies within the span (wrongly marked @morph)."""
        return super().covers(t)


register(SpanWrongMark, spans(SpanWrongMark))


def main() -> dict[str, Any]:
    """Check both classes; print and return the report and the violation."""
    print("== check_laws(Span): the laws of merge and the claims of every marked method")
    report = check_laws(Span, args=ARGS, max_examples=100)
    print(report)

    print("\n== a wrong mark is caught: covers marked @morph")
    try:
        check_laws(SpanWrongMark, args=ARGS)
    except LawViolation as violation:
        print(violation)
        caught: LawViolation | None = violation
    else:  # pragma: no cover - the checker would have missed the mistake
        caught = None
        print("not caught?!")
    return {"report": report, "violation": caught}


if __name__ == "__main__":
    main()
