"""What a newcomer reads is true: files the docs name exist, quoted IR lines and error texts
match what the code prints, column names the docs reject are rejected when declared, and the
README says how long the tests take."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from blooml import BloomlError, Program, bloom, channel, scratch, table

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _exists(page: Path, ref: str) -> bool:
    if (ROOT / ref).exists() or (page.parent / ref).exists():
        return True
    return any(ROOT.glob(f"*/**/{ref}"))


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_files_the_docs_name_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = []
    for m in re.finditer(r"`((?:seeds/)?[\w./-]+\.(?:md|py|toml))`|\]\(([^)#\s]+)\)", text):
        ref = m.group(1) or m.group(2)
        if ref.startswith(("http://", "https://", "mailto:")):
            continue
        if not _exists(page, ref):
            missing.append(
                f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {ref}"
            )
    assert not missing, "the docs name files that are not in the repository:\n" + "\n".join(missing)


def test_examples_md_quotes_the_ir_lines_the_program_prints(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    sys.modules.pop("shortest_paths", None)
    import shortest_paths

    ir = str(shortest_paths.Paths.ir())
    quoted = re.findall(
        r"^\s+(\[shortest_paths\.py:\d+\] .*)$",
        (ROOT / "docs/examples.md").read_text(encoding="utf-8"),
        re.M,
    )
    assert len(quoted) >= 2
    for line in quoted:
        head = line.split(", ...")[0].rstrip(")")
        assert head in ir, f"docs/examples.md quotes {line!r}; the IR is:\n{ir}"


def test_bloom_md_names_the_error_an_unknown_column_raises() -> None:
    with pytest.raises(AttributeError) as info:

        class P(Program):
            t = table(["a"])
            u = table(["a"])

            @bloom
            def rules(self):
                self.u <= self.t.filter(self.t.b == 1)

    assert not isinstance(info.value, BloomlError)
    text = (ROOT / "docs/bloom.md").read_text(encoding="utf-8")
    assert f"`{info.value}`" in text
    row = next(line for line in text.splitlines() if line.startswith("| `ProgramError` |"))
    assert "unknown column" not in row


@pytest.mark.parametrize(
    ("declare", "bad"),
    [
        (lambda: table(["from", "to"]), "from"),
        (lambda: table(["k"], ["class"]), "class"),
        (lambda: scratch(["x", "lambda"]), "lambda"),
        (lambda: channel(["@import", "x"]), "@import"),
    ],
)
def test_keyword_column_names_are_rejected_when_declared(declare, bad) -> None:
    with pytest.raises(
        BloomlError, match=rf"must not be Python keywords.*got {re.escape(repr(bad))}"
    ):
        declare()


def test_soft_keywords_and_plain_names_are_still_columns() -> None:
    class P(Program):
        t = table(["match", "type"], ["case"])

    p = P()
    p.t.insert([(1, 2, 3)])
    p.tick()
    assert [tuple(r) for r in p.t] == [(1, 2, 3)]


def test_readme_says_how_long_the_tests_take_and_names_the_fast_target() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start") : readme.index("## A taste")]
    assert re.search(r"make test .*\d+ minutes?", quick), quick
    assert "make test-fast" in quick


def test_readme_does_not_say_pomoflow_runs_bloom_programs() -> None:
    intro = " ".join(
        (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start")[0].split()
    )
    assert "run in-process, incrementally, or on Spark" not in intro
    # what PomoFlow is: its Datalog runs on the Bloom^L engine, it runs no Bloom^L program
    assert "Datalog compiled onto the same incremental engine" in intro
    assert "PomoFlow runs Bloom" not in intro
