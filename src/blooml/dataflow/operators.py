"""The operators of the PomoFlow spec, as functions and as circuit operator objects.

Each row of the spec's operator table is an :class:`Operator` subclass (``Map``, ``JoinTrace``,
``DistinctTrace``, ...) that a :class:`~blooml.dataflow.circuit.Circuit` node evaluates once per
timestamp. Calling an operator object applies it directly (``Map(f)(zset)``), which is how the
spec's examples read. The stateless ones also exist as plain functions (``join_stream``,
``join_trace``, ``distinct_trace``, ``consolidate``, ``aggregate``, ...).

Conventions: the *trace* input of ``JoinTrace``, ``DistinctTrace``, ``DistinctIncremental`` and
``AggregateIncremental`` holds the updates of the other stream at every time processed *before*
the current one (the output of ``Z1Trace``); the current delta arrives separately.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from blooml.dataflow.errors import ImpureAggregateError, TraceKindError
from blooml.dataflow.timestamps import Time, corners, leq, lub
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet, _add_into

__all__ = [
    "COUNT",
    "MAX",
    "MIN",
    "SUM",
    "Z1",
    "Aggregate",
    "AggregateIncremental",
    "Aggregator",
    "Consolidate",
    "Distinct",
    "DistinctIncremental",
    "DistinctTrace",
    "Filter",
    "IndexWith",
    "Inspect",
    "JoinStream",
    "JoinTrace",
    "Map",
    "Minus",
    "Negate",
    "Operator",
    "Plus",
    "TraceAppend",
    "UntimedTraceAppend",
    "Z1Trace",
    "aggregate",
    "consolidate",
    "distinct_incremental",
    "distinct_trace",
    "join_stream",
    "join_trace",
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


# -- incremental (trace-based) operators ----------------------------------------------------


def _sign(x: int) -> int:
    return 1 if x > 0 else 0


def _distinct_2d(hist: list[tuple[Any, int]], w: int, e: int, i: int) -> int:
    """The spec's w1/w2/w3 rule for a time ``(e, i)``."""
    w1 = w2 = w3 = 0
    for s, ws in hist:
        if s is None:
            w1 += ws
            continue
        e0, i0 = s
        if e0 < e:
            if i0 < i:
                w1 += ws
            elif i0 == i:
                w2 += ws
        elif e0 == e and i0 < i:
            w3 += ws
    d0 = _sign(w1 + w2) - _sign(w1)
    d1 = _sign(w1 + w2 + w3 + w) - _sign(w1 + w3)
    return d1 - d0


def _distinct_general(hist: list[tuple[Any, int]], w: int, t: Time) -> int:
    out = 0
    for c, sign in corners(t):
        x = sum(ws for s, ws in hist if leq(s, c))
        if c == t:
            x += w
        out += sign * _sign(x)
    return out


def _distinct_delta(hist: list[tuple[Any, int]], w: int, t: Time) -> int:
    if type(t) is int or t is None:
        x = sum(ws for _s, ws in hist)
        return _sign(x + w) - _sign(x)
    assert isinstance(t, tuple)
    if len(t) == 2:
        return _distinct_2d(hist, w, t[0], t[1])
    return _distinct_general(hist, w, t)


def distinct_incremental(delta: ZSet, trace: Trace) -> ZSet:
    """The change of ``distinct`` when ``delta`` is added to everything in ``trace``.

    An element is output when its new total and its old total (the sum of its weights in
    the trace) are on different sides of zero: ``+1`` when it appears, ``-1`` when it goes.
    """
    _expect(delta, ZSet, "DistinctIncremental", "delta input")
    _expect(trace, Trace, "DistinctIncremental", "trace input")
    out: dict[Any, int] = {}
    for x, w in delta._d.items():
        old = sum(ws for _s, ws in trace.history(x))
        d = _sign(old + w) - _sign(old)
        if d:
            out[x] = d
    return ZSet._wrap(out)


class DistinctIncremental(Operator):
    """Incremental distinct at the root: ``(delta, trace of earlier deltas) -> delta``."""

    name = "distinct_incremental"
    arity = 2
    linearity = "non-linear"

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        delta, trace = inputs
        return distinct_incremental(delta, trace)


def distinct_trace(delta: ZSet, trace: Trace, time: Time) -> ZSet:
    """Nested incremental distinct at ``time`` (the spec's DistinctTrace, as a function).

    ``trace`` holds the input updates at every time processed before ``time``. For a time
    ``(e, i)`` the weight of an element is ``d1 - d0`` with ``w1`` (earlier epochs, earlier
    iterations), ``w2`` (earlier epochs, iteration ``i``), ``w3`` (epoch ``e``, earlier
    iterations) and ``w`` (the delta): ``d0 = [w1+w2 > 0] - [w1 > 0]`` and
    ``d1 = [w1+w2+w3+w > 0] - [w1+w3 > 0]``. This function examines every element of the
    trace; the :class:`DistinctTrace` operator tracks which elements can change instead.
    """
    _expect(delta, ZSet, "distinct_trace", "delta input")
    _expect(trace, Trace, "distinct_trace", "trace input")
    out: dict[Any, int] = {}
    for x in {*delta._d, *trace.keys()}:
        d = _distinct_delta(trace.history(x), delta._d.get(x, 0), time)
        if d:
            out[x] = d
    return ZSet._wrap(out)


class _Scheduled(Operator):
    """Shared bookkeeping for nested reductions: keys to revisit at later iterations.

    A key updated at time ``t`` may change its output at ``lub(t, s)`` for every earlier
    update time ``s`` of the same key (the spec's second class of elements), even with no
    new input then; those times are recorded here and revisited.
    """

    def __init__(self) -> None:
        self._todo: dict[Any, set[Any]] = {}

    def _candidates(self, delta_keys: Any, time: Time) -> set[Any]:
        todo = self._todo.pop(time, None)
        if todo is None:
            return set(delta_keys)
        todo.update(delta_keys)
        return todo

    def _schedule(self, key: Any, times: Any, time: Time) -> None:
        for s in times:
            u = lub(time, s)
            if u != time:
                bucket = self._todo.get(u)
                if bucket is None:
                    self._todo[u] = {key}
                else:
                    bucket.add(key)

    def pending(self, prefix: tuple[int, ...]) -> bool:
        n = len(prefix)
        return any(type(u) is tuple and u[:n] == prefix for u in self._todo)


class DistinctTrace(_Scheduled):
    """Nested incremental distinct: ``(delta, trace of earlier deltas) -> delta``.

    Works at any nesting depth: epochs (it is then DistinctIncremental), ``(epoch, iteration)``
    pairs (the spec's w1/w2/w3 rule) and deeper tuples (the same inclusion-exclusion over
    every corner of the time).
    """

    name = "distinct_trace"
    arity = 2
    linearity = "non-linear"

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        delta, trace = inputs
        _expect(delta, ZSet, "DistinctTrace", "delta input")
        _expect(trace, Trace, "DistinctTrace", "trace input")
        if type(time) is int:
            return distinct_incremental(delta, trace)
        d = delta._d
        out: dict[Any, int] = {}
        for x in self._candidates(d, time):
            hist = trace.history(x)
            if hist:
                self._schedule(x, (s for s, _w in hist), time)
            r = _distinct_delta(hist, d.get(x, 0), time)
            if r:
                out[x] = r
        return ZSet._wrap(out)


def join_trace(fn: Callable[[Any, Any, Any], Any], delta: IndexedZSet, trace: Trace) -> ZSet:
    """Join ``delta`` with every update in an indexed ``trace`` (times ignored).

    ``fn(key, v_delta, v_trace)`` is each output element, with weight ``w_delta * w_trace``.
    """
    _expect(delta, IndexedZSet, "JoinTrace", "delta input")
    _expect(trace, Trace, "JoinTrace", "trace input")
    if trace.indexed is False:
        raise TraceKindError("IndexedZSet", trace, "JoinTrace (the trace must be indexed)")
    out: dict[Any, int] = {}
    for k, vals in delta._d.items():
        entries = trace.entries(k)
        if not entries:
            continue
        for v1, w1 in vals.items():
            for v2, _s, w2 in entries:
                _add_into(out, fn(k, v1, v2), w1 * w2, "JoinTrace")
    return ZSet._wrap(out)


class JoinTrace(Operator):
    """Join the current delta with the trace of the other side's earlier updates.

    At the root every trace update is earlier than now, so this is :func:`join_trace`. In a
    nested circuit a pair of updates at times ``t`` and ``s`` contributes at ``lub(t, s)``,
    which can be a later iteration of the current epoch: those outputs are held back and
    emitted when that iteration runs. The incremental join of two streams is
    ``join_stream(a, b) + join_trace(a, z1_trace(B)) + join_trace(flip(f), b, z1_trace(A))``
    (see ``Circuit.join``).
    """

    name = "join_trace"
    arity = 2
    linearity = "bilinear"

    def __init__(self, fn: Callable[[Any, Any, Any], Any]) -> None:
        self.fn = fn
        self._future: dict[Any, dict[Any, int]] = {}

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        delta, trace = inputs
        if type(time) is int:
            return join_trace(self.fn, delta, trace)
        _expect(delta, IndexedZSet, "JoinTrace", "delta input")
        _expect(trace, Trace, "JoinTrace", "trace input")
        fn = self.fn
        out = self._future.pop(time, None) or {}
        future = self._future
        for k, vals in delta._d.items():
            entries = trace.entries(k)
            if not entries:
                continue
            for v2, s, w2 in entries:
                u = lub(time, s)
                target = out if u == time else future.setdefault(u, {})
                for v1, w1 in vals.items():
                    _add_into(target, fn(k, v1, v2), w1 * w2, "JoinTrace")
        for u in [u for u, d in future.items() if not d]:
            del future[u]
        return ZSet._wrap(out)

    def pending(self, prefix: tuple[int, ...]) -> bool:
        n = len(prefix)
        return any(u[:n] == prefix for u in self._future)

    def label(self) -> str:
        return f"join_trace({_fn_name(self.fn)})"


# -- aggregation ----------------------------------------------------------------------------


class Aggregator:
    """A named aggregate: a pure function from a group to a result.

    ``fn`` receives the group as a tuple of ``(value, weight)`` pairs (sorted by value when
    the values are comparable) and returns the group's summary, or ``None`` for "no output
    for this key".

    Args:
        name: shown in drawings and errors.
        fn: the aggregate function; it must be pure.
        check_purity: evaluate ``fn`` twice on every group and raise
            :class:`ImpureAggregateError` when the results differ (doubles the cost; the
            builtins skip it).
    """

    def __init__(
        self, name: str, fn: Callable[[tuple[tuple[Any, int], ...]], Any], check_purity: bool = True
    ) -> None:
        self.name = name
        self.fn = fn
        self.check_purity = check_purity

    def __call__(self, group: tuple[tuple[Any, int], ...]) -> Any:
        r = self.fn(group)
        if self.check_purity:
            again = self.fn(tuple(group))
            if again != r:
                raise ImpureAggregateError(self.name, group, (r, again))
        return r

    def __repr__(self) -> str:
        return f"Aggregator({self.name!r})"


def _count(group: tuple[tuple[Any, int], ...]) -> int:
    return sum(w for _v, w in group)


def _sum(group: tuple[tuple[Any, int], ...]) -> Any:
    return sum(v * w for v, w in group)


def _min(group: tuple[tuple[Any, int], ...]) -> Any:
    return min((v for v, w in group if w > 0), default=None)


def _max(group: tuple[tuple[Any, int], ...]) -> Any:
    return max((v for v, w in group if w > 0), default=None)


#: The sum of the weights (the number of values, counted with multiplicity).
COUNT = Aggregator("count", _count, check_purity=False)
#: The sum of ``value * weight``.
SUM = Aggregator("sum", _sum, check_purity=False)
#: The least value with a positive weight.
MIN = Aggregator("min", _min, check_purity=False)
#: The greatest value with a positive weight.
MAX = Aggregator("max", _max, check_purity=False)

_BUILTIN_AGGREGATES = {"count": COUNT, "sum": SUM, "min": MIN, "max": MAX}


def _aggregator(agg: Any) -> Aggregator:
    if isinstance(agg, Aggregator):
        return agg
    if isinstance(agg, str):
        try:
            return _BUILTIN_AGGREGATES[agg]
        except KeyError:
            raise ValueError(
                f"unknown aggregate {agg!r}: use one of {sorted(_BUILTIN_AGGREGATES)} or an "
                "Aggregator(name, fn)"
            ) from None
    if callable(agg):
        return Aggregator(_fn_name(agg), agg)
    raise TypeError(f"aggregate must be a name, an Aggregator or a function, got {agg!r}")


def _group(vals: dict[Any, int]) -> tuple[tuple[Any, int], ...]:
    items = list(vals.items())
    with contextlib.suppress(TypeError):
        items.sort(key=lambda vw: vw[0])
    return tuple(items)


def aggregate(agg: Aggregator | str | Callable[..., Any], z: IndexedZSet) -> ZSet:
    """Summarize the values under each key: ``{(key, agg(values)): 1}``.

    ``agg`` is ``"count"``, ``"sum"``, ``"min"``, ``"max"``, an :class:`Aggregator`, or a
    function (wrapped in a purity-checked :class:`Aggregator`).
    """
    a = _aggregator(agg)
    _expect(z, IndexedZSet, f"Aggregate({a.name})")
    out: dict[Any, int] = {}
    for k, vals in z._d.items():
        r = a(_group(vals))
        if r is not None:
            _add_into(out, (k, r), 1, f"Aggregate({a.name})")
    return ZSet._wrap(out)


class Aggregate(Operator):
    """Apply an aggregate to each key of an indexed Z-set (not incremental)."""

    name = "aggregate"
    linearity = "non-linear"

    def __init__(self, agg: Aggregator | str | Callable[..., Any]) -> None:
        self.agg = _aggregator(agg)

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        (z,) = inputs
        return aggregate(self.agg, z)

    def label(self) -> str:
        return f"aggregate({self.agg.name})"


class AggregateIncremental(_Scheduled):
    """Incremental aggregate: ``(delta, trace of earlier deltas) -> change of the output``.

    For every key touched now it recomputes the aggregate of the key's integrated values
    before and after (at every corner of the time, in nested circuits) and outputs the
    retraction of the old summary and the insertion of the new one.
    """

    name = "aggregate_incremental"
    arity = 2
    linearity = "non-linear"

    def __init__(self, agg: Aggregator | str | Callable[..., Any]) -> None:
        super().__init__()
        self.agg = _aggregator(agg)

    def eval(self, inputs: Sequence[Any], time: Time) -> ZSet:
        delta, trace = inputs
        _expect(delta, IndexedZSet, "AggregateIncremental", "delta input")
        _expect(trace, Trace, "AggregateIncremental", "trace input")
        agg = self.agg
        out: dict[Any, int] = {}
        flat = type(time) is int or time is None
        cs: list[tuple[Any, int]] = [(time, 1), ("before", -1)] if flat else corners(time)
        keys = set(delta._d) if flat else self._candidates(delta._d, time)
        for k in keys:
            entries = trace.entries(k)
            if not flat and entries:
                self._schedule(k, (s for _v, s, _w in entries), time)
            now = delta._d.get(k, {})
            for c, sign in cs:
                vals: dict[Any, int] = {}
                for v, s, w in entries:
                    if flat or leq(s, c):
                        _add_into(vals, v, w, "AggregateIncremental")
                if c == time:
                    for v, w in now.items():
                        _add_into(vals, v, w, "AggregateIncremental")
                if vals:
                    r = agg(_group(vals))
                    if r is not None:
                        _add_into(out, (k, r), sign, "AggregateIncremental")
        return ZSet._wrap(out)

    def label(self) -> str:
        return f"aggregate_incremental({self.agg.name})"
