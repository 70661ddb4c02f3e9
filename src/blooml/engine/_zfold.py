"""Incremental evaluators of whole-input results: a lattice variable's rows, and ``reduce``
declared order-free (see ``blooml.engine._zops`` for the protocol: ``init``/``step``).

* ``v.to_collection()`` over a lattice variable ``v`` (:class:`ZLatRows`). A lattice only grows
  within a tick, so the view changes by the growth: the elements of this tick's increments
  that the value held at the last step lacked (``lset``), the keys they touched whose value
  changed (``lmap``: the old ``(key, value)`` row out, the new one in). Any other change (the
  value was reset, restored or rolled back, or a lattice of another kind) is diffed in full.
* ``reduce(init, fn, combine=c)`` (:class:`ZReduce`): the declaration says the fold does not
  depend on the order of the rows and that partial results combine (``combine`` associative
  and commutative, ``init`` its identity, ``combine(m, fn(init, r)) == fn(m, r)``). The rows
  sit in the leaves of a balanced tree of partial results, so a changed row costs
  ``O(log n)`` calls of ``combine``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blooml.engine._agg_eval import as_result_rows
from blooml.engine._lat_eval import as_rows
from blooml.engine._zops import Delta, ZOp, _input_delta, _input_rows, consolidate
from blooml.lattices._keyed import MISSING as _ABSENT
from blooml.lattices.map import lmap
from blooml.lattices.sets import lset

__all__ = ["ZLatRows", "ZReduce"]


def _diff(old: list[Any], new: list[Any]) -> Delta:
    """The signed change from the rows ``old`` to the rows ``new``."""
    delta = [(r, -1) for r in old]
    delta.extend((r, 1) for r in new)
    return list(consolidate(delta).items())


def _row(x: Any) -> Any:
    return x if isinstance(x, tuple) else (x,)


def _growth(old: Any, new: Any, incs: list[Any], fn: Any) -> Delta | None:
    """The rows ``new`` (``old`` merged with ``incs``) has beyond ``old``'s, for the lattices
    whose rows follow their elements or keys; ``None`` for any other lattice. ``fn``: the
    function of ``lmap.to_collection(fn)`` (``None``: the ``(key, value)`` pairs)."""
    cls = type(new)
    if type(old) is not cls:
        return None
    if (
        fn is None
        and isinstance(new, lset)
        and cls.reveal is lset.reveal
        and cls.__iter__ is lset.__iter__
    ):
        seen: set[Any] = set()
        out: Delta = []
        for inc in incs:
            for x in inc:
                if x not in seen and x not in old:
                    seen.add(x)
                    out.append((_row(x), 1))
        return out
    if (
        isinstance(new, lmap)
        and cls.reveal is lmap.reveal
        and cls._get is lmap._get
        and cls.to_collection is lmap.to_collection
    ):
        keys: dict[Any, None] = {}
        for inc in incs:
            keys.update(dict.fromkeys(inc))
        out = []
        for k in keys:
            a, b = old._get(k), new._get(k)
            if a is b or (a is not _ABSENT and a == b):
                continue
            if fn is None:
                if a is not _ABSENT:
                    out.append(((k, a), -1))
                out.append(((k, b), 1))
                continue
            if a is not _ABSENT:
                x = fn(k, a)
                if x is not None:
                    out.append((_row(x), -1))
            x = fn(k, b)
            if x is not None:
                out.append((_row(x), 1))
        return out
    return None


class ZLatRows(ZOp):
    """The rows of a lattice variable's value (``v.to_collection()``, ``lmap``'s
    ``to_collection(fn)`` when ``method``), changed by its growth."""

    __slots__ = ("args", "journal", "method", "seen", "var")

    def __init__(self, var: Any, method: bool = False, args: tuple[Any, ...] = ()) -> None:
        self.var = var
        self.method = method
        self.args = args
        self.seen: Any = None
        #: the values this tick replaced (the first is the last committed tick's)
        self.journal: list[Any] = []

    def _rows(self, value: Any) -> list[Any]:
        return as_rows(value.to_collection(*self.args) if self.method else value)

    def init(self) -> list[Any]:
        self.journal.append(self.seen)
        self.seen = self.var.value
        return self._rows(self.seen)

    def step(self) -> Delta:
        var = self.var
        new, old = var.value, self.seen
        if new is old:
            return []
        self.journal.append(old)
        self.seen = new
        if var.start is old and var.incs:
            d = _growth(old, new, var.incs, self.args[0] if self.args else None)
            if d is not None:
                return list(consolidate(d).items())
        return _diff(self._rows(old), self._rows(new))

    def rollback(self) -> None:
        """Put back the value of the last committed tick."""
        if self.journal:
            self.seen = self.journal[0]
        self.journal = []

    def children(self) -> list[ZOp]:
        return []

    def kind(self) -> str:
        return "latrows"


class ZReduce(ZOp):
    """``reduce(init, fn, combine=...)``: a segment tree of partial results over the distinct
    input rows (a leaf: ``fn`` folded over one row's copies; a node: ``combine`` of its two
    children; an empty leaf: ``init``). Its root is the fold of every row."""

    __slots__ = (
        "cap",
        "combine",
        "counts",
        "fn",
        "free",
        "init_",
        "inp",
        "journal",
        "out",
        "slots",
        "tree",
    )

    def __init__(
        self, inp: ZOp, init: Any, fn: Callable[[Any, Any], Any], combine: Callable[[Any, Any], Any]
    ) -> None:
        self.inp = inp
        self.init_ = init
        self.fn = fn
        self.combine = combine
        self.cap = 1
        self.tree: list[Any] = [init, init]
        self.slots: dict[Any, int] = {}  # row -> its leaf
        self.counts: dict[Any, int] = {}
        self.free: list[int] = [0]
        self.out: list[Any] = []
        #: this tick's changes, undone in reverse by ``rollback``
        self.journal: list[tuple[Any, ...]] = []

    def _leaf(self, r: Any, c: int) -> Any:
        m = self.init_
        fn = self.fn
        for _ in range(c):
            m = fn(m, r)
        return m

    def _build(self, rows: dict[Any, int]) -> None:
        cap = 1
        while cap < len(rows):
            cap *= 2
        init, combine = self.init_, self.combine
        tree = [init] * (2 * cap)
        slots: dict[Any, int] = {}
        for i, (r, c) in enumerate(rows.items()):
            slots[r] = i
            tree[cap + i] = self._leaf(r, c)
        for j in range(cap - 1, 0, -1):
            tree[j] = combine(tree[2 * j], tree[2 * j + 1])
        self.cap, self.tree, self.slots, self.counts = cap, tree, slots, dict(rows)
        self.free = list(range(cap - 1, len(rows) - 1, -1))

    def _set(self, r: Any, c: int) -> None:
        """Row ``r`` now has ``c`` copies (0: none)."""
        i = self.slots.get(r)
        if i is None:
            if c <= 0:
                return
            if not self.free:
                counts = dict(self.counts)
                counts[r] = c
                self._build(counts)  # doubles the capacity: amortized O(1) per row
                return
            i = self.free.pop()
            self.slots[r] = i
        tree = self.tree
        j = self.cap + i
        if c > 0:
            tree[j] = self._leaf(r, c)
            self.counts[r] = c
        else:
            tree[j] = self.init_
            del self.counts[r]
            del self.slots[r]
            self.free.append(i)
        combine = self.combine
        j //= 2
        while j:
            tree[j] = combine(tree[2 * j], tree[2 * j + 1])
            j //= 2

    def init(self) -> list[Any]:
        self.journal.append(("init", self.cap, self.tree, self.slots, self.counts, self.free))
        self.journal.append(("out", self.out))
        rows: dict[Any, int] = {}
        for r in _input_rows(self.inp):
            rows[r] = rows.get(r, 0) + 1
        self._build(rows)
        self.out = as_result_rows(self.tree[1])
        return list(self.out)

    def step(self) -> Delta:
        d = _input_delta(self.inp)
        if not d:
            return []
        journal = self.journal
        counts = self.counts
        for r, w in consolidate(d).items():
            c0 = counts.get(r, 0)
            c = c0 + w
            if c < 0:
                c = 0  # a retraction of a row never derived: the maintained head reports it
            journal.append(("set", r, c0))
            self._set(r, c)
        new = as_result_rows(self.tree[1])
        old = self.out
        journal.append(("out", old))
        self.out = new
        return _diff(old, new) if old != new else []

    def rollback(self) -> None:
        """Undo this tick's changes (see ``journal``)."""
        for e in reversed(self.journal):
            if e[0] == "set":
                self._set(e[1], e[2])
            elif e[0] == "out":
                self.out = e[1]
            else:
                self.cap, self.tree, self.slots, self.counts, self.free = e[1:]
        self.journal = []

    def memory(self) -> tuple[int, int]:
        e, b = self.inp.memory()
        n = len(self.tree) + len(self.slots)
        return (n + e, n * 60 + b)
