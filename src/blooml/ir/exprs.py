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
closure variables or globals, calls, conditionals, or an interpreter whose bytecode the
decompiler does not know. The function is then called as written; nothing is lost but speed.
"""

from __future__ import annotations
import __future__

import contextlib
import dis
import types
import weakref
from collections.abc import Callable
from typing import Any

import attrs

__all__ = [
    "Arg",
    "Attr",
    "BinOp",
    "Compare",
    "Const",
    "Expr",
    "Item",
    "TupleExpr",
    "Unary",
    "decompile",
    "to_source",
]


class Expr:
    """Base of expression nodes."""

    __slots__ = ()


@attrs.frozen
class Arg(Expr):
    """The function's positional argument ``index`` (named ``name``): a row."""

    index: int
    name: str


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


@attrs.frozen
class Const(Expr):
    """A constant of the function's code."""

    value: Any


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
class TupleExpr(Expr):
    """A tuple display ``(a, b, ...)``: the row a ``map`` function returns."""

    items: tuple[Expr, ...]


_BINARY = frozenset(["+", "-", "*", "/", "//", "%", "**", "@", "&", "|", "^", "<<", ">>"])
_COMPARE = frozenset(["<", "<=", "==", "!=", ">", ">="])
_UNARY = {"UNARY_NEGATIVE": "-", "UNARY_POSITIVE": "+", "UNARY_INVERT": "~", "UNARY_NOT": "not "}
# Instructions of CPython 3.11 and, by their documentation, of later versions (3.12
# LOAD_FAST_CHECK, RETURN_CONST; 3.13 LOAD_FAST_LOAD_FAST, TO_BOOL; 3.14 LOAD_FAST_BORROW,
# LOAD_SMALL_INT, BINARY_OP "[]"). Only 3.11 is exercised by the tests; a wrong reading of
# another version's instructions fails the recompile check and gives None.
_SKIP = frozenset(["RESUME", "NOP", "CACHE", "EXTENDED_ARG", "NOT_TAKEN", "TO_BOOL"])
_LOAD_ARG = frozenset(["LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW"])
_LOAD_ARGS = frozenset(["LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"])
_FUTURE = 0
for _name in __future__.all_feature_names:
    _FUTURE |= getattr(__future__, _name).compiler_flag
_CO_NESTED = 0x10  # set on functions defined inside functions; no meaning without free vars
_CONST_TYPES = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis))


def _const_ok(v: Any) -> bool:
    if type(v) is tuple:
        return all(_const_ok(x) for x in v)
    return type(v) in _CONST_TYPES


def _symbolic(code: types.CodeType) -> Expr | None:
    """Run ``code`` on symbols; the returned expression, or ``None`` on anything unknown."""
    names = code.co_varnames[: code.co_argcount]
    stack: list[Expr] = []
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op in _SKIP:
            continue
        if op in _LOAD_ARG or op in _LOAD_ARGS:
            vals = ins.argval if op in _LOAD_ARGS else (ins.argval,)
            for name in vals:
                if name not in names:
                    return None
                stack.append(Arg(names.index(name), name))
        elif op in ("LOAD_CONST", "LOAD_SMALL_INT"):
            if not _const_ok(ins.argval):
                return None
            stack.append(Const(ins.argval))
        elif op == "RETURN_CONST" and not stack and _const_ok(ins.argval):
            return Const(ins.argval)
        elif op == "BINARY_OP" and ins.argrepr == "[]" and len(stack) >= 2:
            key = stack.pop()
            stack.append(Item(stack.pop(), key))
        elif op == "LOAD_ATTR" and stack:
            stack.append(Attr(stack.pop(), str(ins.argval)))
        elif op == "BINARY_SUBSCR" and len(stack) >= 2:
            key = stack.pop()
            stack.append(Item(stack.pop(), key))
        elif op == "BINARY_OP" and len(stack) >= 2 and ins.argrepr in _BINARY:
            right = stack.pop()
            stack.append(BinOp(ins.argrepr, stack.pop(), right))
        elif op == "COMPARE_OP" and len(stack) >= 2 and ins.argval in _COMPARE:
            right = stack.pop()
            stack.append(Compare(str(ins.argval), stack.pop(), right))
        elif op in _UNARY and stack:
            stack.append(Unary(_UNARY[op], stack.pop()))
        elif op == "BUILD_TUPLE" and isinstance(ins.arg, int) and len(stack) >= ins.arg:
            n = ins.arg
            items = tuple(stack[len(stack) - n :]) if n else ()
            del stack[len(stack) - n :]
            stack.append(TupleExpr(items))
        elif op == "RETURN_VALUE" and len(stack) == 1:
            return stack[0]
        else:
            return None
    return None


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


_CACHE: weakref.WeakKeyDictionary[Any, Expr | None] = weakref.WeakKeyDictionary()


def decompile(fn: Callable[..., Any]) -> Expr | None:
    """The expression ``fn`` returns, when ``fn`` is a plain function (a ``lambda``, usually)
    of positional arguments whose body is one expression built only of its arguments,
    attribute reads, subscripts, constants, arithmetic, comparisons and tuple displays.

    Returns ``None`` for any other function (see the module docstring); the result is verified
    by recompiling it, never trusted to the decompiler alone. For example,
    ``decompile(lambda l, p: (l.src, p.c + l.c))`` is
    ``TupleExpr((Attr(Arg(0, "l"), "src"), BinOp("+", Attr(Arg(1, "p"), "c"), Attr(Arg(0,
    "l"), "c"))))``.
    """
    with contextlib.suppress(KeyError, TypeError):  # not seen, or not weakly referenceable
        return _CACHE[fn]
    out = _decompile(fn)
    with contextlib.suppress(TypeError):
        _CACHE[fn] = out
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
        expr = _symbolic(code)
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
