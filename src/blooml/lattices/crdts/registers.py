"""Registers: the last-writer-wins ``llww`` and the multi-value ``lmvreg``."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, morph
from blooml.lattices.crdts.pair import ldompair
from blooml.lattices.ordered import lmax

__all__ = ["llww"]

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
                raise LatticeValueError("llww", other, e.reason) from None
            raise LatticeValueError(
                "llww",
                other,
                f"its timestamp cannot be compared with that of {self!r}; every write to one "
                "register needs mutually comparable timestamps",
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
