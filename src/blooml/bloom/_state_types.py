"""Static types of a program's state, for type checkers (mypy, pyright).

``table(...)``, ``scratch(...)``, ... return a :class:`~blooml.bloom._decl.CollectionDecl`; as a
class attribute of a ``Program`` it reads, on an instance and on ``self`` inside a ``@bloom``
block, as a :class:`CollectionState`: the running collection's view (``insert``, ``delete``,
iteration, ``len``, ``in``) and the rule-building handle (``map``, ``join``, column references,
``<=`` ...) in one type. A lattice declaration reads as ``blooml.lattices.LatticeState`` of its
class (``p.votes.value`` is an ``lset``). Rows are ``Any``: their columns are only known at run
time.

``RowFn`` is the type of the functions ``map``, ``filter`` and ``flat_map`` take: one argument
per joined collection, each ``Any`` (so that a lambda's parameters have a known type).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

__all__ = ["CollectionState", "RowFn"]

RowFn: TypeAlias = (
    Callable[[Any], Any]
    | Callable[[Any, Any], Any]
    | Callable[[Any, Any, Any], Any]
    | Callable[[Any, Any, Any, Any], Any]
    | Callable[[Any, Any, Any, Any, Any], Any]
)

if TYPE_CHECKING:
    from blooml.bloom._handles import CollectionHandle

    class CollectionState(CollectionHandle):
        """A declared collection, as type checkers see ``p.t`` and ``self.t``."""

        @property
        def name(self) -> str:
            """The collection's name."""
            ...

        @property
        def columns(self) -> tuple[str, ...]:
            """The column names, keys first."""
            ...

        def insert(self, rows: Iterable[Any]) -> None:
            """Queue ``rows`` for insertion: visible at the next tick."""

        def delete(self, rows: Iterable[Any]) -> None:
            """Queue ``rows`` for deletion at the start of the next tick."""

        def __iter__(self) -> Iterator[Any]: ...  # type: ignore[override]
        def __len__(self) -> int: ...
        def __contains__(self, row: object) -> bool: ...
else:
    CollectionState = Any
