"""A user lattice for the Spark tests, importable on the workers (conftest puts this folder on
their ``PYTHONPATH``, as ``--py-files`` would ship a user's module)."""

from __future__ import annotations

from blooml.errors import LatticeValueError
from blooml.lattices import Lattice


class lsum(Lattice):
    """The max of ints, which refuses 13 in merge (to test errors raised on workers)."""

    __slots__ = ()

    def __init__(self, value: int = 0) -> None:
        super().__init__(value)

    def merge(self, other: lsum) -> lsum:
        """The larger value; raises on 13."""
        if other._v == 13 or self._v == 13:
            raise LatticeValueError("lsum", 13, "13 is unlucky")
        return self if self._v >= other._v else other
