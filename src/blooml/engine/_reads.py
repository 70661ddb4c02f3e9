"""Run-time verification of what rule functions read.

The IR says which lattice variables each rule's functions read (``Rule.reads``) and which of
those reads are non-monotone (``Rule.nonmonotone_reads``); both come from a scan of the
functions' bytecode and the user's ``reads(...)`` declarations. The engine does not trust
them: while a rule fires, every ``self.<lattice variable>`` a function reads goes through
:func:`check_read`, which

* raises :class:`~blooml.errors.ProgramError` for a variable the rule does not declare (the
  rule would not be re-evaluated when it grows: a silently stale result);
* hands out a variable declared as read *monotonically* behind a :class:`MonotoneRead` guard
  that lets only its ``@morph``/``@monotone`` methods through, so a non-monotone use the IR
  did not record (which stratification did not account for) is an error, not a wrong answer.

A tick that raises is rolled back, as for any error.
"""

from __future__ import annotations

from typing import Any, NoReturn

from blooml.errors import ProgramError

__all__ = ["MonotoneRead", "undeclared_read"]


def undeclared_read(where: str, name: str, how: str = "") -> NoReturn:
    """Raise the error for a read of ``name`` that rule ``where`` does not declare."""
    what = "self.tick_count" if name == "tick_count" else f"the lattice variable {name!r}"
    raise ProgramError(
        f"{where}: a function of this rule read {what}{how}, but the rule does not declare "
        f"that read (the bytecode scan did not see it, e.g. a read through getattr, an alias of "
        f"self or a helper outside the program class), so the rule would not be re-evaluated "
        f"when it changes. Declare it on the function or on the helper method: "
        f"reads({name!r})(lambda ...) or @reads({name!r}) (from blooml import reads); "
        f"add monotone=True only if it calls nothing but @morph/@monotone methods of it"
    )


class MonotoneRead:
    """A lattice variable's value as a rule function sees it when the IR records the read as
    monotone: ``@morph``/``@monotone`` methods (and ``|``, ``+``, ``-`` when marked) work on
    the value and return plain values; anything else (``reveal()``, comparisons, hashing,
    iteration, an unmarked method) raises :class:`~blooml.errors.ProgramError`."""

    __slots__ = ("_allowed", "_name", "_value", "_where")

    def __init__(self, value: Any, name: str, where: str, allowed: frozenset[str]) -> None:
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_where", where)
        object.__setattr__(self, "_allowed", allowed)

    def _refuse(self, what: str) -> NoReturn:
        name = self._name
        raise ProgramError(
            f"{self._where}: a function of this rule uses the lattice variable {name!r} "
            f"non-monotonically ({what}), but the rule records its read of {name!r} as "
            f"monotone (only @morph/@monotone methods), so {name!r} may still grow after the "
            f"rule ran and the result would be wrong. Declare the use: reads({name!r}) on the "
            f"function or helper method (without monotone=True), which puts {name!r} in an "
            "earlier stratum"
        )

    def __getattr__(self, attr: str) -> Any:
        if attr in self._allowed:
            return getattr(self._value, attr)
        return self._refuse(f".{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        self._refuse(f"setting .{attr}")

    def _dunder(self, op: str, other: Any) -> Any:
        if op not in self._allowed:
            self._refuse(op)
        if isinstance(other, MonotoneRead):
            other = other._value
        return getattr(self._value, op)(other)

    def __or__(self, other: Any) -> Any:
        if "merge" not in self._allowed:  # pragma: no cover - merge is always a morphism
            self._refuse("|")
        return self._value.merge(other._value if isinstance(other, MonotoneRead) else other)

    def __ror__(self, other: Any) -> Any:
        return self.__or__(other)

    def __add__(self, other: Any) -> Any:
        return self._dunder("__add__", other)

    def __radd__(self, other: Any) -> Any:
        return self._dunder("__radd__", other)

    def __sub__(self, other: Any) -> Any:
        return self._dunder("__sub__", other)

    def __eq__(self, other: object) -> bool:
        self._refuse("==")

    def __ne__(self, other: object) -> bool:
        self._refuse("!=")

    def __lt__(self, other: Any) -> bool:
        self._refuse("<")

    def __le__(self, other: Any) -> bool:
        self._refuse("<=")

    def __gt__(self, other: Any) -> bool:
        self._refuse(">")

    def __ge__(self, other: Any) -> bool:
        self._refuse(">=")

    def __hash__(self) -> int:
        self._refuse("hash(), e.g. storing the value in a row")

    def __bool__(self) -> bool:
        self._refuse("bool()")

    def __iter__(self) -> Any:
        self._refuse("iteration")

    def __len__(self) -> int:
        self._refuse("len()")

    def __contains__(self, item: Any) -> bool:
        self._refuse("in")

    def __repr__(self) -> str:
        return f"<monotone read of {self._name}>"


def allowed_methods(cls: type) -> frozenset[str]:
    """The methods of lattice class ``cls`` a monotone read may call (and ``merge``)."""
    marks: dict[str, str] = getattr(cls, "_marks", {})
    return frozenset(n for n, k in marks.items() if k in ("morph", "monotone")) | {"merge"}
