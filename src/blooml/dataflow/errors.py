"""Errors raised by :mod:`blooml.dataflow` (PomoFlow).

Every class derives from :class:`DataflowError` (except :class:`~blooml.errors.StratificationError`,
re-exported here: the one name for "cannot be stratified" across blooml; the Datalog compiler
raises it as a :class:`DatalogError` too), itself a :class:`blooml.errors.BloomlError`,
and also from the builtin exception whose meaning it shares (a non-integer weight is a
:class:`TypeError`, a bad timestamp a :class:`ValueError`), so code written against the
builtins keeps working. Each exception carries the offending value and where it came from as
attributes, not only in its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blooml.errors import BloomlError, StratificationError

__all__ = [
    "CircuitError",
    "CircuitInputError",
    "CycleError",
    "DataflowError",
    "DatalogError",
    "FixedPointError",
    "ImpureAggregateError",
    "StratificationError",
    "TimestampError",
    "TraceKindError",
    "UnhashableElementError",
    "WeightError",
]


class DataflowError(BloomlError):
    """Base class of every error :mod:`blooml.dataflow` raises deliberately."""


class WeightError(DataflowError, TypeError):
    """A weight is not an integer (weights count derivations, so they must be ``int``).

    Attributes:
        weight: the offending weight.
        element: the element it was attached to.
        where: which constructor or operation received it.
    """

    def __init__(self, weight: Any, element: Any, where: str) -> None:
        self.weight = weight
        self.element = element
        self.where = where
        super().__init__(
            f"{where}: weight {weight!r} of element {element!r} is a "
            f"{type(weight).__name__}, not an int (weights count derivations: use 1, -1, ...)"
        )


class UnhashableElementError(DataflowError, TypeError):
    """An element (or key, or value) cannot be hashed, so it cannot live in a Z-set.

    Attributes:
        element: the offending element.
        where: which constructor or operator produced it.
    """

    def __init__(self, element: Any, where: str) -> None:
        self.element = element
        self.where = where
        super().__init__(
            f"{where}: element {element!r} of type {type(element).__name__} is unhashable; "
            "Z-set elements must be hashable (use a tuple instead of a list, a frozenset "
            "instead of a set)"
        )


class TimestampError(DataflowError, ValueError):
    """A timestamp is not an epoch (unsigned int) or a tuple of unsigned ints.

    Attributes:
        time: the offending timestamp.
        where: which call received it.
    """

    def __init__(self, time: Any, where: str, reason: str = "") -> None:
        self.time = time
        self.where = where
        why = reason or (
            "timestamps are epochs (unsigned ints) at the root and tuples of unsigned ints "
            "(epoch, iteration, ...) in nested circuits"
        )
        super().__init__(f"{where}: bad timestamp {time!r}: {why}")


class TraceKindError(DataflowError, TypeError):
    """A Z-set was appended to an indexed trace, or an indexed Z-set to a keyed one.

    Attributes:
        expected: ``"ZSet"`` or ``"IndexedZSet"``.
        got: the offending value.
    """

    def __init__(self, expected: str, got: Any, where: str) -> None:
        self.expected = expected
        self.got = got
        self.where = where
        super().__init__(
            f"{where}: this trace holds {expected} batches but got a {type(got).__name__}; "
            "keep one trace per kind of stream"
        )


class ImpureAggregateError(DataflowError, ValueError):
    """A user aggregate returned different results for the same group.

    Attributes:
        aggregate: the aggregate's name.
        group: the group's (value, weight) pairs it was applied to.
        results: the two different results.
    """

    def __init__(self, aggregate: str, group: Any, results: tuple[Any, Any]) -> None:
        self.aggregate = aggregate
        self.group = group
        self.results = results
        super().__init__(
            f"aggregate {aggregate!r} is not pure: applied twice to {group!r} it returned "
            f"{results[0]!r} and then {results[1]!r}; aggregates must be deterministic "
            "functions of their input without side effects"
        )


class CircuitError(DataflowError, ValueError):
    """A circuit is wired wrongly (unknown node, wrong arity, node from another circuit, ...).

    Attributes:
        circuit: the name of the circuit being built or run.
        node: the offending node (or name), when there is one.
    """

    def __init__(self, circuit: str, message: str, node: Any = None) -> None:
        self.circuit = circuit
        self.node = node
        super().__init__(f"circuit {circuit!r}: {message}")


class CycleError(CircuitError):
    """The circuit has a cycle that does not pass through a feedback (delay) node.

    Attributes:
        cycle: labels of the nodes on the cycle, in order.
    """

    def __init__(self, circuit: str, cycle: Sequence[str]) -> None:
        self.cycle = list(cycle)
        super().__init__(
            circuit,
            f"cycle without a delay: {' -> '.join(self.cycle)}; break it with a feedback "
            "node (circuit.feedback(...) and circuit.connect(...))",
            node=self.cycle[0] if self.cycle else None,
        )


class CircuitInputError(CircuitError):
    """``Circuit.step`` got an input for an unknown source, or a value of the wrong type.

    Attributes:
        name: the offending input name.
        value: the offending value.
        expected: the valid source names (or the expected type).
    """

    def __init__(self, circuit: str, name: str, value: Any, expected: Any, reason: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(circuit, f"input {name!r}: {reason}", node=name)


class FixedPointError(DataflowError, RuntimeError):
    """A child circuit did not reach its fixed point within its iteration limit.

    Attributes:
        circuit: the child circuit's name.
        iterations: how many iterations were run.
        time: the parent timestamp at which it happened.
    """

    def __init__(self, circuit: str, iterations: int, time: Any) -> None:
        self.circuit = circuit
        self.iterations = iterations
        self.time = time
        super().__init__(
            f"child circuit {circuit!r} did not reach a fixed point after {iterations} "
            f"iterations at parent time {time!r}; is the recursion non-terminating (e.g. "
            "a counter that keeps growing)? raise max_iterations if it converges slowly"
        )


class DatalogError(DataflowError, ValueError):
    """A Datalog program is malformed (arity mismatch, unsafe variable, unknown relation).

    Attributes:
        rule: the rule's text (``None`` when the error is not about one rule).
    """

    def __init__(self, message: str, rule: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"{message} (in rule {rule})" if rule else message)


class _DatalogStratificationError(StratificationError, DatalogError):
    """:class:`~blooml.errors.StratificationError` raised by a Datalog program.

    Private: catch :class:`~blooml.errors.StratificationError` (the one public name, also
    exported here) or :class:`DatalogError`; this class is both.
    """

    def __init__(self, cycle: Sequence[str], negated: tuple[str, str]) -> None:
        cyc = list(cycle)
        super().__init__(
            cyc,
            negated=negated,
            message=(
                f"program cannot be stratified: {negated[1]!r} depends on 'not {negated[0]}' "
                f"inside the recursive cycle {' -> '.join(cyc)}; negation must only "
                "refer to relations computed in an earlier stratum"
            ),
        )
