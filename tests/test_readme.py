"""The README stays true: its Python examples run, and its quick start names real targets."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


def test_quick_start_targets_exist():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test", "test-fast", "lint", "typecheck", "bench"):
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target
    demo = re.search(r"^DEMO\s*\?=\s*(\S+)", makefile, flags=re.M).group(1)
    assert (ROOT / demo).is_file()


def test_documentation_links_resolve():
    for link in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", README):
        assert (ROOT / link).is_file(), link
