"""``blooml check-laws``: one line per law, exit 0 / 1 on a violation / 2 on a bad target."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from blooml.cli import SUBCOMMANDS, build_parser, main

LATTICES = textwrap.dedent(
    """
    from hypothesis import strategies as st
    from blooml import Lattice, lmax, monotone, morph
    from blooml.testing import LatticeLaws, register


    class Longest(Lattice):
        wrapper_name = "llongest_{tag}"

        def __init__(self, value: str = ""):
            super().__init__(value)

        def merge(self, other):
            a, b = self.reveal(), other.reveal()
            return self if (len(a), a) >= (len(b), b) else other

        @monotone
        def length(self) -> lmax:
            return lmax(len(self.reveal()))


    register(Longest, st.text(alphabet="ab", max_size=3).map(Longest))


    class Sizes(Lattice):
        wrapper_name = "lsizes_{tag}"

        def __init__(self, items=frozenset()):
            super().__init__(frozenset(items))

        def merge(self, other):
            return Sizes(self.reveal() | other.reveal())

        @morph
        def size(self) -> lmax:  # wrong: monotone, not a morphism
            return lmax(len(self.reveal()))


    register(Sizes, st.frozensets(st.integers(0, 4), max_size=3).map(Sizes))


    class Unregistered(Lattice):
        def merge(self, other):
            return self


    class Threshold(Lattice):
        wrapper_name = "lthreshold_{tag}"

        def __init__(self, value: int = 0):
            super().__init__(value)

        def merge(self, other):
            return self if self.reveal() >= other.reveal() else other

        @morph
        def above(self, n) -> lmax:  # untyped: the checker cannot draw n
            return lmax(int(self.reveal() > n))


    register(Threshold, st.integers(0, 5).map(Threshold))


    class TestLongest(LatticeLaws):
        lattice = Longest
        max_examples = 7


    class NoLattice(LatticeLaws):
        pass


    NOT_A_CLASS = 42
    """
)

_tags = itertools.count()


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A module of user lattices, importable by name (``modname:Class``) and by path."""
    tag = next(_tags)
    name = f"cli_user_lattices_{tag}"
    path = tmp_path / f"{name}.py"
    path.write_text(LATTICES.format(tag=tag))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name, path


def test_all_laws_hold_exit_0_one_line_per_law(user_module, capsys):
    name, _ = user_module
    assert main(["check-laws", f"{name}:Longest", "--max-examples", "10"]) == 0
    out = capsys.readouterr().out
    for law in ("associative", "commutative", "idempotent", "bottom_identity", "order_agrees"):
        assert f"PASS  Longest: {law}" in out
    assert "PASS  Longest: monotone length" in out
    assert "Longest: all 8 law checks passed (10 examples each, seed" in out


def test_a_violation_exits_1_and_prints_it(user_module, capsys):
    _, path = user_module
    assert main(["check-laws", f"{path}:Sizes", "--max-examples", "20", "--seed", "7"]) == 1
    out = capsys.readouterr().out
    assert "PASS  Sizes: associative" in out
    assert "FAIL  Sizes: morphism size" in out
    assert "Sizes.size violates the morphism law" in out
    assert "Smallest counterexample:" in out
    assert "--seed 7 --max-examples 20" in out
    assert "Sizes: 1 of 8 law checks FAILED (seed 7)" in out


def test_a_lattice_laws_class_is_a_target(user_module, capsys):
    name, _ = user_module
    assert main(["check-laws", f"{name}:TestLongest"]) == 0
    assert "(7 examples each" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_xyz:Thing", "cannot import module 'no_such_module_xyz'"),
        ("{name}:Missing", "has no attribute 'Missing'"),
        ("{name}:NOT_A_CLASS", "is 42 (of type int), not a lattice class"),
        ("blooml.errors:BloomlError", "is the class blooml.errors.BloomlError, not a lattice"),
        ("{name}:Unregistered", "no strategy is registered for Unregistered"),
        ("{name}:NoLattice", "LatticeLaws class without a lattice attribute"),
        ("{name}", "must look like package.module:Class"),
        ("missing/file.py:Thing", "no such file: 'missing/file.py'"),
        ("{name}:Threshold", "Threshold.above(n): parameter 'n' has no type hint"),
    ],
)
def test_bad_targets_exit_2_with_a_clear_message(user_module, capsys, target, message):
    name, _ = user_module
    assert main(["check-laws", target.format(name=name)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("blooml check-laws: error: ")
    assert message in err


def test_a_module_that_fails_to_import_exits_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken_mod_cli.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check-laws", "broken_mod_cli:X"]) == 2
    assert "importing 'broken_mod_cli' failed: No module named 'no_such_dependency_xyz'" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_bad_max_examples_exits_2(capsys, value):
    assert main(["check-laws", "blooml.lattices:lbool", "--max-examples", value]) == 2
    assert "expected a positive integer" in capsys.readouterr().err


def test_no_subcommand_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "check-laws" in capsys.readouterr().err


def test_subcommands_are_modules_with_register():
    assert all(callable(m.register) for m in SUBCOMMANDS)
    assert "check-laws" in build_parser().format_help()


def test_python_dash_m_blooml_and_the_console_script_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "blooml", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("blooml ")
    script = Path(sys.executable).with_name("blooml")
    if script.exists():
        proc = subprocess.run(
            [str(script), "check-laws", "nope"], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2
        assert "must look like package.module:Class" in proc.stderr


def test_a_builtin_needs_no_arguments(capsys):
    assert main(["check-laws", "blooml:lset", "--max-examples", "5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "PASS  lset: morphism contains" in out
    assert "PASS  lset: monotone size" in out
