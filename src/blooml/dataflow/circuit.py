"""Circuits: dataflow graphs of operators, evaluated one timestamp at a time.

A :class:`Circuit` is built node by node and then driven with :meth:`Circuit.step`, which
evaluates every node once, in topological order, at the next epoch. Six kinds of node exist
(the spec's table): *source* (0 inputs: a named input of ``step``), *sink* (a named output of
``step``, or a callback), *operator* (an :class:`~blooml.dataflow.operators.Operator` over
N inputs), *feedback* (a delay whose input edge is not a scheduling dependency, so loops
through it are allowed), *import* (a parent stream entering a child circuit) and *child* (a
nested circuit iterated to its fixed point at every step of its parent, whose *exports* are
outputs in the parent).

Node ids follow the spec: a node's local id is its index among its circuit's nodes; its global
id is the path of local ids from the root (``(2, 0)`` is node 0 of the child circuit that is
node 2 of the root).

Inside a child circuit, time is ``parent_time + (iteration,)``; an import emits the parent's
value at iteration 0 and nothing afterwards (the spec's ``delta0``), and an export is the sum of
its stream over the iterations of one parent step, i.e. the consolidated change the child made
at that step. The child stops after the first iteration whose successor would be a no-op: every
delay holds an empty change (or the very trace it just output) and no operator holds output
for a later iteration.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any

from blooml.dataflow._dot import to_dot
from blooml.dataflow.aggregates import Aggregate, AggregateIncremental, Aggregator
from blooml.dataflow.errors import CircuitError, CircuitInputError, CycleError, FixedPointError
from blooml.dataflow.incremental import DistinctIncremental, DistinctTrace, JoinTrace, _Scheduled
from blooml.dataflow.nodes import (
    CHILD,
    EXPORT,
    FEEDBACK,
    IMPORT,
    OPERATOR,
    SINK,
    SOURCE,
    MemoryReport,
    Node,
)
from blooml.dataflow.operators import (
    Z1,
    Consolidate,
    Distinct,
    Filter,
    IndexWith,
    Inspect,
    JoinStream,
    Map,
    Minus,
    Negate,
    Operator,
    Plus,
    TraceAppend,
    UntimedTraceAppend,
    Z1Trace,
)
from blooml.dataflow.timestamps import Time, as_tuple
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet

__all__ = ["Circuit", "MemoryReport", "Node"]


def _flip(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def flipped(k: Any, v2: Any, v1: Any) -> Any:
        return fn(k, v1, v2)

    flipped.__name__ = getattr(fn, "__name__", "fn") + "_flipped"
    return flipped


def _zero_like(value: Any, where: str) -> Any:
    if isinstance(value, ZSet):
        return ZSet._wrap({})
    if isinstance(value, IndexedZSet):
        return IndexedZSet._wrap({})
    raise CircuitError(where, f"cannot import a {type(value).__name__}: imports carry Z-sets")


class Circuit:
    """A dataflow circuit: build it with the node methods, run it with :meth:`step`.

    Args:
        name: shown in errors and drawings.
        max_iterations: (child circuits) iterations after which a missing fixed point is an
            error.

    Example:
        >>> c = Circuit()
        >>> xs = c.source("xs")
        >>> c.sink("evens", c.filter(xs, lambda x: x % 2 == 0))  # doctest: +ELLIPSIS
        <sink node ...>
        >>> c.step({"xs": ZSet({1: 1, 2: 1})})
        {'evens': ZSet({2: 1})}
    """

    def __init__(self, name: str = "root", *, max_iterations: int = 100_000) -> None:
        self.name = name
        self.max_iterations = max_iterations
        self._parent: Circuit | None = None
        self._path: tuple[int, ...] = ()
        self._nodes: list[Node] = []
        self._ops: list[Operator | None] = []
        self._inputs: list[tuple[int, ...]] = []
        self._values: list[Any] = []
        self._sources: dict[str, int] = {}
        self._source_kinds: dict[int, type] = {}
        self._sinks: dict[str, int] = {}
        self._callbacks: dict[int, Callable[[Any], Any]] = {}
        self._feedback: dict[int, int | None] = {}
        self._imports: dict[int, int] = {}
        self._children: dict[int, Circuit] = {}
        self._exports: dict[int, int] = {}  # export node (here) -> node in the child
        self._export_acc: dict[int, Any] = {}  # node (here) exported to the parent -> sum
        self._integrated: dict[int, Node] = {}
        self._order: list[int] | None = None
        self._epoch = 0

    # -- identity --------------------------------------------------------------------------

    @property
    def path(self) -> tuple[int, ...]:
        """The global id of this circuit's child node (``()`` for the root)."""
        return self._path

    @property
    def parent(self) -> Circuit | None:
        """The parent circuit (``None`` for the root)."""
        return self._parent

    @property
    def depth(self) -> int:
        """0 for the root, 1 for its children, ..."""
        return len(self._path)

    @property
    def epoch(self) -> int:
        """The epoch the next :meth:`step` will run (root circuits)."""
        return self._epoch

    @property
    def nodes(self) -> list[Node]:
        """The nodes of this circuit (not of its children), by local id."""
        return list(self._nodes)

    def node(self, global_id: tuple[int, ...]) -> Node:
        """The node with this global id, searched from this circuit down.

        Raises:
            CircuitError: no such node.
        """
        c: Circuit = self
        path = tuple(global_id)
        if path[: len(self._path)] != self._path:
            raise CircuitError(self.name, f"no node with global id {global_id!r}", global_id)
        rest = path[len(self._path) :]
        while len(rest) > 1:
            child = c._children.get(rest[0])
            if child is None:
                raise CircuitError(self.name, f"no node with global id {global_id!r}", global_id)
            c, rest = child, rest[1:]
        if not rest or not 0 <= rest[0] < len(c._nodes):
            raise CircuitError(self.name, f"no node with global id {global_id!r}", global_id)
        return c._nodes[rest[0]]

    # -- building --------------------------------------------------------------------------

    def _root(self) -> Circuit:
        c = self
        while c._parent is not None:
            c = c._parent
        return c

    def _add(self, kind: str, label: str, op: Operator | None, inputs: tuple[int, ...]) -> Node:
        if self._root()._epoch > 0:
            raise CircuitError(
                self.name,
                f"cannot add the {kind} node {label!r}: the circuit has already run "
                f"{self._root()._epoch} step(s), and a new operator would lack the history of "
                "the streams it reads; build the whole circuit before the first step",
                label,
            )
        node = Node(self, len(self._nodes), kind, label)
        self._nodes.append(node)
        self._ops.append(op)
        self._inputs.append(inputs)
        self._values.append(None)
        self._order = None
        return node

    def _own(self, node: Any, role: str) -> int:
        if not isinstance(node, Node):
            raise CircuitError(
                self.name, f"{role} must be a Node returned by this circuit, got {node!r}", node
            )
        if node.circuit is not self:
            hint = (
                " (it belongs to the parent circuit: bring it in with child.import_(node))"
                if node.circuit is self._parent
                else ""
            )
            raise CircuitError(
                self.name,
                f"{role} {node!r} belongs to circuit {node.circuit.name!r}, not this one{hint}",
                node,
            )
        if node.kind == SINK:
            raise CircuitError(self.name, f"{role} {node!r} is a sink: it has no output", node)
        if node.kind == CHILD:
            raise CircuitError(
                self.name,
                f"{role} {node!r} is a child circuit: use one of its exports (child.export(...))",
                node,
            )
        return node.local_id

    def source(self, name: str, kind: type = ZSet) -> Node:
        """A named input: ``step({name: value})`` feeds it (an empty ``kind()`` when omitted).

        Args:
            name: the key of :meth:`step`'s input mapping.
            kind: :class:`ZSet` (default) or :class:`IndexedZSet`.
        """
        if self._parent is not None:
            raise CircuitError(
                self.name,
                f"source {name!r}: sources belong to the root circuit; bring a parent stream "
                "into a child with child.import_(node)",
                name,
            )
        if kind not in (ZSet, IndexedZSet):
            raise CircuitError(self.name, f"source kind must be ZSet or IndexedZSet, not {kind!r}")
        if name in self._sources:
            raise CircuitError(self.name, f"a source named {name!r} already exists", name)
        node = self._add(SOURCE, name, None, ())
        self._sources[name] = node.local_id
        self._source_kinds[node.local_id] = kind
        return node

    def sink(self, name: str, node: Node, callback: Callable[[Any], Any] | None = None) -> Node:
        """A named output: ``step()`` returns ``{name: value of node}``; ``callback`` sees it too.

        In a child circuit a sink needs a callback (it runs every iteration).
        """
        src = self._own(node, "sink input")
        if name in self._sinks:
            raise CircuitError(self.name, f"a sink named {name!r} already exists", name)
        if self._parent is not None and callback is None:
            raise CircuitError(
                self.name,
                f"sink {name!r} in a child circuit needs a callback; to pass a stream to the "
                "parent use child.export(node)",
                name,
            )
        out = self._add(SINK, name, None, (src,))
        self._sinks[name] = out.local_id
        if callback is not None:
            self._callbacks[out.local_id] = callback
        return out

    def operator(self, op: Operator, *inputs: Node, label: str | None = None) -> Node:
        """A node computing ``op`` over ``inputs`` (which must already exist in this circuit)."""
        if not isinstance(op, Operator):
            raise CircuitError(self.name, f"expected an Operator, got {op!r}", op)
        if len(inputs) != op.arity:
            raise CircuitError(
                self.name,
                f"{op.label()} takes {op.arity} input(s), got {len(inputs)}",
                op,
            )
        ids = tuple(self._own(n, f"input {i} of {op.label()}") for i, n in enumerate(inputs))
        return self._add(OPERATOR, label or op.label(), op, ids)

    def feedback(self, delay: Z1 | None = None, label: str | None = None) -> Node:
        """A delay node whose input is connected later with :meth:`connect`.

        Its output at each step (iteration, in a child) is its input at the previous one, so
        a loop through it is not a cycle. ``delay`` is a :class:`Z1` (default, starting from
        an empty Z-set) or a :class:`Z1Trace` (starting from an empty trace).
        """
        op = Z1() if delay is None else delay
        if not isinstance(op, Z1):
            raise CircuitError(self.name, f"a feedback node needs a Z1 or Z1Trace, got {op!r}")
        node = self._add(FEEDBACK, label or op.label(), op, ())
        self._feedback[node.local_id] = None
        return node

    def connect(self, feedback: Node, node: Node) -> None:
        """Make ``node`` the input of the feedback node ``feedback``."""
        fid = self._own(feedback, "feedback")
        if feedback.kind != FEEDBACK:
            raise CircuitError(
                self.name, f"connect() closes feedback loops; {feedback!r} is not one", feedback
            )
        if self._feedback[fid] is not None:
            raise CircuitError(self.name, f"{feedback!r} is already connected", feedback)
        self._feedback[fid] = self._own(node, "feedback input")
        self._order = None

    def child(self, name: str, *, max_iterations: int | None = None) -> Circuit:
        """Add a child (nested, iterated) circuit and return it for building."""
        c = Circuit(name, max_iterations=max_iterations or self.max_iterations)
        node = self._add(CHILD, name, None, ())
        c._parent = self
        c._path = (*self._path, node.local_id)
        self._children[node.local_id] = c
        return c

    def import_(self, node: Node, label: str | None = None) -> Node:
        """Bring a stream of the parent circuit into this child circuit.

        The imported stream carries the parent's value at iteration 0 of each parent step and
        an empty Z-set at later iterations (its change along the iterations).
        """
        parent = self._parent
        if parent is None:
            raise CircuitError(self.name, "import_() is for child circuits; this is the root")
        pid = parent._own(node, "imported node")
        own = self._path[-1]
        parent._inputs[own] = (*parent._inputs[own], pid)
        parent._order = None
        imp = self._add(IMPORT, label or f"import {node.label}", None, ())
        self._imports[imp.local_id] = pid
        return imp

    def export(self, node: Node, name: str | None = None) -> Node:
        """Make a stream of this child available to the parent, as a node of the parent.

        The exported value at each parent step is the sum of the stream over that step's
        iterations (for the change streams of incremental circuits: the child's net change).
        """
        parent = self._parent
        if parent is None:
            raise CircuitError(self.name, "export() is for child circuits; this is the root")
        inner = self._own(node, "exported node")
        own = self._path[-1]
        out = parent._add(EXPORT, name or f"{self.name}.{node.label}", None, (own,))
        parent._exports[out.local_id] = inner
        self._export_acc[inner] = None
        return out

    # -- operator shorthands (one node each) ------------------------------------------------

    def map(self, node: Node, fn: Callable[[Any], Any]) -> Node:
        """A :class:`Map` node."""
        return self.operator(Map(fn), node)

    def filter(self, node: Node, pred: Callable[[Any], object]) -> Node:
        """A :class:`Filter` node."""
        return self.operator(Filter(pred), node)

    def index_with(self, node: Node, key_fn: Callable[[Any], Any]) -> Node:
        """An :class:`IndexWith` node."""
        return self.operator(IndexWith(key_fn), node)

    def inspect(self, node: Node, callback: Callable[..., Any], with_time: bool = False) -> Node:
        """An :class:`Inspect` node."""
        return self.operator(Inspect(callback, with_time), node)

    def negate(self, node: Node) -> Node:
        """A :class:`Negate` node."""
        return self.operator(Negate(), node)

    def plus(self, a: Node, b: Node) -> Node:
        """A :class:`Plus` node."""
        return self.operator(Plus(), a, b)

    def minus(self, a: Node, b: Node) -> Node:
        """A :class:`Minus` node."""
        return self.operator(Minus(), a, b)

    def distinct(self, node: Node) -> Node:
        """A (non-incremental) :class:`Distinct` node."""
        return self.operator(Distinct(), node)

    def consolidate(self, trace: Node) -> Node:
        """A :class:`Consolidate` node (trace -> Z-set)."""
        return self.operator(Consolidate(), trace)

    def aggregate(self, node: Node, agg: Aggregator | str | Callable[..., Any]) -> Node:
        """A (non-incremental) :class:`Aggregate` node."""
        return self.operator(Aggregate(agg), node)

    def join_stream(self, a: Node, b: Node, fn: Callable[[Any, Any, Any], Any]) -> Node:
        """A :class:`JoinStream` node (joins the current values only)."""
        return self.operator(JoinStream(fn), a, b)

    def join_trace(self, delta: Node, trace: Node, fn: Callable[[Any, Any, Any], Any]) -> Node:
        """A :class:`JoinTrace` node."""
        return self.operator(JoinTrace(fn), delta, trace)

    def z1(self, node: Node) -> Node:
        """A :class:`Z1` operator node (a delay in a feed-forward position)."""
        return self.operator(Z1(), node)

    def z1_trace(self, node: Node) -> Node:
        """A :class:`Z1Trace` operator node (a trace delay in a feed-forward position)."""
        return self.operator(Z1Trace(), node)

    def trace_append(self, node: Node, trace: Node) -> Node:
        """A :class:`TraceAppend` node."""
        return self.operator(TraceAppend(), node, trace)

    def untimed_trace_append(self, node: Node, trace: Node) -> Node:
        """An :class:`UntimedTraceAppend` node."""
        return self.operator(UntimedTraceAppend(), node, trace)

    def distinct_trace(self, delta: Node, trace: Node) -> Node:
        """A :class:`DistinctTrace` node."""
        return self.operator(DistinctTrace(), delta, trace)

    def distinct_incremental(self, delta: Node, trace: Node) -> Node:
        """A :class:`DistinctIncremental` node."""
        return self.operator(DistinctIncremental(), delta, trace)

    # -- incremental building blocks (several nodes each) ----------------------------------

    def integrate(self, node: Node) -> Node:
        """The trace of ``node``'s updates at every earlier time: ``z1_trace(trace_append)``.

        Built once per node (later calls return the same feedback node), so every operator
        reading the history of one stream shares one trace.
        """
        nid = self._own(node, "integrated node")
        got = self._integrated.get(nid)
        if got is None:
            fb = self.feedback(Z1Trace(), label=f"z1_trace({node.label})")
            app = self.trace_append(node, fb)
            self.connect(fb, app)
            got = self._integrated[nid] = fb
        return got

    def incremental_join(self, a: Node, b: Node, fn: Callable[[Any, Any, Any], Any]) -> Node:
        """The change of ``join(A, B)`` given the changes ``a`` and ``b`` (indexed Z-sets).

        ``a⋈b + a⋈z⁻¹(B) + z⁻¹(A)⋈b``: a :class:`JoinStream` and two :class:`JoinTrace`
        nodes over the traces of both inputs.
        """
        ta, tb = self.integrate(a), self.integrate(b)
        now = self.join_stream(a, b, fn)
        left = self.join_trace(a, tb, fn)
        right = self.join_trace(b, ta, _flip(fn))
        return self.plus(self.plus(now, left), right)

    def incremental_distinct(self, node: Node) -> Node:
        """The change of ``distinct`` of the integral of ``node``.

        :class:`DistinctIncremental` at the root, :class:`DistinctTrace` in child circuits.
        """
        t = self.integrate(node)
        if self._parent is None:
            return self.distinct_incremental(node, t)
        return self.distinct_trace(node, t)

    def incremental_aggregate(self, node: Node, agg: Aggregator | str | Callable[..., Any]) -> Node:
        """The change of ``aggregate(agg, integral of node)`` (an indexed Z-set stream)."""
        return self.operator(AggregateIncremental(agg), node, self.integrate(node))

    # -- scheduling ------------------------------------------------------------------------

    def _schedule(self) -> list[int]:
        if self._order is not None:
            return self._order
        for fid, src in self._feedback.items():
            if src is None:
                raise CircuitError(
                    self.name,
                    f"feedback node {self._nodes[fid]!r} was never connected "
                    "(call circuit.connect(feedback, node))",
                    self._nodes[fid],
                )
        n = len(self._nodes)
        indeg = [len(set(ins)) for ins in self._inputs]
        users: list[list[int]] = [[] for _ in range(n)]
        for nid, ins in enumerate(self._inputs):
            for i in set(ins):
                users[i].append(nid)
        ready = [nid for nid in range(n) if indeg[nid] == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            nid = heapq.heappop(ready)
            order.append(nid)
            for u in users[nid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) < n:
            raise CycleError(self.name, self._find_cycle({i for i in range(n) if indeg[i] > 0}))
        self._order = order
        return order

    def _find_cycle(self, stuck: set[int]) -> list[str]:
        start = min(stuck)
        seen: dict[int, int] = {}
        path: list[int] = []
        nid = start
        while nid not in seen:
            seen[nid] = len(path)
            path.append(nid)
            nid = next(i for i in self._inputs[nid] if i in stuck)
        cycle = path[seen[nid] :][::-1]
        return [self._nodes[i].label for i in (*cycle, cycle[0])]

    # -- running ---------------------------------------------------------------------------

    def step(self, inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run one epoch: feed the sources, evaluate every node, return the sinks' values.

        Args:
            inputs: ``{source name: ZSet or IndexedZSet}``; missing sources get an empty one.

        Returns:
            ``{sink name: value}`` for every sink of this (root) circuit.

        Raises:
            CircuitError: this is a child circuit, or the wiring is bad (unconnected feedback,
                cycle without a delay).
            CircuitInputError: an unknown source name or a value of the wrong type.
            FixedPointError: a child circuit did not converge.

        A step is atomic: if it raises, every delay and trace is as it was before it.
        """
        if self._parent is not None:
            raise CircuitError(self.name, "step() runs a root circuit; this is a child circuit")
        given = dict(inputs or {})
        for name, value in given.items():
            nid = self._sources.get(name)
            if nid is None:
                raise CircuitInputError(
                    self.name,
                    name,
                    value,
                    sorted(self._sources),
                    f"no source with that name (sources: {sorted(self._sources)})",
                )
            kind = self._source_kinds[nid]
            if not isinstance(value, kind):
                raise CircuitInputError(
                    self.name,
                    name,
                    value,
                    kind,
                    f"expected a {kind.__name__}, got {type(value).__name__}: {value!r}",
                )
        self._validate()
        saved = self._save()
        try:
            self._run_once(self._epoch, given, True)
        except BaseException:
            self._restore(saved)
            raise
        self._epoch += 1
        return {name: self._values[nid] for name, nid in self._sinks.items()}

    def _validate(self) -> None:
        self._schedule()
        for child in self._children.values():
            child._validate()

    def _stateful(self) -> list[Operator]:
        ops = [op for op in self._ops if op is not None]
        for child in self._children.values():
            ops.extend(child._stateful())
        return ops

    def _save(self) -> list[tuple[Z1, Any]]:
        return [(op, op.peek()) for op in self._stateful() if isinstance(op, Z1)]

    def _restore(self, saved: list[tuple[Z1, Any]]) -> None:
        for op, value in saved:
            op.push(value)
        for other in self._stateful():
            if isinstance(other, _Scheduled):
                other._todo.clear()
            elif isinstance(other, JoinTrace):
                other._future.clear()

    def _run_once(self, time: Time, inputs: Mapping[str, Any], first: bool) -> None:
        vals = self._values
        ops = self._ops
        ins = self._inputs
        for nid in self._schedule():
            kind = self._nodes[nid].kind
            if kind is OPERATOR:
                op = ops[nid]
                vals[nid] = op.eval([vals[i] for i in ins[nid]], time)  # type: ignore[union-attr]
            elif kind is FEEDBACK:
                vals[nid] = ops[nid].peek()  # type: ignore[union-attr]
            elif kind is SOURCE:
                v = inputs.get(self._nodes[nid].label)
                vals[nid] = self._source_kinds[nid]() if v is None else v
            elif kind is IMPORT:
                pv = self._parent._values[self._imports[nid]]  # type: ignore[union-attr]
                vals[nid] = pv if first else _zero_like(pv, self.name)
            elif kind is CHILD:
                self._children[nid]._run_epoch(time)
            elif kind is EXPORT:
                child = self._children[ins[nid][0]]
                acc = child._export_acc[self._exports[nid]]
                vals[nid] = acc
            else:  # SINK
                v = vals[ins[nid][0]]
                vals[nid] = v
                cb = self._callbacks.get(nid)
                if cb is not None:
                    cb(v)
        for fid, src in self._feedback.items():
            ops[fid].push(vals[src])  # type: ignore[union-attr,index]

    def _run_epoch(self, parent_time: Time) -> None:
        prefix = as_tuple(parent_time)
        acc = self._export_acc
        for k in acc:
            acc[k] = None
        i = 0
        while True:
            self._run_once((*prefix, i), {}, i == 0)
            vals = self._values
            for k in acc:
                v = vals[k]
                old = acc[k]
                if old is None or not isinstance(v, ZSet | IndexedZSet):
                    acc[k] = v
                else:
                    acc[k] = old + v
            if self._settled() and not self._pending(prefix):
                return
            i += 1
            if i >= self.max_iterations:
                raise FixedPointError(self.name, i, parent_time)

    def _settled(self) -> bool:
        """Whether another iteration would see only empty changes and unchanged traces.

        Imports are empty after iteration 0, so the next iteration's inputs are what the
        delays (feedback nodes and Z1 nodes) hold now: it is a no-op when each of them holds
        an empty change, or the very trace it output in this iteration.
        """
        vals = self._values
        for nid, op in enumerate(self._ops):
            if isinstance(op, Z1):
                nxt = op.peek()
                if isinstance(nxt, ZSet | IndexedZSet):
                    if nxt:
                        return False
                elif isinstance(nxt, Trace):
                    if nxt is not vals[nid]:
                        return False
                elif nxt != vals[nid]:
                    return False
        return True

    def _pending(self, prefix: tuple[int, ...]) -> bool:
        if any(op is not None and op.pending(prefix) for op in self._ops):
            return True
        return any(child._pending(prefix) for child in self._children.values())

    # -- traces: memory and compaction -----------------------------------------------------

    def _trace_holders(self) -> list[tuple[str, Z1Trace]]:
        out = [
            (".".join(map(str, self._nodes[nid].global_id)) + " " + self._nodes[nid].label, op)
            for nid, op in enumerate(self._ops)
            if isinstance(op, Z1Trace)
        ]
        for child in self._children.values():
            out.extend(child._trace_holders())
        return out

    def memory(self) -> MemoryReport:
        """The memory held by the traces of this circuit and its children."""
        seen: set[int] = set()
        total = 0
        entries = 0
        per: dict[str, tuple[int, int]] = {}
        for name, op in self._trace_holders():
            t = op.peek()
            fresh = Trace._make(
                tuple(b for b in t._spine if id(b) not in seen), t._indexed, t._fallback
            )
            seen.update(id(b) for b in t._spine)
            size = fresh.memory_bytes()
            per[name] = (len(t), t.memory_bytes())
            total += size
            entries += len(fresh)
        return MemoryReport(total, entries, per)

    def compact(self, frontier: int | None = None) -> MemoryReport:
        """Compact every trace below epoch ``frontier`` (default: the next epoch to run).

        Later steps compute exactly the same results; the per-epoch history of older updates
        is merged. Returns the memory report after compaction.
        """
        root = self._root()
        f = root._epoch if frontier is None else frontier
        if type(f) is not int or f < 0 or f > root._epoch:
            raise CircuitError(
                self.name,
                f"compaction frontier must be an epoch between 0 and {root._epoch} (the next "
                f"epoch to run), got {frontier!r}",
            )
        for _name, op in self._trace_holders():
            op.compact(f)
        self._drop_trace_values()
        return self.memory()

    def _drop_trace_values(self) -> None:
        self._values = [None if isinstance(v, Trace) else v for v in self._values]
        for child in self._children.values():
            child._drop_trace_values()

    # -- drawing ---------------------------------------------------------------------------
    def dot(self) -> str:
        """The circuit as Graphviz DOT text (children drawn as clusters, feedback dashed)."""
        return to_dot(self)

    def __repr__(self) -> str:
        kind = "root circuit" if self._parent is None else "child circuit"
        return f"<{kind} {self.name!r} with {len(self._nodes)} nodes>"
