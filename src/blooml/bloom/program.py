"""``Program``, the ``@bloom`` decorator, and compiling a program class to its IR.

When a ``Program`` subclass is defined, its state declarations are collected along the MRO
(a redeclared name overrides), its ``@bloom`` blocks are resolved by name (a subclass or mixin
method of the same name replaces the block), and each block is run once against *handles*
to record the rules. The result is a :class:`~blooml.ir.ProgramIR`, checked for
stratifiability right away. Instances run the IR with the embedded engine.
"""

from __future__ import annotations

import inspect
import time
import types
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from blooml._factory import new_runtime
from blooml.bloom._decl import CollectionDecl
from blooml.bloom._handles import CollectionHandle, LatticeHandle, Recorder
from blooml.bloom._reads import function_reads
from blooml.errors import ProgramError
from blooml.ir import nodes as N
from blooml.ir.graph import analyze
from blooml.ir.program import CollectionInfo, LatticeInfo, ProgramIR, Rule
from blooml.lattices._base import Lattice

__all__ = ["Program", "bloom"]

F = TypeVar("F", bound=Callable[..., Any])
_BLOCK_ATTR = "_blooml_block"


def bloom(fn: F) -> F:
    """Mark a method as a block of rules.

    The method runs once, when the program class is defined, with ``self`` standing for the
    program's state: each ``head op body`` statement records a rule. A subclass or mixin method
    with the same name replaces the block.
    """
    if not callable(fn):
        raise ProgramError(f"@bloom decorates a method, got {fn!r}")
    setattr(fn, _BLOCK_ATTR, True)
    return fn


class _StateAttr:
    """Class attribute standing for a declared collection or lattice variable."""

    __slots__ = ("decl", "name")

    def __init__(self, name: str, decl: Any) -> None:
        self.name = name
        self.decl = decl

    def __get__(self, inst: Any, owner: type) -> Any:
        if inst is None:
            return self.decl
        rt = inst.__dict__.get("_rt")
        if rt is None:
            raise ProgramError(
                f"{type(inst).__name__}.{self.name}: Program.__init__ was not called "
                "(call super().__init__(**kwargs) in your __init__)"
            )
        return rt.view(self.name)

    def __set__(self, inst: Any, value: Any) -> None:
        raise AttributeError(
            f"{self.name!r} is program state: use .insert()/.delete() or rules, not assignment"
        )


class _IRAccess:
    """``P.ir()`` on the class and ``p.ir`` on an instance give the same ``ProgramIR``."""

    def __get__(self, inst: Any, owner: type) -> Any:
        if inst is None:
            return owner._get_ir  # type: ignore[attr-defined]
        return owner._get_ir()  # type: ignore[attr-defined]


class _Self:
    """What ``self`` is inside a ``@bloom`` block and inside the rule functions it creates.

    While the block runs (declaration), state names give handles. While a tick runs, the
    engine points ``_rt`` at the running program: a lattice variable then reads as its current
    value (Bud's ``current_value``), ``tick_count`` as the tick number, any other name as the
    program instance's attribute.
    """

    __slots__ = ("_cls", "_handles", "_rt")

    def __init__(self, cls: type, handles: dict[str, Any]) -> None:
        self._cls = cls
        self._handles = handles
        self._rt: Any = None

    def __getattr__(self, name: str) -> Any:
        rt = self._rt
        if rt is not None:
            return rt.read_attr(name)
        h = self._handles.get(name)
        if h is not None:
            return h
        if name == "tick_count":
            raise ProgramError(
                "self.tick_count can be read only inside rule functions (a map lambda, a "
                "literal row function), where it is the current tick"
            )
        try:
            attr = inspect.getattr_static(self._cls, name)
        except AttributeError:
            raise AttributeError(
                f"{self._cls.__name__} has no state or class attribute {name!r} (instance "
                "attributes set in __init__ can be read only inside rule functions)"
            ) from None
        if isinstance(attr, (staticmethod, classmethod)):
            return getattr(self._cls, name)
        if isinstance(attr, types.FunctionType):
            return types.MethodType(attr, self)
        return getattr(self._cls, name)

    def __bool__(self) -> bool:  # pragma: no cover - trivial
        return True

    def __repr__(self) -> str:
        return f"<self of {self._cls.__name__}>"


class Program:
    """Base class of Bloom^L programs.

    Declare state as class attributes (``table``, ``scratch``, ``channel``, ``periodic``,
    ``interface``, or a lattice value such as ``lset()``) and rules in ``@bloom`` methods::

        class Paths(Program):
            link = table(["src", "dst", "c"])
            path = table(["src", "dst"], ["c"])

            @bloom
            def rules(self):
                self.path <= self.link.map(lambda l: (l.src, l.dst, lmin(l.c)))

        p = Paths()
        p.link.insert([("a", "b", 1)])
        p.tick()

    Args:
        addr: this program's address (channels deliver tuples whose location column equals it
            back to it: loopback).
        clock: a function returning seconds (default ``time.monotonic``); periodics and soft
            state use it, so a test can pass a fake clock.
        network: a :class:`~blooml.LocalNetwork` connecting several programs in one process.
        prioritize: evaluate ``lmin``/``lmax`` deltas best value first where that is safe
            (default: ``blooml.engine.Runtime.prioritize``, on); see docs/bloom.md.
        inline: run simple ``map`` functions (``lambda l, p: (l.src, p.c + l.c)``) as
            generated loops instead of calling them, and store the rows of collections no
            user function receives as plain tuples (default: ``Runtime.inline``, on). The
            results are the same either way; see docs/bloom.md.

    Pass ``abstract=True`` in the class statement (``class M(Program, abstract=True)``) for a
    module that is only mixed into others: its rules are checked when a concrete class uses it.
    """

    _blooml_ir: ClassVar[ProgramIR | None] = None
    _blooml_self: ClassVar[_Self | None] = None
    _blooml_abstract: ClassVar[bool] = True
    _rt: Any  # the engine's Runtime, set by __init__
    ir = _IRAccess()

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._blooml_abstract = abstract
        cls._blooml_ir = None
        cls._blooml_self = None
        state = _collect_state(cls)
        for name, decl in state.items():
            if name not in cls.__dict__ or not isinstance(cls.__dict__[name], _StateAttr):
                setattr(cls, name, _StateAttr(name, decl))
        if not abstract:
            cls._compile()

    @classmethod
    def _get_ir(cls) -> ProgramIR:
        """Return the program's IR (compiling it on first use)."""
        if cls is Program:
            raise ProgramError("Program itself has no rules; subclass it")
        if cls.__dict__.get("_blooml_ir") is None:
            cls._compile()
        ir = cls.__dict__["_blooml_ir"]
        assert ir is not None
        return ir

    @classmethod
    def _compile(cls) -> None:
        state = _collect_state(cls)
        colls: dict[str, CollectionInfo] = {}
        lats: dict[str, LatticeInfo] = {}
        handles: dict[str, Any] = {}
        for name, decl in state.items():
            if isinstance(decl, CollectionDecl):
                info = decl.info(name)
                colls[name] = info
                handles[name] = CollectionHandle(info)
            else:
                linfo = LatticeInfo(name, type(decl), decl)
                lats[name] = linfo
                handles[name] = LatticeHandle(linfo)
        proxy = _Self(cls, handles)
        specs: list[tuple[str, Any]] = []
        for block_name, fn in _collect_blocks(cls):
            rec = Recorder(block_name)
            with rec.recording():
                try:
                    fn(proxy)
                except BaseException as exc:
                    exc.add_note(f"while declaring @bloom block {cls.__qualname__}.{block_name}")
                    raise
            specs.extend((block_name, s) for s in rec.specs)
        lat_classes = {name: info.cls for name, info in lats.items()}
        rules = []
        for i, (block_name, s) in enumerate(specs):
            reads: dict[str, bool] = {}  # name -> read non-monotonically
            for fn in N.functions(s.body):
                for name, nm in function_reads(fn, lat_classes, cls).items():
                    reads[name] = reads.get(name, False) or nm
            unknown = sorted(set(reads) - set(lats) - {"tick_count"})
            if unknown:
                known = ", ".join(sorted(lats)) or "none"
                raise ProgramError(
                    f"rule at {s.file.rsplit('/', 1)[-1]}:{s.line} (block {block_name}): "
                    f"reads(...) declares {', '.join(map(repr, unknown))}: not a lattice "
                    f"variable of {cls.__qualname__} (its lattice variables: {known})"
                )
            lat_reads = {n: nm for n, nm in reads.items() if n != "tick_count"}
            rule = Rule(
                index=i,
                head=s.head,
                op=s.op,
                body=s.body,
                block=block_name,
                file=s.file,
                line=s.line,
                reads=frozenset(lat_reads),
                reads_tick="tick_count" in reads or _uses_tick(s.body),
                nonmonotone_reads=frozenset(n for n, nm in lat_reads.items() if nm),
            )
            _check_rule_types(rule, lats)
            rules.append(rule)
        cls._blooml_ir = analyze(cls.__qualname__, colls, lats, tuple(rules))
        cls._blooml_self = proxy

    def __init__(
        self,
        *,
        addr: str = "localhost",
        clock: Callable[[], float] | None = None,
        network: Any = None,
        prioritize: bool | None = None,
        inline: bool | None = None,
    ) -> None:
        cls = type(self)
        if cls is Program:
            raise ProgramError("Program itself has no rules; subclass it")
        if cls._blooml_abstract and "_blooml_ir" in cls.__dict__ and cls._blooml_ir is None:
            cls._compile()
        ir = cls._get_ir()
        if not isinstance(addr, str):
            raise ProgramError(f"addr must be a string, got {addr!r}")
        for opt, val in (("prioritize", prioritize), ("inline", inline)):
            if val is not None and not isinstance(val, bool):
                raise ProgramError(f"{opt} must be True, False or None (the default), got {val!r}")
        self.__dict__["_rt"] = new_runtime(
            ir,
            self,
            cls._blooml_self,
            addr=addr,
            clock=clock or time.monotonic,
            prioritize=prioritize,
            inline=inline,
        )
        if network is not None:
            network.register(self)

    @property
    def addr(self) -> str:
        """This program's address."""
        return str(self._rt.addr)

    @property
    def tick_count(self) -> int:
        """The number of completed ticks (the seed's budtime). Inside rule functions,
        ``self.tick_count`` is the number of the tick being run, counted from 0."""
        return int(self._rt.read_attr("tick_count"))

    def tick(self, n: int = 1) -> None:
        """Run ``n`` timesteps (each atomic: on an error the state is as before that tick)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ProgramError(f"tick(n): n must be a non-negative int, got {n!r}")
        for _ in range(n):
            self._rt.tick()

    def __repr__(self) -> str:
        rt = self.__dict__.get("_rt")
        if rt is None:
            return f"<{type(self).__qualname__} (not initialised)>"
        return f"<{type(self).__qualname__} at {rt.addr!r}, tick {rt.tick_count}>"


_RESERVED = {n for n in dir(Program) if not n.startswith("__")} | {"tick_count", "addr"}


def _collect_state(cls: type) -> dict[str, Any]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in klass.__dict__:
            if name not in names:
                names.append(name)
    state: dict[str, Any] = {}
    for name in names:
        if name.startswith("__"):
            continue
        try:
            attr = inspect.getattr_static(cls, name)
        except AttributeError:  # pragma: no cover
            continue
        decl = attr.decl if isinstance(attr, _StateAttr) else attr
        if isinstance(decl, (CollectionDecl, Lattice)):
            if name in _RESERVED or name.startswith("_"):
                raise ProgramError(
                    f"{cls.__qualname__}.{name}: this name is reserved by Program (or private); "
                    "rename the collection or lattice variable"
                )
            state[name] = decl
    return state


def _collect_blocks(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, attr in klass.__dict__.items():
            if getattr(attr, _BLOCK_ATTR, False) and name not in names:
                names.append(name)
    out = []
    for name in names:
        attr = inspect.getattr_static(cls, name)
        if getattr(attr, _BLOCK_ATTR, False):
            out.append((name, attr))
    return out


def _uses_tick(node: Any) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, N.TickCount):
            return True
        stack.extend(N.children(n))
    return False


def _check_rule_types(rule: Rule, lats: dict[str, LatticeInfo]) -> None:
    """A lattice head takes a value of its own class (or rows to fold)."""
    if rule.head not in lats or not isinstance(rule.body, N.Lat):
        return
    want = lats[rule.head].cls
    got: type | None = None
    body = rule.body
    if isinstance(body, N.LatVar):
        got = body.cls
    elif isinstance(body, (N.Include, N.Empty)):
        from blooml.lattices.ordered import lbool

        got = lbool
    elif isinstance(body, N.LatMethod) and body.cls is not None:
        from blooml.bloom._exprs import _result_class

        got = _result_class(body.cls, body.name, body.args)
    if got is not None and got is not want:
        raise ProgramError(
            f"{rule.describe()}: the right side is a {getattr(got, 'wrapper_name', got)} but "
            f"{rule.head!r} is a {getattr(want, 'wrapper_name', want)}; both sides of a lattice "
            "rule must be the same lattice"
        )
