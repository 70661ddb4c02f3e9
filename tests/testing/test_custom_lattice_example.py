"""examples/custom_lattice.py runs as a script: a user lattice passes, a wrong mark is caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_lattice.py"


def test_custom_lattice_example_runs_and_prints_the_check():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Span: all 11 law checks passed" in out
    for line in ("morphism first", "morphism last", "monotone width", "monotone covers"):
        assert f"Span: {line} holds" in out
    assert "SpanWrongMark.covers violates the morphism law" in out
    assert "f(a ⊔ b) != f(a) ⊔ f(b)" in out
    assert "Replay with seed=" in out
