"""Immutable lattice values: the base class, the builtins of Bloom^L and CRDTs built from them.

Every public name here is re-exported from :mod:`blooml`.
"""

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import (
    Lattice,
    LatticeBuilder,
    LatticeState,
    kind_of,
    lattice_class,
    monotone,
    morph,
    registered_lattices,
)

# -- collection lattices (sets.py, bag.py, map.py) --
from blooml.lattices.bag import lbag

# -- CRDTs (crdts/) --
from blooml.lattices.crdts import (
    l2pset,
    ldompair,
    lgcounter,
    llww,
    lmvreg,
    lorset,
    lpair,
    lpncounter,
    lvclock,
)
from blooml.lattices.map import lmap
from blooml.lattices.ordered import lbool, lmax, lmin
from blooml.lattices.sets import lpset, lset

__all__ = [
    "Lattice",
    "LatticeBuilder",
    "LatticeState",
    "LatticeTypeError",
    "LatticeValueError",
    "kind_of",
    "l2pset",
    "lattice_class",
    "lbag",
    "lbool",
    "ldompair",
    "lgcounter",
    "llww",
    "lmap",
    "lmax",
    "lmin",
    "lmvreg",
    "lorset",
    "lpair",
    "lpncounter",
    "lpset",
    "lset",
    "lvclock",
    "monotone",
    "morph",
    "registered_lattices",
]
