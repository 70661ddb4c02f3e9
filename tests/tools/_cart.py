"""Traces of the shopping-cart example (client and server on a ``LocalNetwork``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from blooml import LocalNetwork

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cart_module() -> ModuleType:
    """``examples/shopping_cart.py`` as a module (cached)."""
    name = "blooml_tools_shopping_cart"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / "shopping_cart.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def cart_traces(tmp_path: Path, *, shared: Any = None) -> tuple[list[str], Any]:
    """Run one cart session with delays (seed 3) tracing client and server; return the trace
    files and the client. With ``shared`` (a ``Tracer``), both nodes write to it instead."""
    cart = cart_module()
    net = LocalNetwork(seed=3, max_delay=2)
    files = [str(tmp_path / "client.jsonl"), str(tmp_path / "server.jsonl")]
    client = cart.CartClient(addr="client", network=net, trace=shared or files[0])
    cart.DisorderlyCart(addr="server", network=net, trace=shared or files[1])
    client.client_checkout.insert([("server", "client", "s1", 3)])
    for r, item, q in [("r1", "apple", 2), ("r2", "pear", 1), ("r3", "apple", -1)]:
        client.client_action.insert([("server", "client", "s1", r, item, q)])
        net.tick()
    net.tick(6)
    assert [tuple(r) for r in client.response] == [("s1", (("apple", 1), ("pear", 1)))]
    return files, client
