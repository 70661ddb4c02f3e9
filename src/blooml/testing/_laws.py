"""The laws, and the runner that checks each one with hypothesis and reports a shrunk example.

Each law is a *check*: named inputs (hypothesis strategies) and a body that raises
:class:`_Failure` when the law does not hold for those inputs. The runner wraps the body in a
``@given`` test with its own settings and seed, lets hypothesis find and shrink a failing
example, and turns the minimal one into a :class:`LawViolation`.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from random import Random
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, find, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky, HypothesisException
from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice
from blooml.testing._args import MethodPlan, plan_methods
from blooml.testing._errors import LawCheckError, LawCheckWarning, LawViolation, short_repr
from blooml.testing._strategies import checked, default_args
from blooml.testing._strategies import elements as elements_of

__all__ = ["MERGE_LAWS", "Check", "LawReport", "Session", "check_laws"]

#: The laws of ``merge`` itself, in the order they are checked.
MERGE_LAWS: tuple[str, ...] = (
    "associative",
    "commutative",
    "idempotent",
    "bottom_identity",
    "order_agrees",
    "hash_agrees",
    "no_mutation",
)


class _Failure(Exception):
    """Raised inside a check body: the law does not hold for the current example."""

    def __init__(
        self,
        detail: str,
        observed: Mapping[str, Any] | None = None,
        law: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.observed = dict(observed or {})
        self.law = law
        self.cause = cause


class _Text:
    """Shows as its text, unquoted, in a counterexample."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Text) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


@dataclass(frozen=True)
class Check:
    """One law to check: its name, the method it concerns, its inputs and its body."""

    law: str
    method: str | None
    inputs: Mapping[str, SearchStrategy[Any]]
    body: Callable[[dict[str, Any]], None]
    show: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda ex: dict(ex))
    #: draws the whole example when the inputs depend on each other (method arguments drawn
    #: from the lattice values); ``None``: the inputs are drawn independently
    strategy: SearchStrategy[dict[str, Any]] | None = None
    plan: MethodPlan | None = None

    @property
    def label(self) -> str:
        """``"associative"`` or ``"morphism size"``."""
        return self.law if self.method is None else f"{self.law} {self.method}"


@dataclass(frozen=True)
class LawReport:
    """What :func:`check_laws` verified (returned when every law holds).

    Attributes:
        lattice: the class checked.
        checked: the checks that passed, e.g. ``("associative", ..., "morphism gt")``.
        skipped: ``(method, reason)`` for each method knowingly not checked (``args[m] = None``).
        max_examples: examples tried per check.
        seed: the seed used (pass it back to replay the same examples).
    """

    lattice: type[Lattice]
    checked: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    max_examples: int
    seed: int

    def __str__(self) -> str:
        name = self.lattice.__qualname__
        lines = [f"{name}: {law} holds" for law in self.checked]
        lines += [f"{name}: {method} skipped ({why})" for method, why in self.skipped]
        lines.append(
            f"{name}: all {len(self.checked)} law checks passed "
            f"({self.max_examples} examples each, seed {self.seed})"
        )
        return "\n".join(lines)


# -- results of methods, as lattice values ------------------------------------------------


class _Bottom:
    """``None`` returned by a method: the ⊥ of whatever it returns otherwise."""

    def __repr__(self) -> str:
        return "None (⊥)"


_BOTTOM = _Bottom()


class _Rows:
    """A collection of rows returned by a method, as a Bloom collection: a set of rows in which
    rows that differ only in their lattice columns are one row with those columns merged.
    Ordered by inclusion (lattice columns by their own order), joined by union."""

    __slots__ = ("groups",)

    def __init__(self, groups: dict[Any, tuple[Lattice, ...]]) -> None:
        self.groups = groups  # plain part of the row -> its lattice columns

    @classmethod
    def of(cls, rows: Iterable[Any]) -> _Rows:
        """Group ``rows``; raises ``TypeError`` for unhashable rows."""
        out = cls({})
        for row in rows:
            out._add(*_split_row(row))
        return out

    def _add(self, key: Any, lattices: tuple[Lattice, ...]) -> None:
        have = self.groups.get(key)
        if have is not None:
            lattices = tuple(x.merge(y) for x, y in zip(have, lattices, strict=True))
        self.groups[key] = lattices

    def join(self, other: _Rows) -> _Rows:
        """Union, merging the lattice columns of rows with the same plain part."""
        out = _Rows(dict(self.groups))
        for key, lattices in other.groups.items():
            out._add(key, lattices)
        return out

    def __le__(self, other: _Rows) -> bool:
        for key, lattices in self.groups.items():
            theirs = other.groups.get(key)
            if theirs is None or not all(x <= y for x, y in zip(lattices, theirs, strict=True)):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rows) and self.groups == other.groups

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        rows = [_join_row(key, lattices) for key, lattices in self.groups.items()]
        with contextlib.suppress(TypeError):
            rows.sort()
        return f"rows{{{', '.join(short_repr(r) for r in rows)}}}"


_LATTICE_COLUMN = "<lattice column>"


def _split_row(row: Any) -> tuple[Any, tuple[Lattice, ...]]:
    if isinstance(row, list):
        row = tuple(row)
    if isinstance(row, Lattice):
        return (_LATTICE_COLUMN, type(row)), (row,)
    if isinstance(row, tuple) and any(isinstance(c, Lattice) for c in row):
        plain = tuple((_LATTICE_COLUMN, type(c)) if isinstance(c, Lattice) else c for c in row)
        hash(plain)
        return (type(row), plain), tuple(c for c in row if isinstance(c, Lattice))
    hash(row)
    return row, ()


def _join_row(key: Any, lattices: tuple[Lattice, ...]) -> Any:
    if not lattices:
        return key
    if key[0] == _LATTICE_COLUMN:
        return lattices[0]
    filled = iter(lattices)
    return tuple(
        next(filled) if isinstance(c, tuple) and c[:1] == (_LATTICE_COLUMN,) else c for c in key[1]
    )


def _as_result(value: Any, what: str) -> Any:
    if value is None:
        return _BOTTOM
    if isinstance(value, Lattice):
        return value
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise _Failure(
            f"{what} returned {short_repr(value)} (a {type(value).__qualname__}), which is not a "
            "lattice value, so it has no order to preserve; return a lattice (lmax(n) for a "
            "number, lbool(b) for a condition), None for ⊥, or a collection of rows",
            {what: value},
        )
    try:
        return _Rows.of(value)
    except TypeError as exc:
        raise _Failure(
            f"{what} returned rows that are not hashable ({exc})", {what: value}
        ) from None


def _is_bottom(x: Any) -> bool:
    if x is _BOTTOM:
        return True
    if isinstance(x, _Rows):
        return not x.groups
    return bool(x == type(x)())


def _join(x: Any, y: Any, what: str) -> Any:
    if x is _BOTTOM:
        return y
    if y is _BOTTOM:
        return x
    if isinstance(x, _Rows) and isinstance(y, _Rows):
        return x.join(y)
    if isinstance(x, Lattice) and isinstance(y, Lattice) and type(x) is type(y):
        return x.merge(y)
    raise _Failure(
        f"{what} are of different kinds ({_kind(x)} and {_kind(y)}); a @morph or @monotone "
        "method must always return values of one lattice"
    )


def _leq(x: Any, y: Any, what: str) -> bool:
    if x is _BOTTOM:
        return True
    if y is _BOTTOM:
        return _is_bottom(x)
    if isinstance(x, _Rows) and isinstance(y, _Rows):
        return x <= y
    if isinstance(x, Lattice) and isinstance(y, Lattice) and type(x) is type(y):
        return bool(x <= y)
    raise _Failure(
        f"{what} are of different kinds ({_kind(x)} and {_kind(y)}); a @morph or @monotone "
        "method must always return values of one lattice"
    )


def _equal(x: Any, y: Any) -> bool:
    if x is _BOTTOM or y is _BOTTOM:
        return _is_bottom(x) and _is_bottom(y)
    return type(x) is type(y) and bool(x == y)


def _kind(x: Any) -> str:
    if isinstance(x, _Rows):
        return "a collection of rows"
    if x is _BOTTOM:
        return "None"
    return f"a {type(x).__qualname__}"


# -- immutability --------------------------------------------------------------------------

_NO_COPY: Any = object()


def _snapshot(x: Any) -> tuple[Any, str, Any]:
    try:
        inner = copy.deepcopy(x.reveal())
    except Exception:  # an uncopyable revealed value: its repr still catches mutation
        inner = _NO_COPY
    return x, repr(x), inner


def _check_unchanged(snapshots: Iterable[tuple[str, tuple[Any, str, Any]]], during: str) -> None:
    for name, (x, before, inner) in snapshots:
        after = repr(x)
        changed = after != before
        if not changed and inner is not _NO_COPY:
            try:
                changed = not bool(x.reveal() == inner)
            except Exception:
                changed = False
        if changed:
            raise _Failure(
                f"{during} changed its input {name}; lattice values are immutable, so build and "
                "return a new value instead",
                {f"{name} before": _Text(before), f"{name} after": _Text(after)},
                law="no_mutation",
            )


# -- the laws of merge ---------------------------------------------------------------------


def _merge(cls: type[Lattice], x: Any, y: Any, text: str) -> Any:
    out = x.merge(y)
    if type(out) is not cls:
        raise _Failure(
            f"{text} returned {short_repr(out)} (a {type(out).__qualname__}), not a "
            f"{cls.__qualname__}",
            {text: out},
        )
    return out


def _merge_checks(cls: type[Lattice], elems: SearchStrategy[Any]) -> list[Check]:
    def associative(ex: dict[str, Any]) -> None:
        a, b, c = ex["a"], ex["b"], ex["c"]
        left = _merge(cls, _merge(cls, a, b, "a ⊔ b"), c, "(a ⊔ b) ⊔ c")
        right = _merge(cls, a, _merge(cls, b, c, "b ⊔ c"), "a ⊔ (b ⊔ c)")
        if left != right:
            raise _Failure(
                "(a ⊔ b) ⊔ c != a ⊔ (b ⊔ c)", {"(a ⊔ b) ⊔ c": left, "a ⊔ (b ⊔ c)": right}
            )

    def commutative(ex: dict[str, Any]) -> None:
        a, b = ex["a"], ex["b"]
        ab, ba = _merge(cls, a, b, "a ⊔ b"), _merge(cls, b, a, "b ⊔ a")
        if ab != ba:
            raise _Failure("a ⊔ b != b ⊔ a", {"a ⊔ b": ab, "b ⊔ a": ba})

    def idempotent(ex: dict[str, Any]) -> None:
        a = ex["a"]
        aa = _merge(cls, a, a, "a ⊔ a")
        if aa != a:
            raise _Failure("a ⊔ a != a", {"a ⊔ a": aa})

    def bottom_identity(ex: dict[str, Any]) -> None:
        a = ex["a"]
        bot = cls()
        if type(bot) is not cls:
            raise _Failure(f"{cls.__qualname__}() returned a {type(bot).__qualname__}", {})
        named = cls.bottom()
        if named != bot:
            raise _Failure(
                f"{cls.__qualname__}.bottom() != {cls.__qualname__}()",
                {"bottom()": named, "Cls()": bot},
            )
        left, right = _merge(cls, bot, a, "⊥ ⊔ a"), _merge(cls, a, bot, "a ⊔ ⊥")
        if left != a:
            raise _Failure("⊥ ⊔ a != a (⊥ is not the least element)", {"⊥": bot, "⊥ ⊔ a": left})
        if right != a:
            raise _Failure("a ⊔ ⊥ != a (⊥ is not the least element)", {"⊥": bot, "a ⊔ ⊥": right})
        # engines skip ⊥ deltas by asking is_bottom(), so an override must agree with ==
        if bool(a.is_bottom()) is not (a == bot):
            raise _Failure(
                f"a.is_bottom() is {bool(a.is_bottom())}, but a {'==' if a == bot else '!='} "
                f"{cls.__qualname__}()",
                {"⊥": bot},
            )

    def order_agrees(ex: dict[str, Any]) -> None:
        a, b = ex["a"], ex["b"]
        j = _merge(cls, a, b, "a ⊔ b")
        a_below, b_below = j == b, j == a
        expected = {
            "a <= b": a_below,
            "a >= b": b_below,
            "a < b": a_below and a != b,
            "a > b": b_below and a != b,
            "a <= a ⊔ b": True,
            "b <= a ⊔ b": True,
            "a <= a": True,
        }
        actual = {
            "a <= b": a <= b,
            "a >= b": a >= b,
            "a < b": a < b,
            "a > b": a > b,
            "a <= a ⊔ b": a <= j,
            "b <= a ⊔ b": b <= j,
            "a <= a": a <= a,
        }
        for rel, want in expected.items():
            if bool(actual[rel]) is not bool(want):
                raise _Failure(
                    f"{rel} is {bool(actual[rel])}, but merge says it should be {bool(want)} "
                    "(x <= y must mean x ⊔ y == y)",
                    {"a ⊔ b": j},
                )
        bar = a | b
        if bar != j:
            raise _Failure("a | b != a.merge(b)", {"a | b": bar, "a.merge(b)": j})

    def hash_agrees(ex: dict[str, Any]) -> None:
        a, b = ex["a"], ex["b"]
        if a != a:
            raise _Failure("a != a (equality is not reflexive: NaN inside?)", {})
        pairs = {
            "a ⊔ b, b ⊔ a": (_merge(cls, a, b, "a ⊔ b"), _merge(cls, b, a, "b ⊔ a")),
            "a, a ⊔ ⊥": (a, _merge(cls, a, cls(), "a ⊔ ⊥")),
            "a, a ⊔ a": (a, _merge(cls, a, a, "a ⊔ a")),
        }
        for text, (x, y) in pairs.items():
            if x == y and hash(x) != hash(y):
                raise _Failure(
                    f"values that compare equal ({text}) hash differently",
                    {"x": x, "y": y, "hash(x)": hash(x), "hash(y)": hash(y)},
                )

    def no_mutation(ex: dict[str, Any]) -> None:
        a, b = ex["a"], ex["b"]
        snaps = [("a", _snapshot(a)), ("b", _snapshot(b))]
        a.merge(b)
        _check_unchanged(snaps, "a.merge(b)")
        b.merge(a)
        _check_unchanged(snaps, "b.merge(a)")
        a.merge(a)
        _check_unchanged(snaps, "a.merge(a)")

    two = {"a": elems, "b": elems}
    return [
        Check("associative", None, {"a": elems, "b": elems, "c": elems}, associative),
        Check("commutative", None, two, commutative),
        Check("idempotent", None, {"a": elems}, idempotent),
        Check("bottom_identity", None, {"a": elems}, bottom_identity),
        Check("order_agrees", None, two, order_agrees),
        Check("hash_agrees", None, two, hash_agrees),
        Check("no_mutation", None, two, no_mutation),
    ]


# -- the claims of @morph and @monotone methods -------------------------------------------


def _method_check(cls: type[Lattice], plan: MethodPlan, elems: SearchStrategy[Any]) -> Check:
    name = plan.name
    assert plan.calls is not None

    def invoke(x: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
        pos, kw = call
        return getattr(x, name)(*pos, **kw)

    def snapshots(ex: dict[str, Any]) -> list[tuple[str, tuple[Any, str, Any]]]:
        pos, kw = ex["call"]
        snaps = [("a", _snapshot(ex["a"])), ("b", _snapshot(ex["b"]))]
        args = [*pos, *kw.values()]
        snaps += [
            (f"argument {i + 1}", _snapshot(v))
            for i, v in enumerate(args)
            if isinstance(v, Lattice)
        ]
        return snaps

    edge_calls = plan.edge_calls

    def each_call(body: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        """Run ``body`` on the drawn call, then on the calls whose arguments come from the
        example's own values (``edge_calls``); a failing call becomes the example's."""

        def run(ex: dict[str, Any]) -> None:
            body(ex)
            if edge_calls is None:
                return
            drawn = ex["call"]
            for call in edge_calls(ex["a"], ex["b"], []):
                if call == drawn:
                    continue
                ex["call"] = call
                body(ex)
            ex["call"] = drawn

        return run

    def morphism(ex: dict[str, Any]) -> None:
        a, b, call = ex["a"], ex["b"], ex["call"]
        snaps = snapshots(ex)
        j = _merge(cls, a, b, "a ⊔ b")
        fa, fb, fj = invoke(a, call), invoke(b, call), invoke(j, call)
        _check_unchanged(snaps, f"{name}(...)")
        ra, rb, rj = _as_result(fa, "f(a)"), _as_result(fb, "f(b)"), _as_result(fj, "f(a ⊔ b)")
        joined = _join(ra, rb, "f(a) and f(b)")
        if not _equal(rj, joined):
            raise _Failure(
                "f(a ⊔ b) != f(a) ⊔ f(b): it does not distribute over merge (is it only "
                "@monotone?)",
                {"a ⊔ b": j, "f(a)": fa, "f(b)": fb, "f(a ⊔ b)": fj, "f(a) ⊔ f(b)": joined},
            )

    def monotone(ex: dict[str, Any]) -> None:
        a, b, call = ex["a"], ex["b"], ex["call"]
        snaps = snapshots(ex)
        hi = _merge(cls, a, b, "a ⊔ b")
        flo, fhi = invoke(a, call), invoke(hi, call)
        _check_unchanged(snaps, f"{name}(...)")
        rlo, rhi = _as_result(flo, "f(a)"), _as_result(fhi, "f(a ⊔ b)")
        if not _leq(rlo, rhi, "f(a) and f(a ⊔ b)"):
            raise _Failure(
                "a <= a ⊔ b but not f(a) <= f(a ⊔ b): it does not preserve the order",
                {"a ⊔ b": hi, "f(a)": flo, "f(a ⊔ b)": fhi},
            )

    def show(ex: dict[str, Any]) -> dict[str, Any]:
        pos, kw = ex["call"]
        shown = [short_repr(p) for p in pos] + [f"{k}={short_repr(v)}" for k, v in kw.items()]
        return {"a": ex["a"], "b": ex["b"], "f": _Text(f"x.{name}({', '.join(shown)})")}

    calls_for = plan.calls_for

    @st.composite
    def inputs(draw: Any) -> dict[str, Any]:
        a, b = draw(elems), draw(elems)
        call = draw(plan.calls if calls_for is None else calls_for(a, b))
        return {"a": a, "b": b, "call": call}

    law, claim = ("morphism", morphism) if plan.kind == "morph" else ("monotone", monotone)
    body = each_call(claim)
    return Check(
        law, name, {"a": elems, "b": elems, "call": plan.calls}, body, show, inputs(), plan
    )


# -- the edge pass -------------------------------------------------------------------------

_EDGE_SAMPLES = 6


def _edge_samples(cls: type[Lattice], elems: SearchStrategy[Any]) -> list[Any]:
    """A few values found deterministically: ⊥, a pair ``a < b`` and an incomparable pair
    with its merge (when the lattice has them)."""
    out: list[Any] = [cls()]
    find_settings = settings(
        database=None,
        max_examples=300,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate,),  # no shrinking: it can take seconds, and needs no minimum
        suppress_health_check=list(HealthCheck),
    )

    def incomparable(a: Any, b: Any) -> bool:
        return not (a <= b) and not (b <= a)

    for cond in (lambda a, b: a < b, incomparable):

        def holds(ab: tuple[Any, Any], cond: Callable[[Any, Any], bool] = cond) -> bool:
            try:
                return bool(cond(*ab))
            except Exception:
                return False

        try:
            a, b = find(st.tuples(elems, elems), holds, settings=find_settings, random=Random(0))
        except Exception:  # none exists (a total order has no incomparable pair), or a bug the
            continue  # random examples will report
        out += [a, b]
        if cond is incomparable:
            with contextlib.suppress(Exception):
                out.append(a.merge(b))
    unique: list[Any] = []
    for v in out:
        with contextlib.suppress(Exception):
            if any(type(v) is type(u) and v == u for u in unique):
                continue
        unique.append(v)
    return unique[:_EDGE_SAMPLES]


def _twin(x: Any) -> Any:
    """A value equal to ``x`` but not the same object (``x`` itself when it cannot be copied)."""
    try:
        rebuild, args = x.__reduce__()[:2]  # a fresh object with the same state (no pickling)
        y = rebuild(*args)
        return y if type(y) is type(x) and y == x else x
    except Exception:
        return x


# -- running -------------------------------------------------------------------------------


def _profile() -> settings:
    """The active hypothesis settings profile (``settings.default`` is typed optional)."""
    current = settings.default
    return settings() if current is None else current


def _choose_seed(cls: type[Lattice], given_seed: int | None) -> int:
    if given_seed is not None:
        if isinstance(given_seed, bool) or not isinstance(given_seed, int):
            raise LawCheckError(cls, f"seed must be an int, got {short_repr(given_seed)}")
        return given_seed
    if _profile().derandomize:
        # The active profile asks for reproducible runs (CI): a seed fixed by the class name.
        return zlib.crc32(f"{cls.__module__}.{cls.__qualname__}".encode())
    return random.SystemRandom().randrange(2**32)


class Session:
    """Everything needed to run the checks of one lattice class (validated up front)."""

    def __init__(
        self,
        cls: Any,
        elements: SearchStrategy[Any] | None,
        args: Mapping[str, Any] | None,
        max_examples: int | None,
        seed_value: int | None,
        only_method: str | None = None,
        edge: bool = True,
    ) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Lattice)) or cls is Lattice:
            raise LawCheckError(
                cls if isinstance(cls, type) else type(cls),
                f"check_laws expects a Lattice subclass, got {short_repr(cls)}",
            )
        if max_examples is None:
            max_examples = _profile().max_examples
        if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
            raise LawCheckError(
                cls, f"max_examples must be a positive int, got {short_repr(max_examples)}"
            )
        if elements is None:
            elems = elements_of(cls)
            # Registered defaults fit the registered strategy's domain, so they apply only with
            # it; the caller's own args override them method by method.
            if args is None or isinstance(args, Mapping):
                args = {**default_args(cls), **(args or {})}
        elif isinstance(elements, SearchStrategy):
            elems = checked(cls, elements)
        else:
            raise LawCheckError(
                cls,
                f"elements must be a hypothesis strategy of {cls.__qualname__} values, got "
                f"{short_repr(elements)}",
                hint=f"e.g. elements=blooml.testing.elements({cls.__qualname__}) or "
                f"st.integers().map({cls.__qualname__})",
            )
        if not isinstance(edge, bool):
            raise LawCheckError(cls, f"edge must be True or False, got {short_repr(edge)}")
        self.cls = cls
        self.edge = edge
        self.elems = elems
        self._edge_samples: list[Any] | None = None
        self.max_examples = max_examples
        self.seed = _choose_seed(cls, seed_value)
        self.plans = plan_methods(cls, elems, args, only=only_method)
        self.merge_checks = _merge_checks(cls, elems)
        self.method_checks = [
            _method_check(cls, p, elems) for p in self.plans if p.calls is not None
        ]
        self.skipped = tuple(
            (p.name, f"args[{p.name!r}] is None") for p in self.plans if p.calls is None
        )

    @property
    def checks(self) -> list[Check]:
        """Merge laws first, then one check per method."""
        return [*self.merge_checks, *self.method_checks]

    def find(self, law: str, method: str | None = None) -> Check | None:
        """The check for ``law`` (and ``method``), or ``None`` (e.g. a skipped method)."""
        for check in self.checks:
            if check.law == law and check.method == method:
                return check
        return None

    @property
    def edge_samples(self) -> list[Any]:
        """The values the edge pass combines: ⊥, a pair ``a < b``, an incomparable pair and
        its merge, found deterministically (the same for every seed)."""
        if self._edge_samples is None:
            self._edge_samples = _edge_samples(self.cls, self.elems)
        return self._edge_samples

    def edge_examples(self, check: Check) -> list[dict[str, Any]]:
        """The deterministic examples the edge pass tries for ``check``: every sample, every
        pair of samples (equal ones included, and a value with an equal copy of it), every
        triple for associativity; for a method, a few calls per pair, with arguments taken
        from the pair's values."""
        samples = self.edge_samples
        names = set(check.inputs)
        if check.plan is not None:
            edge_calls = check.plan.edge_calls
            out = []
            for a, b in itertools.product(samples, repeat=2):
                calls = edge_calls(a, b, samples) if edge_calls is not None else []
                out += [{"a": a, "b": b, "call": c} for c in calls]
            return out
        if names == {"a"}:
            return [{"a": a} for a in samples]
        if names == {"a", "b"}:
            pairs = [{"a": a, "b": b} for a, b in itertools.product(samples, repeat=2)]
            return pairs + [{"a": a, "b": _twin(a)} for a in samples]
        return [
            dict(zip(("a", "b", "c"), abc, strict=True))
            for abc in itertools.product(samples, repeat=3)
        ]

    def _run_edges(self, check: Check) -> LawViolation | None:
        for ex in self.edge_examples(check):
            try:
                _run_body(check, ex)
            except _Failure as failure:
                failure.detail += " (found by the edge pass: ⊥, equal and incomparable values)"
                return self._violation(check, ex, failure)
        return None

    def _warn_hint_only(self, check: Check) -> None:
        plan = check.plan
        if plan is None or not plan.hinted or plan.stats["values"] or not plan.stats["hint"]:
            return
        params = ", ".join(f"{p!r} (type hint {h})" for p, h in plan.hinted)
        warnings.warn(
            LawCheckWarning(
                f"{self.cls.__qualname__}.{plan.name}: the arguments {params} came only from "
                "the bare type hint: no generated value held a value of that type, so they "
                "may never land where the claim could fail. Pass them with "
                f'args={{"{plan.name}": ...}} (check_laws or register; docs/testing.md)'
            ),
            stacklevel=3,
        )

    def run(self, check: Check) -> LawViolation | None:
        """Run one check: hypothesis (whose violations come shrunk), then, when it finds none
        and ``edge`` is on, the edge pass; the violation, or ``None`` when the law holds."""
        violation = self._run_random(check)
        if violation is None and self.edge:
            violation = self._run_edges(check)
        if violation is None:
            self._warn_hint_only(check)
        return violation

    def _run_random(self, check: Check) -> LawViolation | None:
        cls = self.cls
        last: dict[str, Any] = {}
        strategy = check.strategy
        if strategy is None:
            strategy = st.fixed_dictionaries(dict(check.inputs))

        @seed(self.seed)
        @settings(
            _profile(),
            max_examples=self.max_examples,
            deadline=None,
            database=None,
            derandomize=False,
            report_multiple_bugs=False,
            verbosity=Verbosity.quiet,
            phases=(Phase.explicit, Phase.generate, Phase.shrink),
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(ex=strategy)
        def law_holds(ex: dict[str, Any]) -> None:
            last.clear()
            last.update(ex)
            try:
                _run_body(check, ex)
            finally:
                last.update(ex)  # a method check names the call that failed in ex["call"]

        try:
            law_holds()
        except _Failure as failure:
            return self._violation(check, last, failure)
        except LawCheckError:
            raise
        except Flaky as exc:
            return self._violation(
                check,
                last,
                _Failure(
                    f"it failed only on some runs of the same example (nondeterministic?): {exc}"
                ),
            )
        except HypothesisException as exc:
            raise LawCheckError(
                cls, f"hypothesis could not run the {check.label} check: {exc}"
            ) from exc
        return None

    def _violation(self, check: Check, example: dict[str, Any], failure: _Failure) -> LawViolation:
        violation = LawViolation(
            self.cls,
            failure.law or check.law,
            check.method,
            check.show(example) if example else {},
            failure.observed,
            failure.detail,
            self.seed,
            self.max_examples,
        )
        violation.__cause__ = failure.cause
        return violation

    def report(self, passed: Iterable[str]) -> LawReport:
        """A :class:`LawReport` of the checks that passed."""
        return LawReport(self.cls, tuple(passed), self.skipped, self.max_examples, self.seed)

    def iter_results(self) -> Iterator[tuple[Check, LawViolation | None]]:
        """Run every check in order, yielding each with its violation (or ``None``)."""
        for check in self.checks:
            yield check, self.run(check)


def _run_body(check: Check, ex: dict[str, Any]) -> None:
    """Run ``check`` on ``ex``; an unexpected exception becomes a ``_Failure``."""
    try:
        check.body(ex)
    except (_Failure, LawCheckError, HypothesisException):
        raise
    except Exception as exc:
        raise _Failure(
            f"it raised {type(exc).__name__}: {exc}"
            + (" (if these arguments are invalid, narrow them with args=)" if check.method else ""),
            cause=exc,
        ) from exc


def check_laws(
    cls: type[Lattice],
    elements: SearchStrategy[Any] | None = None,
    *,
    args: Mapping[str, Any] | None = None,
    max_examples: int = 200,
    seed: int | None = None,
    edge: bool = True,
) -> LawReport:
    """Check with hypothesis that ``cls`` is a lattice and that its method marks are true.

    Checked, each on up to ``max_examples`` drawn examples: merge is associative, commutative
    and idempotent; ``cls()`` (and ``cls.bottom()``) is an identity on both sides, and
    ``is_bottom()`` agrees with it; ``<=``,
    ``<``, ``>=``, ``>`` and ``|`` agree with merge; equal values hash equally; merge never
    changes its inputs; every ``@morph`` method distributes over merge
    (``f(a ⊔ b) == f(a) ⊔ f(b)``) and every ``@monotone`` method preserves the order
    (``f(a) <= f(a ⊔ b)``), neither changing its inputs. A method returning ``None`` returns ⊥;
    one returning a list, tuple or set returns a collection of rows, compared as a set.

    Args:
        cls: the lattice class.
        elements: strategy of ``cls`` values; default ``blooml.testing.elements(cls)``.
        args: arguments of the methods, by method name: a strategy (for a one-parameter method,
            of the argument; otherwise of a tuple of positional arguments), a dict of parameter
            name -> strategy, or ``None`` to skip the method knowingly. Methods not named get
            arguments from their type hints (a parameter typed as ``cls`` draws from
            ``elements``); a parameter with a plain type hint (``x: int``) also draws from the
            values under test: the parts of that type inside the two lattice values of the
            example (the numbers inside a ``Hull``), their neighbours and midpoints. When no
            generated value held such a part, the check warns (:class:`LawCheckWarning`):
            its arguments came only from the bare type hint. Without ``elements``, the
            arguments registered with the class's strategy come first (every builtin and CRDT
            has them, so ``check_laws(lset)`` needs no ``args``;
            ``register(Cls, strategy, args=...)`` does the same for yours).
        max_examples: random examples per check.
        seed: replay a run (a :class:`LawViolation` names its seed); default random, or fixed
            per class when the hypothesis profile sets ``derandomize``.
        edge: also run a deterministic edge pass (default on): every check on ⊥, pairs of
            equal values, a pair ``a < b`` and an incomparable pair with its merge, found the
            same way on every run, and for methods on arguments taken from those values.

    Returns:
        A :class:`LawReport` listing what was checked and skipped.

    Raises:
        LawViolation: a law fails; it names the law, the method and the shrunk counterexample.
        LawCheckError: the check cannot run (no strategy for ``cls``, method arguments that
            cannot be derived and are not given, a malformed argument).

    Example::

        check_laws(lmax, args={"gt": st.integers(), "gt_eq": st.integers()})
    """
    session = Session(cls, elements, args, max_examples, seed, edge=edge)
    passed = []
    for check, violation in session.iter_results():
        if violation is not None:
            raise violation
        passed.append(check.label)
    return session.report(passed)
