"""What ``p.<name>`` is on a program instance: a collection view or a lattice view."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from blooml.errors import ProgramError
from blooml.lattices._base import Lattice

__all__ = ["CollectionView", "LatticeView"]

T = TypeVar("T")


def _without_gc(rt: Any, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with the cyclic collector paused (``Runtime.pause_gc``), as during a
    tick: building many rows at once would otherwise trigger collection passes."""
    if not (rt.pause_gc and gc.isenabled()):
        return fn(*args)
    gc.disable()
    try:
        return fn(*args)
    finally:
        gc.enable()


class CollectionView:
    """A collection of a running program.

    Iterating gives the rows (named tuples) as they stand at the end of the last tick;
    ``insert``/``delete`` queue external input for the next tick.
    """

    __slots__ = ("_name", "_rt")

    def __init__(self, rt: Any, name: str) -> None:
        self._rt = rt
        self._name = name

    @property
    def name(self) -> str:
        """The collection's name."""
        return self._name

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, keys first."""
        return tuple(self._rt.rels[self._name].columns)

    def _rows(self, rows: Iterable[Any], what: str) -> list[Any]:
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise ProgramError(
                f"{self._name}.{what}(rows): expected an iterable of tuples, got {rows!r}"
            )
        rel = self._rt.rels[self._name]
        # as during a tick: converting many rows would trigger collection passes
        return _without_gc(self._rt, rel.check_rows, list(rows), f"{self._name}.{what}")

    def insert(self, rows: Iterable[Any]) -> None:
        """Queue ``rows`` for insertion: visible at the next tick.

        Raises:
            ProgramError: a row has the wrong number of columns, or a lattice in a key column
                (nothing is queued then).
        """
        out = self._rows(rows, "insert")
        self._rt.pending.add("inserts", self._name, out)

    def delete(self, rows: Iterable[Any]) -> None:
        """Queue ``rows`` for deletion at the start of the next tick."""
        if not self._rt.rels[self._name].persistent:
            raise ProgramError(f"{self._name}.delete: only tables hold rows across ticks")
        out = self._rows(rows, "delete")
        self._rt.pending.add("deletes", self._name, out)

    def __iter__(self) -> Iterator[Any]:
        if self._rt.firing is not None:
            self._rt.refuse_collection_read(self._name)
        rel = self._rt.rels[self._name]
        if rel.row_type is rel.named:
            return iter(rel.named_rows())  # a copy of the stored rows
        return iter(_without_gc(self._rt, rel.named_rows))  # naming plain rows allocates

    def __len__(self) -> int:
        if self._rt.firing is not None:
            self._rt.refuse_collection_read(self._name)
        return len(self._rt.rels[self._name].store)

    def __contains__(self, row: object) -> bool:
        if self._rt.firing is not None:
            self._rt.refuse_collection_read(self._name)
        rel = self._rt.rels[self._name]
        return isinstance(row, tuple) and len(row) == rel.arity and row in rel

    def __repr__(self) -> str:
        rel = self._rt.rels[self._name]
        return f"<{rel.info.kind} {self._name}: {len(rel.store)} rows>"


class LatticeView:
    """A lattice variable of a running program: ``.value`` and ``.insert(value)``."""

    __slots__ = ("_name", "_rt")

    def __init__(self, rt: Any, name: str) -> None:
        self._rt = rt
        self._name = name

    @property
    def value(self) -> Any:
        """The current lattice value (inside a rule function: verified like ``self.<name>``,
        see ``Runtime.read_attr``)."""
        return self._rt.lat_value(self._name)

    def insert(self, value: Any) -> None:
        """Queue ``value`` to be merged in at the next tick.

        Raises:
            ProgramError: ``value`` is not a value of this variable's lattice class.
        """
        cls = self._rt.lats[self._name].cls
        if type(value) is not cls:
            wn = getattr(cls, "wrapper_name", "") or cls.__qualname__
            hint = "" if isinstance(value, Lattice) else f" (wrap it: {wn}(...))"
            raise ProgramError(f"{self._name}.insert: expected a {wn} value, got {value!r}{hint}")
        self._rt.pending.add("lats", self._name, [value])

    def __bool__(self) -> bool:
        raise TypeError(
            f"lattice variable {self._name!r}: test its value, e.g. bool(p.{self._name}.value)"
        )

    def __repr__(self) -> str:
        return f"<lattice {self._name} = {self.value!r}>"
