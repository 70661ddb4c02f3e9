"""Lookups of stored rows from the driver: the rows of a collection whose columns equal one of
a few values, as a filter Parquet state files prune (sorted by the first column, row groups
with min/max statistics and pages with their ranges; a lookup by another column reads the
collection's copy sorted by that column when it has one, see :func:`lookup_columns`), cached
for the tick and batched: the lookups a tick will need next
(:meth:`Lookups.ahead`) ride along with the one it needs now, in one Spark job; and the
helpers that move a few rows between the driver and Spark without a job.

This module knows nothing of the IR or the DSL.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from blooml.ir import Scan

__all__ = ["Lookups", "lookup_columns", "reads_of", "sorted_copy", "with_sorted_copies"]

#: a collection's materialized frame (its state files) -> column -> a copy of the same rows
#: written sorted by that column (:func:`blooml.spark._dffiles.keep_state`), which lookups by
#: that column filter instead, so that Parquet skips to the pages of their values
_SORTED: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def with_sorted_copies(frame: Any, copies: Mapping[str, Any]) -> Any:
    """``frame``, recorded as having ``copies`` (column -> a frame of the same rows and
    columns, sorted by that column): :class:`Lookups` by those columns read the copies."""
    if copies:
        _SORTED[frame] = dict(copies)
    return frame


def sorted_copy(frame: Any, col: str) -> Any:
    """The copy of ``frame``'s rows sorted by ``col`` (:func:`with_sorted_copies`), or
    ``frame`` itself when it has none."""
    try:
        return _SORTED.get(frame, {}).get(col, frame)
    except TypeError:  # pragma: no cover - a frame that cannot be weakly referenced
        return frame


class Lookups:
    """Stored rows looked up by the values of some columns during one tick, on the driver.

    A frame that does not change (a collection's materialized frame: its state files, or a
    checkpoint) is looked up at most once per value: the rows found (none included) are kept
    by ``(id(frame), columns)``. Lookups queued with :meth:`ahead` (the rows a later round will
    need, e.g. the edges leaving the nodes a merge may change) run with the next lookup that
    needs a job, as one job: a union of the filtered frames, each filter pruned by Parquet."""

    def __init__(self) -> None:
        #: (id(frame), columns) -> (the frame, {values: its rows with those values})
        self.found: dict[tuple[int, tuple[str, ...]], tuple[Any, dict[tuple[Any, ...], list]]] = {}
        self.queued: list[tuple[Any, tuple[str, ...], list[tuple[Any, ...]]]] = []
        #: jobs run and rows fetched (for tests and logs)
        self.jobs = 0
        #: the longest IN list pushed to Parquet as equalities (:func:`in_chunk`), read once
        self._chunk: int | None = None

    def _known(self, frame: Any, cols: tuple[str, ...]) -> dict[tuple[Any, ...], list]:
        entry = self.found.get((id(frame), cols))
        if entry is None or entry[0] is not frame:
            entry = (frame, {})
            self.found[(id(frame), cols)] = entry
        return entry[1]

    def seen(self, frame: Any, cols: Iterable[str]) -> dict[tuple[Any, ...], list]:
        """The values of ``cols`` looked up in ``frame`` this tick, with the rows found (none
        included): what :meth:`rows` answers without a job."""
        return self._known(frame, tuple(cols))

    def ahead(self, frame: Any, cols: Iterable[str], keys: Iterable[tuple[Any, ...]]) -> None:
        """Queue a lookup of ``frame``'s rows whose ``cols`` equal one of ``keys``, to run
        with the next lookup that needs a job."""
        cols = tuple(cols)
        known = self._known(frame, cols)
        missing = [k for k in dict.fromkeys(keys) if k not in known]
        if missing:
            self.queued.append((frame, cols, missing))

    def rows(
        self, frame: Any, cols: Iterable[str], keys: Iterable[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        """``frame``'s rows whose ``cols`` equal (NULL-safe) one of ``keys`` (values as Spark
        gives them back): from the driver when looked up before, else in one job with the
        queued lookups."""
        cols = tuple(cols)
        keys = list(dict.fromkeys(keys))
        known = self._known(frame, cols)
        missing = [k for k in keys if k not in known]
        if missing:
            self._run([(frame, cols, missing)])
        return [r for k in keys for r in known.get(k, ())]

    def _run(self, asked: list[tuple[Any, tuple[str, ...], list[tuple[Any, ...]]]]) -> None:
        from pyspark.sql import functions as F

        todo = []
        for frame, cols, keys in [*asked, *self.queued]:
            known = self._known(frame, cols)
            keys = [k for k in keys if k not in known]
            if keys:
                todo.append((frame, cols, keys))
        self.queued = []
        if not todo:
            return
        if self._chunk is None:
            self._chunk = in_chunk(todo[0][0].sparkSession)
        parts = []
        for i, (frame, cols, keys) in enumerate(todo):
            # by a column the state files are not sorted by: its sorted copy, when written
            src = sorted_copy(frame, cols[0]) if cols else frame
            hit = src.where(_matches(list(cols), keys, frame.schema, self._chunk))
            parts.append(
                hit.select(
                    F.lit(i).alias("_q"),
                    *[F.col(c).alias(f"q{i}_{j}") for j, c in enumerate(frame.columns)],
                )
            )
        union = parts[0]
        for p in parts[1:]:
            union = union.unionByName(p, allowMissingColumns=True)
        got = union.collect()
        self.jobs += 1
        for i, (frame, cols, keys) in enumerate(todo):
            known = self._known(frame, cols)
            for k in keys:
                known.setdefault(k, [])
            idx = [frame.columns.index(c) for c in cols]
            width = len(frame.columns)
            for r in got:
                if r["_q"] != i:
                    continue
                row = tuple(r[f"q{i}_{j}"] for j in range(width))
                known.setdefault(tuple(row[j] for j in idx), []).append(row)


def _atomic(schema: Any) -> bool:
    """Whether every column of ``schema`` is of a type a SQL literal states exactly (numbers,
    strings, booleans, dates, timestamps with a time zone): rows of such a frame can live on
    the driver as a local frame (:func:`_local_frame`)."""
    from pyspark.sql import types as T

    ok = (T.NumericType, T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.NullType)
    return all(isinstance(f.dataType, ok) for f in schema.fields)


def _local_ok(rows: Any, stored: Any) -> bool:
    """Whether rows of schema ``rows`` can be merged as local rows into a collection stored
    with schema ``stored``: atomic columns (:func:`_atomic`) of the stored types (rows of
    another type take the full merge, which unifies them or says why not)."""
    from pyspark.sql.types import NullType

    return _atomic(stored) and all(
        f.dataType == t.dataType or isinstance(f.dataType, NullType)
        for f, t in zip(rows.fields, stored.fields, strict=True)
    )


def _local_plan(df: Any) -> bool:
    """Whether ``df``'s rows are a local relation once Spark has optimized its plan (rows on
    the driver, selected, filtered and computed there): collecting it runs no job. Classic
    sessions (Spark Connect: False)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return False
    try:
        plan = jdf.queryExecution().optimizedPlan()
        return bool(plan.getClass().getSimpleName() == "LocalRelation")
    except Exception:  # pragma: no cover - an internal API moved: take the general path
        return False


def _local_frame(spark: Any, rows: list[tuple[Any, ...]], schema: Any) -> Any:
    """A frame of ``rows`` (at least one) with ``schema``'s columns and types, as a local
    relation (an inline table of parameters): collecting it, or filtering by its values, runs
    no job (``createDataFrame`` on a classic session makes an RDD, scanned by a job)."""
    width = len(schema.fields)
    values = ", ".join("(" + ", ".join(["?"] * width) + ")" for _ in rows)
    cols = ", ".join(
        f"CAST(col{i + 1} AS {f.dataType.simpleString()}) AS `{f.name}`"
        for i, f in enumerate(schema.fields)
    )
    args = [v for r in rows for v in r]
    return spark.sql(f"SELECT {cols} FROM VALUES {values}", args=args)


def _local_rows(spark: Any, rows: list[tuple[Any, ...]], schema: Any) -> list[tuple[Any, ...]]:
    """``rows`` as Spark gives them back in ``schema``'s types (a Python int of a ``double``
    column becomes a float, ...), so that they compare equal to collected rows (no job)."""
    if not rows or not schema.fields:  # no columns (a global aggregate's key): nothing to type
        return [tuple(r) for r in rows]
    return [tuple(r) for r in _local_frame(spark, rows, schema).collect()]


#: what Spark pushes to Parquet as equalities: an ``IN`` list of at most this many values
#: (``spark.sql.parquet.pushdown.inFilterThreshold``'s default; the session's value is read
#: by :func:`in_chunk`)
IN_PUSHDOWN = 10


def in_chunk(spark: Any) -> int:
    """The longest ``IN`` list that ``spark`` pushes to Parquet as equalities (at least 1)."""
    try:
        raw = spark.conf.get("spark.sql.parquet.pushdown.inFilterThreshold", str(IN_PUSHDOWN))
        return max(1, int(str(raw)))
    except Exception:  # pragma: no cover - an unreadable setting: Spark's default
        return IN_PUSHDOWN


def _in_list(col: str, vals: list[Any], dtype: Any, chunk: int = IN_PUSHDOWN) -> Any:
    """A Column: ``col`` is one of ``vals`` (none None), as a filter Parquet prunes *pages*
    by. Spark pushes an ``IN`` list of more than ``chunk`` values as one ``IN`` predicate,
    which Parquet's column index (the page skipping of sorted state files) prunes by the
    list's smallest and largest values only: 100 scattered keys of a 200,000-row file read
    95,950 rows, nearly every page. Lists of at most ``chunk`` values OR-ed are pushed as
    equalities, each skipping to its own pages (19,580 rows for the same keys). The whole
    list is kept beside them (``AND``): rows of the pages read are tested by one hash lookup,
    and only the rows that match by the chunks."""
    from pyspark.sql import functions as F

    with contextlib.suppress(TypeError):  # values of mixed types: kept in their order
        vals = sorted(vals)  # chunks of neighbouring values: narrow if pushed as ranges
    lits = [F.lit(v).cast(dtype) for v in vals]
    whole = F.col(col).isin(lits)
    if len(lits) <= chunk:
        return whole
    parts = [F.col(col).isin(lits[i : i + chunk]) for i in range(0, len(lits), chunk)]
    while len(parts) > 1:  # a balanced OR: its depth grows with log(chunks), not chunks
        parts = [
            parts[i] | parts[i + 1] if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return whole & parts[0]


def _matches(
    cols: list[str], rows: list[tuple[Any, ...]], schema: Any, chunk: int | None = IN_PUSHDOWN
) -> Any:
    """A Column: the row's ``cols`` equal (NULL-safe) those of one of ``rows``. ``chunk``: the
    first column's values as ``IN`` lists of at most that many values (:func:`_in_list`, so
    that Parquet prunes pages by each value); None: one list (a filter that prunes nothing,
    e.g. negated)."""
    from pyspark.sql import functions as F

    def among(col: str, vals: list[Any]) -> Any:
        t = types[col]
        if chunk is None:
            return F.col(col).isin([F.lit(v).cast(t) for v in vals])
        return _in_list(col, vals, t, chunk)

    if not cols:  # no key columns (a global aggregate's one row): every row matches
        return F.lit(bool(rows))
    types = {f.name: f.dataType for f in schema.fields}
    if len(cols) == 1:
        c = F.col(cols[0])
        vals = list(dict.fromkeys(r[0] for r in rows if r[0] is not None))
        out = among(cols[0], vals) if vals else F.lit(False)
        if any(r[0] is None for r in rows):
            out = out | c.isNull()
        return out
    first = list(dict.fromkeys(r[0] for r in rows if r[0] is not None))
    # the first column alone: a filter Parquet pushes down (files are sorted by it)
    head = among(cols[0], first) if first else F.lit(False)
    if any(r[0] is None for r in rows):
        head = head | F.col(cols[0]).isNull()
    out = F.lit(False)
    plain = [r for r in rows if None not in r]
    if plain:
        out = F.struct(*cols).isin(
            [
                F.struct(*[F.lit(v).cast(types[c]).alias(c) for c, v in zip(cols, r, strict=True)])
                for r in plain
            ]
        )
    for r in rows:
        if None in r:
            cond = F.lit(True)
            for name, v in zip(cols, r, strict=True):
                cond = cond & F.col(name).eqNullSafe(F.lit(v).cast(types[name]))
            out = out | cond
    return head & out


def _walk(node: Any) -> Any:
    """``node`` and every node under it."""
    yield node
    for attr in ("input", "left", "right"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, (int, str)):
            yield from _walk(child)
    for child in getattr(node, "inputs", ()) or ():
        yield from _walk(child)


def reads_of(ir: Any, name: str) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """What the rules reading collection ``name`` look up by the values of its rows, as
    (collection, its columns looked up, the positions in ``name``'s rows of the values): the
    other input of an inner equi-join or a ``notin`` with a scan of ``name``, and the head
    that a scan, a projection of columns or a ``group`` of ``name`` merges into (by its key
    columns, or every column of a set-semantics head)."""
    from blooml.ir import Group, Join, Map, NotIn
    from blooml.ir import exprs as X

    out: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = []
    for rule in ir.rules:
        for node in _walk(rule.body):
            if isinstance(node, Join) and node.how == "inner":
                for a, inp in enumerate(node.inputs):
                    if not (isinstance(inp, Scan) and inp.name == name):
                        continue
                    for b, other in enumerate(node.inputs):
                        if b == a or not isinstance(other, Scan):
                            continue
                        pairs = [
                            (p.lcol, p.rcol) if p.left == a else (p.rcol, p.lcol)
                            for p in node.preds
                            if {p.left, p.right} == {a, b}
                        ]
                        if pairs:
                            out.append(
                                (
                                    other.name,
                                    tuple(f"c{bc}" for _, bc in pairs),
                                    tuple(ac for ac, _ in pairs),
                                )
                            )
            if (
                isinstance(node, NotIn)
                and node.fn is None
                and isinstance(node.left, Scan)
                and isinstance(node.right, Scan)
                and name in (node.left.name, node.right.name)
            ):
                pairs = [(p.lcol, p.rcol) for p in node.preds] or [
                    (i, i) for i in range(len(node.left.cols))
                ]
            else:
                pairs = []
            if pairs and node.left.name == name:
                out.append(
                    (node.right.name, tuple(f"c{b}" for _, b in pairs), tuple(a for a, _ in pairs))
                )
            if pairs and node.right.name == name:
                # the right side's rows change which left rows the notin keeps: the left rows
                # under their values, and the right side's own (blooml.spark._dfnotin)
                at = tuple(b for _, b in pairs)
                out.append((node.left.name, tuple(f"c{a}" for a, _ in pairs), at))
                out.append((name, tuple(f"c{b}" for b in at), at))
        head = ir.collections.get(rule.head)
        body = rule.body
        if head is None:
            continue
        nk = len(head.keys) if head.values else len(head.columns)
        proj: tuple[int, ...] | None = None
        if isinstance(body, Scan) and body.name == name:
            proj = tuple(range(nk))
        elif isinstance(body, Group) and isinstance(body.input, Scan) and body.input.name == name:
            proj, nk = tuple(body.keys), len(body.keys)
        elif isinstance(body, Map) and isinstance(body.input, Scan) and body.input.name == name:
            try:
                expr = body.expr
            except Exception:  # pragma: no cover - a function that does not decompile
                expr = None
            items = expr.items if isinstance(expr, X.TupleExpr) else (expr,)
            got = []
            for e in items[:nk]:
                if isinstance(e, X.Attr) and isinstance(e.obj, X.Arg) and e.name in body.input.cols:
                    got.append(body.input.cols.index(e.name))
            if len(got) == nk and len(items) == len(head.columns):
                proj = tuple(got)
        if proj is not None and (nk or isinstance(body, Group)):  # a global group: its row
            out.append((rule.head, tuple(f"c{i}" for i in range(nk)), proj))
    return list(dict.fromkeys(out))


def lookup_columns(ir: Any, name: str) -> tuple[str, ...]:
    """The columns other than the first (``c1``, ...) by which the rules look up collection
    ``name``'s stored rows (:func:`reads_of` of every collection: a lookup prunes by its first
    column), in a stable order: the columns its state files get a sorted copy by, so that such
    a lookup reads a page per value, not every row group holding one (a ``notin`` by the
    destination of edges stored sorted by their source)."""
    out: dict[str, None] = {}
    for src in ir.collections:
        for target, cols, _ in reads_of(ir, src):
            if target == name and cols and cols[0] != "c0":
                out[cols[0]] = None
    return tuple(out)
