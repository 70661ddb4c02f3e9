"""SparkEngine(path="dataframe"): rule bodies that do not lower to SQL run as Arrow-batched
Python inside the DataFrame plan (mapInArrow), equal to the local engine."""

# Bloom rules are statements written as comparisons (``a <= b``): B015 is moot.

from __future__ import annotations

import sys
from typing import Any

import pytest
from _user_lattice import lsum
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import _local, _same_state

from blooml import Program, bloom, count, lmin, lset, scratch, sum_, table
from blooml.errors import BloomlError, KeyConstraintError, NotSupportedOnSpark, ProgramError
from blooml.spark import SparkEngine
from blooml.spark._dfengine import DataFramePlan, _Run

pytestmark = pytest.mark.spark
cloudpickle = pytest.importorskip("pyspark.cloudpickle", reason="Spark tests need pyspark")

# Spark workers cannot import test modules: ship their functions by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

LIMIT = 3


def _cost(w: int) -> int:
    """A helper function: a call the rule compiler cannot turn into an expression."""
    return w * 10 if w % 2 else w


class Python(Program):
    """Map, filter and flat_map whose functions do not lower: a closure, a helper call, a
    conditional; over a scan, an equi-join and a join without equalities."""

    link = table(["src", "dst", "w"])
    near = table(["src", "dst"])
    cost = table(["src", "dst"], ["c"])
    tag = table(["src", "kind"])
    hop = table(["a", "b"])
    ends = table(["n"])
    pair = table(["a", "b"])
    best = table(["src"], ["c"])
    big = scratch(["src", "dst", "w"])

    # fmt: off
    @bloom
    def rules(self):
        self.near <= self.link.filter(lambda lk: lk.w <= LIMIT).map(lambda lk: (lk.src, lk.dst))
        self.cost <= self.link.map(lambda lk: (lk.src, lk.dst, _cost(lk.w)))
        self.tag <= self.link.map(lambda lk: (lk.src, "odd" if lk.w % 2 else "even"))
        self.big <= self.link.filter(lambda lk: _cost(lk.w) > 20)
        self.ends <= self.link.flat_map(lambda lk: [lk.src, lk.dst] if lk.w else None)
        self.hop <= self.link.join(self.link, self.link.dst == self.link.src).map(
            lambda x, y: (x.src, y.dst) if x.w != y.w else None
        )
        self.pair <= self.ends.join(self.ends).filter(lambda x, y: x.n < y.n)
        self.best <= self.link.map(lambda lk: (lk.src, lmin(_cost(lk.w))))
    # fmt: on


def _df(spark: Any, **kw: Any) -> SparkEngine:
    return SparkEngine(spark, path="dataframe", **kw)


LINKS = [(0, 1, 3), (1, 2, 4), (0, 2, 1), (2, 3, 5), (3, 0, 0), (1, 3, 3)]


def test_python_rule_bodies_equal_local_engine(spark: Any) -> None:
    plan = DataFramePlan(Python.ir())
    assert sum(plan.python_nodes.values()) >= 8  # the untranslatable bodies run as Python
    inputs = {"link": LINKS}
    result = _df(spark).run(Python, inputs)
    _same_state(_local(Python, inputs), result)
    assert result.plan.lattice_cols["best"] == {1: lmin}  # found when the function ran


@settings(max_examples=3, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 6)),
        max_size=12,
        unique_by=lambda t: t[:2],
    )
)
def test_python_rule_bodies_random_inputs(spark: Any, links: list[tuple[int, ...]]) -> None:
    inputs = {"link": links}
    _same_state(_local(Python, inputs), _df(spark).run(Python, inputs))


class Reach(Program):
    """Recursion through a Python function (semi-naive: deltas through mapInArrow)."""

    edge = table(["a", "b"])
    path = table(["a", "b"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge.map(lambda e: (e.a, e.b) if e.a != e.b else None)
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b) if _cost(1) else None
        )
    # fmt: on


def test_recursion_through_python_is_semi_naive(spark: Any) -> None:
    inputs = {"edge": [(i, i + 1) for i in range(6)] + [(2, 2)]}
    result = _df(spark).run(Reach, inputs)
    _same_state(_local(Reach, inputs), result)
    (touched,) = [t for t in result.touched if len(t) > 1]
    assert touched[-1] == 0 and sum(touched) == len(result.rows("path"))


def test_python_runs_in_arrow_batches_inside_the_plan(spark: Any) -> None:
    """The physical plan of a Python body is MapInArrow over the lowered scan: no RDD."""
    plan = DataFramePlan(Python.ir())
    run = _Run(spark, plan, checkpoint_every=8)
    run.state["link"] = spark.createDataFrame(LINKS, "c0 bigint, c1 bigint, c2 bigint")
    rules = {r.head: r for r in Python.ir().rules}
    for head in ("big", "cost"):
        df = run.eval(rules[head].body, None, [0])
        text = df._jdf.queryExecution().executedPlan().toString()
        assert "MapInArrow" in text, text
        assert "BatchEvalPython" not in text and "ArrowEvalPython" not in text, text


class Words(Program):
    """A lattice variable folded from a user lattice (tick after tick) and from tuple items."""

    word = table(["w"])
    longest = lsum()
    pairs = lset()

    # fmt: off
    @bloom
    def rules(self):
        self.longest <= self.word.map(lambda x: len(x.w))
        self.pairs <= self.word.map(lambda x: (x.w[:1], len(x.w)))
    # fmt: on


def test_user_lattice_folded_over_ticks(spark: Any) -> None:
    ticks = [["a", "bbb"], ["cc"], ["dddd", "e"]]
    local = Words()
    engine = _df(spark, program=Words)
    for words in ticks:
        local.word.insert([(w,) for w in words])
        local.tick()
        result = engine.tick({"word": [(w,) for w in words]})
        assert result["longest"] == local.longest.value
        assert result["pairs"] == local.pairs.value
    assert local.longest.value == lsum(4)


class Cheapest(Program):
    link = table(["src", "dst", "w"])
    best = table(["src"], ["c"])

    # fmt: off
    @bloom
    def rules(self):
        self.best <= self.link.map(lambda lk: (lk.src, lmin(_cost(lk.w))))
    # fmt: on


def test_lattice_column_found_at_run_time_carries_over_ticks(spark: Any) -> None:
    ticks: list[dict[str, Any]] = [
        {"link": [(0, 1, 3), (1, 2, 4)]},
        {"link": [(0, 2, 2)], "best": [(1, lmin(1))]},  # merged as lmin, not a key conflict
        {"best": [(0, lmin(7))]},
    ]
    local = Cheapest()
    engine = _df(spark, program=Cheapest)
    for inputs in ticks:
        for name, rows in inputs.items():
            getattr(local, name).insert(rows)
        local.tick()
        result = engine.tick(inputs)
    _same_state(local, result)
    assert sorted(result.rows("best")) == [(0, lmin(2)), (1, lmin(1))]


class Sets(Program):
    link = table(["src", "dst", "w"])
    reach = table(["src"], ["dsts"])

    # fmt: off
    @bloom
    def rules(self):
        self.reach <= self.link.map(lambda lk: (lk.src, lset([lk.dst]) if lk.w else lset()))
    # fmt: on


class Failing(Program):
    link = table(["src", "dst", "w"])
    ratio = table(["src", "dst", "r"])

    # fmt: off
    @bloom
    def rules(self):
        self.ratio <= self.link.map(lambda lk: (lk.src, lk.dst, _cost(10) // lk.w))
    # fmt: on


class Narrow(Program):
    link = table(["src", "dst", "w"])
    out = table(["src", "dst"])

    # fmt: off
    @bloom
    def rules(self):
        self.out <= self.link.map(lambda lk: (lk.src, lk.dst, lk.w) if lk.w else lk.src)
    # fmt: on


def test_errors_name_the_rule(spark: Any) -> None:
    # a lattice column of a class Spark SQL does not merge: refused, naming the rule
    with pytest.raises(NotSupportedOnSpark, match=r"rule 0 .*lset values in column 'dsts'"):
        _df(spark).run(Sets, {"link": LINKS})
    # a user function raising on a worker
    with pytest.raises(BloomlError, match=r"rule 0 .*ZeroDivisionError"):
        _df(spark).run(Failing, {"link": [(0, 1, 2), (1, 2, 0)]})
    # rows of the wrong width, as the local engine says it
    with pytest.raises(ProgramError, match=r"rule 0 .*'out' has 2 columns"):
        _df(spark).run(Narrow, {"link": [(0, 1, 2)]})


class Far(Program):
    """notin with a test function (with and without column equalities), over a recursive
    closure computed in an earlier stratum."""

    edge = table(["a", "b"])
    path = table(["a", "b"])
    node = table(["n"])
    far = table(["a", "b"])
    lonely = table(["n"])

    # fmt: off
    @bloom
    def rules(self):
        self.path <= self.edge
        self.path <= self.path.join(self.edge, self.path.b == self.edge.a).map(
            lambda p, e: (p.a, e.b)
        )
        self.node <= self.edge.flat_map(lambda e: [(e.a,), (e.b,)])
        self.far <= self.path.notin(self.edge, lambda p, e: p.a == e.a and p.b == e.b)
        self.lonely <= self.node.notin(
            self.path, self.node.n == self.path.a, lambda n, p: _cost(p.b) > 2
        )
    # fmt: on


@settings(max_examples=2, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=8))
def test_notin_with_a_test_function(spark: Any, edges: list[tuple[int, int]]) -> None:
    inputs = {"edge": edges}
    _same_state(_local(Far, inputs), _df(spark).run(Far, inputs))


class Grouped(Program):
    """argmin/argmax (Spark SQL), choose (grouped Arrow), reduce (one Arrow group); group and
    argmax over the rows of a Python function."""

    link = table(["src", "dst", "w"])
    cheapest = table(["src", "dst", "w"])
    widest = table(["src", "dst", "w"])
    one = table(["src"], ["dst", "w"])
    total = table(["n"], ["w"])
    per = table(["src"], ["n", "c"])
    top = table(["src", "c"])

    # fmt: off
    @bloom
    def rules(self):
        self.cheapest <= self.link.argmin(["src"], "w")
        self.widest <= self.link.argmax([], "w")
        self.one <= self.link.choose(["src"], seed=3)
        self.total <= self.link.reduce(
            (0, 0), lambda memo, lk: (memo[0] + 1, memo[1] + _cost(lk.w))
        )
        # over the rows of a Python function
        self.per <= self.link.map(lambda lk: (lk.src, _cost(lk.w))).group([0], count(), sum_(1))
        self.top <= self.link.map(lambda lk: (lk.src, _cost(lk.w))).argmax([], 1)
    # fmt: on


@settings(max_examples=2, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 6)), max_size=10))
def test_argmin_argmax_choose_reduce(spark: Any, links: list[tuple[int, ...]]) -> None:
    inputs = {"link": links}
    _same_state(_local(Grouped, inputs), _df(spark).run(Grouped, inputs))


class Unlowered(Program):
    link = table(["src", "dst", "w"])
    seen = table(["src"])
    when = table(["src", "t"])

    # fmt: off
    @bloom
    def rules(self):
        self.seen <= self.link.map(lambda lk: lk.src if _cost(lk.w) else None)
        self.when <= self.link.map(lambda lk: (lk.src, self.tick_count))
    # fmt: on


def test_what_has_no_translation_still_fails_before_any_job(spark: Any) -> None:
    with pytest.raises(NotSupportedOnSpark, match=r"rule 1 .*read program state"):
        _df(spark).run(Unlowered, {"link": "not even rows"})


def test_declared_schemas_type_the_rows_in_one_pass(spark: Any) -> None:
    inputs = {"link": LINKS}
    schemas = {"cost": "src bigint, dst bigint, c double", "tag": "src bigint, kind string"}
    result = _df(spark, schemas=schemas).run(Python, inputs)
    _same_state(_local(Python, inputs), result)
    assert result["cost"].schema.simpleString() == "struct<src:bigint,dst:bigint,c:double>"
    # a declaration the function's rows do not fit, naming the rule and the column
    with pytest.raises(ProgramError, match=r"rule 2 .*column 'kind' of 'tag' is declared bigint"):
        _df(spark, schemas={"tag": "src bigint, kind bigint"}).run(Python, inputs)
    # a lattice column the plan cannot know of in a declared head
    with pytest.raises(NotSupportedOnSpark, match=r"rule 7 .*lmin values in column 'c' of 'best'"):
        _df(spark, schemas={"best": "src bigint, c bigint"}).run(Python, inputs)
    with pytest.raises(ProgramError, match="one field per column"):
        _df(spark, schemas={"tag": "src bigint"}).run(Python, inputs)
    with pytest.raises(ProgramError, match="'nope' is not a collection"):
        _df(spark, schemas={"nope": "x bigint"}).run(Python, inputs)


def test_lattice_columns_found_at_run_time_survive_a_restore(spark: Any) -> None:
    # a new engine continuing from a saved tick (as tick_stream does after a restart) gets the
    # column classes found at run time, so an input cell merges as lmin, not as a key conflict
    first = _df(spark, program=Cheapest)
    first.tick({"link": [(0, 1, 3), (1, 2, 4)]})
    assert first.lattice_columns() == {"best": {1: lmin}}
    tick, frames, lattices, pending = first.state()
    blind = _df(spark, program=Cheapest)  # without them: stored lmin cells are plain values
    blind.restore(tick, frames, lattices, pending)
    with pytest.raises(KeyConstraintError):
        blind.tick({"best": [(1, lmin(1))]})
    second = _df(spark, program=Cheapest)
    second.restore(tick, frames, lattices, pending, lattice_columns=first.lattice_columns())
    result = second.tick({"best": [(1, lmin(1))]})
    assert sorted(result.rows("best")) == [(0, lmin(30)), (1, lmin(1))]
    with pytest.raises(KeyError, match="nope"):
        second.restore(tick, frames, lattices, pending, lattice_columns={"nope": {0: lmin}})
