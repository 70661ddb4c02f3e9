"""Lattices over totally ordered domains: ``lbool``, ``lmax`` and ``lmin``.

``lmax``/``lmin`` work over any totally ordered domain (numbers, strings, tuples, ...). Their ⊥
(−∞ for ``lmax``, +∞ for ``lmin``) is represented internally and revealed as ``None``.

``None`` given to a constructor is ⊥: ``lmax(None) == lmax()``, ``lmin(None) == lmin()`` and
``lbool(None) == lbool()``, as SQL's aggregates skip NULL and Spark's ``greatest``/``least``
do (so ``lmin(l.c)`` in a rule gives ⊥ for a row whose ``c`` is ``None`` on every engine), and
as Hydro's ``WithBot`` takes ``None`` for bottom. ⊥ adds nothing to a merge.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from numbers import Number, Real
from typing import Any, ClassVar, TypeVar

from blooml.errors import LatticeValueError
from blooml.lattices._base import Lattice, _set_h, _set_v, morph

__all__ = ["lbool", "lmax", "lmin", "order_sign"]

T = TypeVar("T")
_new = object.__new__

# Results of int arithmetic (``lmin + int``: path costs) are interned per class: a rule derives
# the same small costs over and over, and returning the already-built value costs one dict
# lookup where building one costs an allocation and two slot stores. Values are immutable, so
# sharing them is invisible except to ``is``. Keys are exact ints only (``1.0`` and ``True``
# would otherwise find the value of ``1``); the table is emptied when it reaches the cap.
_INTERN_CAP = 4096
_INTERNED: dict[type, dict[int, Any]] = {}


def _interned(cls: type, r: int) -> Any:
    """The ``cls`` value of the exact int ``r``, shared when it was built before."""
    table = _INTERNED[cls]
    o = table.get(r)
    if o is None:
        o = _new(cls)
        _set_v(o, r)
        _set_h(o, None)
        if len(table) >= _INTERN_CAP:
            table.clear()
        table[r] = o
    return o


def _check_ordered(cls_name: str, value: Any) -> None:
    t = type(value)
    if t is int or t is str:  # the common case, always totally ordered: skip the general checks
        return
    if t is float and value == value:  # a float that is not NaN
        return
    if isinstance(value, Lattice):
        raise LatticeValueError(
            cls_name, value, f"expected a plain ordered value, not a lattice ({value!r})"
        )
    if isinstance(value, AbstractSet):
        # <= on sets is inclusion, a partial order: max/min would depend on merge order.
        raise LatticeValueError(
            cls_name, value, "sets are only partially ordered (by inclusion); use lset"
        )
    try:
        ok = value <= value
    except TypeError:
        raise LatticeValueError(
            cls_name, value, f"{type(value).__name__} values are not totally ordered"
        ) from None
    if ok is not True:
        # NaN (and anything else not reflexive under <=) breaks idempotence of max/min.
        raise LatticeValueError(cls_name, value, "value is not comparable with itself (NaN?)")
    try:
        hash(value)
    except TypeError:
        raise LatticeValueError(
            cls_name, value, f"{type(value).__name__} values are mutable (unhashable); use a tuple"
        ) from None


def _is_real(v: Any) -> bool:
    """Whether ``v`` is a real number (the domain that wins when numbers meet other values)."""
    return isinstance(v, Real) and not isinstance(v, bool)


def _check_number(cls_name: str, op: str, n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, Number) or (isinstance(n, float) and math.isnan(n)):
        raise TypeError(f"{cls_name} {op} expects a number, got {n!r}")


class _Ordered(Lattice):
    """Shared machinery of ``lmax`` and ``lmin`` (``_v is None`` means ⊥)."""

    __slots__ = ()

    #: The one definition of the order that engines' hot paths use instead of calling methods:
    #: ``"min"`` when ``merge`` keeps the value with the smaller raw value ``_v`` (``lmin``),
    #: ``"max"`` the larger (``lmax``), ``None`` when only ``merge`` decides. ⊥ has ``_v is
    #: None``. Declaring it also promises that ``+``/``-`` with a number shift ``_v`` (path
    #: costs). Subclasses inherit it unless they override ``merge``, ``__add__``, ``__radd__``
    #: or ``__sub__`` without declaring it again (see :func:`order_sign`).
    raw_order: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "raw_order" not in own and any(
            n in own for n in ("merge", "__add__", "__radd__", "__sub__")
        ):
            cls.raw_order = None

    def __init__(self, value: Any = None) -> None:
        # None (no argument, or a NULL cell read into ``lmin(l.c)``) is ⊥
        if value is not None:
            _check_ordered(type(self).wrapper_name, value)
        super().__init__(value)

    def _shifted(self, n: Any, op: str) -> Any:
        """``self + n`` (``op == "+"``) or ``self - n``; ⊥ stays ⊥. Rule bodies call this per
        tuple (path costs), so plain ints and floats take a path without the ABC checks."""
        v = self._v
        tn = type(n)
        if tn is not int and not (tn is float and n == n):
            _check_number(type(self).wrapper_name, op, n)
        if v is None:
            return self
        r = v + n if op == "+" else v - n
        if r != r:  # inf - inf
            raise LatticeValueError(type(self).wrapper_name, r, f"{v!r} {op} {n!r} is NaN")
        return type(self)._make(r)

    def _cmp_error(self, other: Any) -> LatticeValueError:
        """The error for two values that cannot be compared, blaming the one outside the
        domain: a non-number next to a number (whichever side it is on), else the incoming
        ``other`` (docs/bloom.md, "Mixed values in lmax and lmin")."""
        bad, good = other._v, self._v
        if _is_real(bad) and not _is_real(good):
            bad, good = good, bad
        err = LatticeValueError(
            type(self).wrapper_name,
            bad,
            f"cannot be compared with {good!r}: the values of one {type(self).wrapper_name} "
            f"must be mutually comparable ({type(bad).__name__} vs {type(good).__name__})",
        )
        err.other = good  # type: ignore[attr-defined]
        return err

    def __repr__(self) -> str:
        name = type(self).__qualname__
        return f"{name}()" if self._v is None else f"{name}({self._v!r})"


class lmax(_Ordered):
    """The maximum of values from a totally ordered domain; ⊥ is −∞ (``lmax()``, or
    ``lmax(None)``: a NULL adds nothing).

    >>> lmax(3).merge(lmax(5))
    lmax(5)
    >>> lmax(3) <= lmax(5), lmax(5).gt(4)
    (True, lbool(True))
    """

    __slots__ = ()
    wrapper_name = "lmax"
    raw_order = "max"
    merge_is_exact = True  # the larger operand itself, ``self`` on a tie

    def merge(self, other: lmax) -> lmax:
        """Return the larger of the two (⊥ is the identity)."""
        a, b = self._v, other._v
        if b is None:
            return self
        if a is None:
            return other
        try:
            if b > a:
                return other
            if a >= b:
                return self
        except TypeError:
            raise self._cmp_error(other) from None
        raise self._cmp_error(other)  # partially ordered values: no order-independent max

    @morph
    def gt(self, n: Any) -> lbool:
        """``lbool`` that holds once the maximum exceeds ``n``."""
        return lbool(self._v is not None and bool(self._v > n))

    @morph
    def gt_eq(self, n: Any) -> lbool:
        """``lbool`` that holds once the maximum reaches ``n``."""
        return lbool(self._v is not None and bool(self._v >= n))

    @morph
    def min_of(self, n: Any) -> lmax:
        """The maximum capped at ``n`` (Bud's ``min_of``, used for widest paths); ⊥ stays ⊥."""
        if self._v is None:
            return self
        return self if self._v <= n else type(self)(n)

    @morph
    def __add__(self, n: Any) -> lmax:
        """Add a number to the maximum (−∞ + n is −∞)."""
        v = self._v
        # exact ints (not bool) on this very class (a subclass keeps its type via _shifted)
        if type(n) is int and type(v) is int and type(self) is lmax:
            t = _INTERNED_LMAX
            r = v + n
            o = t.get(r)
            return o if o is not None else _interned(lmax, r)
        return self._shifted(n, "+")

    @morph
    def __radd__(self, n: Any) -> lmax:
        """``n + lmax``: the same as ``lmax + n``."""
        return self.__add__(n)

    @morph
    def __sub__(self, n: Any) -> lmax:
        """Subtract a number from the maximum (−∞ − n is −∞)."""
        v = self._v
        if type(n) is int and type(v) is int and type(self) is lmax:
            return _interned(lmax, v - n)
        return self._shifted(n, "-")


class lmin(_Ordered):
    """The minimum of values from a totally ordered domain; ⊥ is +∞ (``lmin()``, or
    ``lmin(None)``: a NULL adds nothing).

    Growing in the ``lmin`` lattice means getting *smaller*: ``lmin(5) <= lmin(3)``.

    >>> lmin(3).merge(lmin(5))
    lmin(3)
    """

    __slots__ = ()
    wrapper_name = "lmin"
    raw_order = "min"
    merge_is_exact = True  # the smaller operand itself, ``self`` on a tie

    def merge(self, other: lmin) -> lmin:
        """Return the smaller of the two (⊥ is the identity)."""
        a, b = self._v, other._v
        if b is None:
            return self
        if a is None:
            return other
        try:
            if b < a:
                return other
            if a <= b:
                return self
        except TypeError:
            raise self._cmp_error(other) from None
        raise self._cmp_error(other)  # partially ordered values: no order-independent min

    @morph
    def lt(self, n: Any) -> lbool:
        """``lbool`` that holds once the minimum is below ``n``."""
        return lbool(self._v is not None and bool(self._v < n))

    @morph
    def lt_eq(self, n: Any) -> lbool:
        """``lbool`` that holds once the minimum is at most ``n``."""
        return lbool(self._v is not None and bool(self._v <= n))

    @morph
    def max_of(self, n: Any) -> lmin:
        """The minimum floored at ``n`` (the dual of ``lmax.min_of``); ⊥ stays ⊥."""
        if self._v is None:
            return self
        return self if self._v >= n else type(self)(n)

    @morph
    def __add__(self, n: Any) -> lmin:
        """Add a number to the minimum (+∞ + n is +∞); path costs use this."""
        v = self._v
        # exact ints (not bool) on this very class (a subclass keeps its type via _shifted)
        if type(n) is int and type(v) is int and type(self) is lmin:
            t = _INTERNED_LMIN
            r = v + n
            o = t.get(r)
            return o if o is not None else _interned(lmin, r)
        return self._shifted(n, "+")

    @morph
    def __radd__(self, n: Any) -> lmin:
        """``n + lmin``: the same as ``lmin + n``."""
        return self.__add__(n)

    @morph
    def __sub__(self, n: Any) -> lmin:
        """Subtract a number from the minimum (+∞ − n is +∞)."""
        v = self._v
        if type(n) is int and type(v) is int and type(self) is lmin:
            return _interned(lmin, v - n)
        return self._shifted(n, "-")


def order_sign(cls: Any) -> int:
    """``-1`` when values of ``cls`` merge to the smaller raw value (``lmin`` and its
    subclasses), ``1`` the larger (``lmax``), ``0`` otherwise (any other class or type): the
    class's ``raw_order`` as a number, for hot loops that compare raw values."""
    if not (isinstance(cls, type) and issubclass(cls, _Ordered)):
        return 0
    return {"min": -1, "max": 1}.get(cls.raw_order or "", 0)


_INTERNED_LMAX: dict[int, lmax] = _INTERNED.setdefault(lmax, {})
_INTERNED_LMIN: dict[int, lmin] = _INTERNED.setdefault(lmin, {})


class lbool(Lattice):
    """A condition that, once true, stays true; ⊥ is ``False`` (``lbool()``; ``lbool(None)``
    is ⊥ too, as a NULL cell is).

    ``bool(lbool(True))`` is ``True``, so values read naturally in ``if`` statements outside
    rules.
    """

    __slots__ = ()
    wrapper_name = "lbool"

    def __init__(self, value: bool | None = False) -> None:
        if value is None:
            value = False
        elif not isinstance(value, bool):
            raise LatticeValueError("lbool", value, "expected True, False or None (⊥)")
        super().__init__(value)

    def merge(self, other: lbool) -> lbool:
        """Logical or."""
        return self if self._v else other

    @morph
    def when_true(self, fn: Callable[[], T]) -> T | None:
        """Return ``fn()`` when true; when false, ``fn`` is not called and ``None`` (nothing,
        the ⊥ of any result) is returned.

        In a rule, ``self.done.when_true(lambda: [(addr,)])`` derives those rows once ``done``
        holds.
        """
        return fn() if self._v else None

    def __bool__(self) -> bool:
        return self._v

    def __repr__(self) -> str:
        return f"lbool({self._v!r})"
