"""Delta anti-entropy: replicas of a lattice send each peer what changed since its last ack.

Whole-state gossip (send the whole ``lmap`` to every peer every period) is the simplest
convergent replication, but it costs the whole state per peer per period, on the wire and in
encoding, decoding and merging at both ends: at 100k keys that is seconds of CPU per period.
:class:`DeltaGossip` is the delta-state CRDT idiom (Almeida et al., "Delta State Replicated
Data Types", 2018) as a mixin of Bloom^L rules:

* every change a replica learns (its own :attr:`~DeltaGossip.update` rows, and the part of a
  received delta that was new to it, computed by :func:`novel`) is kept in ``ae_buffer`` under
  the tick that learned it (the replica's sequence number) and the peer it came from;
* every period (``ae_clock``) it sends each peer one ``ae_delta`` tuple: the join of the
  buffered changes newer than the peer's last ack (not those that came from that peer), and
  the sequence number it covers; the peer merges it and acks that number;
* a peer it has no usable ack from (new, restarted, or behind more than ``ae_horizon`` ticks of
  changes) gets the whole state (again every ``ae_full_every`` seconds until it acks), after
  which deltas resume. A restart is recognised by
  the peer's *epoch* (its start time in ns, so an incarnation's acks never speak for the next),
  and an ack names the sender's epoch it acknowledges (a restarted sender ignores acks of the
  sequence numbers of its previous incarnation);
* changes acked by every current peer, and changes older than ``2 * ae_horizon`` ticks, are
  dropped from the buffer, so it stays bounded.

A delta travels as one tuple, so it is applied whole or lost whole (over UDP, a large one
travels in fragments); a lost delta or ack is simply sent again, since merging is idempotent.
Changes are forwarded (a replica passes on what it learned from one peer to the others), so
replicas converge over any connected peer graph, not only a full mesh.

Use it by mixing it in, writing local changes to ``update`` and filling ``peer``::

    class Replica(DeltaGossip):
        put = channel(["@addr", "key", "version"], ["value"])

        @bloom
        def writes(self):
            self.update <= self.put.map(
                lambda p: (p.key, lmap({p.key: lmax((p.version, p.value))}))
            )

``store`` is an ``lmap`` by default; redeclare it (``store = lset()``) for another lattice
(:func:`novel` knows ``lmap``, ``lset`` and ``lbag`` and sends any other changed value whole).
``ae_clock = periodic(0.5)`` in a subclass changes the period. See ``docs/net.md``.
"""

from __future__ import annotations

import time
from typing import Any

from rpds import HashTrieMap

from blooml.bloom import Program, bloom, channel, min_, periodic, scratch, table
from blooml.lattices import Lattice, lbag, ldompair, lmap, lmax, lmin, lset
from blooml.lattices.sets import _elems, trie_items

__all__ = ["DeltaGossip", "novel"]


def novel(delta: Lattice, current: Any) -> Lattice:
    """The part of ``delta`` that ``current`` does not hold yet (``⊥`` if none).

    For an ``lmap``, the entries whose value is not below ``current``'s (each entry whole);
    for an ``lset``, the elements ``current`` lacks; for an ``lbag``, the elements whose count
    exceeds ``current``'s; for any other lattice, ``delta`` itself unless
    ``delta <= current``. Merging the result into ``current`` gives ``delta ⊔ current``.

    Cost: the size of ``delta`` (each of its keys is looked up in ``current``, O(log n)
    each); ``current`` is never revealed or copied, so an empty delta costs nothing at any
    store size. Returns ``delta`` itself when all of it is new.
    """
    if type(delta) is lmap and type(current) is lmap:
        get = current._v.get
        entries = trie_items(delta._v)
        out = {
            bk: v
            for bk, v in entries
            if (old := get(bk)) is None or (v is not old and v != old and not v <= old)
        }
        return delta if len(out) == len(entries) else lmap._make(HashTrieMap(out))
    if type(delta) is lset and type(current) is lset:
        elems = list(_elems(delta._v))
        fresh = [x for x in elems if x not in current]
        return delta if len(fresh) == len(elems) else lset(fresh)
    if type(delta) is lbag and type(current) is lbag:
        have = current._v.get
        items = trie_items(delta._v)
        more = {be: n for be, n in items if n > (have(be) or 0)}
        return delta if len(more) == len(items) else lbag._make(HashTrieMap(more))
    return type(delta)() if delta <= current else delta


def _ack_state(epoch: int, upto: int) -> ldompair:
    return ldompair(lmax(epoch), lmax(upto))


def _ack_parts(state: ldompair) -> tuple[int, int]:
    parts = state.reveal()
    if parts is None:  # pragma: no cover - acks always carry both parts
        return 0, -1
    epoch, upto = parts
    return int(epoch.reveal()), int(upto.reveal())


class DeltaGossip(Program, abstract=True):
    """A mixin: replicate ``store`` to every address in ``peer`` by delta anti-entropy.

    State it declares (redeclare to change): ``peer(addr)``, ``store`` (``lmap()``),
    ``update(id, delta)`` (a scratch: write local changes here, not into ``store``),
    ``ae_clock`` (``periodic(0.1)``), the channels ``ae_delta`` and ``ae_ack``, and the tables
    ``ae_buffer`` and ``ae_acks``. ``ae_horizon`` (class attribute, ticks) bounds how far a
    peer may fall behind before it is sent the whole state again.
    """

    peer = table(["addr"])
    store = lmap()
    update = scratch(["id"], ["delta"])
    ae_clock = periodic(0.1)
    ae_delta = channel(["@addr", "src", "epoch", "src_epoch", "upto", "full"], ["kv"])
    ae_ack = channel(["@addr", "src", "epoch", "for_epoch", "upto"])
    ae_buffer = table(["seq", "origin"], ["delta"])
    ae_new = scratch(["src"], ["kv"])
    ae_acks = table(["peer"], ["state"])
    ae_acked = scratch(["peer"], ["upto"])
    ae_low = scratch(["upto"])
    ae_floor = lmax(-1)
    ae_now = lmax(0.0)
    ae_due = scratch(["addr"])
    ae_full = table(["peer"], ["first", "at"])

    #: Ticks of changes kept for a peer that has not acked them; a peer further behind is sent
    #: the whole state.
    ae_horizon = 10_000
    #: Seconds (by the program's clock) before the whole state is sent to a peer again while
    #: it has not acked the last one (it may still be decoding a large state); the wait doubles
    #: with every unacked send, up to ``ae_full_max`` seconds.
    ae_full_every = 5.0
    ae_full_max = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: This incarnation's epoch: acks name it, so a restarted peer is sent the whole state.
        self.ae_epoch = time.time_ns()

    def ae_usable(self, state: ldompair) -> bool:
        """Whether a peer's ack still lets deltas reach it: every change after it is still
        buffered (none was dropped as acked by all current peers, nor as too old)."""
        upto = _ack_parts(state)[1]
        return (
            upto >= 0
            and upto >= self.ae_floor.value.reveal()
            and (upto >= self.tick_count - self.ae_horizon)
        )

    def ae_recent(self, first: lmin, at: lmax) -> bool:
        """Whether the whole state was sent to a peer too recently to send it again: less than
        ``ae_full_every`` seconds ago, or less than the time since the first unacked send
        (so the waits double), at most ``ae_full_max``."""
        wait = min(max(self.ae_full_every, at.reveal() - first.reveal()), self.ae_full_max)
        return bool(self.ae_now.value.reveal() - at.reveal() < wait)

    # fmt: off
    @bloom
    def ae_rules(self) -> None:
        # local changes: into the store now, into the buffer under this tick's number
        self.store <= self.update.map(lambda u: u.delta)
        self.ae_buffer <+ self.update.map(lambda u: (self.tick_count, self.addr, u.delta))
        # received: only what is new is merged (next tick, so that "new" is computed against
        # the store before it) and buffered for the other peers
        self.ae_new <= self.ae_delta.map(lambda d: (d.src, novel(d.kv, self.store)))
        self.store <+ self.ae_new.map(lambda n: n.kv)
        self.ae_buffer <+ self.ae_new.filter(lambda n: n.kv != type(n.kv)()).map(
            lambda n: (self.tick_count, n.src, n.kv)
        )
        self.ae_ack <~ self.ae_delta.map(
            lambda d: (d.src, self.addr, self.ae_epoch, d.src_epoch,
                       d.upto if d.full or d.epoch == self.ae_epoch else -1)
        )
        # an ack speaks of this incarnation's sequence numbers only (not a previous one's)
        self.ae_acks <= self.ae_ack.filter(lambda a: a.for_epoch == self.ae_epoch).map(
            lambda a: (a.src, _ack_state(a.epoch, a.upto))
        )
        # every period: each peer with a usable ack gets the buffered changes it lacks (an
        # empty delta too, so its ack keeps up), any other peer the whole state
        self.ae_delta <~ self.ae_clock.join(self.peer).join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).filter(lambda c, p, a: self.ae_usable(a.state)).map(
            lambda c, p, a: (p.addr, self.addr, _ack_parts(a.state)[0], self.ae_epoch,
                             self.tick_count - 1, False, type(self.store)())
        )
        self.ae_delta <~ self.ae_clock.join(self.peer).join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).join(self.ae_buffer).filter(
            lambda c, p, a, b: b.origin != p.addr and b.seq > _ack_parts(a.state)[1]
            and self.ae_usable(a.state)
        ).map(
            lambda c, p, a, b: (p.addr, self.addr, _ack_parts(a.state)[0], self.ae_epoch,
                                self.tick_count - 1, False, b.delta)
        )
        self.ae_now <= self.ae_clock.map(lambda c: lmax(c.time))
        self.ae_due <= self.peer.notin(
            self.ae_acks, lambda p, a: p.addr == a.peer and self.ae_usable(a.state)
        ).notin(self.ae_full, lambda p, f: p.addr == f.peer and self.ae_recent(f.first, f.at))
        self.ae_delta <~ self.ae_clock.join(self.ae_due).map(
            lambda c, p: (p.addr, self.addr, 0, self.ae_epoch, self.tick_count - 1, True,
                          self.store)
        )
        self.ae_full <+ self.ae_clock.join(self.ae_due).map(
            lambda c, p: (p.addr, lmin(c.time), lmax(c.time))
        )
        self.ae_full <- self.ae_full.join(
            self.ae_acks, self.ae_full.peer == self.ae_acks.peer
        ).filter(lambda f, a: self.ae_usable(a.state)).map(lambda f, a: f)
        # forget what every current peer acked (the floor remembers how far: a peer that
        # comes back with an older ack gets the whole state), and what is older than the horizon
        self.ae_acked <= self.peer.join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).map(lambda p, a: (p.addr, _ack_parts(a.state)[1]))
        self.ae_acked <= self.peer.notin(self.ae_acks, self.peer.addr == self.ae_acks.peer).map(
            lambda p: (p.addr, -1)
        )
        self.ae_low <= self.ae_acked.group(None, min_("upto"))
        self.ae_floor <= self.ae_low.map(lambda low: lmax(low.upto))
        self.ae_buffer <- self.ae_buffer.filter(
            lambda b: b.seq < self.tick_count - 2 * self.ae_horizon
        )
        self.ae_buffer <- self.ae_buffer.join(self.ae_low).filter(
            lambda b, low: b.seq <= low.upto
        ).map(lambda b, low: b)
    # fmt: on
