"""SparkEngine's RDD path (``path="rdd"``) and the default path's choice: a tick on Spark gives
exactly the local engine's state (shortest paths, transitive closure), and what cannot run on
Spark is rejected naming the rule."""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.

from __future__ import annotations

import importlib.util
import logging
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import (
    Program,
    accum,
    avg,
    bloom,
    bool_and,
    bool_or,
    count,
    lbool,
    lmap,
    lmax,
    lset,
    max_,
    min_,
    scratch,
    sum_,
    table,
)
from blooml.errors import KeyConstraintError, NotSupportedOnSpark
from blooml.spark import SparkEngine

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")
PythonException = pytest.importorskip("pyspark.errors").PythonException

ROOT = Path(__file__).resolve().parents[2]

# Spark workers cannot import test modules or example scripts: ship their functions by value
# (a user's program would be shipped with --py-files instead, see docs/spark.md).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _example(name: str) -> ModuleType:
    mod_name = f"blooml_spark_example_{name}"
    if mod_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(mod_name, ROOT / "examples" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
        cloudpickle.register_pickle_by_value(module)
    return sys.modules[mod_name]


class Closure(Program):
    """Transitive closure (two occurrences of the recursive collection in one rule)."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    nodes = lset()

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.path, self.path.b == self.path.a).map(
            lambda p, q: (p.a, q.b)
        )
        self.nodes <= self.edge.map(lambda e: e.a)
    # fmt: on


class Widest(Program):
    """Widest (max-bottleneck) paths: an lmax column and lattice morphisms on the driver."""

    link = table(["src", "dst", "w"])
    width = table(["src", "dst"], ["w"])
    best = lmax()
    wide = lmax()
    some = scratch(["src"])

    # fmt: off
    @bloom
    def rules(self):
        self.width <= self.link.map(lambda lk: (lk.src, lk.dst, lmax(lk.w)))
        self.width <= self.link.join(self.width, self.link.dst == self.width.src).map(
            lambda lk, w: (lk.src, w.dst, w.w.min_of(lk.w))
        )
        self.best <= self.link.map(lambda lk: lk.w)
        self.wide <= self.best.min_of(5)
        self.some <= self.link.filter(lambda lk: lk.w > 3).map(lambda lk: lk.src)
    # fmt: on


class Unreached(Program):
    """Non-monotone operators between strata: notin (with and without predicates or a test
    function) and group, over the transitive closure computed in an earlier stratum."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    node = table(["n"])
    unreached = table(["a", "b"])
    isolated = table(["n"])
    far = table(["a", "b"])
    flagged = table(["a", "b", "pos", "big"])
    fanout = table(["a"], ["reach", "dst", "total", "low", "high", "mean", "all_", "alls", "anys"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.node <= self.edge.flat_map(lambda e: [(e.a,), (e.b,)])
        self.unreached <= self.node.join(self.node).map(lambda x, y: (x.n, y.n)).notin(self.path)
        self.isolated <= self.node.notin(self.path, self.node.n == self.path.a)
        self.far <= self.path.notin(self.edge, lambda p, e: p.a == e.a and p.b == e.b)
        self.flagged <= self.path.map(lambda p: (p.a, p.b, p.b > 0, p.b > 3))
        self.fanout <= self.flagged.group(
            ["a"], count(), count("b"), sum_("b"), min_("b"), max_("b"), avg("b"), accum("b"),
            bool_and("pos"), bool_or("big"),
        )
    # fmt: on


QUORUM = 5


class QuorumLog(Program):
    """Quorum counting over a vote log, and a KVS's versioned merge (the parts of the quorum
    and KVS examples that stay within one tick: their sends and reads are other ticks')."""

    vote = table(["voter", "ballot"])
    kvput = table(["reqid"], ["key", "version", "value"])
    votes = lset()
    cnt = lmax()
    done = lbool()
    store = lmap()

    # fmt: off
    @bloom
    def rules(self):
        self.votes <= self.vote.map(lambda v: v.voter)
        self.cnt <= self.votes.size()
        self.done <= self.cnt.gt_eq(QUORUM)
        self.store <= self.kvput.map(lambda p: (p.key, lmax((p.version, p.value))))
    # fmt: on


def _local(program: type[Program], inputs: dict[str, list[tuple[Any, ...]]]) -> Program:
    p = program()
    for name, rows in inputs.items():
        getattr(p, name).insert(rows)
    p.tick()
    return p


def _same_state(p: Program, result: Any) -> None:
    ir = type(p).ir()
    for name in ir.collections:
        local = sorted(map(tuple, getattr(p, name)), key=repr)
        assert sorted(result.rows(name), key=repr) == local, name
    for name in ir.lattices:
        assert result[name] == getattr(p, name).value, name


def _graph(n: int, m: int, seed: int) -> list[tuple[int, int, int]]:
    rnd = random.Random(seed)
    return [(rnd.randrange(n), rnd.randrange(n), rnd.randint(1, 9)) for _ in range(m)]


def test_shortest_paths_example_equals_local_engine(spark: Any) -> None:
    sp = _example("shortest_paths")
    inputs = {"link": sp.ROADS}
    result = SparkEngine(spark, path="rdd", checkpoint_every=2).run(sp.Paths, inputs)
    _same_state(_local(sp.Paths, inputs), result)
    best = {(r.src, r.dst): r.c for r in result["best"].collect()}
    nodes = {s for s, _, _ in sp.ROADS}
    assert best == {(s, d): c for s in nodes for d, c in sp.dijkstra(sp.ROADS, s).items()}
    assert result.rounds[0] >= 3


@settings(max_examples=3, deadline=None)
@given(st.integers(2, 6), st.integers(0, 10), st.integers(0, 10**6))
def test_shortest_paths_random_graphs(spark: Any, n: int, m: int, seed: int) -> None:
    sp = _example("shortest_paths")
    inputs = {"link": _graph(n, m, seed)}
    engine = SparkEngine(spark, path="rdd", checkpoint_every=3, num_partitions=3)
    _same_state(_local(sp.Paths, inputs), engine.run(sp.Paths, inputs))


@settings(max_examples=3, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10))
def test_transitive_closure_equals_local_engine(spark: Any, edges: list[tuple[int, int]]) -> None:
    inputs = {"edge": edges}
    _same_state(_local(Closure, inputs), SparkEngine(spark, path="rdd").run(Closure, inputs))


@settings(max_examples=2, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=10))
def test_notin_and_group_between_strata(spark: Any, edges: list[tuple[int, int]]) -> None:
    inputs = {"edge": edges}
    result = SparkEngine(spark, path="rdd").run(Unreached, inputs)
    _same_state(_local(Unreached, inputs), result)
    assert len(result.rounds) == len(Unreached.ir().strata) >= 2


@settings(max_examples=3, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2)), max_size=30),
    st.lists(
        st.tuples(st.integers(0, 99), st.sampled_from("xyz"), st.integers(0, 3), st.text("ab")),
        max_size=20,
        unique_by=lambda t: t[0],
    ),
)
def test_quorum_and_kvs_merge_equal_local_engine(
    spark: Any, votes: list[tuple[int, int]], puts: list[tuple[int, str, int, str]]
) -> None:
    inputs = {"vote": votes, "kvput": puts}
    result = SparkEngine(spark, path="rdd").run(QuorumLog, inputs)
    _same_state(_local(QuorumLog, inputs), result)
    assert result["done"] == lbool(len({v for v, _ in votes}) >= QUORUM)


def test_inputs_as_dataframe_and_rdd(spark: Any) -> None:
    links = [(0, 1, 4), (1, 2, 7), (0, 2, 2), (2, 3, 5)]
    local = _local(Widest, {"link": links})
    df = spark.createDataFrame(links, "src long, dst long, w long")
    _same_state(local, SparkEngine(spark, path="rdd").run(Widest, {"link": df}))
    result = SparkEngine(spark, path="rdd").run(
        Widest, {"link": spark.sparkContext.parallelize(links, 2)}
    )
    _same_state(local, result)
    assert result["wide"] == lmax(5) and result["best"] == lmax(7)
    widths = {(r.src, r.dst): r.w for r in result["width"].collect()}
    assert widths[(0, 3)] == 4  # min(4, 7, 5) beats min(2, 5); stored natively


def test_outputs_write_to_parquet(spark: Any, tmp_path: Path) -> None:
    result = SparkEngine(spark, path="rdd").run(Widest, {"link": [(0, 1, 4), (1, 2, 7)]})
    out = str(tmp_path / "width.parquet")
    result["width"].write.parquet(out)
    back = {(r.src, r.dst): r.w for r in spark.read.parquet(out).collect()}
    assert back == {(s, d): w.reveal() for s, d, w in result.rows("width")}
    assert back == {(0, 1): 4, (1, 2): 7, (0, 2): 4}


def test_empty_inputs(spark: Any) -> None:
    result = SparkEngine(spark, path="rdd").run(Closure, {})
    assert result.rows("path") == [] and result["nodes"] == lset()
    assert result["path"].count() == 0


def test_key_conflict_is_reported(spark: Any) -> None:
    class Conflict(Program):
        src = table(["k", "v"])
        dst = table(["k"], ["v"])

        @bloom
        def rules(self):
            self.dst <= self.src

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    inputs = {"src": [(1, "a"), (1, "b")]}
    with pytest.raises(KeyConstraintError):
        _local(Conflict, inputs)
    with pytest.raises(PythonException, match="KeyConstraintError"):
        SparkEngine(spark, path="rdd").run(Conflict, inputs)


def test_not_supported_names_the_rule(spark: Any) -> None:
    class Chosen(Program):
        a = table(["x", "y"])
        c = table(["x", "y"])

        @bloom
        def rules(self):
            self.c <= self.a.choose(["x"])

    class Deferred(Program):
        a = table(["x"])
        b = table(["x"])

        # fmt: off
        @bloom
        def rules(self):
            self.b <+ self.a
        # fmt: on

    with pytest.raises(NotSupportedOnSpark, match=r"rule 0 \(test_engine.py:\d+.*choose"):
        SparkEngine(spark, path="rdd").run(Chosen, {})
    with pytest.raises(NotSupportedOnSpark, match=r"<\+ takes effect at a later tick"):
        SparkEngine(spark, path="rdd").check(Deferred)
    with pytest.raises(KeyError, match="not a collection"):
        SparkEngine(spark, path="rdd").run(Closure, {"nope": []})
    with pytest.raises(TypeError, match="expects a Bloom"):
        SparkEngine(spark, path="rdd").run(object(), {})
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        SparkEngine(spark, checkpoint_every=0)


def test_the_default_path_is_dataframe_plans_and_falls_back_once_logged(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """On a classic session a program that lowers runs as DataFrame plans with no log line; one
    that does not (``accum``) runs on the RDD path with ONE warning naming the rule and why."""
    from blooml.spark._engine import DataFrameResult

    inputs = {"edge": [(0, 1), (1, 2)]}
    with caplog.at_level(logging.WARNING, logger="blooml.spark"):
        result = SparkEngine(spark).run(Closure, inputs)
    assert isinstance(result, DataFrameResult)
    assert not [r for r in caplog.records if r.name == "blooml.spark"]
    _same_state(_local(Closure, inputs), result)

    class Accum(Program):
        edge = table(["a", "b"])
        succ = table(["a"], ["bs"])

        @bloom
        def rules(self):
            self.succ <= self.edge.group(["a"], accum("b"))

    with caplog.at_level(logging.WARNING, logger="blooml.spark"):
        result = SparkEngine(spark).run(Accum, inputs)
    assert not isinstance(result, DataFrameResult)
    (rec,) = [r for r in caplog.records if r.name == "blooml.spark"]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert ".Accum runs on the RDD path (Python per row)" in msg
    assert "rule 0 (test_engine.py:" in msg and "the aggregate accum" in msg
    assert "path='rdd'" in msg
    assert sorted(result.rows("succ")) == [(0, frozenset({1})), (1, frozenset({2}))]
