"""The state of a Spark tick and how it is kept: merging derived rows into stored frames
(set semantics by an anti-join, keyed heads by one aggregation, a few rows as an *overlay* on
the driver). How a state is materialized (checkpoints, state files and their layout) is
:mod:`blooml.spark._dffiles`; lookups of stored rows and the helpers that move a few rows
between the driver and Spark without a job are :mod:`blooml.spark._dflookup`.

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from blooml.errors import KeyConstraintError
from blooml.ir import Group, Rule, Scan
from blooml.lattices._base import Lattice
from blooml.spark._dffiles import (
    _checkpoint,
    _checkpoint_observed,
    _count,
)
from blooml.spark._dflookup import (
    Lookups,
    _atomic,
    _local_frame,
    _local_ok,
    _local_plan,
    _local_rows,
    _matches,
    reads_of,
)
from blooml.spark._dfplan import _CELL, DataFramePlan, _cell_join, _cell_merge_sql

__all__ = ["anti_join", "learn_types"]

#: the most rows a delta kept on the driver may have (input lists, incremental group-bys)
SMALL_DELTA = 1024

#: the most rows (rows added, and values of rows removed) a collection's :class:`Overlay` holds
#: on the driver; past it the engine compacts the collection after the tick, as a maintenance
#: step of its own (``SparkEngine.compact``)
OVERLAY_ROWS = 8 * SMALL_DELTA


class Overlay:
    """The changes made to a stored collection since its frame was last materialized, kept
    on the driver: the rows added (``added``, the live ones) and, per tuple of columns, the
    values of the stored rows removed (``removed``: rows deleted, or replaced by a key's new
    row). The collection is ``base`` less the removed rows plus the added ones: one filter and
    one local relation, however many ticks changed it, so nothing is rewritten and the plan
    does not grow with the ticks (each change is merged into the overlay on the driver).
    Compaction (writing the collection anew) happens between ticks, when the overlay has
    grown past :data:`OVERLAY_ROWS` or when asked (``SparkEngine.compact``)."""

    __slots__ = ("added", "base", "frame", "removed")

    def __init__(self, base: Any) -> None:
        self.base = base
        self.removed: dict[tuple[str, ...], dict[tuple[Any, ...], None]] = {}
        self.added: list[tuple[Any, ...]] = []
        #: the frame :meth:`build` made last (the collection's state while it is current)
        self.frame: Any = base

    def copy(self) -> Overlay:
        """A copy to change inside a tick (a failed tick leaves the carried one as it was)."""
        out = Overlay(self.base)
        out.removed = {c: dict(v) for c, v in self.removed.items()}
        out.added = list(self.added)
        out.frame = self.frame
        return out

    def size(self) -> int:
        """Rows held on the driver: added rows and removed rows' values."""
        return len(self.added) + sum(len(v) for v in self.removed.values())

    def change(
        self,
        columns: list[str],
        cols: list[str],
        gone: list[tuple[Any, ...]],
        add: list[tuple[Any, ...]],
    ) -> None:
        """Remove the rows whose ``cols`` equal one of ``gone`` (NULL equal to NULL; values as
        Spark gives them back), then add the rows ``add``."""
        if gone:
            idx = [columns.index(c) for c in cols]
            out = set(gone)
            self.added = [r for r in self.added if tuple(r[i] for i in idx) not in out]
            self.removed.setdefault(tuple(cols), {}).update(dict.fromkeys(gone))
        self.added.extend(add)

    def build(self, spark: Any) -> Any:
        """The collection's frame: ``base`` less the removed rows, plus the added ones."""
        from pyspark.sql import functions as F

        df = self.base
        for cols, vals in self.removed.items():
            if vals:
                # one IN list: a negated filter prunes nothing (see _in_list)
                hit = _matches(list(cols), list(vals), self.base.schema, None)
                df = df.where(~F.coalesce(hit, F.lit(False)))
        if self.added:
            df = df.unionByName(_local_frame(spark, self.added, self.base.schema))
        self.frame = df
        return df


class _State:
    """The state of one tick being evaluated: stored frames and their exact row counts, this
    tick's deltas, and how derived rows merge into the stored frames (as new frames, or as
    a small *overlay* on them, kept on the driver). :class:`blooml.spark._dfeval._Run`
    evaluates rule bodies over it."""

    def __init__(self, spark: Any, plan: DataFramePlan, checkpoint_every: int) -> None:
        self.spark = spark
        self.plan = plan
        self.ir = plan.ir
        self.checkpoint_every = checkpoint_every
        self.state: dict[str, Any] = {}  # collection -> DataFrame (columns c0..cn), or absent
        self.delta: dict[str, Any] = {}
        self.lattices: dict[str, Lattice] = {n: i.initial for n, i in self.ir.lattices.items()}
        self.versions: dict[str, int] = {}
        self.recursive: set[str] = set()
        self.touched: list[list[int]] = []
        # exact row counts (state, and the current round's deltas): they decide which side of
        # a join is broadcast, instead of Spark's estimates for checkpointed frames
        self.n_state: dict[str, int] = {}
        self.n_delta: dict[str, int] = {}
        self.broadcast_bytes = _broadcast_bytes(spark)
        # id(a scanned frame) -> (the frame, its rows, its columns); the frame is kept so that
        # its id cannot be reused by another frame while the entry exists
        self.sizes: dict[int, tuple[Any, int, int]] = {}
        # cross-tick semi-naive: what changed this tick so far. The rows each collection gained
        # or grew (deltas with their sizes), the collections that lost rows (deletes, replaces,
        # scratches recomputed from nothing) and the lattice variables that grew. ``fresh``: no
        # earlier tick, so every rule runs over the whole state in its stratum's first round.
        self.fresh = True
        self.tick_delta: dict[str, list[tuple[Any, int]]] = {}
        self.shrunk: set[str] = set()
        #: collection -> the rows it lost this tick, when known on the driver (few deletes;
        #: see :meth:`delete_local`); absent when it lost rows otherwise (``shrunk``)
        self.removed: dict[str, list[tuple[Any, ...]]] = {}
        self.tick_lats: set[str] = set()
        #: scratches whose rows this tick came (also) from inputs or pending facts
        self.fed: set[str] = set()
        #: scratches derived by rules that start this tick empty and are derived in full
        self.reset: set[str] = set()
        #: collection -> this tick's delta as rows on the driver, while every part of it is a
        #: small local frame (see :meth:`merge_local`); None once a part is not
        self.tick_local: dict[str, list[tuple[Any, ...]] | None] = {}
        self._small_result: tuple[Any, int] = (None, 0)
        #: id(a local frame of rows on the driver) -> (the frame, its rows)
        self.local_frames: dict[int, tuple[Any, list[tuple[Any, ...]]]] = {}
        #: collection -> the changes on its materialized frame kept on the driver
        #: (:meth:`_layer`), across ticks; copied before this tick changes one
        self.overlays: dict[str, Overlay] = {}
        self._own: set[str] = set()
        #: collections given a new frame this tick other than by overlays: kept in full
        self.rewrite: set[str] = set()
        #: stored rows looked up this tick (by the values of some columns), and the lookups
        #: queued to run with the next one (:meth:`stored_rows`, :meth:`_ahead_for`)
        self.lookups = Lookups()
        #: collection -> what the rules reading it look up by its rows (:func:`reads_of`)
        self._reads: dict[str, list[tuple[str, tuple[str, ...], tuple[int, ...]]]] = {}

    # looking up stored rows -----------------------------------------------------------------

    def _base(self, name: str) -> tuple[Any, Overlay | None]:
        """``name``'s materialized frame and its overlay (None: the state is that frame)."""
        frame = self.state[name]
        ov = self.overlays.get(name)
        if ov is None or ov.frame is not frame:
            return frame, None
        return ov.base, ov

    def stored_rows(
        self, name: str, cols: list[str], keys: list[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        """The stored rows of ``name`` whose ``cols`` equal (NULL-safe) one of ``keys``: its
        materialized frame looked up (:class:`~blooml.spark._dflookup.Lookups`: once per value
        and tick, with the lookups queued for later rounds, in one job), its overlay applied
        on the driver. Keys whose stored rows the overlay removed (replaced by a key's new
        row, or deleted) are not looked up: their rows are the overlay's."""
        base, ov = self._base(name)
        got = self.lookups.rows(base, cols, _not_removed(ov, cols, keys))
        if ov is None:
            return got
        names = self.cols(name)
        gone = [([names.index(c) for c in rc], vals) for rc, vals in ov.removed.items() if vals]
        out = [r for r in got if not any(tuple(r[i] for i in ix) in v for ix, v in gone)]
        idx = [names.index(c) for c in cols]
        want = set(keys)
        out += [r for r in ov.added if tuple(r[i] for i in idx) in want]
        return out

    def _ahead_for(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        """Queue the lookups that rules reading ``name`` will make when ``rows`` (candidate
        rows of ``name``: some may turn out stored already) are its delta: the rows of the
        other side of a join or a ``notin`` with the same values, and the head rows a
        projection or a ``group`` of them merges into. They run with the next lookup, in its
        job, so that a fixpoint round whose delta is a few rows needs one job, not one per
        lookup."""
        if not rows:
            return
        reads = self._reads.get(name)
        if reads is None:
            reads = self._reads[name] = reads_of(self.ir, name)
        for target, cols, idx in reads:
            frame = self.state.get(target)
            if frame is None or not _atomic(frame.schema):
                continue
            base, ov = self._base(target)
            keys = [tuple(r[i] for i in idx) for r in rows]
            self.lookups.ahead(base, cols, _not_removed(ov, cols, keys))

    def known_rows(
        self, name: str, cols: list[str], keys: list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
        """The stored rows of ``name`` under those of ``keys`` that the driver knows without a
        job (looked up this tick, or all their stored rows removed by the overlay), by key."""
        base, ov = self._base(name)
        seen = self.lookups.seen(base, cols)
        gone = ov.removed.get(tuple(cols), {}) if ov is not None else {}
        mine = [k for k in dict.fromkeys(keys) if k in seen or k in gone]
        if not mine:
            return {}
        idx = [self.cols(name).index(c) for c in cols]
        out: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {k: [] for k in mine}
        for r in self.stored_rows(name, cols, mine):  # no job: every key is known
            out[tuple(r[i] for i in idx)].append(r)
        return out

    def name_of(self, frame: Any) -> str | None:
        """The collection whose current state ``frame`` is, if any."""
        return next((n for n, f in self.state.items() if f is frame), None)

    def lose(self, name: str) -> None:
        """``name`` lost rows this tick in a way not known row by row (see :meth:`delete_local`
        for deletes that are)."""
        self.shrunk.add(name)
        self.removed.pop(name, None)

    def delete_local(self, name: str, rows: Any, match: list[str]) -> bool:
        """Delete the stored rows of ``name`` whose ``match`` columns equal those of one of
        ``rows`` (a ``<-`` rule's facts), when they are few: one job collects them, one reads
        the stored rows they match (a filter by their values), and the state becomes its
        stored frame less those rows, a change of its overlay (nothing rewritten). The rows
        deleted are recorded in ``removed``, so that a ``group`` over ``name`` updates only
        the groups they touch. False (nothing done) when the rows are many or not atomic."""

        old = self.state[name]
        if not _atomic(old.schema):
            return False
        given = list(dict.fromkeys(tuple(r) for r in rows.select(*match).collect()))
        if len(given) > SMALL_DELTA:
            return False
        first = name not in self.shrunk
        keys = _local_rows(self.spark, given, old.select(*match).schema)
        if match == self.cols(name):  # what reads it looks up by the rows deleted: one job
            self._ahead_for(name, keys)
        gone = self.stored_rows(name, match, keys) if keys else []
        if gone:
            self._layer(name, self.state_rows(name) - len(gone), match, keys, [])
            self.shrunk.add(name)
            if first:
                self.removed[name] = gone
            else:
                self.removed.pop(name, None)
        return True

    def small(self, df: Any, rows: int | None, width: int) -> Any:
        """``df`` with a broadcast hint when its exact row count makes it cheap to ship."""
        if rows is not None and rows * (16 + 12 * width) <= self.broadcast_bytes:
            return df.hint("broadcast")
        return df

    def state_rows(self, name: str) -> int:
        """The stored row count of ``name`` (counted once when a tick starts without it)."""
        n = self.n_state.get(name)
        if n is None:
            old = self.state.get(name)
            n = 0 if old is None else _count(old)
            self.n_state[name] = n
        return n

    def cols(self, name: str) -> list[str]:
        return [f"c{i}" for i in range(len(self.ir.collections[name].columns))]

    # merging derived rows into the state ----------------------------------------------------

    def merge_local(self, name: str, rows: Any, given: list[Any]) -> bool:
        """Merge a few rows given on the driver (``given``, an input list; ``rows`` is its
        frame) into the stored set-semantics table ``name`` without a shuffle: one job reads
        which of the rows are stored already (a filter by their values), and the new ones
        stay on the driver as this tick's delta (a local frame: its rows and keys are known
        without a job). False (nothing done) when the rows are many, the table is keyed, has
        lattice columns or columns that are not atomic or not of the stored types, or
        their types are not known (a column of NULLs only)."""
        info = self.ir.collections[name]
        old = self.state.get(name)
        if info.values or self.plan.lattice_cols[name] or len(given) > SMALL_DELTA:
            return False
        if old is None:  # nothing stored: the distinct rows are the state and the delta
            from pyspark.sql.types import NullType

            if not _atomic(rows.schema) or any(
                isinstance(f.dataType, NullType) for f in rows.schema.fields
            ):
                return False
            learn_types(self.plan, name, rows)
            got = [r if isinstance(r, tuple) else (r,) for r in given]
            new = list(dict.fromkeys(_local_rows(self.spark, got, rows.schema)))
            delta = _local_frame(self.spark, new, rows.schema)
            self._store(name, delta, len(new), checkpointed=True)
            self._local_delta(name, delta, new)
            return True
        if not _local_ok(rows.schema, old.schema):
            return False
        learn_types(self.plan, name, rows)
        self._add_local(name, [r if isinstance(r, tuple) else (r,) for r in given])
        return True

    def _merge_small(self, name: str, rows: Any, got: list[tuple[Any, ...]] | None = None) -> bool:
        """Merge a few derived rows (checkpointed and counted) into the stored set-semantics
        collection ``name`` as :meth:`merge_local` merges an input list: the rows collected,
        the stored ones among them found by a filter, the new ones a local delta. The
        result is left in ``_small_result``. False when the collection is keyed or its
        columns do not allow it."""
        info = self.ir.collections[name]
        old = self.state[name]
        if not _local_ok(rows.schema, old.schema):
            return False
        if info.values:
            return self._merge_small_keyed(name, rows, got)
        if self.plan.lattice_cols[name]:
            return False
        learn_types(self.plan, name, rows)
        if got is None:
            got = [tuple(r) for r in rows.collect()]
        self._small_result = self._add_local(name, got)
        return True

    def _merge_small_keyed(
        self, name: str, rows: Any, got: list[tuple[Any, ...]] | None = None
    ) -> bool:
        """Merge a few derived rows into the stored keyed collection ``name`` on the driver:
        the rows collected and merged per key, one job reads the stored rows of their keys (a
        filter by the key values, which state files sorted or bucketed by the key prune), and
        the keys whose row is new or grew replace their stored rows in its overlay (no scan or
        shuffle of the state); they are the delta. Lattice columns merge as in :meth:`merge`
        (``lmax``/``lmin``/``lbool``, NULL their bottom); a key whose other values disagree
        takes :meth:`merge` instead, which says which rows conflict. False when it does not
        apply (nothing done)."""

        info = self.ir.collections[name]
        old = self.state[name]
        lat = self.plan.lattice_cols[name]
        if any(cls not in _CELL for cls in lat.values()):
            return False
        cols = self.cols(name)
        nk = len(info.keys)
        if got is None:
            got = [tuple(r) for r in rows.collect()]
        derived = _local_rows(self.spark, got, old.schema)
        merged: dict[tuple[Any, ...], list[Any]] = {}
        seen: dict[tuple[Any, ...], list[set[Any]]] = {}
        for r in derived:
            k, v = r[:nk], list(r[nk:])
            got = merged.get(k)
            if got is None:
                merged[k] = v
                seen[k] = [set() if v[j] is None else {v[j]} for j in range(len(v))]
                continue
            for j, c in enumerate(v):
                cls = lat.get(nk + j)
                if cls is not None:
                    got[j] = _cell_join(cls, got[j], c)
                elif c is not None:
                    seen[k][j].add(c)
                    got[j] = c if got[j] is None else got[j]
        if any(len(vals) > 1 for per in seen.values() for vals in per):
            return False  # derived rows disagree: merge() raises the KeyConstraintError
        learn_types(self.plan, name, rows)
        keys = list(merged)
        # what the rules reading name look up by its next delta, queued to run with this
        # lookup: not for keys whose stored row the driver knows already (looked up this
        # tick, or replaced in the overlay) and that this merge leaves as it is
        known = self.known_rows(name, cols[:nk], keys)
        self._ahead_for(
            name,
            [
                (*k, *v)
                for k, v in merged.items()
                if k not in known or not _leaves(known[k], v, nk, lat)
            ],
        )
        stored = {tuple(r[:nk]): tuple(r[nk:]) for r in self.stored_rows(name, cols[:nk], keys)}
        changed: list[tuple[Any, ...]] = []
        for k, v in merged.items():
            was = stored.get(k)
            if was is None:
                now = tuple(
                    _cell_join(lat[nk + j], None, c) if nk + j in lat else c
                    for j, c in enumerate(v)
                )
                changed.append((*k, *now))
                continue
            out = []
            for j, (w, c) in enumerate(zip(was, v, strict=True)):
                cls = lat.get(nk + j)
                if cls is None:
                    if w != c:
                        return False  # a stored value disagrees: merge() raises
                    out.append(w)
                else:
                    out.append(_cell_join(cls, w, c))
            if tuple(out) != was:
                changed.append((*k, *out))
        if not changed:
            self._small_result = (None, 0)
            return True
        changed = _local_rows(self.spark, changed, old.schema)
        delta = _local_frame(self.spark, changed, old.schema)
        added = sum(1 for r in changed if tuple(r[:nk]) not in stored)
        gone = [tuple(r[:nk]) for r in changed if tuple(r[:nk]) in stored]
        self._layer(name, self.state_rows(name) + added, cols[:nk], gone, changed)
        self._local_delta(name, delta, changed)
        self._small_result = (delta, len(changed))
        return True

    def _add_local(self, name: str, given: list[tuple[Any, ...]]) -> tuple[Any, int]:
        """Add the rows ``given`` (few) to the stored set-semantics collection ``name``: one
        job reads which are stored; returns (the new ones as a local frame or None, count)."""
        old = self.state[name]
        cols = self.cols(name)
        local = list(dict.fromkeys(_local_rows(self.spark, given, old.schema)))
        self._ahead_for(name, local)
        stored = {tuple(x) for x in self.stored_rows(name, cols, local)}
        new = [x for x in local if x not in stored]
        if not new:
            return None, 0
        delta = _local_frame(self.spark, new, old.schema)
        self._layer(name, self.state_rows(name) + len(new), cols, [], new)
        self._local_delta(name, delta, new)
        return delta, len(new)

    def _local_delta(self, name: str, delta: Any, rows: list[tuple[Any, ...]]) -> None:
        """Record ``rows`` (also the local frame ``delta``) as part of ``name``'s tick delta."""
        self.tick_delta.setdefault(name, []).append((delta, len(rows)))
        self.local_frames[id(delta)] = (delta, rows)
        known = self.tick_local.get(name, [])
        self.tick_local[name] = None if known is None else [*known, *rows]

    def incr_group(self, rule: Rule) -> tuple[Any, int]:
        """Update the scratch ``rule.head``, a ``group`` over a collection whose changes this
        tick are rows on the driver (gained, and lost for ``count()`` and ``sum``), for the
        groups those rows touch: per touched key the stored aggregate combined with the
        changes' (``count()``, ``sum``: added, lost rows subtracted; ``min``, ``max``: the
        least/greatest), a group whose ``count()`` falls to 0 removed, the other groups kept
        as stored. One job reads
        the stored rows of the touched keys (a filter by their values); the new state is the
        stored one less those keys plus their new rows (a local frame). Returns (the rows
        that changed or None, how many)."""
        node = rule.body
        assert isinstance(node, Group) and isinstance(node.input, Scan)  # _first_round
        name = rule.head
        old = self.state[name]
        cols = self.cols(name)
        nk = len(node.keys)
        src = node.input.name
        lost = self.removed.get(src, []) if src in self.shrunk else []
        inc: dict[tuple[Any, ...], list[Any]] = {}
        for sign, group in ((1, self.tick_local.get(src) or ()), (-1, lost)):
            for row in group:
                k = tuple(row[i] for i in node.keys)
                vals = [sign if a.col is None else sign * row[a.col] for a in node.aggs]
                got = inc.get(k)
                inc[k] = (
                    vals
                    if got is None
                    else [
                        _combine(a.fn, g, v) for a, g, v in zip(node.aggs, got, vals, strict=True)
                    ]
                )
        keys = _local_rows(self.spark, list(inc), old.select(*cols[:nk]).schema)
        inc = dict(zip(keys, inc.values(), strict=True))
        stored = {tuple(r[:nk]): tuple(r[nk:]) for r in self.stored_rows(name, cols[:nk], keys)}
        new_rows, changed = [], []
        counter = next((j for j, a in enumerate(node.aggs) if a.col is None), None)
        for k, v in inc.items():
            was = stored.get(k)
            now = (
                tuple(v)
                if was is None
                else tuple(
                    v[j] if w is None else _combine(a.fn, w, v[j])
                    for j, (a, w) in enumerate(zip(node.aggs, was, strict=True))
                )
            )
            if lost and counter is not None and not now[counter]:
                continue  # no rows left: the group has no row
            new_rows.append((*k, *now))
            if now != was:
                changed.append((*k, *now))
        new_rows = _local_rows(self.spark, new_rows, old.schema)
        self._layer(
            name,
            self.state_rows(name) + len(new_rows) - len(stored),
            cols[:nk],
            list(stored),
            new_rows,
        )
        now_by_key = {tuple(r[:nk]): tuple(r[nk:]) for r in new_rows}
        replaced = [(*k, *v) for k, v in stored.items() if now_by_key.get(k) != v]
        if replaced:  # stored groups' rows replaced or removed: known, for what reads them
            first = name not in self.shrunk
            self.shrunk.add(name)
            if first:
                self.removed[name] = replaced
            else:
                self.removed.pop(name, None)
        if not changed:
            return None, 0
        changed = _local_rows(self.spark, changed, old.schema)
        delta = _local_frame(self.spark, changed, old.schema)
        self._local_delta(name, delta, changed)
        return delta, len(changed)

    def merge(self, name: str, rows: Any, *, precount: bool = False) -> tuple[Any, int]:
        """Merge ``rows`` into ``name``'s state; returns (the delta — rows new or grown — or
        None, its size).

        ``precount``: the rows come from joining a tick's (usually small) delta with the state,
        and are often none: they are checkpointed and counted first (one job), and a merge
        of no rows reads and rewrites nothing."""
        from pyspark.sql import functions as F

        if precount and self.state.get(name) is not None:
            if _local_plan(rows):  # rows derived on the driver: collected with no job
                got = [tuple(r) for r in rows.collect()]
                if not got:
                    return None, 0
                if len(got) <= SMALL_DELTA and self._merge_small(name, rows, got):
                    return self._small_result
            else:
                rows, (n_rows,) = _checkpoint_observed(rows, "count(1)")
                if n_rows == 0:
                    return None, 0
                if n_rows <= SMALL_DELTA and self._merge_small(name, rows):
                    return self._small_result

        info = self.ir.collections[name]
        cols = self.cols(name)
        nk = len(info.keys) if info.values else len(cols)
        keys, values = cols[:nk], cols[nk:]
        lat = self.plan.lattice_cols[name]
        if rows.columns != cols:
            rows = rows.select(*[F.col(c) for c in cols])
        learn_types(self.plan, name, rows)
        old = self.state.get(name)
        if not values:  # set semantics: the delta is the rows not stored yet
            n_old = 0 if old is None else self.state_rows(name)
            delta = rows.distinct()
            if old is not None:
                delta = anti_join(delta, self.small(old, n_old, len(cols)), cols)
            delta, (n,) = _checkpoint_observed(delta, "count(1)")
            if n == 0:
                return None, 0
            self._store(name, delta if old is None else old.unionByName(delta), n_old + n)
            self.tick_delta.setdefault(name, []).append((delta, n))
            self.tick_local[name] = None
            return delta, n
        # One aggregation over the derived rows and the stored ones (if any) gives the new state:
        # per key, lattice columns merged by their SQL aggregate, other values kept from the
        # stored row (a derived row that disagrees is a conflict), and whether the key is new,
        # grew, or conflicts. It is checkpointed once: the state is all of it, the delta its
        # changed rows. No join with the state: a join's size estimate is the product of its
        # inputs', and fed back through checkpoints round after round its digits doubled until
        # planning alone took seconds (SSSP over 50k edges: 14 s in round 21).
        both = rows.selectExpr(*cols, "false AS _old")
        if old is not None:
            both = both.unionByName(old.selectExpr(*cols, "true AS _old"))
        aggs = ["bool_or(_old) AS _present", "bool_or(NOT _old) AS _new"]
        sel = list(keys)
        grew, conflict = [], []
        for i, c in enumerate(values, start=nk):
            cls = lat.get(i)
            if cls is not None:
                aggs += [
                    f"{_cell_merge_sql(cls, c)} AS {c}",
                    f"{_CELL[cls]}({c}) FILTER (WHERE _old) AS o{c}",
                ]
                sel.append(c)
                grew.append(f"NOT ({c} <=> o{c})")
            else:
                aggs += [
                    f"first({c}, true) FILTER (WHERE NOT _old) AS d{c}",
                    f"first({c}) FILTER (WHERE _old) AS o{c}",
                    f"count(DISTINCT {c}) FILTER (WHERE NOT _old) > 1 AS x{c}",
                ]
                sel.append(f"CASE WHEN _present THEN o{c} ELSE d{c} END AS {c}")
                conflict.append(f"(x{c} OR (_present AND _new AND NOT (d{c} <=> o{c})))")
        full, (n_rows, n, bad) = _checkpoint_observed(
            both.groupBy(*keys)
            .agg(*[F.expr(a) for a in aggs])
            .selectExpr(
                *sel,
                f"(_new AND (NOT _present OR {_any_sql(grew)})) AS _changed",
                f"{_any_sql(conflict)} AS _conflict",
            ),
            "count(1)",
            "count_if(_changed OR _conflict)",
            "coalesce(max(CAST(_conflict AS int)), 0)",
        )
        if bad:
            self._conflict(name, keys, cols, rows, old, full.where("_conflict").first())
        if n == 0:
            return None, 0
        self._store(name, full.select(*cols), n_rows, checkpointed=True)
        delta = full.where("_changed").select(*cols)
        self.tick_delta.setdefault(name, []).append((delta, n))
        self.tick_local[name] = None
        return delta, n

    def _conflict(
        self, name: str, keys: list[str], cols: list[str], rows: Any, old: Any, bad: Any
    ) -> None:
        """Raise the KeyConstraintError of a conflicting key: the stored row (or the first
        derived one) against a derived row that disagrees with it."""
        from pyspark.sql import functions as F

        key = tuple(bad[k] for k in keys)
        where = F.lit(True)
        for k, v in zip(keys, key, strict=True):
            where = where & F.col(k).eqNullSafe(F.lit(v))
        derived = [tuple(r) for r in rows.where(where).select(*cols).distinct().limit(2).collect()]
        stored = None if old is None else old.where(where).first()
        first = tuple(stored) if stored is not None else derived[0]
        other = next((r for r in derived if r != first), derived[-1])
        raise KeyConstraintError(name, key if len(key) != 1 else key[0], first, other)

    def _layer(
        self,
        name: str,
        rows: int,
        cols: list[str],
        gone: list[tuple[Any, ...]],
        add: list[tuple[Any, ...]],
    ) -> None:
        """The new state of ``name`` (``rows`` rows): its stored rows whose ``cols`` equal one
        of ``gone`` removed, the rows ``add`` (on the driver, typed as stored) added, as a
        change of its :class:`Overlay` (its materialized frame, read back from the checkpoint
        directory's files or a checkpoint, stays as it is; nothing runs)."""
        ov = self.overlays.get(name)
        cur = self.state[name]
        if ov is None or ov.frame is not cur:  # the state was replaced: a new overlay on it
            ov = Overlay(cur)
            self.overlays[name] = ov
            self._own.add(name)
        elif name not in self._own:
            ov = self.overlays[name] = ov.copy()
            self._own.add(name)
        ov.change(self.cols(name), cols, gone, add)
        self.state[name] = ov.build(self.spark)
        self.n_state[name] = rows

    def _store(self, name: str, state: Any, rows: int, *, checkpointed: bool = False) -> None:
        """The new state of ``name`` (``rows`` rows); checkpointed every ``checkpoint_every``
        versions unless it is a checkpoint already."""
        self.rewrite.add(name)
        self.versions[name] = self.versions.get(name, 0) + 1
        if not checkpointed and self.versions[name] % self.checkpoint_every == 0:
            state = _checkpoint(state)
        self.state[name] = state
        self.n_state[name] = rows


def _leaves(
    stored: list[tuple[Any, ...]], values: list[Any], nk: int, lat: Mapping[int, type]
) -> bool:
    """Whether merging ``values`` (a key's merged derived values) into the key's stored rows
    ``stored`` leaves them as they are: one stored row, each lattice value at least as high
    as the derived one's, each other value equal."""
    if len(stored) != 1:
        return False
    was = stored[0][nk:]
    for j, (w, c) in enumerate(zip(was, values, strict=True)):
        cls = lat.get(nk + j)
        if (w != c) if cls is None else (_cell_join(cls, w, c) != w):
            return False
    return True


def _not_removed(
    ov: Overlay | None, cols: Iterable[str], keys: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """``keys`` less those whose stored rows (by ``cols``) the overlay ``ov`` removed: the
    materialized frame's rows under them are gone, so looking them up there reads for
    nothing."""
    gone = ov.removed.get(tuple(cols)) if ov is not None else None
    return [k for k in keys if k not in gone] if gone else list(keys)


def _broadcast_bytes(spark: Any) -> int:
    """The session's broadcast threshold in bytes (``spark.sql.autoBroadcastJoinThreshold``;
    -1 turns broadcasting off, as it does for Spark's own choices)."""
    try:
        raw = str(spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760"))
    except Exception:  # pragma: no cover - a conf service that refuses: Spark's default
        raw = "10485760"
    units = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = raw.strip().lower().removesuffix("b") or "0"
    scale = units.get(text[-1], 1)
    try:
        return int(float(text.rstrip("kmg") or 0) * scale)
    except ValueError:  # pragma: no cover
        return 10 << 20


def anti_join(left: Any, right: Any, cols: list[str]) -> Any:
    """The rows of ``left`` whose ``cols`` equal those of no row of ``right`` (which has those
    columns), NULL-safe as the local engine compares (None equals None): ``<=>``, which Spark
    still plans as a hash or broadcast anti-join. A join on column names (``left.join(right,
    cols, "left_anti")``) would keep every row with a NULL in ``cols``."""
    from pyspark.sql import functions as F

    other = right.select(*[F.col(c).alias(f"_r{c}") for c in cols])
    cond = " AND ".join(f"`{c}` <=> `_r{c}`" for c in cols)
    return left.join(other, F.expr(cond), "left_anti")


def _combine(fn: str, a: Any, b: Any) -> Any:
    """Two partial results of an incremental aggregate (:data:`_INCREMENTAL`) combined."""
    if fn in ("count", "sum"):
        return a + b
    return min(a, b) if fn == "min" else max(a, b)


def _any_sql(conds: Any) -> str:
    """SQL for "any of ``conds`` is true" (NULL counts as false)."""
    parts = [f"coalesce({c}, false)" for c in conds]
    return "(" + " OR ".join(parts) + ")" if parts else "false"


def learn_types(plan: DataFramePlan, name: str, rows: Any) -> None:
    """Record the Spark types of ``rows``' columns for collection ``name`` (the first known,
    ``void`` never), so that its frame has them while it is empty."""
    known = plan.column_types[name]
    if len(known) == len(plan.ir.collections[name].columns):
        return
    from pyspark.sql.types import NullType

    for i, f in enumerate(rows.schema.fields):
        if not isinstance(f.dataType, NullType):
            known.setdefault(i, f.dataType)
