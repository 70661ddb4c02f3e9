"""The frozen node classes of the rule IR.

A rule's right-hand side is a tree of these nodes. They are plain data (``attrs`` frozen, slotted
classes): the DSL in :mod:`blooml.bloom` builds them and never evaluates anything; every engine
walks the same tree with one function per node type. Column references are resolved to
positions when the tree is built, so an engine never needs the DSL.

Relational nodes (their value is a set of rows) derive from :class:`Rel`; lattice nodes (their
value is one lattice value) derive from :class:`Lat`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import Literal as _Lit

import attrs

from blooml.ir.exprs import Expr, decompile, to_source

__all__ = [
    "AGG_NAMES",
    "Agg",
    "ArgAgg",
    "Choose",
    "Empty",
    "Filter",
    "FlatMap",
    "Group",
    "Include",
    "Join",
    "Lat",
    "LatConst",
    "LatMethod",
    "LatRows",
    "LatVar",
    "Literal",
    "Map",
    "Node",
    "NotIn",
    "Pred",
    "Reduce",
    "Rel",
    "Scan",
    "TickCount",
    "children",
    "functions",
    "python_functions",
]

Kind = _Lit["morph", "monotone", "nonmonotone"]
AGG_NAMES = ("count", "sum", "min", "max", "avg", "accum", "bool_and", "bool_or")


class Node:
    """Base of every IR node."""

    __slots__ = ()


class Rel(Node):
    """A relational node: evaluates to a set of rows."""

    __slots__ = ()

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Column names of the rows, when known statically (``None`` after a ``map``)."""
        return None


class Lat(Node):
    """A lattice node: evaluates to one lattice value."""

    __slots__ = ()


def _fn_name(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", repr(fn))
    if code is None:
        return name
    return f"{name}@{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


def _fn_text(fn: Any) -> str:
    """``lambda lk: (lk.src, lmin(lk.c))`` for a function recovered as an expression, else its
    name and place (``<lambda>@paths.py:12``)."""
    expr = decompile(fn)
    if expr is None:
        return _fn_name(fn)
    code = fn.__code__
    return f"lambda {', '.join(code.co_varnames[: code.co_argcount])}: {to_source(expr)}"


def _fn_key(fn: Any) -> Any:
    """How a node's function compares: by its recovered expression when it has one (two
    spellings of one rule give equal nodes), else by identity."""
    expr = decompile(fn) if fn is not None else None
    return fn if expr is None else expr


@attrs.frozen(repr=False)
class Scan(Rel):
    """Every row of the collection ``name``."""

    name: str
    cols: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.cols

    def __repr__(self) -> str:
        return self.name


@attrs.frozen(repr=False)
class Literal(Rel):
    """Literal rows written in the program; a cell may be a :class:`Lat` node (read at run time)."""

    rows: tuple[tuple[Any, ...], ...]

    def __repr__(self) -> str:
        return f"rows{list(self.rows)!r}"


@attrs.frozen(repr=False)
class Map(Rel):
    """``fn(row)`` for each input row (``fn(*rows)`` after a join); a tuple is a row, a non-tuple
    a one-column row, ``None`` drops the row."""

    input: Rel
    fn: Callable[..., Any] = attrs.field(eq=_fn_key)

    @property
    def expr(self) -> Expr | None:
        """What ``fn`` returns as an expression over its arguments, when ``fn`` is a simple
        function such as ``lambda l, p: (l.src, p.c + l.c)`` (see :mod:`blooml.ir.exprs`);
        ``None`` when it is not."""
        return decompile(self.fn)

    def __repr__(self) -> str:
        return f"map({self.input!r}, {_fn_text(self.fn)})"


@attrs.frozen(repr=False)
class FlatMap(Rel):
    """``fn(row)`` returns an iterable of rows (or ``None``)."""

    input: Rel
    fn: Callable[..., Any]

    def __repr__(self) -> str:
        return f"flat_map({self.input!r}, {_fn_name(self.fn)})"


@attrs.frozen(repr=False)
class Filter(Rel):
    """The input rows for which ``fn(row)`` is true."""

    input: Rel
    fn: Callable[..., Any] = attrs.field(eq=_fn_key)

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.input.columns

    @property
    def expr(self) -> Expr | None:
        """The predicate as an expression when ``fn`` is simple (see ``Map.expr``)."""
        return decompile(self.fn)

    def __repr__(self) -> str:
        return f"filter({self.input!r}, {_fn_text(self.fn)})"


@attrs.frozen
class Pred:
    """Equality of column ``lcol`` of join input ``left`` and column ``rcol`` of input ``right``
    (``left < right``)."""

    left: int
    lcol: int
    right: int
    rcol: int


@attrs.frozen(repr=False)
class Join(Rel):
    """The rows of ``inputs`` matching every predicate; each result is a tuple of input rows.

    ``how="left"`` (two inputs) keeps left rows without a match, paired with ``None``.
    """

    inputs: tuple[Rel, ...]
    preds: tuple[Pred, ...]
    how: str = "inner"

    def __repr__(self) -> str:
        names = [repr(i) for i in self.inputs]
        conds = []
        for p in self.preds:
            lc = _col(self.inputs[p.left], p.lcol)
            rc = _col(self.inputs[p.right], p.rcol)
            conds.append(f"{names[p.left]}.{lc} == {names[p.right]}.{rc}")
        kw = "leftjoin" if self.how == "left" else "join"
        on = f" on {' and '.join(conds)}" if conds else ""
        return f"{kw}({', '.join(names)}{on})"


def _col(rel: Rel, i: int) -> str:
    cols = rel.columns
    return cols[i] if cols is not None and i < len(cols) else f"[{i}]"


@attrs.frozen(repr=False)
class NotIn(Rel):
    """Rows of ``left`` with no matching row in ``right`` (anti-join).

    Without predicates or ``fn`` a row matches an equal row; with predicates (``left`` is input
    0, ``right`` input 1) the columns must be equal; ``fn(l, r)`` is an extra match test.
    """

    left: Rel
    right: Rel
    preds: tuple[Pred, ...] = ()
    fn: Callable[..., Any] | None = attrs.field(default=None, eq=_fn_key)

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.left.columns

    @property
    def expr(self) -> Expr | None:
        """The match test ``fn(l, r)`` as an expression when it is simple (see ``Map.expr``);
        ``None`` without a function or when it is not simple."""
        return None if self.fn is None else decompile(self.fn)

    def __repr__(self) -> str:
        conds = []
        for p in self.preds:
            side = (self.left, self.right)
            conds.append(
                f"{side[p.left]!r}.{_col(side[p.left], p.lcol)} == "
                f"{side[p.right]!r}.{_col(side[p.right], p.rcol)}"
            )
        extra = f", {' and '.join(conds)}" if conds else ""
        extra += f", {_fn_text(self.fn)}" if self.fn is not None else ""
        return f"notin({self.left!r}, {self.right!r}{extra})"


@attrs.frozen(repr=False)
class Agg:
    """One aggregate of a ``group``: ``fn`` in :data:`AGG_NAMES` over column ``col``."""

    fn: str
    col: int | None
    name: str

    def __repr__(self) -> str:
        return f"{self.fn}({'' if self.col is None else self.col})"


@attrs.frozen(repr=False)
class Group(Rel):
    """One row per distinct ``keys`` value: the key columns, then each aggregate."""

    input: Rel
    keys: tuple[int, ...]
    aggs: tuple[Agg, ...]
    key_names: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...] | None:
        if len(self.key_names) != len(self.keys):
            return None
        return (*self.key_names, *(a.name for a in self.aggs))

    def __repr__(self) -> str:
        keys = ", ".join(_col(self.input, k) for k in self.keys)
        aggs = ", ".join(
            f"{a.fn}({'' if a.col is None else _col(self.input, a.col)})" for a in self.aggs
        )
        return f"group({self.input!r}, [{keys}], {aggs})"


@attrs.frozen(repr=False)
class ArgAgg(Rel):
    """Rows of ``input`` whose column ``col`` is the minimum (``how="min"``) or maximum in their
    ``keys`` group (ties: every such row)."""

    input: Rel
    how: str
    keys: tuple[int, ...]
    col: int

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.input.columns

    def __repr__(self) -> str:
        keys = ", ".join(_col(self.input, k) for k in self.keys)
        return f"arg{self.how}({self.input!r}, [{keys}], {_col(self.input, self.col)})"


@attrs.frozen(repr=False)
class Reduce(Rel):
    """``fn(memo, row)`` folded over the rows (sorted, for determinism) from ``init``; the
    result is a row, a list of rows or ``None``. ``combine`` (optional) declares the fold
    order-free: ``combine(m1, m2)`` joins two partial results (associative, commutative,
    ``init`` its identity), so an engine may fold parts of the rows separately."""

    input: Rel
    init: Any
    fn: Callable[[Any, Any], Any]
    combine: Callable[[Any, Any], Any] | None = attrs.field(default=None, eq=_fn_key)

    def __repr__(self) -> str:
        extra = "" if self.combine is None else f", combine={_fn_name(self.combine)}"
        return f"reduce({self.input!r}, {self.init!r}, {_fn_name(self.fn)}{extra})"


@attrs.frozen(repr=False)
class Choose(Rel):
    """One row per ``keys`` value, chosen deterministically from ``seed`` (Dedalus ``choose``)."""

    input: Rel
    keys: tuple[int, ...]
    seed: int = 0

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.input.columns

    def __repr__(self) -> str:
        keys = ", ".join(_col(self.input, k) for k in self.keys)
        return f"choose({self.input!r}, [{keys}], seed={self.seed})"


@attrs.frozen(repr=False)
class LatRows(Rel):
    """The rows a lattice expression yields (``to_collection()``, ``when_true(fn)``)."""

    lat: Lat

    def __repr__(self) -> str:
        return f"rows({self.lat!r})"


@attrs.frozen(repr=False)
class LatVar(Lat):
    """The current value of the lattice variable ``name``."""

    name: str
    cls: type

    def __repr__(self) -> str:
        return self.name


@attrs.frozen(repr=False)
class LatConst(Lat):
    """A lattice value written in the program."""

    value: Any

    def __repr__(self) -> str:
        return repr(self.value)


@attrs.frozen(repr=False)
class TickCount(Lat):
    """The program's current tick number (``self.tick_count``; Dedalus entanglement)."""

    def __repr__(self) -> str:
        return "tick_count"


@attrs.frozen(repr=False)
class LatMethod(Lat):
    """``target.name(*args)``; ``kind`` says how the rule layer treats it (``morph``: evaluated
    on deltas; ``monotone``: re-evaluated on growth; ``nonmonotone``: stratified).
    ``cls`` is the target's lattice class when known statically."""

    target: Node
    name: str
    args: tuple[Any, ...]
    kind: Kind
    cls: type | None = None

    def __repr__(self) -> str:
        args = ", ".join(
            _fn_name(a) if callable(a) and not isinstance(a, Node) else repr(a) for a in self.args
        )
        return f"{self.target!r}.{self.name}({args})"


@attrs.frozen(repr=False)
class Include(Lat):
    """``lbool``: whether ``row`` is in ``input`` (monotone in ``input``)."""

    input: Rel
    row: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"{self.input!r}.include({self.row!r})"


@attrs.frozen(repr=False)
class Empty(Lat):
    """``lbool``: whether ``input`` has no rows (non-monotone)."""

    input: Rel

    def __repr__(self) -> str:
        return f"{self.input!r}.empty()"


def children(node: Any) -> tuple[Any, ...]:
    """The IR nodes directly below ``node`` (lattice cells of literal rows included)."""
    if isinstance(node, (Map, FlatMap, Filter, Group, ArgAgg, Reduce, Choose)):
        return (node.input,)
    if isinstance(node, Join):
        return node.inputs
    if isinstance(node, NotIn):
        return (node.left, node.right)
    if isinstance(node, LatRows):
        return (node.lat,)
    if isinstance(node, LatMethod):
        return (node.target, *(a for a in node.args if isinstance(a, Node)))
    if isinstance(node, (Include, Empty)):
        return (node.input,)
    if isinstance(node, Literal):
        return tuple(c for row in node.rows for c in row if isinstance(c, Node))
    return ()


def python_functions(node: Any) -> list[Callable[..., Any]]:
    """The user functions below (and including) ``node`` that run as Python: every function
    of :func:`functions` except the ``Map``, ``Filter`` and ``NotIn`` functions recovered as
    expressions (their ``expr`` is not ``None``)."""
    out: list[Callable[..., Any]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        fn = getattr(n, "fn", None)
        if callable(fn) and not (isinstance(n, (Map, Filter, NotIn)) and n.expr is not None):
            out.append(fn)
        if isinstance(n, LatMethod):
            out.extend(a for a in n.args if callable(a) and not isinstance(a, (Node, type)))
        stack.extend(children(n))
    return out


def functions(node: Any) -> list[Callable[..., Any]]:
    """Every user function in the tree below (and including) ``node``."""
    out: list[Callable[..., Any]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        fn = getattr(n, "fn", None)
        if callable(fn):
            out.append(fn)
        combine = getattr(n, "combine", None)
        if callable(combine):
            out.append(combine)
        if isinstance(n, LatMethod):
            out.extend(a for a in n.args if callable(a) and not isinstance(a, (Node, type)))
        stack.extend(children(n))
    return out
