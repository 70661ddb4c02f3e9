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
    "ColumnValueError",
    "ConfluenceViolation",
    "DataDirError",
    "DurableStateError",
    "GraphvizNotFound",
    "IllTypedValueError",
    "KeyConstraintError",
    "LatticeColumnValueError",
    "LatticeTypeError",
    "LatticeValueError",
    "NotSupportedOnSpark",
    "ProgramError",
    "RowsRefusedError",
    "RuleQuarantinedError",
    "ScheduleFailure",
    "SchemaMismatchError",
    "SimulationError",
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
        edges: the dependency edges (``blooml.ir.Edge``) on the cycle, the non-monotone one
            first (empty when not known; set by ``blooml.ir.graph.analyze``).
        ir: the program's dependency graph without strata (a ``blooml.ir.ProgramIR`` whose
            ``strata`` is empty), so that ``blooml plot`` can draw the cycle; ``None`` when
            not known.
    """

    edges: tuple[Any, ...] = ()
    ir: Any = None

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

    spark_type: str | None  # None only for the local engine's LatticeColumnValueError

    def __init__(self, column: str, spark_type: str, spec: str, reason: str) -> None:
        self.column = column
        self.spark_type = spark_type
        self.spec = spec
        super().__init__(f"column {column!r} of type {spark_type} cannot hold {spec}: {reason}")


class ColumnValueError(ColumnTypeError):
    """A value given for (or derived into) a collection's column does not fit what the column
    holds. On ``SparkEngine``: a value that does not fit the one Spark type the column holds (a
    string into a ``double`` column, a boolean into a ``bigint`` one), raised on the driver
    before any Spark job. On the local engine (dynamically typed by default): a lattice
    column's merge of a stored or derived value with one of an incompatible type
    (``lmin("x")`` where ``lmin(3.0)`` is held), raised as its subclass
    :class:`LatticeColumnValueError`; and, with ``Program(column_types="spark")``, any value
    whose type family the column cannot hold (``blooml.ir.coltypes``), before the tick changes
    anything. Catch this class to handle both engines alike.

    Attributes:
        collection: the collection's name.
        column: the column's name.
        value: the offending value.
        spark_type: the column's Spark type (its ``simpleString()``); ``None`` on the local
            engine.
        holds: what the column holds: its Spark type on ``SparkEngine``; on the local engine
            the held value's lattice class and the type of its raw value (``"lmin of float"``).
        spec: the Python type of the value.
    """

    def __init__(
        self,
        collection: str,
        column: str,
        value: Any,
        spark_type: str | None,
        reason: str = "",
        *,
        holds: str | None = None,
    ) -> None:
        self.collection = collection
        self.column = column
        self.value = value
        self.spark_type = spark_type
        self.holds = holds if holds is not None else (spark_type or "")
        self.spec = type(value).__name__
        where = "on Spark" if spark_type is not None else "on the local engine"
        BloomlError.__init__(
            self,
            f"{collection!r} column {column!r} holds {self.holds} {where}; it cannot hold "
            f"{value!r} ({self.spec})" + (f": {reason}" if reason else ""),
        )


class LatticeColumnValueError(ColumnValueError, LatticeValueError):
    """The local engine's :class:`ColumnValueError`: a lattice column's merge failed because
    the stored value and the arriving one are of incompatible types (``lmin("x")`` into a
    column holding ``lmin(3.0)``). It is also a :class:`LatticeValueError` (what the lattice's
    merge raised, kept as ``__cause__``), so code catching either class catches it; the tick
    that raised it changed nothing.

    Attributes:
        collection: the collection's name.
        column: the column's name.
        value: the offending value (the raw value the lattice refused, ``"x"``).
        holds: the held value's lattice class and raw type (``"lmin of float"``).
        lattice: the lattice class name.
        reason: the lattice's own message.
    """

    def __init__(
        self, collection: str, column: str, value: Any, lattice: str, holds: str, reason: str
    ) -> None:
        ColumnValueError.__init__(self, collection, column, value, None, reason, holds=holds)
        self.lattice = lattice
        self.reason = reason


def _cls_name(cls: type) -> str:
    name = getattr(cls, "wrapper_name", None)
    return f"{name} ({cls.__qualname__})" if name and name != cls.__qualname__ else cls.__qualname__


class GraphvizNotFound(BloomlError, RuntimeError):
    """Drawing needs Graphviz: the ``graphviz`` Python package or the ``dot`` program is missing.

    Attributes:
        missing: which of the two is missing.
    """

    def __init__(self, message: str, *, missing: str) -> None:
        self.missing = missing
        super().__init__(message)


class CodecError(BloomlError, ValueError):
    """A value cannot travel on the wire, or bytes from the wire are not a valid message.

    Raised by :mod:`blooml.net` when encoding (a value of an unregistered type, a tuple larger
    than one message, ``max_message``: at the sending rule, so the tick rolls back) and when
    decoding (a malformed or unauthenticated datagram or fragment; a node counts and drops
    those, see ``p.stats()``).

    Attributes:
        reason: a short machine-readable reason (``"unknown_type"``, ``"too_large"``,
            ``"malformed"``, ``"version"``, ``"too_deep"``, ``"lattice_rejected"``,
            ``"unsigned"``, ``"bad_signature"``, ``"stale"``, ``"replay"``, ...).
        value: the offending value (or ``None``).
        where: where it came from (a channel and column, or a sender address), or ``""``.
    """

    def __init__(self, reason: str, message: str, value: Any = None, where: str = "") -> None:
        self.reason = reason
        self.value = value
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class SimulationError(BloomlError, ValueError):
    """A :class:`blooml.net.Simulation` was misused (a bad delay, loss or partition setting,
    an address taken twice) or did not settle within its event budget.

    Attributes:
        value: the offending value (or ``None``).
        where: the parameter or node it concerns.
    """

    def __init__(self, message: str, value: Any = None, where: str = "") -> None:
        self.value = value
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ConfluenceViolation(BloomlError, AssertionError):
    """Two message schedules of one distributed program gave different final outcomes
    (raised by :func:`blooml.testing.check_confluence`).

    Attributes:
        schedules: ``(reference, failing)``: the deliveries of each run, in time order.
        outcomes: ``(reference, failing)``: ``{node: {output: contents}}`` of each run.
        difference: the outputs that differ, ``[(node, output), ...]``.
        points_of_order: the static CALM points of order of the programs (as
            ``blooml analyze`` prints them), by program class name.
    """

    def __init__(
        self,
        message: str,
        schedules: tuple[Any, Any],
        outcomes: tuple[Any, Any],
        difference: list[tuple[str, str]],
        points_of_order: dict[str, list[str]],
    ) -> None:
        self.schedules = schedules
        self.outcomes = outcomes
        self.difference = difference
        self.points_of_order = points_of_order
        super().__init__(message)


class ScheduleFailure(ConfluenceViolation):
    """A tick failed in a run of :func:`blooml.testing.check_confluence`: a program that
    raises under some schedule (or under every one, as a typo does) is no confluent
    program, whatever its outcomes.

    Attributes:
        schedule: the deliveries of the failing run, in time order.
        error: the exception the tick raised (also the ``__cause__``).
        reference: whether it was the reference run (every message at once, in order).
    """

    def __init__(
        self,
        message: str,
        schedule: list[str],
        error: BaseException,
        reference: bool,
        points_of_order: dict[str, list[str]],
    ) -> None:
        super().__init__(message, (schedule, schedule), ({}, {}), [], points_of_order)
        self.schedule = schedule
        self.error = error
        self.reference = reference


class RuleQuarantinedError(ProgramError):
    """A network node took a rule out of evaluation after it failed ``failures`` ticks in a
    row (``blooml.net.node(p).quarantine_after``), so that the node keeps running without it.

    Attributes:
        rule: the rule's description (``Rule.describe()``: head, operator, source line).
        index: the rule's index in the program (``Program.ir().rules``).
        failures: how many ticks in a row it failed.
        last: the exception of its last failure.
    """

    def __init__(self, rule: str, index: int, failures: int, last: BaseException) -> None:
        self.rule = rule
        self.index = index
        self.failures = failures
        self.last = last
        super().__init__(
            f"{rule} failed {failures} ticks in a row and is quarantined (no longer "
            f"evaluated; the node runs on without it). Last error: {type(last).__name__}: "
            f"{last}. Fix the rule and restart the node, or call "
            "blooml.net.node(p).release_quarantine() to try it again"
        )


class IllTypedValueError(BloomlError, TypeError):
    """A lattice value written where the program merges it does not merge with what is
    held there (``lmax("evil")`` under a new key of an ``lmap`` holding ``lmax`` ints). A
    network node refuses such a row at its door (``stats()["dropped"]["ill_typed"]``, and
    the sender is told); a local write (``sync_do``, ``async_do``) raises this, with
    nothing it queued kept: the same check, the same class.

    Attributes:
        where: where the value came from (``"sync_do"``, ``"datagram from <addr>"``).
        detail: why it does not merge (the column or variable, the value, what is held).
    """

    def __init__(self, where: str, detail: str) -> None:
        self.where = where
        self.detail = detail
        super().__init__(f"{where}: {detail}")


class RowsRefusedError(ProgramError):
    """A peer set aside rows this node sent it: its rule raised on them (reported by the
    peer's refusal message; the peer's other rows applied). Counted in
    ``stats()["refused"]`` and passed to ``on_error``.

    Attributes:
        peer: the address of the node that refused them.
        channel: the channel the rows were sent on.
        rows: how many rows it refused.
        error: the class name of the exception its rule raised.
        detail: that exception's message (at most 200 characters).
    """

    def __init__(self, peer: str, channel: str, rows: int, error: str, detail: str) -> None:
        self.peer = peer
        self.channel = channel
        self.rows = rows
        self.error = error
        self.detail = detail
        super().__init__(
            f"{peer} refused {rows} row(s) sent on channel {channel!r}: its rule raised "
            f"{error}: {detail} (the other rows applied)"
        )


class DurableStateError(BloomlError):
    """Durable state (``table(..., durable=True)``, ``durable(lattice)``) cannot be opened or
    written.

    Attributes:
        data_dir: the program's ``data_dir``.
        detail: what went wrong.
    """

    def __init__(self, data_dir: Any, detail: str) -> None:
        self.data_dir = data_dir
        self.detail = detail
        super().__init__(f"durable state in data_dir={data_dir!r}: {detail}")


class DataDirError(DurableStateError, ValueError):
    """``data_dir`` is missing where durable state is declared, is not a directory, or cannot
    be written."""


class SchemaMismatchError(DurableStateError):
    """The state stored in ``data_dir`` was written by a program whose durable collections or
    lattice variables differ (another program, or this one with changed columns).

    Attributes:
        name: the collection or lattice variable that differs.
        stored: its stored description; ``declared``: the program's current one.
    """

    def __init__(self, data_dir: Any, name: str, stored: Any, declared: Any) -> None:
        self.name = name
        self.stored = stored
        self.declared = declared
        super().__init__(
            data_dir,
            f"{name!r} was stored as {stored} but the program declares {declared}; use a "
            "new data_dir, or migrate the stored state (see docs/net.md, Durable state)",
        )


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
