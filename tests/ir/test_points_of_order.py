"""Every kind of non-monotone read after a channel is a CALM point of order (issue 25, item
7): ``nonmonotone_after_channels()`` flags each read the IR records, with one program per
kind, in each operator; and a monotone control is not flagged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from blooml import Program, bloom, channel, count, lmax, scratch, table


def _program(rule: Callable[[Any], None]) -> type[Program]:
    class P(Program):
        inc = channel(["@dst", "k"], ["v"])
        out = channel(["@dst", "k"], ["v"])
        x = lmax(0)
        seen = table(["k"], ["v"])
        src = table(["dst", "k"], ["v"])
        res = table(["k"], ["v"])
        tmp = scratch(["k"], ["v"])

        @bloom
        def feed(self):
            self.x <= self.inc.map(lambda m: lmax(m.v))
            self.seen <= self.inc.map(lambda m: (m.k, m.v))

        rules = bloom(rule)

    return P


# fmt: off
# a lattice variable fed by a channel, read non-monotonically in a rule's function
def reveal_le(self):
    self.res <= self.src.filter(lambda r: self.x.reveal() < 10).map(lambda r: (r.k, r.v))


def reveal_next(self):
    self.res < +self.src.filter(lambda r: self.x.reveal() < 10).map(lambda r: (r.k, r.v))


def reveal_send(self):
    self.out < ~self.src.filter(lambda r: self.x.reveal() < 10)


# a relational non-monotone input downstream of the channel
def notin(self):
    self.tmp <= self.src.map(lambda r: (r.k, r.v)).notin(self.seen)


def group(self):
    self.res <= self.seen.group(["k"], count())


def argmin(self):
    self.res <= self.seen.argmin([], "v")


def notin_send(self):
    self.out < ~self.src.notin(self.seen, lambda a, b: a.k == b.k)


# a destructive operator whose body a channel reaches
def delete(self):
    self.seen < -self.seen.filter(lambda r: r.v == 0)


def monotone(self):
    self.res <= self.seen.map(lambda r: (r.k, r.v))
    self.out < ~self.seen.map(lambda r: ("a:1", r.k, r.v))
    # state-based gossip: the whole value shipped as a row's last column, merged on arrival
    self.out < ~self.src.map(lambda r: (r.dst, r.k, self.x))
# fmt: on

KINDS = [reveal_le, reveal_next, reveal_send, notin, group, argmin, notin_send, delete]


@pytest.mark.parametrize("rule", KINDS, ids=lambda f: f.__name__)
def test_each_kind_of_nonmonotone_read_after_a_channel_is_flagged(rule: Any) -> None:
    P = _program(rule)
    flagged = [(r.head, chans) for r, chans in P.ir().nonmonotone_after_channels()]
    head = P.ir().rules[-1].head
    assert flagged == [(head, ["inc"])], flagged


def test_monotone_rules_after_a_channel_are_not_flagged() -> None:
    assert _program(monotone).ir().nonmonotone_after_channels() == []


def test_a_value_shipped_whole_is_recorded_and_a_compared_one_is_not() -> None:
    ir = _program(monotone).ir()
    assert ir.rules[-1].nonmonotone_reads == {"x"} and ir.rules[-1].shipped_reads == {"x"}
    assert _program(reveal_send).ir().rules[-1].shipped_reads == frozenset()
