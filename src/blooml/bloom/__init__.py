"""The Bloom^L DSL: ``Program``, ``@bloom``, state declarations, aggregates and ``rows``.

The DSL records rules as IR (:mod:`blooml.ir`) and evaluates nothing; program instances run
on the embedded engine, reached through one factory (:mod:`blooml._factory`): importing the
DSL loads no engine module. See ``docs/bloom.md``.
"""

from typing import Any

from blooml.bloom._aggs import accum, avg, bool_and, bool_or, count, max_, min_, sum_
from blooml.bloom._decl import channel, interface, periodic, scratch, table
from blooml.bloom._exprs import lift, rows
from blooml.bloom._reads import reads
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
    "interface",
    "lift",
    "max_",
    "min_",
    "periodic",
    "reads",
    "rows",
    "scratch",
    "sum_",
    "table",
]


def __getattr__(name: str) -> Any:
    """``LocalNetwork`` lives below the DSL (with the engine); it is loaded on first access
    through the factory, kept here for compatibility (import it from :mod:`blooml`)."""
    if name == "LocalNetwork":
        from blooml._factory import local_network_class

        return local_network_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
