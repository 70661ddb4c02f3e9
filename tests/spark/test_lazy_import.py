"""``import blooml.spark`` works without pyspark; calling into Spark names the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_import_without_pyspark_and_clear_error_on_use() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyspark"] = None  # makes `import pyspark` raise ImportError
        import blooml.spark as bs
        from blooml.spark.functions import lfold, lmerge
        from blooml import lmax
        assert bs.to_spark(lmax(3)) == 3  # pure conversions need no Spark
        assert bs.from_spark((1, "x"), lmax) == lmax((1, "x"))
        for call in (
            lambda: bs.merge_by_key([]),
            lambda: bs.fold([], lmax),
            lambda: bs.merge_column(None, "k", "v", lmax),
            lambda: bs.spark_type(lmax),
            lambda: lmerge("v", lmax),
            lambda: lfold("v", lmax),
            lambda: bs.SparkEngine(None),
        ):
            try:
                call()
            except ImportError as e:
                assert "pip install 'blooml[spark]'" in str(e), e
            else:
                raise AssertionError("no ImportError")
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
