"""Dependency graph, monotonicity and stratification of a program's rules.

A rule ``head op body`` adds an edge from every collection or lattice variable its body reads
to ``head``. The edge is *temporal* for ``<+ <- <~ <+-`` (it crosses a tick), *non-monotone*
when the source is read through a non-monotone position (the right of ``notin``, the input of
``group``/``argmin``/``reduce``/``choose``/``empty``, the right of a left join, the target of an
unmarked lattice method, a lattice variable a rule function uses non-monotonically:
``Rule.nonmonotone_reads``, a collection whose lattice columns a rule function reads
non-monotonically: ``Rule.nonmonotone_inputs``), and *monotone* otherwise. Strata are the
strongly connected components of the same-tick graph ordered so that a non-monotone edge
always goes to a later stratum; a cycle through a non-monotone edge cannot be ordered and raises
:class:`~blooml.errors.StratificationError`.
"""

from __future__ import annotations

from collections.abc import Iterator

from blooml.errors import StratificationError
from blooml.ir.nodes import (
    ArgAgg,
    Choose,
    Empty,
    Filter,
    FlatMap,
    Group,
    Include,
    Join,
    LatMethod,
    LatRows,
    LatVar,
    Literal,
    Map,
    Node,
    NotIn,
    Reduce,
    Scan,
)
from blooml.ir.program import CollectionInfo, Edge, LatticeInfo, ProgramIR, Rule

__all__ = ["analyze", "has_nonmonotone", "rule_units", "sources"]


def sources(node: Node, nonmono: bool = False) -> Iterator[tuple[str, bool]]:
    """Yield ``(name, read_nonmonotonically)`` for every state the tree below ``node`` reads."""
    if isinstance(node, (Scan, LatVar)):
        yield node.name, nonmono
    elif isinstance(node, (Map, FlatMap, Filter)):
        yield from sources(node.input, nonmono)
    elif isinstance(node, Join):
        for i, inp in enumerate(node.inputs):
            yield from sources(inp, nonmono or (node.how == "left" and i > 0))
    elif isinstance(node, NotIn):
        yield from sources(node.left, nonmono)
        yield from sources(node.right, True)
    elif isinstance(node, (Group, ArgAgg, Reduce, Choose, Empty)):
        yield from sources(node.input, True)
    elif isinstance(node, Include):
        yield from sources(node.input, nonmono)
    elif isinstance(node, LatRows):
        yield from sources(node.lat, nonmono)
    elif isinstance(node, LatMethod):
        nm = nonmono or node.kind == "nonmonotone"
        yield from sources(node.target, nm)
        for a in node.args:
            if isinstance(a, Node):
                yield from sources(a, nm)
    elif isinstance(node, Literal):
        for row in node.rows:
            for cell in row:
                if isinstance(cell, Node):
                    yield from sources(cell, nonmono)


def has_nonmonotone(node: Node) -> bool:
    """Whether any state below ``node`` is read non-monotonically."""
    return any(nm for _, nm in sources(node))


def analyze(
    name: str,
    collections: dict[str, CollectionInfo],
    lattices: dict[str, LatticeInfo],
    rules: tuple[Rule, ...],
) -> ProgramIR:
    """Build the dependency graph and strata of a program.

    Raises:
        StratificationError: a same-tick cycle passes through a non-monotone edge; the error
            names the cycle's collections and the rules (with source lines) on it.
    """
    edges: list[Edge] = []
    for r in rules:
        seen: dict[str, bool] = {}
        for src, nm in sources(r.body):
            seen[src] = seen.get(src, False) or nm or src in r.nonmonotone_inputs
        for var in sorted(r.reads):
            seen[var] = seen.get(var, False) or var in r.nonmonotone_reads
        for src, nm in seen.items():
            kind = "temporal" if r.temporal else ("nonmonotone" if nm else "monotone")
            edges.append(Edge(src, r.head, kind, r.index))

    names = [*collections, *lattices]
    same_tick = [e for e in edges if e.kind != "temporal"]
    comp = _scc(names, same_tick)
    for e in same_tick:
        if e.kind == "nonmonotone" and comp[e.src] == comp[e.dst]:
            err = _cycle_error(e, same_tick, comp, rules)
            err.ir = ProgramIR(
                name=name,
                collections=dict(collections),
                lattices=dict(lattices),
                rules=tuple(rules),
                edges=tuple(edges),
                strata=(),
                stratum_of={},
                temporal=(),
            )
            raise err

    # Longest path over the condensation: a non-monotone edge moves to a later stratum.
    level = {c: 0 for c in set(comp.values())}
    order = _topo(set(comp.values()), {(comp[e.src], comp[e.dst]) for e in same_tick})
    incoming: dict[int, list[tuple[int, int]]] = {}
    for e in same_tick:
        a, b = comp[e.src], comp[e.dst]
        if a != b:
            incoming.setdefault(b, []).append((a, 1 if e.kind == "nonmonotone" else 0))
    for c in order:
        for a, w in incoming.get(c, ()):
            level[c] = max(level[c], level[a] + w)
    stratum_of = {n: level[comp[n]] for n in names}
    nstrata = max(stratum_of.values(), default=0) + 1
    buckets: list[list[int]] = [[] for _ in range(nstrata)]
    temporal: list[int] = []
    for r in rules:
        if r.temporal:
            temporal.append(r.index)
        else:
            buckets[stratum_of[r.head]].append(r.index)
    strata = tuple(tuple(b) for b in buckets if b)
    # renumber the stratum of each name to the compacted strata
    used = [i for i, b in enumerate(buckets) if b]
    remap = {old: new for new, old in enumerate(used)}
    compact: dict[str, int] = {}
    for n, s in stratum_of.items():
        compact[n] = remap.get(s, _nearest(s, used))
    return ProgramIR(
        name=name,
        collections=dict(collections),
        lattices=dict(lattices),
        rules=tuple(rules),
        edges=tuple(edges),
        strata=strata,
        stratum_of=compact,
        temporal=tuple(temporal),
    )


def rule_units(rules: list[Rule]) -> list[tuple[bool, list[Rule]]]:
    """Split one stratum's rules into units evaluated in dependency order: the rules of each
    strongly connected component of their heads (with the same Tarjan and topological order
    that stratification uses). A unit is ``(recursive, rules)``: recursive when its heads
    depend on themselves within the stratum (a cycle or a rule reading its own head); the
    rules of a unit share heads, and every rule writing a unit's heads is in that unit."""
    edges: list[Edge] = []
    names: list[str] = []
    for r in rules:
        srcs = {s for s, _ in sources(r.body)} | set(r.reads)
        names.extend(srcs)
        names.append(r.head)
        edges.extend(Edge(s, r.head, "monotone", r.index) for s in srcs)
    names = list(dict.fromkeys(names))
    comp = _scc(names, edges)
    order = _topo(set(comp.values()), {(comp[e.src], comp[e.dst]) for e in edges})
    by_comp: dict[int, list[Rule]] = {}
    for r in rules:
        by_comp.setdefault(comp[r.head], []).append(r)
    selfloop = {comp[e.dst] for e in edges if comp[e.src] == comp[e.dst]}
    return [(c in selfloop, by_comp[c]) for c in order if c in by_comp]


def _nearest(s: int, used: list[int]) -> int:
    below = [i for i, u in enumerate(used) if u <= s]
    return below[-1] if below else 0


def components(names: list[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of the graph ``succ`` (name -> successors) over
    ``names``, in topological order (a component before those it reaches): the stratifier's
    own decomposition, for front ends that order relations as the engine does."""
    edges = [Edge(a, b, "monotone", 0) for a in names for b in sorted(succ.get(a, ()))]
    comp = _scc(names, edges)
    order = _topo(set(comp.values()), {(comp[e.src], comp[e.dst]) for e in edges})
    members: dict[int, list[str]] = {}
    for n in names:
        members.setdefault(comp[n], []).append(n)
    return [members[c] for c in order]


def _scc(names: list[str], edges: list[Edge]) -> dict[str, int]:
    """Tarjan's algorithm, iterative; returns the component id of every name."""
    succ: dict[str, list[str]] = {n: [] for n in names}
    for e in edges:
        succ.setdefault(e.src, []).append(e.dst)
        succ.setdefault(e.dst, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comp: dict[str, int] = {}
    counter = 0
    ncomp = 0
    for root in succ:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            recurse = False
            nbrs = succ[v]
            while i < len(nbrs):
                w = nbrs[i]
                i += 1
                if w not in index:
                    work.append((v, i))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp


def _topo(nodes: set[int], arcs: set[tuple[int, int]]) -> list[int]:
    indeg = {n: 0 for n in nodes}
    succ: dict[int, list[int]] = {n: [] for n in nodes}
    for a, b in arcs:
        if a != b:
            succ[a].append(b)
            indeg[b] += 1
    ready = sorted(n for n in nodes if indeg[n] == 0)
    out = []
    while ready:
        n = ready.pop()
        out.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    return out


def _cycle_error(
    bad: Edge, edges: list[Edge], comp: dict[str, int], rules: tuple[Rule, ...]
) -> StratificationError:
    """Find the shortest same-component path ``bad.dst -> bad.src`` and report the cycle."""
    c = comp[bad.src]
    succ: dict[str, list[Edge]] = {}
    for e in edges:
        if comp[e.src] == c and comp[e.dst] == c:
            succ.setdefault(e.src, []).append(e)
    prev: dict[str, Edge | None] = {bad.dst: None}
    queue = [bad.dst]
    while queue and bad.src not in prev:
        nxt = []
        for v in queue:
            for e in succ.get(v, ()):
                if e.dst not in prev:
                    prev[e.dst] = e
                    nxt.append(e.dst)
        queue = nxt
    path: list[Edge] = []
    v = bad.src
    while True:
        step = prev.get(v)
        if step is None:
            break
        path.append(step)
        v = step.src
    path.reverse()
    cycle_edges = [bad, *path]
    cycle = [bad.src, *(e.dst for e in cycle_edges)]
    rule_ids: list[int] = []
    for e in cycle_edges:
        if e.rule not in rule_ids:
            rule_ids.append(e.rule)
    descr = [
        ("non-monotone " if rules[i].index == bad.rule else "") + rules[i].describe()
        for i in rule_ids
    ]
    err = StratificationError(cycle, descr)
    err.edges = tuple(cycle_edges)
    return err
