"""Rule bodies that do not lower to Spark SQL, run as Arrow-batched Python inside the plan.

A ``map``, ``filter`` or ``flat_map`` whose function is not recovered as an expression (a
closure, a call of a Python function, a conditional, ...), or whose expression has no SQL
translation, runs as ``DataFrame.mapInArrow`` over its lowered input (a scan, a selection, an
equi-join or — for a join without column equalities — a ``crossJoin``): one Python call per
Arrow batch, inside which the rule's function is called on each row built as the local engine
builds it (a named tuple of the collection, ``fn(*rows)`` after a join; lattice cells as lattice
values). Works on classic and Spark Connect sessions (no RDD is used). Likewise ``notin``
with a test function (the test over the equi- or cross-joined pairs, then a ``left_anti``
join), ``choose`` (``groupBy(keys).applyInArrow``) and ``reduce`` (one ``applyInArrow``
group); ``argmin``/``argmax`` are plain Spark SQL.

The output schema. A ``filter`` (and ``notin``, ``choose``, ``argmin``/``argmax``) keeps its
input's schema. A ``map`` or ``flat_map`` deriving the rows of a collection declared in
``SparkEngine(schemas=...)`` builds them in the declared types in one pass. Otherwise (and
for ``reduce``) their schema is only known once the function has run, so their types are
inferred from the actual output, with Spark's own type inference:

1. each batch's output rows are encoded as one Arrow IPC stream (a ``binary`` cell), with the
   Spark type of each column over that batch (``pyspark.sql.types._infer_type``, merged) and the
   lattice class of its lattice-valued columns; lattice values are stored as their cells
   (:func:`blooml.spark.column_format`);
2. the encoded batches are materialized (``localCheckpoint``), their distinct signatures
   collected and merged (integers and floats widen to ``double``; other mixtures fail naming the
   rule);
3. a second ``mapInArrow`` decodes the batches into typed columns ``c0..``.

Lattice classes found at run time become the head's lattice column classes: only ``lmax``,
``lmin`` and ``lbool`` columns merge in Spark SQL, any other class in a collection column raises
:class:`~blooml.errors.NotSupportedOnSpark` naming the rule. An exception raised by a user
function on a worker comes back (through :func:`blooml.spark.worker_errors`) naming the rule.

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import Any

from blooml.errors import NotSupportedOnSpark, ProgramError
from blooml.ir import (
    ArgAgg,
    Choose,
    Filter,
    FlatMap,
    Group,
    Join,
    Map,
    Node,
    NotIn,
    Reduce,
    Rule,
    Scan,
)
from blooml.lattices import lbool, lmax, lmin
from blooml.lattices._base import Lattice
from blooml.spark._dfplan import DataFramePlan, _Unlowerable
from blooml.spark._errors import WorkerErrors
from blooml.spark._formats import column_format, spec_of

__all__ = [
    "Opaque",
    "check_fold",
    "check_group",
    "declare",
    "eval_grouped",
    "eval_notin",
    "eval_python",
    "fold_rows",
    "grouped_types",
    "is_opaque",
    "python_types",
    "runs_python",
]

#: lattice classes whose cells merge in Spark SQL (see ``_dfplan._CELL``)
_SQL_MERGED = (lmax, lmin, lbool)


class Opaque(list):  # type: ignore[type-arg]
    """The column classes of a Python function's output: unknown (even their number) until
    the function has run."""


def is_opaque(types: Any) -> bool:
    """Whether ``types`` (from ``DataFramePlan._types``) are only known at run time."""
    return isinstance(types, Opaque)


# -- planning ----------------------------------------------------------------------------------


def _join_shaped(node: Node) -> bool:
    """Whether ``node``'s items are tuples of rows (a join, or filters over one)."""
    while isinstance(node, Filter):
        node = node.input
    return isinstance(node, Join)


def runs_python(plan: DataFramePlan, node: Node, where: str) -> bool:
    """Whether the Map/Filter/FlatMap ``node`` runs as Arrow-batched Python (its input's own
    translation is checked; an untranslatable input raises ``_Unlowerable``)."""
    memo = plan.python_nodes
    if id(node) in memo:
        return memo[id(node)]
    assert isinstance(node, (Map, Filter, FlatMap))
    if where:
        plan.python_where.setdefault(id(node), where)
    inp = node.input
    # a filter over a join, and what reads its rows (tuples of rows), run as Python
    over_join = _join_shaped(inp) and (isinstance(node, Filter) or isinstance(inp, Filter))
    if isinstance(node, FlatMap) or over_join or is_opaque(plan._types(inp, where)):
        py = True
    else:
        expr = node.expr
        if expr is None:
            py = True
        else:
            inputs = plan._inputs(inp, where)  # raises for an untranslatable input
            try:
                if isinstance(node, Filter):
                    plan._expr_type(expr, inputs, where)
                else:
                    from blooml.ir import exprs as X

                    items = expr.items if isinstance(expr, X.TupleExpr) else (expr,)
                    for e in items:
                        plan._expr_type(e, inputs, where)
                py = False
            except _Unlowerable:
                py = True
    if py:
        _check_base(plan, node, where)
    memo[id(node)] = py
    return py


def _chain(plan: DataFramePlan, node: Node) -> tuple[list[Node], Node]:
    """The nodes one Python pass runs (top first: ``node`` and the filters below it that run
    as Python or over a join) and the node below them (evaluated as a DataFrame)."""
    chain = [node]
    n = node.input  # type: ignore[attr-defined]
    while isinstance(n, Filter) and (_join_shaped(n) or plan.python_nodes.get(id(n), False)):
        chain.append(n)
        n = n.input
    return chain, n


def _check_base(plan: DataFramePlan, node: Node, where: str) -> None:
    chain, base = _chain(plan, node)
    for n in chain[1:]:
        plan.python_nodes[id(n)] = True
        if where:
            plan.python_where.setdefault(id(n), where)
    plan._types(base, where)  # raises for an untranslatable input


def python_types(plan: DataFramePlan, node: Node, where: str) -> list[type | None]:
    """The lattice class of each output column of a Python node: a filter's are its input's
    (known), a map's are :class:`Opaque`."""
    chain, base = _chain(plan, node)
    if not all(isinstance(n, Filter) for n in chain):
        return Opaque()
    return plan._types(base, where)


def check_fold(cls: type, types: list[type | None], where: str) -> None:
    """Raise ``_Unlowerable`` unless rows of ``types`` fold into a lattice variable of ``cls``
    with :func:`blooml.spark.functions.lfold` (several columns: tuple items)."""
    try:
        fmt = column_format(cls)
    except TypeError as exc:
        raise _Unlowerable(f"{where}: folding rows into {cls.__qualname__} ({exc})") from None
    if is_opaque(types):
        return
    if len(types) > 1 and fmt.kind == "boolean":
        raise _Unlowerable(f"{where}: folding rows of several columns into lbool")
    if any(t is not None for t in types) and (len(types) != 1 or types[0] is not cls):
        raise _Unlowerable(f"{where}: folding lattice cells into {cls.__qualname__}")


# -- evaluation --------------------------------------------------------------------------------


def _row_names(node: Node) -> tuple[str, tuple[str, ...]] | None:
    """The named tuple the local engine passes for ``node``'s rows (None: plain tuples)."""
    while isinstance(node, (Filter, NotIn)):
        node = node.input if isinstance(node, Filter) else node.left
    if isinstance(node, Scan):
        return node.name, node.cols
    return None


def _where(plan: DataFramePlan, node: Node) -> str:
    return plan.python_where.get(id(node), repr(node))


def eval_python(run: Any, node: Node, delta_at: int | None, counter: list[int]) -> Any:
    """A DataFrame (columns ``c0..``) of the rows of the Python node ``node``, or None."""
    from pyspark.sql import functions as F

    plan: DataFramePlan = run.plan
    chain, base = _chain(plan, node)
    where = _where(plan, node)
    if isinstance(base, Join):
        df = run._join(base, delta_at, counter)
        if df is None:
            return None
        shapes = []
        classes: list[dict[int, type]] = []
        for i, inp in enumerate(base.inputs):
            t = plan._types(inp, where)
            shapes.append(([f"i{i}_{k}" for k in range(len(t))], _row_names(inp)))
            classes.append({k: c for k, c in enumerate(t) if c is not None})
    else:
        df = run.eval(base, delta_at, counter)
        if df is None:
            return None
        known = plan.python_classes.get(id(base))
        if known is None:
            known = {k: c for k, c in enumerate(plan._types(base, where)) if c is not None}
        shapes = [(list(df.columns), _row_names(base))]
        classes = [known]
    filters = [n.fn for n in reversed(chain) if isinstance(n, Filter)]  # type: ignore[attr-defined]
    top = chain[0]
    if isinstance(top, Filter):
        out = df.mapInArrow(_filter_batches(shapes, classes, filters, where), df.schema)
        out_classes: dict[int, type] = {}
        offset = 0
        for (cols, _), cls_map in zip(shapes, classes, strict=True):
            out_classes.update({offset + k: c for k, c in cls_map.items()})
            offset += len(cols)
        out = out.select(*[F.col(c).alias(f"c{j}") for j, c in enumerate(out.columns)])
        plan.python_classes[id(node)] = out_classes
        return out
    head = plan.python_heads.get(id(node))
    arity = None
    head_desc = None
    if head is not None and head in plan.ir.collections:
        info = plan.ir.collections[head]
        arity = len(info.columns)
        head_desc = (info.kind, info.name, tuple(info.columns))
    fn = top.fn  # type: ignore[attr-defined]
    flat = isinstance(top, FlatMap)
    declared = plan.schemas.get(head) if head is not None else None
    if declared is not None:  # one pass, straight into the declared types
        expected = dict(plan.lattice_cols[head])  # type: ignore[index]
        plan.python_classes[id(node)] = expected
        typed = _encode_batches(
            shapes, classes, filters, fn, flat, where, head_desc, arity, (declared, expected)
        )
        return df.mapInArrow(typed, declared)
    encode = _encode_batches(shapes, classes, filters, fn, flat, where, head_desc, arity)
    encoded = df.mapInArrow(encode, "b binary, s string").localCheckpoint()
    sigs = [r.s for r in encoded.select("s").distinct().collect()]
    return _decode(plan, node, encoded, sigs, where)


def declare(plan: DataFramePlan, spark: Any, schemas: Any) -> None:
    """Set ``plan.schemas`` from ``SparkEngine(schemas=...)``: collection name -> a DDL string
    (``"a bigint, b bigint"``) or a ``StructType`` with one field per column."""
    from pyspark.sql.types import StructField, StructType

    ir = plan.ir
    for name, schema in (schemas or {}).items():
        info = ir.collections.get(name)
        if info is None:
            known = ", ".join(sorted(ir.collections))
            raise ProgramError(
                f"SparkEngine(schemas=...): {name!r} is not a collection of {ir.name} "
                f"(known: {known})"
            )
        if isinstance(schema, str):
            try:
                schema = spark.createDataFrame([], schema).schema
            except Exception as exc:
                raise ProgramError(
                    f"SparkEngine(schemas=...): the schema of {name!r}, {schema!r}, is not a "
                    f"Spark DDL schema such as 'a bigint, b string' ({exc})"
                ) from None
        if not isinstance(schema, StructType) or len(schema.fields) != len(info.columns):
            raise ProgramError(
                f"SparkEngine(schemas=...): {info.kind} {name!r} has columns "
                f"{list(info.columns)}; its schema must have one field per column, got {schema!r}"
            )
        plan.schemas[name] = StructType(
            [StructField(f"c{j}", f.dataType, True) for j, f in enumerate(schema.fields)]
        )


def eval_notin(run: Any, node: NotIn, delta_at: int | None, counter: list[int]) -> Any:
    """The rows of ``node.left`` that no row of ``node.right`` matches (its column equalities,
    then its test function, run as Arrow-batched Python over the equi-joined — or, without
    equalities, cross-joined — pairs), as a DataFrame (columns ``c0..``) or None."""
    from pyspark.sql import functions as F

    plan: DataFramePlan = run.plan
    where = _where(plan, node)
    left = run.eval(node.left, delta_at, counter)
    if left is None:
        return None
    right = run.eval(node.right, None, counter)
    if right is None:
        return left
    lcols = [f"i0_{c[1:]}" for c in left.columns]
    rcols = [f"i1_{c[1:]}" for c in right.columns]
    lt = left.select(*[F.col(c).alias(n) for c, n in zip(left.columns, lcols, strict=True)])
    rt = right.select(*[F.col(c).alias(n) for c, n in zip(right.columns, rcols, strict=True)])
    cond = [lt[f"i0_{p.lcol}"].eqNullSafe(rt[f"i1_{p.rcol}"]) for p in node.preds]
    pairs = lt.join(rt, cond, "inner") if cond else lt.crossJoin(rt)
    classes = []
    for side in (node.left, node.right):
        known = plan.python_classes.get(id(side))
        if known is None:
            known = {k: c for k, c in enumerate(plan._types(side, where)) if c is not None}
        classes.append(known)
    shapes = [(lcols, _row_names(node.left)), (rcols, _row_names(node.right))]
    test = _filter_batches(shapes, classes, [node.fn], where)  # type: ignore[list-item]
    matched = pairs.mapInArrow(test, pairs.schema).select(*[F.col(c).alias(f"m{c}") for c in lcols])
    out = lt.join(
        matched.distinct(), [lt[c].eqNullSafe(F.col(f"m{c}")) for c in lcols], "left_anti"
    )
    return out.select(*[F.col(c).alias(f"c{j}") for j, c in enumerate(lcols)])


def grouped_types(plan: DataFramePlan, node: Node, where: str) -> list[type | None]:
    """Plan ``argmin``/``argmax`` (Spark SQL), ``choose`` (grouped Arrow) and ``reduce`` (one
    Arrow group, its output types inferred): their input's classes, or Opaque for reduce."""
    inner = plan._types(node.input, where)  # type: ignore[attr-defined]
    if where:
        plan.python_where.setdefault(id(node), where)
    if is_opaque(inner):  # a Python function's rows: checked when they are known
        return Opaque()
    if isinstance(node, ArgAgg):
        if not 0 <= node.col < len(inner) or inner[node.col] is not None:
            raise _Unlowerable(f"{where}: arg{node.how} over a lattice column")
        return inner
    if isinstance(node, Choose):
        if any(t is not None for t in inner):
            raise _Unlowerable(f"{where}: choose over rows with lattice columns")
        return inner
    return Opaque()


def eval_grouped(run: Any, node: Node, counter: list[int]) -> Any:
    """``argmin``/``argmax``, ``choose`` or ``reduce`` over their (complete) input."""
    from pyspark.sql import functions as F

    plan: DataFramePlan = run.plan
    where = _where(plan, node)
    df = run.eval(node.input, None, counter)  # type: ignore[attr-defined]
    if df is None and isinstance(node, Reduce):
        df = run.spark.createDataFrame([], "c0 int").limit(0)
    if df is None:
        return None
    cols = list(df.columns)
    inner = plan.python_classes.get(id(node.input))  # type: ignore[attr-defined]
    if inner is not None and not isinstance(node, Reduce):  # the rows of a Python function
        what = {ArgAgg: "arg" + getattr(node, "how", ""), Choose: "choose"}[type(node)]
        used = [*node.keys, node.col] if isinstance(node, ArgAgg) else node.keys  # type: ignore[attr-defined]
        _check_columns(used, len(cols), where, what)
        if isinstance(node, ArgAgg) and node.col in inner:
            raise NotSupportedOnSpark(where, f"{what} over a column of lattice values")
        if isinstance(node, Choose) and inner:
            raise NotSupportedOnSpark(where, "choose over rows with lattice values")
        _reconcile(plan, node, inner, where)
        plan.python_classes[id(node)] = dict(inner)
    if isinstance(node, ArgAgg):  # Spark SQL: each group's best value, joined back
        keys = [cols[k] for k in node.keys]
        col = cols[node.col]
        agg = (F.max(col) if node.how == "max" else F.min(col)).alias("_best")
        best = df.groupBy(*keys).agg(agg) if keys else df.agg(agg)
        best = best.select(*[F.col(k).alias(f"_{k}") for k in keys], "_best")
        cond = [df[k].eqNullSafe(best[f"_{k}"]) for k in keys] + [df[col] == best["_best"]]
        return df.join(best, cond, "inner").select(*cols)
    if isinstance(node, Choose):
        keys = [cols[k] for k in node.keys]
        pick = _choose_groups(cols, node.seed)
        grouped = df.groupBy(*keys) if keys else df.groupBy(F.lit("all"))
        return grouped.applyInArrow(pick, df.schema)
    assert isinstance(node, Reduce)
    classes = plan.python_classes.get(id(node.input))  # type: ignore[attr-defined]
    if classes is None:
        types = plan._types(node.input, where)  # type: ignore[attr-defined]
        classes = {k: c for k, c in enumerate(types) if c is not None}
    shapes = [(cols, _row_names(node.input))]  # type: ignore[attr-defined]
    head = plan.python_heads.get(id(node))
    head_desc = None
    if head is not None and head in plan.ir.collections:
        info = plan.ir.collections[head]
        head_desc = (info.kind, info.name, tuple(info.columns))
    fold = _reduce_group(shapes, [classes], node.init, node.fn, where, head_desc)
    encoded = df.groupBy(F.lit("all")).applyInArrow(fold, "b binary, s string").localCheckpoint()
    sigs = [r.s for r in encoded.select("s").distinct().collect()]
    if not sigs:  # no rows: the result of init alone
        init_rows = _reduce_group(shapes, [classes], node.init, node.fn, where, head_desc)
        table = init_rows(_empty_table(cols))
        if table.num_rows == 0 or table.column("s")[0].as_py() == _NO_ROWS:
            return None
        encoded = run.spark.createDataFrame(
            [(table.column("b")[0].as_py(), table.column("s")[0].as_py())], "b binary, s string"
        )
        sigs = [table.column("s")[0].as_py()]
    encoded = encoded.where(F.col("s") != _NO_ROWS)
    sigs = [s for s in sigs if s != _NO_ROWS]
    return _decode(plan, node, encoded, sigs, where)


def _decode(plan: DataFramePlan, node: Node, encoded: Any, sigs: list[str], where: str) -> Any:
    """The typed rows of ``encoded`` (Arrow-stream cells tagged with their signatures): the
    signatures merged into one schema, the lattice classes found recorded for the plan; None
    when no batch produced rows."""
    if not sigs:
        return None
    schema, out_classes = _merge_signatures(sigs, where)
    _reconcile(plan, node, out_classes, where)
    plan.python_classes[id(node)] = out_classes
    return encoded.mapInArrow(_decode_batches(schema, where), schema)


def check_group(plan: DataFramePlan, node: Group, df: Any) -> None:
    """Before a ``group`` over the rows of a Python function runs: its columns exist and it
    aggregates no lattice values (known once the function has run)."""
    inner = plan.python_classes.get(id(node.input))
    if inner is None:
        return
    where = _where(plan, node)
    used = [*node.keys, *(a.col for a in node.aggs if a.col is not None)]
    _check_columns(used, len(df.columns), where, "group")
    for a in node.aggs:
        if a.col in inner:
            raise NotSupportedOnSpark(where, f"the aggregate {a.fn} over lattice values")


def _check_columns(cols: Any, width: int, where: str, what: str) -> None:
    bad = [c for c in cols if not 0 <= c < width]
    if bad:
        raise ProgramError(
            f"{where}: {what} refers to column {bad[0]}, but the rows of its input have only "
            f"{width} columns"
        )


_NO_ROWS = "no rows"


def _empty_table(cols: list[str]) -> Any:
    import pyarrow as pa

    return pa.table({c: pa.array([], pa.null()) for c in cols})


def _choose_groups(cols: list[str], seed: int) -> Callable[[Any], Any]:
    """One row per group: the one with the smallest seeded hash of its repr (as the local
    engine's ``choose``)."""

    def pick(table: Any) -> Any:
        import hashlib

        values = [
            [(conv(v) if conv is not None else v) for v in col.to_pylist()]
            for col, conv in ((table.column(c), _py_converter(table.column(c).type)) for c in cols)
        ]
        rows = list(zip(*values, strict=True))
        if not rows:
            return table.slice(0, 0)
        hashes = [
            hashlib.blake2b(repr((seed, tuple(r))).encode(), digest_size=8).digest() for r in rows
        ]
        i = min(range(len(rows)), key=hashes.__getitem__)
        return table.slice(i, 1)

    return pick


def _reduce_group(
    shapes: list[tuple[list[str], Any]],
    classes: list[dict[int, type]],
    init: Any,
    fn: Callable[[Any, Any], Any],
    where: str,
    head: tuple[str, str, tuple[str, ...]] | None,
) -> Callable[[Any], Any]:
    """``fn(memo, row)`` folded over every row (sorted as the local engine sorts them), its
    result rows encoded as in :func:`_encode_batches`."""

    def fold(table: Any) -> Any:
        import pyarrow as pa

        errors = WorkerErrors(where)

        def fail(cls: str, text: str) -> None:
            errors.raise_for((cls, cls, text))

        args_of = _arguments(shapes, classes)
        rows = [a[0] for b in table.to_batches() for a in args_of(b)]
        try:
            try:
                rows.sort()
            except TypeError:
                rows.sort(key=repr)
            memo = init
            for r in rows:
                memo = fn(memo, r)
        except Exception as exc:
            errors.raise_for(exc)
        if memo is None:
            out: list[Any] = []
        elif isinstance(memo, tuple):
            out = [memo]
        elif isinstance(memo, (list, set, frozenset)):
            out = [r if isinstance(r, tuple) else (r,) for r in memo if r is not None]
        else:
            out = [(memo,)]
        if not out:  # one row saying so (no group at all: no rows in)
            return pa.table({"b": pa.array([None], pa.binary()), "s": pa.array([_NO_ROWS])})
        widths = {len(r) for r in out}
        if head is not None and widths != {len(head[2])}:
            bad = next(r for r in out if len(r) != len(head[2]))
            fail(
                "ProgramError",
                f"{head[0]} {head[1]!r} has {len(head[2])} columns {list(head[2])}; got "
                f"{len(bad)} values {bad!r}",
            )
        if len(widths) > 1:
            fail("NotSupportedOnSpark", f"its function returns rows of widths {sorted(widths)}")
        return pa.Table.from_batches([_encode(out, fail, pa)])

    return fold


def _reconcile(plan: DataFramePlan, node: Node, classes: dict[int, type], where: str) -> None:
    """Lattice classes a Python function derived for a collection head become its lattice
    column classes (only those merged in Spark SQL)."""
    head = plan.python_heads.get(id(node))
    if head is None or head not in plan.ir.collections:
        return
    info = plan.ir.collections[head]
    known = plan.lattice_cols[head]
    for j, cls in sorted(classes.items()):
        col = info.columns[j] if j < len(info.columns) else str(j)
        if j < len(info.keys) and info.values:
            raise ProgramError(
                f"{where}: {info.kind} {head!r}: key column {col!r} holds "
                f"{cls.__qualname__} values; lattice values cannot be key columns"
            )
        have = known.get(j)
        if have is None:
            if cls not in _SQL_MERGED:
                raise NotSupportedOnSpark(
                    where,
                    f"its function derives {cls.__qualname__} values in column {col!r} of "
                    f"{head!r}; only lmax, lmin and lbool collection columns merge in Spark SQL "
                    "(run it on the RDD path: SparkEngine(spark, path='rdd'))",
                )
            known[j] = cls
        elif have is not cls:
            raise NotSupportedOnSpark(
                where,
                f"column {col!r} of {head!r} holds {have.__qualname__} values elsewhere; its "
                f"function derives {cls.__qualname__} values",
            )


def fold_rows(plan: DataFramePlan, df: Any, cls: type, rule: Rule) -> Lattice:
    """The rows of ``df`` (columns ``c0..``), derived by ``rule``'s body, folded into one value
    of ``cls`` (several columns: tuple items; a column of ``cls`` cells: merged)."""
    from pyspark.sql import functions as F

    from blooml.spark.functions import _tuple_struct, lfold, lmerge

    fmt = column_format(cls)
    cols = list(df.columns)
    classes = plan.python_classes.get(id(rule.body))
    if classes is None:
        types = plan._types(rule.body, rule.describe())
        classes = {j: c for j, c in enumerate(types) if c is not None}
    if classes:
        if len(cols) != 1 or classes.get(0) is not cls:
            names = ", ".join(sorted({c.__qualname__ for c in classes.values()}))
            raise NotSupportedOnSpark(
                rule.describe(), f"folding rows holding {names} values into {cls.__qualname__}"
            )
        agg = lmerge(cols[0], cls)
    elif len(cols) == 1 or fmt.kind == "pickle":
        agg = lfold(cols[0] if len(cols) == 1 else cols, cls)
    else:
        if fmt.kind == "boolean":
            raise NotSupportedOnSpark(rule.describe(), "folding rows of several columns into lbool")
        agg = lfold(_tuple_struct([F.col(c) for c in cols]), cls)
    from blooml.spark._errors import worker_errors

    with worker_errors():
        (row,) = df.agg(agg.alias("v")).collect()
    return fmt.from_cell(row.v)


# -- the Python that runs on the workers ---------------------------------------------------------


def _py_converter(t: Any) -> Callable[[Any], Any] | None:
    """How a value read from an Arrow column of type ``t`` becomes the Python value a collected
    Row holds (structs as tuples, maps as dicts); None: as ``to_pylist`` gives it."""
    import pyarrow as pa

    if pa.types.is_struct(t):
        subs = [_py_converter(t.field(i).type) for i in range(t.num_fields)]

        def struct(v: Any) -> Any:
            if v is None:
                return None
            return tuple(
                (s(x) if s is not None else x) for s, x in zip(subs, v.values(), strict=True)
            )

        return struct
    if pa.types.is_map(t):
        ks, vs = _py_converter(t.key_type), _py_converter(t.item_type)

        def mapping(v: Any) -> Any:
            if v is None:
                return None
            return {
                (ks(k) if ks else k): (vs(x) if vs else x)
                for k, x in v  # pairs from Arrow
            }

        return mapping
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        es = _py_converter(t.value_type)
        if es is None:
            return None
        return lambda v: None if v is None else [es(x) for x in v]
    return None


def _columns(batch: Any, names: list[str], fmts: dict[int, Any]) -> list[list[Any]]:
    out = []
    for k, name in enumerate(names):
        col = batch.column(name)
        conv = _py_converter(col.type)
        values = col.to_pylist()
        if conv is not None:
            values = [conv(v) for v in values]
        fmt = fmts.get(k)
        if fmt is not None:
            values = [fmt.from_cell(v) for v in values]
        out.append(values)
    return out


def _arguments(
    shapes: list[tuple[list[str], Any]], classes: list[dict[int, type]]
) -> Callable[[Any], list[list[Any]]]:
    """A function from an Arrow batch to the argument lists of each row."""
    types = [None if names is None else namedtuple(names[0], names[1]) for _, names in shapes]
    fmts = [{k: column_format(c) for k, c in cls.items()} for cls in classes]

    def args(batch: Any) -> list[list[Any]]:
        per_input = []
        for (cols, _), t, f in zip(shapes, types, fmts, strict=True):
            values = _columns(batch, cols, f)
            rows = list(zip(*values, strict=True)) if values else [()] * batch.num_rows
            if t is not None:
                rows = [tuple.__new__(t, r) for r in rows]
            per_input.append(rows)
        return [list(a) for a in zip(*per_input, strict=True)]

    return args


def _filter_batches(
    shapes: list[tuple[list[str], Any]],
    classes: list[dict[int, type]],
    filters: list[Callable[..., Any]],
    where: str,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        args_of = _arguments(shapes, classes)
        errors = WorkerErrors(where)
        for batch in batches:
            keep = []
            for a in args_of(batch):
                try:
                    keep.append(all(f(*a) for f in filters))
                except Exception as exc:
                    errors.raise_for(exc)
            yield batch.filter(pa.array(keep, pa.bool_()))

    return run


_SIMPLE: dict[type, Any] = {}


def _spark_type(v: Any) -> Any:
    """Spark's inferred type of one cell (cached for the common scalar types)."""
    from pyspark.sql import types as T

    if not _SIMPLE:
        _SIMPLE.update(
            {
                type(None): T.NullType(),
                bool: T.BooleanType(),
                int: T.LongType(),
                float: T.DoubleType(),
                str: T.StringType(),
                bytes: T.BinaryType(),
                bytearray: T.BinaryType(),
            }
        )
    t = _SIMPLE.get(type(v))
    return t if t is not None else T._infer_type(v)


def _merge_type(a: Any, b: Any, what: str) -> Any:
    from pyspark.sql import types as T

    if a == b:
        return a
    try:
        return T._merge_type(a, b)
    except Exception:
        if isinstance(a, T.NumericType) and isinstance(b, T.NumericType):
            return T.DoubleType()
        raise TypeError(
            f"{what} holds values of the Spark types {a.simpleString()} and "
            f"{b.simpleString()}; a DataFrame column has one type"
        ) from None


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _class_of(path: str) -> type:
    mod, _, qual = path.partition(":")
    obj: Any = sys.modules.get(mod) or importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _encode_batches(
    shapes: list[tuple[list[str], Any]],
    classes: list[dict[int, type]],
    filters: list[Callable[..., Any]],
    fn: Callable[..., Any],
    flat: bool,
    where: str,
    head: tuple[str, str, tuple[str, ...]] | None,
    arity: int | None,
    target: tuple[Any, dict[int, type]] | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The rows a map or flat_map derives from each batch: encoded with their inferred types
    (a ``binary`` Arrow stream and its signature), or in the ``target`` (declared) schema."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        args_of = _arguments(shapes, classes)
        errors = WorkerErrors(where)

        def fail(cls: str, text: str) -> None:
            errors.raise_for((cls, cls, text))

        def rows_of(res: Any) -> Iterator[tuple[Any, ...]]:
            if isinstance(res, tuple):
                yield res
            elif res is not None:
                if arity is not None and arity != 1 and head is not None:
                    fail(
                        "ProgramError",
                        f"{head[0]} {head[1]!r} has columns {list(head[2])}; got the "
                        f"non-tuple {res!r}",
                    )
                yield (res,)

        for batch in batches:
            out: list[tuple[Any, ...]] = []
            for a in args_of(batch):
                try:
                    if not all(f(*a) for f in filters):
                        continue
                    res = fn(*a)
                    if flat:
                        if res is None:
                            continue
                        for r in res:
                            out.extend(rows_of(r))
                    else:
                        out.extend(rows_of(res))
                except Exception as exc:
                    if type(exc).__name__ == "WorkerError":
                        raise
                    errors.raise_for(exc)
            if not out:
                continue
            widths = {len(r) for r in out}
            if arity is not None and head is not None and widths != {arity}:
                bad = next(r for r in out if len(r) != arity)
                fail(
                    "ProgramError",
                    f"{head[0]} {head[1]!r} has {arity} columns {list(head[2])}; got "
                    f"{len(bad)} values {bad!r}",
                )
            if len(widths) > 1:
                fail(
                    "NotSupportedOnSpark",
                    f"its function returns rows of different widths {sorted(widths)}; "
                    "a DataFrame's rows have one width",
                )
            if target is None:
                yield _encode(out, fail, pa)
            else:
                yield _typed(out, fail, pa, target, head)

    return run


def _typed(
    rows: list[tuple[Any, ...]],
    fail: Any,
    pa: Any,
    target: tuple[Any, dict[int, type]],
    head: tuple[str, str, tuple[str, ...]] | None,
) -> Any:
    """``rows`` as a record batch of the declared schema (lattice values as their cells)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema, expected = target
    arrow = to_arrow_schema(schema)
    name = head[1] if head is not None else "?"
    cols = head[2] if head is not None else ()
    arrays = []
    for j, values in enumerate(zip(*rows, strict=True)):
        col = cols[j] if j < len(cols) else str(j)
        want = expected.get(j)
        fmt = column_format(want) if want is not None else None
        cells = []
        for v in values:
            if isinstance(v, Lattice):
                if type(v) is not want:
                    fail(
                        "NotSupportedOnSpark",
                        f"it derives {type(v).__qualname__} values in column {col!r} of "
                        f"{name!r}, declared {schema[j].dataType.simpleString()} in "
                        "SparkEngine(schemas=...): the plan knows no such lattice column (leave "
                        f"{name!r} out of schemas to have its types and lattice classes inferred)",
                    )
                v = fmt.to_cell(v)  # type: ignore[union-attr]
            cells.append(v)
        try:
            arrays.append(pa.array(cells, type=arrow.field(j).type))
        except Exception as exc:
            fail(
                "ProgramError",
                f"column {col!r} of {name!r} is declared {schema[j].dataType.simpleString()} "
                f"(SparkEngine schemas=...); its function derives {exc}",
            )
    return pa.RecordBatch.from_arrays(arrays, schema=arrow)


def _encode(rows: list[tuple[Any, ...]], fail: Any, pa: Any) -> Any:
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    width = len(rows[0])
    columns = [list(c) for c in zip(*rows, strict=True)] if width else []
    types = []
    lat: dict[str, str] = {}
    arrays = []
    for j, values in enumerate(columns):
        cls = None
        plain = False
        for k, v in enumerate(values):
            if isinstance(v, Lattice):
                c = type(v)
                if cls is None:
                    cls = c
                elif c is not cls:
                    fail(
                        "NotSupportedOnSpark",
                        f"column {j} of its output holds {cls.__qualname__} and "
                        f"{c.__qualname__} values",
                    )
                try:
                    values[k] = column_format(spec_of(v)).to_cell(v)
                except TypeError as exc:
                    fail("NotSupportedOnSpark", f"a {c.__qualname__} value in column {j}: {exc}")
                if isinstance(values[k], bytearray):
                    values[k] = bytes(values[k])
            elif v is not None:
                plain = True
        if cls is not None:
            if plain:
                fail(
                    "NotSupportedOnSpark",
                    f"column {j} of its output holds {cls.__qualname__} values and plain values",
                )
            lat[str(j)] = _class_path(cls)
        t: Any = T.NullType()
        try:
            for v in values:
                t = _merge_type(t, _spark_type(v), f"column {j} of its output")
        except Exception as exc:
            fail("NotSupportedOnSpark", str(exc))
        types.append(t)
        try:
            arrays.append(pa.array(values, type=to_arrow_type(t)))
        except Exception as exc:
            fail("NotSupportedOnSpark", f"column {j} of its output ({t.simpleString()}): {exc}")
    schema = pa.schema([pa.field(f"c{j}", a.type) for j, a in enumerate(arrays)])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    sig = json.dumps(
        {"types": [t.jsonValue() for t in types], "lat": lat},
        sort_keys=True,
    )
    return pa.RecordBatch.from_arrays(
        [pa.array([sink.getvalue().to_pybytes()], pa.binary()), pa.array([sig], pa.string())],
        names=["b", "s"],
    )


def _merge_signatures(sigs: list[str], where: str) -> tuple[Any, dict[int, type]]:
    """The Spark schema (columns ``c0..``) and lattice classes of a Python node's output."""
    from pyspark.sql import types as T

    parsed = [json.loads(s) for s in sigs]
    widths = {len(p["types"]) for p in parsed}
    if len(widths) > 1:
        raise NotSupportedOnSpark(
            where,
            f"its function returns rows of different widths {sorted(widths)}; a DataFrame's "
            "rows have one width",
        )
    width = widths.pop()
    types: list[Any] = [T.NullType()] * width
    paths: dict[int, set[str]] = {}
    for p in parsed:
        for j, tj in enumerate(p["types"]):
            t = T._parse_datatype_json_value(tj)
            try:
                types[j] = _merge_type(types[j], t, f"column {j} of its output")
            except TypeError as exc:
                raise NotSupportedOnSpark(where, str(exc)) from None
        for j, path in p["lat"].items():
            paths.setdefault(int(j), set()).add(path)
    classes = {}
    for j, ps in paths.items():
        if len(ps) > 1:
            raise NotSupportedOnSpark(
                where, f"column {j} of its output holds values of {sorted(ps)}"
            )
        classes[j] = _class_of(ps.pop())
    schema = T.StructType([T.StructField(f"c{j}", t, True) for j, t in enumerate(types)])
    return schema, classes


def _decode_batches(schema: Any, where: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(schema)
        errors = WorkerErrors(where)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                for b in pa.ipc.open_stream(blob):
                    arrays = []
                    for j, field in enumerate(target):
                        a = b.column(j)
                        if a.type != field.type:
                            try:
                                a = a.cast(field.type)
                            except Exception as exc:
                                errors.raise_for(exc)
                        arrays.append(a)
                    yield pa.RecordBatch.from_arrays(arrays, schema=target)

    return run
