"""Circuit nodes (handles returned by the builder) and the memory report of a circuit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blooml.dataflow.circuit import Circuit

__all__ = ["MemoryReport", "Node"]

SOURCE = "source"
SINK = "sink"
OPERATOR = "operator"
FEEDBACK = "feedback"
IMPORT = "import"
CHILD = "child"
EXPORT = "export"


class Node:
    """A handle on one node of a circuit, returned by the builder methods.

    Attributes:
        circuit: the circuit the node belongs to.
        local_id: its index among that circuit's nodes.
        kind: ``"source"``, ``"sink"``, ``"operator"``, ``"feedback"``, ``"import"``,
            ``"child"`` or ``"export"``.
        label: a readable description.
    """

    __slots__ = ("circuit", "kind", "label", "local_id")

    def __init__(self, circuit: Circuit, local_id: int, kind: str, label: str) -> None:
        self.circuit = circuit
        self.local_id = local_id
        self.kind = kind
        self.label = label

    @property
    def global_id(self) -> tuple[int, ...]:
        """The path of local ids from the root circuit to this node."""
        return (*self.circuit.path, self.local_id)

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self!r} is a circuit node, not a value: it has no truth value (did you mean to "
            "compare the Z-sets returned by Circuit.step?)"
        )

    def __repr__(self) -> str:
        gid = ".".join(map(str, self.global_id))
        return f"<{self.kind} node {gid} {self.label!r} in circuit {self.circuit.name!r}>"


@dataclass(frozen=True)
class MemoryReport:
    """Memory held by the traces of a circuit (see :meth:`Circuit.memory`).

    Attributes:
        total_bytes: bytes of every trace's columns and time tuples (batches shared between
            traces counted once).
        entries: the number of stored updates over all traces.
        traces: ``{node description: (entries, bytes)}`` per trace-holding feedback node.
    """

    total_bytes: int
    entries: int
    traces: dict[str, tuple[int, int]] = field(default_factory=dict)
