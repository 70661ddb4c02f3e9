"""``blooml repl``: the shell driven by scripted standard input."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from blooml import Program, bloom, channel, lmax, table
from blooml.cli.repl import Repl, _literal_rows

ROOT = Path(__file__).resolve().parents[2]


class Counter(Program):
    hits = table(["who"], ["n"])
    top = lmax()
    ping = channel(["@to", "n"])
    got = table(["n"])

    @bloom
    def rules(self):
        self.top <= self.hits.map(lambda h: h.n)
        self.ping < ~self.hits.map(lambda h: ("localhost", h.n))
        self.got <= self.ping.map(lambda p: (10 // p.n,))


def _session(script: str) -> tuple[str, Repl]:
    out = io.StringIO()
    shell = Repl(_traced(), stdin=io.StringIO(script), stdout=out)
    shell.cmdloop()
    return out.getvalue(), shell


def _traced() -> Counter:
    from blooml.engine.trace import Tracer

    return Counter(trace=Tracer(io.StringIO(), limit=10))


def test_insert_step_dump_and_why() -> None:
    out, shell = _session(
        'insert hits ("ann", 3) ("bob", 5)\nstep\ntick\ndump got top\nwhy 0\nstate\nquit\n'
    )
    lines = out.splitlines()
    assert lines[0].startswith("blooml repl: Counter at 'localhost' (3 collections")
    assert "queued 2 inserts into hits" in lines
    assert "tick 0: took 2 rows, derived 4, sent 2" in out
    assert '  in   hits insert 2: ["ann", 3], ["bob", 5]' in lines
    assert any(ln.startswith("  r1   [test_repl.py:") and "ping <~: 2 rows" in ln for ln in lines)
    assert '  sent ping to localhost: ["localhost", 3]' in lines
    assert "tick 1: took 2 rows, derived 2, sent 0" in out
    assert "table got: 2 rows" in lines and "lattice top = lmax(5)" in lines
    # why 0 repeats the step's report
    assert out.count('  in   hits insert 2: ["ann", 3], ["bob", 5]') == 2
    assert "  table hits [who] -> [n]  (2 rows)" in lines and "tick_count = 2" in lines
    assert shell.status == 0


def test_errors_are_reported_and_state_is_kept() -> None:
    out, shell = _session(
        'insert hits ("zed", 0)\ntick\ntick\ndump got\nnosuch\ninsert nope (1,)\n'
        "insert hits (1\ntick x\nwhy 99\ndelete top lmax(1)\n"
    )
    assert "tick 0: took 1 rows" in out
    # tick 1 takes the message ("localhost", 0): 10 // 0 raises, the tick rolls back
    assert "error: tick 1 raised ZeroDivisionError: integer division or modulo by zero" in out
    assert "blooml: in rule 2 (test_repl.py:" in out
    assert "table got: 0 rows" in out
    assert "error: unknown command 'nosuch'" in out
    assert "error: no collection or lattice variable 'nope'" in out
    assert "error: cannot read the rows '(1': unbalanced brackets or quotes" in out
    assert "error: tick takes a non-negative number of ticks, got 'x'" in out
    assert "error: no tick 99 has run" in out
    assert "error: top is a lattice variable: values only grow" in out
    assert shell.status == 1


def test_lattice_insert_rules_and_plot(tmp_path: Path) -> None:
    out, _ = _session(
        f"insert top lmax(7)\ntick\ndump top\nrules\nplot {tmp_path / 'c.dot'}\nlscollections\n"
    )
    assert "  lattice top = lmax(7)" in out  # lscollections: rebl's name for state
    assert "lattice top = lmax(7)" in out
    assert "stratum 0:" in out and "dependencies:" in out
    assert (tmp_path / "c.dot").read_text().startswith('digraph "Counter"')


def test_row_syntax() -> None:
    names = {"lmax": lmax}
    assert _literal_rows('("a", 1) ("b", 2)', names) == [("a", 1), ("b", 2)]
    assert _literal_rows('("a", 1), ("b", 2)', names) == [("a", 1), ("b", 2)]
    assert _literal_rows('[("a", 1), ("b", 2)]', names) == [("a", 1), ("b", 2)]
    assert _literal_rows('("a b", lmax(2))', names) == [("a b", lmax(2))]
    assert _literal_rows("lmax(3)", names) == [lmax(3)]


def test_repl_subprocess_with_piped_stdin() -> None:
    script = 'insert link ("a", "b", 1) ("b", "c", 2)\ntick\ndump best\n'
    res = subprocess.run(
        [sys.executable, "-m", "blooml", "repl", "examples/shortest_paths.py:Paths"],
        input=script,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "tick 0: took 2 rows, derived 8, sent 0" in res.stdout
    assert "table best: 3 rows" in res.stdout
    assert "  'a'  'c'  lmin(3)" in res.stdout
