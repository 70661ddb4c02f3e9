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

__all__ = ["local_network_class", "new_node", "new_runtime", "open_durable"]


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
    network = importlib.import_module("blooml.net")
    cls: type = network.LocalNetwork
    return cls


def new_node(program: Any, **options: Any) -> Any:
    """Make ``program`` a network node (``blooml.net.Node``): bind its ``host:port`` address,
    or, without one, run it with loopback channels only. The node becomes ``program._rt.node``
    (and, with a socket, the program's transport). ``options`` are ``Node``'s (``transport``,
    ``cluster_key``)."""
    node = importlib.import_module("blooml.net.node")
    return node.Node(program, **options)


def open_durable(runtime: Any, data_dir: Any) -> None:
    """Record ``data_dir`` on ``runtime`` and, if its program declares durable tables or
    lattice variables, open their store there (``blooml.net.durable``), restoring what a
    previous run committed; the store then writes every committed tick."""
    runtime.data_dir = data_dir
    ir = runtime.ir
    if any(c.durable for c in ir.collections.values()) or any(
        v.durable for v in ir.lattices.values()
    ):
        durable = importlib.import_module("blooml.net.durable")
        runtime.durable = durable.DurableStore(runtime, data_dir)
