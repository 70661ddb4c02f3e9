"""Import pyspark only when a function that needs it is called.

``import blooml.spark`` works without pyspark installed; calling into Spark without it raises an
:class:`ImportError` that names the ``spark`` extra.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from types import ModuleType
from typing import Any

__all__ = ["check_worker_python", "require_pyspark", "use_this_python"]

_INSTALL_HINT = "install it with: pip install 'blooml[spark]' (Spark also needs Java 17 or later)"


def require_pyspark(feature: str) -> ModuleType:
    """Return the ``pyspark`` module, or raise an :class:`ImportError` naming the ``spark`` extra.

    Args:
        feature: what the caller was about to do (``"merge_by_key"``), quoted in the error.
    """
    try:
        return importlib.import_module("pyspark")
    except ImportError as exc:
        raise ImportError(
            f"blooml.spark.{feature} needs pyspark, which is not installed; {_INSTALL_HINT}"
        ) from exc


_INSTEAD = (
    "on Spark Connect use the DataFrame forms: df.groupBy(keys).agg(lmerge(col, Cls)) or "
    "lfold(col, Cls) (blooml.spark.functions), or merge_column(df, keys, col, Cls)"
)


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a session or a DataFrame) belongs to Spark Connect."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def no_rdds_on_connect(feature: str) -> Exception:
    """The error of an RDD-only function called with Spark Connect objects."""
    from blooml.errors import NotSupportedOnSpark

    return NotSupportedOnSpark(
        f"blooml.spark.{feature} on a Spark Connect session",
        f"Spark Connect has no RDDs, and {feature} works on RDDs; {_INSTEAD}",
    )


def require_rdd(feature: str, rdd: Any, what: str = "rdd") -> None:
    """Check that ``rdd`` is a pyspark RDD (after checking pyspark is installed).

    Raises:
        NotSupportedOnSpark: ``rdd`` is a Spark Connect DataFrame (Connect has no RDDs).
        TypeError: anything else that is not an RDD.
    """
    pyspark = require_pyspark(feature)
    if is_connect(rdd):
        raise no_rdds_on_connect(feature)
    if not isinstance(rdd, pyspark.RDD):
        raise TypeError(
            f"blooml.spark.{feature} expects a pyspark RDD as {what}, got "
            f"{type(rdd).__qualname__} ({rdd!r:.80})"
            + ("; use df.rdd for a DataFrame, or merge_column" if _is_dataframe(rdd) else "")
        )


def require_dataframe(feature: str, df: Any, what: str = "df", *, needs_rdd: bool = False) -> None:
    """Check that ``df`` is a pyspark DataFrame (after checking pyspark is installed);
    ``needs_rdd``: the caller uses ``df.rdd``, which Spark Connect DataFrames lack."""
    require_pyspark(feature)
    if needs_rdd and is_connect(df):
        raise no_rdds_on_connect(feature)
    if not _is_dataframe(df):
        raise TypeError(
            f"blooml.spark.{feature} expects a pyspark DataFrame as {what}, got "
            f"{type(df).__qualname__} ({df!r:.80})"
        )


def _is_dataframe(obj: Any) -> bool:
    try:
        from pyspark.sql import DataFrame
    except ImportError:  # pragma: no cover - callers checked pyspark first
        return False
    return isinstance(obj, DataFrame)


def use_this_python() -> None:
    """Make local Spark workers run this interpreter (so they import this blooml).

    PySpark starts its Python workers as ``$PYSPARK_PYTHON``, by default ``python3`` from
    ``PATH``, which in a venv is not the venv's Python: the workers then fail with
    ``ModuleNotFoundError: No module named 'blooml'``. Called on ``import blooml.spark``: sets
    ``PYSPARK_PYTHON`` to ``sys.executable`` unless it is set already, a SparkContext already
    runs, or the driver runs under ``spark-submit`` (which passes ``spark.pyspark.python``).
    """
    if "PYSPARK_PYTHON" in os.environ or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    active = getattr(getattr(context, "SparkContext", None), "_active_spark_context", None)
    if active is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable


_checked: dict[str, bool] = {}


def check_worker_python(feature: str, session_or_context: Any) -> None:
    """Fail at once, with the fix, when a local session's workers cannot import blooml.

    Only classic sessions with a ``local``/``local[n]`` master are checked (the workers run on
    this machine with this environment; ``local-cluster`` executors may get blooml shipped);
    the check runs the worker interpreter once per interpreter path.
    """
    if is_connect(session_or_context):
        return  # a Connect server starts its own workers
    try:
        sc = getattr(session_or_context, "sparkContext", session_or_context)
        master = sc.master
        exe = sc.pythonExec
    except Exception:  # a Connect session has no SparkContext: its server decides
        return
    local = str(master) == "local" or str(master).startswith("local[")  # not local-cluster
    if not local or exe == sys.executable:
        return
    ok = _checked.get(exe)
    if ok is None:
        try:
            ok = (
                subprocess.run(
                    [exe, "-c", "import blooml"], capture_output=True, timeout=60, check=False
                ).returncode
                == 0
            )
        except (OSError, subprocess.SubprocessError):
            ok = False
        _checked[exe] = ok
    if not ok:
        raise ImportError(
            f"blooml.spark.{feature}: this local Spark session's Python workers run {exe!r}, "
            "which cannot import blooml. Set PYSPARK_PYTHON to this interpreter "
            f"({sys.executable}) before creating the session (import blooml.spark first does "
            "it for you), or install blooml into that interpreter"
        )
