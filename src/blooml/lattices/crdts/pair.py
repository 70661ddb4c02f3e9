"""Pairs of lattices: the product ``lpair`` and the lexicographic ``ldompair``.

Both hold two lattice values of any (fixed) classes. Neither knows its component classes before it
holds a value, so ``lpair()`` and ``ldompair()`` are a *typeless* ⊥ added below every pair (as the
Hydro ``WithBot`` wrapper does): it merges into any pair as the identity. A pair whose two
components are ⊥ of their classes, ``lpair(lmax(), lset())``, is a different value, the least pair
*of those classes*; it is strictly above ``lpair()``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import Lattice, morph

__all__ = ["ldompair", "lpair"]

_NOARG: Any = object()
C = TypeVar("C", bound=Lattice)


def _components(name: str, first: Any, second: Any) -> tuple[Lattice, Lattice] | None:
    """Validate constructor arguments: both absent (⊥) or two lattice values."""
    if first is _NOARG and second is _NOARG:
        return None
    if first is _NOARG or second is _NOARG:
        given = second if first is _NOARG else first
        raise LatticeValueError(
            name, given, f"give both components ({name}(a, b)) or none ({name}() is ⊥)"
        )
    for which, comp in (("first", first), ("second", second)):
        if not isinstance(comp, Lattice):
            raise LatticeValueError(
                name,
                comp,
                f"the {which} component must be a lattice value (for example lmax(3)), "
                f"got a plain {type(comp).__name__}",
            )
    return first, second


def _check_same_classes(name: str, a: tuple[Lattice, Lattice], b: tuple[Lattice, Lattice]) -> None:
    for i, which in ((0, "first"), (1, "second")):
        if type(a[i]) is not type(b[i]):
            raise LatticeTypeError(type(a[i]), type(b[i]), f"merge ({name} {which} components)")


def _component(name: str, pair: tuple[Lattice, Lattice] | None, i: int, cls: Any) -> Any:
    if pair is None:
        return None if cls is None else cls()
    comp = pair[i]
    if cls is not None and type(comp) is not cls:
        which = ("first", "second")[i]
        raise TypeError(
            f"{name}.{which}(Cls={cls.__qualname__}): the {which} component is "
            f"{comp!r}, not a {cls.__qualname__}"
        )
    return comp


class _PairBase(Lattice):
    """Shared construction, repr and folding of the two pair lattices (``_v`` is None for ⊥)."""

    __slots__ = ()

    _v: tuple[Lattice, Lattice] | None

    def __init__(self, first: Lattice = _NOARG, second: Lattice = _NOARG) -> None:
        super().__init__(_components(type(self).wrapper_name, first, second))

    @classmethod
    def from_item(cls, item: Any) -> Any:
        """Convert a row value for folding: a pair value as it is, or a 2-tuple of lattices."""
        if type(item) is cls:
            return item
        if isinstance(item, tuple) and len(item) == 2:
            return cls(item[0], item[1])
        raise LatticeValueError(
            cls.wrapper_name, item, "a folded row must be a 2-tuple of lattice values"
        )

    def reveal(self) -> tuple[Lattice, Lattice] | None:
        """The two components as a tuple (``None`` for the typeless ⊥); non-monotone."""
        return self._v

    def __repr__(self) -> str:
        name = type(self).__qualname__
        if self._v is None:
            return f"{name}()"
        return f"{name}({self._v[0]!r}, {self._v[1]!r})"


class lpair(_PairBase):
    """The product of two lattices: merge is componentwise.

    ``lpair(a1, b1) ⊔ lpair(a2, b2) == lpair(a1 ⊔ a2, b1 ⊔ b2)``; ``(a1, b1) <= (a2, b2)`` iff
    both components are ``<=``. Both sides of a merge must have the same component classes.
    ``lpair()`` is the typeless ⊥ (see the module docstring).

    >>> from blooml import lmax, lmin
    >>> lpair(lmax(1), lmin(5)).merge(lpair(lmax(3), lmin(7)))
    lpair(lmax(3), lmin(5))

    Costs: a merge costs one merge of each component.
    """

    __slots__ = ()
    wrapper_name = "lpair"

    def merge(self, other: lpair) -> lpair:
        """Merge componentwise (``lpair()`` is the identity)."""
        a, b = self._v, other._v
        if b is None:
            return self
        if a is None:
            return other
        _check_same_classes("lpair", a, b)
        first = a[0].merge(b[0])
        second = a[1].merge(b[1])
        if first is a[0] and second is a[1]:
            return self
        if first is b[0] and second is b[1]:
            return other
        return lpair._make((first, second))

    @morph
    def first(self, Cls: type[C] | None = None) -> Any:
        """The first component (a morphism: projection distributes over a product's merge).

        On the typeless ⊥ the component class is unknown: returns ``Cls()`` when ``Cls`` is given,
        else ``None`` (nothing: the ⊥ of any lattice, as ``lbool.when_true``). A ``Cls`` that is not
        the component's class raises :class:`~blooml.errors.LatticeTypeError`.
        """
        return _component("lpair", self._v, 0, Cls)

    @morph
    def second(self, Cls: type[C] | None = None) -> Any:
        """The second component (a morphism); ⊥ handling as :meth:`first`."""
        return _component("lpair", self._v, 1, Cls)


class ldompair(_PairBase):
    """A lexicographic (dominating) pair: the first component decides, the second breaks ties.

    Merge of ``(a1, b1)`` and ``(a2, b2)``:

    * ``a1 < a2``: ``(a2, b2)`` (the pair with the larger first component wins whole);
    * ``a1 == a2``: ``(a1, b1 ⊔ b2)``;
    * ``a1`` and ``a2`` incomparable: ``(a1 ⊔ a2, ⊥)`` where ⊥ is the second component's ⊥.

    The last rule is what makes this the least upper bound of the lexicographic order, hence a
    true lattice for *any* first-component lattice: ``a1 ⊔ a2`` is strictly above both, so every
    second component is above the pair; the least one is ⊥. (Hydro's ``DomPair`` merges the seconds
    there instead, which breaks associativity unless the first lattice is totally ordered; Bud's
    ``lpair`` had the same bug.) With a totally ordered first component (``lmax`` timestamps, as in
    :class:`~blooml.lattices.crdts.registers.llww`) the third case never happens.

    >>> from blooml import lmax
    >>> ldompair(lmax(2), lmax(0)).merge(ldompair(lmax(1), lmax(9)))
    ldompair(lmax(2), lmax(0))

    Costs: a merge costs one merge of the first components, plus one of the seconds on a tie.
    """

    __slots__ = ()
    wrapper_name = "ldompair"

    def merge(self, other: ldompair) -> ldompair:
        """Lexicographic least upper bound (``ldompair()`` is the identity)."""
        a, b = self._v, other._v
        if b is None:
            return self
        if a is None:
            return other
        _check_same_classes("ldompair", a, b)
        k1, k2 = a[0], b[0]
        k = k1.merge(k2)
        up1 = k is not k1 and k != k1  # k1 < k
        up2 = k is not k2 and k != k2  # k2 < k
        if up1 and up2:  # incomparable firsts: the join is strictly above both
            return ldompair._make((k, type(a[1])()))
        if up1:  # k1 < k2
            return other
        if up2:  # k2 < k1
            return self
        second = a[1].merge(b[1])
        if second is a[1]:
            return self
        if second is b[1]:
            return other
        return ldompair._make((k1, second))

    @morph
    def first(self, Cls: type[C] | None = None) -> Any:
        """The first component (a morphism: every case of merge yields ``a1 ⊔ a2`` there).

        ⊥ handling as :meth:`lpair.first`.
        """
        return _component("ldompair", self._v, 0, Cls)

    def second(self, Cls: type[C] | None = None) -> Any:
        """The second component: NOT monotone (it resets to ⊥ when the first component grows).

        ``ldompair(lmax(1), lmax(5)) <= ldompair(lmax(2), lmax(0))`` but the seconds shrink, so
        the rule layer treats this as non-monotone. ⊥ handling as :meth:`lpair.first`.
        """
        return _component("ldompair", self._v, 1, Cls)
