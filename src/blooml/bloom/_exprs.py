"""Right-hand sides: lazy expression wrappers over IR nodes, column references, predicates.

Every method here builds a new IR node and returns a new wrapper; nothing is evaluated. The
operator traps of a Python DSL are handled here: ``bool()`` raises, ``==`` on a column
reference builds a predicate (``__hash__`` is restored to identity), reversed comparisons raise
instead of silently recording the wrong rule, and ``+x``/``-x``/``~x`` mark the deferred,
delete and async operators.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from blooml.bloom._aggs import AggSpec
from blooml.bloom._state_types import RowFn
from blooml.errors import ProgramError
from blooml.ir import exprs as X
from blooml.ir import nodes as N
from blooml.lattices._base import Lattice, kind_of, registered_lattices

__all__ = [
    "ColExpr",
    "ColumnRef",
    "LatExpr",
    "OpWrap",
    "PredExpr",
    "RelExpr",
    "lift",
    "lift_rows",
    "rows",
]


def _no_bool(what: str) -> NoReturn:
    raise TypeError(
        f"{what} has no truth value: it is part of a Bloom rule, not a Python value. "
        "Inside a @bloom block write `head <= body` as a statement (no `if`, no chained "
        "`a <= b <= c`); outside rules read `p.coll` or `p.lat.value`."
    )


def _reversed(what: str) -> NoReturn:
    raise ProgramError(
        f"{what}: a rule is written `head <= body` with the collection or lattice being "
        "defined on the left; `x >= head`, `x > head` and `value <= head` are not rules "
        "(Python turns `3 <= self.x` into `self.x >= 3`). Put the head on the left; to compare "
        "lattice values inside a rule use a method such as `gt_eq(n)`."
    )


class _Expr:
    """Shared traps of every DSL object."""

    __slots__ = ()
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        _no_bool(f"{type(self).__name__} {self!r}")

    def __ge__(self, other: Any) -> Any:
        _reversed(f"`{self!r} >= {other!r}`")

    def __gt__(self, other: Any) -> Any:
        _reversed(f"`{self!r} > {other!r}`")

    def __iter__(self) -> NoReturn:
        raise TypeError(
            f"{self!r} is a lazy rule expression and cannot be iterated inside a @bloom block; "
            "iterate `p.coll` on a program instance after a tick"
        )

    def __le__(self, other: Any) -> Any:
        raise ProgramError(
            f"the left side of `<=` must be a collection or lattice variable of the program, "
            f"not the expression {self!r}"
        )

    def __lt__(self, other: Any) -> Any:
        raise ProgramError(
            f"the left side of a rule must be a collection or lattice variable of the program, "
            f"not the expression {self!r}"
        )

    def __pos__(self) -> OpWrap:
        return OpWrap("<+", self)

    def __neg__(self) -> OpWrap:
        return OpWrap("<-", self)

    def __invert__(self) -> OpWrap:
        return OpWrap("<~", self)


class OpWrap(_Expr):
    """``+body``, ``-body``, ``~body`` or ``+-body``: the right side of ``<+ <- <~ <+-``."""

    __slots__ = ("expr", "op")

    def __init__(self, op: str, expr: Any) -> None:
        self.op = op
        self.expr = expr

    def __pos__(self) -> OpWrap:
        if self.op == "<-":
            return OpWrap("<+-", self.expr)
        raise ProgramError(f"`+{self.op[-1]}` is not a Bloom operator (in front of {self.expr!r})")

    def __neg__(self) -> OpWrap:
        raise ProgramError(f"`--`/`-+` is not a Bloom operator (in front of {self.expr!r})")

    def __invert__(self) -> OpWrap:
        raise ProgramError(f"`~{self.op[-1]}` is not a Bloom operator (in front of {self.expr!r})")

    def _arith(self, name: str, other: Any, reflected: bool = False) -> OpWrap:
        # `self.cnt <+ self.cnt + 1` parses as `self.cnt < ((+self.cnt) + 1)`.
        inner = self.expr
        if self.op != "<+" or not isinstance(inner, LatExpr):
            return NotImplemented  # type: ignore[return-value]
        fn = getattr(inner, name)
        return OpWrap(self.op, fn(other))

    def __add__(self, other: Any) -> OpWrap:
        return self._arith("__add__", other)

    def __sub__(self, other: Any) -> OpWrap:
        return self._arith("__sub__", other)

    def __repr__(self) -> str:
        return f"{self.op[1:]}{self.expr!r}"


# -- column references and predicates ---------------------------------------------------------


_BINARY = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "truediv": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "and": "&",
    "or": "|",
    "xor": "^",
    "lshift": "<<",
    "rshift": ">>",
}


def _operand(v: Any) -> ColExpr | None:
    """``v`` as a column expression: itself, or a constant (``None`` for anything else)."""
    if isinstance(v, ColExpr):
        return v
    if isinstance(v, _Expr) or not X.const_ok(v):
        return None
    c = X.Const(v)
    return ColExpr(lambda res: c)


def _binary(name: str, op: str, reflected: bool) -> Callable[[ColExpr, Any], Any]:
    def method(self: ColExpr, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        a, b = (o, self) if reflected else (self, o)
        return ColExpr(lambda res: X.BinOp(op, a._build(res), b._build(res)))

    method.__name__ = name
    method.__doc__ = f"``{'other ' + op + ' self' if reflected else 'self ' + op + ' other'}``"
    return method


def _compare(op: str) -> Callable[[ColExpr, Any], Any]:
    def method(self: ColExpr, other: Any) -> Any:
        o = _operand(other)
        if o is None:
            return NotImplemented
        return ColExpr(lambda res: X.Compare(op, self._build(res), o._build(res)), op, self, o)

    method.__doc__ = f"``self {op} other`` (a predicate for ``filter``)"
    return method


class ColExpr(_Expr):
    """A column expression: built from column references (``self.link.c``), constants,
    arithmetic, comparisons, ``@morph``/``@monotone`` lattice methods (``self.p.c.min_of(3)``)
    and lattice constructors (:func:`lift`). ``project``, ``filter``, ``map`` and ``notin``
    accept them beside functions, and record the same IR as the equivalent ``lambda``.

    Nothing is evaluated: ``bool()`` raises; ``==`` builds a comparison (a join predicate
    when both sides are columns); ``__hash__`` is identity; an operand that is neither a column
    expression nor a plain constant gives ``NotImplemented``; a reflected operand keeps its
    meaning (``1 + c`` is ``1 + c``; ``3 < c`` is recorded as ``c > 3``).
    """

    __slots__ = ("_build", "_op", "_sides")

    def __init__(
        self,
        build: Callable[[Callable[[ColumnRef], X.Expr]], X.Expr],
        op: str | None = None,
        *sides: ColExpr,
    ) -> None:
        self._build = build  # resolver of column references -> expression
        self._op = op  # the comparison at the top, if any (for join-predicate errors)
        self._sides = sides

    __hash__ = object.__hash__
    __eq__ = _EQ = _compare("==")  # type: ignore[assignment]
    __ne__ = _compare("!=")  # type: ignore[assignment]
    __lt__ = _compare("<")
    __le__ = _compare("<=")
    __gt__ = _compare(">")
    __ge__ = _compare(">=")

    def __neg__(self) -> ColExpr:  # type: ignore[override]
        return ColExpr(lambda res: X.Unary("-", self._build(res)))

    def __pos__(self) -> ColExpr:  # type: ignore[override]
        return ColExpr(lambda res: X.Unary("+", self._build(res)))

    def __invert__(self) -> ColExpr:  # type: ignore[override]
        return ColExpr(lambda res: X.Unary("~", self._build(res)))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        kind = X.method_kind(name)
        if kind is None:
            raise ProgramError(
                f"{self!r}.{name}: column expressions call lattice methods marked @morph or "
                f"@monotone on every lattice defining them; {name!r} is not one (write the "
                "rule with a lambda to call it as Python)"
            )

        def call(*args: Any) -> ColExpr:
            ops = [_operand(a) for a in args]
            bad = [a for a, o in zip(args, ops, strict=True) if o is None]
            if bad:
                raise ProgramError(
                    f"{self!r}.{name}(...): arguments are column expressions or plain "
                    f"constants, got {bad[0]!r}"
                )
            return ColExpr(
                lambda res: X.Method(
                    self._build(res),
                    name,
                    tuple(o._build(res) for o in ops),  # type: ignore[union-attr]
                    kind,
                )
            )

        return call

    def __repr__(self) -> str:
        try:
            return X.to_source(self._build(_by_name))
        except Exception:  # pragma: no cover - a repr never raises
            return "<column expression>"


for _name, _op in _BINARY.items():
    setattr(ColExpr, f"__{_name}__", _binary(f"__{_name}__", _op, False))
    setattr(ColExpr, f"__r{_name}__", _binary(f"__r{_name}__", _op, True))


def _by_name(ref: ColumnRef) -> X.Expr:
    return X.Attr(X.Arg(0, ref.source._name), ref.col)


def lift(cls: type, *args: Any) -> ColExpr:
    """``cls(*args)`` in a column expression: ``lift(lmin, self.link.c)`` is what
    ``lmin(lk.c)`` is in ``lambda lk: (..., lmin(lk.c))`` (same IR), for a lattice class
    ``cls``; the arguments are column expressions or plain constants."""
    if not (isinstance(cls, type) and issubclass(cls, Lattice)):
        raise ProgramError(f"lift: expected a lattice class such as lmin, got {cls!r}")
    if not cls.__name__.isidentifier():  # pragma: no cover - class names are identifiers
        raise ProgramError(f"lift: {cls!r} has no usable name")
    ops = [_operand(a) for a in args]
    bad = [a for a, o in zip(args, ops, strict=True) if o is None]
    if bad:
        raise ProgramError(
            f"lift({cls.__name__}, ...): arguments are column expressions or plain constants, "
            f"got {bad[0]!r}"
        )
    return ColExpr(
        lambda res: X.LatNew(cls, tuple(o._build(res) for o in ops), cls.__name__)  # type: ignore[union-attr]
    )


class ColumnRef(ColExpr):
    """``coll.col`` inside a rule: a column of a collection, for join predicates
    (``a.x == b.y``) and column expressions (``self.p.c + self.l.c``, see :class:`ColExpr`)."""

    __slots__ = ("col", "index", "source")

    def __init__(self, source: Any, col: str, index: int) -> None:
        super().__init__(lambda res: res(self))
        self.source = source
        self.col = col
        self.index = index

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        if isinstance(other, ColumnRef):
            return PredExpr(self, other)
        return ColExpr._EQ(self, other)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.source._name}.{self.col}"


class PredExpr(ColExpr):
    """``a.x == b.y``: a join predicate between two column references (in ``filter``, the
    comparison)."""

    __slots__ = ("left", "right")

    def __init__(self, left: ColumnRef, right: ColumnRef) -> None:
        super().__init__(
            lambda res: X.Compare("==", left._build(res), right._build(res)), "==", left, right
        )
        self.left = left
        self.right = right

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.left!r} == {self.right!r}"


def _arg_sources(node: N.Rel) -> list[str | None] | None:
    """The collection each argument of a row function over ``node`` is a row of (``None``
    for an input that is not a collection), or ``None`` when rows are not collection rows."""
    if isinstance(node, N.Scan):
        return [node.name]
    if isinstance(node, N.Filter):
        return _arg_sources(node.input)
    if isinstance(node, N.Join):
        return [i.name if isinstance(i, N.Scan) else None for i in node.inputs]
    return None


def _arg_names(sources: list[str | None], taken: set[str]) -> list[str]:
    names: list[str] = []
    for i, s in enumerate(sources):
        ok = (
            s is not None
            and s.isidentifier()
            and not keyword.iskeyword(s)
            and s not in taken
            and sources.count(s) == 1
        )
        names.append(s if ok and s is not None else f"r{i}")
    return names


def _col_function(
    sources: list[str | None], items: Sequence[Any], as_tuple: bool, what: str
) -> Callable[..., Any]:
    """The function whose recovered expression is ``items`` (a tuple when ``as_tuple``) over
    rows of ``sources``: compiled from the expression's source and checked by
    :func:`blooml.ir.exprs.decompile` like any rule function."""
    cols = []
    for c in items:
        o = _operand(c)
        if o is None:
            raise ProgramError(
                f"{what}: expected column expressions (`self.link.src`, `self.p.c + 1`) or "
                f"constants, got {c!r}"
            )
        cols.append(o)
    names: list[str] = []

    def resolve(ref: ColumnRef) -> X.Expr:
        name = ref.source._name
        hits = [i for i, s in enumerate(sources) if s == name]
        if not hits:
            shown = [s for s in sources if s is not None]
            raise ProgramError(
                f"{what}: {ref!r} is a column of {name!r}, which is not an input here "
                f"(inputs: {shown})"
            )
        if len(hits) > 1:
            raise ProgramError(
                f"{what}: {name!r} is joined more than once, so {ref!r} is ambiguous; write "
                "this rule with a lambda (one argument per joined row)"
            )
        return X.Attr(X.Arg(hits[0], names[hits[0]] if names else name), ref.col)

    # names of the called lattice classes must stay free for the arguments
    trial = [c._build(resolve) for c in cols]
    taken: set[str] = set()
    for e in trial:
        taken |= set(X.called_classes(e))
    names.extend(_arg_names(sources, taken))
    exprs = tuple(c._build(resolve) for c in cols)
    expr: X.Expr = X.TupleExpr(exprs) if as_tuple else exprs[0]
    src = f"lambda {', '.join(names)}: {X.to_source(expr)}"
    env: dict[str, Any] = {"__builtins__": {}, **X.called_classes(expr)}
    fn = eval(compile(src, "<blooml column expression>", "eval"), env)
    if X.decompile(fn) != expr:  # pragma: no cover - the source is printed from expr
        raise ProgramError(f"{what}: the column expression {src} cannot be recorded")
    return fn  # type: ignore[no-any-return]


# -- relational expressions ---------------------------------------------------------------------


def _check_fn(what: str, fn: Any) -> None:
    if not callable(fn):
        raise ProgramError(f"{what} expects a function, got {fn!r}")


def _resolve_col(node: N.Rel, col: str | int, what: str) -> int:
    cols = node.columns
    if isinstance(col, bool):
        raise ProgramError(f"{what}: column {col!r} must be a name or a position")
    if isinstance(col, int):
        if cols is not None and not 0 <= col < len(cols):
            raise ProgramError(f"{what}: column position {col} out of range for {list(cols)}")
        return col
    if not isinstance(col, str):
        raise ProgramError(f"{what}: column {col!r} must be a name or a position")
    if cols is None:
        raise ProgramError(
            f"{what}: column {col!r} is named but the rows of {node!r} have no known column "
            "names (after a map); use a position such as 0"
        )
    if col not in cols:
        raise ProgramError(f"{what}: no column {col!r} in {node!r} (columns: {list(cols)})")
    return cols.index(col)


class RelExpr(_Expr):
    """A lazy set of rows: the right-hand side of a rule (or a part of one)."""

    __slots__ = ("_node",)

    def __init__(self, node: N.Rel) -> None:
        self._node = node

    def __repr__(self) -> str:
        return repr(self._node)

    # row functions
    def _sources(self, what: str) -> list[str | None]:
        sources = _arg_sources(self._node)
        if sources is None:
            raise ProgramError(
                f"{what}: column expressions apply to a collection, a join of collections or a "
                f"filter of one, not to {self._node!r} (its rows have no known collection); "
                "use a lambda"
            )
        return sources

    def map(self, fn: RowFn | ColExpr) -> RelExpr:
        """Apply ``fn`` to each row (each tuple of rows after a join); a tuple result is a row,
        any other value a one-column row, ``None`` drops the row. ``fn`` may be a column
        expression (``self.link.c + 1``): one-column rows of its value."""
        if isinstance(fn, ColExpr):
            fn = _col_function(self._sources("map"), (fn,), False, "map")
        _check_fn("map", fn)
        return RelExpr(N.Map(self._node, fn))

    pro = map

    def project(self, *cols: Any) -> RelExpr:
        """The row of the column expressions ``cols`` for each row (each tuple of joined rows):
        ``a.join(b, a.y == b.y).project(a.x, b.z, a.c + b.c)`` is
        ``a.join(b, a.y == b.y).map(lambda r, s: (r.x, s.z, r.c + s.c))``, and records the
        same IR. A column is ``self.<collection>.<column>``; expressions combine columns and
        constants with arithmetic and comparisons, ``@morph``/``@monotone`` lattice methods
        (``self.p.c.min_of(3)``) and lattice constructors (``lift(lmin, self.l.c)``)."""
        if not cols:
            raise ProgramError("project: give at least one column expression")
        return RelExpr(
            N.Map(self._node, _col_function(self._sources("project"), cols, True, "project"))
        )

    def filter(self, fn: RowFn | ColExpr) -> RelExpr:
        """Keep the rows for which ``fn(row)`` is true; ``fn`` may be a column expression
        (``self.link.c > 3``, ``self.a.x == self.b.y`` after a join)."""
        if isinstance(fn, ColExpr):
            fn = _col_function(self._sources("filter"), (fn,), False, "filter")
        _check_fn("filter", fn)
        return RelExpr(N.Filter(self._node, fn))

    def flat_map(self, fn: RowFn) -> RelExpr:
        """``fn(row)`` returns an iterable of rows (or ``None``)."""
        _check_fn("flat_map", fn)
        return RelExpr(N.FlatMap(self._node, fn))

    # joins
    def _inputs(self) -> tuple[list[N.Rel], list[N.Pred]]:
        if isinstance(self._node, N.Join) and self._node.how == "inner":
            return list(self._node.inputs), list(self._node.preds)
        return [self._node], []

    def join(self, other: Any, *preds: Any) -> RelExpr:
        """Inner equi-join: ``a.join(b, a.x == b.y, ...)``; chain ``.join(c, ...)`` for a third.

        The result's rows are tuples with one row per joined collection; a following ``map``
        receives them as separate arguments.
        """
        inputs, old = self._inputs()
        inputs.append(_as_rel(other, "join")._node)
        new = [_resolve_pred(p, inputs, "join") for p in preds]
        return RelExpr(N.Join(tuple(inputs), tuple(old + new), "inner"))

    def natjoin(self, other: Any) -> RelExpr:
        """Natural join: equality on every column name the two sides share."""
        inputs, old = self._inputs()
        right = _as_rel(other, "natjoin")._node
        rcols = right.columns
        if rcols is None:
            raise ProgramError(f"natjoin: {right!r} has no known column names")
        new: list[N.Pred] = []
        for col in rcols:
            for i, inp in enumerate(inputs):
                cols = inp.columns
                if cols is not None and col in cols:
                    new.append(N.Pred(i, cols.index(col), len(inputs), rcols.index(col)))
                    break
        inputs.append(right)
        return RelExpr(N.Join(tuple(inputs), tuple(old + new), "inner"))

    def leftjoin(self, other: Any, *preds: Any) -> RelExpr:
        """Left outer join: like ``join``; a left row without a match pairs with ``None``."""
        inputs = [self._node, _as_rel(other, "leftjoin")._node]
        new = [_resolve_pred(p, inputs, "leftjoin") for p in preds]
        return RelExpr(N.Join(tuple(inputs), tuple(new), "left"))

    outerjoin = leftjoin

    def notin(self, other: Any, *preds: ColExpr | Callable[[Any, Any], Any]) -> RelExpr:
        """Rows with no match in ``other`` (anti-join; non-monotone in ``other``).

        Without predicates, a row matches an equal row. Predicates are column equalities
        ``a.x == b.y``; a function ``fn(a_row, b_row)`` or a column expression over both
        collections (``self.a.t < self.b.t``) is an extra match test.
        """
        right = _as_rel(other, "notin")._node
        inputs = [self._node, right]
        ps: list[N.Pred] = []
        fn = None
        for p in preds:
            if isinstance(p, PredExpr):
                ps.append(_resolve_pred(p, inputs, "notin"))
            elif (callable(p) and not isinstance(p, _Expr)) or isinstance(p, ColExpr):
                if fn is not None:
                    raise ProgramError("notin: give at most one match test")
                if isinstance(p, ColExpr):
                    left_src, right_src = _arg_sources(self._node), _arg_sources(right)
                    if left_src is None or right_src is None or len(left_src + right_src) != 2:
                        raise ProgramError(
                            f"notin: a column-expression match test {p!r} needs a collection on "
                            "each side; use a function fn(left_row, right_row)"
                        )
                    p = _col_function(left_src + right_src, (p,), False, "notin")
                fn = p
            else:
                raise ProgramError(
                    f"notin: expected `a.x == b.y` predicates or a function, got {p!r}"
                )
        return RelExpr(N.NotIn(self._node, right, tuple(ps), fn))

    # aggregation and choice
    def _keys(self, keys: Any, what: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
        if keys is None:
            return (), ()
        if isinstance(keys, (str, int)):
            keys = [keys]
        idx = tuple(_resolve_col(self._node, k, what) for k in keys)
        cols = self._node.columns
        names = tuple(cols[i] for i in idx) if cols is not None else ()
        return idx, names

    def group(self, keys: Sequence[str | int] | None, *aggs: Any) -> RelExpr:
        """SQL GROUP BY: one row per distinct key with each aggregate (``count()``,
        ``sum_("c")``, ...) appended; ``keys=None`` or ``[]`` aggregates everything."""
        idx, names = self._keys(keys, "group")
        specs = []
        for a in aggs:
            if not isinstance(a, AggSpec):
                raise ProgramError(
                    f"group: expected aggregates such as count() or sum_('c'), got {a!r}"
                )
            col = None if a.col is None else _resolve_col(self._node, a.col, f"group {a!r}")
            if col is None and a.fn != "count":
                raise ProgramError(f"group: {a.fn} needs a column")
            name = a.fn if a.col is None else f"{a.fn}_{a.col}"
            specs.append(N.Agg(a.fn, col, name))
        return RelExpr(N.Group(self._node, idx, tuple(specs), names))

    def argagg(self, how: str, keys: Sequence[str | int] | None, col: str | int) -> RelExpr:
        """Rows whose ``col`` is the ``how`` (``"min"`` or ``"max"``) of their ``keys`` group."""
        if how not in ("min", "max"):
            raise ProgramError(f"argagg: how must be 'min' or 'max', got {how!r}")
        idx, _ = self._keys(keys, f"arg{how}")
        c = _resolve_col(self._node, col, f"arg{how}")
        return RelExpr(N.ArgAgg(self._node, how, idx, c))

    def argmin(self, keys: Sequence[str | int] | None, col: str | int) -> RelExpr:
        """Rows with the minimum ``col`` in their ``keys`` group (every tied row)."""
        return self.argagg("min", keys, col)

    def argmax(self, keys: Sequence[str | int] | None, col: str | int) -> RelExpr:
        """Rows with the maximum ``col`` in their ``keys`` group (every tied row)."""
        return self.argagg("max", keys, col)

    def reduce(
        self,
        init: Any,
        fn: Callable[[Any, Any], Any],
        *,
        combine: Callable[[Any, Any], Any] | None = None,
    ) -> RelExpr:
        """Fold ``fn(memo, row)`` over the rows (sorted by their repr, for determinism),
        starting at ``init``; the result is a row, a list of rows, or ``None`` for none.

        ``combine(m1, m2)``, when given, declares the fold associative and commutative: the
        result does not depend on the order of the rows, ``combine`` joins two partial
        results (associative and commutative, with ``init`` as its identity) and
        ``combine(m, fn(init, row)) == fn(m, row)``. The incremental engine then keeps
        partial results in a balanced tree, so a changed row costs O(log n) calls instead of
        a fold over every row; without it, ``reduce`` is re-run in full when its input
        changes. Example: ``e.reduce(0, lambda m, r: m + r.v, combine=operator.add)``.
        The declaration is trusted, not checked: a ``combine`` that breaks it gives results
        that differ from ``Program(incremental=False)``.
        """
        _check_fn("reduce", fn)
        if combine is not None:
            _check_fn("reduce(combine=...)", combine)
        return RelExpr(N.Reduce(self._node, init, fn, combine))

    def choose(self, key_cols: Sequence[str | int], seed: int = 0) -> RelExpr:
        """Keep one row per ``key_cols`` value (Dedalus ``choose``), deterministically from
        ``seed``."""
        idx, _ = self._keys(key_cols, "choose")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ProgramError(f"choose: seed must be an int, got {seed!r}")
        return RelExpr(N.Choose(self._node, idx, seed))

    # tests
    def include(self, row: Any) -> LatExpr:
        """``lbool``: whether ``row`` is among the rows (monotone)."""
        t = row if isinstance(row, tuple) else (row,)
        return LatExpr(N.Include(self._node, t), _lbool())

    def empty(self) -> LatExpr:
        """``lbool``: whether there are no rows (non-monotone: stratified)."""
        return LatExpr(N.Empty(self._node), _lbool())


def _lbool() -> type:
    from blooml.lattices.ordered import lbool

    return lbool


def _resolve_pred(p: Any, inputs: list[N.Rel], what: str) -> N.Pred:
    if isinstance(p, ColExpr) and not isinstance(p, PredExpr):
        if p._op == "==":
            raise ProgramError(
                f"{what}: join predicates compare two columns (`a.x == b.y`); got {p!r}. "
                f"To compare with a constant use .filter({p!r}) after the {what}"
            )
        if p._op is not None:
            raise ProgramError(
                f"{what}: `{p!r}`: only equality predicates are supported in joins; use "
                ".filter(...) after the join or notin(...)"
            )
    if not isinstance(p, PredExpr):
        raise ProgramError(f"{what}: predicates are written `a.x == b.y`, got {p!r}")
    sides = []
    used: set[int] = set()
    for ref in (p.left, p.right):
        name = ref.source._name
        hits = [i for i, inp in enumerate(inputs) if isinstance(inp, N.Scan) and inp.name == name]
        if not hits:
            raise ProgramError(
                f"{what}: predicate {p!r} refers to {name!r}, which is not one of the joined "
                "collections"
            )
        free = [i for i in hits if i not in used]
        i = free[0] if free else hits[-1]
        used.add(i)
        sides.append((i, ref.index))
    (a, ac), (b, bc) = sides
    if a == b:
        raise ProgramError(f"{what}: predicate {p!r} compares two columns of the same input")
    if a > b:
        (a, ac), (b, bc) = (b, bc), (a, ac)
    return N.Pred(a, ac, b, bc)


# -- lattice expressions ------------------------------------------------------------------------


def _classify(cls: type | None, name: str) -> tuple[str, type | None]:
    """How a lattice method is treated; with an unknown class, the weakest kind among the
    registered lattices defining it."""
    if cls is not None:
        try:
            return kind_of(cls, name), cls
        except AttributeError:
            raise ProgramError(
                f"lattice {getattr(cls, 'wrapper_name', '') or cls.__qualname__} has no method "
                f"{name!r}"
            ) from None
    kinds = []
    for lcls in registered_lattices().values():
        if callable(getattr(lcls, name, None)):
            kinds.append(kind_of(lcls, name))
    if not kinds:
        raise ProgramError(f"no lattice class has a method {name!r}")
    for k in ("nonmonotone", "monotone", "morph"):
        if k in kinds:
            return k, None
    return "nonmonotone", None  # pragma: no cover


def _result_class(cls: type | None, name: str, args: tuple[Any, ...]) -> type | None:
    """The lattice class a method returns, from its annotation when it can be resolved."""
    if cls is None:
        return None
    if name == "at" and len(args) >= 2 and isinstance(args[1], type):
        return args[1]
    fn = getattr(cls, name, None)
    ann = getattr(fn, "__annotations__", {}).get("return")
    if isinstance(ann, str):
        ann = ann.split("|")[0].strip().split("[")[0]
        if ann in ("L", "Self") or ann == cls.__name__:
            return cls
        try:
            mod = __import__(cls.__module__, fromlist=["_"])
            ann = getattr(mod, ann, None)
        except ImportError:  # pragma: no cover
            return None
    if isinstance(ann, type) and issubclass(ann, Lattice) and ann is not Lattice:
        return ann
    return None  # not known statically: classified by name among the registered lattices


class _MethodRef:
    """``lat.name`` awaiting its call: ``self.votes.size`` then ``()``."""

    __slots__ = ("expr", "name")

    def __init__(self, expr: LatExpr, name: str) -> None:
        self.expr = expr
        self.name = name

    def __call__(self, *args: Any) -> Any:
        return self.expr._call(self.name, args)

    def __bool__(self) -> bool:
        _no_bool(f"lattice method {self!r} (did you forget the parentheses?)")

    def __repr__(self) -> str:
        return f"{self.expr!r}.{self.name}"


class LatExpr(_Expr):
    """A lazy lattice value: a lattice variable, a constant, or a method call on one."""

    __slots__ = ("_cls", "_node")

    def __init__(self, node: N.Lat, cls: type | None) -> None:
        self._node = node
        self._cls = cls

    def __repr__(self) -> str:
        return repr(self._node)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return _MethodRef(self, name)

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        if name == "to_collection" and (self._cls is None or not hasattr(self._cls, name)):
            rel = RelExpr(N.LatRows(self._node))
            if args:
                if len(args) != 1 or not callable(args[0]):
                    raise ProgramError("to_collection takes at most one function")
                return rel.map(args[0])
            return rel
        kind, cls = _classify(self._cls, name)
        conv = tuple(_lift_arg(a) for a in args)
        node = N.LatMethod(self._node, name, conv, kind, cls)  # type: ignore[arg-type]
        if name in ("when_true", "to_collection"):
            return RelExpr(N.LatRows(node))
        return LatExpr(node, _result_class(cls, name, args))

    def __add__(self, other: Any) -> LatExpr:
        return self._call("__add__", (other,))

    def __radd__(self, other: Any) -> LatExpr:
        return self._call("__radd__", (other,))

    def __sub__(self, other: Any) -> LatExpr:
        return self._call("__sub__", (other,))

    def __mul__(self, other: Any) -> LatExpr:
        return self._call("__mul__", (other,))


def _lift_arg(a: Any) -> Any:
    if isinstance(a, (LatExpr, RelExpr)):
        return a._node
    if isinstance(a, _Expr):
        raise ProgramError(f"{a!r} cannot be a lattice method argument")
    return a


# -- literal rows -------------------------------------------------------------------------------


class _Rows(RelExpr):
    """Literal rows (see :func:`rows`)."""

    __slots__ = ()


def lift_rows(items: Iterable[Any], what: str = "rows") -> RelExpr:
    """Convert literal rows into an IR ``Literal``; lattice handles in cells read at run time."""
    if isinstance(items, (str, bytes)):
        raise ProgramError(f"{what}: expected an iterable of rows, got the string {items!r}")
    out = []
    for item in items:
        row = item if isinstance(item, tuple) else (item,)
        cells = []
        for c in row:
            if isinstance(c, (LatExpr, RelExpr)):
                cells.append(c._node)
            elif isinstance(c, _Expr):
                raise ProgramError(f"{what}: {c!r} cannot be a cell of a literal row")
            else:
                cells.append(c)
        out.append(tuple(cells))
    return _Rows(N.Literal(tuple(out)))


def rows(iterable: Iterable[Any]) -> Any:
    """Literal rows as a right-hand side for any operator: ``self.t <+ rows([("a", 1)])``.

    A plain list works with ``<=`` (``self.t <= [("a", 1)]``), but ``+[...]``, ``-[...]`` and
    ``~[...]`` are Python errors on a list, so the other operators need this wrapper.
    """
    try:
        items = list(iterable)
    except TypeError:
        raise ProgramError(f"rows(...) expects an iterable of tuples, got {iterable!r}") from None
    return lift_rows(items)


def _as_rel(x: Any, what: str) -> RelExpr:
    if isinstance(x, RelExpr):
        return x
    if isinstance(x, (list, tuple, set, frozenset)):
        return lift_rows(x, what)
    raise ProgramError(f"{what}: expected a collection or rows, got {x!r}")
