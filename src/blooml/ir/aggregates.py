"""What each aggregate of a ``group`` computes: one definition shared by every engine.

The IR names aggregates (:data:`~blooml.ir.nodes.AGG_NAMES`); this module gives them their
meaning, so that the local engine and the Spark engine cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from blooml.errors import ProgramError
from blooml.ir.nodes import AGG_NAMES

__all__ = ["apply_aggregate"]


def apply_aggregate(fn: str, vals: list[Any], rows: list[Any]) -> Any:
    """Aggregate ``fn`` over one group.

    Args:
        fn: an aggregate name from ``AGG_NAMES``.
        vals: the aggregated column's values in the group, or ``rows`` itself for ``count()``
            with no column (which counts rows).
        rows: the group's rows.

    ``count`` of a column counts distinct values; every other aggregate of an empty column is
    ``None``; ``accum`` collects the values into a ``frozenset``.

    Raises:
        ProgramError: ``fn`` is not an aggregate name.
    """
    if fn == "count":
        return len(set(vals)) if vals is not rows else len(rows)
    if fn not in AGG_NAMES:
        raise ProgramError(f"unknown aggregate {fn!r} (known: {', '.join(AGG_NAMES)})")
    if not vals:
        return None
    if fn == "sum":
        return sum(vals)
    if fn == "min":
        return min(vals)
    if fn == "max":
        return max(vals)
    if fn == "avg":
        return sum(vals) / len(vals)
    if fn == "accum":
        return frozenset(vals)
    if fn == "bool_and":
        return all(vals)
    return any(vals)  # bool_or
