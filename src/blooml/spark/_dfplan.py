"""Planning Bloom^L programs as Spark DataFrame operations: which rules lower, and the
lattice classes of every column (:class:`DataFramePlan`).

Every rule of a program must lower to DataFrame operations — scans, selections and projections
from the expressions recovered from rule functions (:mod:`blooml.ir.exprs`), equi-joins,
anti-joins for ``notin``, ``groupBy`` for aggregates — with lattice columns of the natively
stored builtins (``lmax``, ``lmin``, ``lbool``) merged by their SQL aggregates. Rule bodies that
do not lower as SQL run as Arrow-batched Python (:mod:`blooml.spark._dfpython`). Evaluation is
:mod:`blooml.spark._dfeval`, the tick driver :mod:`blooml.spark._dftick`.

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
)
from blooml.ir import exprs as X
from blooml.lattices import lbool, lmax, lmin
from blooml.lattices._base import Lattice

__all__ = ["DataFramePlan"]

#: aggregates a group keeps incrementally across ticks while its input only gains rows
_INCREMENTAL = {"count", "sum", "min", "max"}
#: lattice classes whose cells are plain Spark values merged by one SQL aggregate
_CELL: dict[type, str] = {lmax: "max", lmin: "min", lbool: "bool_or"}
_AGGS = {"count", "sum", "min", "max", "avg"}
_OPS = {"+", "-", "*"}
_CMPS = {"<", "<=", "==", "!=", ">", ">="}


def _cell_join(cls: type, a: Any, b: Any) -> Any:
    """Two cells of a lattice column of class ``cls`` (a :data:`_CELL` class) merged on the
    driver as :func:`_cell_merge_sql` merges them in SQL: NULL is bottom; ``lbool``'s bottom
    is false."""
    if cls is lbool:
        return bool(a) or bool(b)
    if a is None or b is None:
        return b if a is None else a
    return max(a, b) if _CELL[cls] == "max" else min(a, b)


def _cell_merge_sql(cls: type, c: str) -> str:
    """The SQL aggregate merging column ``c`` of a lattice column of class ``cls`` (a
    :data:`_CELL` class) across rows: NULL is bottom; ``lbool``'s bottom is false."""
    if cls is lbool:
        return f"coalesce(bool_or({c}), false)"
    return f"{_CELL[cls]}({c})"


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


from blooml.spark import _dfpython  # noqa: E402  (it builds on this module)
