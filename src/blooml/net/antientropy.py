"""Anti-entropy: replicas of a lattice exchange small changes as deltas and repair the rest
by comparing range digests.

Whole-state gossip (send the whole ``lmap`` to every peer every period) is the simplest
convergent replication, but it costs the whole state per peer per period, on the wire and in
encoding, decoding and merging at both ends. :class:`DeltaGossip` replicates ``store`` on two
lanes, as a mixin of Bloom^L rules:

* **Deltas** (the delta-state CRDT idiom of Almeida, Shoker and Baquero, "Delta State
  Replicated Data Types", 2018): every change a replica learns (its own
  :attr:`~DeltaGossip.update` rows, and the part of a received delta that was new to it,
  computed by :func:`novel` at the cost of the delta) is kept in ``ae_buffer`` under the tick
  that learned it and the peer it came from, and sent to each peer at once (in the next tick,
  not on a timer) as one ``ae_delta``: the join of the oldest changes the peer has not acked,
  up to ``ae_batch_keys`` keys (not those that came from it), and the sequence number it
  covers. The peer merges it and acks that number; one delta per peer is in flight (the next
  leaves when the ack arrives, or after ``ae_resend`` seconds without one). Changes are
  forwarded, so replicas converge over any connected peer graph, not only a full mesh. A
  change acked by every current peer, or older than ``2 * ae_horizon`` ticks, is dropped.
  A tick's own change of more than ``ae_batch_keys`` keys (a load through ``update``) is not
  a delta: it is cut into parts of ``ae_batch_keys`` keys, sent to each peer as the chunks
  of a transfer on the repair lane (acked, ``ae_window`` in flight; one transfer per peer
  at a time), so that no message is larger than a chunk and the delta lane stays free.
* **Range repair** (the digest comparison of Dynamo, Cassandra repair and Riak's active
  anti-entropy): each replica keeps the digests of 1,024 key ranges of its store, updated
  with each committed change at its cost (:mod:`blooml.net._digest`; never a re-hash of the
  store). Every ``ae_probe`` period (2 s) it sends each peer its root digest and size
  (``ae_digest``, about 100 bytes); a peer whose root differs answers with its range digests
  (``ae_ranges``, 8 bytes a range, about 64 keys a range, with the keys its sender has not
  had acked by the receiver and its size), and the replica sends it the keys of every range
  that differs (``ae_chunk``: chunks of about ``ae_batch_keys`` keys, ``ae_window`` in
  flight, each acked, an overdue one sent again after waits that double). When few of the
  1,024 leaves differ, it first asks for the digests of their 16 slots each (``ae_sub``)
  and sends only the slots that differ; when the deltas on their way may explain the
  difference, the repair is put off (``ae_defer``). When every chunk of a repair of more
  than one chunk is acked it sends its root again, so such rounds follow one another until
  the roots agree. This is what fills a new or restarted replica, and what repairs anything
  the deltas missed (a lost delta past the horizon, a peer that was away). What arrives this
  way is merged but never passed on as deltas (each pair of replicas repairs itself), and a
  replica that is receiving a repair does not start one (its ranges are moving).

**After convergence** a replica sends one root digest per peer per ``ae_probe`` period and
nothing else, and computes nothing but comparing two numbers. A peer's epoch (its start time
in ns, carried in every message) tells a restarted peer: its old ack is void, deltas resume
from the present, and range repair brings it the past. Only addresses in ``peer`` get rows in
``ae_acks`` or answers to a digest, so forged senders cannot grow the state or make a replica
send its range digests to anyone.

Use it by mixing it in, writing local changes to ``update`` and filling ``peer``::

    class Replica(DeltaGossip):
        put = channel(["@addr", "key", "version"], ["value"])

        @bloom
        def writes(self):
            self.update <= self.put.map(
                lambda p: (p.key, lmap({p.key: lmax((p.version, p.value))}))
            )

``store`` is an ``lmap`` by default; redeclare it (``store = lset()``) for another lattice
(:func:`novel`, the ranges and the chunks know ``lmap``, ``lset`` and ``lbag``; any other
lattice is one range, sent whole). See ``docs/net.md``.
"""

from __future__ import annotations

import time
from typing import Any

from rpds import HashTrieMap

from blooml.bloom import (
    Program,
    accum,
    bloom,
    channel,
    max_,
    min_,
    periodic,
    scratch,
    sum_,
    table,
)
from blooml.lattices import Lattice, lbag, ldompair, lmap, lmax, lset
from blooml.lattices.sets import _elems, trie_items
from blooml.net._digest import MAX_DEPTH, RangeDigest, split

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


def _count(x: Any) -> int:
    """A key count from a peer's message: a non-negative ``int``, else 0."""
    return x if type(x) is int and x > 0 else 0


def _newest(items: Any) -> tuple[int, Any, Any, int, Any, int, int]:
    """Of a peer's digests received in one tick (``ae_asked`` items), the one to plan from:
    slot digests before range digests, then the finest depth and the newest incarnation
    (compared on those alone: the rest is the peer's data, of any type)."""
    return max(items, key=lambda it: tuple(x if type(x) is int else -1 for x in it[:2] + it[3:4]))


class DeltaGossip(Program, abstract=True):
    """A mixin: replicate ``store`` to every address in ``peer`` by deltas and range repair.

    State it declares (redeclare to change): ``peer(addr)``, ``store`` (``lmap()``),
    ``update(id, delta)`` (a scratch: write local changes here, not into ``store``),
    ``ae_clock`` (``periodic(0.5)``: resends), ``ae_probe`` (``periodic(2.0)``: root
    digests), the channels ``ae_delta``, ``ae_ack``, ``ae_digest``, ``ae_ranges``, ``ae_sub``,
    ``ae_chunk`` and ``ae_chunk_ack``, and the tables ``ae_buffer`` (changes not acked by
    every peer), ``ae_acks`` (per peer: its epoch and the last change it acked; current
    peers only), ``ae_unacked`` (deltas received, acked in the tick that merges them),
    ``ae_fly`` (the delta in flight to each peer), ``ae_descend`` (the leaves
    to ask a peer about, slot by slot, at the next ``ae_clock`` period) and ``ae_sync`` (range
    repairs and transfers of large changes in progress). The class attributes below tune it.
    """

    peer = table(["addr"])
    store = lmap()
    update = scratch(["id"], ["delta"])
    ae_clock = periodic(0.5)
    ae_probe = periodic(2.0)
    ae_delta = channel(["@addr", "src", "epoch", "src_epoch", "upto", "full"], ["kv"])
    ae_ack = channel(["@addr", "src", "epoch", "for_epoch", "upto"])
    ae_digest = channel(["@addr", "src", "src_epoch", "root", "size"])
    ae_ranges = channel(["@addr", "src", "src_epoch", "ask", "depth", "digests", "owed", "size"])
    ae_sub = channel(["@addr", "src", "src_epoch", "ask", "leaves", "digests"])
    ae_chunk = channel(["@addr", "src", "src_epoch", "snap", "index", "count"], ["kv"])
    ae_chunk_ack = channel(["@addr", "src", "epoch", "for_epoch", "snap", "index"])
    ae_buffer = table(["seq", "origin"], ["delta"])
    ae_tick = scratch(["n"], ["kv"])
    ae_bulk = scratch(["peer"], ["count"])
    ae_head = scratch(["peer"], ["snap"])
    ae_wait = scratch(["peer", "snap"], ["count", "acked", "sent", "at"])
    ae_new = scratch(["src"], ["kv"])
    ae_unacked = table(["src", "src_epoch", "upto"])
    ae_heard = scratch(["peer", "epoch"])
    ae_stale = scratch(["peer", "epoch"])
    ae_unheard = scratch(["addr"])
    ae_acks = table(["peer"], ["state"])
    ae_acked = scratch(["peer"], ["upto"])
    ae_low = scratch(["upto"])
    ae_floor = lmax(-1)
    ae_dropped = lmax(-1)
    ae_now = lmax(0.0)
    ae_rx = table(["peer"], ["at"])
    ae_feeding = scratch(["peer"])
    ae_wake = scratch(["n"])
    ae_turn = scratch(["n"])
    ae_busy = scratch(["peer"])
    ae_cand = scratch(["peer", "item"])
    ae_cut = scratch(["peer"], ["upto"])
    ae_pend = scratch(["peer"], ["kv"])
    ae_fly = table(["peer"], ["upto", "at"])
    ae_asked = scratch(["peer", "item"])
    ae_plan = scratch(["peer"], ["count", "descend"])
    ae_descend = table(["peer"], ["leaves"])
    ae_want = scratch(["peer"], ["items"])
    ae_owe_q = scratch(["peer"])
    ae_owed = scratch(["peer", "seq", "origin"], ["size"])
    ae_owing = scratch(["peer"], ["keys"])
    ae_sync = table(["peer", "snap"], ["count", "acked", "sent", "at"])
    ae_done = scratch(["peer", "snap"])
    ae_go = scratch(["peer", "snap", "index"])

    #: Ticks of changes kept for a peer that has not acked them; changes older than twice
    #: this are dropped (range repair brings them to a peer that missed them).
    ae_horizon = 10_000
    #: Keys (elements) per message: a delta joins buffered changes up to about this many, a
    #: range repair sends chunks of about this many, and a tick's change of more than this
    #: many goes in chunks of this many on the repair lane, not as a delta.
    ae_batch_keys = 4_000
    #: Chunks of a range repair in flight to a peer at a time.
    ae_window = 4
    #: Seconds before a delta that was not acked is sent again.
    ae_resend = 1.0
    #: Seconds without any chunk acked before a repair's overdue chunk is sent again (its
    #: waits double with each resend of it, up to ``ae_full_max``): generous, since a peer
    #: being filled may take seconds per tick, and a copy only adds to its backlog.
    ae_chunk_resend = 5.0
    #: The longest wait before a chunk is sent again.
    ae_full_max = 30.0
    #: Seconds a range repair may go without any chunk acked before it is given up (the
    #: next root digest starts another).
    ae_stall = 30.0
    #: Leaves (the 1,024 finest ranges) that differ, at most, for which a replica asks the
    #: peer for the digests of their slots (``ae_sub``, 128 bytes a leaf) before it sends
    #: anything, when they hold ``ae_sub_keys`` keys a leaf or more: it then sends the keys
    #: of the slots that differ (a sixteenth of a leaf each), not whole ranges. A key
    #: written at one replica and still on its way to another as a delta makes their
    #: ranges differ; sending its whole range (about 200 keys at 200k keys) for each such
    #: key made the repairs of three replicas under a steady 1,000 writes/s send 1 MB/s
    #: and take the CPU from the deltas. More leaves than this (a replica far behind) are
    #: sent whole at once.
    ae_sub_leaves = 128
    #: Keys a leaf, on average over the leaves that differ, from which asking for their
    #: slots' digests (128 bytes a leaf) costs less than sending their keys whole (small
    #: stores, whose leaves hold a few keys, send them).
    ae_sub_keys = 8
    #: Seconds for which a repair of a peer may be put off while the deltas on their way
    #: between the two (the keys this replica has not had acked by the peer, and those the
    #: peer reports it has not had acked: ``owed``) are at least half as many as the leaves
    #: that differ, and the stores' sizes differ by no more than they (so they may be most
    #: of the difference; what they do not explain is small at a later comparison). After a
    #: partition heals, or a replica with durable state restarts, the deltas buffered for it
    #: bring what changed meanwhile; a repair planned at the same time sent the ranges
    #: whole (a 5 s partition under 400 writes/s at 40k keys: 70,000 keys for 2,000
    #: changed).
    #: Counted from the first comparison put off, so that a difference the deltas do not
    #: explain is repaired within this many seconds (and a probe) however busy they are.
    ae_defer = 6.0
    #: Seconds after the last repair chunk it received from a peer during which a replica
    #: starts no repair of another peer (it is still being filled: its ranges are moving, and
    #: the other peer is likely being filled by the same source).
    ae_quiet = 2.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: This incarnation's epoch: acks name it, so a restarted peer is known as such.
        self.ae_epoch = time.time_ns()
        rt = self.__dict__["_rt"]
        #: The range digests of ``store``, kept with each committed change.
        self.ae_digests = RangeDigest(rt.lats["store"].value)
        rt.lat_watch.setdefault("store", []).append(self.ae_digests.seen)
        #: The chunks of each range repair: ``(peer, snap) -> [ranges of chunk i]``.
        #: (a chunk is a tuple of ranges, sent as the store's entries in them, or for a
        #: large change of this replica's, a part of it, sent as it is)
        self._ae_plans: dict[tuple[str, int], list[Any]] = {}
        self._ae_parts: tuple[int, Any, list[Any]] = (-1, None, [])
        self._ae_ended: dict[tuple[str, int], int] = {}
        self._ae_plan_epochs: dict[tuple[str, int], int] = {}
        #: Repairs of slots or of one chunk: the next round waits for the next
        #: ``ae_probe``, instead of following at once (:meth:`ae_chains`).
        self._ae_small: set[tuple[str, int]] = set()
        #: When the repair of a peer was first put off, and last compared, by peer
        #: (:attr:`ae_defer`).
        self._ae_deferred: dict[str, tuple[float, float]] = {}

    def ae_usable(self, state: ldompair) -> bool:
        """Whether a peer's ack still lets deltas reach it: every change after it is still
        buffered (none was dropped as acked by all current peers, nor as too old)."""
        upto = _ack_parts(state)[1]
        return (
            upto >= 0
            and upto >= self.ae_floor.value.reveal()
            and upto >= self.ae_dropped.value.reveal()
        )

    def ae_start_from(self) -> int:
        """The ack a peer without a usable one is given: it is sent every change still
        buffered (sequence numbers start at 1), and range repair brings the rest."""
        return max(0, self.ae_floor.value.reveal(), self.ae_dropped.value.reveal())

    def ae_owed_from(self, state: ldompair) -> int:
        """The sequence number after which a peer with ack ``state`` is owed buffered
        changes: its ack when usable, else :meth:`ae_start_from` (where it starts over)."""
        if self.ae_usable(state):
            return _ack_parts(state)[1]
        return self.ae_start_from()

    def ae_current(self, state: ldompair, epoch: int) -> bool:
        """Whether a peer's ack is usable and speaks for its incarnation ``epoch``."""
        return _ack_parts(state)[0] >= epoch and self.ae_usable(state)

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

    def ae_root(self) -> int:
        """The root digest of ``store`` (equal roots: equal stores)."""
        return self.ae_digests.root

    def ae_root_to(self, peer: str) -> tuple[str, str, int, int, int]:
        """The ``ae_digest`` row that sends ``peer`` this replica's root digest and size."""
        return (peer, self.addr, self.ae_epoch, self.ae_digests.root, self.ae_digests.size())

    def ae_ranges_for(self, size: Any) -> tuple[int, bytes]:
        """``(depth, range digests)`` to answer a peer whose store has ``size`` entries."""
        n = size if isinstance(size, int) and size >= 0 else 0
        depth = RangeDigest.depth_for(max(n, self.ae_digests.size()))
        return depth, self.ae_digests.vector(depth)

    def ae_recent(self, at: lmax) -> bool:
        """Whether ``at`` (when a repair chunk arrived from a peer) is less than ``ae_quiet``
        seconds ago."""
        return bool(self.ae_now.value.reveal() - at.reveal() < self.ae_quiet)

    def ae_plan_for(
        self, peer: str, item: tuple[int, Any, Any, int, Any, int, int], owed: int = 0
    ) -> tuple[int, tuple[int, ...]]:
        """Plan a range repair of ``peer`` from ``item``: ``(0, depth, digests, epoch, (),
        owed_in, size)``, its range digests at ``depth``, the keys it has not had acked by
        this replica and its store's size (``ae_ranges``), or ``(1, depth, digests, epoch,
        leaves, 0, 0)``, the digests of the slots of ``leaves`` (``ae_sub``, answering this
        replica's ask); ``epoch`` is the peer's incarnation, ``owed`` the keys this replica
        has not had acked by it.

        Returns ``(chunks, leaves)``. When the leaves that differ are no more than twice the
        keys on their way between the two (``owed`` and ``owed_in``), and the two stores'
        sizes differ by no more than those keys, the repair is put off, for ``ae_defer``
        seconds at most: ``(0, ())``. When the ranges that differ hold keys
        of this store in at most ``ae_sub_leaves`` leaves, ``ae_sub_keys`` keys a leaf or
        more, nothing is planned: ``(0, leaves)``, the leaves to ask the peer about.
        Otherwise the keys of the slots that differ, in chunks of about ``ae_batch_keys``:
        ``(chunks, ())``, ``(0, ())`` when this replica has nothing to send."""
        kind, depth, digests, epoch, leaves, owed_in, size = item
        d = self.ae_digests
        if kind == 1:
            slots = d.sub_differs(leaves, digests)
        else:
            slots = d.differs(digests, depth)
            if not slots:
                self._ae_deferred.pop(peer, None)
            else:
                leaves = d.leaves_of(slots)
                now = self.ae_now.value.reveal()
                since, last = self._ae_deferred.get(peer, (now, now))
                if now - last > self.ae_defer:  # (an earlier episode, since ended)
                    since = now
                self._ae_deferred[peer] = (since, now)
                on_way = _count(owed) + _count(owed_in)
                # (a peer restarted empty differs by its size: the deltas cannot fill it)
                near = abs(d.size() - _count(size)) <= on_way
                if near and len(leaves) <= 2 * on_way and now - since < self.ae_defer:
                    return 0, ()
                self._ae_deferred.pop(peer, None)
                count = d.count
                if len(leaves) <= self.ae_sub_leaves and sum(
                    count[s] for s in slots
                ) >= self.ae_sub_keys * len(leaves):
                    return 0, leaves
        plan = d.plan(slots, self.ae_batch_keys)
        if not plan:
            return 0, ()
        key = (peer, self.tick_count)
        self._ae_plans[key] = plan
        self._ae_plan_epochs[key] = epoch
        if kind == 1 or len(plan) == 1:
            self._ae_small.add(key)
        self._ae_trim()
        return len(plan), ()

    def ae_chains(self, peer: str, snap: int) -> bool:
        """Whether a completed transfer is followed by the next round at once (its root
        again): a repair of more than one chunk (a replica far behind) or a large change.
        Not a repair of slots or of one chunk: the next period's root is soon enough, and
        at once, under steady writes, rounds followed one another for ever, each finding
        the keys still on their way as deltas (at 4,000 keys, repairs sent 2x the keys
        written)."""
        return (peer, snap) not in self._ae_small

    def ae_bulk_for(self, peer: str, kv: Any) -> int:
        """Plan the transfer of a large change of this tick, ``kv`` (over ``ae_batch_keys``
        keys), to ``peer`` on the repair lane: its parts of at most ``ae_batch_keys`` keys
        are the chunks (cut once per tick, shared by the peers); returns their number. Its
        snapshot number is ``-(tick + 1)``, never a repair's; it is for every incarnation of
        the peer (a restarted one is sent the chunks its new incarnation has not acked)."""
        tick, value, parts = self._ae_parts
        if tick != self.tick_count or value is not kv:
            parts = split(kv, self.ae_batch_keys)
            self._ae_parts = (self.tick_count, kv, parts)
        key = (peer, -(self.tick_count + 1))
        self._ae_plans[key] = parts
        self._ae_plan_epochs[key] = 0
        self._ae_trim()
        return len(parts)

    def ae_large(self, kv: Any) -> bool:
        """Whether a tick's change is too large for one delta (over ``ae_batch_keys`` keys):
        it goes in acked chunks on the repair lane instead."""
        return _size(kv) > self.ae_batch_keys

    def _ae_trim(self) -> None:
        """Forget the plans of transfers that ended in an earlier tick (:meth:`ae_end`), and
        range repairs that outlive 64 newer ones (they start again); a
        large change's plan is kept while its transfer lasts (it holds the change)."""
        ended = self._ae_ended
        for key in [k for k, tick in ended.items() if tick < self.tick_count]:
            del ended[key]
            self._ae_plans.pop(key, None)
            self._ae_plan_epochs.pop(key, None)
            self._ae_small.discard(key)
        repairs = [k for k in self._ae_plans if k[1] >= 0]
        for key in repairs[: max(0, len(repairs) - 64)]:
            del self._ae_plans[key]
            del self._ae_plan_epochs[key]
            self._ae_small.discard(key)

    def ae_chunks_due(
        self, peer: str, count: int, snap: int, acked: lmap, sent: lmap, at: lmax
    ) -> list[int]:
        """The chunks of a range repair to send now (a sliding window): of the first
        ``ae_window`` not acked yet (by the peer's newest incarnation that acked any), every
        one never sent, and the first whose ack is overdue (``ae_chunk_resend`` seconds, doubling
        with each resend of it, and no chunk acked meanwhile: a busy peer is not buried under
        copies). None if the repair
        is complete, stalled (no ack for ``ae_stall`` seconds) or its plan is gone."""
        now = self.ae_now.value.reveal()
        if (peer, snap) not in self._ae_plans or now - at.reveal() > self.ae_stall:
            return []
        got = acked.reveal()
        done = got[max(got)].reveal() if got else frozenset()
        todo = [i for i in range(count) if i not in done][: self.ae_window]
        when = sent.reveal()
        out = [i for i in todo if i not in when]
        for i in todo:
            if i in when:
                tries, last = when[i].reveal()
                wait = min(self.ae_chunk_resend * 2 ** (tries - 1), self.ae_full_max)
                # and only when no chunk was acked meanwhile: a peer that acks is busy, not
                # deaf (resending to it would only add to its backlog)
                if now - last >= wait and now - at.reveal() >= self.ae_chunk_resend:
                    out.append(i)
                    break
        return sorted(out)

    def ae_sent_mark(self, sent: lmap, index: int) -> lmap:
        """``sent`` for chunk ``index`` sent now: ``lmax((times sent, time))``."""
        old = sent.reveal().get(index)
        tries = old.reveal()[0] if old is not None else 0
        return lmap({index: lmax((tries + 1, self.ae_now.value.reveal()))})

    def ae_chunk_of(self, peer: str, snap: int, index: int) -> list[Any]:
        """``[chunk]``: the store's entries now in the ranges of chunk ``index`` of a
        repair, or that part of a large change (``[]`` if its plan is gone)."""
        plan = self._ae_plans.get((peer, snap))
        if plan is None or not 0 <= index < len(plan):
            return []
        item = plan[index]
        if type(item) is not tuple:
            return [item]
        return [self.ae_digests.chunk(self.store.value, item)]

    def ae_outdated(self, peer: str, snap: int, state: ldompair) -> bool:
        """Whether a repair was planned for an earlier incarnation of ``peer`` than the one
        its ack ``state`` names (it restarted: the repair starts over). A large change's
        transfer (``snap < 0``) never is: a restarted peer needs it too."""
        return snap >= 0 and self._ae_plan_epochs.get((peer, snap), 0) < _ack_parts(state)[0]

    def ae_end(self, peer: str, snap: int) -> bool:
        """Note that the transfer ``(peer, snap)`` ends in this tick (its row is deleted):
        its plan is forgotten after it. Returns ``True`` (a filter of the deletions)."""
        self._ae_ended[(peer, snap)] = self.tick_count
        return True

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
        # -- deltas --------------------------------------------------------------------------
        # local changes: into the store now, into the buffer under this tick's number, and
        # out to the peers in the next tick; a tick's change over ae_batch_keys keys (a load
        # through update) goes to each peer in acked chunks on the repair lane instead, so
        # that no message is larger than a chunk and the delta lane stays free
        self.store <= self.update.map(lambda u: u.delta)
        self.ae_tick <= self.update.map(lambda u: (0, u.delta))
        self.ae_buffer <+ self.ae_tick.filter(lambda t: not self.ae_large(t.kv)).map(
            lambda t: (self.tick_count + 1, self.addr, t.kv)
        )
        self.ae_wake <+ self.update.map(lambda u: (0,))
        self.ae_bulk <= self.ae_tick.filter(lambda t: self.ae_large(t.kv)).join(self.peer).map(
            lambda t, p: (p.addr, self.ae_bulk_for(p.addr, t.kv))
        )
        self.ae_sync <+ self.ae_bulk.map(
            lambda b: (b.peer, -(self.tick_count + 1), b.count, lmap(), lmap(), self.ae_now)
        )
        self.ae_turn <+ self.ae_bulk.map(lambda b: (0,))
        # a received delta: only what is new is merged (next tick, so that "new" is computed
        # against the store before it), buffered for the other peers and acked
        self.ae_new <= self.ae_delta.map(lambda d: (d.src, novel(d.kv, self.store)))
        self.store <+ self.ae_new.map(lambda n: n.kv)
        self.ae_buffer <+ self.ae_new.filter(lambda n: n.kv != type(n.kv)()).map(
            lambda n: (self.tick_count + 1, n.src, n.kv)
        )
        self.ae_wake <+ self.ae_new.filter(lambda n: n.kv != type(n.kv)()).map(lambda n: (0,))
        # (the ack leaves in the tick that merges the delta: an acked change is in the store.
        # Sent at once, it left a tick early, and range digests read in between lacked keys
        # their peer counted as delivered: a repair the deltas explained was not put off)
        self.ae_unacked <+ self.ae_delta.map(
            lambda d: (d.src, d.src_epoch, d.upto if d.full or d.epoch == self.ae_epoch else -1)
        )
        self.ae_ack <~ self.ae_unacked.map(
            lambda u: (u.src, self.addr, self.ae_epoch, u.src_epoch, u.upto)
        )
        self.ae_unacked <- self.ae_unacked
        # peers heard from (current peers only: a forged sender gets no row): a newer epoch
        # (a restart) voids the old ack; a peer without a usable ack is sent every change
        # still buffered (range repair brings the rest)
        self.ae_heard <= self.ae_delta.map(lambda d: (d.src, d.src_epoch))
        self.ae_heard <= self.ae_digest.map(lambda d: (d.src, d.src_epoch))
        self.ae_heard <= self.ae_ranges.map(lambda d: (d.src, d.src_epoch))
        self.ae_heard <= self.ae_sub.map(lambda d: (d.src, d.src_epoch))
        self.ae_heard <= self.ae_chunk.map(lambda d: (d.src, d.src_epoch))
        self.ae_acks <= self.ae_heard.join(self.peer, self.ae_heard.peer == self.peer.addr).map(
            lambda h, p: (h.peer, _ack_state(h.epoch, -1))
        )
        self.ae_stale <= self.ae_heard.join(
            self.peer, self.ae_heard.peer == self.peer.addr
        ).map(lambda h, p: (h.peer, h.epoch)).notin(
            self.ae_acks, lambda h, a: h[0] == a.peer and self.ae_current(a.state, h[1])
        )
        self.ae_wake <+ self.ae_stale.map(lambda s: (0,))
        # and is sent this replica's root at once: a new or restarted peer is repaired now,
        # not at the next ae_probe (or sooner by chance, when a repair had just ended)
        self.ae_digest <~ self.ae_stale.map(
            lambda s: self.ae_root_to(s.peer)
        ).notin(self.ae_sync, lambda d, s: d[0] == s.peer)
        self.ae_acks <+ self.ae_stale.map(
            lambda s: (s.peer, _ack_state(s.epoch, self.ae_start_from()))
        )
        # and the delta in flight to its previous incarnation is forgotten: the next leaves
        # at once, from where it starts over (it waited ae_resend for an ack that could not
        # come, while the writes of that second piled up unsent and a repair sent them)
        self.ae_fly <- self.ae_stale.join(self.ae_fly, self.ae_stale.peer == self.ae_fly.peer).map(
            lambda s, f: f
        )
        # an ack speaks of this incarnation's sequence numbers only (not a previous one's)
        self.ae_acks <= self.ae_ack.join(self.peer, self.ae_ack.src == self.peer.addr).filter(
            lambda a, p: a.for_epoch == self.ae_epoch
        ).map(lambda a, p: (a.src, _ack_state(a.epoch, a.upto)))
        self.ae_now <= self.ae_clock.map(lambda c: lmax(c.time))
        # every period, when a change was buffered, and when an ack frees a peer's lane: each
        # peer with a usable ack, no delta in flight and buffered changes it has not acked
        # gets the oldest of them (whole ticks, ~ae_batch_keys keys)
        self.ae_wake <= self.ae_clock.map(lambda c: (0,))
        self.ae_wake <= self.ae_ack.map(lambda a: (0,))
        self.ae_busy <= self.ae_fly.join(self.ae_acks, self.ae_fly.peer == self.ae_acks.peer).filter(
            lambda f, a: self.ae_in_flight(f.upto, f.at, a.state)
        ).map(lambda f, a: (f.peer,))
        self.ae_cand <= self.ae_wake.join(self.peer).join(
            self.ae_acks, self.peer.addr == self.ae_acks.peer
        ).join(self.ae_buffer).filter(
            lambda w, p, a, b: b.seq > _ack_parts(a.state)[1] and self.ae_usable(a.state)
        ).map(
            lambda w, p, a, b: (p.addr, (b.seq, b.origin,
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
        # forget what every current peer acked (the floor remembers how far), and what is
        # older than the horizon; forget the peers that are no longer peers
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
        self.ae_acks <- self.ae_acks.notin(self.peer, lambda a, p: a.peer == p.addr)
        self.ae_fly <- self.ae_fly.notin(self.peer, lambda f, p: f.peer == p.addr)
        self.ae_sync <- self.ae_sync.notin(self.peer, lambda s, p: s.peer == p.addr).filter(
            lambda s: self.ae_end(s.peer, s.snap)
        )

        # -- range repair --------------------------------------------------------------------
        # every ae_probe period: the root digest to each peer; a peer whose root differs
        # answers with its range digests (current peers only: no amplification for others)
        # (not to a peer this replica is sending a transfer to: its ranges are moving, and
        # comparing them would only make it send back what it is being sent)
        self.ae_digest <~ self.ae_probe.join(self.peer).map(
            lambda t, p: self.ae_root_to(p.addr)
        ).notin(self.ae_sync, lambda d, s: d[0] == s.peer)
        # (and every ae_clock period to a peer never heard from: the first contact)
        self.ae_unheard <= self.peer.notin(self.ae_acks, self.peer.addr == self.ae_acks.peer)
        self.ae_digest <~ self.ae_clock.join(self.ae_unheard).map(
            lambda t, p: self.ae_root_to(p.addr)
        )
        self.ae_ranges <~ self.ae_digest.join(self.peer, self.ae_digest.src == self.peer.addr).join(
            self.ae_owing, self.ae_digest.src == self.ae_owing.peer
        ).filter(lambda d, p, o: d.root != self.ae_root()).map(
            lambda d, p, o: (d.src, self.addr, self.ae_epoch, True, *self.ae_ranges_for(d.size),
                             o.keys, self.ae_digests.size())
        ).notin(self.ae_sync, lambda r, s: r[0] == s.peer)
        # ranges that asked for ours (answers to a digest) get them: both sides then send
        # what differs, in one and a half round trips
        self.ae_ranges <~ self.ae_ranges.join(self.peer, self.ae_ranges.src == self.peer.addr).join(
            self.ae_owing, self.ae_ranges.src == self.ae_owing.peer
        ).filter(lambda r, p, o: r.ask).map(
            lambda r, p, o: (r.src, self.addr, self.ae_epoch, False,
                             *self.ae_ranges_for(len(r.digests) // 8 * 64), o.keys,
                             self.ae_digests.size())
        )
        # the keys this replica has not had acked by a peer it compares ranges with (deltas
        # on their way: ``owed``), summed when a comparison needs them; for a peer whose ack
        # is void (it restarted), those after ``ae_start_from``, which it is sent next
        self.ae_owe_q <= self.ae_digest.map(lambda d: (d.src,))
        self.ae_owe_q <= self.ae_ranges.map(lambda r: (r.src,))
        self.ae_owe_q <= self.ae_sub.map(lambda s: (s.src,))
        self.ae_owed <= self.ae_owe_q.map(lambda q: (q.peer, -1, "", 0))
        self.ae_owed <= self.ae_owe_q.join(self.ae_acks, self.ae_owe_q.peer == self.ae_acks.peer).join(
            self.ae_buffer
        ).filter(
            lambda q, a, b: b.origin != q.peer and b.seq > self.ae_owed_from(a.state)
        ).map(lambda q, a, b: (q.peer, b.seq, b.origin, _size(b.delta)))
        self.ae_owing <= self.ae_owed.group(["peer"], sum_("size"))
        # the ranges that differ are sent in chunks (not while a repair to that peer is in
        # progress, nor while this replica is itself being repaired)
        self.ae_asked <= self.ae_ranges.join(self.peer, self.ae_ranges.src == self.peer.addr).map(
            lambda r, p: (r.src, (0, r.depth, r.digests, r.src_epoch, (), r.owed, r.size))
        )
        # the digests of the slots of the ranges this replica asked about (below)
        self.ae_asked <= self.ae_sub.join(self.peer, self.ae_sub.src == self.peer.addr).filter(
            lambda s, p: not s.ask
        ).map(lambda s, p: (s.src, (1, MAX_DEPTH, s.digests, s.src_epoch, s.leaves, 0, 0)))
        self.ae_feeding <= self.ae_rx.filter(lambda r: self.ae_recent(r.at)).map(
            lambda r: (r.peer,)
        )
        self.ae_want <= self.ae_asked.notin(self.ae_sync, lambda a, s: a[0] == s.peer).notin(
            self.ae_feeding, lambda a, f: a[0] != f.peer
        ).group(["peer"], accum("item"))
        self.ae_plan <= self.ae_want.join(self.ae_owing, self.ae_want.peer == self.ae_owing.peer).map(
            lambda w, o: (w.peer, *self.ae_plan_for(w.peer, _newest(w.items), o.keys))
        )
        # few leaves differ, holding more keys than their slots' digests cost: ask the peer
        # for those digests, and send the keys of the slots that differ once they come; a
        # peer asked answers with its own. The ask goes at the next ae_clock period: a key
        # that was on its way as a delta when the ranges were compared has landed by then,
        # and its slot agrees (asked at once, such keys' slots made repairs send 0.08-0.11x
        # the keys written under steady writes; whole ranges, 50x)
        self.ae_descend <+- self.ae_plan.filter(lambda p: len(p.descend) > 0).map(
            lambda p: (p.peer, p.descend)
        )
        self.ae_sub <~ self.ae_clock.join(self.ae_descend).map(
            lambda c, d: (d.peer, self.addr, self.ae_epoch, True, d.leaves, b"")
        )
        self.ae_descend <- self.ae_clock.join(self.ae_descend).map(lambda c, d: d)
        self.ae_descend <- self.ae_descend.notin(self.peer, lambda d, p: d.peer == p.addr)
        self.ae_sub <~ self.ae_sub.join(self.peer, self.ae_sub.src == self.peer.addr).filter(
            lambda s, p: s.ask
        ).map(lambda s, p: (s.src, self.addr, self.ae_epoch, False, s.leaves,
                            self.ae_digests.sub_vector(s.leaves))
        ).filter(lambda r: len(r[5]) > 0).notin(self.ae_sync, lambda r, s: r[0] == s.peer)
        self.ae_sync <+ self.ae_plan.filter(lambda p: p.count > 0).map(
            lambda p: (p.peer, self.tick_count, p.count, lmap(), lmap(), self.ae_now)
        )
        self.ae_turn <+ self.ae_plan.filter(lambda p: p.count > 0).map(lambda p: (0,))
        # chunks leave every period, and as soon as acks free the window
        self.ae_turn <= self.ae_clock.map(lambda c: (0,))
        self.ae_turn <+ self.ae_chunk_ack.map(lambda a: (0,))
        # one transfer per peer sends at a time (the window is per peer): a range repair,
        # else the oldest large change; the others wait (and do not stall meanwhile)
        self.ae_head <= self.ae_sync.group(["peer"], max_("snap"))
        self.ae_wait <= self.ae_turn.join(self.ae_sync).map(lambda t, s: s).notin(
            self.ae_head, lambda s, h: s.peer == h.peer and s.snap == h.snap
        )
        self.ae_sync <+ self.ae_wait.map(
            lambda s: (s.peer, s.snap, s.count, lmap(), lmap(), self.ae_now)
        )
        self.ae_go <= self.ae_turn.join(self.ae_sync).join(
            self.ae_head, self.ae_sync.peer == self.ae_head.peer,
            self.ae_sync.snap == self.ae_head.snap
        ).flat_map(
            lambda t, s, h: [(s.peer, s.snap, i)
                          for i in self.ae_chunks_due(s.peer, s.count, s.snap, s.acked, s.sent,
                                                      s.at)]
        )
        self.ae_chunk <~ self.ae_go.join(
            self.ae_sync, self.ae_go.peer == self.ae_sync.peer, self.ae_go.snap == self.ae_sync.snap
        ).flat_map(
            lambda g, s: [(g.peer, self.addr, self.ae_epoch, g.snap, g.index, s.count, kv)
                          for kv in self.ae_chunk_of(g.peer, g.snap, g.index)]
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
        # a received chunk is merged and acked, never passed on (each pair repairs itself)
        self.store <= self.ae_chunk.map(lambda d: d.kv)
        self.ae_rx <= self.ae_chunk.join(self.peer, self.ae_chunk.src == self.peer.addr).map(
            lambda d, p: (d.src, self.ae_now)
        )
        self.ae_rx <- self.ae_rx.notin(self.peer, lambda r, p: r.peer == p.addr)
        self.ae_chunk_ack <~ self.ae_chunk.map(
            lambda d: (d.src, self.addr, self.ae_epoch, d.src_epoch, d.snap, d.index)
        )
        # a completed repair: the root again at once (the next round, until roots agree); a
        # stalled one is dropped (the next period's root starts another)
        self.ae_done <= self.ae_sync.filter(
            lambda s: self.ae_synced(s.count, s.acked) is not None
        ).map(lambda s: (s.peer, s.snap))
        self.ae_digest <~ self.ae_done.filter(lambda s: self.ae_chains(s.peer, s.snap)).map(
            lambda s: self.ae_root_to(s.peer)
        )
        self.ae_sync <- self.ae_sync.join(self.ae_acks, self.ae_sync.peer == self.ae_acks.peer).filter(
            lambda s, a: self.ae_outdated(s.peer, s.snap, a.state) and self.ae_end(s.peer, s.snap)
        ).map(lambda s, a: s)
        self.ae_sync <- self.ae_sync.filter(
            lambda s: (self.ae_synced(s.count, s.acked) is not None
                       or self.ae_now.reveal() - s.at.reveal() > self.ae_stall)
            and self.ae_end(s.peer, s.snap)
        )
    # fmt: on
