"""State declarations: ``table``, ``scratch``, ``channel``, ``periodic``, ``interface``.

Each returns a :class:`CollectionDecl`, a class attribute that the :class:`~blooml.Program`
machinery turns into a collection. A lattice value as a class attribute declares a lattice
variable (see :mod:`blooml.bloom.program`).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from blooml.errors import ProgramError
from blooml.ir.program import CollectionInfo

__all__ = ["CollectionDecl", "channel", "interface", "periodic", "scratch", "table"]


class CollectionDecl:
    """A collection declared as a class attribute; its name is the attribute's name."""

    __slots__ = ("direction", "keys", "kind", "period", "ttl", "values")

    def __init__(
        self,
        kind: str,
        keys: Sequence[str],
        values: Sequence[str] = (),
        *,
        ttl: float | None = None,
        period: float | None = None,
        direction: str | None = None,
    ) -> None:
        self.kind = kind
        self.keys = _names(kind, "keys", keys)
        self.values = _names(kind, "values", values)
        dup = {c for c in (*self.keys, *self.values) if (*self.keys, *self.values).count(c) > 1}
        if dup:
            raise ProgramError(f"{kind}: column names must be distinct, repeated: {sorted(dup)}")
        self.ttl = ttl
        self.period = period
        self.direction = direction

    def info(self, name: str) -> CollectionInfo:
        """The IR description of this declaration under attribute ``name``."""
        loc = None
        keys = self.keys
        if self.kind == "channel":
            at = [i for i, k in enumerate(keys) if k.startswith("@")]
            if len(at) != 1:
                raise ProgramError(
                    f"channel {name!r}: exactly one key column must start with '@' (the "
                    f"location), got keys {list(keys)}"
                )
            loc = at[0]
            keys = tuple(k.lstrip("@") for k in keys)
        else:
            bad = [k for k in (*keys, *self.values) if k.startswith("@")]
            if bad:
                raise ProgramError(
                    f"{self.kind} {name!r}: only channels have a location column ('@'), got {bad}"
                )
        from blooml.bloom._exprs import RelExpr

        for col in (*keys, *self.values):
            if hasattr(RelExpr, col):
                raise ProgramError(
                    f"{self.kind} {name!r}: column {col!r} has the name of a collection method "
                    f"(`{name}.{col}` must stay the method); rename the column"
                )
            if not col.isidentifier() or col.startswith("_"):
                raise ProgramError(
                    f"{self.kind} {name!r}: column {col!r} must be an identifier not starting "
                    "with '_' (tuples are named tuples)"
                )
        return CollectionInfo(
            name=name,
            kind=self.kind,
            keys=keys,
            values=self.values,
            loc=loc,
            ttl=self.ttl,
            period=self.period,
            direction=self.direction,
        )

    def __repr__(self) -> str:
        return f"{self.kind}({list(self.keys)}, {list(self.values)})"


def _names(kind: str, what: str, cols: Any) -> tuple[str, ...]:
    if isinstance(cols, str) or not isinstance(cols, Sequence):
        raise ProgramError(f"{kind}: {what} must be a list of column names, got {cols!r}")
    for c in cols:
        if not isinstance(c, str) or not c:
            raise ProgramError(f"{kind}: {what} must be non-empty strings, got {c!r}")
    return tuple(cols)


def table(keys: Sequence[str], values: Sequence[str] = (), *, ttl: float | None = None) -> Any:
    """Declare a table: tuples persist across ticks (until deleted with ``<-``).

    Args:
        keys: key column names; ``values``: the other columns (a key determines them).
        ttl: soft state (seconds): a tuple vanishes ``ttl`` seconds (by the program's clock)
            after it was last derived; deriving an identical tuple refreshes it, a different
            tuple under the same key replaces it.
    """
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, numbers.Real) or not ttl > 0
    ):
        raise ProgramError(f"table: ttl must be a positive number of seconds, got {ttl!r}")
    return CollectionDecl("table", keys, values, ttl=ttl)


def scratch(keys: Sequence[str], values: Sequence[str] = ()) -> Any:
    """Declare a scratch: its contents last one tick (emptied at the start of the next)."""
    return CollectionDecl("scratch", keys, values)


def channel(keys: Sequence[str], values: Sequence[str] = ()) -> Any:
    """Declare a channel: a scratch whose ``<~`` tuples are delivered at a later tick to the
    address in the key column starting with ``@`` (the field is named without the ``@``)."""
    return CollectionDecl("channel", keys, values)


def periodic(seconds: float) -> Any:
    """Declare a periodic: a tuple ``(ident, time)`` appears about every ``seconds`` seconds
    of the program's clock (at the first tick at or after each deadline)."""
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not seconds > 0:
        raise ProgramError(f"periodic: the period must be a positive number, got {seconds!r}")
    return CollectionDecl("periodic", ["ident"], ["time"], period=float(seconds))


def interface(keys: Sequence[str], values: Sequence[str] = (), input: bool = True) -> Any:
    """Declare an interface: a scratch that connects modules (``input=True``: written from
    outside or by another module; ``input=False``: an output read by others)."""
    return CollectionDecl("interface", keys, values, direction="input" if input else "output")
