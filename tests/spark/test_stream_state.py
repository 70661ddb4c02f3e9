"""stream_lfold / stream_lmerge: streaming lattice merges whose state is the merged value.

Each test streams Parquet files (one per micro-batch, ``maxFilesPerTrigger=1``) through the
function in update mode into ``foreachBatch``, and compares the last row emitted per key with
the batch ``lfold``/``lmerge`` and the local lattices.
"""

from __future__ import annotations

import datetime
import decimal
import os
from typing import Any

import pytest

from blooml.errors import CodecError, ColumnTypeError, LatticeValueError, NotSupportedOnSpark
from blooml.lattices import lbag, lmap, lmax, lset
from blooml.lattices.crdts import lgcounter, lorset, lvclock
from blooml.spark import MapOf, Pickled, Structured, from_spark, merge_column, to_spark
from blooml.spark.functions import lfold, lmerge, stream_lfold, stream_lmerge

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

_ITEMS = "k string, e string, ts bigint"
#: three micro-batches: repeated and growing entries, NULLs, a key met in one batch only,
#: a bigint beyond float precision, a count that the counters skip (<= 0), a repeated item
_BATCHES = [
    [("a", "x", 1), ("a", "x", 5), ("b", "y", 2**60 + 3), ("a", None, 9), ("a", "w", None)],
    [("a", "x", 3), ("a", "z", 4), ("b", None, None), ("b", "y", 7)],
    [("c", "x", -1), ("a", "z", 8), ("a", "z", 8)],
]


def _write(spark: Any, path: str, rows: list[tuple[Any, ...]], schema: str) -> None:
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("append").parquet(path)


def _run(out: Any, checkpoint: str) -> tuple[dict[Any, Any], dict[str, Any]]:
    """Run ``out`` to the end of its input: the last row emitted per key, the state's metrics."""
    rows: list[Any] = []
    query = (
        out.writeStream.outputMode("update")
        .foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
        progress = query.lastProgress["stateOperators"][0]
    finally:
        query.stop()
    return {r[0]: r[-1] for r in rows}, progress


def _stream(spark: Any, path: str, schema: str) -> Any:
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(path)


def test_stream_lfold_map_equals_batch_and_local_and_restarts_with_its_state(
    spark: Any, tmp_path: Any
) -> None:
    """A fold into MapOf(lmax) over three micro-batches: the state holds one value per group
    (3 rows, not the 12 rows seen); the merged maps equal the batch lfold and lmap.fold; a
    query restarted from the checkpoint on a fourth file merges into the kept state."""
    src, ckpt = str(tmp_path / "in"), str(tmp_path / "ckpt")
    for rows in _BATCHES:
        _write(spark, src, rows, _ITEMS)
    spec = MapOf(lmax)

    def query() -> Any:
        return stream_lfold(_stream(spark, src, _ITEMS), "k", ["e", "ts"], spec, alias="m")

    out = query()
    assert out.isStreaming
    assert out.schema.simpleString() == "struct<k:string,m:map<string,bigint>>"
    got, progress = _run(out, ckpt)
    assert progress["numRowsTotal"] == 3  # one state row per group, for the 12 rows seen
    batch = spark.read.parquet(src).groupBy("k").agg(lfold(["e", "ts"], spec).alias("m"))
    want = {r.k: from_spark(r.m, spec) for r in batch.collect()}
    assert {k: from_spark(v, spec) for k, v in got.items()} == want
    rows = [r for b in _BATCHES for r in b]
    assert want["a"] == lmap.fold(
        (e, lmax(t)) for k, e, t in rows if k == "a" and e is not None and t is not None
    )

    _write(spark, src, [("a", "q", 1), ("d", "x", 2)], _ITEMS)
    again, progress = _run(query(), ckpt)
    assert set(again) == {"a", "d"}  # update mode: only the groups the new batch touched
    assert from_spark(again["a"], spec) == want["a"].merge(lmap({"q": lmax(1)}))
    assert progress["numRowsTotal"] == 4


@pytest.mark.parametrize(
    ("spec", "local"),
    [
        pytest.param(
            Structured(lgcounter),
            lambda e, t: lgcounter({e: t}) if t > 0 else lgcounter(),
            id="gcounter",
            marks=pytest.mark.slow,  # as vclock's, which CI runs
        ),
        pytest.param(
            Structured(lvclock), lambda e, t: lvclock({e: t}) if t > 0 else lvclock(), id="vclock"
        ),
        pytest.param(
            Structured(lorset),
            lambda e, t: lorset.from_item((e, t)),
            id="orset",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_stream_lfold_crdts_equal_batch_and_local(
    spark: Any, tmp_path: Any, spec: Any, local: Any
) -> None:
    """Folds into Structured CRDTs over micro-batches equal the batch lfold and the local
    merge of each item's value (counters skip counts <= 0, as the SQL fold does)."""
    src = str(tmp_path / "in")
    for rows in _BATCHES:
        _write(spark, src, rows, _ITEMS)
    out = stream_lfold(_stream(spark, src, _ITEMS), ["k"], ["e", "ts"], spec, alias="v")
    got, _ = _run(out, str(tmp_path / "ckpt"))
    batch = spark.read.parquet(src).groupBy("k").agg(lfold(["e", "ts"], spec).alias("v"))
    want = {r.k: from_spark(r.v, spec) for r in batch.collect()}
    assert {k: from_spark(v, spec) for k, v in got.items()} == want
    cls = spec.lattice
    for key, value in want.items():
        parts = [
            local(e, t)
            for k, e, t in (r for b in _BATCHES for r in b)
            if k == key and e is not None and t is not None
        ]
        expected = cls()
        for p in parts:
            expected = expected.merge(p)
        assert value == expected


def test_stream_lmerge_map_cells_equals_batch_merge(spark: Any, tmp_path: Any) -> None:
    """stream_lmerge of nested map cells (MapOf(MapOf(lmax))) keyed by two columns, and
    merge_column of bag cells on the stream, NULL and empty cells among them: the state holds
    one value per group, and the results equal merge_column and lmerge in batch."""
    schema = "k string, j bigint, m map<string, map<string, bigint>>, b map<string, bigint>"
    spec, bag = MapOf(MapOf(lmax)), lbag
    values = [
        [("a", 1, {"x": {"u": 1}}, {"p": 1}), ("a", 1, None, None), ("b", 2, {}, {})],
        [("a", 1, {"x": {"u": 4, "v": 2}, "y": {}}, {"p": 3, "q": 1}), ("b", 2, None, None)],
        [("a", 1, {"x": {"u": 2}}, {"p": 2})],
    ]
    src = str(tmp_path / "in")
    for rows in values:
        _write(spark, src, rows, schema)
    got, progress = _run(
        stream_lmerge(_stream(spark, src, schema), ["k", "j"], "m", spec),
        str(tmp_path / "ckpt-m"),
    )
    assert progress["numRowsTotal"] == 2
    batch = merge_column(spark.read.parquet(src), ["k", "j"], "m", spec)
    assert {k: from_spark(v, spec) for k, v in got.items()} == {
        r.k: from_spark(r.m, spec) for r in batch.collect()
    }
    assert from_spark(got["a"], spec) == from_spark({"x": {"u": 4, "v": 2}, "y": {}}, spec)

    # merge_column of map cells on a stream takes the same bounded path
    streamed = merge_column(_stream(spark, src, schema), "k", "b", bag)
    assert streamed.columns == ["k", "b"]
    got_b, progress = _run(streamed, str(tmp_path / "ckpt-b"))
    assert progress["numRowsTotal"] == 2
    batch_b = spark.read.parquet(src).groupBy("k").agg(lmerge("b", bag).alias("b"))
    assert {k: from_spark(v, bag) for k, v in got_b.items()} == {
        r.k: from_spark(r.b, bag) for r in batch_b.collect()
    }
    assert from_spark(got_b["b"], bag) == lbag()


def test_stream_lfold_of_unhashable_items(spark: Any, tmp_path: Any) -> None:
    """Items holding arrays (a MapOf(lset) fold of (key, array) items) are not deduplicated
    (they cannot be hashed) but still fold as the batch lfold does."""
    schema = "k string, e string, a array<bigint>"
    src = str(tmp_path / "in")
    _write(
        spark,
        src,
        [("a", "x", [1, 2]), ("a", "x", [2, 3]), ("a", "y", []), ("b", "x", None)],
        schema,
    )
    out = stream_lfold(_stream(spark, src, schema), "k", ["e", "a"], MapOf(lset), alias="m")
    got, _ = _run(out, str(tmp_path / "ckpt"))
    assert {k: from_spark(v, MapOf(lset)) for k, v in got.items()} == {
        "a": lmap({"x": lset({1, 2, 3}), "y": lset()}),
        "b": lmap(),
    }


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        (MapOf(lmax), lmap({"x": lmax(datetime.datetime(2026, 1, 2, 3, 4, 5, 6))})),
        (MapOf(lmax), lmap({(1, "a"): lmax(decimal.Decimal("12.50"))})),  # a struct map key
        (lset, lset({datetime.date(2026, 1, 2), datetime.date(2025, 1, 1)})),
        (lmax, lmax(datetime.timedelta(days=2, microseconds=3))),
        (lmax, lmax(2**63 - 1)),
        (Structured(lorset), lorset({("a", 1): {b"t"}}).remove(("a", 1))),
        (MapOf(MapOf(lmax)), lmap({"x": lmap({"u": lmax(1.5)})})),
    ],
)
def test_state_bytes_round_trip_cells(spec: Any, value: Any) -> None:
    """The state's bytes (a cell as msgpack, never pickle) give back the value: decimals,
    dates, timestamps, intervals, structs as map keys; garbage is our CodecError."""
    from blooml.spark._formats import column_format
    from blooml.spark._statefold import pack_state, unpack_state

    fmt = column_format(spec)
    assert fmt.from_cell(unpack_state(pack_state(fmt.to_cell(value)))) == value
    with pytest.raises(CodecError, match="not a blooml state value"):
        unpack_state(b"\xc1")
    with pytest.raises(CodecError, match="cannot keep"):
        pack_state({"x": object()})


def test_pickled_specs_are_refused_on_a_stream(spark: Any, tmp_path: Any) -> None:
    """A spec stored pickled (a user lattice) cannot keep streaming state (never pickle): our
    error at the call names the native alternatives; on a batch DataFrame it runs."""
    from _user_lattice import lsum

    src = str(tmp_path / "in")
    _write(spark, src, _BATCHES[0], _ITEMS)
    with pytest.raises(NotSupportedOnSpark, match=r"stream_lfold of lsum.*never pickle"):
        stream_lfold(_stream(spark, src, _ITEMS), "k", "ts", lsum)
    with pytest.raises(NotSupportedOnSpark, match=r"stream_lmerge of Pickled"):
        stream_lmerge(
            _stream(spark, src, "k string, u binary"), "k", "u", Pickled(lorset), alias="o"
        )
    out = stream_lfold(spark.read.parquet(src), "k", "ts", lsum, alias="u")
    assert {r.k: from_spark(r.u, lsum) for r in out.collect()} == {
        "a": lsum(9),
        "b": lsum(2**60 + 3),
    }


def test_on_a_batch_dataframe_they_return_the_batch_plan(spark: Any) -> None:
    """On a batch DataFrame: the batch lfold and merge_column's plan, no Python worker."""
    df = spark.createDataFrame([r for b in _BATCHES for r in b], _ITEMS)
    out = stream_lfold(df, "k", ["e", "ts"], MapOf(lmax))
    assert out.columns == ["k", "lfold(e, ts, MapOf(lmax))"]
    plan = str(out._jdf.queryExecution().optimizedPlan())
    assert "Pandas" not in plan and "Python" not in plan, plan
    cells = spark.createDataFrame(
        [("a", to_spark(lorset({"x": {1}}), Structured(lorset)))],
        "k string, o struct<adds: map<string, array<bigint>>, removes: map<string, array<bigint>>>",
    )
    merged = stream_lmerge(cells, "k", "o", Structured(lorset), alias="out")
    assert merged.columns == ["k", "out"]
    assert from_spark(merged.collect()[0].out, Structured(lorset)) == lorset({"x": {1}})


def test_bad_inputs_raise_our_errors_before_any_job(spark: Any, tmp_path: Any) -> None:
    """Bad inputs fail at the call, naming the offending value."""
    src = str(tmp_path / "in")
    _write(spark, src, _BATCHES[0], _ITEMS)
    df = _stream(spark, src, _ITEMS)
    with pytest.raises(TypeError, match="expects a pyspark DataFrame"):
        stream_lfold([("a", 1)], "k", "e", lmax)
    with pytest.raises(ValueError, match="no column 'nope'"):
        stream_lfold(df, "k", ["nope", "ts"], MapOf(lmax))
    with pytest.raises(ValueError, match="'k' is both a key column and merged"):
        stream_lfold(df, "k", ["k", "ts"], MapOf(lmax))
    with pytest.raises(ValueError, match="alias 'k' is also a key column"):
        stream_lfold(df, "k", ["e", "ts"], MapOf(lmax), alias="k")
    with pytest.raises(LatticeValueError, match="give two columns"):
        stream_lfold(df, "k", "e", MapOf(lmax))
    with pytest.raises(TypeError, match="column spec"):
        stream_lfold(df, "k", "e", dict)
    with pytest.raises(ColumnTypeError, match="'ts'"):
        stream_lmerge(df, "k", "ts", MapOf(lmax))


def test_worker_errors_name_the_call_and_the_key(spark: Any, tmp_path: Any) -> None:
    """A value the lattice rejects on a worker comes back as our error naming key and call."""
    from blooml.lattices import lpset
    from blooml.spark import worker_errors

    src = str(tmp_path / "in")
    _write(spark, src, [("a", "x", 1), ("b", "x", -5)], _ITEMS)
    out = stream_lfold(_stream(spark, src, _ITEMS), "k", "ts", lpset, alias="s")
    with pytest.raises(LatticeValueError, match=r"stream_lfold.*for key 'b'"), worker_errors():
        _run(out, str(tmp_path / "ckpt"))
    assert os.path.isdir(str(tmp_path / "ckpt"))
