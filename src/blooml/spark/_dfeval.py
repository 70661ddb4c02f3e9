"""Evaluating rule bodies as Spark DataFrames: scans of the state or of a round's delta,
selections and projections lowered from recovered expressions (:class:`_Lowering`), equi-joins
(the smallest input broadcast by its exact size, the others filtered by the values of a few
rows on the driver), anti-joins for ``notin`` and ``groupBy`` for aggregates.

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from typing import Any

from blooml.ir import (
    ArgAgg,
    Choose,
    Filter,
    FlatMap,
    Group,
    Join,
    Literal,
    Map,
    Node,
    NotIn,
    Reduce,
    Scan,
)
from blooml.ir import exprs as X
from blooml.lattices import lmax
from blooml.spark._dflookup import _in_list, in_chunk
from blooml.spark._dfstate import SMALL_DELTA, _atomic, _local_frame, _matches, _State
from blooml.spark._exactsum import exact_avg, exact_sum, is_float_type

#: :meth:`_Run._driver_join` does not apply (None means "no rows")
_NOT_ON_DRIVER = object()


class _Lowering:
    """Turns recovered expressions into Spark Columns (input i's columns are ``i{i}_{col}``)."""

    def __init__(self, columns: list[tuple[str, ...]], types: list[list[type | None]]) -> None:
        self.columns = columns
        self.types = types

    def name(self, i: int, col: int) -> str:
        return f"i{i}_{col}"

    def col(self, e: X.Expr) -> Any:
        from pyspark.sql import functions as F

        if isinstance(e, X.Attr) and isinstance(e.obj, X.Arg):
            i = e.obj.index
            return F.col(self.name(i, self.columns[i].index(e.name)))
        if isinstance(e, X.Item) and isinstance(e.obj, X.Arg):
            return F.col(self.name(e.obj.index, e.key.value))  # type: ignore[attr-defined]
        if isinstance(e, X.Const):
            return F.lit(e.value)
        if isinstance(e, X.BinOp):
            a, b = self.col(e.left), self.col(e.right)
            return {"+": a + b, "-": a - b, "*": a * b}[e.op]  # ⊥ (NULL) + n stays ⊥
        if isinstance(e, X.Compare):
            a, b = self.col(e.left), self.col(e.right)
            return {
                "<": a < b,
                "<=": a <= b,
                "==": a == b,
                "!=": a != b,
                ">": a > b,
                ">=": a >= b,
            }[e.op]
        if isinstance(e, X.Unary):
            a = self.col(e.operand)
            return -a if e.op == "-" else ~a
        if isinstance(e, X.LatNew):
            return self.col(e.args[0])
        if isinstance(e, X.Method):
            a, b = self.col(e.obj), self.col(e.args[0])
            cls = self.type_of(e.obj)
            keeps_bottom = (cls is lmax) == (e.name == "min_of")  # min with -inf / max with +inf
            out = F.least(a, b) if e.name == "min_of" else F.greatest(a, b)
            return F.when(a.isNull(), F.lit(None)).otherwise(out) if keeps_bottom else out
        raise AssertionError(f"unchecked expression {e!r}")  # pragma: no cover - planned

    def type_of(self, e: X.Expr) -> type | None:
        if isinstance(e, X.Attr) and isinstance(e.obj, X.Arg):
            i = e.obj.index
            return self.types[i][self.columns[i].index(e.name)]
        if isinstance(e, X.LatNew):
            return e.cls
        if isinstance(e, (X.BinOp, X.Method)):
            return self.type_of(e.left if isinstance(e, X.BinOp) else e.obj)
        return None


class _Run(_State):
    """One tick's evaluation: :class:`~blooml.spark._dfstate._State` and the DataFrame of each
    rule body over it."""

    # the relational part ---------------------------------------------------------------------

    def eval(self, node: Node, delta_at: int | None, counter: list[int]) -> Any:
        """A DataFrame of ``node``'s rows (columns c0..), or None for no rows."""
        from pyspark.sql import functions as F

        if isinstance(node, Scan):
            idx = counter[0]
            width = len(self.ir.collections[node.name].columns)
            if node.name in self.recursive:
                counter[0] += 1
                if delta_at is not None and idx == delta_at:
                    delta = self.delta.get(node.name)
                    if delta is not None:
                        self.sizes[id(delta)] = (delta, self.n_delta[node.name], width)
                    return delta
            old = self.state.get(node.name)
            if old is not None:
                self.sizes[id(old)] = (old, self.state_rows(node.name), width)
            return old
        if isinstance(node, Literal):
            if not node.rows:
                return None
            return self.spark.createDataFrame(
                [tuple(r) for r in node.rows], [f"c{i}" for i in range(len(node.rows[0]))]
            )
        if isinstance(node, (Map, Filter, FlatMap)) and self.plan.python_nodes.get(id(node)):
            return _dfpython.eval_python(self, node, delta_at, counter)
        if isinstance(node, (Map, Filter)):
            inputs = node.input.inputs if isinstance(node.input, Join) else (node.input,)
            if isinstance(node.input, Join):
                df = self._join(node.input, delta_at, counter)
            else:
                df = self.eval(node.input, delta_at, counter)
                if df is not None:
                    df = df.toDF(*[f"i0_{c[1:]}" for c in df.columns])
            if df is None:
                return None
            low = self._lowering(inputs)
            expr = node.expr
            assert expr is not None  # planned
            if isinstance(node, Filter):
                width = len(df.columns)
                out = df.where(low.col(expr))
                return out.toDF(*[f"c{j}" for j in range(width)])
            items = expr.items if isinstance(expr, X.TupleExpr) else (expr,)
            return df.select(*[low.col(e).alias(f"c{j}") for j, e in enumerate(items)])
        if isinstance(node, Join):
            df = self._join(node, delta_at, counter)
            if df is None:
                return None
            return df.toDF(*[f"c{j}" for j in range(len(df.columns))])
        if isinstance(node, NotIn) and node.fn is not None:
            return _dfpython.eval_notin(self, node, delta_at, counter)
        if isinstance(node, (ArgAgg, Choose, Reduce)):
            return _dfpython.eval_grouped(self, node, counter)
        if isinstance(node, NotIn):
            left = self.eval(node.left, delta_at, counter)
            if left is None:
                return None
            right = self.eval(node.right, None, counter)
            if right is None:
                return left
            pairs = [(p.lcol, p.rcol) for p in node.preds] or [
                (i, i) for i in range(len(left.columns))
            ]
            got = self.local_frames.get(id(left))
            if (
                got is not None
                and got[0] is left
                and len(got[1]) <= SMALL_DELTA
                and _atomic(left.schema)
                and _atomic(right.schema)
            ):
                # a few rows on the driver: one job reads the right side's rows matching
                # their values (a filter that state files prune), the rest on the driver
                keys = list(dict.fromkeys(tuple(x[a] for a, _ in pairs) for x in got[1]))
                rcols = [right.columns[b] for _, b in pairs]
                found = {tuple(x[b] for _, b in pairs) for x in self._lookup(right, rcols, keys)}
                keep = [x for x in got[1] if tuple(x[a] for a, _ in pairs) not in found]
                if not keep:
                    return None
                out = _local_frame(self.spark, keep, left.schema)
                self.local_frames[id(out)] = (out, keep)
                return out
            r = right.toDF(*[f"r{c}" for c in right.columns])
            cond = [left[f"c{a}"].eqNullSafe(r[f"rc{b}"]) for a, b in pairs]
            return left.join(r, cond, "left_anti")
        if isinstance(node, Group):
            df = self.eval(node.input, None, counter)
            if df is None:
                return None
            _dfpython.check_group(self.plan, node, df)
            by = [F.col(f"c{k}") for k in node.keys]
            aggs = []
            for j, a in enumerate(node.aggs):
                dtype = None if a.col is None else df.schema[f"c{a.col}"].dataType
                aggs.append(_aggregate(a.fn, a.col, dtype).alias(f"c{len(node.keys) + j}"))
            out = df.groupBy(*by).agg(*aggs)
            return out.select(*[F.col(c).alias(f"c{j}") for j, c in enumerate(out.columns)])
        raise AssertionError(f"unplanned {node!r}")  # pragma: no cover

    def _lookup(self, frame: Any, cols: list[str], keys: list[tuple[Any, ...]]) -> list[Any]:
        """``frame``'s rows whose ``cols`` equal one of ``keys``: a stored collection's through
        :meth:`stored_rows` (cached for the tick, batched with the lookups queued), any
        other frame by a filter (one job)."""
        name = self.name_of(frame)
        if name is not None:
            return self.stored_rows(name, cols, keys)
        return [tuple(r) for r in frame.where(_matches(cols, keys, frame.schema)).collect()]

    def _lowering(self, inputs: tuple[Node, ...]) -> _Lowering:
        columns, types = [], []
        for inp in inputs:
            t = self.plan._types(inp, "")
            columns.append(inp.columns or tuple(f"_{i}" for i in range(len(t))))  # type: ignore[attr-defined]
            types.append(t)
        return _Lowering(columns, types)

    def _driver_join(self, node: Join, parts: list[Any]) -> Any:
        """A join of two inputs, one of them a few rows on the driver (a local frame), done on
        the driver: one job reads the other input's rows that match those rows' values (a
        filter by them, which state files sorted by the column prune; none when both are on
        the driver), and the joined rows are a local frame, so that what the rule derives
        from them is collected, counted and merged with no job. No broadcast, no shuffle.
        Returns the frame (columns ``i{input}_{position}``), None for no rows, or
        ``_NOT_ON_DRIVER`` when this does not apply."""
        from pyspark.sql.types import StructField, StructType

        if len(parts) != 2 or node.how != "inner":
            return _NOT_ON_DRIVER
        got = [self.local_frames.get(id(p)) for p in parts]
        local = [i for i, g in enumerate(got) if g is not None and g[0] is parts[i]]
        if not local or not all(_atomic(p.schema) for p in parts):
            return _NOT_ON_DRIVER
        a = local[0]
        b = 1 - a
        pairs = [
            (p.lcol, p.rcol) if p.left == a else (p.rcol, p.lcol)
            for p in node.preds
            if {p.left, p.right} == {0, 1}
        ]
        rows_a = got[a][1]  # type: ignore[index]
        if b in local:
            rows_b = got[b][1]  # type: ignore[index]
        else:
            if not pairs or len(rows_a) > SMALL_DELTA:
                return _NOT_ON_DRIVER
            cols_b = parts[b].columns
            keys = list(dict.fromkeys(tuple(r[ac] for ac, _ in pairs) for r in rows_a))
            rows_b = self._lookup(parts[b], [cols_b[bc] for _, bc in pairs], keys)
        index: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for r in rows_b:
            index.setdefault(tuple(r[bc] for _, bc in pairs), []).append(r)
        out = []
        for ra in rows_a:
            for rb in index.get(tuple(ra[ac] for ac, _ in pairs), ()):
                out.append((*ra, *rb) if a == 0 else (*rb, *ra))
        if not out:
            return None
        schema = StructType(
            [
                StructField(f"i{i}_{f.name[1:]}", f.dataType, True)
                for i, p in enumerate(parts)
                for f in p.schema.fields
            ]
        )
        return _local_frame(self.spark, out, schema)

    def _join(self, node: Join, delta_at: int | None, counter: list[int]) -> Any:
        from pyspark.sql import functions as F

        parts = [self.eval(inp, delta_at, counter) for inp in node.inputs]
        if any(p is None for p in parts):
            return None
        on_driver = self._driver_join(node, parts)
        if on_driver is not _NOT_ON_DRIVER:
            return on_driver
        # an input of rows on the driver: the other side of each equality with it filtered
        # by its values, which a state read back from sorted files prunes row groups with
        for p in node.preds:
            for a, ac, b, bc in (
                (p.left, p.lcol, p.right, p.rcol),
                (p.right, p.rcol, p.left, p.lcol),
            ):
                got = self.local_frames.get(id(parts[a]))
                if got is None or got[0] is not parts[a] or id(parts[b]) in self.local_frames:
                    continue
                vals = list(dict.fromkeys(r[ac] for r in got[1] if r[ac] is not None))
                col = parts[b].columns[bc]
                t = parts[b].schema[col].dataType
                keep = parts[b]
                hit = _in_list(col, vals, t, in_chunk(self.spark)) if vals else F.lit(False)
                if len(vals) < len({r[ac] for r in got[1]}):  # None matches None
                    hit = hit | F.col(col).isNull()
                parts[b] = keep.where(hit)
                if id(keep) in self.sizes:
                    self.sizes[id(parts[b])] = (parts[b], *self.sizes[id(keep)][1:])
        # broadcast the smallest input when its exact size allows (usually the delta): the
        # other inputs are then scanned in place, not shuffled, every round
        sized = [
            (self.sizes[id(p)][1:], i)
            for i, p in enumerate(parts)
            if id(p) in self.sizes and self.sizes[id(p)][0] is p
        ]
        if sized:
            (rows, width), i = min(sized)
            parts[i] = self.small(parts[i], rows, width)
        # columns by position (i{input}_{position}), as the lowering names them; equalities
        # NULL-safe (None matches None, as in the local engine), still planned as equi-joins
        named = [p.toDF(*[f"i{i}_{c[1:]}" for c in p.columns]) for i, p in enumerate(parts)]
        acc = named[0]
        for j in range(1, len(named)):
            cond = [f"i{p.left}_{p.lcol} <=> i{j}_{p.rcol}" for p in node.preds if p.right == j]
            if cond:  # one SQL condition: a Column per equality costs a JVM call each
                acc = acc.join(named[j], F.expr(" AND ".join(cond)), "inner")
            else:
                acc = acc.crossJoin(named[j])
        return acc


def _aggregate(fn: str, col: int | None, dtype: Any = None) -> Any:
    """The Spark aggregate of a ``group`` aggregate, as :func:`blooml.ir.apply_aggregate`
    defines it (Spark SQL's own NULL rules: an aggregate of a column skips NULL):
    ``count()`` counts rows, ``count(c)`` the distinct non-NULL values of ``c``; ``sum`` and
    ``avg`` of a ``double`` column (``dtype``) are exact (:mod:`blooml.spark._exactsum`:
    ``math.fsum``'s value, as the local engine's), of an integer column Spark's exact
    ``sum``, ``avg`` that sum as a double over the number of values."""
    from pyspark.sql import functions as F

    if col is None:
        return F.count(F.lit(1))
    name = f"c{col}"
    c = F.col(name)
    if fn == "count":
        return F.count_distinct(c)
    if fn in ("sum", "avg") and is_float_type(dtype):
        return exact_sum(name) if fn == "sum" else exact_avg(name)
    if fn == "avg":
        return F.sum(c).cast("double") / F.count(c)
    return getattr(F, fn)(c)


from blooml.spark import _dfpython  # noqa: E402  (it builds on this module)
