"""Shortest paths with ``lmin``: a recursive Bloom^L program whose costs only ever go down.

Run it with ``python examples/shortest_paths.py``. The program is the one from the language
contract: ``path`` holds one tuple per (source, destination, first hop) whose cost column is an
``lmin`` lattice, so two derivations of the same path *merge* (the cheaper one wins) instead of
conflicting on the key. ``best`` folds every path into the cheapest cost per pair.

The script runs it on a small road map, checks every cost against Dijkstra, then adds a
shortcut and shows which costs improved: with ``lmin`` a cost, once known, can only fall, so the
engine merges the new facts into the old ones incrementally.
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from blooml import Program, bloom, lmin, lset, table


class Paths(Program):
    """All-pairs shortest paths over ``link``; ``best`` is the cheapest cost per pair."""

    link = table(["src", "dst", "c"])
    path = table(["src", "dst", "hop"], ["c"])  # c is an lmin: merged, never conflicting
    best = table(["src", "dst"], ["c"])
    seen = lset()  # the sources seen so far (a lattice variable folded from rows)

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, "direct", lmin(lk.c)))
        self.path <= self.link.join(self.path, self.link.dst == self.path.src).map(
            lambda lk, p: (lk.src, p.dst, lk.dst, p.c + lk.c)
        )
        self.best <= self.path.map(lambda p: (p.src, p.dst, p.c))
        self.seen <= self.link.map(lambda lk: lk.src)
    # fmt: on


ROADS: list[tuple[str, str, int]] = [
    ("amsterdam", "utrecht", 4),
    ("amsterdam", "haarlem", 2),
    ("haarlem", "leiden", 3),
    ("leiden", "den_haag", 2),
    ("utrecht", "den_haag", 6),
    ("utrecht", "arnhem", 6),
    ("den_haag", "rotterdam", 3),
    ("rotterdam", "utrecht", 5),
    ("arnhem", "rotterdam", 10),
]
SHORTCUT = ("haarlem", "utrecht", 1)


def dijkstra(links: Iterable[tuple[str, str, int]], source: str) -> dict[str, int]:
    """Cheapest cost from ``source`` to every node reachable by at least one link."""
    adj: dict[str, list[tuple[str, int]]] = {}
    for s, d, c in links:
        adj.setdefault(s, []).append((d, c))
    dist: dict[str, int] = {}
    heap = [(c, d) for d, c in adj.get(source, [])]
    heapq.heapify(heap)
    while heap:
        cost, node = heapq.heappop(heap)
        if node in dist:
            continue
        dist[node] = cost
        for nxt, c in adj.get(node, []):
            if nxt not in dist:
                heapq.heappush(heap, (cost + c, nxt))
    return dist


def best_costs(p: Paths) -> dict[tuple[str, str], int]:
    """The ``best`` table as ``{(src, dst): cost}`` (revealing each ``lmin``)."""
    return {(r.src, r.dst): r.c.reveal() for r in p.best}


def next_hops(p: Paths) -> dict[tuple[str, str], str]:
    """For each pair, the first hop of a cheapest path (``"direct"``: the link itself; ties
    broken by name)."""
    best = best_costs(p)
    hops: dict[tuple[str, str], str] = {}
    for r in sorted(p.path, key=lambda r: (r.src, r.dst, r.hop)):
        if r.c.reveal() == best[(r.src, r.dst)] and (r.src, r.dst) not in hops:
            hops[(r.src, r.dst)] = r.hop
    return hops


def _check(links: list[tuple[str, str, int]], got: dict[tuple[str, str], int]) -> bool:
    nodes = {s for s, _, _ in links} | {d for _, d, _ in links}
    want = {(s, d): c for s in nodes for d, c in dijkstra(links, s).items()}
    return want == got


def _table(nodes: list[str], costs: dict[tuple[str, str], int]) -> None:
    short = {n: n[:4] for n in nodes}
    print("      from \\ to " + "".join(f"{short[n]:>6}" for n in nodes))
    for s in nodes:
        cells = "".join(f"{costs.get((s, d), '·')!s:>6}" for d in nodes)
        print(f"  {s:>14} {cells}")


def main() -> dict[str, Any]:
    """Run the example; return the costs before and after the shortcut."""
    print("Shortest paths in Bloom^L: path costs are lmin lattices (they only go down)\n")
    nodes = sorted({s for s, _, _ in ROADS} | {d for _, d, _ in ROADS})
    print(f"{len(nodes)} towns, {len(ROADS)} one-way roads:")
    for s, d, c in ROADS:
        print(f"  {s:>10} -> {d:<10} {c:>2}")

    ir = Paths.ir()
    print("\nThe program as the engine sees it (Paths.ir()): one stratum, every dependency")
    print("monotone, the recursion path -> path included, so it runs semi-naively to fixpoint:")
    text = str(ir)
    body = text[text.index("stratum 0:") :]
    print("\n".join(f"  {line}" if line.strip() else "" for line in body.rstrip().splitlines()))

    p = Paths()
    p.link.insert(ROADS)
    p.tick()
    before = best_costs(p)
    print(f"\nfirst tick: the fixpoint derived {len(p.path)} path tuples; cheapest costs:")
    _table(nodes, before)
    ok_before = _check(ROADS, before)
    print(f"checked against Dijkstra from every town: {'OK' if ok_before else 'MISMATCH'}")

    s, d, c = SHORTCUT
    print(f"\nA new road opens: {s} -> {d} ({c}). Insert it and tick once more.")
    p.link.insert([SHORTCUT])
    p.tick()
    after = best_costs(p)
    improved = sorted(k for k in after if k in before and after[k] < before[k])
    new = sorted(k for k in after if k not in before)
    print(f"next tick: {len(improved)} costs improved, {len(new)} pairs newly connected:")
    hops = next_hops(p)

    def via(k: tuple[str, str]) -> str:
        return "by the direct road" if hops[k] == "direct" else f"first hop {hops[k]}"

    for k in improved:
        print(f"  {k[0]:>10} -> {k[1]:<10} {before[k]:>3} -> {after[k]:<3} ({via(k)})")
    for k in new:
        print(f"  {k[0]:>10} -> {k[1]:<10}   · -> {after[k]:<3} ({via(k)})")
    ok_after = _check([*ROADS, SHORTCUT], after)
    print(f"checked against Dijkstra again: {'OK' if ok_after else 'MISMATCH'}")
    print(
        "\nNo key conflict was raised although new paths re-derived existing (src, dst, hop)\n"
        "keys with other costs: lattice columns merge (lmin keeps the smaller), they never clash."
    )
    sources = sorted(p.seen.value.reveal())
    print(f"seen (an lset folded from link.src): {len(sources)} sources: {', '.join(sources)}")
    return {
        "before": before,
        "after": after,
        "improved": improved,
        "ok": ok_before and ok_after,
        "seen": set(sources),
    }


if __name__ == "__main__":
    main()
