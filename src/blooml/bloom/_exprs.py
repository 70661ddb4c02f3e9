"""Right-hand sides: lazy expression wrappers over IR nodes, column references, predicates.

Every method here builds a new IR node and returns a new wrapper; nothing is evaluated. The
operator traps of a Python DSL are handled here: ``bool()`` raises, ``==`` on a column
reference builds a predicate (``__hash__`` is restored to identity), reversed comparisons raise
instead of silently recording the wrong rule, and ``+x``/``-x``/``~x`` mark the deferred,
delete and async operators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from blooml.bloom._aggs import AggSpec
from blooml.errors import ProgramError
from blooml.ir import nodes as N
from blooml.lattices._base import Lattice, kind_of, registered_lattices

__all__ = [
    "ColumnRef",
    "LatExpr",
    "OpWrap",
    "PredExpr",
    "RelExpr",
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


class ColumnRef(_Expr):
    """``coll.col`` inside a rule: only for join/notin predicates (``a.x == b.y``)."""

    __slots__ = ("col", "index", "source")

    def __init__(self, source: Any, col: str, index: int) -> None:
        self.source = source
        self.col = col
        self.index = index

    def __eq__(self, other: object) -> PredExpr:  # type: ignore[override]
        if not isinstance(other, ColumnRef):
            raise ProgramError(
                f"join predicates compare two columns (`a.x == b.y`); got {self!r} == {other!r}. "
                "To compare with a constant use .filter(lambda t: t.x == value)"
            )
        return PredExpr(self, other)

    def __ne__(self, other: object) -> NoReturn:  # type: ignore[override]
        raise ProgramError(
            f"`{self!r} != ...`: only equality predicates are supported in joins; use "
            ".filter(...) after the join or notin(...)"
        )

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.source._name}.{self.col}"


class PredExpr(_Expr):
    """An equality predicate between two column references."""

    __slots__ = ("left", "right")

    def __init__(self, left: ColumnRef, right: ColumnRef) -> None:
        self.left = left
        self.right = right

    def __repr__(self) -> str:
        return f"{self.left!r} == {self.right!r}"


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
    def map(self, fn: Callable[..., Any]) -> RelExpr:
        """Apply ``fn`` to each row (each tuple of rows after a join); a tuple result is a row,
        any other value a one-column row, ``None`` drops the row."""
        _check_fn("map", fn)
        return RelExpr(N.Map(self._node, fn))

    pro = map

    def filter(self, fn: Callable[..., Any]) -> RelExpr:
        """Keep the rows for which ``fn(row)`` is true."""
        _check_fn("filter", fn)
        return RelExpr(N.Filter(self._node, fn))

    def flat_map(self, fn: Callable[..., Any]) -> RelExpr:
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

    def notin(self, other: Any, *preds: Any) -> RelExpr:
        """Rows with no match in ``other`` (anti-join; non-monotone in ``other``).

        Without predicates, a row matches an equal row. Predicates are column equalities
        ``a.x == b.y``; a function ``fn(a_row, b_row)`` is an extra match test.
        """
        right = _as_rel(other, "notin")._node
        inputs = [self._node, right]
        ps: list[N.Pred] = []
        fn = None
        for p in preds:
            if isinstance(p, PredExpr):
                ps.append(_resolve_pred(p, inputs, "notin"))
            elif callable(p) and not isinstance(p, _Expr):
                if fn is not None:
                    raise ProgramError("notin: give at most one match function")
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

    def reduce(self, init: Any, fn: Callable[[Any, Any], Any]) -> RelExpr:
        """Fold ``fn(memo, row)`` over the rows (sorted by their repr, for determinism),
        starting at ``init``; the result is a row, a list of rows, or ``None`` for none."""
        _check_fn("reduce", fn)
        return RelExpr(N.Reduce(self._node, init, fn))

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
