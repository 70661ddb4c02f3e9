"""Bloom^L strata as Spark SQL: DataFrame plans built from the IR (classic and Spark Connect).

:class:`DataFramePlan` checks that every rule of a program lowers to DataFrame operations —
scans, selections and projections from the expressions recovered from rule functions
(:mod:`blooml.ir.exprs`), equi-joins, anti-joins for ``notin``, ``groupBy`` for aggregates —
with lattice columns of the natively stored builtins (``lmax``, ``lmin``, ``lbool``) merged by
their SQL aggregates (the Column functions of :mod:`blooml.spark.functions`). Lattice variables
of any class are folded with ``lfold`` and kept on the driver. Rule bodies that do not lower
(functions not recovered as expressions, ``flat_map``, ``notin`` tests, ``choose``, ``reduce``)
run as Arrow-batched Python inside the plan: :mod:`blooml.spark._dfpython`.

:func:`run_plan` then evaluates one tick semi-naively, as the local engine does: each round
joins the *deltas* of the previous round against the full state; the derived rows are merged
into the state and the rows that changed are the next delta. For set-semantics heads the delta
is the derived rows not stored yet (an anti-join with the state). For keyed heads one
aggregation over the derived rows and the stored rows gives the new state, lattice columns
merged by their SQL aggregates; it is checkpointed once, and its changed rows are the delta (no
join with the state: Spark estimates a join's size as the product of its inputs', and fed back
through checkpoints that estimate's digits double every round). Deltas are localCheckpointed
every round, keyed states when they are merged, set states every ``checkpoint_every`` rounds,
so lineage stays bounded. Deltas and states are counted exactly, and each join broadcasts its
smallest input when the count fits the session's broadcast threshold.

The parts live in modules of their own: planning (:mod:`blooml.spark._dfplan`), evaluating
rule bodies (:mod:`blooml.spark._dfeval`), the state and its overlays (:mod:`blooml.spark.
_dfstate`), how a state is materialized and kept (checkpoints, state files:
:mod:`blooml.spark._dffiles`), lookups of stored rows (:mod:`blooml.spark._dflookup`) and the
tick driver (:mod:`blooml.spark._dftick`); this module gathers their names.

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from blooml.spark._dfeval import _aggregate, _Lowering, _Run
from blooml.spark._dffiles import (
    STATE_ROW_GROUP,
    STATE_ROW_GROUPS,
    _checkpoint,
    _checkpoint_observed,
    _count,
    _is_connect,
    checkpoint_dir,
    delete_files,
    keep_state,
    merge_saved,
)
from blooml.spark._dfplan import (
    _AGGS,
    _CELL,
    _CMPS,
    _INCREMENTAL,
    _OPS,
    DataFramePlan,
    _cell_merge_sql,
    _Unlowerable,
)
from blooml.spark._dfstate import (
    SMALL_DELTA,
    _any_sql,
    _atomic,
    _broadcast_bytes,
    _combine,
    _local_frame,
    _local_ok,
    _local_rows,
    _matches,
    _State,
    anti_join,
    learn_types,
)
from blooml.spark._dftick import (
    Carry,
    _as_frame,
    _eval_lat,
    _first_round,
    _incremental,
    _rule_rows,
    _rules,
    _stratum,
    _tick_delta_rows,
    _union,
    run_plan,
)

__all__ = ["Carry", "DataFramePlan", "run_plan"]

_REEXPORTED = (  # names other modules and tests import from here (kept as they were)
    _AGGS,
    _CELL,
    _CMPS,
    _INCREMENTAL,
    _OPS,
    SMALL_DELTA,
    STATE_ROW_GROUP,
    STATE_ROW_GROUPS,
    _Lowering,
    _Run,
    _State,
    _Unlowerable,
    _aggregate,
    _any_sql,
    _as_frame,
    _atomic,
    _broadcast_bytes,
    _cell_merge_sql,
    _checkpoint,
    _checkpoint_observed,
    _combine,
    _count,
    _eval_lat,
    _first_round,
    _incremental,
    _is_connect,
    _local_frame,
    _local_ok,
    _local_rows,
    _matches,
    _rule_rows,
    _rules,
    _stratum,
    _tick_delta_rows,
    _union,
    anti_join,
    checkpoint_dir,
    delete_files,
    keep_state,
    learn_types,
    merge_saved,
)
