"""docs/tools.md stays true: its Python runs, its pictures exist, its commands are real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blooml.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")


def test_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "docs/tools.md", "exec"), {"__name__": "tools_doc"})


def test_pictures_and_links_exist() -> None:
    links = re.findall(r"\]\((img/[\w./-]+)\)", DOC)
    assert {"img/plot_cart.svg", "img/plot_cycle.svg", "img/trace_viewer.png"} <= set(links)
    assert "img/notebook_repr.png" in links
    for link in links:
        assert (ROOT / "docs" / link).is_file(), link
    assert (ROOT / "docs" / "make_images.py").is_file()


def test_console_commands_parse() -> None:
    parser = build_parser()
    commands = re.findall(r"^\$ blooml (.+)$", DOC, flags=re.M)
    assert len(commands) >= 4
    for line in commands:
        parser.parse_args(line.split())  # raises SystemExit on an unknown option
