"""The Spark variant of tests/test_doc_snippets.py: the ```python blocks that need Spark (every
block of docs/spark.md, and blocks marked ``<!-- snippet: spark -->``) run with the suite's
shared SparkSession (a block's ``SparkSession.builder...getOrCreate()`` returns it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

_spec = importlib.util.spec_from_file_location(
    "doc_snippets_helpers", Path(__file__).resolve().parents[1] / "test_doc_snippets.py"
)
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _helpers  # its dataclass looks its module up there
_spec.loader.exec_module(_helpers)

_PAGES = [p for p in _helpers.doc_files() if any(s.mode == "spark" for s in _helpers.snippets(p))]


@pytest.mark.parametrize(
    "path", _PAGES, ids=[p.relative_to(_helpers.ROOT).as_posix() for p in _PAGES]
)
def test_spark_doc_snippets(spark: Any, path: Path) -> None:
    assert _helpers.run_snippets(path, ("run", "spark")) >= 1
