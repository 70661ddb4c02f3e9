"""The Bloom^L DSL: ``Program``, ``@bloom``, state declarations, aggregates and ``rows``.

The DSL records rules as IR (:mod:`blooml.ir`) and evaluates nothing; program instances run
on the embedded engine (:mod:`blooml.engine`). See ``docs/bloom.md``.
"""

from blooml.bloom._aggs import accum, avg, bool_and, bool_or, count, max_, min_, sum_
from blooml.bloom._decl import channel, durable, interface, periodic, scratch, table
from blooml.bloom._exprs import rows
from blooml.bloom.program import Program, bloom

__all__ = [
    "Program",
    "accum",
    "avg",
    "bloom",
    "bool_and",
    "bool_or",
    "channel",
    "count",
    "durable",
    "interface",
    "max_",
    "min_",
    "periodic",
    "rows",
    "scratch",
    "sum_",
    "table",
]
