"""Recursive scratch views under retraction: Backward/Forward with ranked versions.

A recursive unit whose heads are scratches (reachability, paths, ``lmin`` distances) cannot
keep derivation counts: on a cycle they never reach zero. Plain delete-and-re-derive (DRed)
over-deletes everything downstream of a removed row, which on a random graph is most of the
view. :class:`DRed` instead checks for an alternative derivation *before* deleting (the
Backward/Forward algorithm of Motik et al., AAAI 2015), made sound on cycles by ranks, and
recomputes a lattice-valued key only from its remaining contributions (the affected set of
Ramalingam and Reps' dynamic shortest paths):

* **Versions and ranks.** Every row a head stores is a *version* of its key with a rank: the
  order in which the forward evaluation stored it, the rows of one rule evaluation sharing
  one (a lattice key improved twice has three versions). A version was derived from
  versions stored before it (before its evaluation), so each stored version
  has a derivation from strictly lower-ranked versions and the current inputs. That is the
  invariant the updates keep; the ranks are a well-founded order that breaks the cycles
  through which a row could otherwise "justify itself".
* **Backward (check before deleting).** The rows a tick removes from the unit's inputs drive
  the rules (against the state before the tick) to the keys they contributed to. Each such
  candidate key is checked: its rules are run on the rows that could derive it (found by
  probing the input whose columns give the head key, ``lambda r, e: (e.dst, ...)``), seeing
  of the heads only versions ranked below the key's current one and not deleted. If those
  contributions still give the stored row (the same set row; the same merged lattice value),
  the key stays and nothing propagates. Otherwise it is deleted and drives its own
  dependents in turn. A candidate's older versions are retired (they drive their dependents
  too), so only current versions need checking.
* **Rescue.** The ranks can hide a derivation (a longer path, a sibling first derived in the
  same round). Before anything changes, a key the backward phase would delete whose stored
  row is still derived from rows it would not delete, at any rank, keeps its row with a new
  version ranked above all others, and the keys its row derives are checked again in turn
  (:meth:`DRed._rescue`): a delete that changes no row changes no row.
* **Forward.** The keys left are deleted and re-derived one step from what remains (any
  rank), and the re-derived rows, with the rows the tick added, propagate by the ordinary
  semi-naive rounds (best value first for ``lmin``/``lmax``: ``blooml.engine._priority``); the
  new versions get ranks above every existing one (:meth:`DRed.settle`).

Never worse than re-deriving: a retraction gets a budget of CPU time, a share of what the
unit's full derivations cost (the cheapest per row of the last ``samples``, less the indexes
they built, times the rows the heads would keep: those they hold less the keys found gone so
far), plus ``limit_floor``. The share is ``limit_share`` while the checks find nothing (a
subtree leaving the view: over-deletion, which re-deriving does as cheaply) and grows towards
``limit_share_found`` with the fraction of checks that find a derivation (keys kept, or
recomputed from what remains: the work itself), the floor towards ``limit_floor_found``;
capped so that a fallback costs at most ``limit_fallback`` times the re-derivation proper
(with what the versions cost in it, measured) plus the floor. Candidates are checked lowest
rank first, so that a check does not find a derivation through a key about to be found gone.
It falls back before checking when the first wave of candidates, priced at the mean cost of
a check, is above the budget, and stops, having changed nothing, once its checks pass it;
the caller then re-derives the heads in full (``kept`` and ``fallbacks`` count the two
outcomes). The re-derivation ranks its rows as it stores them (``settle``): leaving that to
the next tick that runs the unit made a fallback tick's median 0.05-0.3x cheaper against the
reference's, its worst no cheaper beyond the noise, and a second cut right after the first
0.3-0.5x dearer at the median (it ranked the view before it, priced against a smaller
re-derivation): measured and rejected, see docs/architecture.md.

A unit it cannot handle (a rule function run as Python, a head key computed rather than
read, a lattice variable or ``tick_count`` read, a non-monotone input that changed) is
re-derived in full instead.
"""

from __future__ import annotations

import sys
from collections.abc import Container
from heapq import heapify, heappop, heappush
from itertools import repeat
from time import perf_counter, process_time
from typing import Any

from blooml.engine._codegen import fused_map
from blooml.engine._zops import _E
from blooml.engine.relation import _BATCH, MISSING, Relation
from blooml.errors import KeyConstraintError
from blooml.ir import exprs as X
from blooml.ir import nodes as N

__all__ = ["DRed"]


class _Rule:
    """One rule of the unit: how it runs on chosen driver rows, and how its head key is
    read from one of its inputs."""

    __slots__ = ("fz", "head", "inv", "rels", "scan")

    def __init__(self, head: Relation, rels: list[Relation], fz: Any, inv: Any) -> None:
        self.head = head
        self.rels = rels
        self.fz = fz  # generated loops (None: the body is a bare scan)
        self.scan = fz is None
        # (input j, its columns, head key positions): the input whose columns give the key
        self.inv = inv

    def drive(self, d: int, rows: list[Any], view: Any) -> list[Any]:
        """The rule's results with input ``d`` restricted to ``rows``, the others probed
        through ``view(rel, cols)``."""
        if self.scan:
            return rows
        fz = self.fz
        gets = [view(self.rels[j], cols) for j, cols in fz.cols[d]]
        return list(fz.runs[d](rows, *gets, None))


def _column(e: X.Expr, rels: list[Relation]) -> tuple[int, int] | None:
    """``(input, column)`` when ``e`` reads one column of one input row as it is."""
    t = type(e)
    if t is X.Attr and type(e.obj) is X.Arg:  # type: ignore[attr-defined]
        j = e.obj.index  # type: ignore[attr-defined]
        cols = rels[j].columns
        return (j, cols.index(e.name)) if e.name in cols else None  # type: ignore[attr-defined]
    if t is X.Item and type(e.obj) is X.Arg and type(e.key) is X.Const:  # type: ignore[attr-defined]
        j = e.obj.index  # type: ignore[attr-defined]
        k = e.key.value  # type: ignore[attr-defined]
        if type(k) is int and 0 <= k < rels[j].arity:
            return (j, k)
    return None


def _inputs(node: N.Node) -> list[str] | None:
    """The scans under a ``map``'s filters (a scan, or an inner join of scans)."""
    while type(node) is N.Filter:
        node = node.input  # type: ignore[attr-defined]
    if type(node) is N.Scan:
        return [node.name]  # type: ignore[attr-defined]
    if type(node) is N.Join and all(type(i) is N.Scan for i in node.inputs):  # type: ignore[attr-defined]
        return [i.name for i in node.inputs]  # type: ignore[attr-defined]
    return None


def _compile(rule: Any, rt: Any, heads: set[str]) -> _Rule | None:
    head = rt.rels.get(rule.head)
    if head is None or rule.op != "<=" or rule.reads or rule.reads_tick:
        return None
    body = rule.body
    if type(body) is N.Scan:
        src = rt.rels[body.name]  # type: ignore[attr-defined]
        if src.arity != head.arity:
            return None
        keys = tuple(range(head.nkeys))
        return _Rule(head, [src], None, (0, keys, keys))
    if type(body) is not N.Map or body.expr is None or not rt.inline:  # type: ignore[attr-defined]
        return None
    names = _inputs(body.input)  # type: ignore[attr-defined]
    if names is None:
        return None
    fz = fused_map(body, rt, None)
    if fz is None:
        return None
    rels = [rt.rels[n] for n in names]
    expr = body.expr  # type: ignore[attr-defined]
    items = expr.items if type(expr) is X.TupleExpr else (expr,)
    if len(items) != head.arity:
        return None
    by_input: dict[int, list[tuple[int, int]]] = {}
    for i in range(head.nkeys):
        c = _column(items[i], rels)
        if c is not None:
            by_input.setdefault(c[0], []).append((i, c[1]))
    if not by_input:
        return None
    # the input giving the most key columns, a table before a head of the unit: a head's
    # rows sharing a column with the key are the many paths from a node, a table's the
    # edges into it (for ``tc(x, y) <= tc(x, z), e(z, y)``: probe ``e`` by ``y``)
    j, pairs = max(by_input.items(), key=lambda kv: (len(kv[1]), rels[kv[0]].name not in heads))
    inv = (j, tuple(c for _, c in pairs), tuple(i for i, _ in pairs))
    return _Rule(head, rels, fz, inv)


class _Union:
    """Probes of an input as it is now plus the rows this tick removed from it: every row
    a derivation in the state before or after the change may have used."""

    __slots__ = ("get", "minus")

    def __init__(self, rel: Relation, cols: tuple[int, ...], gone: list[Any]) -> None:
        self.get = rel.index(cols).get
        key = _getter(cols)
        self.minus: dict[Any, list[Any]] = {}
        for r in gone:
            self.minus.setdefault(key(r), []).append(r)

    def __call__(self, k: Any, default: Any = _E) -> Any:
        ms = self.get(k, _E)
        extra = self.minus.get(k)
        return [*ms, *extra] if extra else ms


def _getter(cols: tuple[int, ...]) -> Any:
    return (lambda r: r[cols[0]]) if len(cols) == 1 else (lambda r: tuple(r[c] for c in cols))


class DRed:
    """Backward/Forward maintenance of one recursive unit's scratch heads (see the module
    docstring). The name is kept from the delete-and-re-derive it replaced."""

    __slots__ = (
        "by_head",
        "costs",
        "fallbacks",
        "full_cost",
        "full_rows",
        "heads",
        "index_cost",
        "journal",
        "kept",
        "next_rank",
        "over",
        "per_check",
        "pos",
        "retired",
        "rules",
        "timing",
        "upos",
        "valid",
        "versions",
    )

    #: The budget of a retraction, as a share of what re-deriving the heads costs (the CPU
    #: time of the unit's last full derivation, scaled by the rows the heads hold since): a
    #: retraction whose first wave of checks is estimated above it re-derives at once; one
    #: that passes it while checking stops, having changed nothing. A tick that falls back
    #: thus costs at most ``1 + limit_share`` times a re-derivation, plus ``limit_floor``
    #: (while the checks find nothing; see ``limit_fallback`` for the cap). A sixteenth:
    #: on random graphs of 50,000 nodes the dearest retraction that succeeded cost 0.05x a
    #: re-derivation (``bench_incremental.py --section recursion``), so a larger share only
    #: makes the retractions that fall back (a tree cut near its root) dearer.
    limit_share = 0.0625
    #: The share the budget grows to as the checks find derivations: it is ``limit_share``
    #: plus ``(limit_share_found - limit_share)`` times the fraction of the checks so far that
    #: found one (a key kept, or a lattice key recomputed from its remaining contributions:
    #: Ramalingam and Reps' affected set, which the re-derivation would do again). A check
    #: that finds nothing is DRed's over-deletion (a subtree leaving the view, which a
    #: re-derivation handles as cheaply): measured at 5,000 nodes, 0.6-0.8 of the checks of
    #: a random delete find a derivation, none of a tree cut's. With a sixteenth for all,
    #: 3 of 29 deletes on a shortest path (their checks cost 25-37% of a re-derivation)
    #: fell back, and the 90th percentile was above the reference's median; with a quarter
    #: for all, a tree cut paid a quarter on top of re-deriving (1.66x the reference). A
    #: half, under ``limit_fallback``'s cap (about 0.4x for reachability, 0.3x for ``lmin``):
    #: 3/8 uncapped let a random delete's fallback cost 1.6-2.3x the reference's tick.
    limit_share_found = 0.5
    #: Seconds of checking always allowed (a small view re-derives in less than the fixed
    #: cost of one tick: the budget must not make every retraction of it a fallback). At
    #: 500 nodes a delete on a shortest path checks for 0.45 ms at the median, re-deriving
    #: takes ~1 ms: with 0.1 ms (and a sixteenth) the median delete fell back.
    limit_floor = 2e-4
    #: The floor grows to this as the checks find derivations, as the share does: at 500
    #: nodes a delete on a shortest path checks for 0.5-1.2 ms at the 90th percentile
    #: (0.2-0.45x a re-derivation of ~1.4 ms, of which the versions take 15%), and with
    #: the cap and 0.2 ms, 3-4 of 29 fell back (the 90th percentile 1.8-2.8x the
    #: reference's median, 0.66-0.85x with an uncapped budget).
    limit_floor_found = 5e-4
    #: A tick that falls back costs at most this times the re-derivation proper (the CPU
    #: time of a full derivation less what ranking its rows and forgetting the old versions
    #: cost in it, both measured: 7-10% of it for reachability, 12-17% for ``lmin``), plus
    #: the floor: the budget is capped so that what it lets the checks spend, and the
    #: versions' share of the re-derivation, fit in the difference.
    limit_fallback = 1.5
    #: Versions kept per key; older ones are retired (their dependents are checked at the
    #: next retraction), so that a key improved over and over keeps bounded state.
    cap = 8
    #: Full derivations a retraction's budget is priced on (the cheapest per row).
    samples = 3

    def __init__(self, rules: list[_Rule], heads: list[Relation]) -> None:
        self.rules = rules
        self.heads = heads
        self.by_head = {h.name: h for h in heads}
        # head -> key -> its one version (rank, row), or its versions [(rank, row), ...]
        # ascending, the last being the stored row
        self.versions: dict[str, dict[Any, Any]] = {h.name: {} for h in heads}
        self.next_rank = 0
        # head -> (the tick_new list settled, how far); (its undo log, how far then)
        self.pos: dict[str, tuple[Any, int]] = {h.name: (None, 0) for h in heads}
        self.upos: dict[str, tuple[Any, int]] = {h.name: (None, 0) for h in heads}
        # (head, row): versions dropped by ``settle``, whose dependents the next run checks
        self.retired: list[tuple[str, Any]] = []
        # whether the versions describe the heads (not before a full derivation, nor after
        # a rolled-back tick)
        self.valid = False
        self.journal: list[Any] = []  # the runtime's journal protocol (see ``rollback``)
        # CPU seconds of the last full derivation, the heads' rows after it, and the mean CPU
        # seconds of one check (a moving average over retractions; None before the first)
        self.full_cost = 0.0
        self.full_rows = 0
        # (CPU seconds, of which the versions') per row of the last full derivations
        self.costs: list[tuple[float, float]] = []
        self.index_cost = 0.0  # CPU seconds of the last ``reset``'s index builds
        # CPU seconds the last full derivation spent on the versions (forgetting the old,
        # ranking the new), and whether one is being measured (``reset`` to ``derived``)
        self.over = 0.0
        self.timing = False
        self.per_check: float | None = None
        # retractions maintained, and those that fell back to re-deriving the heads
        self.kept = 0
        self.fallbacks = 0

    @classmethod
    def build(cls, crs: list[Any], rt: Any, heads: list[Relation]) -> DRed | None:
        """The maintenance of a unit's compiled rules, or ``None`` when one does not fit."""
        names = {h.name for h in heads}
        if not heads or any(cr.rule.head not in names for cr in crs):
            return None  # a table or lattice head in the unit: it keeps what it derived
        rules = []
        for cr in crs:
            r = _compile(cr.rule, rt, names)
            if r is None:
                return None
            rules.append(r)
        return cls(rules, heads)

    # -- versions ------------------------------------------------------------------------------

    def rollback(self) -> None:
        """A tick failed: the versions may not describe the rolled-back heads; the next
        retraction re-derives them in full (which rebuilds the versions)."""
        self.valid = False
        self.retired = []
        self.timing = False  # a re-derivation that failed measures nothing

    def children(self) -> list[Any]:
        """Nothing below (the runtime's journal walk)."""
        return []

    def reset(self) -> None:
        """The heads are emptied to be re-derived in full: forget every version."""
        started = process_time()
        for name, h in self.by_head.items():
            self.versions[name] = {}
            self.pos[name] = (h.tick_new, len(h.tick_new))
            self.upos[name] = (h.undo, len(h.undo))
        self.retired = []
        self.valid = True
        # what the re-derivation pays for the versions (forgetting them, then ``settle``
        # ranking its rows): measured until ``derived`` (see ``budget``)
        self.timing = True
        self.over = process_time() - started
        # the indexes that find a key's derivations, built with the view (whose derivation
        # costs its size anyway) rather than by the first retraction, and those of the other
        # inputs the rules probe (``edge`` by ``src``): not part of what a re-derivation costs
        # (``derived``), since they are built once and then kept up to date by the inputs'
        # changes. Counted in, the first derivation cost 1.6-2x a later one (reachability
        # on a random graph), and the budget of the retractions up to the first fallback,
        # priced on it, was as much too large
        started = process_time()
        heads = self.by_head
        for r in self.rules:
            j, cols, _ = r.inv
            r.rels[j].index(cols)
            if r.fz is not None:
                for probes in r.fz.cols:
                    for j, cols in probes:
                        rel = r.rels[j]
                        if rel.name not in heads and cols != rel.key_cols:
                            rel.index(cols)
        self.index_cost = process_time() - started

    def memory(self, name: str) -> tuple[int, int]:
        """(versions kept, estimated bytes) for head ``name`` (``Program.memory``)."""
        vers = self.versions[name]
        n = sum(len(v) if type(v) is list else 1 for v in vers.values())
        lists = sum(1 for v in vers.values() if type(v) is list)
        return n, sys.getsizeof(vers) + n * 64 + lists * 88

    def derived(self, seconds: float) -> None:
        """The heads were just re-derived in full, in ``seconds`` of CPU time: the measure of
        what a retraction may spend before falling back (less what the ``reset`` before it
        spent building indexes)."""
        cost = max(seconds - self.index_cost, 0.0)
        over = min(self.over, cost)
        self.index_cost = 0.0
        self.timing = False
        rows = self.full_rows = sum(len(h.store) for h in self.heads)
        # priced on the cheapest of the last ``samples`` derivations, per row: on a shared
        # machine one measure can be 1.5x another of the same work, and a budget priced on
        # a dear one let the next fallback cost 2x the reference's tick
        per = max(rows, 64)
        costs = self.costs
        costs.append((cost / per, over / per))
        if len(costs) > self.samples:
            del costs[0]
        best = min(costs)
        self.full_cost = best[0] * per
        self.over = best[1] * per

    def budget(self, gone: int = 0, found: float = 0.0) -> float:
        """CPU seconds a retraction may spend on checks (see ``limit_share``; ``found`` is the
        fraction of the checks that found a derivation, see ``limit_share_found``) once it has
        found ``gone`` keys that lose their row: the last full derivation's cost per row
        (over at least 64 rows, so that a derivation of an empty view does not price every
        row at its fixed cost) times the rows the heads would keep. A re-derivation after
        the change costs what it keeps, not what the heads hold now: a cut of 70% of a view
        re-derives 30% of it, and a budget priced on all of it would cost 0.4x that re-
        derivation before falling back to it."""
        rows = sum(len(h.store) for h in self.heads) - gone
        scale = max(rows, 1) / max(self.full_rows, 64)
        est = max(self.full_cost * scale, self.limit_floor)
        found = min(max(found, 0.0), 1.0)
        share = self.limit_share + (self.limit_share_found - self.limit_share) * found
        # a fallback pays what it spent, the re-derivation, and the versions' cost in it
        # (``over``): kept within ``limit_fallback`` times the re-derivation proper
        over = self.over * scale
        cap = (self.limit_fallback - 1.0) * (est - over) - over
        floor = self.limit_floor + (self.limit_floor_found - self.limit_floor) * found
        return min(share * est, max(cap, 0.0)) + floor

    def settle(self) -> None:
        """Give every row the heads stored since the last call a version, ranked above all
        existing ones. The unit calls this after every rule's evaluation and after every
        other store into the heads, so that the rows a call finds in one head are one
        evaluation's results, derived from rows stored before it: they share one rank."""
        if self.timing:  # in a full re-derivation: what ranking adds to it (``budget``)
            # the wall clock: read in ~50 ns where the process clock takes a system call
            # (~1.5 us: a re-derivation of 500 nodes' distances calls this 118 times)
            started = perf_counter()
            self._settle()
            self.over += perf_counter() - started
        else:
            self._settle()

    def _settle(self) -> None:
        rank = self.next_rank
        cap = self.cap
        for name, h in self.by_head.items():
            lst, p = self.pos[name]
            new = h.tick_new
            if lst is not new:
                p = 0
            n = len(new)
            vers = self.versions[name]
            keyfn = h.keyfn
            if p == n:  # nothing stored (rows dropped, maybe): the log read so far
                self.upos[name] = (h.undo, len(h.undo))
                continue
            m = n - p
            seg = new[p:n]
            todo: Any = range(m)
            if m >= 16:
                # a batch, ranked by C loops while its rows are in the cache: in a Python
                # loop, or in one pass over the view after it, ranking cost 20-30% of a
                # re-derivation, which the fallback of a retraction pays on top of the
                # re-derivation. When every key is new to the heads, each gets its one
                # version in C; otherwise (a lattice value improved) one by one below. A
                # set view's rows are new to it when stored, and its versions hold only
                # stored rows: each gets a bare int rank (the key is its row), unchecked
                if keyfn is None:
                    before = len(vers)
                    vers.update(zip(seg, repeat(rank)))
                    if len(vers) - before != m:  # a row ranked already: not the invariant
                        self.valid = False  # re-derive at the next retraction
                    todo = ()
                else:
                    # new keys get a bare rank too: the version is the stored row until it
                    # is replaced, and then the row it replaced is read from the undo log
                    # (``_replaced``); a (rank, row) pair per key cost its allocation here
                    # and its freeing when a fallback forgets the versions (5-9 ms at
                    # 50,000 keys)
                    keys = list(map(keyfn, seg))
                    if vers.keys().isdisjoint(keys):
                        before = len(vers)
                        vers.update(zip(keys, repeat(rank)))
                        if len(vers) - before == m:
                            todo = ()
                        else:  # a key stored twice in the batch (improved, or queued again)
                            for k in keys:
                                vers.pop(k, None)
            replaced: dict[Any, Any] | None = None
            for i in todo:
                row = seg[i]
                k = row if keyfn is None else keyfn(row)
                v: Any = vers.get(k)
                if v is None:
                    vers[k] = (rank, row)
                    continue
                if type(v) is int:  # a bare rank from a batch: the row stored then
                    if keyfn is None:  # a set view: the key is its row
                        v = (v, k)
                    else:
                        if replaced is None:
                            replaced = self._replaced(name, h)
                        old = replaced.get(k, _E)
                        if old is _E:  # not replaced since: queued again (``Frontier``)
                            if h.store.get(k) is not row:
                                self.valid = False  # not the invariant: re-derive
                            continue
                        if old is MISSING:  # stored without a version: not the invariant
                            self.valid = False
                            continue
                        v = (v, old)
                if type(v) is tuple:
                    if v[1] is not row:  # else queued again to be processed (``Frontier``)
                        vers[k] = [v, (rank, row)]
                elif v[-1][1] is not row:
                    v.append((rank, row))
                    if len(v) > cap:
                        self.retired.append((name, v.pop(0)[1]))
            rank += 1
            self.pos[name] = (new, n)
            self.upos[name] = (h.undo, len(h.undo))
        self.next_rank = rank
        retired = len(self.retired)
        if retired > 64 and retired > 64 + sum(len(h.store) for h in self.heads):
            self.valid = False  # retire by re-deriving, at the next retraction
            self.retired = []

    def requeued(self) -> None:
        """The prioritized evaluation appended rows the heads stored before (and ``settle``
        ranked) to ``tick_new`` again, as the next round's delta: not new versions. Called
        right after a ``settle``, so everything before them is ranked already."""
        for name, h in self.by_head.items():
            self.pos[name] = (h.tick_new, len(h.tick_new))

    def _replaced(self, name: str, h: Relation) -> dict[Any, Any]:
        """Key -> the row head ``h`` held under it at the last ``settle`` (the row a bare
        rank stands for), for the keys replaced or dropped since: their first entry in the
        undo log after that ``settle``."""
        lst, u = self.upos[name]
        undo = h.undo
        if lst is not undo:
            u = 0  # a new tick: its log starts after the last tick's closing ``settle``
        out: dict[Any, Any] = {}
        for k, old in undo[u:]:
            if k is not _BATCH and k not in out:
                out[k] = old
        return out

    # -- a retraction --------------------------------------------------------------------------

    def run(self, rt: Any, removed: dict[str, list[Any]]) -> bool:
        """Take out of the heads what no longer derives after ``removed`` (rows gone from
        the unit's inputs, by collection; for a head, its input rows that left) and put back,
        one step, what the rest still derives (the semi-naive rounds that follow propagate
        it). Returns ``False``, having changed no row, when the versions are not valid or the
        change costs more than the budget (see ``limit_share``): the caller re-derives the
        heads in full. Counted in ``kept`` and ``fallbacks``."""
        ok = self._retract(rt, removed)
        if ok:
            self.kept += 1
        else:
            self.fallbacks += 1
        return ok

    def _retract(self, rt: Any, removed: dict[str, list[Any]]) -> bool:
        if not self.valid:
            return False
        budget = self.budget()
        if budget <= 0:
            return False
        start = process_time()
        deadline = start + budget
        ngone = 0  # keys found gone
        nfound = 0  # checks that found a derivation (``limit_share_found``)
        self.settle()  # this tick's input rows of the heads, stored before the unit runs
        heads = self.by_head
        versions = self.versions
        gone: dict[str, dict[Any, Any]] = {h: {} for h in heads}
        union: dict[tuple[str, tuple[int, ...]], Any] = {}

        def union_view(rel: Relation, cols: tuple[int, ...]) -> Any:
            key = (rel.name, cols)
            v = union.get(key)
            if v is None:
                rows = removed.get(rel.name) if rel.name not in heads else None
                v = union[key] = _Union(rel, cols, rows) if rows else _current(rel, cols)
            return v

        bound = [0]  # the rank below which the check sees versions

        def pick(name: str, k: Any) -> Any:
            """The latest version of ``k`` ranked below ``bound``, not deleted (or None)."""
            if k in gone[name]:
                return None
            v = versions[name].get(k)
            if v is None:
                return None
            if type(v) is int:  # a set view's bulk version: the stored row
                return heads[name].store.get(k) if v < bound[0] else None
            if type(v) is tuple:
                return v[1] if v[0] < bound[0] else None
            for rank, row in reversed(v):
                if rank < bound[0]:
                    return row
            return None

        check_view = _views(heads, pick)

        gets: dict[_Rule, Any] = {}
        rules_of: dict[str, list[_Rule]] = {h: [] for h in heads}
        for r in self.rules:
            rules_of[r.head.name].append(r)
        tick_in = rt.tick_in
        work = 0
        items: list[tuple[str, list[Any]]] = [(n, rows) for n, rows in removed.items() if rows]
        # candidates by the rank of their stored version, lowest first (a heap of (rank,
        # seq, head, key)): a key is checked once every candidate that could have been part
        # of its ranked derivation is decided (see ``_rank``)
        cands: list[tuple[int, int, str, Any]] = []
        seq = 0
        for name, rows in items:
            if name in heads:  # a head's own input rows left: their keys are candidates
                h = heads[name]
                for r in rows:
                    k = h.key_of(r)
                    seq += 1
                    cands.append((_rank(versions[name].get(k)), seq, name, k))
        heapify(cands)
        items = [(n, rows) for n, rows in items if n not in heads]
        if self.retired:
            for name, row in self.retired:
                items.append((name, [row]))
            self.retired = []
        queued: set[tuple[str, Any]] = {(c[2], c[3]) for c in cands}
        first = True
        while items or cands:
            while items:
                name, rows = items.pop()
                for r in self.rules:
                    h = r.head
                    hn = h.name
                    store = h.store
                    for d, rel in enumerate(r.rels):
                        if rel.name != name:
                            continue
                        for out in r.drive(d, rows, union_view):
                            k = h.key_of(out)
                            c = (hn, k)
                            if c in queued or k in gone[hn] or k not in store:
                                continue
                            queued.add(c)
                            seq += 1
                            heappush(cands, (_rank(versions[hn].get(k)), seq, hn, k))
            if first:
                # the estimate, before any check: the first wave of candidates at the mean
                # cost of a check (each is checked at least once)
                first = False
                per = self.per_check
                if per is not None and len(cands) * per > budget:
                    return False
            if not cands:
                break
            _, _, name, k = heappop(cands)
            queued.discard((name, k))
            g = gone[name]
            if k in g:
                continue
            work += 1
            if not work & 3:
                # priced again at every read of the clock: keys found gone shrink the
                # re-derivation, and the checks that find a derivation raise the share
                # before the first ones pass the small one (an ``lmin`` key with 8 versions
                # takes ~25 us to check: 16 of them are past 0.2 ms)
                deadline = start + self.budget(ngone, nfound / work)
                if process_time() > deadline:
                    return False
            h = heads[name]
            cur = h.store.get(k)
            if cur is None:
                continue
            v = versions[name].get(k)
            if type(v) is int:
                v = (v, cur)
            ok = False
            if type(v) is tuple:
                if v[1] is cur:
                    bound[0] = v[0]
                    got = _derives(
                        h, k, cur, rules_of[name], tick_in.get(name), pick, check_view, heads, gets
                    )
                    ok = got == _SAME
                    nfound += got > _NONE
            elif v is not None and v[-1][1] is cur:
                # every version may justify rows ranked above it: check each, keep those
                # still derived (a lattice value only grows: each is checked on its own)
                keep = []
                some = False
                for rank, row in v:
                    bound[0] = rank
                    got = _derives(
                        h, k, row, rules_of[name], tick_in.get(name), pick, check_view, heads, gets
                    )
                    some = some or got > _NONE
                    if got == _SAME:
                        keep.append((rank, row))
                    else:
                        items.append((name, [row]))
                nfound += some
                ok = bool(keep) and keep[-1][1] is cur
                if ok:
                    versions[name][k] = keep if len(keep) > 1 else keep[0]
            if not ok:
                g[k] = cur
                ngone += 1
                items.append((name, [cur]))
        if work:
            deadline = start + self.budget(ngone, nfound / work)
        rescued = self._rescue(gone, rules_of, tick_in, gets, work, deadline)
        if rescued is None:
            return False
        # forward: drop what lost every derivation, put back one step what still derives it
        for name, keys in gone.items():
            h = heads[name]
            vers = versions[name]
            for k in keys:
                h.drop(k)
                vers.pop(k, None)
        now = rt.now
        for name, keys in gone.items():
            if not keys:
                continue
            h = heads[name]
            back = [r for r in tick_in.get(name, ()) if h.key_of(r) in keys]
            for r in rules_of[name]:
                back.extend(
                    o
                    for o in r.drive(r.inv[0], _drivers(r, keys, h, None), _current)
                    if h.key_of(o) in keys
                )
            if back:
                h.add_many(back, now, f"re-derivation of {name}")
        work += rescued
        if work:
            sample = (process_time() - start) / work
            per = self.per_check
            self.per_check = sample if per is None else 0.75 * per + 0.25 * sample
        return True

    def _rescue(
        self,
        gone: dict[str, dict[Any, Any]],
        rules_of: dict[str, list[_Rule]],
        tick_in: Any,
        gets: dict[_Rule, Any],
        work: int,
        deadline: float,
    ) -> int | None:
        """Take out of ``gone`` the keys whose stored row is still derived from rows not
        gone, at any rank (a derivation the ranks hid: a longer path, a sibling of the same
        round), and, in turn, the keys those rows derive: their rows stay as they are, and
        get versions ranked above every other in the order they were rescued (each derived
        from versions stored before it, or rescued before it). Returns the checks made, or
        ``None`` once past ``deadline`` (nothing changed)."""
        heads = self.by_head
        if not any(gone.values()):
            return 0
        saved: dict[str, dict[Any, Any]] = {n: dict(g) for n, g in gone.items() if g}

        def alive(name: str, k: Any) -> Any:
            """The stored row of ``k`` unless it is gone (and not rescued)."""
            if k in gone[name]:
                return None
            return heads[name].store.get(k)

        view = _views(heads, alive)

        todo: list[tuple[str, Any]] = [(n, k) for n, g in saved.items() for k in g]
        todo.reverse()
        pending = set(todo)  # a key waits in ``todo`` once, however many rows it derives
        rank = self.next_rank
        checks = 0
        while todo:
            name, k = c = todo.pop()
            pending.discard(c)
            g = gone[name]
            cur = g.get(k)
            if cur is None:
                continue  # rescued already
            checks += 1
            if not (work + checks) & 3 and process_time() > deadline:
                for n, keys in saved.items():  # nothing changed: restore what was gone
                    gone[n].update(keys)
                return None
            h = heads[name]
            got = _derives(h, k, cur, rules_of[name], tick_in.get(name), alive, view, heads, gets)
            if got != _SAME:
                continue
            del g[k]
            self.versions[name][k] = (rank, cur)
            rank += 1
            for r in self.rules:  # what the row derives, among the keys still gone
                hn = r.head.name
                hg = gone[hn]
                if not hg:
                    continue
                for d, rel in enumerate(r.rels):
                    if rel.name == name:
                        key_of = r.head.key_of
                        for out in r.drive(d, [cur], view):
                            j = key_of(out)
                            if j in hg and (hn, j) not in pending:
                                pending.add((hn, j))
                                todo.append((hn, j))
        self.next_rank = rank
        return checks


def _rank(v: Any) -> int:
    """The rank of a key's stored version (``versions[head][key]``; -1 for none): a
    candidate of the backward phase checked after every lower-ranked one sees its ranked
    derivations decided, since a version is derived from versions ranked below it. Checked
    in any other order (last queued first), a key's check could find a derivation through a
    version about to be found gone, and be checked again when it is: on a random graph whose
    view a delete empties, half the checks "found" a derivation that way, raising the budget
    towards ``limit_share_found`` for a retraction that re-derives nothing."""
    if v is None:
        return -1
    t = type(v)
    if t is int:
        return v  # type: ignore[no-any-return]
    if t is tuple:
        return v[0]  # type: ignore[no-any-return]
    return v[-1][0]  # type: ignore[no-any-return]


def _current(rel: Relation, cols: tuple[int, ...]) -> Any:
    return _by_key(rel) if cols == rel.key_cols else rel.index(cols).get


def _by_key(rel: Relation) -> Any:
    """Probes of ``rel`` on its key columns, read from its store: the index on them holds
    one row per probe value and would be built for it (a pass over the whole view) by the
    first retraction after a re-derivation. A one-column set view stores row ``(p,)``."""
    get = rel.store.get
    if rel.keyfn is None and rel.arity == 1:

        def probe1(p: Any, default: Any = _E) -> Any:
            row = get((p,))
            return _E if row is None else (row,)

        return probe1

    def probe(p: Any, default: Any = _E) -> Any:
        row = get(p)
        return _E if row is None else (row,)

    return probe


def _views(heads: Container[str], pick: Any) -> Any:
    """``view(rel, cols)``, made once per (relation, columns): a head's rows through
    :func:`_ranked` with ``pick`` (which version of a key counts), another relation's index."""
    made: dict[tuple[str, tuple[int, ...]], Any] = {}

    def view(rel: Relation, cols: tuple[int, ...]) -> Any:
        key = (rel.name, cols)
        v = made.get(key)
        if v is None:
            v = made[key] = _ranked(rel, cols, pick) if rel.name in heads else rel.index(cols).get
        return v

    return view


def _ranked(rel: Relation, cols: tuple[int, ...], pick: Any) -> Any:
    """Probes of head ``rel`` that see, of each stored key, the version ``pick`` chooses."""
    name = rel.name
    if cols == rel.key_cols:  # the probe is the key: no index (see ``_by_key``)
        one = rel.keyfn is None and rel.arity == 1

        def by_key(p: Any, default: Any = _E) -> Any:
            x = pick(name, (p,) if one else p)
            return _E if x is None else (x,)

        return by_key
    get = rel.index(cols).get
    keyfn = rel.keyfn
    col = _getter(cols)

    def probe(p: Any, default: Any = _E) -> Any:
        out = []
        for row in get(p, _E):
            x = pick(name, row if keyfn is None else keyfn(row))
            if x is not None and (x is row or col(x) == p):
                out.append(x)
        return out

    return probe


def _drivers(
    r: _Rule, keys: Any, h: Relation, pick: Any, heads: Any = (), gets: Any = None
) -> list[Any]:
    """The rows of rule ``r``'s input that give the head key columns, for head ``keys``
    (through ``pick`` when that input is a head: the versions a check may see). ``gets``
    caches index probes while nothing changes (the backward phase)."""
    j, cols, pos = r.inv
    rel = r.rels[j]
    if gets is None:
        get = rel.index(cols).get
    else:
        get = gets.get(r)
        if get is None:
            get = gets[r] = rel.index(cols).get
    full = h.keyfn is None or h.nkeys > 1
    out: list[Any] = []
    seen: set[Any] = set()
    for k in keys:
        kt = k if full else (k,)
        probe = tuple(kt[p] for p in pos)
        pk = probe[0] if len(probe) == 1 else probe
        if pk in seen:
            continue
        seen.add(pk)
        out.extend(get(pk, _E))
    if pick is not None and rel.name in heads:
        keyfn = rel.keyfn
        name = rel.name
        picked = (pick(name, row if keyfn is None else keyfn(row)) for row in out)
        out = [x for x in picked if x is not None]
    return out


#: What :func:`_derives` found: no contribution to the key, contributions that no longer give
#: its row (a lattice value that grows), or its row.
_NONE, _BELOW, _SAME = 0, 1, 2


def _derives(
    h: Relation,
    k: Any,
    cur: Any,
    rules: list[_Rule],
    inputs: Any,
    pick: Any,
    view: Any,
    heads: Any,
    gets: Any,
) -> int:
    """Whether head ``h``'s row ``cur`` (key ``k``) is still derived from the inputs and
    the head versions ``pick`` lets them see (``_SAME``): the same row, or for lattice
    columns a merged value at least ``cur``'s (an older version is justified by
    contributions that since grew); ``_BELOW`` when contributions remain but merge below it,
    ``_NONE`` when none does."""
    key_of = h.key_of
    outs: list[Any] = [r for r in inputs if key_of(r) == k] if inputs else []
    setlike = h.keyfn is None
    if setlike and cur in outs:
        return _SAME
    for r in rules:
        drivers = _drivers(r, (k,), h, pick, heads, gets)
        if drivers:
            outs.extend(o for o in r.drive(r.inv[0], drivers, view) if key_of(o) == k)
        if setlike and cur in outs:
            return _SAME
    if setlike or not outs:
        return _NONE
    merged = outs[0]
    try:
        for o in outs[1:]:
            merged = h._merge(k, merged, o)
        above = h._merge(k, merged, cur)
    except KeyConstraintError:
        return _BELOW
    return _SAME if above is merged or bool(above == merged) else _BELOW
