"""The Spark Connect job of the test session: run as a script (``python _connect_job.py WORK``)
by the session fixture ``connect_job`` (tests/spark/conftest.py), against a local Connect server
it starts (``remote("local[2]")``; one JVM cannot hold a classic and a Connect-server session
side by side, so this runs in a child process). Starting a Connect server costs ~20 s on an
idle machine and far more on a loaded one: every Connect test of the suite (test_connect.py,
test_differential.py) reads its part of the one ``RESULT`` line of JSON this prints (a part
that raised holds its traceback under ``"error"``)."""

import json
import sys
import traceback
from pathlib import Path

from _reach import BATCHES, STATS_TICKS, Best, Reach, Stats, write_batch
from _user_lattice import lsum
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import blooml.spark  # noqa: F401 - sets PYSPARK_PYTHON for the workers
from blooml import Program, bloom, table
from blooml.errors import LatticeValueError, NotSupportedOnSpark
from blooml.lattices import Lattice, lmax, lset
from blooml.lattices.crdts import lorset
from blooml.spark import (
    SparkEngine,
    Structured,
    _stream,
    fold_by_key,
    from_spark,
    merge_column,
    tick_stream,
    to_rdd,
    to_spark,
    worker_errors,
)
from blooml.spark.functions import lfold, lmerge


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
    """The Column functions, SparkEngine, and the RDD-only functions' errors."""
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
        [
            ("a", to_spark(lsum(1), lsum)),
            ("b", to_spark(lsum(13), lsum)),
            ("b", to_spark(lsum(2), lsum)),
        ],
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
            self.cheap <= self.link.map(lambda lk: (lk.src, lk.dst) if lk.w <= limit else None)

    links = [(1, 2, 1), (2, 3, 5), (3, 4, 2)]
    local = Cheap()
    local.link.insert(links)
    local.tick()
    cheap = SparkEngine(spark, path="dataframe").run(Cheap, {"link": links}).rows("cheap")
    out["python"] = [sorted(cheap), sorted(map(tuple, local.cheap))]
    return out


def maps(spark):
    """Map-valued merges (sorted runs per map key) on Connect, against the lattices' own
    fold and merge: {case: [equal, Spark's result, Python's]}."""
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
                item(e, n)
                for k, e, n in rows
                if k == r.k
                and e is not None
                and n is not None
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
    bags = [(rnd.choice("ab"), lbag({rnd.choice("pqr"): rnd.randrange(1, 4)})) for _ in range(80)]
    orset_type = "map<bigint, array<bigint>>"
    cases = {
        "lorset": (
            Structured(lorset),
            orsets,
            f"struct<adds: {orset_type}, removes: {orset_type}>",
        ),
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
    """stream_lfold on Connect: a MapOf(lmax) fold over two micro-batches, state = the
    merged maps. {key: [equal to the batch lfold, streamed, batch]}, the state's rows."""
    from blooml.spark import MapOf
    from blooml.spark.functions import stream_lfold

    folder = root / "state-in"
    schema = "k string, e string, ts bigint"
    for rows in ([("a", "x", 1), ("a", "y", 2), ("b", "x", None)], [("a", "x", 7)]):
        spark.createDataFrame(rows, schema).coalesce(1).write.mode("append").parquet(str(folder))
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
    query = (
        stream_lfold(stream, "k", ["e", "ts"], MapOf(lmax), alias="m")
        .writeStream.outputMode("update")
        .format("memory")
        .queryName("blooml_state")
        .option("checkpointLocation", str(root / "state-ckpt"))
        .start()
    )
    query.processAllAvailable()
    rows_total = query.lastProgress["stateOperators"][0]["numRowsTotal"]
    query.stop()
    got = {}
    for r in spark.table("blooml_state").collect():  # each row: the merged value so far
        v = from_spark(r.m, MapOf(lmax))
        got[r.k] = got[r.k].merge(v) if r.k in got else v
    batch = (
        spark.read.parquet(str(folder)).groupBy("k").agg(lfold(["e", "ts"], MapOf(lmax)).alias("m"))
    )
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
        SparkEngine(session, program=program),
        stream,
        "edge",
        checkpoint_location=str(ckpt),
        outputs=outputs,
        available_now=True,
    )


def ticks(spark):
    """SparkEngine.tick with small list inputs (rows layered on the state, group-bys
    updated by the groups they touch) and a delete: each tick's rows per collection."""
    engine = SparkEngine(spark, program=Stats)
    res = []
    for inputs in STATS_TICKS:
        result = engine.tick(inputs)
        res.append(
            {n: sorted(map(list, result.rows(n))) for n in ("link", "fan", "spend", "lo", "hi")}
        )
    return res


def stream(spark, root):
    """tick_stream: ticks 0 and 1; Spark's last commit removed (a stop between blooml's
    commit and Spark's); a new client continues with batch 1 again, 2 and 3; then a tick
    that fails. Returns (the part's result, the session still open)."""
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
        for p in out.iterdir()
        if p.name.startswith("tick=")
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
    res["failed_latest"] = list(_stream._latest(session, str(root / "bad-ckpt" / "blooml-state")))
    return res, session


def differential(spark):
    """The local engine against SparkEngine on Connect: the default run's random seeds and the
    fixed cases of _differential ({case: the first difference, or None})."""
    import random

    from _differential import FIXED, compare, draw_case

    out = {}
    for seed in DIFFERENTIAL_SEEDS:
        names, case = draw_case(random.Random(seed), 3)
        out[f"seed {seed}"] = compare(spark, names, case)
    for name, (names, case) in FIXED.items():
        out[name] = compare(spark, names, case)
    return out


#: the random cases (seed, three ticks each) the default run compares on Connect
DIFFERENTIAL_SEEDS = [27]


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
# before the stream part, which ends the first client's session (the rest of the job runs on
# the new session it returns)
try:
    out["differential"] = differential(spark)
except Exception:
    out["differential"] = {"error": traceback.format_exc()}
try:
    out["stream"], spark = stream(spark, root)
except Exception:
    out["stream"] = {"error": traceback.format_exc()}
print("RESULT " + json.dumps(out))
spark.stop()
