"""Which lattice variables a rule function reads: the ``reads`` declaration and the scan.

A rule function (a ``map`` lambda, a literal row function, a helper method it calls) may read
``self.<lattice variable>`` and ``self.tick_count``. Those reads are dependencies of the rule,
and the IR must know them: a rule is re-evaluated when a variable it reads grows, and a
variable used non-monotonically (its ``reveal()``, any method not marked ``@morph`` or
``@monotone``, the bare value) must be final before the rule runs, which stratification
arranges.

Two sources, merged:

* the **scan** (a hint): the function's bytecode is read for ``self.<name>`` loads, in nested
  functions and in the methods of the program class it calls through ``self.<method>``, and
  what follows the load tells how the value is used;
* the **declaration** :func:`reads`, for what the scan cannot see (``getattr(self, name)``, a
  module-level helper that is passed ``self``, an alias of ``self``).

Neither is trusted blindly: while a tick runs the engine checks every read against the rule's
declared reads and raises a :class:`~blooml.errors.ProgramError` for any other (see
``docs/bloom.md``), and a variable recorded as read monotonically is handed to the function
behind a guard that only lets its ``@morph``/``@monotone`` methods through.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from blooml.errors import ProgramError

__all__ = [
    "READS_ATTR",
    "declared_reads",
    "function_reads",
    "reads",
    "reads_columns_nonmonotonically",
    "shipped_reads",
]

F = TypeVar("F", bound=Callable[..., Any])

READS_ATTR = "__blooml_reads__"
_MONOTONE_KINDS = ("morph", "monotone")
_ATTR_LOADS = ("LOAD_ATTR", "LOAD_METHOD")  # LOAD_METHOD: 3.11; 3.12+ folds it into LOAD_ATTR


def reads(*names: str, monotone: bool = False) -> Callable[[F], F]:
    """Declare the lattice variables a rule function (or a helper method) reads.

    The rule layer finds ``self.<lattice>`` reads in a function's bytecode, but cannot see
    every one (``getattr(self, name)``, a helper outside the program class, an alias of
    ``self``); the engine then stops the tick with a :class:`~blooml.errors.ProgramError`
    naming the read. Declare such reads::

        self.out <= self.t.map(reads("best")(lambda r: helper(self, r)))

        @reads("best")
        def row(self, k):            # a method of the program, called from rule functions
            return (k, self.best.value.reveal())

    Args:
        *names: lattice variable names (or ``"tick_count"``).
        monotone: ``False`` (default) declares a non-monotone use (``reveal()``, comparisons,
            the bare value): the variable is computed in an earlier stratum than the rule, so
            the function sees its final value for the tick. ``True`` declares that the
            function only calls ``@morph``/``@monotone`` methods of the value, so the rule may
            sit on a recursive cycle with the variable; any other use then raises a
            ``ProgramError`` at run time.

    Returns:
        A decorator that marks the function and returns it unchanged.

    Raises:
        ProgramError: a name is not a string, or ``monotone`` is not a bool.
    """
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise ProgramError(f"reads(...): expected lattice variable names, got {n!r}")
    if not isinstance(monotone, bool):
        raise ProgramError(f"reads(..., monotone=...): expected True or False, got {monotone!r}")
    if not names:
        raise ProgramError("reads(): name at least one lattice variable")

    def mark(fn: F) -> F:
        if not callable(fn):
            raise ProgramError(
                f"reads({', '.join(map(repr, names))}) decorates a function, got {fn!r}"
            )
        target = getattr(fn, "__func__", fn)
        old: dict[str, bool] = dict(getattr(target, READS_ATTR, {}))
        for n in names:
            # True = read non-monotonically; one non-monotone declaration wins
            old[n] = old.get(n, False) or not monotone
        setattr(target, READS_ATTR, old)
        return fn

    return mark


def declared_reads(fn: Any) -> dict[str, bool]:
    """The reads declared on ``fn`` with :func:`reads` (name -> read non-monotonically)."""
    return dict(getattr(getattr(fn, "__func__", fn), READS_ATTR, {}))


def function_reads(
    fn: Any, lattices: Mapping[str, type], cls: type | None = None
) -> dict[str, bool]:
    """The reads of ``fn`` that the scan finds, plus the declared ones.

    Returns ``{name: read_nonmonotonically}`` for ``self.<name>`` loads of names in
    ``lattices`` (name -> lattice class) or ``tick_count``, in ``fn``, in functions nested in
    it and, through ``self.<method>``, in the methods of ``cls`` it calls (with their
    :func:`reads` declarations).
    """
    out: dict[str, bool] = {}
    _merge(out, declared_reads(fn))
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    stack = [code] if code is not None else []
    seen: set[Any] = set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        ins = list(dis.get_instructions(c))
        attr_names = {i.argval for i in ins if i.opname in _ATTR_LOADS}
        for j, i in enumerate(ins):
            if not _loads_self(i) or j + 1 >= len(ins) or ins[j + 1].opname not in _ATTR_LOADS:
                continue
            name = ins[j + 1].argval
            if name == "tick_count":
                out.setdefault(name, False)
            elif name in lattices:
                nm = _nonmonotone_use(ins, j + 2, lattices[name], attr_names)
                out[name] = out.get(name, False) or nm
            elif cls is not None:
                attr = inspect.getattr_static(cls, name, None)
                attr = getattr(attr, "__func__", attr)
                if isinstance(attr, types.FunctionType):
                    _merge(out, declared_reads(attr))
                    stack.append(attr.__code__)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


def shipped_reads(fn: Any, lattices: Mapping[str, type]) -> frozenset[str]:
    """The lattice variables ``fn`` reads only to put their whole value, as the last column,
    into the row it returns (``lambda t, p: (p.addr, self.cart)``: state-based gossip).

    Such a read is non-monotone for stratification (the row holds the value as it is when
    the rule fires), but a message or ``<+`` row that carries the tick's final value whole is
    the CRDT idiom, not a point of order: the receiver merges what it gets. Nested functions
    and helper methods are not looked into (a read there is not shipped)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return frozenset()
    shipped: set[str] = set()
    other: set[str] = set()
    ins = list(dis.get_instructions(code))
    for j, i in enumerate(ins):
        if not _loads_self(i) or j + 1 >= len(ins) or ins[j + 1].opname not in _ATTR_LOADS:
            continue
        name = ins[j + 1].argval
        if name not in lattices:
            continue
        tail = [x.opname for x in ins[j + 2 : j + 4]]
        (shipped if tail == ["BUILD_TUPLE", "RETURN_VALUE"] else other).add(name)
    for c in code.co_consts:  # a read in a nested function is some other use
        if isinstance(c, types.CodeType):
            other.update(n for n in c.co_names if n in lattices)
    return frozenset(shipped - other)


def _merge(out: dict[str, bool], more: Mapping[str, bool]) -> None:
    for n, nm in more.items():
        out[n] = out.get(n, False) or nm


def _loads_self(i: dis.Instruction) -> bool:
    """Whether ``i`` pushes the variable ``self`` on top of the stack.

    Any load of a local, cell, global or name (not a constant, not an attribute) counts. A
    fused load of two locals (3.13's ``LOAD_FAST_LOAD_FAST``) has a pair of names as its
    argument and pushes the last one on top. Matching on what an instruction loads rather than
    on a list of opcode names keeps the scan right when CPython adds a load variant; the scan
    is only a hint either way, since the engine verifies every read.
    """
    if not i.opname.startswith("LOAD_") or i.opname in _ATTR_LOADS or i.opcode in dis.hasconst:
        return False
    arg = i.argval
    if isinstance(arg, tuple):
        return bool(arg) and arg[-1] == "self"
    return bool(arg == "self")


def _nonmonotone_use(
    ins: list[dis.Instruction], k: int, cls: type, attr_names: Iterable[str]
) -> bool:
    """How the value loaded just before ``ins[k]`` is used: ``True`` unless it is the target of
    a ``@morph``/``@monotone`` method and the function calls no non-monotone method of its
    class (``self.best.gt(3).reveal()`` reveals the result of a monotone method)."""
    nxt = ins[k] if k < len(ins) else None
    if (
        nxt is not None
        and nxt.opname in _ATTR_LOADS
        and nxt.argval == "value"
        and not hasattr(cls, "value")
    ):  # a helper method reads the variable through the program's view: p.best.value
        k += 1
        nxt = ins[k] if k < len(ins) else None
    if nxt is None or nxt.opname not in _ATTR_LOADS:
        return True  # the bare value: compared, stored, passed on
    marks: Mapping[str, str] = getattr(cls, "_marks", {})
    if marks.get(nxt.argval) not in _MONOTONE_KINDS:
        return True
    for n in attr_names:
        if n == "reveal" or (
            not n.startswith("_") and n not in marks and callable(getattr(cls, n, None))
        ):
            return True
    return False


# names that plain Python values also answer to: a call of one of them on a column says
# nothing about a lattice (``r.tags.get(k)`` on a dict column)
_PLAIN_ATTRS = frozenset(
    n for t in (str, bytes, int, float, tuple, list, dict, set, frozenset) for n in dir(t)
)


def _nonmonotone_method(name: str, lattices: Iterable[type]) -> bool:
    if name == "reveal":
        return True
    if name.startswith("_") or name in _PLAIN_ATTRS:
        return False
    for cls in lattices:
        attr = inspect.getattr_static(cls, name, None)
        if isinstance(attr, (classmethod, staticmethod)):
            continue  # lset.from_item(...), a constructor: not a read of a value
        if callable(attr):
            marks: Mapping[str, str] = getattr(cls, "_marks", {})
            if marks.get(name) not in _MONOTONE_KINDS:
                return True
    return False


def reads_columns_nonmonotonically(
    fn: Any, lattice_vars: Iterable[str], lattices: Iterable[type]
) -> bool:
    """Whether rule function ``fn`` may read a lattice column of its rows non-monotonically.

    The scan looks, in ``fn`` and the functions nested in it, for a call of ``reveal`` or of a
    method that a class in ``lattices`` (the registered lattice classes) defines without a
    ``@morph``/``@monotone`` mark, on anything but ``self.<lattice variable>`` (those reads
    are :func:`function_reads`'s, names in ``lattice_vars``): ``lambda x: (x.n, x.d.reveal())``
    reads column ``d`` of its row before that row is final unless the rule runs in a later
    stratum than the collection it reads. Methods plain Python values answer to (``get``,
    ``items``, ...) are not counted: a column may hold a dict.
    """
    classes = list(lattices)
    variables = set(lattice_vars)
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    stack = [code] if code is not None else []
    seen: set[Any] = set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        ins = list(dis.get_instructions(c))
        for j, i in enumerate(ins):
            if i.opname not in _ATTR_LOADS or not _nonmonotone_method(i.argval, classes):
                continue
            k = j - 1
            if k >= 0 and ins[k].opname in _ATTR_LOADS and ins[k].argval == "value":
                k -= 1  # p.best.value.reveal() in a helper method
            if (
                k >= 1
                and ins[k].opname in _ATTR_LOADS
                and ins[k].argval in variables
                and _loads_self(ins[k - 1])
            ):
                continue  # self.<variable>.reveal(): a read of the variable
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False
