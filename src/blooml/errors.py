"""Every exception blooml raises on purpose.

One base class, :class:`BloomlError`, so callers can catch "anything blooml complained about";
each subclass also inherits from the builtin exception whose meaning it shares (a bad lattice
value is a :class:`ValueError`, merging two lattice types is a :class:`TypeError`), so code
written against the builtins keeps working. Each exception carries the offending value and
where it came from as attributes, not only in its message.

Two packages define their own subclasses of :class:`BloomlError` next to the code that raises
them: ``blooml.testing`` (``LawViolation``, an ``AssertionError``; ``LawCheckError``, a
``TypeError``) and ``blooml.dataflow`` (``DataflowError`` and its subclasses).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BloomlError",
    "ColumnTypeError",
    "KeyConstraintError",
    "LatticeTypeError",
    "LatticeValueError",
    "NotSupportedOnSpark",
    "ProgramError",
    "StratificationError",
]

# Deprecated names (one release): each is the very same class as its replacement, so
# ``except BloomError`` keeps catching; reading the name warns (see ``__getattr__`` below).
_DEPRECATED = {
    "BloomError": "ProgramError",
    "UnstratifiableError": "StratificationError",
}


class BloomlError(Exception):
    """Base class of every error blooml raises deliberately."""


class LatticeValueError(BloomlError, ValueError):
    """A lattice constructor was given a value outside its domain.

    Attributes:
        lattice: the lattice class name (its ``wrapper_name`` when it has one).
        value: the offending value.
    """

    def __init__(self, lattice: str, value: Any, reason: str) -> None:
        self.lattice = lattice
        self.value = value
        self.reason = reason
        super().__init__(f"{lattice}({value!r}): {reason}")


class LatticeTypeError(BloomlError, TypeError):
    """Two values of different lattice classes were merged or compared.

    Attributes:
        left: the class of the left operand.
        right: the class of the right operand.
        operation: what was attempted (``"merge"``, ``"<="``, ...).
    """

    def __init__(self, left: type, right: type, operation: str = "merge") -> None:
        self.left = left
        self.right = right
        self.operation = operation
        super().__init__(
            f"cannot {operation} a {_cls_name(left)} with a {_cls_name(right)}: "
            "both sides of a lattice merge must be values of the same lattice class"
        )


class ProgramError(BloomlError):
    """A Bloom^L program is malformed or misused (reported when it is defined or run).

    Formerly ``BloomError`` (still importable, deprecated: it is this same class).
    """


class KeyConstraintError(ProgramError):
    """Two tuples with the same key disagree on a non-lattice column.

    Attributes:
        collection: the collection's name.
        key: the shared key.
        old: the tuple already stored (or derived first).
        new: the conflicting tuple.
    """

    def __init__(self, collection: str, key: Any, old: Any, new: Any) -> None:
        self.collection = collection
        self.key = key
        self.old = old
        self.new = new
        super().__init__(
            f"key conflict in {collection!r} for key {key!r}: {old!r} vs {new!r} "
            "(tuples with the same key must agree on every non-lattice column)"
        )


class StratificationError(ProgramError, ValueError):
    """A program cannot be stratified: a cycle passes through a non-monotone dependency.

    In a Bloom^L program the cycle runs within one tick through a non-monotone edge (``notin``,
    ``group``, a non-monotone lattice method); in a :mod:`blooml.dataflow` Datalog program a
    relation depends on its own negation through recursion. Both raise this class (the Datalog
    one is also a :class:`blooml.dataflow.DatalogError`). Formerly ``UnstratifiableError``
    (still importable, deprecated: it is this same class).

    Attributes:
        cycle: the collection (or relation) names on the cycle, in order.
        rules: human-readable descriptions (with source lines) of the rules on it (empty for
            Datalog programs).
        negated: for Datalog programs, ``(negated relation, dependent relation)``; else ``None``.
    """

    def __init__(
        self,
        cycle: list[str],
        rules: list[str] | tuple[str, ...] = (),
        detail: str = "",
        *,
        negated: tuple[str, str] | None = None,
        message: str | None = None,
    ) -> None:
        self.cycle = list(cycle)
        self.rules = list(rules)
        self.negated = negated
        if message is None:
            lines = "; ".join(self.rules)
            message = (
                f"program cannot be stratified: cycle {' -> '.join(self.cycle)} passes through "
                f"a non-monotone dependency within one tick ({lines}). Break it with <+ (next "
                "tick), or make the operation monotone."
            )
            if detail:
                message += " " + detail
        super().__init__(message)


class NotSupportedOnSpark(BloomlError, NotImplementedError):
    """A Bloom^L construct has no Spark translation.

    Attributes:
        rule: description of the rule (with its source line) that cannot run on Spark.
    """

    def __init__(self, rule: str, reason: str) -> None:
        self.rule = rule
        self.reason = reason
        super().__init__(f"cannot run on Spark: {rule}: {reason}")


class ColumnTypeError(BloomlError, TypeError):
    """A Spark column's type cannot hold the lattice cells (or items) it was given as.

    Attributes:
        column: the user's column name.
        spark_type: the column's Spark type (its ``simpleString()``).
        spec: the column spec (``lset``, ``MapOf(lmax)``, ...).
    """

    def __init__(self, column: str, spark_type: str, spec: str, reason: str) -> None:
        self.column = column
        self.spark_type = spark_type
        self.spec = spec
        super().__init__(f"column {column!r} of type {spark_type} cannot hold {spec}: {reason}")


def _cls_name(cls: type) -> str:
    name = getattr(cls, "wrapper_name", None)
    return f"{name} ({cls.__qualname__})" if name and name != cls.__qualname__ else cls.__qualname__


def __getattr__(name: str) -> Any:
    """Resolve a deprecated error name to its replacement, with a ``DeprecationWarning``."""
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"blooml.errors.{name} is deprecated; use {new} (the same class)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
