"""``blooml analyze``: the printout, points of order, errors and exit statuses."""

from __future__ import annotations

import textwrap

from blooml.cli import main

PROGRAM = textwrap.dedent(
    """
    from blooml import Program, bloom, channel, table, scratch

    class Cart(Program):
        req = channel(["@addr", "item"])
        seen = table(["item"])
        fresh = scratch(["item"])

        @bloom
        def rules(self):
            self.seen <= self.req.map(lambda r: (r.item,))
            self.fresh <= self.req.map(lambda r: (r.item,)).notin(self.seen)

    class Mono(Program):
        req = channel(["@addr", "item"])
        seen = table(["item"])

        @bloom
        def rules(self):
            self.seen <= self.req.map(lambda r: (r.item,))

    NOT_A_PROGRAM = 3
    """
)

BAD = textwrap.dedent(
    """
    from blooml import Program, bloom, table

    class Bad(Program):
        a = table(["k"])

        @bloom
        def rules(self):
            self.a <= self.a.notin(self.a)
    """
)


def test_analyze_prints_strata_and_points_of_order(tmp_path, capsys):
    f = tmp_path / "cartprog.py"
    f.write_text(PROGRAM)
    assert main(["analyze", f"{f}:Cart"]) == 0
    out = capsys.readouterr().out
    assert "program Cart" in out and "stratum 0:" in out and "stratum 1:" in out
    assert "seen -!-> fresh" in out
    assert "points of order (non-monotone after a channel" in out
    assert "(after channel req)" in out


def test_analyze_monotone_program_has_no_points_of_order(tmp_path, capsys):
    f = tmp_path / "monoprog.py"
    f.write_text(PROGRAM)
    assert main(["analyze", f"{f}:Mono"]) == 0
    assert "points of order: none" in capsys.readouterr().out


def test_analyze_errors(tmp_path, capsys):
    f = tmp_path / "someprog.py"
    f.write_text(PROGRAM)
    assert main(["analyze", f"{f}:NOT_A_PROGRAM"]) == 2
    assert "not a Program subclass" in capsys.readouterr().err
    assert main(["analyze", "no_such_module_xyz:P"]) == 2
    g = tmp_path / "badprog.py"
    g.write_text(BAD)
    assert main(["analyze", f"{g}:Bad"]) == 1
    assert "stratified" in capsys.readouterr().err


def test_prints_recovered_expressions_and_marks_python_rules(capsys):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    assert main(["analyze", f"{examples / 'shortest_paths.py'}:Paths"]) == 0
    out = capsys.readouterr().out
    assert "map(link, lambda lk: (lk.src, lk.dst, 'direct', lmin(lk.c)))" in out
    assert "lambda lk, p: (lk.src, p.dst, lk.dst, (p.c + lk.c))" in out
    assert "<lambda>@" not in out and "runs Python" not in out
    assert main(["analyze", f"{examples / 'kvs.py'}:KVS"]) == 0
    out = capsys.readouterr().out
    assert "map(kvput, lambda p: (p.key, lmax((p.version, p.value))))" in out
    assert "# runs Python: <lambda>@kvs.py:" in out  # reads self.store: a closure
