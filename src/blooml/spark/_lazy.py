"""Import pyspark only when a function that needs it is called.

``import blooml.spark`` works without pyspark installed; calling into Spark without it raises an
:class:`ImportError` that names the ``spark`` extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["require_pyspark"]

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


def require_rdd(feature: str, rdd: Any, what: str = "rdd") -> None:
    """Check that ``rdd`` is a pyspark RDD (after checking pyspark is installed)."""
    pyspark = require_pyspark(feature)
    if not isinstance(rdd, pyspark.RDD):
        raise TypeError(
            f"blooml.spark.{feature} expects a pyspark RDD as {what}, got "
            f"{type(rdd).__qualname__} ({rdd!r:.80})"
            + ("; use df.rdd for a DataFrame, or merge_column" if _is_dataframe(rdd) else "")
        )


def require_dataframe(feature: str, df: Any, what: str = "df") -> None:
    """Check that ``df`` is a pyspark DataFrame (after checking pyspark is installed)."""
    require_pyspark(feature)
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
