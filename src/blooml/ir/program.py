"""The IR of a whole program: its state, its rules, the dependency graph and the strata."""

from __future__ import annotations

from typing import Any

import attrs

from blooml.errors import ProgramError
from blooml.ir.nodes import Lat, Node, _fn_name, python_functions
from blooml.lattices._base import Lattice

__all__ = ["TEMPORAL_OPS", "CollectionInfo", "Edge", "LatticeInfo", "ProgramIR", "Rule"]

#: Operators whose effect is visible at a later tick (they break cycles).
TEMPORAL_OPS = frozenset({"<+", "<-", "<~", "<+-"})
#: Operators that remove tuples from their head (a deletion, a replacement): non-monotone in
#: the head, so a CALM point of order when a channel feeds their body.
_DESTRUCTIVE_OPS = frozenset({"<-", "<+-"})


@attrs.frozen
class CollectionInfo:
    """A declared collection.

    Attributes:
        name: the attribute name.
        kind: ``table``, ``scratch``, ``channel``, ``periodic`` or ``interface``.
        keys: key column names (``@`` stripped); ``values``: the other columns.
        loc: index of the location column of a channel (``None`` otherwise).
        ttl: lifetime in seconds of a soft-state table (``None``: hard state).
        period: seconds between firings of a ``periodic``.
        direction: ``"input"``/``"output"`` for interfaces.
        durable: a table whose every committed tick is kept in the program's ``data_dir``.
    """

    name: str
    kind: str
    keys: tuple[str, ...]
    values: tuple[str, ...] = ()
    loc: int | None = None
    ttl: float | None = None
    period: float | None = None
    direction: str | None = None
    durable: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column, keys first."""
        return (*self.keys, *self.values)

    def check_keys(self, row: Any) -> None:
        """Raise :class:`~blooml.errors.ProgramError` when a key column of ``row`` holds a
        lattice value (lattice values cannot be key columns); every engine checks with this."""
        for i, column in enumerate(self.keys):
            if isinstance(row[i], Lattice):
                raise ProgramError(
                    f"{self.kind} {self.name!r}: key column {column!r} holds the lattice value "
                    f"{row[i]!r} in {tuple(row)!r}; lattice values cannot be key columns "
                    "(declare the column among the values)"
                )

    @property
    def persistent(self) -> bool:
        """Whether tuples survive the end of a tick (tables do; the rest are scratches)."""
        return self.kind == "table"

    def describe(self) -> str:
        """One line such as ``table path [src, dst, hop] -> [c]``."""
        keys = ", ".join(("@" if i == self.loc else "") + k for i, k in enumerate(self.keys))
        text = f"{self.kind} {self.name} [{keys}]"
        if self.values:
            text += f" -> [{', '.join(self.values)}]"
        if self.ttl is not None:
            text += f" ttl={self.ttl}s"
        if self.period is not None:
            text += f" every {self.period}s"
        if self.direction is not None:
            text += f" ({self.direction})"
        if self.durable:
            text += " durable"
        return text


@attrs.frozen
class LatticeInfo:
    """A declared lattice variable: its class and initial value (⊥ unless given); ``durable``:
    its value after every committed tick is kept in the program's ``data_dir``."""

    name: str
    cls: type
    initial: Any
    durable: bool = False

    def describe(self) -> str:
        """One line such as ``lattice votes: lset = lset(frozenset())``."""
        wn = getattr(self.cls, "wrapper_name", "") or self.cls.__qualname__
        return f"lattice {self.name}: {wn} = {self.initial!r}" + (
            " durable" if self.durable else ""
        )


@attrs.frozen(repr=False)
class Rule:
    """One statement ``head op body``.

    Attributes:
        index: position in the program (rules are numbered in definition order).
        head: the name of the collection or lattice variable on the left.
        op: ``<=``, ``<+``, ``<-``, ``<~`` or ``<+-``.
        body: the right-hand side (a :class:`~blooml.ir.nodes.Rel` or
            :class:`~blooml.ir.nodes.Lat` node).
        block: the ``@bloom`` method it was written in; ``file``/``line``: where.
        reads: lattice variables read inside the rule's functions (re-evaluated on growth):
            found by reading the functions' bytecode, plus those declared with
            :func:`blooml.reads`. The engine verifies at run time that a function reads no
            other (see ``docs/bloom.md``).
        nonmonotone_reads: the subset of ``reads`` used non-monotonically (``reveal()``, any
            method not marked ``@morph``/``@monotone``, the bare value): a non-monotone edge,
            so the variable is final (an earlier stratum) before the rule runs.
        reads_tick: whether a function reads ``self.tick_count``.
        nonmonotone_inputs: collections (and lattice variables, through
            ``to_collection()``) whose rows reach a rule function that reads their lattice
            columns non-monotonically (``reveal()``, a lattice method not marked
            ``@morph``/``@monotone``): a non-monotone edge, so those rows are final (an
            earlier stratum; a recursive lattice view has reached its fixpoint) before the
            rule runs.
        shipped_reads: the subset of ``nonmonotone_reads`` whose whole value a function only
            puts, as the last column, into the row it returns (state-based gossip:
            ``(p.addr, self.cart)``); in a ``<~``/``<+`` rule, not a point of order.
    """

    index: int
    head: str
    op: str
    body: Node
    block: str
    file: str
    line: int
    reads: frozenset[str] = frozenset()
    reads_tick: bool = False
    nonmonotone_reads: frozenset[str] = frozenset()
    nonmonotone_inputs: frozenset[str] = frozenset()
    shipped_reads: frozenset[str] = frozenset()

    @property
    def temporal(self) -> bool:
        """Whether the effect is visible only at a later tick."""
        return self.op in TEMPORAL_OPS

    @property
    def where(self) -> str:
        """``file:line`` of the rule."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    @property
    def python_functions(self) -> list[Any]:
        """The functions of the body that run as Python (not recovered as expressions; see
        :func:`blooml.ir.nodes.python_functions`): empty when the rule is all expressions."""
        return python_functions(self.body)

    def describe(self) -> str:
        """``rule 3 (paths.py:14, block rules): path <= map(link, ...)``."""
        return f"rule {self.index} ({self.where}, block {self.block}): {self}"

    def __str__(self) -> str:
        return f"{self.head} {self.op} {self.body!r}"

    def __repr__(self) -> str:
        return f"<Rule {self.describe()}>"


@attrs.frozen
class Edge:
    """A dependency ``src -> dst`` created by rule ``rule``; ``kind`` is ``monotone``,
    ``nonmonotone`` or ``temporal``."""

    src: str
    dst: str
    kind: str
    rule: int


@attrs.frozen(repr=False)
class ProgramIR:
    """Everything an engine needs to run a program, and what ``blooml analyze`` prints.

    Attributes:
        name: the program class's qualified name.
        collections: declared collections by name; ``lattices``: lattice variables by name.
        rules: every rule, in definition order.
        edges: the dependency graph.
        strata: rule indices per stratum (same-tick rules only), evaluated in order.
        stratum_of: stratum of each collection / lattice variable.
        temporal: indices of the rules evaluated at the end of a tick (``<+ <- <~ <+-``).
    """

    name: str
    collections: dict[str, CollectionInfo]
    lattices: dict[str, LatticeInfo]
    rules: tuple[Rule, ...]
    edges: tuple[Edge, ...]
    strata: tuple[tuple[int, ...], ...]
    stratum_of: dict[str, int]
    temporal: tuple[int, ...]

    def is_lattice(self, name: str) -> bool:
        """Whether ``name`` is a lattice variable."""
        return name in self.lattices

    def nonmonotone_after_channels(self) -> list[tuple[Rule, list[str]]]:
        """Rules with a non-monotone dependency downstream of a channel (CALM points of order).

        A rule is one when a channel's contents reach a non-monotone input of it (the right of
        a ``notin``, a ``group``, an ``argmin``, a non-monotone lattice method, a lattice
        variable its functions read non-monotonically, ``Rule.nonmonotone_reads``, in a rule
        of any operator, except a value a ``<~``/``<+`` rule ships whole in its rows,
        ``Rule.shipped_reads``), or when it
        is a ``<-`` or ``<+-`` rule (a deletion or a replacement: non-monotone in its head)
        whose body a channel reaches: what it removes depends on when the message came.

        Returns ``(rule, channels)`` pairs: the channels whose contents reach the rule's
        non-monotone input.
        """
        succ: dict[str, set[str]] = {}
        for e in self.edges:
            succ.setdefault(e.src, set()).add(e.dst)
        out: list[tuple[Rule, list[str]]] = []
        chans = [c for c, info in self.collections.items() if info.kind == "channel"]
        reach: dict[str, set[str]] = {}
        for c in chans:
            seen = {c}
            stack = [c]
            while stack:
                for nxt in succ.get(stack.pop(), ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            reach[c] = seen
        for rule in self.rules:
            srcs = {e.src for e in self.edges if e.rule == rule.index and e.kind == "nonmonotone"}
            if rule.op in _DESTRUCTIVE_OPS:
                srcs = {e.src for e in self.edges if e.rule == rule.index}
            elif not srcs and rule.temporal:
                srcs = {
                    e.src for e in self.edges if e.rule == rule.index and _nonmono_body(rule.body)
                }
                # a lattice variable its functions read non-monotonically (``x.reveal() <
                # 10`` in a ``<+``/``<~`` rule): its edge is temporal, the read is not
                srcs |= rule.nonmonotone_reads - rule.shipped_reads
            hit = sorted(c for c in chans if reach[c] & srcs)
            if hit:
                out.append((rule, hit))
        return out

    def to_dot(self) -> str:
        """The dataflow as Graphviz DOT text: state as nodes, rules as labelled edges,
        non-monotone edges and points of order highlighted, strata as clusters (see
        :mod:`blooml.ir.dot`)."""
        from blooml.ir.dot import program_dot

        return program_dot(self)

    def to_svg(self) -> str:
        """The dataflow laid out by Graphviz, as SVG text.

        Raises:
            GraphvizNotFound: the ``graphviz`` package or the ``dot`` program is missing.
        """
        from blooml.ir.dot import render

        return render(self.to_dot(), "svg").decode()

    def _repr_svg_(self) -> str | None:
        """Jupyter: the plot, when Graphviz is installed (else the HTML/text form is shown)."""
        from blooml.ir.dot import graphviz_available

        return self.to_svg() if graphviz_available() else None

    def _repr_html_(self) -> str:
        """Jupyter: the plot (when Graphviz is installed) above the printout."""
        import html

        svg = self._repr_svg_()
        text = f"<pre>{html.escape(self.format())}</pre>"
        if svg is None:
            return text
        return f"<div>{svg}<details><summary>rules and strata</summary>{text}</details></div>"

    def format(self) -> str:
        """A readable printout: state, strata with their rules, edges."""
        lines = [f"program {self.name}", "", "state:"]
        for c in self.collections.values():
            lines.append(f"  {c.describe()}")
        for lat in self.lattices.values():
            lines.append(f"  {lat.describe()}")
        for i, stratum in enumerate(self.strata):
            lines.append("")
            lines.append(f"stratum {i}:")
            lines.extend(_rule_line(self.rules[r]) for r in stratum)
        if self.temporal:
            lines.append("")
            lines.append("end of tick (<+ <- <~ <+-):")
            lines.extend(_rule_line(self.rules[r]) for r in self.temporal)
        lines.append("")
        lines.append("dependencies:")
        seen: set[tuple[str, str, str]] = set()
        for e in self.edges:
            if (e.src, e.dst, e.kind) not in seen:
                seen.add((e.src, e.dst, e.kind))
                mark = {"monotone": "->", "nonmonotone": "-!->", "temporal": "~>"}[e.kind]
                lines.append(f"  {e.src} {mark} {e.dst}  ({e.kind}, rule {e.rule})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return (
            f"<ProgramIR {self.name}: {len(self.collections)} collections, "
            f"{len(self.lattices)} lattices, {len(self.rules)} rules, {len(self.strata)} strata>"
        )


def _rule_line(rule: Rule) -> str:
    """A rule in ``ProgramIR.format``: where, the rule (recovered functions printed as
    ``lambda`` expressions), and the functions that run as Python, if any."""
    line = f"  [{rule.where}] {rule}"
    py = rule.python_functions
    if py:
        line += f"    # runs Python: {', '.join(_fn_name(f) for f in py)}"
    return line


def _nonmono_body(node: Node) -> bool:
    from blooml.ir.graph import has_nonmonotone

    return has_nonmonotone(node)


def is_lattice_node(node: Node) -> bool:
    """Whether ``node`` evaluates to a lattice value."""
    return isinstance(node, Lat)
