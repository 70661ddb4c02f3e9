"""Handles: what ``self.<name>`` is inside a ``@bloom`` block, and where rules are recorded.

A handle is not a value: ``self.path <= body`` records a rule (and returns it), it does not
compare anything. Rules are recorded into the block being run (see :class:`Recorder`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import attrs

from blooml.bloom._exprs import ColExpr, ColumnRef, LatExpr, OpWrap, RelExpr, _no_bool, lift_rows
from blooml.errors import ProgramError
from blooml.ir import nodes as N
from blooml.ir.program import CollectionInfo, LatticeInfo
from blooml.lattices._base import Lattice

__all__ = ["CollectionHandle", "LatticeHandle", "Recorder", "RuleSpec"]

# Which operators each kind of head accepts.
_ALLOWED = {
    "table": {"<=", "<+", "<-", "<+-"},
    "scratch": {"<=", "<+"},
    "interface": {"<=", "<+"},
    "channel": {"<~"},
    "periodic": set(),
    "lattice": {"<=", "<+"},
}


@attrs.frozen
class RuleSpec:
    """A rule as written, before numbering: head, operator, body node, where."""

    head: str
    op: str
    body: N.Node
    file: str
    line: int

    def __bool__(self) -> bool:
        _no_bool(f"the rule `{self.head} {self.op} ...`")


_active = threading.local()  # .recorder: the Recorder of the block this thread is running


class Recorder:
    """Collects the rules of the ``@bloom`` block being run.

    The recorder in use is per thread (:meth:`current`), so two threads defining programs at
    once each record into their own block.
    """

    def __init__(self, block: str) -> None:
        self.block = block
        self.specs: list[RuleSpec] = []

    @staticmethod
    def current() -> Recorder | None:
        """The recorder of the ``@bloom`` block this thread is running, if any."""
        rec: Recorder | None = getattr(_active, "recorder", None)
        return rec

    @contextlib.contextmanager
    def recording(self) -> Iterator[Recorder]:
        """Make this the current thread's recorder for the ``with`` body (nesting restores)."""
        prev = getattr(_active, "recorder", None)
        _active.recorder = self
        try:
            yield self
        finally:
            _active.recorder = prev


def _where() -> tuple[str, int]:
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__", "").startswith("blooml.bloom"):
        f = f.f_back  # type: ignore[assignment]
    if f is None:  # pragma: no cover
        return "<unknown>", 0
    return f.f_code.co_filename, f.f_lineno


def _record(head: str, kind: str, op: str, body: Any, lattice_cls: type | None) -> RuleSpec:
    file, line = _where()
    rec = Recorder.current()
    where = f"{file.rsplit('/', 1)[-1]}:{line}"
    if rec is None:
        raise ProgramError(
            f"rule `{head} {op} ...` at {where} is outside a @bloom block: rules are declared "
            "inside methods decorated with @bloom"
        )
    ctx = f"rule at {where} (block {rec.block}): `{head} {op} ...`"
    if op not in _ALLOWED[kind]:
        allowed = ", ".join(sorted(_ALLOWED[kind])) or "no rules (it is filled by the runtime)"
        what = "lattice variable" if kind == "lattice" else kind
        raise ProgramError(f"{ctx}: a {what} accepts {allowed}, not {op}")
    node = _body(body, ctx, lattice_cls)
    spec = RuleSpec(head, op, node, file, line)
    rec.specs.append(spec)
    return spec


def _body(body: Any, ctx: str, lattice_cls: type | None) -> N.Node:
    if isinstance(body, (RelExpr, LatExpr)):
        node = body._node
    elif isinstance(body, OpWrap):
        raise ProgramError(f"{ctx}: malformed operator {body!r}")
    elif isinstance(body, Lattice):
        if lattice_cls is None:
            raise ProgramError(
                f"{ctx}: a lattice value on the right of a collection; put it in a "
                "row: [(..., value)]"
            )
        node = N.LatConst(body)
    elif isinstance(body, (list, tuple, set, frozenset)):
        node = lift_rows(body, ctx)._node
    elif isinstance(body, ColExpr):
        raise ProgramError(
            f"{ctx}: a column expression {body!r} is not a right-hand side; use "
            "coll.project(...) (or coll.map(...)) to make rows of it"
        )
    else:
        raise ProgramError(
            f"{ctx}: the right-hand side must be a collection expression, a lattice expression "
            f"or a list of rows, got {body!r}"
        )
    if lattice_cls is None and isinstance(node, N.Lat):
        raise ProgramError(
            f"{ctx}: the right-hand side {node!r} is a lattice value but the head is a "
            "collection; use .to_collection(), .when_true(lambda: rows), or a literal row"
        )
    if (
        lattice_cls is not None
        and isinstance(node, N.LatConst)
        and type(node.value) is not lattice_cls
    ):
        raise ProgramError(
            f"{ctx}: cannot merge {node.value!r} into a "
            f"{getattr(lattice_cls, 'wrapper_name', lattice_cls.__name__)}"
        )
    return node


class _Head:
    """Mixin: ``<=`` and ``<`` (with ``+``/``-``/``~`` on the right) record rules."""

    __slots__ = ()
    _name: str
    _kind: str
    _lcls: type | None

    def __le__(self, body: Any) -> Any:
        return _record(self._name, self._kind, "<=", body, self._lcls)

    def __lt__(self, body: Any) -> Any:
        if not isinstance(body, OpWrap):
            raise ProgramError(
                f"`{self._name} < ...` is not a rule: the operators are <=, <+, <-, <~ and <+- "
                "(for literal rows with <+ <- <~ write rows([...]))"
            )
        return _record(self._name, self._kind, body.op, body.expr, self._lcls)

    def __bool__(self) -> bool:
        _no_bool(f"handle {self._name!r}")


class CollectionHandle(_Head, RelExpr):
    """``self.<collection>`` in a ``@bloom`` block: a right-hand side, a head, and the source
    of column references (``self.link.dst``)."""

    __slots__ = ("_info", "_kind", "_lcls", "_name")

    def __init__(self, info: CollectionInfo) -> None:
        super().__init__(N.Scan(info.name, info.columns))
        self._name = info.name
        self._info = info
        self._kind = info.kind
        self._lcls = None

    def __getattr__(self, col: str) -> ColumnRef:
        if col.startswith("_"):
            raise AttributeError(col)
        cols = self._info.columns
        if col not in cols:
            raise AttributeError(
                f"{self._info.kind} {self._name!r} has no column or method {col!r} "
                f"(columns: {list(cols)})"
            )
        return ColumnRef(self, col, cols.index(col))

    __le__ = _Head.__le__
    __lt__ = _Head.__lt__
    __bool__ = _Head.__bool__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return self._name


class LatticeHandle(_Head, LatExpr):
    """``self.<lattice variable>`` in a ``@bloom`` block."""

    __slots__ = ("_info", "_kind", "_lcls", "_name")

    def __init__(self, info: LatticeInfo) -> None:
        super().__init__(N.LatVar(info.name, info.cls), info.cls)
        self._name = info.name
        self._info = info
        self._kind = "lattice"
        self._lcls = info.cls

    __le__ = _Head.__le__
    __lt__ = _Head.__lt__
    __bool__ = _Head.__bool__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return self._name
