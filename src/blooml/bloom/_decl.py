"""State declarations: ``table``, ``scratch``, ``channel``, ``periodic``, ``interface``.

Each returns a :class:`CollectionDecl`, a class attribute that the :class:`~blooml.Program`
machinery turns into a collection. A lattice value as a class attribute declares a lattice
variable (see :mod:`blooml.bloom.program`).
"""

from __future__ import annotations

import keyword
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from blooml.errors import DurableStateError, ProgramError
from blooml.ir.program import CollectionInfo

if TYPE_CHECKING:
    from blooml.bloom._state_types import CollectionState

__all__ = [
    "CollectionDecl",
    "DurableLattice",
    "channel",
    "durable",
    "interface",
    "periodic",
    "scratch",
    "table",
]


class CollectionDecl:
    """A collection declared as a class attribute; its name is the attribute's name."""

    __slots__ = ("direction", "durable", "keys", "kind", "period", "ttl", "values")

    def __init__(
        self,
        kind: str,
        keys: Sequence[str],
        values: Sequence[str] = (),
        *,
        ttl: float | None = None,
        period: float | None = None,
        direction: str | None = None,
        durable: bool = False,
    ) -> None:
        self.kind = kind
        self.durable = durable
        self.keys = _names(kind, "keys", keys)
        self.values = _names(kind, "values", values)
        dup = {c for c in (*self.keys, *self.values) if (*self.keys, *self.values).count(c) > 1}
        if dup:
            raise ProgramError(f"{kind}: column names must be distinct, repeated: {sorted(dup)}")
        self.ttl = ttl
        self.period = period
        self.direction = direction

    if TYPE_CHECKING:
        # As a class attribute of a Program: the running collection on an instance (and on
        # ``self`` in a @bloom block); the declaration itself on the class. (Type checkers.)
        @overload
        def __get__(self, inst: None, owner: Any, /) -> CollectionDecl: ...
        @overload
        def __get__(self, inst: object, owner: Any, /) -> CollectionState: ...
        def __get__(self, inst: object, owner: Any, /) -> Any: ...

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
            durable=self.durable,
        )

    def __repr__(self) -> str:
        extra = ", durable=True" if self.durable else ""
        return f"{self.kind}({list(self.keys)}, {list(self.values)}{extra})"


def _names(kind: str, what: str, cols: Any) -> tuple[str, ...]:
    if isinstance(cols, str) or not isinstance(cols, Sequence):
        raise ProgramError(f"{kind}: {what} must be a list of column names, got {cols!r}")
    for c in cols:
        if not isinstance(c, str) or not c:
            why = "must be non-empty strings"
        elif keyword.iskeyword(c.lstrip("@")):
            why = "must not be Python keywords (rows are named tuples: r.from cannot be written)"
        else:
            continue
        raise ProgramError(f"{kind}: {what} {why}, got {c!r}")
    return tuple(cols)


def table(
    keys: Sequence[str],
    values: Sequence[str] = (),
    *,
    ttl: float | None = None,
    durable: bool = False,
) -> CollectionDecl:
    """Declare a table: tuples persist across ticks (until deleted with ``<-``).

    Args:
        keys: key column names; ``values``: the other columns (a key determines them).
        ttl: soft state (seconds): a tuple vanishes ``ttl`` seconds (by the program's clock)
            after it was last derived; deriving an identical tuple refreshes it, a different
            tuple under the same key replaces it.
        durable: keep the table on disk, in the program's ``data_dir`` (``P(data_dir=...)``):
            every committed tick is written in one SQLite transaction, and a program started
            again on the same ``data_dir`` resumes with it (see docs/net.md, Durable state).
    """
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, numbers.Real) or not ttl > 0
    ):
        raise ProgramError(f"table: ttl must be a positive number of seconds, got {ttl!r}")
    if not isinstance(durable, bool):
        raise DurableStateError(None, f"table(durable=...) must be True or False, got {durable!r}")
    if durable and ttl is not None:
        raise DurableStateError(
            None,
            "a table cannot be both durable and soft state (ttl=): its lifetimes are measured "
            "on a clock that does not survive a restart",
        )
    return CollectionDecl("table", keys, values, ttl=ttl, durable=durable)


def scratch(keys: Sequence[str], values: Sequence[str] = ()) -> CollectionDecl:
    """Declare a scratch: its contents last one tick (emptied at the start of the next)."""
    return CollectionDecl("scratch", keys, values)


def channel(keys: Sequence[str], values: Sequence[str] = ()) -> CollectionDecl:
    """Declare a channel: a scratch whose ``<~`` tuples are delivered at a later tick to the
    address in the key column starting with ``@`` (the field is named without the ``@``)."""
    return CollectionDecl("channel", keys, values)


def periodic(seconds: float) -> CollectionDecl:
    """Declare a periodic: a tuple ``(ident, time)`` appears about every ``seconds`` seconds
    of the program's clock (at the first tick at or after each deadline)."""
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not seconds > 0:
        raise ProgramError(f"periodic: the period must be a positive number, got {seconds!r}")
    return CollectionDecl("periodic", ["ident"], ["time"], period=float(seconds))


def interface(
    keys: Sequence[str], values: Sequence[str] = (), input: bool = True
) -> CollectionDecl:
    """Declare an interface: a scratch that connects modules (``input=True``: written from
    outside or by another module; ``input=False``: an output read by others)."""
    return CollectionDecl("interface", keys, values, direction="input" if input else "output")


class DurableLattice:
    """A lattice variable declared with :func:`durable`: ``value`` is its initial value."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"durable({self.value!r})"


def durable(decl: Any) -> Any:
    """Declare durable state: ``count = durable(lmax(0))`` keeps a lattice variable on disk,
    ``durable(table([...]))`` is ``table([...], durable=True)``.

    The program's ``data_dir`` (``P(data_dir=...)``) holds every durable table and lattice
    variable, written after every committed tick in one SQLite transaction; a program started
    again on the same ``data_dir`` resumes from the last committed tick (docs/net.md).
    """
    from blooml.lattices._base import Lattice

    if isinstance(decl, DurableLattice):
        return decl
    if isinstance(decl, Lattice):
        return DurableLattice(decl)
    if isinstance(decl, CollectionDecl):
        if decl.kind != "table":
            raise DurableStateError(
                None,
                f"only tables and lattice variables can be durable, not a {decl.kind} ({decl!r}): "
                "its contents last one tick",
            )
        return table(decl.keys, decl.values, ttl=decl.ttl, durable=True)
    raise DurableStateError(
        None, f"durable() takes a table(...) or a lattice value such as lmax(0), got {decl!r}"
    )
