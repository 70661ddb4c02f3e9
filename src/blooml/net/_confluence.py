"""The work behind ``blooml.testing.check_confluence`` (see its docstring and docs/testing.md).

It lives in ``blooml.net`` because it drives a :class:`~blooml.net.Simulation`;
``blooml.testing`` sits below the network layer, defines the public function and its report,
and imports this module on first use.

A *schedule* is the fate of every message: its delay, and whether it arrives twice.
Hypothesis draws one delay (and one duplicate flag) per message as the run goes, so it can
shrink a failing schedule towards the smallest one (fewest late or duplicated messages, the
shortest delays). Every outcome is compared with the reference run, where every message
arrives at once, in sending order, once.

Two things aim the search at the bugs that timing hides (issue 20):

* delays are scaled to the program's clock: by default ``max_delay`` is the longest
  ``periodic`` period or ``ttl`` of the programs (at least 0.5 s, at most 5 s), so a message
  can arrive after a timer fired instead of before it;
* a message that carries a channel feeding a *point of order* (a ``notin``, a ``group``, a
  ``<-``, ...) may also be held back *late*: ``_LATE`` times ``max_delay``, past every timer
  and every ordinary delay. Hypothesis draws that flag per message (it shrinks to "on
  time"), so an election by timeout whose "I am the leader" message loses the race with the
  other node's timeout is found whatever the gap between the two timeouts, up to that bound.

A program with a ``periodic`` timer keeps running after its input fell quiet: timers can act
later (a timeout). Without ``until``, a run goes on in windows of two periods plus
``max_delay`` until one passes with no message sent and no output changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from blooml.errors import BloomlError, ConfluenceViolation, ScheduleFailure
from blooml.net.sim import Message, Simulation
from blooml.testing._confluence import ConfluenceReport, _fmt_points

__all__ = ["check_confluence", "points_of_order"]

#: One timed input: ``(virtual time, node address, collection, rows)``.
TimedInput = tuple[float, str, str, Iterable[Any]]
_STEPS = 1000  # a delay is drawn as k/_STEPS of max_delay: hypothesis shrinks k towards 0
_MIN_DELAY = 0.5  # the default max_delay of a program without timers (virtual seconds)
_MAX_DELAY = 5.0  # the default max_delay never exceeds this (an hour-long ttl is no timer)
_LATE = 3.0  # a message held back late arrives _LATE * max_delay after it was sent


def points_of_order(programs: Iterable[Any]) -> dict[str, list[str]]:
    """The CALM points of order of each program class among ``programs``, as
    ``blooml analyze`` prints them (``ProgramIR.nonmonotone_after_channels``)."""
    out: dict[str, list[str]] = {}
    for p in programs:
        cls = type(p)
        if cls.__qualname__ in out:
            continue
        lines = []
        for rule, chans in cls.ir().nonmonotone_after_channels():
            s = "s" if len(chans) > 1 else ""
            lines.append(f"[{rule.where}] {rule}    (after channel{s} {', '.join(chans)})")
        out[cls.__qualname__] = lines
    return out


def _clock_scale(programs: Iterable[Any]) -> float:
    """The longest ``periodic`` period or ``ttl`` among the programs' classes (0: none)."""
    longest = 0.0
    for p in programs:
        for info in type(p).ir().collections.values():
            for t in (info.period, info.ttl):
                if t is not None and math.isfinite(t):
                    longest = max(longest, float(t))
    return longest


def _has_timers(programs: Iterable[Any]) -> bool:
    return any(
        info.kind == "periodic" for p in programs for info in type(p).ir().collections.values()
    )


def _ordered_channels(programs: Iterable[Any]) -> set[str]:
    """Channels whose contents reach a point of order of some program."""
    out: set[str] = set()
    for cls in {type(p) for p in programs}:
        for _, chans in cls.ir().nonmonotone_after_channels():
            out.update(chans)
    return out


def _timed(inputs: Any) -> list[tuple[float, str, str, list[Any]]]:
    if isinstance(inputs, Mapping):
        out = []
        for addr, colls in inputs.items():
            if not isinstance(colls, Mapping):
                raise BloomlError(
                    f"check_confluence: inputs[{addr!r}] must map collection names to rows, "
                    f"got {colls!r}"
                )
            for coll, rows in colls.items():
                out.append((0.0, addr, coll, list(rows)))
        return out
    out = []
    for item in inputs:
        if not (isinstance(item, tuple) and len(item) == 4):
            raise BloomlError(
                "check_confluence: inputs is {node: {collection: rows}} or a list of "
                f"(time, node, collection, rows), got the item {item!r}"
            )
        t, addr, coll, rows = item
        out.append((float(t), addr, coll, list(rows)))
    return out


def _nodes(made: Any) -> dict[str, Any]:
    progs = list(made.values()) if isinstance(made, Mapping) else list(made)
    if not progs:
        raise BloomlError("check_confluence: the factory made no programs")
    return {p.addr: p for p in progs}


def _outputs_of(p: Any, outputs: Any) -> list[str]:
    ir = type(p).ir()
    if outputs is None:
        outs = [
            n
            for n, c in ir.collections.items()
            if c.kind == "interface" and c.direction == "output"
        ]
        if outs:
            return outs
        tables = [n for n, c in ir.collections.items() if c.kind == "table"]
        return tables + list(ir.lattices)
    names = outputs.get(p.addr, ()) if isinstance(outputs, Mapping) else outputs
    known = set(ir.collections) | set(ir.lattices)
    if isinstance(outputs, Mapping):
        bad = [n for n in names if n not in known]
        if bad:
            raise BloomlError(
                f"check_confluence: node {p.addr!r} ({type(p).__qualname__}) has no "
                f"collection or lattice variable {bad}"
            )
        return list(names)
    return [n for n in names if n in known]


def _contents(p: Any, name: str) -> Any:
    rt = p._rt
    if name in rt.lats:
        return rt.lats[name].value
    return sorted((tuple(r) for r in rt.view(name)), key=repr)


def _describe(msgs: list[Message]) -> list[str]:
    out = []
    for m in msgs:
        chans = ", ".join(f"{c} x{n}" if n > 1 else c for c, n in m.channels)
        if not m.delays:
            fate = m.fate
        elif len(m.delays) == 1:
            fate = f"delay {m.delays[0]:.3f}"
        else:
            fate = "twice, delays " + ", ".join(f"{d:.3f}" for d in m.delays)
        out.append(f"t={m.sent_at:.3f} {m.src} -> {m.dst} [{chans}] {fate}")
    return out


def _failure(
    exc: BaseException, sched: list[str], reference: bool, points: dict[str, list[str]]
) -> ScheduleFailure:
    """The report of a run whose tick failed: the exception and the schedule."""
    which = (
        "the reference schedule (every message at once, in order)"
        if reference
        else "a message schedule (shrunk by hypothesis)"
    )
    lines = [f"a tick failed under {which}: {type(exc).__name__}: {exc}", "", "schedule:"]
    lines += ["  " + s for s in sched] or ["  (no messages)"]
    lines.append("points of order (blooml analyze):")
    lines.append(_fmt_points(points))
    err = ScheduleFailure("\n".join(lines), sched, exc, reference, points)
    err.__cause__ = exc
    return err


def check_confluence(
    factory: Callable[[Simulation], Iterable[Any] | Mapping[str, Any]],
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
    """See :func:`blooml.testing.check_confluence`."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise BloomlError(f"check_confluence: runs must be a positive int, got {runs!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BloomlError(f"check_confluence: seed must be an int, got {seed!r}")
    if max_delay is not None and (
        isinstance(max_delay, bool)
        or not isinstance(max_delay, (int, float))
        or not 0 < max_delay < math.inf
    ):
        raise BloomlError(f"check_confluence: max_delay must be > 0 seconds, got {max_delay!r}")
    timed = _timed(inputs)
    probe = _nodes(factory(Simulation(seed=0)))
    scale = _clock_scale(probe.values())
    if max_delay is not None:
        delay_bound = float(max_delay)
    else:
        delay_bound = min(max(_MIN_DELAY, scale), _MAX_DELAY)
    scale = min(scale, delay_bound)  # the run windows follow the delays actually used
    ordered = _ordered_channels(probe.values())
    # a run of timed programs goes on while anything happens, a window at a time
    window = 2 * scale + delay_bound if _has_timers(probe.values()) else 0.0

    def snapshot(nodes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for addr, p in nodes.items():
            names = _outputs_of(p, outputs)
            if names:
                out[addr] = {n: _contents(p, n) for n in names}
        return out

    def settle(sim: Simulation) -> None:
        if not sim.settle(max_events=max_events):
            raise BloomlError(
                "check_confluence: a run did not settle (messages or input kept coming "
                f"for an hour of virtual time, at {sim.now:g} s); for a program that "
                "never falls quiet (gossip on a periodic), pass until=<virtual seconds>"
            )

    failures: list[BaseException | None] = [None]  # the last run's tick failure

    def run(schedule: Callable[[Message], Sequence[float]]) -> tuple[Any, list[str], Any]:
        sim = Simulation(seed=0, schedule=schedule)
        nodes = _nodes(factory(sim))
        for t, addr, coll, rows in timed:
            if addr not in nodes:
                raise BloomlError(
                    f"check_confluence: an input is for node {addr!r}, but the factory made "
                    f"{sorted(nodes)}"
                )

            def put(s: Simulation, p: Any = nodes[addr], c: str = coll, r: Any = rows) -> None:
                getattr(p, c).insert(r)

            sim.at(t, put)
        error = None
        failures[0] = None
        try:
            if until is None:
                settle(sim)
                while window:  # timers may still act: a window at a time until nothing does
                    sent, seen = sim.stats()["messages"], snapshot(nodes)
                    sim.run(window, max_events=max_events)
                    settle(sim)
                    if sim.stats()["messages"] == sent and snapshot(nodes) == seen:
                        break
                    if sim.now > 3600.0:
                        raise BloomlError(
                            "check_confluence: a run did not settle (its timers kept sending "
                            f"or changing its outputs for an hour of virtual time, at "
                            f"{sim.now:g} s); pass until=<virtual seconds>"
                        )
            else:
                sim.run_until(until, max_events=max_events)
        except BloomlError as exc:
            if "did not settle" in str(exc) or "still busy" in str(exc):
                raise
            error = f"{type(exc).__name__}: {exc}"
            failures[0] = exc
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            failures[0] = exc
        outcome = snapshot(nodes)
        if error is not None:
            outcome["<error>"] = {"tick failed": error}
        return outcome, _describe(sim.messages), nodes

    ref_outcome, ref_sched, ref_nodes = run(lambda m: [0.0])
    if failures[0] is not None:  # every schedule may fail alike: never "confluent"
        raise _failure(failures[0], ref_sched, True, points_of_order(ref_nodes.values()))
    if not any(ref_outcome.get(a) for a in ref_nodes) and outputs is not None:
        raise BloomlError(f"check_confluence: no node has any of the outputs {outputs!r}")
    points = points_of_order(ref_nodes.values())
    unit = delay_bound / _STEPS
    late = _LATE * delay_bound
    found: list[Any] = []
    count = [1]

    @hypothesis_seed(seed)
    @settings(
        max_examples=runs,
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(st.data())
    def trial(data: Any) -> None:
        def delay(msg: Message, copy: str) -> float:
            if any(c in ordered for c, _ in msg.channels) and data.draw(
                st.booleans(), label=f"message {msg.id}{copy} held back late"
            ):
                return late
            return (
                data.draw(st.integers(0, _STEPS), label=f"delay of message {msg.id}{copy}") * unit
            )

        def schedule(msg: Message) -> list[float]:
            delays = [delay(msg, "")]
            if duplicates and data.draw(st.booleans(), label=f"message {msg.id} twice"):
                delays.append(delay(msg, " (copy)"))
            return delays

        count[0] += 1
        outcome, sched, _ = run(schedule)
        if outcome != ref_outcome or failures[0] is not None:
            found[:] = [outcome, sched, failures[0]]
            raise AssertionError("outcome differs")

    try:
        trial()
    except AssertionError:
        if not found:
            raise
        outcome, sched, failure = found
        if failure is not None:
            raise _failure(failure, sched, False, points) from failure
        diff = sorted(
            (a, n)
            for a in sorted(set(ref_outcome) | set(outcome))
            for n in sorted(set(ref_outcome.get(a, {})) | set(outcome.get(a, {})))
            if ref_outcome.get(a, {}).get(n) != outcome.get(a, {}).get(n)
        )
        lines = [f"not confluent: two message schedules end differently on {diff}", ""]
        lines.append("reference schedule (every message at once, in order):")
        lines += ["  " + s for s in ref_sched] or ["  (no messages)"]
        lines.append("failing schedule (shrunk by hypothesis):")
        lines += ["  " + s for s in sched] or ["  (no messages)"]
        for a, n in diff:
            lines.append(f"{a}.{n}: reference {ref_outcome.get(a, {}).get(n, '<absent>')!r}")
            lines.append(f"{' ' * len(a + n)}  failing   {outcome.get(a, {}).get(n, '<absent>')!r}")
        lines.append(
            "points of order (blooml analyze): non-monotone rules after a channel, and "
            "<-/<+- rules a channel feeds"
        )
        lines.append(_fmt_points(points))
        raise ConfluenceViolation(
            "\n".join(lines), (ref_sched, sched), (ref_outcome, outcome), diff, points
        ) from None
    return ConfluenceReport(
        runs=count[0],
        outcome=ref_outcome,
        points_of_order=points,
        messages=len(ref_sched),
        seed=seed,
        schedules=[ref_sched],
        max_delay=delay_bound,
    )
