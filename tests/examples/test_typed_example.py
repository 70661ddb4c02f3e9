"""examples/typed_program.py runs, and the documented user code type-checks: ``mypy --strict``
and pyright (strict) accept examples/ without casts, and flag a merge of two lattice classes
and an insert of the wrong class (the example's ignore comments would be reported as unused
otherwise). ``make typecheck-examples`` (part of ``make lint`` and CI) runs the same checks;
here they run when the checker is installed (mypy with the dev extra, pyright under
tools/pyright after ``make typecheck-examples``) and are skipped, saying so, otherwise."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _examples import ROOT, load_example

from blooml import LatticeTypeError, lmap, lmax, lset

PYRIGHT = ROOT / "tools" / "pyright" / "node_modules" / ".bin" / "pyright"


def test_typed_example_runs() -> None:
    out = load_example("typed_program").main()
    assert out["voters"] == ["ann", "bob", "cid"] and out["count"] == 3 and out["quorum"]
    assert out["for_x"] == ["ann", "cid"] and out["count_after"] == 10


def test_the_flagged_mistakes_also_fail_at_run_time() -> None:
    with pytest.raises(LatticeTypeError):
        lmax(1) | lset([1])  # type: ignore[operator]
    assert lmap({"a": lmax(2)}).at("a", lmax) == lmax(2)


_USER_CODE = textwrap.dedent(
    """
    from blooml import Program, bloom, lmap, lmax, lset, table

    class P(Program):
        t = table(["k"], ["v"])
        votes = lset()

        @bloom
        def rules(self) -> None:
            self.votes <= self.t.map(lambda r: r.k)

    p = P()
    p.t.insert([("a", 1)])
    v: lset = p.votes.value
    n: lmax = lmap({"a": lmax(1)}).at("a", lmax)
    m: lmax = lmax(1) | lmax(2)
    print(v, n, m, len(p.t), [r.k for r in p.t])
    lmax(1) | lset([1])
    """
)


def _mypy(*args: str) -> tuple[int, str]:
    from mypy import api

    out, err, code = api.run(list(args))
    return code, out + err


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy (dev extra) missing")
def test_mypy_strict_accepts_the_documented_idioms_and_flags_a_mixed_merge(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(_USER_CODE, encoding="utf-8")
    code, out = _mypy("--strict", "--no-incremental", str(user))
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert (
        len(errors) == 1 and 'Unsupported operand types for | ("lmax" and "lset")' in errors[0]
    ), out
    code, out = _mypy("--strict", "--no-incremental", str(ROOT / "examples"))
    assert code == 0, out


@pytest.mark.skipif(
    not PYRIGHT.exists() or shutil.which("node") is None,
    reason="pyright is not installed (make typecheck-examples installs it from npm)",
)
def test_pyright_strict_accepts_examples_and_flags_a_mixed_merge(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(_USER_CODE, encoding="utf-8")
    (tmp_path / "pyrightconfig.json").write_text(
        (ROOT / "pyrightconfig.json")
        .read_text(encoding="utf-8")
        .replace('"examples"', '"user.py"')
        .replace('"venvPath": "."', f'"venvPath": "{ROOT}"'),
        encoding="utf-8",
    )
    run = subprocess.run(
        [str(PYRIGHT), "-p", str(tmp_path / "pyrightconfig.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    errors = [line for line in run.stdout.splitlines() if " - error:" in line]
    assert len(errors) == 1 and 'Operator "|" not supported' in errors[0], run.stdout
    run = subprocess.run(
        [str(PYRIGHT), "-p", str(ROOT / "pyrightconfig.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_py_typed_is_shipped() -> None:
    assert (ROOT / "src" / "blooml" / "py.typed").exists()
    assert sys.version_info >= (3, 11)
