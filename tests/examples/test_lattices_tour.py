"""The lattices tour runs and shows what it claims."""

import runpy
import subprocess
import sys
from pathlib import Path

from blooml import lbool, lmap, lmax, lmin

TOUR = Path(__file__).resolve().parents[2] / "examples" / "lattices_tour.py"


def test_tour_results():
    out = runpy.run_path(str(TOUR))["main"]()
    assert out["max"] == lmax(11)
    assert out["dist"] == lmin(9)
    assert out["quorum"] == lbool(True)
    assert out["sum"] == lmax(75)
    assert out["map"] == lmap({"apples": lmax(3), "pears": lmax(1), "plums": lmax(8)})
    assert out["shared"] is True


def test_tour_runs_as_a_script():
    proc = subprocess.run([sys.executable, str(TOUR)], capture_output=True, text=True, check=True)
    assert "big ⊔ (subset) is big: True" in proc.stdout
    assert "repr round-trips through eval: True" in proc.stdout
