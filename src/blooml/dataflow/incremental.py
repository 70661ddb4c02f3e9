"""Incremental operators: the ones that read a trace of the other input's earlier updates.

Convention: the *trace* input of ``JoinTrace``, ``DistinctTrace`` and ``DistinctIncremental``
holds the updates of a stream at every time processed *before* the current one (the output of
``Z1Trace``, see ``Circuit.integrate``); the current delta arrives separately. In nested
circuits a pair of updates at times ``t`` and ``s`` affects the output at ``lub(t, s)``, which
may be a later iteration: those operators hold such work back and report it as pending.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from blooml.dataflow.errors import TraceKindError
from blooml.dataflow.operators import Operator, _expect, _fn_name
from blooml.dataflow.timestamps import Time, corners, leq, lub
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet, _add_into

__all__ = [
    "DistinctIncremental",
    "DistinctTrace",
    "JoinTrace",
    "distinct_incremental",
    "distinct_trace",
    "join_trace",
]


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
