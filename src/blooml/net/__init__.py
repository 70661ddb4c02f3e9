"""``blooml.net``: programs as network nodes, the wire codec, in-process networks.

See ``docs/net.md``. Layering: this package sits above the engine and the DSL (it runs
programs as nodes); neither imports it.
"""

import sys
from typing import Any

from blooml.net.codec import (
    FORMAT_VERSION,
    Envelope,
    decode,
    decode_envelope,
    encode,
    encode_envelope,
    encode_row,
    register,
    registered,
)
from blooml.net.durable import DurableStore
from blooml.net.local import LocalNetwork
from blooml.net.node import Node
from blooml.net.process import NodeProcess
from blooml.net.sim import Link, Message, Simulation

_node_module = sys.modules["blooml.net.node"]

__all__ = [
    "FORMAT_VERSION",
    "DurableStore",
    "Envelope",
    "Link",
    "LocalNetwork",
    "Message",
    "Node",
    "NodeProcess",
    "Simulation",
    "decode",
    "decode_envelope",
    "encode",
    "encode_envelope",
    "encode_row",
    "node",
    "register",
    "registered",
]


class _NodeOf:
    """``blooml.net.node(p)``: the node running ``p``; and ``blooml.net.node.RESOLVE_TTL``
    (and ``CONNECT_TIMEOUT``), the settings of the ``blooml.net.node`` module, read and set
    where the node uses them (``import blooml.net.node`` names this object: the package's
    ``node`` shadows its module)."""

    def __call__(self, program: object) -> Node:
        """The node running ``program`` (made on first use): its ``start``, ``stop``,
        ``run``, ``sync_do``, ``async_do``, ``on_tick``, ``watch``, ``on_error`` and
        ``stats`` are the program's own methods of those names, reachable here when the
        program's state shadows one of them (a collection named ``start``)."""
        from blooml.errors import ProgramError

        rt = getattr(program, "_rt", None)
        if rt is None:
            raise ProgramError(f"node(): {program!r} is not an initialised Program")
        if rt.node is None:
            if rt.network is not None:
                raise ProgramError(f"node(): {program!r} is on {rt.network!r}, which ticks it")
            Node(program)
        result: Node = rt.node
        return result

    def __getattr__(self, name: str) -> Any:
        # the module's names (Node, MAX_MESSAGE, parse_addr, the live settings)
        return getattr(_node_module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _node_module.SETTINGS:
            raise AttributeError(
                f"blooml.net.node.{name}: only the settings "
                f"{sorted(_node_module.SETTINGS)} can be set here"
            )
        _node_module.set_setting(name, value)

    def __repr__(self) -> str:
        return "<function blooml.net.node>"


#: ``node(p)``: the node running program ``p`` (see :class:`_NodeOf`).
node = _NodeOf()
