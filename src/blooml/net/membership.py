"""Membership and failure detection as Bloom^L rules: heartbeats, a ``ttl`` table, up/down events.

A program that mixes in :class:`Membership` (or a class made by :func:`membership` with its
own timings) sends a heartbeat to every peer in ``member`` on a ``periodic`` timer, keeps
``alive``, a soft-state table (``ttl``) that each heartbeat refreshes, and derives:

* ``up``: the peers it currently believes alive (a table, the node's *view*);
* ``peer_up``: a scratch with the peers that came up in this tick (first heartbeat, or the
  first after being declared down);
* ``peer_down``: a scratch with the peers declared down in this tick (no heartbeat for
  ``timeout`` seconds).

The program's own rules join with them like with any collection::

    from blooml import bloom, table
    from blooml.net.membership import membership

    class Replica(membership(period=0.2, timeout=1.0)):
        log = table(["t", "addr", "event"])

        @bloom
        def watch(self):
            self.log <= self.peer_down.map(lambda d: (self.tick_count, d.addr, "down"))

Guarantees (what a user may rely on, see docs/net.md):

* **Completeness, with a bound.** A peer that stops (crash, kill, partition) is declared
  down by every node that had it up, at most ``timeout + period`` seconds (plus one tick)
  after the last of its heartbeats *arrived*, so at most ``timeout + 2 * period`` plus the
  network delay after it stopped.
* **Accuracy only eventually.** A live peer whose heartbeats are all lost or late for
  ``timeout`` seconds is declared down (falsely), and up again at its next heartbeat. With
  the default ``timeout = 4 * period``, three heartbeats in a row may be lost without a
  false suspicion.
* **No agreement.** Each node has its own view: two nodes can disagree while heartbeats are
  in flight, and a partition splits the views (each side declares the other down after the
  bound above; when it heals, each side declares the other up within one period plus the
  network delay). Nothing here is a consensus on membership; a program that needs one view
  must coordinate (and its ``peer_down`` joins are CALM points of order, as ``blooml
  analyze`` shows).
* **Membership: configured, joined, left.** ``member`` holds the peers inserted into it
  (configuration, kept until they leave) and the peers that *joined*: a heartbeat from an
  address not in ``member`` adds it (and to ``joined``), so a new node needs only one
  existing address. A joined peer leaves ``member`` when it is declared down (no heartbeat
  for ``timeout``); any member leaves at once when it sends a leave message
  (:meth:`Membership.leave_cluster`). With a cluster key only signed heartbeats arrive, so
  only key holders join; without one, anyone who reaches the port can (bind to a private
  network). A heartbeat whose ``frm`` is not an address the node could send to (``"x"``, a
  port out of range) is ignored.
* **No amplification.** A configured member gets one heartbeat per period; a joined member
  gets at most one per period *and* one per heartbeat received from it (a reply on the next
  timer), so no input makes a node send more heartbeats than it receives, beyond the fixed
  traffic to its configuration.

Cost: one datagram per configured peer per period on each node (a heartbeat is one small
tuple), one per heartbeat received from a joined peer, and a tick per period (the timer).
"""

from __future__ import annotations

import math
from typing import Any

from blooml.bloom import channel, periodic, scratch, table
from blooml.bloom.program import Program, bloom
from blooml.errors import ProgramError

__all__ = ["DEFAULT_PERIOD", "Membership", "detection_bound", "membership"]

#: Seconds between two heartbeats of :class:`Membership`.
DEFAULT_PERIOD = 0.5


def _check(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProgramError(f"membership(): {name} must be a number of seconds, got {value!r}")
    if not 0 < value < math.inf:
        raise ProgramError(f"membership(): {name} must be > 0 seconds, got {value!r}")
    return float(value)


def detection_bound(period: float, timeout: float, delay: float = 0.0) -> float:
    """The longest time, in seconds, from a peer's stop to its ``peer_down`` event on a node
    that had it up: ``timeout + 2 * period + delay`` (``delay``: the network's longest
    delivery delay)."""
    return timeout + 2 * period + delay


class Membership(Program, abstract=True):
    """Heartbeat membership with the default timings (a heartbeat every ``period`` = 0.5 s,
    down after ``timeout`` = 2 s of silence): ``member`` (the peers to watch: configured and
    joined), ``joined`` (those that joined by heartbeat), ``alive`` (soft state,
    ``ttl=timeout``), ``up`` (the view), and the events ``peer_up`` and ``peer_down``.
    :func:`membership` makes one with other timings."""

    #: Seconds between two heartbeats to each member.
    period: float = DEFAULT_PERIOD
    #: Seconds of silence after which a peer is declared down.
    timeout: float = 4 * DEFAULT_PERIOD

    member = table(["addr"])
    joined = table(["addr"])
    heartbeat = channel(["@to", "frm"])
    leave = channel(["@to", "frm"])
    heartbeat_timer = periodic(DEFAULT_PERIOD)
    alive = table(["addr"], ttl=4 * DEFAULT_PERIOD)
    departed = table(["addr"], ttl=4 * DEFAULT_PERIOD)
    heard = table(["addr"])
    left = table(["addr"])
    leaving = scratch(["addr"])
    hb_in = scratch(["addr"])
    up = table(["addr"])
    peer_up = scratch(["addr"])
    peer_down = scratch(["addr"])

    def __init_subclass__(
        cls, period: float | None = None, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """``class Node(Membership, period=0.1, timeout=0.5)`` sets the timings (see
        :func:`membership`); without them a subclass keeps its base's."""
        if period is not None or timeout is not None:
            p, t = _timings(cls.period if period is None else period, timeout)
            cls.period, cls.timeout = p, t
            cls.heartbeat_timer = periodic(p)  # redeclared: overrides the base's
            cls.alive = table(["addr"], ttl=t)
            cls.departed = table(["addr"], ttl=t)
        super().__init_subclass__(**kwargs)

    def leave_cluster(self) -> None:
        """Leave: send every member a leave message at the next tick (they drop this node
        from ``member`` and declare it down at once) and send no heartbeat from then on.
        Call it between ticks (``p.sync_do(lambda q: q.leave_cluster())``)."""
        self.leaving.insert([(self.addr,)])

    def membership_address_ok(self, addr: Any) -> bool:
        """Whether ``addr`` may join: an address this node could send to (on a socket node,
        ``host:port``; any string on a simulated or in-process network)."""
        if not isinstance(addr, str) or not addr or addr == self.addr:
            return False
        check = getattr(self._rt.network, "address_ok", None)
        return True if check is None else bool(check(addr))

    # fmt: off
    @bloom
    def membership_rules(self) -> None:
        """Heartbeats out on the timer (to the configured members, and once per heartbeat
        received to the joined ones); ``alive`` refreshed by each one in; joins, leaves and
        up/down events."""
        # a heartbeat counts unless it names no address, its sender left less than `timeout`
        # ago (a heartbeat overtaken by the leave), or this node left
        self.hb_in <= self.heartbeat.filter(
            lambda h: self.membership_address_ok(h.frm)
        ).map(lambda h: (h.frm,)).notin(self.departed).notin(self.left, lambda h, lft: True)
        # a heartbeat from a non-member is a join (at the next tick: `member` is read here)
        self.member <+ self.hb_in.notin(self.member)
        self.joined <+ self.hb_in.notin(self.member)
        self.alive <= self.hb_in
        self.heard <= self.hb_in.join(self.joined, self.hb_in.addr == self.joined.addr).map(
            lambda h, j: (h.addr,)
        )
        self.heartbeat <~ self.heartbeat_timer.join(
            self.member.notin(self.joined).notin(self.left, lambda m, lft: True)
        ).map(lambda t, m: (m.addr, self.addr))
        self.heartbeat <~ self.heartbeat_timer.join(
            self.heard.notin(self.left, lambda h, lft: True)
        ).map(lambda t, h: (h.addr, self.addr))
        self.heard <- self.heartbeat_timer.join(self.heard).map(lambda t, h: h)
        # leaving: tell every member, then fall silent
        self.leave <~ self.leaving.join(self.member).map(lambda lv, m: (m.addr, self.addr))
        self.left <= self.leaving
        self.departed <= self.leave.map(lambda lv: (lv.frm,))
        self.member <- self.leave.map(lambda lv: (lv.frm,))
        self.joined <- self.leave.map(lambda lv: (lv.frm,))
        self.alive <- self.leave.map(lambda lv: (lv.frm,))
        # a joined peer that is declared down leaves `member`
        self.member <- self.peer_down.join(
            self.joined, self.peer_down.addr == self.joined.addr
        ).map(lambda d, j: (d.addr,))
        self.joined <- self.peer_down.map(lambda d: (d.addr,))
        self.peer_up <= self.alive.notin(self.up)
        self.peer_down <= self.up.notin(self.alive)
        self.up <+ self.peer_up
        self.up <- self.peer_down
    # fmt: on


def membership(period: float = DEFAULT_PERIOD, timeout: float | None = None) -> type[Membership]:
    """An abstract program class of heartbeat membership (see the module docstring), to
    subclass or mix in.

    Args:
        period: seconds between two heartbeats to each member.
        timeout: seconds without a heartbeat after which a peer is declared down (default
            ``4 * period``); must be more than ``period``.

    Raises:
        ProgramError: a timing that is not a positive number of seconds, or a timeout that is
            not longer than the period (every peer would flap down between heartbeats).
    """
    p, t = _timings(period, timeout)
    return type(  # a class statement would bind p and t late; type() takes them now
        f"Membership(period={p:g}, timeout={t:g})",
        (Membership,),
        {"__module__": __name__, "__doc__": Membership.__doc__},
        abstract=True,
        period=p,
        timeout=t,
    )


def _timings(period: Any, timeout: Any) -> tuple[float, float]:
    p = _check(period, "period")
    t = 4 * p if timeout is None else _check(timeout, "timeout")
    if t <= p:
        raise ProgramError(
            f"membership(): the timeout ({t:g} s) must be longer than the period ({p:g} s), "
            "or every peer is declared down between two of its heartbeats; 3-5 periods is usual"
        )
    return p, t
