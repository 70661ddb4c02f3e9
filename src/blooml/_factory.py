"""The one seam between the DSL and the engines.

The DSL (:mod:`blooml.bloom`) records rules as IR and evaluates nothing; an instance of a
``Program`` still needs something to run its IR. It asks this module, which imports the
embedded engine only when a program is first instantiated (so ``import blooml.bloom`` loads no
engine module), instead of importing :mod:`blooml.engine` itself. The layer test
(``tests/test_layers.py``) checks that this is the only way down.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["local_network_class", "new_runtime"]


def new_runtime(ir: Any, program: Any, proxy: Any, **options: Any) -> Any:
    """Return the embedded engine's runtime for ``program`` (an instance of a ``Program``).

    Args:
        ir: the program class's :class:`~blooml.ir.ProgramIR`.
        program: the program instance.
        proxy: the ``self`` that rule functions see (the DSL's ``_Self``).
        **options: the engine options ``Program.__init__`` accepts (``addr``, ``clock``,
            ``prioritize``, ``inline``).
    """
    runtime = importlib.import_module("blooml.engine.runtime")
    return runtime.Runtime(ir, program, proxy, **options)


def local_network_class() -> type:
    """Return the class that connects several programs in one process (``LocalNetwork``)."""
    network = importlib.import_module("blooml.engine.network")
    cls: type = network.LocalNetwork
    return cls
