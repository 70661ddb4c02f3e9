"""CRDTs built from lattices: each is a :class:`~blooml.lattices.Lattice` subclass.

One module per family: :mod:`.pair` (``lpair``, ``ldompair``), :mod:`.registers` (``llww``,
``lmvreg``), :mod:`.clock` (``lvclock``), :mod:`.counters` (``lgcounter``, ``lpncounter``) and
:mod:`.sets` (``lorset``, ``l2pset``). See ``docs/crdts.md``.
"""

from blooml.lattices.crdts.clock import lvclock
from blooml.lattices.crdts.counters import lgcounter, lpncounter
from blooml.lattices.crdts.pair import ldompair, lpair
from blooml.lattices.crdts.registers import llww, lmvreg
from blooml.lattices.crdts.sets import l2pset, lorset

__all__ = [
    "l2pset",
    "ldompair",
    "lgcounter",
    "llww",
    "lmvreg",
    "lorset",
    "lpair",
    "lpncounter",
    "lvclock",
]
