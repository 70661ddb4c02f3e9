"""``LocalNetwork``: several programs in one process exchanging channel messages."""

from __future__ import annotations

import random
from typing import Any

from blooml.errors import ProgramError

__all__ = ["LocalNetwork"]


class LocalNetwork:
    """Connects programs by address; ``tick()`` ticks every node in registration order.

    A program joins with ``P(addr="a", network=net)``. A message sent in a tick goes into the
    receiver's input and is visible at the receiver's next tick (for a node ticked later in the
    same ``net.tick()``, that is this round).

    Args:
        seed: with ``max_delay`` or ``dup_prob``, seeds the choice of delays and duplicates.
        max_delay: each message is held back 0..max_delay extra rounds of ``net.tick()``
            (reordering messages across rounds).
        dup_prob: probability that a message is delivered twice.
    """

    def __init__(self, seed: int | None = None, *, max_delay: int = 0, dup_prob: float = 0.0):
        if max_delay < 0 or not 0.0 <= dup_prob <= 1.0:
            raise ProgramError("LocalNetwork: max_delay must be >= 0 and dup_prob in [0, 1]")
        self.nodes: dict[str, Any] = {}
        self.max_delay = max_delay
        self.dup_prob = dup_prob
        self._rng = random.Random(seed)
        self._held: list[tuple[int, str, str, tuple[Any, ...]]] = []
        self.rounds = 0
        self.sent = 0

    def register(self, program: Any) -> None:
        """Add ``program`` under its address (done by ``Program(network=...)``)."""
        addr = program.addr
        if addr in self.nodes:
            raise ProgramError(f"LocalNetwork: address {addr!r} is already taken")
        self.nodes[addr] = program
        program._rt.network = self

    def check(self, rt: Any, addr: Any, chan: str, row: Any) -> None:
        """Validate a message before its tick commits."""
        target = self.nodes.get(addr)
        if target is None:
            raise ProgramError(
                f"channel {chan!r}: message {tuple(row)!r} is addressed to {addr!r}, which is "
                f"not on this network (nodes: {sorted(self.nodes)})"
            )
        rel = target._rt.rels.get(chan)
        if rel is None or rel.info.kind != "channel":
            raise ProgramError(
                f"channel {chan!r}: the program at {addr!r} has no channel of that name"
            )
        if rel.arity != len(row):
            raise ProgramError(
                f"channel {chan!r}: the program at {addr!r} declares {rel.arity} columns, the "
                f"message has {len(row)}: {tuple(row)!r}"
            )

    def send(self, rt: Any, addr: Any, chan: str, row: tuple[Any, ...]) -> None:
        """Deliver (or hold back) one message."""
        self.sent += 1
        copies = 2 if self.dup_prob and self._rng.random() < self.dup_prob else 1
        for _ in range(copies):
            delay = self._rng.randint(0, self.max_delay) if self.max_delay else 0
            if delay:
                self._held.append((self.rounds + delay, addr, chan, row))
            else:
                self.nodes[addr]._rt.receive(chan, row)

    def tick(self, n: int = 1) -> None:
        """Tick every node once, ``n`` times, in registration order."""
        for _ in range(n):
            self.rounds += 1
            due = [h for h in self._held if h[0] <= self.rounds]
            self._held = [h for h in self._held if h[0] > self.rounds]
            for _, addr, chan, row in due:
                self.nodes[addr]._rt.receive(chan, row)
            for p in list(self.nodes.values()):
                p.tick()

    def quiescent(self) -> bool:
        """Whether no message is held back."""
        return not self._held

    def __repr__(self) -> str:
        return f"<LocalNetwork {sorted(self.nodes)} round {self.rounds}>"
