"""``P.ir().to_dot()``, ``blooml plot`` and the cycle of an unstratifiable program."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from blooml import Program, StratificationError, bloom, channel, count, lset, scratch, table
from blooml.cli import main
from blooml.errors import GraphvizNotFound
from blooml.ir import dot as dotmod

HAVE_GRAPHVIZ = dotmod.graphviz_available()
needs_graphviz = pytest.mark.skipif(
    not HAVE_GRAPHVIZ and not (os.environ.get("CI") or os.environ.get("BLOOML_REQUIRE_TOOLS")),
    reason="Graphviz (the graphviz package and the dot program) is not installed",
)


class Cart(Program):
    action = channel(["@server", "client", "item"])
    log = table(["client", "item"])
    counts = scratch(["client"], ["n"])
    reply = channel(["@client", "n"])
    seen = lset()

    @bloom
    def rules(self):
        self.log <= self.action.map(lambda a: (a.client, a.item))
        self.counts <= self.log.group(["client"], count())
        self.reply < ~self.counts.map(lambda c: (c.client, c.n))
        self.seen <= self.log.map(lambda r: r.item)


BAD_SRC = """
from blooml import Program, bloom, scratch, table

class Bad(Program):
    a = table(["x"])
    b = scratch(["x"])
    c = scratch(["x"])

    @bloom
    def rules(self):
        self.b <= self.a
        self.c <= self.b.notin(self.a)
        self.a <= self.c
"""


def _edge_lines(dot: str) -> list[str]:
    return [ln.strip() for ln in dot.splitlines() if "->" in ln]


def test_to_dot_nodes_edges_strata_and_styles() -> None:
    dot = Cart.ir().to_dot()
    assert dot.startswith('digraph "Cart" {')
    for name, shape in [
        ("action", "cds"),
        ("log", "box3d"),
        ("counts", "box"),
        ("seen", "ellipse"),
    ]:
        line = next(ln for ln in dot.splitlines() if ln.strip().startswith(f'"s_{name}" ['))
        assert f"shape={shape}" in line
    assert 'subgraph "cluster_stratum_0"' in dot and 'subgraph "cluster_stratum_1"' in dot
    edges = _edge_lines(dot)
    group = next(e for e in edges if e.startswith('"s_log" -> "s_counts"'))
    # group over a channel's contents: a CALM point of order, purple and thick
    assert "r1 <= group" in group and "point of order" in group and "#8e44ad" in group
    send = next(e for e in edges if e.startswith('"s_counts" -> "s_reply"'))
    assert "style=dashed" in send and "r2 <~ map" in send
    mono = next(e for e in edges if e.startswith('"s_action" -> "s_log"'))
    assert "#333333" in mono and "r0 <= map" in mono


def test_nonmonotone_without_channel_is_orange() -> None:
    class Local(Program):
        a = table(["x"])
        b = table(["x"])
        c = scratch(["x"])

        @bloom
        def rules(self):
            self.c <= self.a.notin(self.b)
            self.b < +self.c

    edges = _edge_lines(Local.ir().to_dot())
    right = next(e for e in edges if e.startswith('"s_b" -> "s_c"'))
    assert "#d9822b" in right and "arrowhead=odot" in right
    nxt = next(e for e in edges if e.startswith('"s_c" -> "s_b"'))
    assert "style=dotted" in nxt


def test_unstratifiable_error_carries_cycle_edges_and_graph(tmp_path: Path) -> None:
    ns: dict[str, object] = {}
    with pytest.raises(StratificationError) as info:
        exec(compile(BAD_SRC, "bad.py", "exec"), ns)
    err = info.value
    assert [(e.src, e.dst) for e in err.edges] == [("a", "c"), ("c", "a")]
    assert err.edges[0].kind == "nonmonotone"
    assert err.ir is not None and err.ir.strata == ()
    dot = dotmod.program_dot(err.ir, cycle=err.edges)
    red = [e for e in _edge_lines(dot) if "#d62728" in e]
    assert sorted(e.split(" [")[0] for e in red) == ['"s_a" -> "s_c"', '"s_c" -> "s_a"']
    assert all("(cycle)" in e for e in red)


def test_plot_dot_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "cartmod.py"
    src.write_text(
        "from blooml import Program, bloom, table, scratch\n"
        "class P(Program):\n"
        "    a = table(['x'])\n"
        "    b = scratch(['x'])\n"
        "    @bloom\n"
        "    def rules(self):\n"
        "        self.b <= self.a\n"
    )
    out = tmp_path / "p.dot"
    assert main(["plot", f"{src}:P", "-o", str(out)]) == 0
    assert '"s_a" -> "s_b"' in out.read_text()


def test_plot_unstratifiable_draws_cycle_and_exits_1(tmp_path: Path) -> None:
    src = tmp_path / "badmod.py"
    src.write_text(BAD_SRC)
    out = tmp_path / "bad.dot"
    assert main(["plot", f"{src}:Bad", "-o", str(out)]) == 1
    text = out.read_text()
    assert "cannot be stratified" in text and text.count("(cycle)") == 2


def test_plot_bad_suffix_and_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "examples/shortest_paths.py:Paths", "-o", str(tmp_path / "x.gif")]) == 2
    assert "suffix" in capsys.readouterr().err
    assert main(["plot", "examples/shortest_paths.py:ROADS", "-o", str(tmp_path / "x.dot")]) == 2
    assert "not a Program subclass" in capsys.readouterr().err


def test_plot_without_graphviz_writes_dot_and_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dotmod.shutil, "which", lambda name: None)
    out = tmp_path / "paths.svg"
    assert main(["plot", "examples/shortest_paths.py:Paths", "-o", str(out)]) == 0
    assert not out.exists()
    assert (tmp_path / "paths.dot").read_text().startswith("digraph")
    err = capsys.readouterr().err
    assert f"dot -Tsvg {tmp_path / 'paths.dot'} -o {out}" in err
    with pytest.raises(GraphvizNotFound) as info:
        dotmod.render("digraph {}", "svg")
    assert "dot" in info.value.missing


@needs_graphviz
def test_plot_svg_and_repr_svg(tmp_path: Path) -> None:
    out = tmp_path / "paths.svg"
    assert main(["plot", "examples/shortest_paths.py:Paths", "-o", str(out)]) == 0
    svg = out.read_text()
    assert "<svg" in svg and "stratum 0" in svg and "path" in svg
    ir_svg = Cart.ir()._repr_svg_()
    assert ir_svg is not None and "<svg" in ir_svg
    assert "<svg" in Cart.ir()._repr_html_()


def test_circuits_share_the_style() -> None:
    from blooml.dataflow import Circuit

    c = Circuit("c")
    s = c.source("in")
    c.sink("out", c.map(s, lambda x: x))
    text = c.dot()
    assert text.startswith(dotmod.graph_header("c")[0])
    assert f"shape={dotmod.SHAPES['input']}" in text
