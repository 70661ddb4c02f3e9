"""How a Spark tick's state is materialized and kept between ticks: checkpoints (local, with
Spark's size estimate reset when it overflows), state files in the session's checkpoint
directory (Parquet sorted by a lookup column, small row groups and pages, a Bloom filter per
column, a sorted copy per other lookup column) and their deletion, a collection saved in parts
merged back, and row counts that cost no job of their own. What is kept and merged each tick
is :mod:`blooml.spark._dfstate`; lookups of stored rows are :mod:`blooml.spark._dflookup`.

This module knows Spark's APIs and nothing of the IR or the DSL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from blooml.spark._dflookup import _atomic
from blooml.spark._dfplan import _CELL, _cell_merge_sql

__all__ = ["checkpoint_dir", "delete_files", "keep_state", "merge_saved"]


def _checkpoint(df: Any) -> Any:
    """``df.localCheckpoint()``, on classic sessions with Spark's size estimate of the result
    reset when it has outgrown a long.

    A checkpoint keeps the size estimate of the plan it came from, and Spark estimates a join's
    size as the product of its inputs'. A rule joining two recursive collections feeds those
    products back round after round: the estimate's digits double every few rounds until
    planning a query takes longer than running it (and then minutes). Past 2**63 an estimate
    only says "large", so the checkpointed rows are wrapped in a new frame whose estimate is
    Spark's default for an RDD it knows nothing about (``spark.sql.defaultSizeInBytes``). The
    rows are not copied or recomputed. Spark Connect keeps the estimate (no JVM access)."""
    out = df.localCheckpoint()
    jdf = getattr(out, "_jdf", None)
    if jdf is None:  # Spark Connect
        return out
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "LogicalRDD":  # pragma: no cover - Spark changed
            return out
        try:
            if int(plan.stats().sizeInBytes()).bit_length() <= 63:
                return out
        except ValueError:  # too many digits for Python's int(): reset it
            pass
        fresh = out.sparkSession._jsparkSession.internalCreateDataFrame(
            plan.rdd(), jdf.schema(), False
        )
        return type(out)(fresh, out.sparkSession)
    except Exception:  # pragma: no cover - an internal API moved: keep Spark's estimate
        return out


def checkpoint_dir(spark: Any) -> str | None:
    """The session's reliable checkpoint directory: ``sc.setCheckpointDir(...)`` on classic
    sessions, ``spark.checkpoint.dir`` on Spark Connect; None when unset."""
    if getattr(spark, "sparkContext", None) is not None and not _is_connect(spark):
        found = spark.sparkContext._jsc.sc().getCheckpointDir()
        return str(found.get()) if found.isDefined() else None
    try:
        return spark.conf.get("spark.checkpoint.dir", None) or None
    except Exception:  # pragma: no cover - a conf service that refuses
        return None


def _is_connect(spark: Any) -> bool:
    from blooml.spark._lazy import is_connect

    return is_connect(spark)


#: the row group size of state files (bytes): small groups, so that a filter by a few
#: values of the sorted first column reads a few thousand rows, not the whole file; a large
#: state gets larger groups, at most :data:`STATE_ROW_GROUPS` of them (file footers stay small)
STATE_ROW_GROUP = 32 << 10
STATE_ROW_GROUPS = 4096
#: the most rows in a Parquet page of a state file: Spark's Parquet reader skips the pages of
#: a row group whose range (the column index parquet-mr writes) cannot hold a pushed filter's
#: values, and counts only the rows of the pages it reads, so a lookup of k scattered keys of
#: the sorted first column reads ~k pages of this many rows, not k row groups of thousands
#: (parquet-mr's default, 20,000 rows or 1 MB a page, made a page a whole row group)
STATE_PAGE_ROWS = 200


def keep_state(
    df: Any,
    files: list[str] | None = None,
    *,
    sort: bool = False,
    rows: int | None = None,
    by: Iterable[str] = (),
) -> Any:
    """``df`` materialized for use after this tick.

    With a reliable checkpoint directory (:func:`checkpoint_dir`) the rows are written there as
    Parquet and read back: they survive the loss of an executor, and Spark estimates the
    frame's size from its files, so a join of a user's frame with it plans as it would with a
    table. The path is appended to ``files`` (the caller deletes it when it is not needed any
    more). ``sort``: the rows are sorted by their first column (when it is atomic) and
    written in row groups of :data:`STATE_ROW_GROUP` bytes (more for a state of many
    ``rows``: see :data:`STATE_ROW_GROUPS`), so that a filter by a few of its values reads
    only the row groups whose range holds them, and in them only the pages (of at most
    :data:`STATE_PAGE_ROWS` rows) whose range holds them; every column gets a Bloom filter per row
    group, so that a filter by a few values of another column skips the groups that lack
    them. ``by`` (with ``sort``): other columns (``c1``, ...) the rows are looked up by
    (:func:`~blooml.spark._dflookup.lookup_columns`): for each atomic one, a copy of the rows
    (read from the files just written) is written sorted by it, in the same layout, its path
    appended to ``files`` too, and :class:`~blooml.spark._dflookup.Lookups` by that column
    filter the copy (a page per value, where the Bloom filters leave every row group holding
    one). Without a checkpoint
    directory (or for a column Parquet cannot hold, such as ``void``): a
    ``localCheckpoint`` (:func:`_checkpoint`)."""
    from pyspark.sql.types import NullType

    from blooml.spark._dflookup import with_sorted_copies

    spark = df.sparkSession
    root = checkpoint_dir(spark)
    if root is None or any(isinstance(f.dataType, NullType) for f in df.schema.fields):
        return _checkpoint(df)
    out = _write_state(
        df, root, files, sort=sort, rows=rows, col=df.columns[0] if df.columns else None
    )
    if not sort:
        return out
    copies = {}
    for col in dict.fromkeys(by):
        if col in df.columns[1:] and _atomic(df.select(col).schema):
            copies[col] = _write_state(out, root, files, sort=True, rows=rows, col=col)
    return with_sorted_copies(out, copies)


def _write_state(
    df: Any, root: str, files: list[str] | None, *, sort: bool, rows: int | None, col: str | None
) -> Any:
    """``df`` written as Parquet under ``root`` (sorted by ``col`` when ``sort`` and it is
    atomic) in the layout :func:`keep_state` describes, and read back."""
    import uuid

    spark = df.sparkSession
    path = f"{root.rstrip('/')}/blooml-state-{uuid.uuid4().hex}"
    writer = df
    if sort and col is not None and _atomic(df.select(col).schema):
        writer = df.sort(col)
    block = max(STATE_ROW_GROUP, (rows or 0) * 8 * len(df.columns) // STATE_ROW_GROUPS)
    # the rows of a group as 8 bytes a value: pages of STATE_PAGE_ROWS are encoded (and
    # counted in the group's size) as they fill, so without a row limit a group would hold
    # 2x the rows, and a lookup that a Bloom filter (not a sorted range) prunes read 2x more
    group_rows = max(100, block // (8 * max(1, len(df.columns))))
    # a Bloom filter per column and row group, so that a lookup of a few values (at most
    # spark.sql.parquet.pushdown.inFilterThreshold, 10) on any column skips the row groups
    # that cannot hold them, not only on the sorted first column; sized for the rows of a
    # group (Parquet's default, 1 MB a filter, made files 100x larger)
    bloom = max(1024, block // (4 * max(1, len(df.columns))))
    (
        writer.write.option("parquet.block.size", block)
        .option("parquet.page.row.count.limit", STATE_PAGE_ROWS)
        .option("parquet.block.row.count.limit", group_rows)
        .option("parquet.bloom.filter.enabled", "true")
        .option("parquet.bloom.filter.max.bytes", bloom)
        .parquet(path)
    )
    if files is not None:
        files.append(path)
    return spark.read.parquet(path)


def delete_files(spark: Any, paths: list[str]) -> None:
    """Delete state files written by :func:`keep_state` (classic sessions, through the Hadoop
    FileSystem of each path; Spark Connect has no file system API: they stay, as Spark's own
    reliable checkpoints stay unless ``spark.cleaner.referenceTracking.cleanCheckpoints``)."""
    if _is_connect(spark):
        return
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for p in paths:
        try:
            path = jvm.org.apache.hadoop.fs.Path(p)
            path.getFileSystem(conf).delete(path, True)
        except Exception:  # pragma: no cover - a store that refuses deletes: the files stay
            continue


def merge_saved(df: Any, n_keys: int, lattice_cols: Mapping[int, type]) -> Any:
    """The rows of a collection saved as several parts (a full version, then the rows each
    tick changed) merged into its state: set semantics, or per key the lattice columns merged
    by their SQL aggregate and the other values (equal in every part) kept. Columns ``c0..``."""
    from pyspark.sql import functions as F

    cols = [f"c{i}" for i in range(len(df.columns))]
    df = df.toDF(*cols)
    if n_keys >= len(cols):
        return df.distinct()
    aggs = []
    for i, c in enumerate(cols[n_keys:], start=n_keys):
        cls = lattice_cols.get(i)
        sql = _cell_merge_sql(cls, c) if cls in _CELL else f"first({c}, true)"
        aggs.append(F.expr(sql).alias(c))
    return df.groupBy(*cols[:n_keys]).agg(*aggs).select(*cols)


def _checkpoint_observed(df: Any, *metrics: str) -> tuple[Any, tuple[int, ...]]:
    """``_checkpoint(df)`` and the integer SQL aggregates ``metrics`` over its rows.

    On classic sessions the aggregates are observed (``DataFrame.observe``) by the checkpoint's
    own job: the checkpoint runs as a Dataset action, whose observed metrics Spark reports
    when it ends, so counting the rows costs no job of its own (a separate aggregate is two
    under adaptive execution). On Spark Connect: one aggregate query over the checkpoint."""
    from pyspark.sql import functions as F

    if getattr(df, "_jdf", None) is None:  # Spark Connect
        out = _checkpoint(df)
        row = out.select(*[F.expr(m).alias(f"m{i}") for i, m in enumerate(metrics)]).collect()[0]
        return out, tuple(int(row[i] or 0) for i in range(len(metrics)))
    from pyspark.sql import Observation

    obs = Observation()
    out = _checkpoint(df.observe(obs, *[F.expr(m).alias(f"m{i}") for i, m in enumerate(metrics)]))
    got = obs.get
    return out, tuple(int(got[f"m{i}"] or 0) for i in range(len(metrics)))


def _count(df: Any) -> int:
    """``df``'s row count in one job: on classic sessions its rows counted in the JVM (no
    shuffle: ``DataFrame.count()`` aggregates through one, a job of its own under adaptive
    execution), on Spark Connect ``count()``."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return int(df.count())
    return int(jdf.queryExecution().toRdd().count())
