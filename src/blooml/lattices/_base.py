"""The :class:`Lattice` base class, the ``@morph``/``@monotone`` marks and the builder protocol.

A lattice class is an immutable value class: its instances wrap one plain Python value (the
*revealed* value), ``merge`` computes the least upper bound, and ``Cls()`` is ⊥. Everything else
(the partial order, ``|``, equality, hashing, pickling, folding) is derived here once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar, overload

from blooml.errors import LatticeTypeError, LatticeValueError

__all__ = [
    "Lattice",
    "LatticeBuilder",
    "LatticeState",
    "kind_of",
    "lattice_class",
    "monotone",
    "morph",
    "registered_lattices",
]

L = TypeVar("L", bound="Lattice")
F = TypeVar("F", bound=Callable[..., Any])
Kind = Literal["morph", "monotone", "nonmonotone"]

_KIND_ATTR = "_blooml_kind"
_REGISTRY: dict[str, type[Lattice]] = {}


def morph(fn: F) -> F:
    """Mark a lattice method as a morphism: ``f(a ⊔ b) == f(a) ⊔ f(b)``.

    A morphism may be evaluated on deltas (semi-naive evaluation); every morphism is also
    monotone. ``blooml.testing.check_laws`` verifies the claim.
    """
    setattr(_unwrap(fn), _KIND_ATTR, "morph")
    return fn


def monotone(fn: F) -> F:
    """Mark a lattice method as monotone: ``a <= b`` implies ``f(a) <= f(b)``.

    A monotone function is re-evaluated when its input grows. ``blooml.testing.check_laws``
    verifies the claim.
    """
    setattr(_unwrap(fn), _KIND_ATTR, "monotone")
    return fn


def _unwrap(fn: Any) -> Any:
    return fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn


class _ProgramLike(Protocol):
    """What a Bloom^L program instance offers (for the static type of its lattice state)."""

    def discard_pending(self) -> dict[str, list[Any]]: ...


class LatticeState(Protocol[L]):
    """The static type of a lattice variable of a program: what ``p.votes`` is, for
    ``votes = lset()`` declared in a ``Program`` subclass (type checkers only; the runtime
    object is the engine's lattice view, or a rule handle inside a ``@bloom`` block).

    ``value`` is the current value, of the declared class; ``insert`` takes a value of that
    class. Inside ``@bloom`` blocks the lattice's methods build rule expressions, typed
    ``Any``, and ``<=``, ``<+`` ... record rules.
    """

    @property
    def value(self) -> L:
        """The current value."""
        ...

    def insert(self, value: L) -> None:
        """Queue ``value`` to be merged in at the next tick."""
        ...

    def __getattr__(self, name: str) -> Any: ...
    def __le__(self, other: Any) -> Any: ...
    def __lt__(self, other: Any) -> Any: ...
    def __ge__(self, other: Any) -> Any: ...
    def __gt__(self, other: Any) -> Any: ...
    def __pos__(self) -> Any: ...
    def __neg__(self) -> Any: ...
    def __invert__(self) -> Any: ...
    def __add__(self, other: Any) -> Any: ...
    def __radd__(self, other: Any) -> Any: ...
    def __sub__(self, other: Any) -> Any: ...
    def __mul__(self, other: Any) -> Any: ...


class Lattice:
    """Abstract base of immutable lattice values (bounded join semilattices).

    A subclass defines ``merge(self, other)`` (the least upper bound) and makes its no-argument
    constructor return ⊥. The simplest subclass stores its value through the base constructor::

        class Longest(Lattice):
            wrapper_name = "llongest"
            def __init__(self, value: str = ""):
                super().__init__(value)
            def merge(self, other):
                a, b = self.reveal(), other.reveal()
                return self if (len(a), a) >= (len(b), b) else other

    Derived for every subclass:

    * ``a <= b`` iff ``a.merge(b) == b`` (a *partial* order: incomparable values give ``False``
      for ``<``, ``<=``, ``>`` and ``>=``); ``a | b`` is ``a.merge(b)``;
    * equality and hashing by (class, revealed value); instances are immutable;
    * merging or comparing values of two different lattice classes raises
      :class:`~blooml.errors.LatticeTypeError` (a ``TypeError``) naming both classes;
    * pickling (Spark ships values between processes), ``copy``/``deepcopy`` return ``self``.

    Class attributes:
        wrapper_name: the name the lattice is known by in Bloom^L programs (``"lset"``).
        merge_is_exact: ``True`` when ``x.merge(y) is x`` whenever ``y <= x``, so that a
            merge returning another object grew ``x``: a lattice variable then skips the
            ``<=`` test after each merge. Read on the class that sets it only (a subclass
            that overrides ``merge`` does not inherit the promise).
    """

    __slots__ = ("_h", "_v")
    wrapper_name: ClassVar[str] = ""
    merge_is_exact: ClassVar[bool] = False

    _v: Any
    _h: int | None

    def __init__(self, value: Any = None) -> None:
        object.__setattr__(self, "_v", value)
        object.__setattr__(self, "_h", None)

    # -- subclass hooks ---------------------------------------------------------------------

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own_merge = cls.__dict__.get("merge")
        if own_merge is not None and not getattr(own_merge, "_blooml_checked", False):
            cls.merge = _checked_merge(own_merge)  # type: ignore[method-assign,assignment]
        name = cls.__dict__.get("wrapper_name")
        if name:
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(
                    f"{cls.__qualname__}.wrapper_name must be an identifier string, got {name!r}"
                )
            _REGISTRY[name] = cls
        cls._marks = _collect_marks(cls)

    _marks: ClassVar[dict[str, Kind]] = {}

    if TYPE_CHECKING:
        # A lattice value declared as a class attribute of a Program is a lattice variable:
        # on an instance (and on ``self`` in a @bloom block) it reads as a LatticeState of
        # its class. Anywhere else it stays a value. (Type checkers only.)
        @overload
        def __get__(self, inst: None, owner: Any, /) -> Self: ...
        @overload
        def __get__(self, inst: _ProgramLike, owner: Any, /) -> LatticeState[Self]: ...  # type: ignore[overload-overlap]
        @overload
        def __get__(self, inst: object, owner: Any, /) -> Self: ...
        def __get__(self, inst: object, owner: Any, /) -> Any: ...

    def merge(self, other: Any) -> Self:
        """Return the least upper bound of ``self`` and ``other`` (both of this class)."""
        raise NotImplementedError(f"{type(self).__qualname__} must define merge(self, other)")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def bottom(cls: type[L]) -> L:
        """Return ⊥, the least element (the same as ``cls()``)."""
        return cls()

    @classmethod
    def _make(cls: type[L], raw: Any) -> L:
        """Wrap an already-validated raw value without running ``__init__`` (internal fast path)."""
        obj = object.__new__(cls)
        _set_v(obj, raw)
        _set_h(obj, None)
        return obj

    @classmethod
    def from_item(cls: type[L], item: Any) -> L:
        """Convert one collection row's value into an element of this lattice (for folding).

        The default applies the constructor (``lmax(7)``); collection lattices override it to
        build a singleton (``lset([v])``). A value that already is an element of this lattice is
        returned as it is.
        """
        if type(item) is cls:
            return item
        return cls(item)

    @classmethod
    def fold(cls: type[L], items: Iterable[Any]) -> L:
        """Fold ``from_item`` over ``items`` with merge (the seed's collection-to-lattice fold)."""
        b = cls.builder()
        for item in items:
            b.add(item)
        return b.freeze()

    @classmethod
    def builder(cls: type[L], initial: L | None = None) -> LatticeBuilder[L]:
        """Return a mutable accumulator starting at ``initial`` (⊥ by default).

        Collection lattices return a builder that mutates a plain Python structure in place and
        freezes once; the default one merges immutably. Builders pickle, so Spark may use one as
        the zero value of ``aggregateByKey``.
        """
        return LatticeBuilder(cls, initial)

    # -- the revealed value ---------------------------------------------------------------------

    def reveal(self) -> Any:
        """Return the plain Python value inside (non-monotone: it escapes the lattice)."""
        return self._v

    def is_bottom(self) -> bool:
        """Return whether this value is ⊥ (non-monotone)."""
        return self == type(self)()

    # -- derived order --------------------------------------------------------------------------

    def _check_peer(self, other: Any, op: str) -> bool:
        if type(other) is type(self):
            return True
        if isinstance(other, Lattice):
            raise LatticeTypeError(type(self), type(other), op)
        return False

    def _leq(self, other: Any) -> bool:
        """``self <= other`` for a peer of the same class: ``self ⊔ other == other``.

        The one hook behind ``<=``, ``<``, ``>=`` and ``>``; a subclass with a cheaper exact
        test (inclusion, without building the merged value) overrides this, never the four
        operators.
        """
        return bool(self.merge(other) == other)

    def __le__(self, other: Any) -> bool:
        if not self._check_peer(other, "compare (<=)"):
            return NotImplemented
        return self._leq(other)

    def __ge__(self, other: Any) -> bool:
        if not self._check_peer(other, "compare (>=)"):
            return NotImplemented
        return bool(other._leq(self))

    def __lt__(self, other: Any) -> bool:
        if not self._check_peer(other, "compare (<)"):
            return NotImplemented
        return self._leq(other) and self != other

    def __gt__(self, other: Any) -> bool:
        if not self._check_peer(other, "compare (>)"):
            return NotImplemented
        return bool(other._leq(self)) and self != other

    def __or__(self, other: Self) -> Self:
        if not self._check_peer(other, "merge (|)"):
            return NotImplemented
        return self.merge(other)

    # -- value semantics ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented if not isinstance(other, Lattice) else False
        return bool(self._v == other._v)  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        h = self._h
        if h is None:
            h = hash((type(self).__qualname__, self._v))
            _set_h(self, h)
        return h

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({self._v!r})"

    def _repr_html_(self) -> str:
        """Jupyter: a table of the entries (a map, a bag), of the elements (a set), or the
        value."""
        from blooml.lattices._display import html_table

        name = getattr(type(self), "wrapper_name", "") or type(self).__qualname__
        v = self.reveal()
        if isinstance(v, dict):
            items = sorted(v.items(), key=lambda kv: repr(kv[0]))
            return html_table(("key", "value"), items, caption=f"{name}: {len(v)} entries",
                              total=len(v), keys=1)  # fmt: skip
        if isinstance(v, (set, frozenset)):
            elems = sorted(((e,) for e in v), key=repr)
            return html_table(("element",), elems, caption=f"{name}: {len(v)} elements",
                              total=len(v))  # fmt: skip
        import html

        return f"<code>{html.escape(repr(self))}</code>"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"{type(self).__qualname__} values are immutable (cannot set {name!r}); "
            "store the state through Lattice.__init__(value) and build new values in merge"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(
            f"{type(self).__qualname__} values are immutable (cannot delete {name!r})"
        )

    def __copy__(self: L) -> L:
        return self

    def __deepcopy__(self: L, memo: dict[int, Any]) -> L:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        state = {}
        for klass in type(self).__mro__:
            for slot in klass.__dict__.get("__slots__", ()):
                if slot not in ("_h", "__dict__", "__weakref__") and hasattr(self, slot):
                    state[slot] = getattr(self, slot)
        extra = getattr(self, "__dict__", None)
        if extra:
            state.update(extra)
        return (_rebuild, (type(self), state))

    # -- marks ----------------------------------------------------------------------------------

    @classmethod
    def morphisms(cls) -> frozenset[str]:
        """Names of the methods marked ``@morph`` (``merge`` included: ``x ↦ x ⊔ c`` is one)."""
        return frozenset(n for n, k in cls._marks.items() if k == "morph")

    @classmethod
    def monotones(cls) -> frozenset[str]:
        """Names of the methods marked ``@monotone`` (morphisms are not repeated here)."""
        return frozenset(n for n, k in cls._marks.items() if k == "monotone")


_set_v: Callable[[Any, Any], None] = Lattice.__dict__["_v"].__set__
_set_h: Callable[[Any, Any], None] = Lattice.__dict__["_h"].__set__


def _rebuild(cls: type[L], state: dict[str, Any]) -> L:
    obj = object.__new__(cls)
    for k, v in state.items():
        object.__setattr__(obj, k, v)
    object.__setattr__(obj, "_h", None)
    return obj


def _checked_merge(raw: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def merge(self: Any, other: Any) -> Any:
        if type(other) is not type(self):
            raise LatticeTypeError(type(self), type(other), "merge")
        return raw(self, other)

    merge.__name__ = raw.__name__
    merge.__qualname__ = getattr(raw, "__qualname__", "merge")
    merge.__doc__ = raw.__doc__
    merge.__wrapped__ = raw  # type: ignore[attr-defined]
    merge._blooml_checked = True  # type: ignore[attr-defined]
    merge._blooml_kind = "morph"  # type: ignore[attr-defined]
    return merge


def _collect_marks(cls: type) -> dict[str, Kind]:
    marks: dict[str, Kind] = {}
    for name in dir(cls):
        try:
            attr = inspect.getattr_static(cls, name)
        except AttributeError:  # pragma: no cover - dir() and getattr_static disagree
            continue
        kind = getattr(_unwrap(attr), _KIND_ATTR, None)
        if kind in ("morph", "monotone"):
            marks[name] = kind
    return marks


def kind_of(cls: type[Lattice], name: str) -> Kind:
    """Return how the rule layer must treat method ``name`` of lattice class ``cls``.

    ``"morph"`` (distributes over merge), ``"monotone"`` (order-preserving) or
    ``"nonmonotone"`` (any other public method, ``reveal`` included).

    Raises:
        AttributeError: ``cls`` has no such method.
        TypeError: ``cls`` is not a lattice class.
    """
    if not (isinstance(cls, type) and issubclass(cls, Lattice)):
        raise TypeError(f"kind_of expects a Lattice subclass, got {cls!r}")
    kind = cls._marks.get(name)
    if kind is not None:
        return kind
    if not callable(getattr(cls, name, None)):
        raise AttributeError(f"lattice {cls.__qualname__} has no method {name!r}")
    return "nonmonotone"


def lattice_class(name: str) -> type[Lattice]:
    """Return the lattice class registered under ``wrapper_name`` ``name``.

    Raises:
        KeyError: no lattice class has that wrapper name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"no lattice with wrapper_name {name!r} (known: {known})") from None


def registered_lattices() -> dict[str, type[Lattice]]:
    """Return a copy of the wrapper-name registry (builtins, CRDTs and user lattices)."""
    return dict(_REGISTRY)


class LatticeBuilder(Generic[L]):
    """A mutable accumulator for one lattice value (a transient, like pyrsistent's evolver).

    Use it to fold many values without building an immutable value per step::

        b = lset.builder()
        for row in rows:
            b.add(row)          # as lset.from_item(row)
        value = b.freeze()

    This default builder merges immutably; collection lattices subclass it to mutate a plain
    Python structure in place. Builders are never shared between threads; ``freeze`` may be
    called more than once and the builder stays usable.
    """

    __slots__ = ("_cls", "_value")

    def __init__(self, cls: type[L], initial: L | None = None) -> None:
        if initial is not None and type(initial) is not cls:
            raise LatticeTypeError(cls, type(initial), "start a builder")
        self._cls = cls
        self._value = cls() if initial is None else initial

    @property
    def lattice(self) -> type[L]:
        """The lattice class being built."""
        return self._cls

    def merge(self, value: L) -> LatticeBuilder[L]:
        """Merge a lattice value in; returns the builder (for ``aggregateByKey``)."""
        if type(value) is not self._cls:
            raise LatticeTypeError(self._cls, type(value), "merge")
        self._value = self._value.merge(value)
        return self

    def add(self, item: Any) -> LatticeBuilder[L]:
        """Fold one row value in, converted by the lattice's ``from_item``."""
        return self.merge(self._cls.from_item(item))

    def merge_builder(self, other: LatticeBuilder[L]) -> LatticeBuilder[L]:
        """Merge another builder of the same lattice in; returns ``self``."""
        return self.merge(other.freeze())

    def freeze(self) -> L:
        """Return the accumulated immutable value."""
        return self._value

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.freeze()!r}>"


def check_not_none(cls_name: str, value: Any) -> None:
    """Raise :class:`LatticeValueError` for an explicit ``None`` (``Cls()`` is the way to get ⊥)."""
    if value is None:
        raise LatticeValueError(
            cls_name, value, f"None is not a value; use {cls_name}() for ⊥ (the least element)"
        )
