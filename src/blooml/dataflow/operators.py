"""The operators of the PomoFlow spec: the base class, the linear operators and the delays.

Each row of the spec's operator table is an :class:`Operator` subclass (``Map``, ``JoinTrace``,
``DistinctTrace``, ...) that a :class:`~blooml.dataflow.circuit.Circuit` node evaluates once per
timestamp. Calling an operator object applies it directly (``Map(f)(zset)``), which is how the
spec's examples read. The stateless ones also exist as plain functions (``join_stream``,
``consolidate``, ``trace_append``). The operators that read a trace of earlier updates live in
:mod:`blooml.dataflow.incremental`, aggregation in :mod:`blooml.dataflow.aggregates`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from blooml.dataflow.timestamps import Time
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet

__all__ = [
    "Z1",
    "Consolidate",
    "Distinct",
    "Filter",
    "IndexWith",
    "Inspect",
    "JoinStream",
    "Map",
    "Minus",
    "Negate",
    "Operator",
    "Plus",
    "TraceAppend",
    "UntimedTraceAppend",
    "Z1Trace",
    "consolidate",
    "join_stream",
    "trace_append",
]


class Operator(ABC):
    """A computation over a node's input streams at one timestamp.

    Subclasses set ``name``, ``arity`` and ``linearity`` and implement :meth:`eval`. Stateful
    operators that will produce output at a later iteration without new input report it with
    :meth:`pending`, so that a child circuit does not stop iterating too early.
    """

    name: ClassVar[str] = "operator"
    arity: ClassVar[int] = 1
    linearity: ClassVar[str] = "linear"

    @abstractmethod
    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        """The output at ``time`` given the input values at ``time``."""

    def pending(self, prefix: tuple[int, ...]) -> bool:
        """Whether output is scheduled at a later time that starts with ``prefix``."""
        return False

    def label(self) -> str:
        """A short label for drawings and error messages."""
        return self.name

    def __call__(self, *inputs: Any, time: Time = 0) -> Any:
        """Apply the operator directly (``Map(f)(zset)``, ``JoinStream(f)(a, b)``)."""
        if len(inputs) != self.arity:
            raise TypeError(
                f"{self.name} takes {self.arity} input(s), got {len(inputs)}: {inputs!r}"
            )
        return self.eval(inputs, time)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _expect(value: Any, kind: type | tuple[type, ...], op: str, what: str = "input") -> None:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TypeError(f"{op}: {what} must be a {names}, got {type(value).__name__}: {value!r}")


# -- linear, stateless operators ------------------------------------------------------------


class Map(Operator):
    """Transform each element with a pure function; weights of collisions are summed."""

    name = "map"

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        (z,) = inputs
        _expect(z, ZSet, "Map")
        return z.map(self.fn)

    def label(self) -> str:
        return f"map({_fn_name(self.fn)})"


class Filter(Operator):
    """Keep the elements for which a pure predicate holds."""

    name = "filter"

    def __init__(self, pred: Callable[[Any], object]) -> None:
        self.pred = pred

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        (z,) = inputs
        _expect(z, ZSet, "Filter")
        return z.filter(self.pred)

    def label(self) -> str:
        return f"filter({_fn_name(self.pred)})"


class IndexWith(Operator):
    """Group a Z-set's elements by a key function into an indexed Z-set."""

    name = "index_with"

    def __init__(self, key_fn: Callable[[Any], Any]) -> None:
        self.key_fn = key_fn

    def eval(self, inputs: Sequence[Any], time: Time) -> IndexedZSet:
        (z,) = inputs
        _expect(z, ZSet, "IndexWith")
        return z.index_with(self.key_fn)

    def label(self) -> str:
        return f"index_with({_fn_name(self.key_fn)})"


class Inspect(Operator):
    """Call ``callback(value)`` (or ``callback(value, time)``) and pass the value through."""

    name = "inspect"

    def __init__(self, callback: Callable[..., Any], with_time: bool = False) -> None:
        self.callback = callback
        self.with_time = with_time

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        (z,) = inputs
        if self.with_time:
            self.callback(z, time)
        else:
            self.callback(z)
        return z


class Negate(Operator):
    """Negate every weight."""

    name = "negate"

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        (z,) = inputs
        _expect(z, (ZSet, IndexedZSet), "Negate")
        return -z


class Plus(Operator):
    """Add two Z-sets (or two indexed Z-sets) weight by weight."""

    name = "plus"
    arity = 2

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        a, b = inputs
        _expect(a, (ZSet, IndexedZSet), "Plus", "left input")
        _expect(b, type(a), "Plus", "right input")
        return a + b


class Minus(Operator):
    """Subtract the second Z-set (or indexed Z-set) from the first."""

    name = "minus"
    arity = 2

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        a, b = inputs
        _expect(a, (ZSet, IndexedZSet), "Minus", "left input")
        _expect(b, type(a), "Minus", "right input")
        return a - b


class Distinct(Operator):
    """The elements with a positive weight, each with weight 1 (not incremental)."""

    name = "distinct"
    linearity = "non-linear"

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        (z,) = inputs
        _expect(z, (ZSet, IndexedZSet), "Distinct")
        return z.distinct()


def join_stream(fn: Callable[[Any, Any, Any], Any], a: IndexedZSet, b: IndexedZSet) -> ZSet:
    """Join two indexed Z-sets on equal keys: ``fn(key, v1, v2)`` with weight ``w1 * w2``."""
    _expect(a, IndexedZSet, "JoinStream", "left input")
    _expect(b, IndexedZSet, "JoinStream", "right input")
    return a.join(b, fn)


class JoinStream(Operator):
    """Join the two indexed Z-sets of the current timestamp (bilinear, not incremental)."""

    name = "join_stream"
    arity = 2
    linearity = "bilinear"

    def __init__(self, fn: Callable[[Any, Any, Any], Any]) -> None:
        self.fn = fn

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        a, b = inputs
        return join_stream(self.fn, a, b)

    def label(self) -> str:
        return f"join_stream({_fn_name(self.fn)})"


def consolidate(trace: Trace) -> ZSet:
    """Sum every update of ``trace`` over time into an untimed Z-set.

    A keyed trace gives a Z-set of keys; an indexed one a Z-set of ``(key, value)`` pairs.
    """
    _expect(trace, Trace, "Consolidate")
    return trace.consolidate()


class Consolidate(Operator):
    """Merge every delta of a trace into one Z-set (drops times, sums weights)."""

    name = "consolidate"

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        (t,) = inputs
        return consolidate(t)


def trace_append(z: ZSet | IndexedZSet, trace: Trace, time: Time) -> Trace:
    """The trace with ``z`` appended at ``time`` (a new trace; ``trace`` is unchanged)."""
    _expect(trace, Trace, "TraceAppend", "trace input")
    return trace.insert(z, time)


class TraceAppend(Operator):
    """Append the input Z-set to the input trace at the current timestamp."""

    name = "trace_append"
    arity = 2
    linearity = "non-linear"

    def eval(self, inputs: Sequence[Any], time: Time) -> Trace:
        z, t = inputs
        return trace_append(z, t, time)


class UntimedTraceAppend(Operator):
    """Append the input Z-set to the input trace without a timestamp (``time=None``).

    Untimed updates are below every timestamp, so the trace is a plain running sum.
    """

    name = "untimed_trace_append"
    arity = 2
    linearity = "non-linear"

    def eval(self, inputs: Sequence[Any], time: Time) -> Trace:
        z, t = inputs
        return trace_append(z, t, None)


# -- delays ---------------------------------------------------------------------------------


class Z1(Operator):
    """Delay a stream by one step: output the previous input (``zero`` at first).

    In a feedback node its input edge is not a scheduling dependency. In a child circuit it
    delays by one iteration; at a fixed point its stored value is empty, so every parent step
    starts the recursion from ``zero`` again.
    """

    name = "z1"

    def __init__(self, zero: Any = None) -> None:
        self.zero = ZSet() if zero is None else zero
        self._state = self.zero

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        (x,) = inputs
        out, self._state = self._state, x
        return out

    def peek(self) -> Any:
        """The value the delay will output next."""
        return self._state

    def push(self, value: Any) -> None:
        """Store the value to output at the next step."""
        self._state = value


class Z1Trace(Z1):
    """Delay a trace stream by one step; starts from the empty trace.

    Used as ``z1_trace(trace_append(x, z1_trace(...)))`` it yields, at each time, the trace
    of every update of ``x`` at earlier times, across iterations *and* epochs.
    """

    name = "z1_trace"

    def __init__(self, zero: Trace | None = None) -> None:
        super().__init__(Trace() if zero is None else zero)

    def eval(self, inputs: Sequence[Any], time: Time) -> Any:
        _expect(inputs[0], Trace, "Z1Trace")
        return super().eval(inputs, time)

    def compact(self, frontier: int) -> None:
        """Compact the stored trace below ``frontier`` (see :meth:`Trace.compact`)."""
        state: Trace = self._state  # type: ignore[assignment]
        self._state = state.compact(frontier)
