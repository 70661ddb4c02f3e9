"""A schedule whose ticks fail is a failure of the check, with the schedule and the exception
(issue 25, item 7): never "confluent" about a program that raises."""

from __future__ import annotations

from typing import Any

import pytest

from blooml import Program, bloom, channel, interface, lmax, table
from blooml.errors import ConfluenceViolation, ScheduleFailure
from blooml.testing import check_confluence


class Typo(Program):
    """Every message makes its rule raise AttributeError (``m.vlaue``)."""

    put = interface(["dst", "value"])
    msg = channel(["@dst", "value"])
    got = table(["value"])

    # fmt: off
    @bloom
    def rules(self):
        self.msg <~ self.put
        self.got <= self.msg.map(lambda m: (m.vlaue,))
    # fmt: on


class LateFailure(Program):
    """Raises only when ``b`` arrives before ``a`` (a schedule-dependent failure)."""

    put = interface(["dst", "value"])
    msg = channel(["@dst", "value"])
    got = table(["value"])
    seen_a = lmax(0)

    # fmt: off
    @bloom
    def rules(self):
        self.msg <~ self.put
        self.seen_a <= self.msg.map(lambda m: lmax(int(m.value == "a")))
        self.got <= self.msg.map(lambda m: (_needs_a(m.value, self.seen_a.reveal()),))
    # fmt: on


def _needs_a(v: str, seen_a: int) -> str:
    if v == "b" and not seen_a:
        raise RuntimeError("b arrived before a")
    return v


def _two(cls: type[Program]) -> Any:
    return lambda sim: [cls(addr="s", network=sim), cls(addr="r", network=sim)]


def test_a_program_whose_every_tick_fails_is_not_confluent() -> None:
    with pytest.raises(ScheduleFailure) as ei:
        check_confluence(_two(Typo), {"s": {"put": [("r", 1)]}}, outputs=["got"], runs=5)
    err = ei.value
    assert isinstance(err, ConfluenceViolation)  # a check that fails, as pytest shows it
    assert isinstance(err.error, AttributeError) and err.reference
    assert "vlaue" in str(err) and "s -> r [msg]" in str(err)
    assert any("s -> r" in line for line in err.schedule)


def test_a_tick_failing_under_one_schedule_is_reported_with_it() -> None:
    inputs = [(0.0, "s", "put", [("r", "a")]), (0.01, "s", "put", [("r", "b")])]
    with pytest.raises(ScheduleFailure) as ei:
        check_confluence(_two(LateFailure), inputs, outputs=["got"], runs=50, seed=3)
    err = ei.value
    assert not err.reference and isinstance(err.error, RuntimeError)
    assert "b arrived before a" in str(err) and len(err.schedule) == 2
