"""examples/spark_stream.py: shortest paths as micro-batches, restarted halfway, to Parquet."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def test_stream_example_matches_dijkstra(spark: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        spec = importlib.util.spec_from_file_location(
            "blooml_example_spark_stream", ROOT / "examples" / "spark_stream.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = module.main(spark, str(tmp_path))
    finally:
        sys.path.remove(str(ROOT / "examples"))
    assert out["equal"] is True
    # costs only fall from tick to tick (lmin), and the shortcut of tick 3 lowers some
    before, after = out["tick 2"], out["tick 3"]
    assert all(after[k] <= v for k, v in before.items())
    assert any(after[k] < v for k, v in before.items())
