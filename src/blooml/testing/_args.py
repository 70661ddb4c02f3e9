"""How the law checker calls a lattice's ``@morph`` and ``@monotone`` methods.

For each method it builds one hypothesis strategy drawing ``(positional, keyword)`` arguments,
from the user's ``args`` entry or, failing that, from the parameters' type hints. Every method
that cannot be resolved is collected, so one error lists them all.

``args[name]`` is one of:

* a strategy — for a method with exactly one parameter (besides ``self``, not ``*args`` or
  ``**kwargs``) it draws that argument; for any other method it draws a *tuple of positional
  arguments* (shorter than the parameter list to leave trailing defaults in place);
* a mapping from parameter name to strategy — parameters not named are derived as below
  (a ``*args`` parameter's strategy draws a tuple, a ``**kwargs`` one's a dict);
* ``None`` — the method is knowingly not checked (listed as skipped in the report).

Without an entry, each parameter is derived: a parameter with a default keeps it, ``*args`` and
``**kwargs`` stay empty, a parameter typed as the lattice itself (or ``Self``) draws from the
elements strategy in use, another registered lattice class from ``elements(that class)``, and a
plain type from ``st.from_type`` (but ``int`` and ``float`` mostly small, -20..20, the range
the builtin strategies use, and ``float`` without NaN or infinities). ``Any``, a missing hint,
a type variable or a callable cannot be derived.
"""

from __future__ import annotations

import collections.abc
import contextlib
import inspect
import itertools
import random
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, find
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice, registered_lattices
from blooml.testing._errors import LawCheckError, short_repr
from blooml.testing._strategies import elements as elements_of
from blooml.testing._strategies import is_registered

__all__ = ["Call", "MethodPlan", "plan_methods"]

Kind = Literal["morph", "monotone"]
Call = tuple[tuple[Any, ...], dict[str, Any]]
_SKIP_NAMES = frozenset({"merge"})  # merge's own laws are checked directly


@dataclass(frozen=True)
class MethodPlan:
    """One method to check: its name, kind, signature text and argument strategy (or skip).

    ``calls_for(a, b)`` is the argument strategy for one example whose lattice values are
    ``a`` and ``b``: parameters derived from a plain type hint also draw from the parts of
    ``a`` and ``b`` of that type (``hinted`` names them, with their hints); ``edge_calls(a, b)``
    lists a few deterministic calls for the edge pass; ``stats`` counts examples whose hinted
    arguments could draw from the values (``"values"``) or only from the hint (``"hint"``).
    """

    name: str
    kind: Kind
    signature: str
    calls: SearchStrategy[Call] | None  # None: skipped on purpose (args[name] is None)
    calls_for: Callable[[Any, Any], SearchStrategy[Call]] | None = None
    edge_calls: Callable[[Any, Any, list[Any]], list[Call]] | None = None
    hinted: tuple[tuple[str, str], ...] = ()
    stats: dict[str, int] = field(default_factory=lambda: {"values": 0, "hint": 0})


def checked_methods(cls: type[Lattice]) -> list[tuple[str, Kind]]:
    """The ``@morph`` then the ``@monotone`` methods whose claims the checker verifies, by name."""
    out: list[tuple[str, Kind]] = [
        (n, "morph") for n in sorted(cls.morphisms()) if n not in _SKIP_NAMES
    ]
    out += [(n, "monotone") for n in sorted(cls.monotones()) if n not in _SKIP_NAMES]
    return out


def plan_methods(
    cls: type[Lattice],
    lattice_elements: SearchStrategy[Any],
    args: Mapping[str, Any] | None,
    only: str | None = None,
) -> list[MethodPlan]:
    """Resolve the arguments of every checked method of ``cls`` (or just ``only``).

    Raises:
        LawCheckError: listing every method whose arguments cannot be derived, every malformed
            ``args`` entry, and every ``args`` key that is not a checked method.
    """
    args = {} if args is None else args
    if not isinstance(args, Mapping):
        raise LawCheckError(
            cls, f"args must be a dict of method name -> strategy, got {short_repr(args)}"
        )
    methods = checked_methods(cls)
    known = {name for name, _ in methods}
    problems: list[str] = []
    unresolved: list[str] = []
    for key in args:
        if key not in known:
            what = (
                "merge's laws are always checked"
                if key in _SKIP_NAMES
                else (
                    f"it is not a @morph or @monotone method of {cls.__qualname__} "
                    f"(those are: {', '.join(sorted(known)) or 'none'})"
                )
            )
            problems.append(f"args names {key!r}, but {what}")
    plans: list[MethodPlan] = []
    for name, kind in methods:
        if only is not None and name != only:
            continue
        try:
            plans.append(_plan_one(cls, name, kind, lattice_elements, args))
        except _Unresolved as exc:
            problems.extend(exc.problems)
            unresolved.append(name)
    if problems:
        example = ", ".join(f'"{n}": ...' for n in unresolved) or '"name": ...'
        raise LawCheckError(
            cls,
            problems,
            hint=(
                f"Pass arguments with args={{{example}}} (a strategy, a dict of parameter name -> "
                'strategy, or None to skip a method knowingly), e.g. args={"gt": st.integers()}.'
            ),
        )
    return plans


class _Unresolved(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _plan_one(
    cls: type[Lattice],
    name: str,
    kind: Kind,
    lattice_elements: SearchStrategy[Any],
    args: Mapping[str, Any],
) -> MethodPlan:
    static = inspect.getattr_static(cls, name)
    label = f"{cls.__qualname__}.{name}"
    if isinstance(static, (staticmethod, classmethod)) or not callable(static):
        raise _Unresolved(
            [f"method {label}(...) is marked @{kind} but is not a plain instance method"]
        )
    fn = getattr(cls, name)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise _Unresolved([f"method {label}(...): cannot read its signature ({exc})"]) from None
    params = list(sig.parameters.values())[1:]  # drop self
    signature = f"{label}({', '.join(str(p) for p in params)})"
    short_sig = f"{label}({', '.join(p.name for p in params)})"
    entry = args.get(name, _MISSING)
    if entry is None:
        return MethodPlan(name, kind, signature, None)
    plain = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if isinstance(entry, SearchStrategy):
        if len(params) == 1 and len(plain) == 1:
            calls = entry.map(_one_arg)
        else:
            calls = entry.map(_positional(cls, signature))
        whole = calls

        def fixed_calls(a: Any, b: Any) -> SearchStrategy[Call]:
            return whole

        def edge_whole(a: Any, b: Any, samples: list[Any]) -> list[Call]:
            first = _simplest(whole)
            return [] if first is _MISSING else [first]

        return MethodPlan(name, kind, signature, calls, fixed_calls, edge_whole)
    if entry is not _MISSING and not isinstance(entry, Mapping):
        raise _Unresolved(
            [
                f"args[{name!r}] must be a hypothesis strategy, a dict of parameter name -> "
                f"strategy, or None; got {short_repr(entry)}"
            ]
        )
    given: Mapping[str, Any] = {} if entry is _MISSING else entry
    problems = []
    for key, strat in given.items():
        if key not in sig.parameters or key == next(iter(sig.parameters)):
            problems.append(
                f"args[{name!r}] names parameter {key!r}, but {short_sig} has parameters "
                f"{', '.join(p.name for p in params) or 'none'}"
            )
        elif not isinstance(strat, SearchStrategy):
            problems.append(
                f"args[{name!r}][{key!r}] must be a hypothesis strategy, got {short_repr(strat)}"
            )
    hints = _hints(cls, fn)
    drawn: dict[str, SearchStrategy[Any]] = {}
    hinted: dict[str, Any] = {}  # parameter -> plain type hint its strategy was derived from
    selfish: set[str] = set()  # parameters drawing values of the lattice itself
    for p in params:
        if p.name in given:
            drawn[p.name] = given[p.name]
            continue
        if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = hints.get(p.name, p.annotation)
        strat, why = _derive(cls, p, hint, lattice_elements)
        if strat is None:
            problems.append(f"method {short_sig}: parameter {p.name!r} {why}")
        else:
            drawn[p.name] = strat
            if strat is lattice_elements:
                selfish.add(p.name)
            elif not (isinstance(hint, type) and issubclass(hint, Lattice)):
                hinted[p.name] = hint
    if problems:
        raise _Unresolved(problems)
    assemble = _assemble(params)
    calls = st.fixed_dictionaries(drawn).map(assemble)
    stats = {"values": 0, "hint": 0}

    def calls_for(a: Any, b: Any) -> SearchStrategy[Call]:
        if not hinted:
            return calls
        parts = value_parts(a) + value_parts(b)
        strategies = dict(drawn)
        used = False
        for pname, hint in hinted.items():
            pool = _pool(parts, hint)
            if pool:
                # mostly the values' own parts (first: hypothesis shrinks towards the first branch)
                from_values = st.sampled_from(pool)
                strategies[pname] = st.one_of(from_values, from_values, from_values, drawn[pname])
                used = True
        stats["values" if used else "hint"] += 1
        return st.fixed_dictionaries(strategies).map(assemble) if used else calls

    simplest: dict[str, Any] = {}

    def edge_calls(a: Any, b: Any, samples: list[Any]) -> list[Call]:
        parts = value_parts(a) + value_parts(b)
        options: list[list[Any]] = []
        for pname, strat in drawn.items():
            if pname in selfish:
                cands = [a, b, *samples[:2]]
            else:
                if pname not in simplest:
                    simplest[pname] = _simplest(strat)
                first = simplest[pname]
                cands = [] if first is _MISSING else [first]
                if pname in hinted:
                    cands = _pool(parts, hinted[pname])[:_EDGE_CALLS] + cands
            if not cands:
                return []
            options.append(_dedupe(cands))
        names = list(drawn)
        return [
            assemble(dict(zip(names, combo, strict=True)))
            for combo in itertools.islice(itertools.product(*options), _EDGE_CALLS)
        ]

    shown = tuple((pname, _hint_name(h)) for pname, h in hinted.items())
    return MethodPlan(name, kind, signature, calls, calls_for, edge_calls, shown, stats)


_EDGE_CALLS = 12  # argument combinations per pair of values in the edge pass
_POOL_LIMIT = 40


def _simplest(strategy: SearchStrategy[Any]) -> Any:
    """The simplest value ``strategy`` draws (deterministic), or ``_MISSING``."""
    try:
        return find(
            strategy,
            lambda _: True,
            settings=hsettings(
                database=None,
                max_examples=20,
                deadline=None,
                derandomize=False,
                phases=(Phase.generate,),
                suppress_health_check=list(HealthCheck),
            ),
            random=random.Random(0),
        )
    except Exception:
        return _MISSING


def _dedupe(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    seen: set[Any] = set()
    for v in values:
        try:
            key: Any = (type(v), v)
            if key in seen:
                continue
            seen.add(key)
        except TypeError:  # unhashable: keep it
            pass
        out.append(v)
    return out


def value_parts(x: Any, limit: int = 64) -> list[Any]:
    """The plain values inside lattice value ``x``: what its ``reveal()`` (and its instance
    attributes) hold, taken apart through tuples, lists, sets and dicts (keys and values) and
    nested lattice values; tuples are kept whole as well. At most ``limit`` values."""
    out: list[Any] = []
    stack: list[tuple[Any, int]] = [(x, 0)]
    while stack and len(out) < limit:
        v, depth = stack.pop()
        if depth > 6:
            continue
        if isinstance(v, Lattice):
            try:
                inner = v.reveal()
            except Exception:
                inner = None
            extra = list(getattr(v, "__dict__", {}).values())
            stack.extend((w, depth + 1) for w in reversed([inner, *extra]))
            continue
        if v is None:
            continue
        if isinstance(v, Mapping):
            for k, w in list(v.items())[:limit]:
                stack.append((w, depth + 1))
                stack.append((k, depth + 1))
            continue
        if isinstance(v, tuple):
            out.append(v)
            stack.extend((w, depth + 1) for w in reversed(v))
            continue
        if isinstance(v, (list, set, frozenset)):
            stack.extend((w, depth + 1) for w in list(v)[:limit])
            continue
        out.append(v)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _pool(parts: list[Any], hint: Any) -> list[Any]:
    """The candidate arguments of type ``hint`` taken from ``parts``: the parts of that type
    and, for numbers, the midpoints of two parts and their neighbours (``v - 1``, ``v + 1``),
    where a claim about ranges is decided."""
    if hint is int or hint is float:
        nums = [v for v in parts if _is_int(v) or (hint is float and isinstance(v, float))]
        nums = [v for v in nums if v == v]  # no NaN
        if not nums:
            return []
        cands = list(nums)
        for v, w in itertools.combinations(sorted(set(nums))[:12], 2):
            cands.append((v + w) // 2 if hint is int else (v + w) / 2)
        cands += [v + d for v in nums for d in (-1, 1)]
        if hint is float:
            cands = [float(v) for v in cands]
        return _dedupe(cands)[:_POOL_LIMIT]
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in typing.get_args(hint):
            out += _pool(parts, arg)
        return _dedupe(out)[:_POOL_LIMIT]
    if origin is not None or not isinstance(hint, type) or hint in (object, type(None)):
        return []  # a parametrised hint (tuple[int, int]): parts of other shapes would not fit
    target = hint
    if target is bool:
        return [v for v in parts if isinstance(v, bool)][:_POOL_LIMIT]
    return _dedupe([v for v in parts if isinstance(v, target) and not isinstance(v, bool)])[
        :_POOL_LIMIT
    ]


_MISSING: Any = object()
# Derived numbers are mostly drawn from the range the builtin strategies draw lattice values
# from, so that an argument often lands among (or between) the values it is compared with.
_SMALL_INTS = st.integers(min_value=-20, max_value=20)


def _one_arg(value: Any) -> Call:
    return (value,), {}


def _positional(cls: type[Lattice], signature: str) -> Callable[[Any], Call]:
    def to_call(value: Any) -> Call:
        if not isinstance(value, tuple):
            raise LawCheckError(
                cls,
                f"the args strategy for {signature} must draw a tuple of positional arguments "
                f"(the method has several parameters), got {short_repr(value)}",
                hint="Use st.tuples(...), or a dict of parameter name -> strategy.",
            )
        return value, {}

    return to_call


def _assemble(params: list[inspect.Parameter]) -> Callable[[dict[str, Any]], Call]:
    def to_call(values: dict[str, Any]) -> Call:
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        pending: list[Any] = []  # defaults to pass positionally only if a later one is drawn
        for p in params:
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                if p.name in values:
                    positional.extend(pending)
                    pending.clear()
                    positional.append(values[p.name])
                else:
                    pending.append(p.default)
            elif p.kind is p.VAR_POSITIONAL:
                if p.name in values:
                    positional.extend(pending)
                    pending.clear()
                    positional.extend(values[p.name])
            elif p.kind is p.KEYWORD_ONLY:
                if p.name in values:
                    keywords[p.name] = values[p.name]
            elif p.name in values:  # **kwargs
                keywords.update(values[p.name])
        return tuple(positional), keywords

    return to_call


def _hints(cls: type[Lattice], fn: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(registered_lattices())
    namespace[cls.__name__] = cls
    namespace["Self"] = typing.Self
    raw = inspect.unwrap(fn)
    try:
        return typing.get_type_hints(raw, localns=namespace)
    except Exception:  # one unresolvable name (a class local to a function): resolve each alone
        pass
    hints: dict[str, Any] = {}
    globalns = getattr(raw, "__globals__", {})
    for name, annotation in getattr(raw, "__annotations__", {}).items():
        if isinstance(annotation, str):
            # as get_type_hints does; a failure leaves the string, which _derive matches
            # against the class name or reports
            with contextlib.suppress(Exception):
                annotation = eval(annotation, dict(globalns), namespace)
        hints[name] = annotation
    return hints


def _derive(
    cls: type[Lattice], p: inspect.Parameter, hint: Any, lattice_elements: SearchStrategy[Any]
) -> tuple[SearchStrategy[Any] | None, str]:
    if hint is inspect.Parameter.empty:
        return None, "has no type hint"
    if isinstance(hint, str):
        if hint in (cls.__name__, cls.__qualname__, "Self", "typing.Self"):
            return lattice_elements, ""
        return None, f"has a type hint that cannot be resolved ({hint!r})"
    if hint is cls or hint is typing.Self:
        return lattice_elements, ""
    if hint is Any or hint is object:
        return None, f"is typed {_hint_name(hint)}, which says nothing about its values"
    if isinstance(hint, typing.TypeVar):
        return None, f"is typed with the type variable {hint}"
    origin = typing.get_origin(hint) or hint
    if origin is collections.abc.Callable or (
        isinstance(origin, type) and issubclass(origin, collections.abc.Callable)  # type: ignore[arg-type]
    ):
        return None, f"is a callable ({_hint_name(hint)}); generated functions would be arbitrary"
    if isinstance(hint, type) and issubclass(hint, Lattice):
        if not is_registered(hint):
            return None, f"is typed {hint.__qualname__}, which has no registered strategy"
        return elements_of(hint), ""
    if hint is int:
        return _SMALL_INTS | st.integers(), ""
    if hint is float:
        return _SMALL_INTS | st.floats(allow_nan=False, allow_infinity=False), ""
    try:
        strategy = st.from_type(hint)
        strategy.validate()
        _ = strategy.wrapped_strategy  # type: ignore[attr-defined]  # forces resolution
    except (HypothesisException, TypeError, AttributeError, NotImplementedError) as exc:
        return None, f"is typed {_hint_name(hint)}, which hypothesis cannot generate ({exc})"
    return strategy, ""


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__qualname__", None) or str(hint).replace("typing.", "")
