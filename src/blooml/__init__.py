"""blooml: lattices, CRDTs and Bloom^L programs for Python.

Layers (see ``docs/architecture.md``): :mod:`blooml.lattices` (values), :mod:`blooml.testing`
(law checker), :mod:`blooml.bloom` (the DSL), :mod:`blooml.ir` (the rule IR),
:mod:`blooml.engine` (the embedded engine), :mod:`blooml.dataflow` (PomoFlow, incremental
dataflow) and :mod:`blooml.spark` (the Spark engine, needs the ``spark`` extra).

The names re-exported here are loaded lazily (PEP 562): ``import blooml`` or
``import blooml.lattices`` loads neither the DSL nor the engine; ``blooml.Program`` loads the
DSL on first use.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from blooml.bloom import (
        Program,
        accum,
        avg,
        bloom,
        bool_and,
        bool_or,
        channel,
        count,
        interface,
        lift,
        max_,
        min_,
        periodic,
        reads,
        rows,
        scratch,
        sum_,
        table,
    )
    from blooml.engine.network import LocalNetwork
    from blooml.errors import (
        BloomlError,
        KeyConstraintError,
        LatticeTypeError,
        LatticeValueError,
        NotSupportedOnSpark,
        ProgramError,
        StratificationError,
    )
    from blooml.lattices import (
        Lattice,
        LatticeBuilder,
        kind_of,
        l2pset,
        lattice_class,
        lbag,
        lbool,
        ldompair,
        lgcounter,
        llww,
        lmap,
        lmax,
        lmin,
        lmvreg,
        lorset,
        lpair,
        lpncounter,
        lpset,
        lset,
        lvclock,
        monotone,
        morph,
        registered_lattices,
    )

_ERRORS = (
    "BloomlError",
    "KeyConstraintError",
    "LatticeTypeError",
    "LatticeValueError",
    "NotSupportedOnSpark",
    "ProgramError",
    "StratificationError",
)
_LATTICES = (
    "Lattice",
    "LatticeBuilder",
    "kind_of",
    "l2pset",
    "lattice_class",
    "lbag",
    "lbool",
    "ldompair",
    "lgcounter",
    "lift",
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
)
_RULES = (
    "Program",
    "accum",
    "avg",
    "bloom",
    "bool_and",
    "bool_or",
    "channel",
    "count",
    "interface",
    "lift",
    "max_",
    "min_",
    "periodic",
    "reads",
    "rows",
    "scratch",
    "sum_",
    "table",
)

# name -> the module that defines it (imported on first access)
_WHERE: dict[str, str] = {
    **dict.fromkeys(_ERRORS, "blooml.errors"),
    **dict.fromkeys(_LATTICES, "blooml.lattices"),
    **dict.fromkeys(_RULES, "blooml.bloom"),
    "LocalNetwork": "blooml.engine.network",
}

# Deprecated for one release: the very same class as the replacement, reading it warns.
_DEPRECATED = {"BloomError": "ProgramError", "UnstratifiableError": "StratificationError"}

# Spelled out so type checkers see the names (tests/test_names.py checks it against _WHERE).
__all__ = [
    "BloomlError",
    "KeyConstraintError",
    "Lattice",
    "LatticeBuilder",
    "LatticeTypeError",
    "LatticeValueError",
    "LocalNetwork",
    "NotSupportedOnSpark",
    "Program",
    "ProgramError",
    "StratificationError",
    "__version__",
    "accum",
    "avg",
    "bloom",
    "bool_and",
    "bool_or",
    "channel",
    "count",
    "interface",
    "kind_of",
    "l2pset",
    "lattice_class",
    "lbag",
    "lbool",
    "ldompair",
    "lgcounter",
    "lift",
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
    "max_",
    "min_",
    "monotone",
    "morph",
    "periodic",
    "reads",
    "registered_lattices",
    "rows",
    "scratch",
    "sum_",
    "table",
]


def __getattr__(name: str) -> Any:
    """Load a re-exported name from its module on first access (PEP 562)."""
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    new = _DEPRECATED.get(name)
    if new is not None:
        warnings.warn(
            f"blooml.{name} is deprecated; use blooml.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    raise AttributeError(f"module 'blooml' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's own globals plus every lazily re-exported name."""
    return sorted(set(globals()) | set(_WHERE))


class _Root(types.ModuleType):
    """The root module's type: ``blooml.bloom`` is the ``@bloom`` decorator, not the package.

    Importing the subpackage :mod:`blooml.bloom` makes the import system set the attribute
    ``bloom`` of this module to the subpackage; the re-exported decorator of the same name
    wins instead (the subpackage stays in ``sys.modules``), as it did when the re-exports were
    eager.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "bloom" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Root
