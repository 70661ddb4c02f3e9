"""``Program``, the ``@bloom`` decorator, and compiling a program class to its IR.

When a ``Program`` subclass is defined, its state declarations are collected along the MRO
(a redeclared name overrides), its ``@bloom`` blocks are resolved by name (a subclass or mixin
method of the same name replaces the block), and each block is run once against *handles*
to record the rules. The result is a :class:`~blooml.ir.ProgramIR`, checked for
stratifiability right away. Instances run the IR with the embedded engine.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import operator
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self, TypeVar

from blooml._factory import new_node, new_runtime, open_durable
from blooml.bloom._decl import CollectionDecl, DurableLattice
from blooml.bloom._handles import CollectionHandle, LatticeHandle, Recorder
from blooml.bloom._reads import function_reads, reads_columns_nonmonotonically, shipped_reads
from blooml.errors import ProgramError
from blooml.ir import nodes as N
from blooml.ir.graph import analyze, sources
from blooml.ir.program import CollectionInfo, LatticeInfo, ProgramIR, Rule
from blooml.lattices._base import Lattice, registered_lattices

__all__ = ["Program", "bloom"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
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


class _Running(threading.local):
    """The program running a tick on this thread (``None`` between ticks)."""

    rt: Any = None


def _set_rt(proxy: _Self, rt: Any) -> None:
    proxy._tls.rt = rt


class _Self:
    """What ``self`` is inside a ``@bloom`` block and inside the rule functions it creates.

    While the block runs (declaration), state names give handles. While a tick runs, the
    engine points ``_rt`` at the running program: a lattice variable then reads as its current
    value (Bud's ``current_value``), ``tick_count`` as the tick number, any other name as the
    program instance's attribute.
    """

    __slots__ = ("_cls", "_handles", "_tls")

    def __init__(self, cls: type, handles: dict[str, Any]) -> None:
        self._cls = cls
        self._handles = handles
        # The running program, per thread: instances of one class tick concurrently in
        # different threads (network nodes), each thread's rule functions see its own.
        self._tls = _Running()

    #: The running program (per thread; ``None`` outside a tick), read without a Python
    #: call (a tick sets and restores it, a rule function's ``self.<var>`` reads it).
    _rt = property(operator.attrgetter("_tls.rt"), _set_rt)

    def __getattr__(self, name: str) -> Any:
        rt = self._tls.rt
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
        network: a :class:`~blooml.LocalNetwork` connecting several programs in one process
            (or another transport, such as a ``blooml.net.Simulation``).
        transport: for a ``host:port`` address: ``"udp"`` (the default) or ``"tcp"``.
        cluster_key: for a ``host:port`` address: a shared secret (``bytes`` or ``str``);
            every datagram is signed with it and unsigned or badly signed ones are dropped.
        data_dir: a directory where durable state is kept (``table(..., durable=True)``).
        prioritize: evaluate ``lmin``/``lmax`` deltas best value first where that is safe
            (default: ``blooml.engine.Runtime.prioritize``, on); see docs/bloom.md.
        inline: run simple ``map`` functions (``lambda l, p: (l.src, p.c + l.c)``) as
            generated loops instead of calling them, and store the rows of collections no
            user function receives as plain tuples (default: ``Runtime.inline``, on). The
            results are the same either way; see docs/bloom.md.
        incremental: evaluate each tick at the cost of what changed (default:
            ``blooml.engine.Runtime.incremental``, on): collections that do not persist are
            maintained across ticks and rules run on signed changes. ``False`` re-derives
            every rule each tick: the reference to compare with when you suspect the
            incremental core. The results are the same either way; see docs/bloom.md.
        column_types: ``"dynamic"`` (the default: a column holds Python values of any
            types, mixed as the program stores them) or ``"spark"``: each column holds one
            type family, learned and checked as ``SparkEngine`` does (an int and a float
            widen to ``double``; None fits any column), and a tick storing a value its column
            cannot hold raises :class:`~blooml.errors.ColumnValueError` naming the
            collection, the column and the value, and changes nothing. Use it to run a
            program locally as it will run on Spark; see docs/bloom.md.
        trace: record every tick as JSON lines: a file path, an open text file, or a
            ``blooml.engine.trace.Tracer`` (to share one file between programs or set the
            number of rows kept); schema and tools in docs/tools.md (``blooml trace``).

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
                dur = isinstance(decl, DurableLattice)
                value = decl.value if dur else decl
                linfo = LatticeInfo(name, type(value), value, durable=dur)
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
            revealing = _revealing_inputs(s.body, lats)
            shipped = _shipped(list(N.functions(s.body)), lat_reads, lat_classes, cls)
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
                nonmonotone_inputs=revealing,
                shipped_reads=shipped,
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
        trace: Any = None,
        transport: str | None = None,
        incremental: bool | None = None,
        cluster_key: bytes | str | None = None,
        data_dir: str | None = None,
        column_types: str | None = None,
    ) -> None:
        cls = type(self)
        if cls is Program:
            raise ProgramError("Program itself has no rules; subclass it")
        if cls._blooml_abstract and "_blooml_ir" in cls.__dict__ and cls._blooml_ir is None:
            cls._compile()
        ir = cls._get_ir()
        if not isinstance(addr, str):
            raise ProgramError(f"addr must be a string, got {addr!r}")
        for opt, val in (
            ("prioritize", prioritize),
            ("inline", inline),
            ("incremental", incremental),
        ):
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
            incremental=incremental,
            column_types=column_types,
            trace=trace,
        )
        rt = self.__dict__["_rt"]
        open_durable(rt, data_dir)  # restores the durable state kept in data_dir
        if transport is not None and transport not in ("udp", "tcp"):
            raise ProgramError(f"transport must be 'udp' or 'tcp', got {transport!r}")
        if cluster_key is not None and not isinstance(cluster_key, (bytes, str)):
            raise ProgramError(f"cluster_key must be bytes or str, got {type(cluster_key)!r}")
        if network is not None:
            if transport is not None or cluster_key is not None:
                raise ProgramError(
                    "transport= and cluster_key= are for programs bound to a host:port "
                    "address; a network= decides its own transport"
                )
            network.register(self)
        elif _is_host_port(addr):
            new_node(self, transport=transport or "udp", cluster_key=cluster_key)
        elif transport is not None or cluster_key is not None:
            raise ProgramError(
                f"transport= and cluster_key= need a host:port address, got addr={addr!r}"
            )

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
        node = self._rt.node
        if node is not None and node.running and not node.on_own_thread():
            # started: the tick runs on the node's thread, between its own ticks
            node.sync_do(lambda p: p._rt.tick_n(n), None)
            return
        for _ in range(n):
            self._rt.tick()

    def discard_pending(
        self, only: Mapping[str, Iterable[Any]] | None = None
    ) -> dict[str, list[Any]]:
        """Drop everything queued for the next tick (or only the items of ``only``) and
        return what was dropped.

        Queued input is what ``insert`` calls, ``<+``/``<+-``/``<-`` rules of the last tick and
        arrived messages left for the next tick. A tick that raises keeps it queued (the
        exception's ``pending_input`` attribute and a note name the input it could not take),
        so every later ``tick()`` would raise again; drop it with this method, after which
        ``tick()`` runs on the stored state, which the failed tick left unchanged::

            try:
                p.tick()
            except Exception as exc:
                log.warning("dropped %r: %s", exc.pending_input, exc)
                p.discard_pending()

        ``p.discard_pending(exc.pending_input)`` drops only the input the tick could not take
        (when it names rows, the others stay queued and the next tick takes them).

        Args:
            only: ``{name: [rows or lattice values]}``; each item drops one equal queued
                insertion, replacement or lattice value of that name (items not queued are
                ignored). Default: drop everything, deletions included.

        Raises:
            ProgramError: ``only`` is not a mapping, or names no collection or lattice
                variable of the program.

        Returns:
            ``{collection or lattice variable name: [rows or lattice values]}``: rows to
            insert (named tuples), ``<+-`` replacements and lattice values. Queued deletions
            are dropped too and are in the result's ``deletes`` attribute (a dict of the same
            shape).
        """
        out: dict[str, list[Any]] = self._rt.discard_pending(only)
        return out

    # -- running as a network node (blooml.net; see docs/net.md) --------------------------------

    def _node(self) -> Any:
        rt = self._rt
        if rt.node is None:
            if rt.network is not None:
                raise ProgramError(
                    f"{self!r} is on {rt.network!r}, which ticks it; start() and the node "
                    "methods are for programs bound to a host:port address (or none)"
                )
            new_node(self)
        return rt.node

    def start(self) -> Self:
        """Run this program in a background thread: it ticks whenever messages, timers
        (``periodic``) or input from ``sync_do``/``async_do`` arrive. Returns ``self``."""
        self._node().start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop a started program: apply what has arrived (one last tick), send what is
        queued, close the sockets and join the thread (waiting at most ``timeout`` s)."""
        self._node().stop(timeout)

    def run(self) -> None:
        """Run in the foreground until SIGINT or SIGTERM, then stop cleanly (main thread)."""
        self._node().run()

    def sync_do(self, fn: Callable[[Any], T], timeout: float | None = 30.0) -> T:
        """Run ``fn(self)`` between ticks and return its result, after the tick that applies
        any input it queued (Bud's ``sync_do``). Raises what ``fn`` raises, or the exception
        of the tick that could not apply what ``fn`` queued (which is then set aside)."""
        return self._node().sync_do(fn, timeout)

    def async_do(self, fn: Callable[[Any], Any]) -> concurrent.futures.Future[Any]:
        """Queue ``fn(self)`` to run between ticks; return at once (Bud's ``async_do``) with
        a future of its result, failed if ``fn`` raises or its input is set aside."""
        fut: concurrent.futures.Future[Any] = self._node().async_do(fn)
        return fut

    def on_tick(self, fn: Callable[[Any], Any]) -> None:
        """Call ``fn(self)`` after each committed tick (on the program's thread)."""
        self._node().on_tick(fn)

    def watch(self, name: str, fn: Callable[[list[Any]], Any]) -> None:
        """Call ``fn(rows)`` after each tick with the tuples collection ``name`` gained (for a
        lattice variable: ``fn([value])`` when it grew)."""
        self._node().watch(name, fn)

    def on_error(self, fn: Callable[[BaseException], Any]) -> None:
        """Call ``fn(exc)`` when a tick fails (it is rolled back; the input that made it fail
        is set aside) or a callback raises."""
        self._node().on_error(fn)

    def memory(self) -> dict[str, Any]:
        """What this program instance keeps, with estimated bytes.

        Returns ``{"collections": {name: {"rows", "bytes", "support", "support_bytes"}},
        "rules": {rule: {"operator", "entries", "bytes"}}, "total_bytes": n}``: the rows each
        collection stores, the derivation counts kept for a maintained (non-persistent)
        collection, and per rule the state its incremental evaluator keeps (per-group
        aggregates, the last output of a rule re-run in full). Bytes are estimates from
        ``sys.getsizeof`` of a sample entry. See docs/bloom.md, "Incrementality".
        """
        return dict(self._rt.memory())

    def stats(self) -> dict[str, Any]:
        """Counters of a node: ticks, errors, datagrams and tuples sent and received, and
        dropped datagrams by reason (see docs/net.md)."""
        return dict(self._node().stats())

    def __repr__(self) -> str:
        rt = self.__dict__.get("_rt")
        if rt is None:
            return f"<{type(self).__qualname__} (not initialised)>"
        return f"<{type(self).__qualname__} at {rt.addr!r}, tick {rt.tick_count}>"

    def _repr_html_(self) -> str:
        """Jupyter: every collection and lattice variable, as tables (non-empty ones open)."""
        import html

        rt = self.__dict__.get("_rt")
        if rt is None:
            return f"<code>{html.escape(repr(self))}</code>"
        parts = [f"<div><b>{html.escape(repr(self))}</b>"]
        for name, info in rt.ir.collections.items():
            n = len(rt.rels[name].store)
            summary = f"{info.kind} {name}: {n} row{'' if n == 1 else 's'}"
            parts.append(
                f"<details{' open' if n else ''}><summary>{html.escape(summary)}</summary>"
                f"{rt.view(name)._html_table('')}</details>"
            )
        for name in rt.ir.lattices:
            parts.append(
                f"<details open><summary>lattice {html.escape(name)}</summary>"
                f"{rt.view(name).value._repr_html_()}</details>"
            )
        parts.append("</div>")
        return "".join(parts)


#: Methods a program's state may shadow (a collection named ``start`` or ``stats`` is common):
#: on such a class, reach the node through ``blooml.net.node(p)`` instead.
_NODE_METHODS = frozenset(
    {"start", "stop", "run", "sync_do", "async_do", "on_tick", "watch", "on_error", "stats"}
)
_RESERVED = {n for n in dir(Program) if not n.startswith("__") and n not in _NODE_METHODS} | {
    "tick_count",
    "addr",
}


def _is_host_port(addr: str) -> bool:
    """Whether ``addr`` is ``host:port`` (or ``[ipv6]:port``): an address to bind."""
    host, sep, port = addr.rpartition(":")
    return bool(sep and host and port.isdigit())


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
        if isinstance(decl, (CollectionDecl, Lattice, DurableLattice)):
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


def _revealing_inputs(body: Any, lats: Mapping[str, LatticeInfo]) -> frozenset[str]:
    """The collections (and lattice variables, through ``to_collection()``) whose rows reach a
    function of ``body`` that reads their lattice columns non-monotonically
    (``Rule.nonmonotone_inputs``; see ``reads_columns_nonmonotonically``)."""
    classes = list(registered_lattices().values())
    out: set[str] = set()
    stack = [body]
    while stack:
        n = stack.pop()
        stack.extend(N.children(n))
        if isinstance(n, (N.Map, N.FlatMap, N.Filter)):
            inp: Any = n.input
        elif isinstance(n, N.NotIn) and n.fn is not None:
            inp = n.left  # the right side is read non-monotonically already
        else:
            continue
        if reads_columns_nonmonotonically(n.fn, lats, classes):
            out.update(name for name, _ in sources(inp))
    return frozenset(out)


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


def _shipped(
    fns: list[Any], lat_reads: dict[str, bool], lat_classes: dict[str, type], cls: type
) -> frozenset[str]:
    """The non-monotone reads of a rule that every function reading them only ships whole
    (``Rule.shipped_reads``; see ``_reads.shipped_reads``)."""
    out = set()
    for name, nm in lat_reads.items():
        if not nm:
            continue
        users = [f for f in fns if name in function_reads(f, lat_classes, cls)]
        if users and all(name in shipped_reads(f, lat_classes) for f in users):
            out.add(name)
    return frozenset(out)
