"""Delta anti-entropy: replicas of a lattice send each peer what changed since its last ack.

Whole-state gossip (send the whole ``lmap`` to every peer every period) is the simplest
convergent replication, but it costs the whole state per peer per period, on the wire and in
encoding, decoding and merging at both ends: at 100k keys that is seconds of CPU per period.
:class:`DeltaGossip` is the delta-state CRDT idiom (Almeida et al., "Delta State Replicated
Data Types", 2018) as a mixin of Bloom^L rules:

* every change a replica learns (its own :attr:`~DeltaGossip.update` rows, and the part of a
  received delta that was new to it, computed by :func:`novel` at the cost of the delta) is
  kept in ``ae_buffer`` under the tick that learned it (its sequence number) and the peer it
  came from;
* every period (``ae_clock``) a peer with buffered changes newer than its last ack gets one
  ``ae_delta`` tuple: the join of the oldest of them, up to ``ae_batch_keys`` keys (not those
  that came from that peer), and the sequence number it covers; the peer merges it and acks
  that number. One delta per peer is in flight at a time: the next leaves when the ack
  arrives, or after ``ae_resend`` seconds without one (flow control: a slow peer is sent no
  faster than it acks). A peer with nothing new gets nothing: **steady state sends nothing**,
  but for one empty probe per peer every ``ae_probe`` period (5 s), which tells a restarted
  peer that it needs the whole state;
* a peer it has no usable ack from (new, restarted, or behind changes no longer buffered) gets
  the whole state as a **bulk sync**: the store at that tick, cut into chunks of
  ``ae_batch_keys`` keys, sent ``ae_window`` chunks at a time, each acked; when every chunk is
  acked, deltas resume from that tick. An unacked chunk is sent again after ``ae_resend``
  seconds, doubling with each resend; a sync that gets no ack for ``ae_stall`` seconds is
  given up and started again after waits that double from ``ae_full_every`` up to
  ``ae_full_max``. A
  restart is recognised by the peer's *epoch* (its start time in ns, carried in everything it
  sends, so an incarnation's acks never speak for the next), and an ack names the sender's
  epoch it acknowledges (a restarted sender ignores acks of its previous incarnation);
* changes acked by every current peer, and changes older than ``2 * ae_horizon`` ticks, are
  dropped from the buffer, so it stays bounded.

A delta or chunk travels as one tuple, so it is applied whole or lost whole; a lost one is sent
again, since merging is idempotent. Changes are forwarded (a replica passes on what it learned
from one peer to the others), so replicas converge over any connected peer graph, not only a
full mesh.

Use it by mixing it in, writing local changes to ``update`` and filling ``peer``::

    class Replica(DeltaGossip):
        put = channel(["@addr", "key", "version"], ["value"])

        @bloom
        def writes(self):
            self.update <= self.put.map(
                lambda p: (p.key, lmap({p.key: lmax((p.version, p.value))}))
            )

``store`` is an ``lmap`` by default; redeclare it (``store = lset()``) for another lattice
(:func:`novel` and the chunks know ``lmap``, ``lset`` and ``lbag``; any other lattice is sent
whole, in one chunk). ``ae_clock = periodic(0.5)`` in a subclass changes the period. See
``docs/net.md``.
"""

from __future__ import annotations

import time
from typing import Any

from rpds import HashTrieMap

from blooml.bloom import Program, accum, bloom, channel, min_, periodic, scratch, table
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


def _size(value: Any) -> int:
    """Keys (elements) in a delta: what a message of it costs, roughly."""
    try:
        return max(1, len(value))
    except TypeError:
        return 1


class _Snapshot:
    """The store at the tick a bulk sync started, and how it is cut into chunks (the keys of
    each, looked up in the persistent value when the chunk is sent: no copy of the store)."""

    __slots__ = ("built", "keys", "size", "value")

    def __init__(self, value: Any, size: int) -> None:
        self.value = value
        self.size = size
        #: The chunks built lately (the same chunk goes to every peer syncing from it).
        self.built: dict[int, Any] = {}
        if type(value) in (lmap, lbag):
            self.keys: list[Any] = [bk for bk, _ in trie_items(value._v)]
        elif type(value) is lset:
            self.keys = list(_elems(value._v))
        else:
            self.keys = []

    def count(self) -> int:
        return max(1, -(-len(self.keys) // self.size))

    def chunk(self, i: int) -> Any:
        c = self.built.get(i)
        if c is None:
            c = self.built[i] = self._build(i)
            while len(self.built) > 32:
                del self.built[next(iter(self.built))]
        return c

    def _build(self, i: int) -> Any:
        v = self.value
        part = self.keys[i * self.size : (i + 1) * self.size]
        if type(v) in (lmap, lbag):
            get = v._v.get
            return type(v)._make(HashTrieMap({bk: get(bk) for bk in part}))
        if type(v) is lset:
            return lset(part)
        return v if i == 0 else type(v)()


class DeltaGossip(Program, abstract=True):
    """A mixin: replicate ``store`` to every address in ``peer`` by delta anti-entropy.

    State it declares (redeclare to change): ``peer(addr)``, ``store`` (``lmap()``),
    ``update(id, delta)`` (a scratch: write local changes here, not into ``store``),
    ``ae_clock`` (``periodic(0.1)``), ``ae_probe`` (``periodic(5.0)``), the channels
    ``ae_delta``, ``ae_ack``, ``ae_chunk`` and ``ae_chunk_ack``, and the tables ``ae_buffer``,
    ``ae_acks``, ``ae_fly`` (the delta in flight to each peer) and ``ae_sync`` (bulk syncs in
    progress). The class attributes below tune it.
    """

    peer = table(["addr"])
    store = lmap()
    update = scratch(["id"], ["delta"])
    ae_clock = periodic(0.1)
    ae_probe = periodic(5.0)
    ae_delta = channel(["@addr", "src", "epoch", "src_epoch", "upto", "full"], ["kv"])
    ae_ack = channel(["@addr", "src", "epoch", "for_epoch", "upto"])
    ae_chunk = channel(["@addr", "src", "src_epoch", "snap", "index", "count"], ["kv"])
    ae_chunk_ack = channel(["@addr", "src", "epoch", "for_epoch", "snap", "index"])
    ae_buffer = table(["seq", "origin"], ["delta"])
    ae_new = scratch(["src"], ["kv"])
    ae_acks = table(["peer"], ["state"])
    ae_acked = scratch(["peer"], ["upto"])
    ae_low = scratch(["upto"])
    ae_floor = lmax(-1)
    ae_dropped = lmax(-1)
    ae_now = lmax(0.0)
    ae_due = scratch(["addr"])
    ae_full = table(["peer"], ["first", "at"])
    ae_busy = scratch(["peer"])
    ae_cand = scratch(["peer", "item"])
    ae_cut = scratch(["peer"], ["upto"])
    ae_pend = scratch(["peer"], ["kv"])
    ae_fly = table(["peer"], ["upto", "at"])
    ae_sync = table(["peer", "snap"], ["count", "acked", "sent", "at"])
    ae_go = scratch(["peer", "snap", "index"])

    #: Ticks of changes kept for a peer that has not acked them; changes older than twice
    #: this are dropped, and a peer that had not acked them gets a bulk sync.
    ae_horizon = 10_000
    #: Keys (elements) per message: a delta joins buffered changes up to about this many, and
    #: a bulk sync cuts the store into chunks of this many.
    ae_batch_keys = 4_000
    #: Chunks of a bulk sync in flight to a peer at a time.
    ae_window = 4
    #: Seconds before a delta or chunk that was not acked is sent again (generous: a busy
    #: peer may take seconds to apply a backlog, and a resend only adds to it).
    ae_resend = 2.0
    #: Seconds (by the program's clock) between the starts of two bulk syncs to a peer that
    #: has not completed one; the waits double up to ``ae_full_max`` seconds.
    ae_full_every = 5.0
    ae_full_max = 60.0
    #: Seconds a bulk sync may go without any chunk acked before it is given up (and started
    #: again after the waits above).
    ae_stall = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: This incarnation's epoch: acks name it, so a restarted peer is sent the whole state.
        self.ae_epoch = time.time_ns()
        self._ae_snaps: dict[int, _Snapshot] = {}

    def ae_usable(self, state: ldompair) -> bool:
        """Whether a peer's ack still lets deltas reach it: every change after it is still
        buffered (none was dropped as acked by all current peers, nor as too old)."""
        upto = _ack_parts(state)[1]
        return (
            upto >= 0
            and upto >= self.ae_floor.value.reveal()
            and upto >= self.ae_dropped.value.reveal()
        )

    def ae_recent(self, first: lmin, at: lmax) -> bool:
        """Whether a bulk sync to a peer started too recently to start another: less than
        ``ae_full_every`` seconds ago, or less than the time since the first one it has not
        completed (so the waits double), at most ``ae_full_max``."""
        wait = min(max(self.ae_full_every, at.reveal() - first.reveal()), self.ae_full_max)
        return bool(self.ae_now.value.reveal() - at.reveal() < wait)

    def ae_in_flight(self, upto: lmax, at: lmax, state: ldompair) -> bool:
        """Whether the last delta sent to a peer is still awaited: it covers more than the
        peer acked, and was sent less than ``ae_resend`` seconds ago."""
        return upto.reveal() > _ack_parts(state)[1] and (
            self.ae_now.value.reveal() - at.reveal() < self.ae_resend
        )

    def ae_cutoff(self, cands: frozenset[tuple[int, Any, int]]) -> int:
        """The newest sequence number a delta covers: the oldest pending changes, whole ticks
        at a time, up to ``ae_batch_keys`` keys (at least one tick's)."""
        per: dict[int, int] = {}
        for seq, _, size in cands:
            per[seq] = per.get(seq, 0) + size
        total, cut = 0, -1
        for seq in sorted(per):
            total += per[seq]
            if cut >= 0 and total > self.ae_batch_keys:
                break
            cut = seq
        return cut

    def ae_snapshot(self, snap: int) -> int:
        """Start a bulk sync at tick ``snap``: remember the store as it is (shared by the
        peers whose syncs start in this tick); returns the number of chunks."""
        s = self._ae_snaps.get(snap)
        if s is None:
            s = self._ae_snaps[snap] = _Snapshot(self.store.value, self.ae_batch_keys)
            while len(self._ae_snaps) > 16:  # syncs that outlive 16 newer ones start again
                del self._ae_snaps[min(self._ae_snaps)]
        return s.count()

    def ae_chunks_due(self, count: int, snap: int, acked: lmap, sent: lmap, at: lmax) -> list[int]:
        """The chunks of a bulk sync to send now (a sliding window): of the first
        ``ae_window`` not acked yet (by the peer's newest incarnation that acked any), every
        one never sent, and the first whose ack is overdue (``ae_resend`` seconds, doubling
        with each resend of it: a busy peer is not buried under copies). None if the sync is
        complete, stalled (no ack for ``ae_stall`` seconds) or its snapshot is gone."""
        now = self.ae_now.value.reveal()
        if snap not in self._ae_snaps or now - at.reveal() > self.ae_stall:
            return []
        got = acked.reveal()
        done = got[max(got)].reveal() if got else frozenset()
        todo = [i for i in range(count) if i not in done][: self.ae_window]
        when = sent.reveal()
        out = [i for i in todo if i not in when]
        for i in todo:
            if i in when:
                tries, last = when[i].reveal()
                wait = min(self.ae_resend * 2 ** (tries - 1), self.ae_full_max)
                if now - last >= wait:
                    out.append(i)
                    break
        return sorted(out)

    def ae_sent_mark(self, sent: lmap, index: int) -> lmap:
        """``sent`` for chunk ``index`` sent now: ``lmax((times sent, time))``."""
        old = sent.reveal().get(index)
        tries = old.reveal()[0] if old is not None else 0
        return lmap({index: lmax((tries + 1, self.ae_now.value.reveal()))})

    def ae_chunk_of(self, snap: int, index: int) -> list[Any]:
        """``[chunk]`` of a snapshot (``[]`` if the snapshot is gone)."""
        s = self._ae_snaps.get(snap)
        return [] if s is None else [s.chunk(index)]

    @staticmethod
    def ae_synced(count: int, acked: lmap) -> int | None:
        """The epoch of the peer's incarnation that acked every chunk, else ``None``."""
        for epoch, got in acked.reveal().items():
            if len(got.reveal()) >= count:
                return int(epoch)
        return None

    # fmt: off
    @bloom
    def ae_rules(self) -> None:
        # local changes: into the store now, into the buffer under this tick's number
        self.store <= self.update.map(lambda u: u.delta)
        self.ae_buffer <+ self.update.map(lambda u: (self.tick_count, self.addr, u.delta))
        # received (a delta or a chunk): only what is new is merged (next tick, so that "new"
        # is computed against the store before it) and buffered for the other peers
        self.ae_new <= self.ae_delta.map(lambda d: (d.src, novel(d.kv, self.store)))
        self.ae_new <= self.ae_chunk.map(lambda d: (d.src, novel(d.kv, self.store)))
        self.store <+ self.ae_new.map(lambda n: n.kv)
        self.ae_buffer <+ self.ae_new.filter(lambda n: n.kv != type(n.kv)()).map(
            lambda n: (self.tick_count, n.src, n.kv)
        )
        self.ae_ack <~ self.ae_delta.map(
            lambda d: (d.src, self.addr, self.ae_epoch, d.src_epoch,
                       d.upto if d.full or d.epoch == self.ae_epoch else -1)
        )
        self.ae_chunk_ack <~ self.ae_chunk.map(
            lambda d: (d.src, self.addr, self.ae_epoch, d.src_epoch, d.snap, d.index)
        )
        # a peer heard from with a newer epoch restarted: its old ack is void
        self.ae_acks <= self.ae_delta.map(lambda d: (d.src, _ack_state(d.src_epoch, -1)))
        self.ae_acks <= self.ae_chunk.map(lambda d: (d.src, _ack_state(d.src_epoch, -1)))
        # an ack speaks of this incarnation's sequence numbers only (not a previous one's)
        self.ae_acks <= self.ae_ack.filter(lambda a: a.for_epoch == self.ae_epoch).map(
            lambda a: (a.src, _ack_state(a.epoch, a.upto))
        )
        self.ae_now <= self.ae_clock.map(lambda c: lmax(c.time))
        # deltas: every period, each peer with a usable ack, no delta in flight and buffered
        # changes it has not acked gets the oldest of them (whole ticks, ~ae_batch_keys keys)
        self.ae_busy <= self.ae_fly.join(self.ae_acks, self.ae_fly.peer == self.ae_acks.peer).filter(
            lambda f, a: self.ae_in_flight(f.upto, f.at, a.state)
        ).map(lambda f, a: (f.peer,))
        self.ae_cand <= self.ae_clock.join(self.peer).join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).join(self.ae_buffer).filter(
            lambda c, p, a, b: b.seq > _ack_parts(a.state)[1] and self.ae_usable(a.state)
        ).map(
            lambda c, p, a, b: (p.addr, (b.seq, b.origin,
                                         0 if b.origin == p.addr else _size(b.delta)))
        )
        self.ae_cut <= self.ae_cand.group(["peer"], accum("item")).notin(
            self.ae_busy, lambda g, busy: g[0] == busy.peer
        ).map(lambda g: (g[0], self.ae_cutoff(g[1])))
        self.ae_pend <= self.ae_cut.map(lambda c: (c.peer, type(self.store)()))
        self.ae_pend <= self.ae_cut.join(self.ae_acks, self.ae_cut.peer == self.ae_acks.peer).join(
            self.ae_buffer
        ).filter(
            lambda c, a, b: _ack_parts(a.state)[1] < b.seq <= c.upto and b.origin != c.peer
        ).map(lambda c, a, b: (c.peer, b.delta))
        self.ae_delta <~ self.ae_pend.join(self.ae_cut, self.ae_pend.peer == self.ae_cut.peer).join(
            self.ae_acks, self.ae_pend.peer == self.ae_acks.peer
        ).map(
            lambda d, c, a: (d.peer, self.addr, _ack_parts(a.state)[0], self.ae_epoch, c.upto,
                             False, d.kv)
        )
        self.ae_fly <+ self.ae_cut.map(lambda c: (c.peer, lmax(c.upto), self.ae_now))
        # an empty probe now and then: a restarted peer answers it with a void ack
        self.ae_delta <~ self.ae_probe.join(self.peer).join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).filter(lambda t, p, a: self.ae_usable(a.state)).map(
            lambda t, p, a: (p.addr, self.addr, _ack_parts(a.state)[0], self.ae_epoch,
                             _ack_parts(a.state)[1], False, type(self.store)())
        )
        # bulk sync: a peer without a usable ack and no sync in progress (nor one started
        # too recently) gets the store as of this tick, in chunks
        self.ae_due <= self.peer.notin(
            self.ae_acks, lambda p, a: p.addr == a.peer and self.ae_usable(a.state)
        ).notin(
            self.ae_full, lambda p, f: p.addr == f.peer and self.ae_recent(f.first, f.at)
        ).notin(self.ae_sync, lambda p, s: p.addr == s.peer)
        # (from tick 1 on: a sync at tick T acks the changes numbered up to T - 1)
        self.ae_sync <+ self.ae_clock.join(self.ae_due).filter(lambda c, p: self.tick_count > 0).map(
            lambda c, p: (p.addr, self.tick_count, self.ae_snapshot(self.tick_count), lmap(),
                          lmap(), lmax(c.time))
        )
        self.ae_full <+ self.ae_clock.join(self.ae_due).filter(
            lambda c, p: self.tick_count > 0
        ).map(lambda c, p: (p.addr, lmin(c.time), lmax(c.time)))
        self.ae_go <= self.ae_clock.join(self.ae_sync).flat_map(
            lambda c, s: [(s.peer, s.snap, i)
                          for i in self.ae_chunks_due(s.count, s.snap, s.acked, s.sent, s.at)]
        )
        self.ae_chunk <~ self.ae_go.join(
            self.ae_sync, self.ae_go.peer == self.ae_sync.peer, self.ae_go.snap == self.ae_sync.snap
        ).flat_map(
            lambda g, s: [(g.peer, self.addr, self.ae_epoch, g.snap, g.index, s.count, kv)
                          for kv in self.ae_chunk_of(g.snap, g.index)]
        )
        self.ae_sync <+ self.ae_go.join(
            self.ae_sync, self.ae_go.peer == self.ae_sync.peer, self.ae_go.snap == self.ae_sync.snap
        ).map(
            lambda g, s: (s.peer, s.snap, s.count, lmap(), self.ae_sent_mark(s.sent, g.index),
                          s.at)
        )
        self.ae_sync <= self.ae_chunk_ack.join(
            self.ae_sync,
            self.ae_chunk_ack.src == self.ae_sync.peer,
            self.ae_chunk_ack.snap == self.ae_sync.snap,
        ).filter(lambda a, s: a.for_epoch == self.ae_epoch).map(
            lambda a, s: (s.peer, s.snap, s.count, lmap({a.epoch: lset([a.index])}), lmap(),
                          self.ae_now)
        )
        # a completed sync is an ack of everything before its tick; a stalled one is dropped
        self.ae_acks <= self.ae_sync.flat_map(
            lambda s: [(s.peer, _ack_state(e, s.snap - 1))
                       for e in (self.ae_synced(s.count, s.acked),) if e is not None]
        )
        self.ae_sync <- self.ae_sync.filter(
            lambda s: self.ae_synced(s.count, s.acked) is not None
            or self.ae_now.reveal() - s.at.reveal() > self.ae_stall
        )
        self.ae_full <- self.ae_full.join(
            self.ae_acks, self.ae_full.peer == self.ae_acks.peer
        ).filter(lambda f, a: self.ae_usable(a.state)).map(lambda f, a: f)
        # forget what every current peer acked (the floor remembers how far: a peer that
        # comes back with an older ack gets a bulk sync), and what is older than the horizon
        self.ae_acked <= self.peer.join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).map(lambda p, a: (p.addr, _ack_parts(a.state)[1]))
        self.ae_acked <= self.peer.notin(self.ae_acks, self.peer.addr == self.ae_acks.peer).map(
            lambda p: (p.addr, -1)
        )
        self.ae_low <= self.ae_acked.group(None, min_("upto"))
        self.ae_floor <= self.ae_low.map(lambda low: lmax(low.upto))
        self.ae_dropped <= self.ae_buffer.filter(
            lambda b: b.seq < self.tick_count - 2 * self.ae_horizon
        ).map(lambda b: lmax(b.seq))
        self.ae_buffer <- self.ae_buffer.filter(
            lambda b: b.seq < self.tick_count - 2 * self.ae_horizon
        )
        self.ae_buffer <- self.ae_buffer.join(self.ae_low).filter(
            lambda b, low: b.seq <= low.upto
        ).map(lambda b, low: b)
    # fmt: on
