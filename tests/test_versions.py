"""Supported CPython versions are declared and tested: classifiers, the CI script, the
Makefile target and the interpreter finder agree."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED = ("3.11", "3.12", "3.13")


def test_classifiers_declare_every_supported_version() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        c.rsplit(":: ", 1)[1]
        for c in meta["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert declared == set(SUPPORTED)
    assert meta["requires-python"] == f">={SUPPORTED[0]}"
    assert sys.version_info[:2] >= (3, 11)


def test_ci_runs_the_suite_on_each_supported_version() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^make test PYTEST_ARGS", ci, re.M)  # 3.11: the whole suite
    for v in SUPPORTED[1:]:
        assert re.search(rf"^make test-py{v.replace('.', '')} ", ci, re.M), v
    assert re.search(r"^test-py312 test-py313: test-py%:", makefile, re.M)
    assert '-m "not spark and not slow"' in makefile.split("test-py%:\n", 1)[1].split("\n\n", 1)[0]


@pytest.mark.skipif(sys.platform == "win32", reason="the CI helper is a bash script")
def test_find_python_finds_this_version_and_explains_a_missing_one() -> None:
    finder = str(ROOT / ".ci" / "find-python")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = subprocess.run(["bash", finder, here], capture_output=True, text=True, timeout=60)
    if out.returncode == 0:  # found: it must be that version
        ver = subprocess.run(
            [out.stdout.strip(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert ver.stdout.strip() == here
    else:  # a machine without pyenv or pythonX.Y on PATH: the message says what to do
        assert f"no working CPython {here}" in out.stderr
    missing = subprocess.run(["bash", finder, "3.99"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert "no working CPython 3.99" in missing.stderr and "pyenv install 3.99" in missing.stderr
    bad = subprocess.run(["bash", finder, "three"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected a version" in bad.stderr
