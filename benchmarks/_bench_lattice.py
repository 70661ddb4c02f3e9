"""A user lattice for the Spark benchmarks, importable on the workers (the benchmark puts this
folder on their ``PYTHONPATH``, as ``--py-files`` ships a user's module)."""

from __future__ import annotations

from typing import Any

from blooml.lattices import Lattice


class lmaxuser(Lattice):
    """A user-written max lattice (``lmax`` as a user would write it: no SQL lowering)."""

    __slots__ = ()

    def __init__(self, value: Any = None) -> None:
        super().__init__(value)

    def merge(self, other: lmaxuser) -> lmaxuser:
        """The larger value (None is ⊥)."""
        if other._v is None or (self._v is not None and self._v >= other._v):
            return self
        return other
