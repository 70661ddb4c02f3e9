"""``check_confluence`` and its report (the work is done in ``blooml.net._confluence``).

``blooml.testing`` sits below the network layer (docs/architecture.md), so this module defines
the public function, its signature and its report, and loads the simulation-driving
implementation on first call.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConfluenceReport", "check_confluence"]

#: One timed input: ``(virtual time, node address, collection, rows)``.
TimedInput = tuple[float, str, str, Iterable[Any]]


@dataclass
class ConfluenceReport:
    """What :func:`check_confluence` found (it raises ``ConfluenceViolation`` instead when
    two schedules differ).

    Attributes:
        runs: the number of schedules run (the reference one included).
        outcome: the final contents of the outputs, ``{node: {output: contents}}`` (a
            collection as a sorted list of tuples, a lattice variable as its value).
        points_of_order: the static CALM points of order by program class (the non-monotone
            rules downstream of a channel that ``blooml analyze`` lists): where coordination
            is needed, or where the program must order things itself (as a seal does).
        messages: the number of messages of the reference run.
        seed: the seed used.
        max_delay: the longest ordinary delay used (the argument, or the default derived
            from the programs' periods).
    """

    runs: int
    outcome: dict[str, dict[str, Any]]
    points_of_order: dict[str, list[str]]
    messages: int
    seed: int
    schedules: list[list[str]] = field(default_factory=list, repr=False)
    max_delay: float = 0.0

    def __str__(self) -> str:
        n = sum(len(v) for v in self.points_of_order.values())
        head = (
            f"confluent under {self.runs} message schedules (seed {self.seed}, delays up "
            f"to {self.max_delay:g} s, {self.messages} messages in the reference run)"
        )
        if not n:
            return (
                head + "; no points of order: every rule after a channel is monotone "
                "and deletes or replaces nothing"
            )
        return (
            head
            + "; points of order (ordered by the program itself):\n"
            + _fmt_points(self.points_of_order)
        )


def _fmt_points(points: Mapping[str, list[str]]) -> str:
    lines = []
    for cls, pts in points.items():
        for p in pts:
            lines.append(f"  {cls}: {p}")
    return "\n".join(lines) if lines else "  (none)"


def check_confluence(
    factory: Callable[[Any], Iterable[Any] | Mapping[str, Any]],
    inputs: Mapping[str, Mapping[str, Iterable[Any]]] | Sequence[TimedInput],
    *,
    outputs: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    runs: int = 100,
    seed: int = 0,
    max_delay: float | None = None,
    duplicates: bool = True,
    until: float | None = None,
    max_events: int = 100_000,
) -> ConfluenceReport:
    """Run the program that ``factory`` builds under ``runs`` message schedules; raise
    :class:`~blooml.errors.ConfluenceViolation` if two of them end differently.

    A *schedule* is the fate of every message: its delay, and whether it arrives twice.
    Hypothesis draws them as the run goes and shrinks a failing schedule towards the smallest
    one (fewest late or duplicated messages, shortest delays). Every outcome is compared with
    the reference run, where every message arrives at once, in sending order, once. The runs
    are in a :class:`blooml.net.Simulation` (virtual time, the wire codec on every message).

    Args:
        factory: ``factory(sim)`` builds the nodes on a fresh simulation (``P(addr="a",
            network=sim)``) and returns them (an iterable or ``{addr: program}``). It is
            called once per run (and once first, to read the programs' timers and points
            of order), so it must build the same nodes every time.
        inputs: what is inserted from outside: ``{addr: {collection: rows}}`` at time 0, or
            ``[(time, addr, collection, rows), ...]`` at given virtual times.
        outputs: what to compare: collection and lattice-variable names (checked on every
            node that has them), or ``{addr: [names]}``. Default: each node's output
            interfaces, or, if it has none, its tables and lattice variables.
        runs: how many schedules to try (hypothesis examples; the reference run is extra).
        seed: seeds hypothesis: the same seed tries the same schedules.
        max_delay: the longest ordinary delay (virtual seconds) a message may get. Default:
            the longest ``periodic`` period or ``ttl`` of the programs, at least 0.5 and at
            most 5 (pass a longer one for programs with slower timers), so
            that messages are reordered across the program's timers. A message that
            carries a channel feeding a point of order may also be held back *late*, three
            times ``max_delay`` (past every timer and every ordinary delay).
        duplicates: whether a message may also arrive twice.
        until: run each schedule to this virtual time (for programs that never fall quiet,
            e.g. gossip on a ``periodic``); default: until no message is in flight and no
            node has input waiting, and, for programs with a ``periodic``, until a window
            of two periods plus ``max_delay`` passes with no message sent and no output
            changed (a timer may act after the input fell quiet: a timeout).
        max_events: the event budget of one run.

    Returns a :class:`ConfluenceReport` (with the programs' static CALM points of order, as
    ``blooml analyze`` finds them) when every schedule gave the reference run's outcome.
    Raises :class:`~blooml.errors.BloomlError` for bad arguments.
    """
    impl = importlib.import_module("blooml.net._confluence")
    report: ConfluenceReport = impl.check_confluence(
        factory,
        inputs,
        outputs=outputs,
        runs=runs,
        seed=seed,
        max_delay=max_delay,
        duplicates=duplicates,
        until=until,
        max_events=max_events,
    )
    return report
