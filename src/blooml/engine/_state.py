"""Run-time state besides relations: lattice variables and pending (next-tick) inputs."""

from __future__ import annotations

from typing import Any

from blooml.engine.relation import CheckedRows
from blooml.errors import ProgramError

__all__ = ["LatVarState", "Pending", "PendingInput"]


class LatVarState:
    """One lattice variable: its value and the increments merged into it this tick.

    ``incs[lo:hi]`` is the current delta (its merge is what a morphism is applied to);
    ``changes`` counts changes over the program's life (for "did it change since" checks);
    ``start`` is the value at the start of the tick (``value`` is ``start`` merged with
    ``incs``).
    """

    __slots__ = ("changes", "cls", "exact", "hi", "incs", "lo", "name", "start", "value")

    def __init__(self, name: str, cls: Any, initial: Any) -> None:
        self.name = name
        self.cls = cls
        # ``cls.merge_is_exact``, as the class itself declares it (never inherited)
        self.exact = bool(vars(cls).get("merge_is_exact", False))
        self.value = initial
        self.start = initial
        self.incs: list[Any] = []
        self.lo = 0
        self.hi = 0
        self.changes = 0

    def merge_in(self, v: Any, where: str) -> bool:
        """Merge ``v`` into the value; return whether it grew."""
        if type(v) is not self.cls:
            wn = getattr(self.cls, "wrapper_name", "") or self.cls.__qualname__
            raise ProgramError(
                f"{where}: cannot merge {v!r} ({type(v).__qualname__}) into lattice variable "
                f"{self.name!r} of type {wn}"
            )
        cur = self.value
        new = cur.merge(v)
        # Did it grow? Comparing new == cur costs O(size) for a large collection lattice;
        # asking whether the (small) increment was already below costs O(increment); a
        # class whose merge returns ``cur`` itself whenever ``v <= cur`` (``merge_is_exact``)
        # grew when it returned anything else.
        if new is cur or (not self.exact and v <= cur):
            return False
        self.value = new
        self.incs.append(v)
        self.changes += 1
        return True

    def delta_value(self) -> Any:
        """The merge of the current delta's increments, or ``None`` when there are none."""
        lo, hi = self.lo, self.hi
        if lo >= hi:
            return None
        incs = self.incs
        d = incs[lo]
        for i in range(lo + 1, hi):
            d = d.merge(incs[i])
        return d

    def begin(self) -> Any:
        """Start a tick; return what ``rollback`` needs."""
        self.incs = []
        self.lo = self.hi = 0
        self.start = self.value
        return (self.value, self.changes)

    def rollback(self, token: Any) -> None:
        """Restore the value as it was at ``begin``."""
        self.value, self.changes = token
        self.incs = []
        self.lo = self.hi = 0


class Pending:
    """Facts for the next tick: ``<+`` inserts, ``<-`` deletes, ``<+-`` replacements, lattice
    merges, external input and arrived channel messages."""

    __slots__ = ("chan_keys", "deletes", "inserts", "lats", "replaces")

    def __init__(self) -> None:
        #: channel -> key -> row of the messages queued (a message conflicting with them is
        #: refused on arrival: see ``Runtime.receive_batch``)
        self.chan_keys: dict[str, dict[Any, Any]] = {}
        self.inserts: dict[str, list[Any]] = {}
        self.deletes: dict[str, list[Any]] = {}
        self.replaces: dict[str, list[Any]] = {}
        self.lats: dict[str, list[Any]] = {}

    def add(self, kind: str, name: str, items: list[Any]) -> None:
        """Queue ``items`` under ``kind`` (``inserts``, ``deletes``, ``replaces``, ``lats``)."""
        d: dict[str, list[Any]] = getattr(self, kind)
        lst = d.get(name)
        if lst is None:
            d[name] = CheckedRows(items) if type(items) is CheckedRows else list(items)
        else:
            if type(lst) is CheckedRows and type(items) is not CheckedRows:
                lst = d[name] = list(lst)  # mixed with unchecked rows: check them all
            lst.extend(items)

    def __bool__(self) -> bool:
        return bool(self.inserts or self.deletes or self.replaces or self.lats)


class PendingInput(dict[str, list[Any]]):
    """What ``Program.discard_pending()`` dropped: ``{collection or lattice variable name:
    [rows or lattice values]}`` for queued insertions (external input, ``<+`` facts, arrived
    messages, ``<+-`` replacements) and lattice merges; queued deletions (``delete(...)``,
    ``<-``) are in ``deletes``, ``{collection name: [rows]}``."""

    def __init__(self) -> None:
        super().__init__()
        self.deletes: dict[str, list[Any]] = {}

    def __repr__(self) -> str:
        base = dict.__repr__(self)
        return f"PendingInput({base}, deletes={self.deletes!r})" if self.deletes else base
