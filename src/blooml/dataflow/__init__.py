"""PomoFlow: an incremental dataflow runtime (Z-sets, traces, circuits, Datalog).

The values are :class:`ZSet` (element -> integer weight), :class:`IndexedZSet`
(key -> value -> weight) and :class:`Trace` (timestamped history). Operators (one class per
row of the spec's operator table) are wired into a :class:`Circuit` and run one epoch at a
time; child circuits iterate to a fixed point at every epoch. :class:`Datalog` compiles
recursive rules with stratified negation to the rule IR and maintains their results under
insertions and deletions on the engine's incremental core (``Datalog.to_circuit()`` compiles
them as a circuit instead). See ``docs/dataflow.md``.
"""

from blooml.dataflow.aggregates import (
    COUNT,
    MAX,
    MIN,
    SUM,
    Aggregate,
    AggregateIncremental,
    Aggregator,
    aggregate,
)
from blooml.dataflow.circuit import Circuit, MemoryReport, Node
from blooml.dataflow.datalog import Atom, Condition, Datalog, Relation, Rule, Var, where
from blooml.dataflow.datalog_view import DatalogView
from blooml.dataflow.errors import (
    CircuitError,
    CircuitInputError,
    CycleError,
    DataflowError,
    DatalogError,
    FixedPointError,
    ImpureAggregateError,
    StratificationError,
    TimestampError,
    TraceKindError,
    UnhashableElementError,
    WeightError,
)
from blooml.dataflow.incremental import (
    DistinctIncremental,
    DistinctTrace,
    JoinTrace,
    distinct_incremental,
    distinct_trace,
    join_trace,
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
    consolidate,
    join_stream,
    trace_append,
)
from blooml.dataflow.timestamps import Time, leq, lub
from blooml.dataflow.trace import Trace
from blooml.dataflow.zset import IndexedZSet, ZSet

__all__ = [
    "COUNT",
    "MAX",
    "MIN",
    "SUM",
    "Z1",
    "Aggregate",
    "AggregateIncremental",
    "Aggregator",
    "Atom",
    "Circuit",
    "CircuitError",
    "CircuitInputError",
    "Condition",
    "Consolidate",
    "CycleError",
    "DataflowError",
    "Datalog",
    "DatalogError",
    "DatalogView",
    "Distinct",
    "DistinctIncremental",
    "DistinctTrace",
    "Filter",
    "FixedPointError",
    "ImpureAggregateError",
    "IndexWith",
    "IndexedZSet",
    "Inspect",
    "JoinStream",
    "JoinTrace",
    "Map",
    "MemoryReport",
    "Minus",
    "Negate",
    "Node",
    "Operator",
    "Plus",
    "Relation",
    "Rule",
    "StratificationError",
    "Time",
    "TimestampError",
    "Trace",
    "TraceAppend",
    "TraceKindError",
    "UnhashableElementError",
    "UntimedTraceAppend",
    "Var",
    "WeightError",
    "Z1Trace",
    "ZSet",
    "aggregate",
    "consolidate",
    "distinct_incremental",
    "distinct_trace",
    "join_stream",
    "join_trace",
    "leq",
    "lub",
    "trace_append",
    "where",
]
