"""Typed user code: a Bloom^L program that ``mypy --strict`` and pyright (strict) accept as
written, with no casts.

A declaration's type is what the instance attribute gives back: ``voters = lset()`` makes
``p.voters.value`` an ``lset`` and ``p.voters.insert`` take one; ``ballot = scratch(...)``
makes ``p.ballot.insert(rows)`` and ``for r in p.latest`` type-check (rows are ``Any``: their
columns are known only at run time). Merges keep the class (``lmax | lmax`` is an ``lmax``),
``lmap.at(key, lset)`` is an ``lset``, and merging two lattice classes is a type error (see
``wrong_merge``, whose ignore comments both checkers would report as unused if they did not
flag the line). ``make lint`` runs both checkers on examples/; pyright reads
pyrightconfig.json, where ``reportUnusedExpression`` is off because every rule is an
expression statement (docs/bloom.md, "Traps").

Run it with ``python examples/typed_program.py``; ``main()`` returns what it printed.
"""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, lbool, lmap, lmax, lset, scratch, table

QUORUM = 3


class Tally(Program):
    """Ballots in; who voted, how many, whether a quorum is reached, and the voters per choice."""

    ballot = scratch(["voter", "choice"])
    latest = table(["voter"], ["choice"])
    voters = lset()
    count = lmax()
    quorum = lbool()
    by_choice = lmap()

    @bloom
    def rules(self) -> None:
        self.latest <= self.ballot
        self.voters <= self.ballot.map(lambda b: b.voter)
        self.count <= self.voters.size()
        self.quorum <= self.count.gt_eq(QUORUM)
        self.by_choice <= self.ballot.map(lambda b: (b.choice, lset([b.voter])))


def main() -> dict[str, Any]:
    """Run two ticks and print what the typed accessors return."""
    p = Tally()
    p.ballot.insert([("ann", "x"), ("bob", "y"), ("cid", "x")])
    p.tick()
    voters: lset = p.voters.value
    count: lmax = p.count.value
    quorum: lbool = p.quorum.value
    for_x: lset = p.by_choice.value.at("x", lset)  # at(key, Cls) is a Cls
    bigger: lmax = count | lmax(5)  # a merge keeps the class
    rows: list[tuple[str, str]] = sorted((r.voter, r.choice) for r in p.latest)
    print(f"voters {sorted(voters.reveal())}, count {count.reveal()}, quorum {bool(quorum)}")
    print(f"voters for x: {sorted(for_x.reveal())}; count merged with lmax(5): {bigger!r}")
    print(f"latest ballots: {rows}")
    p.count.insert(lmax(10))  # insert takes a value of the declared class
    p.tick()
    print(f"after inserting lmax(10): count {p.count.value.reveal()}")
    return {
        "voters": sorted(voters.reveal()),
        "count": count.reveal(),
        "quorum": bool(quorum),
        "for_x": sorted(for_x.reveal()),
        "rows": rows,
        "count_after": p.count.value.reveal(),
    }


def wrong_merge() -> None:
    """Mistakes the checkers flag (never called): merging two lattice classes, and inserting a
    value of the wrong class into a lattice variable."""
    lmax(1) | lset([1])  # type: ignore[operator]  # pyright: ignore[reportOperatorIssue]
    Tally().count.insert(lset([1]))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


if __name__ == "__main__":
    main()
