"""Every Python example in docs/dataflow.md runs as written (in order, as one session)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "dataflow.md"


def test_doc_examples_run_in_order() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 10
    namespace: dict[str, object] = {}
    exec("from blooml.dataflow import *", namespace)
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"docs/dataflow.md block {i}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"example {i} of docs/dataflow.md fails:\n{code}") from exc
