"""Registers: the last-writer-wins ``llww`` and the multi-value ``lmvreg``."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, monotone, morph
from blooml.lattices.crdts.clock import lvclock
from blooml.lattices.crdts.pair import ldompair
from blooml.lattices.ordered import lmax

__all__ = ["llww", "lmvreg"]

_NOARG: Any = object()


def _check_value(name: str, value: Any) -> None:
    if value is None:
        raise LatticeValueError(
            name, value, f"None is not a register value; {name}() is the empty register (⊥)"
        )
    if not isinstance(value, Hashable):
        raise LatticeValueError(
            name, value, f"register values must be hashable, not {type(value).__name__}"
        )
    try:
        hash(value)
    except TypeError as e:
        raise LatticeValueError(name, value, f"register values must be hashable ({e})") from None


class _Written(Lattice):
    """The value half of an ``llww``: any hashable value; equal stamps are settled by ``<``.

    Two different values only meet here when they were written with the same (timestamp, node)
    stamp. The larger one wins, so the merge is a max over a totally ordered set; two values that
    ``<`` cannot order either way are a stamp collision we refuse to settle arbitrarily (a choice
    by ``repr`` or ``hash`` could differ between processes and make replicas diverge).
    """

    __slots__ = ()

    def __init__(self, value: Any = None) -> None:
        super().__init__(value)

    def merge(self, other: _Written) -> _Written:
        """The larger of two values written with the same stamp (``_Written()`` is ⊥)."""
        x, y = self._v, other._v
        if y is None or x is y or x == y:
            return self
        if x is None:
            return other
        try:
            lt, gt = bool(x < y), bool(y < x)
        except TypeError:
            lt = gt = False
        if lt == gt:
            raise LatticeValueError(
                "llww",
                y,
                f"written with the same timestamp and node as {x!r}, and the two values cannot "
                "be ordered to break the tie; give every writer its own node id",
            )
        return other if lt else self


class llww(Lattice):
    """A last-writer-wins register: the value with the largest ``(ts, node)`` stamp wins.

    Built on :class:`~blooml.lattices.crdts.pair.ldompair`: the first component is
    ``lmax((ts, node))``, the second the written value. A write with a larger timestamp replaces
    the value; equal timestamps are decided by the writer's ``node`` id (a string: the larger
    one wins); a write repeated with the same ``(ts, node)`` stamp but a different value is
    decided by the larger value, and raises :class:`~blooml.errors.LatticeValueError` if the two
    values cannot be ordered with ``<`` (give every writer its own node id and this cannot
    happen). All timestamps written to one register must be mutually comparable (numbers, or
    all strings, or all tuples, ...).

    ``llww()`` is ⊥, the register nobody has written; it reveals ``None``.

    Args:
        value: any hashable value except ``None``.
        ts: the write's timestamp: any totally ordered value (usually a number: wall-clock or
            hybrid-logical-clock time).
        node: the writer's id, used to break timestamp ties.

    >>> a = llww().write("draft", ts=1, node="alice")
    >>> b = llww().write("final", ts=2, node="bob")
    >>> a.merge(b).reveal(), b.merge(a).reveal()
    ('final', 'final')

    Costs: merge, write and reads are O(1).
    """

    __slots__ = ()
    wrapper_name = "llww"

    _v: ldompair

    def __init__(self, value: Any = _NOARG, ts: Any = _NOARG, node: str = "") -> None:
        if value is _NOARG and ts is _NOARG:
            super().__init__(ldompair())
            return
        if value is _NOARG or ts is _NOARG:
            raise LatticeValueError(
                "llww",
                ts if value is _NOARG else value,
                "give both a value and a timestamp, llww(value, ts=...), or neither for ⊥",
            )
        _check_value("llww", value)
        if ts is None:  # lmax(None) is ⊥, but a write needs a time
            raise LatticeValueError("llww", ts, "bad timestamp: a write needs one, not None")
        try:
            lmax(ts)
        except LatticeValueError as e:
            raise LatticeValueError("llww", ts, f"bad timestamp: {e.reason}") from None
        if not isinstance(node, str):
            raise LatticeValueError("llww", node, "the node id must be a str")
        super().__init__(ldompair(lmax((ts, node)), _Written(value)))

    @classmethod
    def from_item(cls, item: Any) -> llww:
        """Convert a row for folding: an ``llww``, ``(value, ts)`` or ``(value, ts, node)``."""
        if type(item) is cls:
            return item
        if isinstance(item, tuple) and len(item) in (2, 3):
            return cls(*item)
        raise LatticeValueError(
            "llww", item, "a folded row must be (value, ts) or (value, ts, node)"
        )

    def merge(self, other: llww) -> llww:
        """Keep the write with the larger ``(ts, node)`` stamp (see the class docstring)."""
        a, b = self._v, other._v
        try:
            m = a.merge(b)
        except LatticeValueError as e:
            if e.lattice == "llww":  # a stamp collision, explained by _Written
                raise LatticeValueError("llww", e.value, e.reason) from None
            raise LatticeValueError(
                "llww",
                other.timestamp().reveal(),
                f"the timestamp of {other!r} cannot be compared with that of {self!r}; every "
                "write to one register needs mutually comparable timestamps",
            ) from None
        if m is a:
            return self
        if m is b:
            return other
        return llww._make(m)  # pragma: no cover - a dominating pair merge returns a side

    @morph
    def write(self, value: Hashable, ts: Any, node: str = "") -> llww:
        """Return this register with the write ``(value, ts, node)`` merged in.

        A morphism (``x ↦ x ⊔ llww(value, ts, node)``). Writes older than the current one are
        ignored, as merge dictates.
        """
        return self.merge(llww(value, ts, node))

    @morph
    def timestamp(self) -> lmax:
        """The timestamp of the winning write as ``lmax`` (``lmax()`` for ⊥); a morphism."""
        stamp = self._v.reveal()
        return lmax() if stamp is None else lmax(stamp[0].reveal()[0])

    def node(self) -> str | None:
        """The node id of the winning write (``None`` for ⊥); non-monotone."""
        stamp = self._v.reveal()
        return None if stamp is None else stamp[0].reveal()[1]

    def reveal(self) -> Any:
        """The winning value (``None`` for ⊥); non-monotone."""
        pair = self._v.reveal()
        return None if pair is None else pair[1].reveal()

    def __repr__(self) -> str:
        pair = self._v.reveal()
        if pair is None:
            return "llww()"
        ts, node = pair[0].reveal()
        extra = f", node={node!r}" if node else ""
        return f"llww({pair[1].reveal()!r}, ts={ts!r}{extra})"


Entry = tuple[lvclock, Hashable]


def _maxima(entries: Iterable[Entry]) -> frozenset[Entry]:
    """The entries whose clock no other entry's clock strictly dominates."""
    es = list(set(entries))
    return frozenset(e for e in es if not any(e[0] < f[0] for f in es))


class lmvreg(Lattice):
    """A multi-value register: keeps every write not causally overwritten by another.

    Each write carries a vector clock (:class:`~blooml.lattices.crdts.clock.lvclock`) that
    dominates every clock the writer had seen. Merge keeps the *maximal* writes: an entry whose
    clock is strictly before another entry's clock is dropped; concurrent writes are all kept,
    and the application resolves them (typically by writing a merged value, whose clock then
    dominates them all). Two entries with the same clock and different values are both kept.

    The state is the antichain of maximal ``(clock, value)`` entries; merge is "maxima of the
    union", the join of the lattice of down-sets, so it is associative, commutative and
    idempotent.

    Args:
        entries: an iterable of ``(lvclock, value)`` pairs; dominated entries are dropped.

    >>> a = lmvreg().write("tea", node="a")
    >>> b = lmvreg().write("coffee", node="b")
    >>> both = a.merge(b)
    >>> sorted(both.values())
    ['coffee', 'tea']
    >>> both.write("both", node="a").values()
    frozenset({'both'})

    Costs: merge O((n + m)² · c) for n and m entries of clocks with c nodes (registers hold a
    handful of concurrent writes); ``write`` O(n · c).
    """

    __slots__ = ()
    wrapper_name = "lmvreg"

    _v: frozenset[Entry]

    def __init__(self, entries: Iterable[Entry] | None = None) -> None:
        if entries is None:
            super().__init__(frozenset())
            return
        if isinstance(entries, (str, bytes)) or not isinstance(entries, Iterable):
            raise LatticeValueError(
                "lmvreg", entries, "expected an iterable of (lvclock, value) entries"
            )
        checked: list[Entry] = []
        for e in entries:
            if not (isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], lvclock)):
                raise LatticeValueError("lmvreg", e, "each entry must be a pair (lvclock, value)")
            _check_value("lmvreg", e[1])
            checked.append(e)
        super().__init__(_maxima(checked))

    @classmethod
    def from_item(cls, item: Any) -> lmvreg:
        """Fold rows: an ``lmvreg`` or one ``(lvclock, value)`` entry."""
        if type(item) is cls:
            return item
        return cls([item])

    def merge(self, other: lmvreg) -> lmvreg:
        """The maximal entries of both registers together."""
        a, b = self._v, other._v
        if not b or a == b:
            return self
        if not a:
            return other
        m = _maxima(a | b)
        if m == a:
            return self
        if m == b:
            return other
        return lmvreg._make(m)

    @monotone
    def write(self, value: Hashable, node: str) -> lmvreg:
        """Return the register after ``node`` writes ``value``, overwriting what it has seen.

        The write's clock is the join of every clock here, incremented at ``node``, so it
        dominates them all and the register holds just ``value`` (until merged with concurrent
        writes). Monotone, not a morphism: writing after a merge overwrites both sides' values,
        writing on each side leaves two concurrent entries.
        """
        _check_value("lmvreg", value)
        try:
            clock = self.clock().increment(node)
        except LatticeValueError as e:
            raise LatticeValueError("lmvreg", e.value, e.reason) from None
        return lmvreg._make(frozenset({(clock, value)}))

    @morph
    def clock(self) -> lvclock:
        """The join of the entries' clocks (what this register has seen); a morphism."""
        out = lvclock()
        for c, _ in self._v:
            out = out.merge(c)
        return out

    def values(self) -> frozenset[Hashable]:
        """The concurrent values (one unless writes conflict; none for ⊥); non-monotone."""
        return frozenset(v for _, v in self._v)

    def reveal(self) -> frozenset[Hashable]:
        """The same as :meth:`values`; non-monotone."""
        return self.values()

    def __repr__(self) -> str:
        if not self._v:
            return "lmvreg()"
        body = sorted(f"({c!r}, {v!r})" for c, v in self._v)
        return f"lmvreg([{', '.join(body)}])"
