"""Every ```python block in README.md and docs/*.md runs, so the docs cannot drift.

The files are found when the tests are collected, so a new page (docs/net.md, ...) is tested
as soon as it exists: one test per file, ``test_doc_snippets[docs/bloom.md]``. The blocks of a
file run in order in one namespace, as a reader would type them into one session, with the
file's line numbers in tracebacks; a failure names the file, the block's first line and the
exception.

A block that cannot run here says so, with a visible reason, in an HTML comment on the line
right before its fence (rendered pages do not show the comment; the reason is for the reader
of the source and for this test's report):

    <!-- snippet: skip: needs a running cluster -->     never run; the reason is required
    <!-- snippet: spark -->                             run by the Spark variant of this test
                                                        (tests/spark/test_doc_snippets_spark.py,
                                                        marked ``spark``) with the suite's
                                                        shared SparkSession

Anything else after ``snippet:`` is an error, as is ``skip`` without a reason. Each skipped
block is reported as a skipped test, ``test_skipped_snippet[docs/bloom.md:218]``, with its
reason (``pytest -rs`` lists them). Every block of a
page listed in ``SPARK_PAGES`` (docs/spark.md) is a Spark block without a mark.
"""

from __future__ import annotations

import logging
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: pages whose every block needs Spark (run only by the Spark variant, all in one namespace)
SPARK_PAGES = frozenset({"docs/spark.md"})
_FENCE = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*snippet:\s*(.*?)\s*-->\s*\Z", re.S)


@dataclass(frozen=True)
class Snippet:
    """One ```python block: its file, first code line (1-based), code and mode."""

    path: str
    line: int
    code: str
    mode: str  # "run", "spark" or "skip"
    reason: str = ""


def doc_files() -> list[Path]:
    """README.md and every docs/*.md, sorted."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def snippets(path: Path) -> list[Snippet]:
    """The ```python blocks of ``path`` with their opt-out marks (see the module docstring)."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    out = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start(2)) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mode, reason = ("spark" if rel in SPARK_PAGES else "run"), ""
        mark = _MARK.search(before)
        if mark:
            word, _, rest = mark.group(1).partition(":")
            word, reason = word.strip(), rest.strip()
            if word == "skip" and reason:
                mode = "skip"
            elif word == "spark" and not rest:
                mode = "spark"
            else:
                raise ValueError(
                    f"{rel}:{line - 2}: bad snippet mark {mark.group(0)!r}: use "
                    "'<!-- snippet: skip: <reason> -->' or '<!-- snippet: spark -->'"
                )
        code = textwrap.dedent(m.group(2))  # a block indented in a list item
        out.append(Snippet(rel, line, code, mode, reason))
    return out


def run_snippets(
    path: Path, modes: tuple[str, ...], prelude: dict[str, object] | None = None
) -> int:
    """Run the blocks of ``path`` whose mode is in ``modes``, in order, in one namespace;
    return how many ran."""
    blocks = [s for s in snippets(path) if s.mode in modes]
    rel = path.relative_to(ROOT).as_posix()
    name = "docsnippet_" + re.sub(r"\W", "_", rel)
    module = types.ModuleType(name)  # classes defined in a block get a real module (pickling)
    module.__dict__.update(prelude or {})
    sys.modules[name] = module
    by_value: Any = None
    if "spark" in modes:
        # Spark workers cannot import this in-memory module: ship its functions by value, as
        # a user's script (__main__) is shipped
        from pyspark import cloudpickle as by_value

        by_value.register_pickle_by_value(module)
    try:
        for i, s in enumerate(blocks):
            # pad so that tracebacks show the markdown file's own line numbers
            code = compile("\n" * (s.line - 1) + s.code, s.path, "exec")
            try:
                exec(code, module.__dict__)
            except Exception as exc:
                raise AssertionError(
                    f"{s.path}:{s.line}: the ```python block starting here (block {i + 1} of "
                    f"{len(blocks)} run) raised {type(exc).__name__}: {exc}\n"
                    "Fix the snippet, or mark it with '<!-- snippet: skip: <reason> -->' on the "
                    "line before its fence (see tests/test_doc_snippets.py)."
                ) from exc
    finally:
        if by_value is not None:
            by_value.unregister_pickle_by_value(module)
        sys.modules.pop(name, None)
    return len(blocks)


_FILES = doc_files()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Any:
    """Put the logging configuration back after each test: a page's snippet may configure
    it as a reader would (``docs/tools.md`` sets ``blooml.engine`` to DEBUG, which makes every
    later tick an observed one), and later tests must not inherit it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: lg.level
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, lg in logging.root.manager.loggerDict.items():
        if isinstance(lg, logging.Logger):
            lg.setLevel(levels.get(name, logging.NOTSET))


@pytest.mark.parametrize("path", _FILES, ids=[p.relative_to(ROOT).as_posix() for p in _FILES])
def test_doc_snippets(path: Path) -> None:
    run_snippets(path, ("run",))


_SKIPPED = [s for path in _FILES for s in snippets(path) if s.mode == "skip"]


@pytest.mark.parametrize("snippet", _SKIPPED, ids=[f"{s.path}:{s.line}" for s in _SKIPPED])
def test_skipped_snippet(snippet: Snippet) -> None:
    """Each skipped block shows in the test report (``-rs``) as skipped, with its reason."""
    pytest.skip(f"{snippet.path}:{snippet.line}: {snippet.reason}")


def test_every_page_is_covered_and_skips_say_why() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _FILES}
    assert {"README.md", "docs/bloom.md", "docs/lattices.md", "docs/testing.md"} <= names
    total = 0
    for path in _FILES:
        for s in snippets(path):
            total += 1
            assert s.mode != "skip" or len(s.reason) >= 10, f"{s.path}:{s.line}: say why"
    assert total >= 50


def test_marks_are_parsed_and_bad_marks_rejected(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n"
        "<!-- snippet: skip: needs a cluster we do not have -->\n```python\nraise SystemExit\n```\n"
        "<!-- snippet: spark -->\n```python\ny = 2\n```\n"
        "- item\n\n  ```python\n  if True:\n      z = 3\n  ```\n",
        encoding="utf-8",
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        got = [(s.line, s.mode, s.reason) for s in snippets(page)]
        assert got == [
            (2, "run", ""),
            (6, "skip", "needs a cluster we do not have"),
            (10, "spark", ""),
            (15, "run", ""),
        ]
        assert run_snippets(page, ("run",)) == 2
        page.write_text("<!-- snippet: skip -->\n```python\nx = 1\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"page.md:1: bad snippet mark"):
            snippets(page)
        page.write_text("text\n\n```python\nx = 1\n\n1 / 0\n```\n", encoding="utf-8")
        with pytest.raises(AssertionError, match=r"page.md:4: .*ZeroDivisionError") as info:
            run_snippets(page, ("run",))
        tb = info.value.__cause__.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert tb.tb_lineno == 6  # the line of `1 / 0` in the markdown file
    finally:
        ROOT = saved
