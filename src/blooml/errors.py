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
    "BloomError",
    "BloomlError",
    "ColumnTypeError",
    "KeyConstraintError",
    "LatticeTypeError",
    "LatticeValueError",
    "NotSupportedOnSpark",
    "UnstratifiableError",
]


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


class BloomError(BloomlError):
    """A Bloom^L program is malformed (reported when the program is defined or run)."""


class KeyConstraintError(BloomError):
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


class UnstratifiableError(BloomError):
    """A cycle runs through a non-monotone dependency within one timestep.

    Attributes:
        cycle: the collection names on the cycle, in order.
        rules: human-readable descriptions (with source lines) of the rules on it.
    """

    def __init__(self, cycle: list[str], rules: list[str], detail: str = "") -> None:
        self.cycle = list(cycle)
        self.rules = list(rules)
        lines = "; ".join(rules)
        msg = (
            f"program cannot be stratified: cycle {' -> '.join(cycle)} passes through a "
            f"non-monotone dependency within one tick ({lines}). Break it with <+ (next tick), "
            "or make the operation monotone."
        )
        if detail:
            msg += " " + detail
        super().__init__(msg)


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
