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

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blooml.errors import KeyConstraintError, NotSupportedOnSpark, ProgramError
from blooml.ir import (
    ArgAgg,
    Choose,
    Filter,
    FlatMap,
    Group,
    Join,
    Lat,
    LatConst,
    LatMethod,
    LatVar,
    Literal,
    Map,
    Node,
    NotIn,
    ProgramIR,
    Reduce,
    Rule,
    Scan,
    sources,
)
from blooml.ir import exprs as X
from blooml.lattices import lbool, lmax, lmin
from blooml.lattices._base import Lattice
from blooml.spark._formats import column_format

__all__ = ["Carry", "DataFramePlan", "run_plan"]

#: the most rows a delta kept on the driver may have (input lists, incremental group-bys)
SMALL_DELTA = 1024
#: aggregates a group keeps incrementally across ticks while its input only gains rows
_INCREMENTAL = {"count", "sum", "min", "max"}
#: lattice classes whose cells are plain Spark values merged by one SQL aggregate
_CELL: dict[type, str] = {lmax: "max", lmin: "min", lbool: "bool_or"}
_AGGS = {"count", "sum", "min", "max", "avg"}
_OPS = {"+", "-", "*"}
_CMPS = {"<", "<=", "==", "!=", ">", ">="}


class _Unlowerable(Exception):
    """Raised while planning: this construct has no DataFrame translation."""


class DataFramePlan:
    """A program whose every rule lowers to DataFrame operations, with its column types.

    Attributes:
        ir: the program's IR.
        lattice_cols: collection -> {column index: lattice class} for lattice-valued columns.
    """

    def __init__(self, ir: ProgramIR) -> None:
        self.ir = ir
        self.lattice_cols: dict[str, dict[int, type]] = {n: {} for n in ir.collections}
        # rule bodies run as Arrow-batched Python (blooml.spark._dfpython), by id(node): whether
        # a node runs as Python, its rule, its head (a rule's body), its output's lattice classes
        # (found when it runs)
        self.python_nodes: dict[int, bool] = {}
        self.python_where: dict[int, str] = {}
        self.python_heads: dict[int, str] = {}
        self.python_classes: dict[int, dict[int, type]] = {}
        #: declared Spark schemas of collections (columns c0..): SparkEngine(schemas=...)
        self.schemas: dict[str, Any] = {}
        #: collection -> {column index: Spark type} seen in the rows merged into it (or queued
        #: for it): an empty collection's frame gets these types, never ``void``
        self.column_types: dict[str, dict[int, Any]] = {n: {} for n in ir.collections}
        for info in ir.collections.values():
            if info.ttl is not None:
                raise _Unlowerable(f"{info.describe()}: soft state (ttl)")
        # lattice column classes flow from rule heads; iterate to a fixpoint
        for _ in range(len(ir.rules) + 1):
            changed = False
            for rule in ir.rules:
                changed |= self._infer(rule)
            if not changed:
                break
        for rule in ir.rules:
            self._check(rule)

    @classmethod
    def try_build(cls, ir: ProgramIR) -> tuple[DataFramePlan | None, str]:
        """The plan, or None and why the program does not lower (naming the rule)."""
        try:
            return cls(ir), ""
        except _Unlowerable as exc:
            return None, str(exc)

    # -- checking ----------------------------------------------------------------------------

    def _check(self, rule: Rule) -> None:
        where = rule.describe()
        if rule.op not in ("<=", "<+", "<-", "<+-"):
            raise _Unlowerable(f"{where}: {rule.op} (sends to another node)")
        if rule.op != "<=" and rule.head not in self.ir.collections:
            raise _Unlowerable(f"{where}: {rule.op} into a lattice variable")
        if rule.reads or rule.reads_tick:
            raise _Unlowerable(f"{where}: its functions read program state")
        ir = self.ir
        if ir.is_lattice(rule.head):
            cls = ir.lattices[rule.head].cls
            if isinstance(rule.body, Lat):
                self._check_lat(rule.body, where)
                return
            _dfpython.check_fold(cls, self._types(rule.body, where), where)
            self.python_heads[id(rule.body)] = rule.head
            return
        if isinstance(rule.body, Lat):
            raise _Unlowerable(f"{where}: rows from a lattice expression")
        types = self._types(rule.body, where)
        info = ir.collections[rule.head]
        if _dfpython.is_opaque(types):  # a Python function's rows: checked when it runs
            self.python_heads[id(rule.body)] = rule.head
            return
        if len(types) != len(info.columns):
            raise _Unlowerable(f"{where}: derives {len(types)} columns for {len(info.columns)}")
        for i, t in enumerate(types):
            want = self.lattice_cols[rule.head].get(i)
            if t is not want and t is not None and want is not None:
                raise _Unlowerable(f"{where}: column {i} mixes {t} and {want}")
        for i in range(len(info.keys)):
            if i in self.lattice_cols[rule.head]:
                raise _Unlowerable(f"{where}: a lattice value in key column {i}")

    def _check_lat(self, node: Node, where: str) -> None:
        if isinstance(node, (LatVar, LatConst)):
            return
        if isinstance(node, LatMethod) and node.kind != "nonmonotone":
            for n in (node.target, *node.args):
                if isinstance(n, Node):
                    if not isinstance(n, Lat):
                        raise _Unlowerable(f"{where}: a collection argument of a lattice method")
                    self._check_lat(n, where)
            return
        raise _Unlowerable(f"{where}: {type(node).__name__}")

    def _infer(self, rule: Rule) -> bool:
        if self.ir.is_lattice(rule.head) or isinstance(rule.body, Lat):
            return False
        try:
            types = self._types(rule.body, rule.describe())
        except _Unlowerable:
            return False
        known = self.lattice_cols[rule.head]
        changed = False
        for i, t in enumerate(types):
            if t is not None and i not in known:
                known[i] = t
                changed = True
        return changed

    def _types(self, node: Node, where: str) -> list[type | None]:
        """The lattice class of each output column of ``node`` (None: a plain column)."""
        if isinstance(node, Scan):
            info = self.ir.collections.get(node.name)
            if info is None:
                raise _Unlowerable(f"{where}: scans {node.name}")
            known = self.lattice_cols[node.name]
            return [known.get(i) for i in range(len(info.columns))]
        if isinstance(node, Literal):
            if any(isinstance(c, (Node, Lattice)) for row in node.rows for c in row):
                raise _Unlowerable(f"{where}: literal rows with lattice cells")
            width = {len(r) for r in node.rows}
            if len(width) > 1:
                raise _Unlowerable(f"{where}: literal rows of different widths")
            return [None] * (width.pop() if width else 0)
        if isinstance(node, (Map, Filter, FlatMap)) and _dfpython.runs_python(self, node, where):
            return _dfpython.python_types(self, node, where)
        if isinstance(node, Filter):
            inputs = self._inputs(node.input, where)
            expr = node.expr
            if expr is None:
                raise _Unlowerable(f"{where}: filter function not recovered as an expression")
            self._expr_type(expr, inputs, where)
            return self._types(node.input, where)
        if isinstance(node, Map):
            inputs = self._inputs(node.input, where)
            expr = node.expr
            if expr is None:
                raise _Unlowerable(f"{where}: map function not recovered as an expression")
            items = expr.items if isinstance(expr, X.TupleExpr) else (expr,)
            return [self._expr_type(e, inputs, where) for e in items]
        if isinstance(node, Join):
            if node.how != "inner":
                raise _Unlowerable(f"{where}: a {node.how} join")
            out: list[type | None] = []
            for inp in node.inputs:
                if not isinstance(inp, Scan):
                    raise _Unlowerable(f"{where}: a join input that is not a collection")
                out.extend(self._types(inp, where))
            return out
        if isinstance(node, NotIn):
            if node.fn is not None and where:  # its test runs as Python (_dfpython)
                self.python_where.setdefault(id(node), where)
            left = self._types(node.left, where)
            if _dfpython.is_opaque(left) or _dfpython.is_opaque(self._types(node.right, where)):
                raise _Unlowerable(f"{where}: notin over the rows of a Python function")
            return left
        if isinstance(node, (ArgAgg, Choose, Reduce)):  # grouped Arrow / SQL (_dfpython)
            return _dfpython.grouped_types(self, node, where)
        if isinstance(node, Group):
            inner = self._types(node.input, where)
            if isinstance(node.input, Join):
                raise _Unlowerable(f"{where}: group over a join")
            opaque = _dfpython.is_opaque(inner)  # a Python function's rows: checked at run time
            if opaque and where:
                self.python_where.setdefault(id(node), where)
            for a in node.aggs:
                if a.fn not in _AGGS or (a.col is None and a.fn != "count"):
                    raise _Unlowerable(f"{where}: the aggregate {a.fn}")
                if a.col is not None and not opaque and inner[a.col] is not None:
                    raise _Unlowerable(f"{where}: an aggregate over a lattice column")
            return [None] * (len(node.keys) + len(node.aggs))
        raise _Unlowerable(f"{where}: {type(node).__name__.lower()}")

    def _inputs(self, node: Node, where: str) -> list[tuple[Any, list[type | None]]]:
        """(column names or None, lattice classes) of each argument of a rule function."""
        if isinstance(node, Join):
            self._types(node, where)
            return [(i.columns, self._types(i, where)) for i in node.inputs]  # type: ignore[attr-defined]
        return [(node.columns, self._types(node, where))]  # type: ignore[attr-defined]

    def _expr_type(self, e: X.Expr, inputs: list[Any], where: str) -> type | None:
        if isinstance(e, X.Attr) and isinstance(e.obj, X.Arg):
            cols, types = inputs[e.obj.index]
            if cols is None or e.name not in cols:
                raise _Unlowerable(f"{where}: no column {e.name!r} known statically")
            return types[cols.index(e.name)]  # type: ignore[no-any-return]
        if isinstance(e, X.Item) and isinstance(e.obj, X.Arg) and isinstance(e.key, X.Const):
            types = inputs[e.obj.index][1]
            if not isinstance(e.key.value, int) or not 0 <= e.key.value < len(types):
                raise _Unlowerable(f"{where}: {X.to_source(e)}")
            return types[e.key.value]  # type: ignore[no-any-return]
        if isinstance(e, X.Const):
            if isinstance(e.value, (tuple, complex, type(...))):
                raise _Unlowerable(f"{where}: the constant {e.value!r}")
            return None
        if isinstance(e, X.BinOp) and e.op in _OPS:
            lt = self._expr_type(e.left, inputs, where)
            rt = self._expr_type(e.right, inputs, where)
            if rt is not None or (lt is not None and (lt not in (lmax, lmin) or e.op == "*")):
                raise _Unlowerable(f"{where}: {X.to_source(e)} on lattice values")
            return lt
        if isinstance(e, X.Compare) and e.op in _CMPS:
            if self._expr_type(e.left, inputs, where) or self._expr_type(e.right, inputs, where):
                raise _Unlowerable(f"{where}: comparing lattice values")
            return None
        if isinstance(e, X.Unary) and e.op in ("-", "not "):
            if self._expr_type(e.operand, inputs, where) is not None:
                raise _Unlowerable(f"{where}: {e.op} of a lattice value")
            return None
        if isinstance(e, X.LatNew) and e.cls in _CELL and len(e.args) == 1:
            if self._expr_type(e.args[0], inputs, where) is not None:
                raise _Unlowerable(f"{where}: a lattice built from a lattice value")
            return e.cls
        if isinstance(e, X.Method) and e.name in ("min_of", "max_of") and len(e.args) == 1:
            t = self._expr_type(e.obj, inputs, where)
            if t not in (lmax, lmin) or self._expr_type(e.args[0], inputs, where) is not None:
                raise _Unlowerable(f"{where}: {X.to_source(e)}")
            return t
        raise _Unlowerable(f"{where}: the expression {X.to_source(e)} has no SQL translation")


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


# -- evaluation --------------------------------------------------------------------------------


class _Run:
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
        #: collection -> local layers on its stored frame (:meth:`_layer`), across ticks
        self.layers: dict[str, int] = {}
        #: collections given a new frame this tick other than by layers: kept in full
        self.rewrite: set[str] = set()

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

    # the relational part ---------------------------------------------------------------------

    def cols(self, name: str) -> list[str]:
        return [f"c{i}" for i in range(len(self.ir.collections[name].columns))]

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
            r = right.toDF(*[f"r{c}" for c in right.columns])
            cond = [left[f"c{a}"].eqNullSafe(r[f"rc{b}"]) for a, b in pairs]
            return left.join(r, cond, "left_anti")
        if isinstance(node, Group):
            df = self.eval(node.input, None, counter)
            if df is None:
                return None
            _dfpython.check_group(self.plan, node, df)
            keys = [F.col(f"c{k}") for k in node.keys]
            aggs = []
            for j, a in enumerate(node.aggs):
                aggs.append(_aggregate(a.fn, a.col).alias(f"c{len(node.keys) + j}"))
            out = df.groupBy(*keys).agg(*aggs)
            return out.select(*[F.col(c).alias(f"c{j}") for j, c in enumerate(out.columns)])
        raise AssertionError(f"unplanned {node!r}")  # pragma: no cover

    def _lowering(self, inputs: tuple[Node, ...]) -> _Lowering:
        columns, types = [], []
        for inp in inputs:
            t = self.plan._types(inp, "")
            columns.append(inp.columns or tuple(f"_{i}" for i in range(len(t))))  # type: ignore[attr-defined]
            types.append(t)
        return _Lowering(columns, types)

    def _join(self, node: Join, delta_at: int | None, counter: list[int]) -> Any:
        from pyspark.sql import functions as F

        parts = [self.eval(inp, delta_at, counter) for inp in node.inputs]
        if any(p is None for p in parts):
            return None
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
                hit = F.col(col).isin([F.lit(v).cast(t) for v in vals])
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

    # merging derived rows into the state ----------------------------------------------------

    def merge_local(self, name: str, rows: Any, given: list[Any]) -> bool:
        """Merge a few rows given on the driver (``given``, an input list; ``rows`` is its
        frame) into the stored set-semantics table ``name`` without a shuffle: one job reads
        which of the rows are stored already (a filter by their values), and the new ones
        stay on the driver as this tick's delta (a local frame: its rows and keys are known
        without a job). False (nothing done) when the rows are many, the table is keyed, has
        lattice columns or columns that are not atomic or not of the stored types, or
        nothing is stored yet."""
        info = self.ir.collections[name]
        old = self.state.get(name)
        if old is None or info.values or self.plan.lattice_cols[name]:
            return False
        if len(given) > SMALL_DELTA or not _local_ok(rows.schema, old.schema):
            return False
        learn_types(self.plan, name, rows)
        self._add_local(name, [r if isinstance(r, tuple) else (r,) for r in given])
        return True

    def _merge_small(self, name: str, rows: Any) -> bool:
        """Merge a few derived rows (checkpointed and counted) into the stored set-semantics
        collection ``name`` as :meth:`merge_local` merges an input list: the rows collected,
        the stored ones among them found by a filter, the new ones a local delta. The
        result is left in ``_small_result``. False when the collection is keyed or its
        columns do not allow it."""
        info = self.ir.collections[name]
        old = self.state[name]
        if info.values or self.plan.lattice_cols[name] or not _local_ok(rows.schema, old.schema):
            return False
        learn_types(self.plan, name, rows)
        self._small_result = self._add_local(name, [tuple(r) for r in rows.collect()])
        return True

    def _add_local(self, name: str, given: list[tuple[Any, ...]]) -> tuple[Any, int]:
        """Add the rows ``given`` (few) to the stored set-semantics collection ``name``: one
        job reads which are stored; returns (the new ones as a local frame or None, count)."""
        old = self.state[name]
        cols = self.cols(name)
        local = list(dict.fromkeys(_local_rows(self.spark, given, old.schema)))
        stored = {tuple(x) for x in old.where(_matches(cols, local, old.schema)).collect()}
        new = [x for x in local if x not in stored]
        if not new:
            return None, 0
        delta = _local_frame(self.spark, new, old.schema)
        self._layer(name, old.unionByName(delta), self.state_rows(name) + len(new))
        self._local_delta(name, delta, new)
        return delta, len(new)

    def _local_delta(self, name: str, delta: Any, rows: list[tuple[Any, ...]]) -> None:
        """Record ``rows`` (also the local frame ``delta``) as part of ``name``'s tick delta."""
        self.tick_delta.setdefault(name, []).append((delta, len(rows)))
        self.local_frames[id(delta)] = (delta, rows)
        known = self.tick_local.get(name, [])
        self.tick_local[name] = None if known is None else [*known, *rows]

    def incr_group(self, rule: Rule) -> tuple[Any, int]:
        """Update the scratch ``rule.head``, a ``group`` over a table whose tick delta is
        small rows on the driver (only inserts), for the groups those rows touch: per touched
        key the stored aggregate combined with the delta's (``count()``, ``sum``: added;
        ``min``, ``max``: the least/greatest), the other groups kept as stored. One job reads
        the stored rows of the touched keys (a filter by their values); the new state is the
        stored one less those keys plus their new rows (a local frame). Returns (the rows
        that changed or None, how many)."""
        node = rule.body
        assert isinstance(node, Group) and isinstance(node.input, Scan)  # _first_round
        name = rule.head
        old = self.state[name]
        cols = self.cols(name)
        nk = len(node.keys)
        inc: dict[tuple[Any, ...], list[Any]] = {}
        for row in self.tick_local[node.input.name] or ():
            k = tuple(row[i] for i in node.keys)
            vals = [1 if a.col is None else row[a.col] for a in node.aggs]
            got = inc.get(k)
            inc[k] = (
                vals
                if got is None
                else [_combine(a.fn, g, v) for a, g, v in zip(node.aggs, got, vals, strict=True)]
            )
        keys = _local_rows(self.spark, list(inc), old.select(*cols[:nk]).schema)
        inc = dict(zip(keys, inc.values(), strict=True))
        match = _matches(cols[:nk], keys, old.schema)
        stored = {tuple(r[:nk]): tuple(r[nk:]) for r in old.where(match).collect()}
        new_rows, changed = [], []
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
            new_rows.append((*k, *now))
            if now != was:
                changed.append((*k, *now))
        new_rows = _local_rows(self.spark, new_rows, old.schema)
        touched = _local_frame(self.spark, new_rows, old.schema)
        from pyspark.sql import functions as F

        state = old.where(~F.coalesce(match, F.lit(False))).unionByName(touched)
        self._layer(name, state, self.state_rows(name) + len(new_rows) - len(stored))
        if len(changed) > len(new_rows) - len(stored):
            self.shrunk.add(name)  # a stored group's row was replaced
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

    def _layer(self, name: str, state: Any, rows: int) -> None:
        """The new state of ``name`` (``rows`` rows): the stored frame with a few rows on the
        driver added or filtered out, a *layer* kept unmaterialized (its stored frame, read
        back from the checkpoint directory's files or a checkpoint, stays as it is) until
        ``checkpoint_every`` layers pile up (see :func:`run_plan`)."""
        self.layers[name] = self.layers.get(name, 0) + 1
        self.state[name] = state
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


def _checkpoint(df: Any) -> Any:
    """``df.localCheckpoint()``, on classic sessions with Spark's size estimate of the result
    reset when it has outgrown a long.

    A checkpoint keeps the size estimate of the plan it came from, and Spark estimates a join's
    size as the product of its inputs'. A rule joining two recursive collections feeds those
    products back round after round: the estimate's digits double every few rounds until
    planning a query takes longer than running it (and then minutes). Past 2**63 an estimate
    only says "large", so the checkpointed rows are wrapped in a new frame whose estimate is
    Spark's default for an RDD it knows nothing about (``spark.sql.defaultSizeInBytes``). The
    rows are not copied or recomputed. Spark Connect keeps the estimate (no JVM access)."""
    out = df.localCheckpoint()
    jdf = getattr(out, "_jdf", None)
    if jdf is None:  # Spark Connect
        return out
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "LogicalRDD":  # pragma: no cover - Spark changed
            return out
        try:
            if int(plan.stats().sizeInBytes()).bit_length() <= 63:
                return out
        except ValueError:  # too many digits for Python's int(): reset it
            pass
        fresh = out.sparkSession._jsparkSession.internalCreateDataFrame(
            plan.rdd(), jdf.schema(), False
        )
        return type(out)(fresh, out.sparkSession)
    except Exception:  # pragma: no cover - an internal API moved: keep Spark's estimate
        return out


def checkpoint_dir(spark: Any) -> str | None:
    """The session's reliable checkpoint directory: ``sc.setCheckpointDir(...)`` on classic
    sessions, ``spark.checkpoint.dir`` on Spark Connect; None when unset."""
    if getattr(spark, "sparkContext", None) is not None and not _is_connect(spark):
        found = spark.sparkContext._jsc.sc().getCheckpointDir()
        return str(found.get()) if found.isDefined() else None
    try:
        return spark.conf.get("spark.checkpoint.dir", None) or None
    except Exception:  # pragma: no cover - a conf service that refuses
        return None


def _is_connect(spark: Any) -> bool:
    from blooml.spark._lazy import is_connect

    return is_connect(spark)


#: the row group size of state files (bytes): small groups, so that a filter by a few
#: values of the sorted first column reads a few thousand rows, not the whole file; a large
#: state gets larger groups, at most :data:`STATE_ROW_GROUPS` of them (file footers stay small)
STATE_ROW_GROUP = 32 << 10
STATE_ROW_GROUPS = 4096


def keep_state(
    df: Any, files: list[str] | None = None, *, sort: bool = False, rows: int | None = None
) -> Any:
    """``df`` materialized for use after this tick.

    With a reliable checkpoint directory (:func:`checkpoint_dir`) the rows are written there as
    Parquet and read back: they survive the loss of an executor, and Spark estimates the
    frame's size from its files, so a join of a user's frame with it plans as it would with a
    table. The path is appended to ``files`` (the caller deletes it when it is not needed any
    more). ``sort``: the rows are sorted by their first column (when it is atomic) and
    written in row groups of :data:`STATE_ROW_GROUP` bytes (more for a state of many
    ``rows``: see :data:`STATE_ROW_GROUPS`), so that a filter by a few of its values reads
    only the row groups whose range holds them. Without a checkpoint
    directory (or for a column Parquet cannot hold, such as ``void``): a
    ``localCheckpoint`` (:func:`_checkpoint`)."""
    from pyspark.sql.types import NullType

    spark = df.sparkSession
    root = checkpoint_dir(spark)
    if root is None or any(isinstance(f.dataType, NullType) for f in df.schema.fields):
        return _checkpoint(df)
    import uuid

    path = f"{root.rstrip('/')}/blooml-state-{uuid.uuid4().hex}"
    writer = df
    if sort and df.columns and _atomic(df.select(df.columns[0]).schema):
        writer = df.sort(df.columns[0])
    block = max(STATE_ROW_GROUP, (rows or 0) * 8 * len(df.columns) // STATE_ROW_GROUPS)
    writer.write.option("parquet.block.size", block).parquet(path)
    if files is not None:
        files.append(path)
    return spark.read.parquet(path)


def delete_files(spark: Any, paths: list[str]) -> None:
    """Delete state files written by :func:`keep_state` (classic sessions, through the Hadoop
    FileSystem of each path; Spark Connect has no file system API: they stay, as Spark's own
    reliable checkpoints stay unless ``spark.cleaner.referenceTracking.cleanCheckpoints``)."""
    if _is_connect(spark):
        return
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for p in paths:
        try:
            path = jvm.org.apache.hadoop.fs.Path(p)
            path.getFileSystem(conf).delete(path, True)
        except Exception:  # pragma: no cover - a store that refuses deletes: the files stay
            continue


def merge_saved(df: Any, n_keys: int, lattice_cols: Mapping[int, type]) -> Any:
    """The rows of a collection saved as several parts (a full version, then the rows each
    tick changed) merged into its state: set semantics, or per key the lattice columns merged
    by their SQL aggregate and the other values (equal in every part) kept. Columns ``c0..``."""
    from pyspark.sql import functions as F

    cols = [f"c{i}" for i in range(len(df.columns))]
    df = df.toDF(*cols)
    if n_keys >= len(cols):
        return df.distinct()
    aggs = []
    for i, c in enumerate(cols[n_keys:], start=n_keys):
        cls = lattice_cols.get(i)
        sql = _cell_merge_sql(cls, c) if cls in _CELL else f"first({c}, true)"
        aggs.append(F.expr(sql).alias(c))
    return df.groupBy(*cols[:n_keys]).agg(*aggs).select(*cols)


def _checkpoint_observed(df: Any, *metrics: str) -> tuple[Any, tuple[int, ...]]:
    """``_checkpoint(df)`` and the integer SQL aggregates ``metrics`` over its rows.

    On classic sessions the aggregates are observed (``DataFrame.observe``) by the checkpoint's
    own job: the checkpoint runs as a Dataset action, whose observed metrics Spark reports
    when it ends, so counting the rows costs no job of its own (a separate aggregate is two
    under adaptive execution). On Spark Connect: one aggregate query over the checkpoint."""
    from pyspark.sql import functions as F

    if getattr(df, "_jdf", None) is None:  # Spark Connect
        out = _checkpoint(df)
        row = out.select(*[F.expr(m).alias(f"m{i}") for i, m in enumerate(metrics)]).collect()[0]
        return out, tuple(int(row[i] or 0) for i in range(len(metrics)))
    from pyspark.sql import Observation

    obs = Observation()
    out = _checkpoint(df.observe(obs, *[F.expr(m).alias(f"m{i}") for i, m in enumerate(metrics)]))
    got = obs.get
    return out, tuple(int(got[f"m{i}"] or 0) for i in range(len(metrics)))


def _count(df: Any) -> int:
    """``df``'s row count in one job: on classic sessions its rows counted in the JVM (no
    shuffle: ``DataFrame.count()`` aggregates through one, a job of its own under adaptive
    execution), on Spark Connect ``count()``."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return int(df.count())
    return int(jdf.queryExecution().toRdd().count())


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


def _rules(indexes: list[int]) -> str:
    """``(rule 3)`` / ``(rules 0, 1)``: what a job label names as the source of its rows."""
    return f"(rule{'s' if len(indexes) > 1 else ''} {', '.join(map(str, indexes))})"


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
    if not rows:
        return []
    return [tuple(r) for r in _local_frame(spark, rows, schema).collect()]


def _matches(cols: list[str], rows: list[tuple[Any, ...]], schema: Any) -> Any:
    """A Column: the row's ``cols`` equal (NULL-safe) those of one of ``rows``."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in schema.fields}
    if len(cols) == 1:
        c = F.col(cols[0])
        vals = [r[0] for r in rows if r[0] is not None]
        out = c.isin([F.lit(v).cast(types[cols[0]]) for v in vals]) if vals else F.lit(False)
        if len(vals) < len(rows):
            out = out | c.isNull()
        return out
    first = list(dict.fromkeys(r[0] for r in rows if r[0] is not None))
    # the first column alone: a filter Parquet pushes down (files are sorted by it)
    head = F.col(cols[0]).isin([F.lit(v).cast(types[cols[0]]) for v in first])
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


def _aggregate(fn: str, col: int | None) -> Any:
    """The Spark aggregate of a ``group`` aggregate, as :func:`blooml.ir.apply_aggregate`
    defines it: ``count()`` counts rows, ``count(c)`` the distinct values of ``c`` (NULL, like
    Python's None, is one value of them; SQL's ``count(DISTINCT c)`` skips it)."""
    from pyspark.sql import functions as F

    if col is None:
        return F.count(F.lit(1))
    c = F.col(f"c{col}")
    if fn == "count":
        return F.count_distinct(c) + F.max(c.isNull().cast("int"))
    return getattr(F, fn)(c)


def _any_sql(conds: Any) -> str:
    """SQL for "any of ``conds`` is true" (NULL counts as false)."""
    parts = [f"coalesce({c}, false)" for c in conds]
    return "(" + " OR ".join(parts) + ")" if parts else "false"


def _cell_merge_sql(cls: type, c: str) -> str:
    if cls is lbool:
        return f"coalesce(bool_or({c}), false)"
    return f"{_CELL[cls]}({c})"


class Carry:
    """What one tick hands the next besides the state itself: the exact row count of every
    stored collection (no job counts them again) and the scratches that inputs or pending
    facts fed (those start the next tick empty; the others keep their rows until a rule that
    derives them has a changed input); and, for whoever saves the state, what the tick
    changed (``delta``, ``shrunk``)."""

    __slots__ = ("counts", "delta", "fed", "layers", "shrunk")

    def __init__(self, counts: dict[str, int] | None = None, fed: set[str] | None = None) -> None:
        self.counts = dict(counts or {})
        self.fed = set(fed or ())
        #: collection -> the local layers on its last materialized frame (0: the frame is new
        #: and whoever keeps it writes it; n > 0: it is that frame plus n small layers)
        self.layers: dict[str, int] = {}
        #: after a tick: collection -> the rows it gained or that grew (keyed: the merged rows)
        self.delta: dict[str, Any] = {}
        #: after a tick: the collections that lost rows (deleted, replaced, recomputed scratches)
        self.shrunk: set[str] = set()


def run_plan(
    spark: Any,
    plan: DataFramePlan,
    inputs: Mapping[str, Any],
    *,
    checkpoint_every: int,
    max_rounds: int,
    state: Mapping[str, Any] | None = None,
    lattices: Mapping[str, Lattice] | None = None,
    pending: Mapping[str, Mapping[str, Any]] | None = None,
    carry: Carry | None = None,
) -> tuple[
    dict[str, Any],
    dict[str, Lattice],
    tuple[int, ...],
    list[list[int]],
    dict[str, dict[str, Any]],
]:
    """Evaluate one tick; returns (state DataFrames, lattice values, rounds per stratum, rows
    touched per round per stratum, the facts for the next tick by op and collection).

    ``state``, ``lattices``, ``pending`` and ``carry`` carry a previous tick's results (``carry``
    is updated in place for the next tick): tables persist, scratches start empty, and the
    previous tick's ``<+-`` (replace by key), ``<-`` (delete, matched on the non-lattice
    columns) and ``<+`` (insert) facts apply first.

    With a previous tick the evaluation is semi-naive across ticks, as in the local engine: a
    rule none of whose inputs changed this tick is not evaluated (a scratch it derives keeps the
    rows it had), and the first round of a stratum joins only the rows the tick changed with
    the state; a rule that reads a changed input non-monotonically (``notin``'s right side, a
    ``group``, ``argmin``, ...) or that derives a scratch that must be recomputed runs over the
    whole state. A tick that changes nothing runs no Spark job."""
    ir = plan.ir
    run = _Run(spark, plan, checkpoint_every)
    if carry is None:
        carry = Carry()
    pend = pending or {}
    _jobs.label(what="inputs")
    fed = {n for n, df in inputs.items() if df is not None} | {
        n for by in pend.values() for n in by
    }
    scratch_fed = {n for n in fed | carry.fed if not ir.collections[n].persistent}
    derived = {r.head for r in ir.rules}
    for n, df in (state or {}).items():
        info = ir.collections[n]
        # a scratch keeps its rows only while rules alone derive it: rows an input or a
        # pending fact gave it (now or last tick) belong to that tick
        if info.persistent or (n in derived and n not in scratch_fed):
            run.state[n] = df
            if n in carry.counts:
                run.n_state[n] = carry.counts[n]
        else:
            run.shrunk.add(n)
            if n in derived:
                run.reset.add(n)
    run.fresh = state is None
    run.layers = {n: k for n, k in carry.layers.items() if n in run.state}
    run.lattices.update(lattices or {})
    for name, rows in pend.get("<+-", {}).items():
        old = run.state.get(name)
        info = ir.collections[name]
        nk = len(info.keys) if info.values else len(info.columns)
        keys = run.cols(name)[:nk]
        if old is not None:
            run.state[name] = anti_join(old, rows.select(*keys).distinct(), keys)
            run.n_state.pop(name, None)
            run.rewrite.add(name)  # a new frame: kept in full
            run.shrunk.add(name)
        run.merge(name, rows)
    for name, rows in pend.get("<-", {}).items():
        old = run.state.get(name)
        if old is not None:
            match = [c for i, c in enumerate(run.cols(name)) if i not in plan.lattice_cols[name]]
            run.state[name] = anti_join(old, rows.select(*match).distinct(), match)
            run.n_state.pop(name, None)
            run.rewrite.add(name)
            run.shrunk.add(name)
    for name, rows in pend.get("<+", {}).items():
        run.merge(name, rows)
    for name, df in inputs.items():
        if df is None:
            continue
        cols = run.cols(name)
        given = None if hasattr(df, "schema") and hasattr(df, "columns") else list(df)
        df = _as_frame(
            spark,
            df if given is None else given,
            ir.collections[name].columns,
            plan.lattice_cols[name],
        )
        if df is None:
            continue  # no rows
        if len(df.columns) != len(cols):
            raise ProgramError(
                f"input {name!r}: {ir.collections[name].kind} {name!r} has columns "
                f"{list(ir.collections[name].columns)}; the DataFrame has {df.columns}"
            )
        df = df.toDF(*cols)
        if given is None or not run.merge_local(name, df, given):
            run.merge(name, df)
    run.fed = {n for n in fed if not ir.collections[n].persistent}
    rounds: list[int] = []
    for s_index, stratum in enumerate(ir.strata):
        rules = [ir.rules[i] for i in stratum]
        _jobs.label(stratum=s_index)
        try:
            rounds.append(_stratum(run, rules, max_rounds))
        except Exception as exc:
            why = _jobs.failure(exc, ir, stratum)
            _jobs.log.warning("%s stratum %d failed: %s", ir.name, s_index, why)
            raise
    # end of tick: the temporal rules over the final state; their facts wait for the next tick
    run.recursive = set()
    nxt: dict[str, dict[str, Any]] = {}
    for i in ir.temporal:
        rule = ir.rules[i]
        _jobs.label(end=True, rule=rule)
        rows = run.eval(rule.body, None, [0])
        if rows is None:
            continue
        rows = rows.select(*[rows[c].alias(f"c{j}") for j, c in enumerate(rows.columns)])
        learn_types(plan, rule.head, rows)
        by_head = nxt.setdefault(rule.op, {})
        prev = by_head.get(rule.head)
        by_head[rule.head] = rows if prev is None else prev.unionByName(rows)
    for op, by_head in nxt.items():
        for name in by_head:
            idx = [i for i in ir.temporal if ir.rules[i].head == name and ir.rules[i].op == op]
            _jobs.label(end=True, what=f"{op} facts for the next tick into {name} {_rules(idx)}")
            by_head[name] = _checkpoint(by_head[name])  # a snapshot of this tick's state
    # layers piled up: the state materialized (written to the checkpoint directory by the
    # engine when the session has one, else checkpointed here)
    reliable = checkpoint_dir(spark) is not None
    for name in run.rewrite:
        run.layers[name] = 0
    for name, k in list(run.layers.items()):
        if name not in run.state:
            del run.layers[name]
        elif k >= run.checkpoint_every:
            run.layers[name] = 0
            if not reliable:
                run.state[name] = _checkpoint(run.state[name])
    carry.layers = dict(run.layers)
    carry.counts = {n: c for n, c in run.n_state.items() if n in run.state}
    carry.fed = set(run.fed)
    carry.shrunk = set(run.shrunk) | (set(run.state) if run.fresh else set())
    carry.delta = {}
    for name, parts in run.tick_delta.items():
        df = parts[0][0]
        for p, _ in parts[1:]:
            df = df.unionByName(p)
        carry.delta[name] = df
    return run.state, run.lattices, tuple(rounds), run.touched, nxt


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


def _as_frame(spark: Any, data: Any, columns: tuple[str, ...], lat: dict[int, type]) -> Any:
    if hasattr(data, "schema") and hasattr(data, "columns"):
        return data
    rows = []
    for r in data:
        r = tuple(r) if isinstance(r, tuple) else (r,)
        rows.append(
            tuple(column_format(type(c)).to_cell(c) if isinstance(c, Lattice) else c for c in r)
        )
    if not rows:
        return None
    return spark.createDataFrame(rows, list(columns))


def _stratum(run: _Run, rules: list[Rule], max_rounds: int) -> int:
    ir = run.ir
    heads = {r.head for r in rules}
    reads = {name for r in rules for name, _ in sources(r.body)}
    run.recursive = {h for h in heads if h in reads and h in ir.collections}
    run.delta = {}
    touched_log: list[int] = []
    changed_lats: set[str] = set()
    first_rules = _first_round(run, rules)
    rounds = 0
    while True:
        rounds += 1
        if rounds > max_rounds:
            raise ProgramError(
                f"{ir.name}: the stratum of rules {[r.index for r in rules]} did not reach a "
                f"fixpoint in {max_rounds} rounds (raise max_rounds if it should)"
            )
        first = rounds == 1
        derived: dict[str, list[Any]] = {}
        lat_news: dict[str, list[Lattice]] = {}
        incr: dict[str, int] = {}  # heads updated incrementally: rows changed
        incr_delta: dict[str, Any] = {}
        # heads whose rows this round came only from rules joining the tick's delta
        from_delta: set[str] = set()
        from_state: set[str] = set()
        for rule in rules:
            if first and first_rules[rule.index] == "skip":
                continue
            _jobs.label(round=rounds, rule=rule)
            if isinstance(rule.body, Lat):
                if first or {n for n, _ in sources(rule.body)} & changed_lats:
                    lat_news.setdefault(rule.head, []).append(_eval_lat(run, rule, rule.body))
                continue
            if first and first_rules[rule.index] == "incr":
                _jobs.label(round=rounds, what=f"update {rule.head} (rule {rule.index})")
                delta, n = run.incr_group(rule)
                incr[rule.head] = n
                if delta is not None and rule.head in reads:
                    incr_delta[rule.head] = delta
                continue
            if first and first_rules[rule.index] == "delta":
                parts = _tick_delta_rows(run, rule)
                from_delta.add(rule.head)
            else:
                parts = _rule_rows(run, rule, first)
                from_state.add(rule.head)
            if ir.is_lattice(rule.head):
                cls = ir.lattices[rule.head].cls
                for df in parts:
                    lat_news.setdefault(rule.head, []).append(
                        _dfpython.fold_rows(run.plan, df, cls, rule)
                    )
            else:
                derived.setdefault(rule.head, []).extend(parts)
        changed_lats = set()
        for name, values in lat_news.items():
            old = run.lattices[name]
            new = old
            for v in values:
                new = new.merge(v)
            if new != old:
                run.lattices[name] = new
                changed_lats.add(name)
        run.tick_lats |= changed_lats
        # rows joined from small deltas only (a later tick): counted before they are merged
        small = not run.fresh and all(v <= SMALL_DELTA for v in run.n_delta.values())
        new_delta: dict[str, Any] = dict(incr_delta)
        run.n_delta = {h: incr[h] for h in incr_delta}
        run.sizes = {}
        touched = sum(incr.values())
        rows_new = {h: 0 for h in heads if h in ir.collections} | incr
        for name, parts in derived.items():
            if not parts:
                continue
            idx = [r.index for r in rules if r.head == name]
            _jobs.label(round=rounds, what=f"merge into {name} {_rules(idx)}")
            rows = _union(name, parts, rules)
            precount = name in from_delta - from_state if first else small
            delta, n = run.merge(name, rows, precount=precount)
            rows_new[name] = n
            touched += n
            if delta is not None and name in reads:
                new_delta[name] = delta
                run.n_delta[name] = n
        touched_log.append(touched)
        _jobs.log_round(ir.name, len(run.touched), rounds, rows_new, changed_lats)
        run.delta = new_delta
        if not (set(new_delta) | changed_lats) & reads:
            run.touched.append(touched_log)
            return rounds


def _first_round(run: _Run, rules: list[Rule]) -> dict[int, str]:
    """How each rule of a stratum runs in its first round: ``"full"`` (over the whole state),
    ``"delta"`` (over the rows this tick changed, joined with the state) or ``"skip"`` (no
    input changed). A scratch derived by a rule that must run is recomputed from nothing, so
    every rule deriving it runs in full."""
    ir = run.ir
    if run.fresh:
        return {r.index: "full" for r in rules}
    changed = set(run.tick_delta) | run.tick_lats
    how: dict[int, str] = {}
    for rule in rules:
        srcs = list(sources(rule.body))
        if isinstance(rule.body, Lat):
            how[rule.index] = "full" if {n for n, _ in srcs} & run.tick_lats else "skip"
            continue
        if _incremental(run, rule, rules):
            how[rule.index] = "incr"
        elif any(nm and (n in changed or n in run.shrunk) for n, nm in srcs) or any(
            n in run.tick_lats for n, _ in srcs
        ):
            how[rule.index] = "full"
        elif any(n in changed for n, _ in srcs):
            how[rule.index] = "delta"
        else:
            how[rule.index] = "skip"
    redo = {
        r.head
        for r in rules
        if r.head in ir.collections
        and not ir.collections[r.head].persistent
        and (how[r.index] not in ("skip", "incr") or r.head in run.fed or r.head in run.reset)
    }
    for name in redo - run.fed:  # recomputed from nothing (a fed scratch holds this tick's rows)
        if run.state.pop(name, None) is not None:
            run.shrunk.add(name)
        run.n_state.pop(name, None)
    for rule in rules:
        if rule.head in redo:
            how[rule.index] = "full"
    return how


def _incremental(run: _Run, rule: Rule, rules: list[Rule]) -> bool:
    """Whether ``rule`` keeps its head up to date incrementally this tick (:meth:`_Run.
    incr_group`): a ``group`` by ``count()``, ``sum``, ``min`` or ``max`` straight over a
    table that only gained rows this tick, few and on the driver (no NULL among the aggregated
    values); its head a keyed scratch keyed by the group's keys, that this rule alone derives
    and no other rule of the stratum reads, holding the rows of the previous tick."""
    node = rule.body
    if not isinstance(node, Group) or not isinstance(node.input, Scan):
        return False
    src, head = node.input.name, rule.head
    rows = run.tick_local.get(src)
    info = run.ir.collections.get(head)
    if (
        not rows
        or info is None
        or info.persistent
        or src in run.shrunk
        or head not in run.state
        or head in run.fed
        or head in run.reset
        or len(info.keys) != len(node.keys)
        or run.plan.lattice_cols[head]
        or run.plan.python_nodes.get(id(node))
    ):
        return False
    for a in node.aggs:
        if a.fn not in _INCREMENTAL or (a.fn == "count") != (a.col is None):
            return False
        if a.col is not None and any(r[a.col] is None for r in rows):
            return False
    if sum(1 for r in run.ir.rules if r.head == head) != 1:
        return False
    if not _atomic(run.state[head].schema):  # its touched groups become local rows
        return False
    return not any(r is not rule and head in {n for n, _ in sources(r.body)} for r in rules)


def _tick_delta_rows(run: _Run, rule: Rule) -> list[Any]:
    """The rows of ``rule`` that this tick's changes make derivable: one evaluation per
    occurrence of a changed collection, that occurrence reading the tick's delta of it and the
    others the whole state (which includes the delta)."""
    saved = run.recursive, run.delta, run.n_delta
    names = {n for n, _ in sources(rule.body) if n in run.tick_delta}
    run.recursive = names
    run.delta, run.n_delta = {}, {}
    for n in names:
        parts = run.tick_delta[n]
        df = parts[0][0]
        for p, _ in parts[1:]:
            df = df.unionByName(p)
        run.delta[n] = df
        run.n_delta[n] = sum(c for _, c in parts)
        rows = run.tick_local.get(n)
        if rows is not None:
            run.local_frames[id(df)] = (df, rows)
    try:
        return _rule_rows(run, rule, False)
    finally:
        run.recursive, run.delta, run.n_delta = saved


def _union(name: str, parts: list[Any], rules: list[Rule]) -> Any:
    """The union of rule outputs for one head; columns must have one Spark type."""
    from pyspark.sql.types import NullType, NumericType

    if len(parts) == 1:
        return parts[0]
    types = [[f.dataType for f in p.schema.fields] for p in parts]
    for j in range(len(types[0])):
        seen = {t[j] for t in types if not isinstance(t[j], NullType)}
        if len(seen) > 1 and not all(isinstance(t, NumericType) for t in seen):
            names = ", ".join(sorted(t.simpleString() for t in seen))
            raise NotSupportedOnSpark(
                ", ".join(r.describe() for r in rules if r.head == name),
                f"column {j} of {name!r} is derived with different Spark types ({names}); a "
                "DataFrame column has one type: run this program on the RDD path "
                "(SparkEngine(spark, path='rdd'))",
            )
    rows = parts[0]
    for p in parts[1:]:
        rows = rows.unionByName(p)
    return rows


def _rule_rows(run: _Run, rule: Rule, first: bool) -> list[Any]:
    if first:
        out = run.eval(rule.body, None, [0])
        return [] if out is None else [out]
    occurrences = sum(1 for name, _ in sources(rule.body) if name in run.recursive)
    parts = []
    for i in range(occurrences):
        out = run.eval(rule.body, i, [0])
        if out is not None:
            parts.append(out)
    return parts


def _eval_lat(run: _Run, rule: Rule, node: Node) -> Any:
    if isinstance(node, LatVar):
        return run.lattices[node.name]
    if isinstance(node, LatConst):
        return node.value
    if isinstance(node, LatMethod):
        target = _eval_lat(run, rule, node.target)
        args = [_eval_lat(run, rule, a) if isinstance(a, Node) else a for a in node.args]
        try:
            return getattr(target, node.name)(*args)
        except Exception as exc:
            exc.add_note(f"in {rule.describe()} (on Spark)")
            raise
    raise AssertionError(f"unplanned {node!r}")  # pragma: no cover


from blooml.spark import _dfpython, _jobs  # noqa: E402  (it builds on this module)
