"""Spark Connect: the DataFrame functions, SparkEngine and tick_stream work on a Connect session
(a local Connect server in a child process: one JVM cannot hold a classic and a Connect-server
session side by side); the RDD-only functions fail at once naming what to use instead.

One child process serves every test of this module (a Connect server takes ~20 s to start): its
script runs each part and prints one ``RESULT`` line of JSON, one entry per part (or the part's
traceback under ``"error"``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _reach import BATCHES, STATS_TICKS, Stats, local

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark.sql.connect.session", reason="Spark Connect needs the spark extra")

HERE = Path(__file__).resolve().parent

_SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import traceback
    from pathlib import Path

    import blooml.spark
    from pyspark.sql import SparkSession, functions as F
    from blooml import Program, bloom, table
    from blooml.errors import LatticeValueError, NotSupportedOnSpark
    from blooml.lattices import Lattice, lmax, lset
    from blooml.lattices.crdts import lorset
    from blooml.spark import (
        SparkEngine, Structured, fold_by_key, from_spark, merge_column, tick_stream, to_rdd,
        to_spark, worker_errors,
    )
    from blooml.spark.functions import lfold, lmerge
    from blooml.spark import _stream
    from _reach import BATCHES, STATS_TICKS, Best, Reach, Stats, write_batch
    from _user_lattice import lsum


    class mymax(Lattice):  # a lattice class of this script: __main__.mymax
        __slots__ = ()

        def __init__(self, value=0):
            super().__init__(value)

        def merge(self, other):
            return self if self._v >= other._v else other


    class Closure(Program):
        edge = table(["a", "b"])
        path = table(["a", "b"])

        @bloom
        def rules(self):
            self.path <= self.edge
            self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
                lambda p, e: (p.a, e.b)
            )


    def functions(spark):
        \"\"\"The Column functions, SparkEngine, and the RDD-only functions' errors.\"\"\"
        out = {}
        df = spark.createDataFrame(
            [("a", 1, "x"), ("a", 2, "y"), ("b", None, None)], "k string, v bigint, e string"
        )
        agg = df.groupBy("k").agg(
            lfold("v", lset).alias("s"),
            lfold("v", lmax).alias("m"),
            lfold(["e", "v"], Structured(lorset)).alias("o"),
            lfold("v", lsum).alias("u"),
            F.count("*").alias("n"),
        )
        out["agg"] = {
            r.k: [
                repr(from_spark(r.s, lset)),
                repr(from_spark(r.m, lmax)),
                repr(from_spark(r.o, Structured(lorset))),
                repr(from_spark(r.u, lsum)),
                r.n,
            ]
            for r in agg.collect()
        }
        mine = df.groupBy("k").agg(lfold("v", mymax).alias("m"))
        mine = mine.union(mine).groupBy("k").agg(lmerge("m", mymax).alias("m"))
        out["main_class"] = {r.k: repr(from_spark(r.m, mymax)) for r in mine.collect()}
        merged = merge_column(agg, "k", "s", lset)
        out["merge_column"] = {r.k: repr(from_spark(r.s, lset)) for r in merged.collect()}
        cells = spark.createDataFrame(
            [("a", to_spark(lsum(1), lsum)), ("b", to_spark(lsum(13), lsum)),
             ("b", to_spark(lsum(2), lsum))],
            "k string, v binary",
        )
        try:
            with worker_errors():
                merge_column(cells, "k", "v", lsum).collect()
        except LatticeValueError as exc:
            out["worker_error"] = [type(exc).__name__, exc.key, exc.call]
        spark.addTag("mine")
        added = []
        add_tag = spark.addTag
        spark.addTag = lambda tag: (added.append(tag), add_tag(tag))[1]  # what the jobs carry
        try:
            result = SparkEngine(spark).run(Closure, {"edge": [(1, 2), (2, 3), (3, 4)]})
        finally:
            del spark.addTag
        out["tags"] = [added, sorted(spark.getTags())]
        spark.removeTag("mine")
        out["closure"] = sorted(result.rows("path"))
        out["touched"] = result.touched
        errors = []
        for call in (
            lambda: to_rdd(df, "k", "v", lmax),
            lambda: fold_by_key(df, lset),
            lambda: SparkEngine(spark, path="rdd"),
        ):
            try:
                call()
            except NotSupportedOnSpark as exc:
                errors.append(str(exc))
        out["errors"] = errors
        limit = 2

        class Cheap(Program):  # a closure and a conditional: runs as Arrow-batched Python
            link = table(["src", "dst", "w"])
            cheap = table(["src", "dst"])

            @bloom
            def rules(self):
                self.cheap <= self.link.map(
                    lambda lk: (lk.src, lk.dst) if lk.w <= limit else None
                )

        links = [(1, 2, 1), (2, 3, 5), (3, 4, 2)]
        local = Cheap()
        local.link.insert(links)
        local.tick()
        cheap = SparkEngine(spark, path="dataframe").run(Cheap, {"link": links}).rows("cheap")
        out["python"] = [sorted(cheap), sorted(map(tuple, local.cheap))]
        return out


    def maps(spark):
        \"\"\"Map-valued merges (sorted runs per map key) on Connect, against the lattices' own
        fold and merge: {case: [equal, Spark's result, Python's]}.\"\"\"
        import random

        from blooml.lattices import lbag, lmap
        from blooml.lattices.crdts import lgcounter, lvclock
        from blooml.spark import MapOf

        rnd = random.Random(21)
        rows = [
            (rnd.choice("ab"), rnd.choice(["p", "q", "r", None]), rnd.choice([None, *range(9)]))
            for _ in range(300)
        ]
        df = spark.createDataFrame(rows, "k string, e string, n bigint")
        folds = {
            "MapOf(lmax)": (MapOf(lmax), lmap, lambda e, n: (e, lmax(n))),
            "lorset": (Structured(lorset), lorset, lambda e, n: (e, n)),
            "lgcounter": (Structured(lgcounter), lgcounter, lambda e, n: (e, n)),
            "lvclock": (Structured(lvclock), lvclock, lambda e, n: {e: n}),
        }
        out = {}
        for name, (spec, cls, item) in folds.items():
            got = df.groupBy("k").agg(lfold(["e", "n"], spec).alias("v")).collect()
            for r in got:
                want = cls.fold(
                    item(e, n) for k, e, n in rows
                    if k == r.k and e is not None and n is not None
                    and (n > 0 or cls not in (lgcounter, lvclock))
                )
                got_v = from_spark(r.v, spec)
                out[f"fold {name} {r.k}"] = [got_v == want, repr(got_v), repr(want)]
        orsets = []
        for _ in range(80):
            v = lorset()
            for _ in range(rnd.randrange(4)):
                e = rnd.randrange(6)
                v = v.add(e, rnd.randrange(4)) if rnd.random() < 0.7 else v.remove(e)
            orsets.append((rnd.choice("ab"), v))
        inner = [lmap({rnd.choice("uv"): lmax(rnd.randrange(9))}) for _ in range(80)]
        nested = [(rnd.choice("ab"), lmap({rnd.choice("xy"): m})) for m in inner]
        bags = [(rnd.choice("ab"), lbag({rnd.choice("pqr"): rnd.randrange(1, 4)}))
                for _ in range(80)]
        orset_type = "map<bigint, array<bigint>>"
        cases = {
            "lorset": (Structured(lorset), orsets,
                       f"struct<adds: {orset_type}, removes: {orset_type}>"),
            "MapOf(MapOf(lmax))": (MapOf(MapOf(lmax)), nested, "map<string, map<string, bigint>>"),
            "lbag": (lbag, bags, "map<string, bigint>"),
        }
        for name, (spec, pairs, vtype) in cases.items():
            cells = spark.createDataFrame(
                [(k, to_spark(v, spec)) for k, v in pairs], f"k string, v {vtype}"
            )
            for r in merge_column(cells, "k", "v", spec).collect():
                want = None
                for k, v in pairs:
                    if k == r.k:
                        want = v if want is None else want.merge(v)
                got_v = from_spark(r.v, spec)
                out[f"merge {name} {r.k}"] = [got_v == want, repr(got_v), repr(want)]
        return out


    def state(spark, root):
        \"\"\"stream_lfold on Connect: a MapOf(lmax) fold over two micro-batches, state = the
        merged maps. {key: [equal to the batch lfold, streamed, batch]}, the state's rows.\"\"\"
        from blooml.spark import MapOf
        from blooml.spark.functions import stream_lfold

        folder = root / "state-in"
        schema = "k string, e string, ts bigint"
        for rows in ([("a", "x", 1), ("a", "y", 2), ("b", "x", None)], [("a", "x", 7)]):
            spark.createDataFrame(rows, schema).coalesce(1).write.mode("append").parquet(
                str(folder))
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
            str(folder))
        query = (
            stream_lfold(stream, "k", ["e", "ts"], MapOf(lmax), alias="m")
            .writeStream.outputMode("update").format("memory").queryName("blooml_state")
            .option("checkpointLocation", str(root / "state-ckpt")).start()
        )
        query.processAllAvailable()
        rows_total = query.lastProgress["stateOperators"][0]["numRowsTotal"]
        query.stop()
        got = {}
        for r in spark.table("blooml_state").collect():  # each row: the merged value so far
            v = from_spark(r.m, MapOf(lmax))
            got[r.k] = got[r.k].merge(v) if r.k in got else v
        batch = spark.read.parquet(str(folder)).groupBy("k").agg(
            lfold(["e", "ts"], MapOf(lmax)).alias("m"))
        want = {r.k: from_spark(r.m, MapOf(lmax)) for r in batch.collect()}
        out = {k: [got.get(k) == v, repr(got.get(k)), repr(v)] for k, v in want.items()}
        out["rows"] = rows_total
        return out


    def start(session, program, folder, ckpt, outputs):
        stream = (
            session.readStream.schema("a bigint, b bigint")
            .option("maxFilesPerTrigger", 1)
            .json(str(folder))
        )
        return tick_stream(
            SparkEngine(session, program=program), stream, "edge",
            checkpoint_location=str(ckpt), outputs=outputs, available_now=True,
        )


    def ticks(spark):
        \"\"\"SparkEngine.tick with small list inputs (rows layered on the state, group-bys
        updated by the groups they touch) and a delete: each tick's rows per collection.\"\"\"
        engine = SparkEngine(spark, program=Stats)
        res = []
        for inputs in STATS_TICKS:
            result = engine.tick(inputs)
            res.append({
                n: sorted(map(list, result.rows(n))) for n in ("link", "fan", "spend", "lo", "hi")
            })
        return res


    def stream(spark, root):
        \"\"\"tick_stream: ticks 0 and 1; Spark's last commit removed (a stop between blooml's
        commit and Spark's); a new client continues with batch 1 again, 2 and 3; then a tick
        that fails. Returns (the part's result, the session still open).\"\"\"
        folder, ckpt, out = root / "in", root / "ckpt", root / "out"
        folder.mkdir()
        for i in (0, 1):
            write_batch(folder, i, BATCHES[i])
        query = start(spark, Reach, folder, ckpt, {"path": str(out)})
        query.awaitTermination(300)
        res = {"first": repr(query.exception())}
        for i in (2, 3):
            write_batch(folder, i, BATCHES[i])
        (ckpt / "commits" / "1").unlink()
        (ckpt / "commits" / ".1.crc").unlink(missing_ok=True)
        # a new client: a new server session, a new foreachBatch process, a new engine
        session = spark.newSession()
        session.conf.set("spark.sql.shuffle.partitions", "2")
        spark.client.release_session()  # the first client goes away (stop() would also
        spark.client.close()  # stop the local server)
        query = start(session, Reach, folder, ckpt, {"path": str(out)})
        query.awaitTermination(300)
        res["restarted"] = repr(query.exception())
        res["latest"] = list(_stream._latest(session, str(ckpt / "blooml-state")))
        res["kept"] = sorted(p.name for p in (ckpt / "blooml-state").iterdir())
        res["commits"] = sorted(p.name for p in (ckpt / "blooml-state" / "commits").iterdir())
        res["ticks"] = sorted(p.name for p in out.iterdir() if p.name.startswith("tick="))
        res["path"] = {
            p.name: sorted(map(list, session.read.parquet(str(p)).collect()))
            for p in out.iterdir() if p.name.startswith("tick=")
        }
        state = ckpt / "blooml-state"
        back = state / "pending" / "slot=1" / "insert" / "back"  # tick 3's, for tick 4
        res["back"] = sorted(map(list, session.read.parquet(str(back)).collect()))
        meta = session.read.text(str(state / "meta" / "slot=1")).collect()[0].value
        res["top"] = json.loads(meta)["lattices"]["top"]
        # a tick that fails: the error reaches this client
        bad = root / "bad"
        bad.mkdir()
        write_batch(bad, 0, [(0, 1), (1, 2)])
        write_batch(bad, 1, [(0, 5)])  # a second successor of 0: a key conflict in best
        query = start(session, Best, bad, root / "bad-ckpt", {})
        try:
            query.awaitTermination(300)
            res["failed"] = None
        except Exception as exc:
            res["failed"] = [type(exc).__name__, str(exc)]
        res["failed_exception"] = str(query.exception())
        res["failed_latest"] = list(
            _stream._latest(session, str(root / "bad-ckpt" / "blooml-state")))
        return res, session


    root = Path(sys.argv[1])
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    out = {"connect": type(spark).__module__}
    try:
        out["functions"] = functions(spark)
    except Exception:
        out["functions"] = {"error": traceback.format_exc()}
    try:
        out["maps"] = maps(spark)
    except Exception:
        out["maps"] = {"error": traceback.format_exc()}
    try:
        out["state"] = state(spark, root)
    except Exception:
        out["state"] = {"error": traceback.format_exc()}
    try:
        out["ticks"] = ticks(spark)
    except Exception:
        out["ticks"] = {"error": traceback.format_exc()}
    try:
        out["stream"], spark = stream(spark, root)
    except Exception:
        out["stream"] = {"error": traceback.format_exc()}
    print("RESULT " + json.dumps(out))
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def connect_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the script against a local Connect server; its RESULT."""
    root = tmp_path_factory.mktemp("connect")
    script = root / "connect_job.py"
    script.write_text(_SCRIPT)
    work = root / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYTHONPATH"] = str(HERE)  # the server's Python imports _reach and _user_lattice
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.run(
        [sys.executable, str(script), str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(lines[0][len("RESULT ") :])
    assert out["connect"].startswith("pyspark.sql.connect")
    return out


def test_functions_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    out = connect_job["functions"]
    assert "error" not in out, out.get("error")
    assert out["agg"] == {
        "a": ["lset({1, 2})", "lmax(2)", "lorset({'x': {1}, 'y': {2}})", "lsum(2)", 2],
        "b": ["lset()", "lmax()", "lorset()", "lsum(0)", 1],
    }
    assert out["merge_column"] == {"a": "lset({1, 2})", "b": "lset()"}
    # a lattice class defined in the client's script (__main__) runs on the server's workers
    assert out["main_class"] == {"a": "mymax(2)", "b": "mymax(0)"}
    assert out["worker_error"] == [
        "LatticeValueError",
        "'b'",
        "merge_column(df, ['k'], 'v', lsum)",
    ]
    assert len(out["errors"]) == 3
    for msg in out["errors"]:
        assert "Spark Connect" in msg
    assert "lmerge" in out["errors"][0] and "lfold" in out["errors"][1]
    # every job of the run is tagged with program and tick, and each step with its round and
    # rule; the client's own tags are what is left afterwards
    added, after = out["tags"]
    assert added[0] == "blooml:Closure:tick=run"
    assert "blooml:Closure:tick=run:stratum=0:round=2:rule=1" in added
    assert "blooml:Closure:tick=run:stratum=0:round=1:merge into path (rules 0; 1)" in added
    assert after == ["mine"]
    # SparkEngine on Connect: the program as DataFrame plans
    assert out["closure"] == [[1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4]]
    assert out["touched"][-1][-1] == 0
    # a rule body that does not lower runs as Arrow-batched Python on Connect too
    assert out["python"][0] == out["python"][1] == [[1, 2], [3, 4]]


def test_map_valued_merges_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """MapOf, lbag and CRDT folds and merges (runs of sorted map keys) give on Connect what the
    lattices' own fold and merge give."""
    out = connect_job["maps"]
    assert "error" not in out, out.get("error")
    assert len(out) == 14  # 4 folds and 3 merges, two keys each
    for case, (equal, got, want) in out.items():
        assert equal, (case, got, want)


def test_stream_lfold_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """stream_lfold runs on Connect (applyInPandasWithState on the server): its state is one
    row per group and its results equal the batch lfold's."""
    out = dict(connect_job["state"])
    assert "error" not in out, out.get("error")
    assert out.pop("rows") == 2
    assert out == {
        "a": [True, "lmap({'x': lmax(7), 'y': lmax(2)})", "lmap({'x': lmax(7), 'y': lmax(2)})"],
        "b": [True, "lmap()", "lmap()"],
    }


def test_tick_stream_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """Micro-batches are ticks on Connect too, and a new client continues them after a stop
    between blooml's commit and Spark's: no lost and no doubled tick."""
    out = connect_job["stream"]
    assert "error" not in out, out.get("error")
    assert out["first"] == "None" and out["restarted"] == "None"
    assert out["latest"] == [3, 3]
    assert out["kept"] == ["commits", "meta", "pending", "tables"]
    # Connect has no file system API: the commit log keeps every entry (a file per tick)
    assert out["commits"] == ["tick=0", "tick=1", "tick=2", "tick=3"]
    assert out["ticks"] == ["tick=0", "tick=1", "tick=2", "tick=3"]
    for i in range(4):
        expected = sorted(map(list, local(BATCHES[: i + 1]).path))
        assert out["path"][f"tick={i}"] == expected, i
    # queued by tick 3 for the next tick: every edge reversed (back <+ edge.map(...))
    assert out["back"] == sorted([b, a] for rows in BATCHES for a, b in rows)
    assert out["top"] == {"cell": max(b for rows in BATCHES for _, b in rows)}


def test_small_ticks_on_a_local_connect_server(connect_job: dict[str, Any]) -> None:
    """Small list inputs take the driver-side path on Connect too (inline tables with
    parameters, filters by value) and give the local engine's rows, a delete included."""
    out = connect_job["ticks"]
    assert "error" not in out, out
    p = Stats()
    for i, inputs in enumerate(STATS_TICKS):
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        p.tick()
        for name in ("link", "fan", "spend", "lo", "hi"):
            assert out[i][name] == sorted(map(list, getattr(p, name))), (i, name)


def test_a_failed_tick_on_connect_reaches_the_client(connect_job: dict[str, Any]) -> None:
    out = connect_job["stream"]
    assert "error" not in out, out.get("error")
    assert out["failed"] is not None, "awaitTermination did not raise"
    name, msg = out["failed"]
    assert name == "StreamingQueryException"
    for text in (msg, out["failed_exception"]):
        assert "blooml.errors.KeyConstraintError: key conflict in 'best' for key 0" in text
        assert "tick 1 of Best (micro-batch 1, input 'edge'); not committed" in text
    assert out["failed_latest"] == [0, 0]
