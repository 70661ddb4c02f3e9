"""Expressions recovered from simple rule functions (``lambda l, p: (l.src, p.c + l.c)``).

A ``map`` function is opaque Python; most are a tuple of column reads, constants and
arithmetic. :func:`decompile` recovers that tuple as an expression tree, so that the IR shows
what a rule derives (``Map.expr``) and an engine may evaluate it without calling the function
(the local engine generates one loop per join; it also knows which output columns are copies
of key columns, which cannot hold lattice values).

Soundness does not rest on the decompiler reading the bytecode right: the tree is turned back
into a lambda and compiled, and it is accepted only when the compiled code equals the
function's own (instructions, constants with their types, names, arguments), so the two are the
same program to this interpreter. Anything else gives ``None``: a function with defaults,
closure variables or globals other than called lattice classes, other calls, conditionals, or
an interpreter whose bytecode the decompiler does not know. The function is then called as
written; nothing is lost but speed.

Calls are recovered as explicit nodes, never as an opaque call: :class:`LatNew` for a lattice
class called through a module global (``lmin(l.c)``; the global must be bound to a
:class:`~blooml.lattices.Lattice` subclass, and is checked again whenever the expression is
asked for), :class:`Method` for a method every registered lattice class defining it marks
``@morph`` or ``@monotone`` (``p.c.min_of(l.c)``). Any other call gives ``None``.

The reader knows the instructions in :data:`INSTRUCTIONS` (CPython 3.11, 3.12 and 3.13, each
one exercised by the per-version catalogue test); an instruction it does not know gives
``None``, so a new CPython version can make a function run as Python, never compute wrongly.
"""

from __future__ import annotations
import __future__

import contextlib
import dis
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import attrs

from blooml.lattices._base import Lattice, kind_of, registered_lattices

__all__ = [
    "INSTRUCTIONS",
    "Arg",
    "Attr",
    "BinOp",
    "Compare",
    "Const",
    "Expr",
    "Item",
    "LatNew",
    "Method",
    "TupleExpr",
    "Unary",
    "called_classes",
    "children",
    "const_ok",
    "decompile",
    "method_kind",
    "to_source",
]


class Expr:
    """Base of expression nodes."""

    __slots__ = ()


@attrs.frozen
class Arg(Expr):
    """The function's positional argument ``index`` (named ``name``): a row (the row of join
    input ``index`` after a join). The name is only for printing: ``lambda a: a.x`` and
    ``lambda b: b.x`` are equal expressions."""

    index: int
    name: str = attrs.field(eq=False)


@attrs.frozen
class Attr(Expr):
    """``obj.name`` (a column read when ``obj`` is an :class:`Arg`)."""

    obj: Expr
    name: str


@attrs.frozen
class Item(Expr):
    """``obj[key]``."""

    obj: Expr
    key: Expr


def _const_key(v: Any) -> Any:
    """Constants compare with their types (``1``, ``1.0`` and ``True`` are different)."""
    if type(v) is tuple:
        return (tuple, tuple(_const_key(x) for x in v))
    return (type(v), v)


@attrs.frozen
class Const(Expr):
    """A constant of the function's code (compared with its type: ``Const(1) != Const(1.0)``)."""

    value: Any = attrs.field(eq=_const_key)


@attrs.frozen
class BinOp(Expr):
    """``left op right`` for a binary arithmetic or bitwise operator (``"+"``, ``"*"``, ...)."""

    op: str
    left: Expr
    right: Expr


@attrs.frozen
class Compare(Expr):
    """``left op right`` for a comparison (``"<"``, ``"=="``, ...)."""

    op: str
    left: Expr
    right: Expr


@attrs.frozen
class Unary(Expr):
    """``op operand`` for ``-``, ``+``, ``~`` and ``not``."""

    op: str
    operand: Expr


@attrs.frozen
class LatNew(Expr):
    """``cls(*args)``: a value of the lattice class ``cls`` built from the arguments
    (``lmin(l.c)``, ``lmax((p.version, p.value))``). ``name`` is the module-global name the
    function called the class by (for printing; not compared)."""

    cls: type
    args: tuple[Expr, ...]
    name: str = attrs.field(default="", eq=False)


@attrs.frozen
class Method(Expr):
    """``obj.name(*args)``: a call of a lattice method marked ``@morph`` or ``@monotone``
    (``p.c.min_of(l.c)``, ``r.votes.size()``). The class of ``obj`` is not known statically:
    the method is accepted when every registered lattice class that defines ``name`` marks it,
    and ``kind`` is the weakest of those marks (``"morph"`` or ``"monotone"``)."""

    obj: Expr
    name: str
    args: tuple[Expr, ...]
    kind: str


@attrs.frozen
class TupleExpr(Expr):
    """A tuple display ``(a, b, ...)``: the row a ``map`` function returns."""

    items: tuple[Expr, ...]


_BINARY = frozenset(["+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^", "<<", ">>"])
_COMPARE = frozenset(["<", "<=", "==", "!=", ">", ">="])
_UNARY = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~", "UNARY_NOT": "not "}
_SKIP = frozenset(["RESUME", "EXTENDED_ARG", "TO_BOOL", "PRECALL"])
_METHOD_ATTR = sys.version_info >= (3, 12)  # LOAD_ATTR with the low bit set loads a method

#: Every instruction the reader understands. Each one is met by a test on at least one of
#: CPython 3.11, 3.12 and 3.13 (``tests/ir/test_ir_inline_catalogue.py`` pins which on which);
#: any other instruction makes :func:`decompile` give ``None``. An instruction of a later
#: version is added here together with a catalogue entry that runs it.
INSTRUCTIONS = frozenset(
    [
        *_SKIP,
        *_UNARY,
        "LOAD_FAST",
        "LOAD_FAST_LOAD_FAST",
        "LOAD_CONST",
        "RETURN_CONST",
        "RETURN_VALUE",
        "LOAD_ATTR",
        "LOAD_METHOD",
        "LOAD_GLOBAL",
        "CALL",
        "BINARY_OP",
        "BINARY_SUBSCR",
        "COMPARE_OP",
        "BUILD_TUPLE",
    ]
)
_FUTURE = 0
for _name in __future__.all_feature_names:
    _FUTURE |= getattr(__future__, _name).compiler_flag
_CO_NESTED = 0x10  # set on functions defined inside functions; no meaning without free vars
_CONST_TYPES = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis))


def const_ok(v: Any) -> bool:
    """Whether ``v`` can be a constant of an expression (and of compiled code): an int, float,
    complex, str, bytes, bool, ``None``, ``...``, or a tuple of these."""
    if type(v) is tuple:
        return all(const_ok(x) for x in v)
    return type(v) in _CONST_TYPES


class _Callee:
    """A callable on the reader's stack: a lattice class (``LOAD_GLOBAL``) or a method."""

    __slots__ = ("cls", "name", "obj")

    def __init__(self, name: str, cls: type | None = None, obj: Expr | None = None) -> None:
        self.name = name
        self.cls = cls
        self.obj = obj


def method_kind(name: str) -> str | None:
    """``"morph"``/``"monotone"`` when every registered lattice class defining a method
    ``name`` marks it so (the weakest mark), else ``None`` (unknown or non-monotone)."""
    if name.startswith("_"):
        return None
    kinds = set()
    for cls in registered_lattices().values():
        if callable(getattr(cls, name, None)):
            kinds.add(kind_of(cls, name))
    if not kinds or "nonmonotone" in kinds:
        return None
    return "monotone" if "monotone" in kinds else "morph"


def _lattice_global(fn: Any, name: str) -> type | None:
    v = fn.__globals__.get(name)
    if isinstance(v, type) and issubclass(v, Lattice):
        return v
    return None


def _symbolic(fn: Any, code: types.CodeType) -> Expr | None:
    """Run ``code`` on symbols; the returned expression, or ``None`` on anything unknown."""
    names = code.co_varnames[: code.co_argcount]
    stack: list[Any] = []

    def exprs(n: int) -> tuple[Expr, ...] | None:
        if len(stack) < n:
            return None
        items = tuple(stack[len(stack) - n :]) if n else ()
        del stack[len(stack) - n :]
        return items if all(isinstance(i, Expr) for i in items) else None

    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in _SKIP:
            continue
        if op == "LOAD_FAST" or op == "LOAD_FAST_LOAD_FAST":
            vals = ins.argval if op == "LOAD_FAST_LOAD_FAST" else (ins.argval,)
            for name in vals:
                if name not in names:
                    return None
                stack.append(Arg(names.index(name), name))
        elif op == "LOAD_CONST":
            if not const_ok(ins.argval):
                return None
            stack.append(Const(ins.argval))
        elif op == "RETURN_CONST" and not stack and const_ok(ins.argval):
            return Const(ins.argval)
        elif op == "LOAD_GLOBAL" and isinstance(ins.arg, int) and ins.arg & 1:
            cls = _lattice_global(fn, str(ins.argval))  # called: push NULL + the class
            if cls is None:
                return None
            stack.append(_Callee(str(ins.argval), cls=cls))
        elif (
            op == "LOAD_METHOD" or (op == "LOAD_ATTR" and _METHOD_ATTR and (ins.arg or 0) & 1)
        ) and (stack and isinstance(stack[-1], Expr)):
            stack.append(_Callee(str(ins.argval), obj=stack.pop()))
        elif op == "LOAD_ATTR" and stack and isinstance(stack[-1], Expr):
            stack.append(Attr(stack.pop(), str(ins.argval)))
        elif op == "CALL" and isinstance(ins.arg, int) and len(stack) > ins.arg:
            args = exprs(ins.arg)
            callee = stack.pop()
            if args is None or not isinstance(callee, _Callee):
                return None
            if callee.cls is not None:
                stack.append(LatNew(callee.cls, args, callee.name))
            else:
                kind = method_kind(callee.name)
                if kind is None or callee.obj is None:
                    return None
                stack.append(Method(callee.obj, callee.name, args, kind))
        elif op in ("BINARY_SUBSCR", "BINARY_OP", "COMPARE_OP"):
            pair = exprs(2)
            if pair is None:
                return None
            left, right = pair
            if op == "BINARY_SUBSCR":
                stack.append(Item(left, right))
            elif op == "BINARY_OP" and ins.argrepr in _BINARY:
                stack.append(BinOp(ins.argrepr, left, right))
            elif op == "COMPARE_OP" and ins.argval in _COMPARE:
                stack.append(Compare(str(ins.argval), left, right))
            else:
                return None
        elif op in _UNARY and stack and isinstance(stack[-1], Expr):
            stack.append(Unary(_UNARY[op], stack.pop()))
        elif op == "BUILD_TUPLE" and isinstance(ins.arg, int):
            items = exprs(ins.arg)
            if items is None:
                return None
            stack.append(TupleExpr(items))
        elif op == "RETURN_VALUE" and len(stack) == 1 and isinstance(stack[0], Expr):
            return stack[0]  # type: ignore[no-any-return]
        else:
            return None
    return None


def children(expr: Expr) -> tuple[Expr, ...]:
    """The expressions directly below ``expr``."""
    t = type(expr)
    e: Any = expr
    if t is Attr:
        return (e.obj,)
    if t is Item:
        return (e.obj, e.key)
    if t is BinOp or t is Compare:
        return (e.left, e.right)
    if t is Unary:
        return (e.operand,)
    if t is TupleExpr:
        return e.items  # type: ignore[no-any-return]
    if t is LatNew:
        return e.args  # type: ignore[no-any-return]
    if t is Method:
        return (e.obj, *e.args)
    return ()


def called_classes(expr: Expr, out: dict[str, type] | None = None) -> dict[str, type]:
    """The lattice classes ``expr`` calls (:class:`LatNew`), by the global name it calls them
    by."""
    if out is None:
        out = {}
    if type(expr) is LatNew:
        out[expr.name or expr.cls.__name__] = expr.cls  # type: ignore[attr-defined]
    for c in children(expr):
        called_classes(c, out)
    return out


def to_source(expr: Expr) -> str:
    """Python source of ``expr`` (fully parenthesised; arguments by their names)."""
    t = type(expr)
    if t is Arg:
        return expr.name  # type: ignore[attr-defined,no-any-return]
    if t is Const:
        return repr(expr.value)  # type: ignore[attr-defined]
    if t is Attr:
        return f"{to_source(expr.obj)}.{expr.name}"  # type: ignore[attr-defined]
    if t is Item:
        return f"{to_source(expr.obj)}[{to_source(expr.key)}]"  # type: ignore[attr-defined]
    if t is BinOp or t is Compare:
        e: Any = expr
        return f"({to_source(e.left)} {e.op} {to_source(e.right)})"
    if t is Unary:
        return f"({expr.op}{to_source(expr.operand)})"  # type: ignore[attr-defined]
    if t is TupleExpr:
        items = [to_source(i) for i in expr.items]  # type: ignore[attr-defined]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if t is LatNew:
        e = expr
        args = ", ".join(to_source(a) for a in e.args)
        return f"{e.name or e.cls.__name__}({args})"
    if t is Method:
        e = expr
        args = ", ".join(to_source(a) for a in e.args)
        return f"{to_source(e.obj)}.{e.name}({args})"
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover


def _typed(consts: tuple[Any, ...]) -> tuple[Any, ...]:
    """Constants with their types spelled out (``1 == 1.0 == True`` must not match)."""
    return tuple((type(c), _typed(c) if type(c) is tuple else c) for c in consts)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    return (
        a.co_code == b.co_code
        and _typed(a.co_consts) == _typed(b.co_consts)
        and a.co_names == b.co_names
        and a.co_varnames == b.co_varnames
        and a.co_argcount == b.co_argcount
        and a.co_posonlyargcount == b.co_posonlyargcount
        and a.co_kwonlyargcount == b.co_kwonlyargcount
        and a.co_flags | _CO_NESTED == b.co_flags | _CO_NESTED
        and not b.co_freevars
        and not b.co_cellvars
    )


_CACHE: weakref.WeakKeyDictionary[Any, tuple[Expr | None, dict[str, type]]] = (
    weakref.WeakKeyDictionary()
)


def decompile(fn: Callable[..., Any]) -> Expr | None:
    """The expression ``fn`` returns, when ``fn`` is a plain function (a ``lambda``, usually)
    of positional arguments whose body is one expression built only of its arguments,
    attribute reads, subscripts, constants, arithmetic, comparisons, tuple displays, calls of
    lattice classes bound to module globals (``lmin(l.c)``) and calls of ``@morph``/
    ``@monotone`` lattice methods (``p.c.min_of(l.c)``).

    Returns ``None`` for any other function (see the module docstring); the result is verified
    by recompiling it, never trusted to the decompiler alone. A lattice class called through a
    global is checked to be still bound to that global each time the expression is asked for
    (an engine asks when it builds its evaluators). For example,
    ``decompile(lambda l, p: (l.src, p.c + l.c))`` is
    ``TupleExpr((Attr(Arg(0, "l"), "src"), BinOp("+", Attr(Arg(1, "p"), "c"), Attr(Arg(0,
    "l"), "c"))))``.
    """
    try:
        out, bound = _CACHE[fn]
    except (KeyError, TypeError):  # not seen, or not weakly referenceable
        pass
    else:
        g = fn.__globals__  # type: ignore[attr-defined]
        if all(g.get(name) is cls for name, cls in bound.items()):
            return out
    out = _decompile(fn)
    bound = called_classes(out) if out is not None else {}
    with contextlib.suppress(TypeError):  # not weakly referenceable
        _CACHE[fn] = (out, bound)
    return out


def _decompile(fn: Any) -> Expr | None:
    if type(fn) is not types.FunctionType:
        return None
    code = fn.__code__
    if (
        fn.__defaults__
        or fn.__kwdefaults__
        or code.co_freevars
        or code.co_cellvars
        or code.co_kwonlyargcount
        or code.co_flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200)  # *args **kw gen async
        or code.co_nlocals != code.co_argcount
    ):
        return None
    try:
        expr = _symbolic(fn, code)
    except Exception:  # an interpreter whose instructions we read wrongly: no expression
        return None
    if expr is None:
        return None
    args = ", ".join(code.co_varnames[: code.co_argcount])
    src = f"lambda {args}: {to_source(expr)}"
    flags = code.co_flags & _FUTURE  # compile as the function's module was compiled
    try:
        outer = compile(src, code.co_filename, "eval", flags=flags, dont_inherit=True)
    except SyntaxError:
        return None
    again = next((c for c in outer.co_consts if isinstance(c, types.CodeType)), None)
    if again is None or not _same_code(again, code):
        return None
    return expr
