"""Lattices on Apache Spark: distributed folds and merges, lattice-valued DataFrame columns.

``import blooml.spark`` does not import pyspark; each function that needs it raises an
:class:`ImportError` naming the ``spark`` extra (``pip install 'blooml[spark]'``) when pyspark
is missing. It sets ``PYSPARK_PYTHON`` to the running interpreter when unset (and not under
``spark-submit``), so local Spark workers run this venv's Python and import this blooml. See
``docs/spark.md``.

RDDs of lattice values:

* :func:`merge_by_key` — ``(key, lattice)`` → one merged lattice per key (``aggregateByKey``
  with a builder as ⊥).
* :func:`fold_by_key` — ``(key, item)`` → one lattice per key, folding ``Cls.from_item``.
* :func:`fold` — an RDD of items → one lattice value (the seed's collection-to-lattice fold).

Lattice aggregates as Column functions (:mod:`blooml.spark.functions`): ``lmerge(col, Cls)``
and ``lfold(col, Cls)`` inside ``df.groupBy(...).agg(...)``, on classic and Connect sessions.

DataFrames with a lattice column (column specs: a lattice class, :class:`MapOf`,
:class:`Pickled`):

* :func:`merge_column` — merge per key; builtins lower to Spark SQL aggregates.
* :func:`to_spark` / :func:`from_spark` — one value ↔ one cell; :func:`spark_type` — the
  column's Spark type; :func:`to_dataframe` / :func:`to_rdd` — pair RDD ↔ DataFrame.

Bloom^L programs: :class:`SparkEngine` evaluates a program's tick from its IR (monotone strata,
semi-naive, checkpointed) as DataFrame plans (``path="dataframe"``, the default on Connect) or
on RDDs; ``engine.tick(inputs)`` runs tick after tick, and :func:`tick_stream` runs one tick
per Structured Streaming micro-batch, its state recovered after a restart. Constructs it
cannot run raise ``NotSupportedOnSpark``.
"""

from blooml.spark._columns import (
    from_spark,
    merge_column,
    spark_type,
    to_dataframe,
    to_rdd,
    to_spark,
)
from blooml.spark._engine import SparkEngine, SparkResult
from blooml.spark._errors import from_worker_error, worker_errors
from blooml.spark._formats import ColumnFormat, MapOf, Pickled, Structured, column_format
from blooml.spark._lazy import use_this_python as _use_this_python
from blooml.spark._rdd import fold, fold_by_key, merge_by_key
from blooml.spark._stream import tick_stream

_use_this_python()

__all__ = [
    "ColumnFormat",
    "MapOf",
    "Pickled",
    "SparkEngine",
    "SparkResult",
    "Structured",
    "column_format",
    "fold",
    "fold_by_key",
    "from_spark",
    "from_worker_error",
    "merge_by_key",
    "merge_column",
    "spark_type",
    "tick_stream",
    "to_dataframe",
    "to_rdd",
    "to_spark",
    "worker_errors",
]
