"""Every ``blooml`` subcommand's ``--help`` is plain text with an example; ``--version``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from blooml import __version__
from blooml.cli import SUBCOMMANDS, main

COMMANDS = [[m.NAME] for m in SUBCOMMANDS] + [["trace", "show"], ["trace", "html"]]
# reST and Sphinx markup that must not reach a terminal
MARKUP = re.compile(r"``|:class:|:func:|:meth:|:mod:|:data:|\.\. ")


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_help_is_plain_text_with_an_example(
    cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: blooml {' '.join(cmd)}")
    assert not MARKUP.search(out), MARKUP.search(out)
    example = out.split("example:\n", 1)
    assert len(example) == 2, f"no example in blooml {' '.join(cmd)} --help"
    assert example[1].lstrip().startswith(f"blooml {cmd[0]}")


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for m in SUBCOMMANDS:
        assert re.search(rf"^    {re.escape(m.NAME)}\b", out, re.M)
    assert "example:\n  blooml analyze" in out and not MARKUP.search(out)


def test_version() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "blooml", "--version"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0 and res.stdout == f"blooml {__version__}\n"
