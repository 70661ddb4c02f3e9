"""The two exceptions of the law checker: a law that fails, and a check that cannot run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blooml.errors import BloomlError

__all__ = ["LawCheckError", "LawCheckWarning", "LawViolation"]

_REPR_LIMIT = 400


def short_repr(value: Any) -> str:
    """``repr`` cut to a readable length (a counterexample line must fit on a screen)."""
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not hide the violation itself
        text = f"<{type(value).__qualname__} with failing repr: {exc!r}>"
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 20] + f" ... ({len(text)} chars)"
    return text


class LawViolation(BloomlError, AssertionError):
    """A lattice broke one of its laws; carries the smallest counterexample hypothesis found.

    Attributes:
        lattice: the lattice class that was checked.
        law: which law failed: ``"associative"``, ``"commutative"``, ``"idempotent"``,
            ``"bottom_identity"``, ``"order_agrees"``, ``"hash_agrees"``, ``"no_mutation"``,
            ``"morphism"`` or ``"monotone"``.
        method: the method whose claim failed (``"size"``), or ``None`` for a law of ``merge``.
        example: the shrunk inputs, by name (``{"a": ..., "b": ..., "args": ...}``).
        observed: what the law compared, by description (``{"f(a ⊔ b)": ..., ...}``).
        detail: one sentence saying what went wrong.
        seed: the seed the check ran with; re-running with it replays the failure.
        max_examples: the example budget the check ran with (part of the replay).
    """

    def __init__(
        self,
        lattice: type,
        law: str,
        method: str | None,
        example: Mapping[str, Any],
        observed: Mapping[str, Any],
        detail: str,
        seed: int,
        max_examples: int,
    ) -> None:
        self.lattice = lattice
        self.law = law
        self.method = method
        self.example = dict(example)
        self.observed = dict(observed)
        self.detail = detail
        self.seed = seed
        self.max_examples = max_examples
        super().__init__(self._render())

    def _render(self) -> str:
        name = self.lattice.__qualname__
        where = f"{name}.{self.method}" if self.method else name
        lines = [f"{where} violates the {self.law} law: {self.detail}", "Smallest counterexample:"]
        width = max((len(k) for k in (*self.example, *self.observed)), default=0)
        for key, value in self.example.items():
            lines.append(f"  {key.ljust(width)} = {short_repr(value)}")
        if self.observed:
            lines.append("Observed:")
            for key, value in self.observed.items():
                lines.append(f"  {key.ljust(width)} = {short_repr(value)}")
        lines.append(
            f"Replay with seed={self.seed}, max_examples={self.max_examples}: "
            f"check_laws({name}, ..., seed={self.seed}, max_examples={self.max_examples}), "
            f"seed = {self.seed} on a LatticeLaws class, or blooml check-laws ... "
            f"--seed {self.seed} --max-examples {self.max_examples}."
        )
        return "\n".join(lines)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (
                self.lattice,
                self.law,
                self.method,
                self.example,
                self.observed,
                self.detail,
                self.seed,
                self.max_examples,
            ),
        )


class LawCheckError(BloomlError, TypeError):
    """The law checker cannot run as asked: no strategy for a class, arguments it cannot derive,
    a malformed ``args`` entry, or a strategy that draws values of the wrong class.

    This is a mistake in how the check is set up, not a broken law (that is
    :class:`LawViolation`); the message names the class, the method and the fix.

    Attributes:
        lattice: the lattice class concerned.
        problems: one line per problem found (all of them, not only the first).
    """

    def __init__(self, lattice: type, problems: list[str] | str, hint: str = "") -> None:
        self.lattice = lattice
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        name = getattr(lattice, "__qualname__", repr(lattice))
        if len(self.problems) == 1:
            msg = f"cannot check the laws of {name}: {self.problems[0].rstrip('.')}"
        else:
            msg = f"cannot check the laws of {name}:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        if hint:
            msg += ("\n" if len(self.problems) > 1 else ". ") + hint
        super().__init__(msg)


class LawCheckWarning(UserWarning):
    """The law checker ran, but a check was weaker than it looks: a method's arguments came
    only from a bare type hint (no generated value held a value of that type), so they may
    rarely land where the method's claim could fail. Pass ``args=`` for that method."""
