"""Hypothesis strategies of lattice values: the registry behind ``blooml.testing.elements``.

Every lattice class maps to a *factory*: a callable taking keyword-only options and returning a
hypothesis strategy of values of that class. ``elements(Cls, **options)`` looks the factory up
and calls it; user lattices get a zero-option factory through the public ``register``.

Internal registration hook (for blooml's own lattice modules, e.g. the CRDT strategies in
``_crdt_strategies.py``)::

    from blooml.testing._strategies import _register_builtin, elements

    def _lpair_values(*, first=None, second=None):
        return st.builds(lpair, elements(first or lmax), elements(second or lset))

    _register_builtin(lpair, _lpair_values)

A factory is called lazily, each time ``elements`` is called, so it may call ``elements`` for
other classes whatever the import order. Options must be keyword-only; ``elements`` rejects an
option the factory does not accept with a message listing the ones it does. Every value a
factory draws must be an instance of exactly its class (``elements`` checks). Keep drawn values
small (a handful of items, a small domain so that independently drawn values overlap) and make
every two values drawn from one strategy mergeable with each other: the law checker merges
independently drawn values.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice, lbool, lmax, lmin
from blooml.testing._errors import LawCheckError, short_repr

__all__ = [
    "Const",
    "_register_builtin",
    "default_args",
    "elements",
    "is_registered",
    "named",
    "register",
]

L = TypeVar("L", bound=Lattice)
Factory = Callable[..., SearchStrategy[Any]]

_FACTORIES: dict[type[Lattice], Factory] = {}
_DEFAULT_ARGS: dict[type[Lattice], dict[str, Any]] = {}


def _require_lattice_class(cls: Any, where: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Lattice)):
        raise LawCheckError(
            cls if isinstance(cls, type) else type(cls),
            f"{where} expects a Lattice subclass, got {short_repr(cls)}",
        )


def _register_builtin(
    cls: type[Lattice], factory: Factory, *, args: Mapping[str, Any] | None = None
) -> None:
    """Register ``factory(**options) -> strategy`` as the way to draw values of ``cls``.

    For blooml's own lattices (builtins, CRDTs); users call :func:`register`. ``args`` are the
    default method arguments (``check_laws(args=...)`` form) that ``check_laws(cls)`` uses when
    it is given no ``elements``. A later registration replaces an earlier one.
    """
    _require_lattice_class(cls, "_register_builtin")
    if not callable(factory):
        raise LawCheckError(cls, f"a strategy factory must be callable, got {short_repr(factory)}")
    _FACTORIES[cls] = factory
    _set_default_args(cls, args)


def _set_default_args(cls: type[Lattice], args: Mapping[str, Any] | None) -> None:
    if args is None:
        _DEFAULT_ARGS.pop(cls, None)
        return
    if not isinstance(args, Mapping):
        raise LawCheckError(
            cls, f"args must be a mapping of method name to strategy, got {short_repr(args)}"
        )
    _DEFAULT_ARGS[cls] = dict(args)


def default_args(cls: type[Lattice]) -> dict[str, Any]:
    """The method arguments registered with ``cls``'s strategy (empty when none were)."""
    return dict(_DEFAULT_ARGS.get(cls, {}))


def register(
    cls: type[L], strategy: SearchStrategy[L], *, args: Mapping[str, Any] | None = None
) -> None:
    """Tell :func:`elements` (and so :func:`check_laws`) how to draw values of a user lattice.

    Args:
        cls: the lattice class.
        strategy: a hypothesis strategy drawing values of exactly ``cls``. Include ⊥ and keep
            the domain small, so that independently drawn values overlap and compare.
        args: default method arguments, in ``check_laws(args=...)`` form, used by
            ``check_laws(cls)`` when it is given no ``elements`` (its own ``args`` override
            them method by method).

    Raises:
        LawCheckError: ``cls`` is not a lattice class or ``strategy`` is not a strategy.

    Example::

        register(Longest, st.text(alphabet="ab", max_size=4).map(Longest))

    Registering a class again replaces its strategy (for every later ``elements`` call).
    """
    _require_lattice_class(cls, "register")
    if not isinstance(strategy, SearchStrategy):
        raise LawCheckError(
            cls,
            f"register({cls.__qualname__}, ...) needs a hypothesis strategy, got "
            f"{short_repr(strategy)}",
            hint=f"e.g. register({cls.__qualname__}, st.integers().map({cls.__qualname__}))",
        )

    def factory() -> SearchStrategy[Any]:
        return strategy

    _FACTORIES[cls] = factory
    _set_default_args(cls, args)


def is_registered(cls: type[Lattice]) -> bool:
    """Whether :func:`elements` knows how to draw values of ``cls``."""
    return cls in _FACTORIES


def elements(cls: type[L], **options: Any) -> SearchStrategy[L]:
    """Return a hypothesis strategy of values of lattice class ``cls`` (⊥ included).

    Works for every builtin lattice, every CRDT and every class passed to :func:`register`.
    Any two values drawn from the returned strategy can be merged with each other.

    Options (keyword-only, per class):
        lmax, lmin: ``values`` — strategy of plain ordered values (default: small integers).
        lset, lbag: ``values`` — strategy of hashable items (default: small integers and
            one-letter strings).
        lpset: ``values`` — strategy of non-negative numbers (default: small integers and
            quarter-step floats, whose sums are exact).
        lmap: ``values`` — the value lattice class (``elements(lmap, values=lmax)``) or a
            strategy of value-lattice values; ``keys`` — strategy of keys (default: a few
            one-letter strings). Without ``values`` the maps mix value lattices, the key deciding
            the class: one-letter string keys hold ``lmax``, small integer keys ``lset``,
            ``("flag", i)`` keys ``lbool`` and ``("sub", i)`` keys nested ``lmap`` of ``lmin``;
            so every two drawn maps merge.

    Raises:
        LawCheckError: ``cls`` is not a lattice class, nothing is registered for it (call
            :func:`register`), or an option is unknown.
    """
    _require_lattice_class(cls, "elements")
    factory = _FACTORIES.get(cls)
    if factory is None:
        name = cls.__qualname__
        raise LawCheckError(
            cls,
            f"no strategy is registered for {name}",
            hint=(
                f"Call blooml.testing.register({name}, strategy) first, e.g. "
                f"register({name}, st.text().map({name})), or pass elements= to check_laws."
            ),
        )
    sig = inspect.signature(factory)
    try:
        sig.bind(**options)
    except TypeError:
        accepted = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
        raise LawCheckError(
            cls,
            f"elements({cls.__qualname__}) got unknown option(s) {sorted(options)}; "
            f"it accepts: {', '.join(accepted) or 'no options'}",
        ) from None
    strategy = factory(**options)
    if not isinstance(strategy, SearchStrategy):
        raise LawCheckError(
            cls,
            f"the strategy factory for {cls.__qualname__} returned {short_repr(strategy)}, "
            "not a hypothesis strategy",
        )
    return checked(cls, strategy)


def checked(cls: type[L], strategy: SearchStrategy[Any]) -> SearchStrategy[L]:
    """Wrap ``strategy`` so that a drawn value of the wrong class fails with a clear message."""

    def check(value: Any) -> L:
        if type(value) is not cls:
            raise LawCheckError(
                cls,
                f"the strategy for {cls.__qualname__} drew {short_repr(value)} "
                f"(a {type(value).__qualname__}), not a {cls.__qualname__}",
                hint="Map the strategy through the class, e.g. st.integers().map(Cls).",
            )
        return value

    return strategy.map(check)


# -- helpers for readable function arguments --------------------------------------------------


class Const:
    """A zero-argument function returning ``value``, readable in counterexamples (``when_true``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"lambda: {self.value!r}"


def named(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``fn`` (a lambda) a name, so a counterexample shows which function was drawn."""
    fn.__name__ = fn.__qualname__ = name
    return fn


# -- builtin factories ----------------------------------------------------------------------

_SMALL_INTS = st.integers(min_value=-20, max_value=20)
_ARG_INTS = st.integers(min_value=-25, max_value=25)


def _ordered_args(*names: str) -> dict[str, Any]:
    return {n: _ARG_INTS for n in (*names, "__add__", "__radd__", "__sub__")}


def _lbool_values() -> SearchStrategy[lbool]:
    return st.booleans().map(lbool)


def _ordered(cls: type[lmax] | type[lmin]) -> Factory:
    def factory(*, values: SearchStrategy[Any] | None = None) -> SearchStrategy[Any]:
        return st.just(cls()) | (_SMALL_INTS if values is None else values).map(cls)

    factory.__name__ = f"_{cls.wrapper_name}_values"
    return factory


_register_builtin(
    lbool,
    _lbool_values,
    args={"when_true": st.one_of(st.builds(lmax, _SMALL_INTS), st.just(lmax())).map(Const)},
)
_register_builtin(lmax, _ordered(lmax), args=_ordered_args("gt", "gt_eq", "min_of"))
_register_builtin(lmin, _ordered(lmin), args=_ordered_args("lt", "lt_eq", "max_of"))
