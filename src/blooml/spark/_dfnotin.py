"""``notin`` kept up to date across ticks from what changed on either side: the rows of the
left side under the keys that changed are looked up (a filter by the ``notin``'s columns,
which state files prune), never the sides' whole states.

For ``head <= left.notin(right, left.x == right.y)`` and a set of *keys* (values of the
``notin``'s columns) touched this tick — the keys of the rows either side gained or lost —
the head's rows under those keys before and after the tick are known from the two sides'
rows under them now (one lookup job, batched with the others of the round) and the changes
of the tick kept on the driver:

* ``right`` gains a row: the left rows under its key leave the head (a scratch: a table keeps
  the rows derived in earlier ticks, as in Bloom);
* ``right`` loses its last row under a key (``<-``, ``<+-``, a scratch retracting): the left
  rows under that key are derived again;
* ``left`` gains a row: it is derived unless ``right`` has its key; ``left`` loses a row: it
  leaves a scratch head.

The rows that leave a scratch head are recorded as its known removals (``_State.removed``),
so that what reads it downstream — a ``group`` (by the groups they touch), another ``notin``
(this module) — follows them by lookups too.

This module knows the IR and nothing of the DSL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from blooml.ir import NotIn, Rule, Scan, sources
from blooml.spark._dflookup import _atomic, _local_frame

if TYPE_CHECKING:  # pragma: no cover
    from blooml.spark._dfeval import _Run

__all__ = ["follows_changes", "update"]


def _sides(rule: Rule) -> tuple[NotIn, str, str] | None:
    node = rule.body
    if (
        isinstance(node, NotIn)
        and node.fn is None
        and isinstance(node.left, Scan)
        and isinstance(node.right, Scan)
    ):
        return node, node.left.name, node.right.name
    return None


def _pairs(node: NotIn, width: int) -> list[tuple[int, int]]:
    """(left column, right column) of each equality; without any, every column."""
    return [(p.lcol, p.rcol) for p in node.preds] or [(i, i) for i in range(width)]


def follows_changes(run: _Run, rule: Rule, rules: list[Rule]) -> bool:
    """Whether ``rule``, ``head <= left.notin(right, ...)`` over two collections of earlier
    strata, follows this tick's changes of its sides by lookups (:func:`update`): each side's
    every change known on the driver (rows gained as a local delta, rows lost as known
    removals), no lattice columns on either side (a grown lattice row would be a removal not
    recorded), columns a SQL literal states exactly; the head a table (additions only), or a
    set-semantics scratch that this rule alone derives, no other rule of its stratum reads and
    no input or pending fact fed (its state the rows this rule derived, none when it has no
    frame)."""
    got = _sides(rule)
    if got is None:
        return False
    node, left, right = got
    heads = {r.head for r in rules}
    info = run.ir.collections.get(rule.head)
    if (
        info is None
        or left in heads
        or right in heads
        or run.plan.python_nodes.get(id(node))
        or run.plan.lattice_cols[left]
        or run.plan.lattice_cols[right]
        or not all(_atomic(run.state[n].schema) for n in (left, right) if n in run.state)
    ):
        return False
    changed = False
    for side in (left, right):
        gained = run.tick_local.get(side, [])
        if gained is None or (side in run.shrunk and side not in run.removed):
            return False  # a change not known row by row
        changed |= bool(gained) or side in run.shrunk
    if not changed:
        return False
    if info.persistent:
        return True
    return (
        not info.values
        and rule.head not in run.fed
        and rule.head not in run.reset
        and sum(1 for r in run.ir.rules if r.head == rule.head) == 1
        and not any(r is not rule and rule.head in {n for n, _ in sources(r.body)} for r in rules)
    )


def update(run: _Run, rule: Rule) -> tuple[list[Any], int]:
    """Follow this tick's changes of the sides of ``rule`` (see :func:`follows_changes`): one
    lookup job reads both sides' rows under the touched keys (none when earlier lookups of the
    tick, or those queued with them, found them). A table head gets the rows that became
    derivable, returned as one local frame to merge as derived rows; a scratch head is
    changed in place (an overlay change: rows added and removed), its removals recorded.
    Returns (frames to merge into the head, rows the head changed by in place)."""
    got = _sides(rule)
    assert got is not None  # follows_changes
    node, left, right = got
    width = len(run.ir.collections[left].columns)
    pairs = _pairs(node, width)
    lcols = [f"c{a}" for a, _ in pairs]
    rcols = [f"c{b}" for _, b in pairs]

    def lkey(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[a] for a, _ in pairs)

    def rkey(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[b] for _, b in pairs)

    gained_l = list(run.tick_local.get(left) or ())
    lost_l = list(run.removed.get(left, ())) if left in run.shrunk else []
    gained_r = list(run.tick_local.get(right) or ())
    lost_r = list(run.removed.get(right, ())) if right in run.shrunk else []
    if left not in run.state and not lost_l:
        return [], 0  # no left rows, before or now: the head neither gains nor loses any
    # keys where the right side changed: the left rows under them may enter or leave; keys
    # where only the left side changed: its rows gained or lost, unless the right has the key
    rkeys = list(dict.fromkeys([*map(rkey, gained_r), *map(rkey, lost_r)]))
    keys = list(dict.fromkeys([*rkeys, *map(lkey, gained_l), *map(lkey, lost_l)]))
    # the right side's rows under every touched key, the left side's under the right's
    # changed keys: one job (or none: looked up earlier, or queued with an earlier lookup)
    if left in run.state:
        run.lookups.ahead(run._base(left)[0], lcols, rkeys)
    now_r: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for r in run.stored_rows(right, rcols, keys) if right in run.state else ():
        now_r.setdefault(rkey(r), set()).add(tuple(r))
    now_l: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for r in run.stored_rows(left, lcols, rkeys) if left in run.state else ():
        now_l.setdefault(lkey(r), set()).add(tuple(r))
    # before this tick's changes: the rows now, less those gained, plus those lost (a row
    # lost and gained again within the tick was there before and is there now)
    was_r = {k: set(v) for k, v in now_r.items()}
    for r in gained_r:
        was_r.get(rkey(r), set()).discard(r)
    for r in lost_r:
        was_r.setdefault(rkey(r), set()).add(r)
    gained_by: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for r in gained_l:
        gained_by.setdefault(lkey(r), set()).add(r)
    lost_by: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for r in lost_l:
        lost_by.setdefault(lkey(r), set()).add(r)
    add: list[tuple[Any, ...]] = []
    gone: list[tuple[Any, ...]] = []
    changed_r = set(rkeys)
    for k in keys:
        g, lo = gained_by.get(k, set()), lost_by.get(k, set())
        if k in changed_r:
            after = set() if now_r.get(k) else now_l.get(k, set())
            before = set() if was_r.get(k) else (now_l.get(k, set()) - g) | lo
        elif now_r.get(k):  # only the left side changed under k, and the right has k
            continue
        else:  # only the left side changed under k: its rows gained and lost
            after, before = g - lo, lo - g
        add += sorted(after - before, key=repr)
        gone += sorted(before - after, key=repr)
    head = rule.head
    if run.ir.collections[head].persistent:  # a table keeps what earlier ticks derived
        if not add:
            return [], 0
        schema = run.state[left].schema  # rows to add: the left side has them
        frame = _local_frame(run.spark, add, schema)
        run.local_frames[id(frame)] = (frame, add)
        return [frame], 0
    if not (add or gone):
        return [], 0
    first = head not in run.shrunk
    run._ahead_for(head, [*add, *gone])  # what reads the head looks up by these rows
    if head not in run.state:  # it had no rows (a scratch's state is kept while it has any)
        if not add:
            return [], 0
        frame = _local_frame(run.spark, add, run.state[left].schema)
        run._store(head, frame, len(add), checkpointed=True)
        run._local_delta(head, frame, add)
        return [], len(add)
    run._layer(head, run.state_rows(head) - len(gone) + len(add), run.cols(head), gone, add)
    if gone:
        run.shrunk.add(head)
        if first:
            run.removed[head] = gone
        else:
            run.removed.pop(head, None)  # lost rows twice: no longer known row by row
    if add:
        run._local_delta(head, _local_frame(run.spark, add, run.state[head].schema), add)
    return [], len(add) + len(gone)
