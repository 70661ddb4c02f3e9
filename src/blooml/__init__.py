"""blooml: lattices, CRDTs and Bloom^L programs for Python.

Layers (see ``docs/architecture.md``): :mod:`blooml.lattices` (values), :mod:`blooml.testing`
(law checker), :mod:`blooml.bloom` (the DSL), :mod:`blooml.ir` (the rule IR),
:mod:`blooml.engine` (the embedded engine), :mod:`blooml.dataflow` (PomoFlow, incremental
dataflow) and :mod:`blooml.spark` (the Spark engine, needs the ``spark`` extra).
"""

from blooml.errors import (
    BloomError,
    BloomlError,
    KeyConstraintError,
    LatticeTypeError,
    LatticeValueError,
    NotSupportedOnSpark,
    UnstratifiableError,
)
from blooml.lattices import *  # noqa: F403  (the lattice names are the package's own)
from blooml.lattices import __all__ as _lattice_names

__version__ = "0.1.0"

# -- rule layer (bloom/) --
from blooml.bloom import (
    Program,
    accum,
    avg,
    bloom,
    bool_and,
    bool_or,
    channel,
    count,
    durable,
    interface,
    max_,
    min_,
    periodic,
    rows,
    scratch,
    sum_,
    table,
)

# -- network layer (net/) --
from blooml.net import LocalNetwork

__all__ = [
    "BloomError",
    "BloomlError",
    "KeyConstraintError",
    "LatticeTypeError",
    "LatticeValueError",
    "NotSupportedOnSpark",
    "UnstratifiableError",
    "__version__",
    *_lattice_names,
    "LocalNetwork",
    "Program",
    "accum",
    "avg",
    "bloom",
    "bool_and",
    "bool_or",
    "channel",
    "count",
    "durable",
    "interface",
    "max_",
    "min_",
    "periodic",
    "rows",
    "scratch",
    "sum_",
    "table",
]
