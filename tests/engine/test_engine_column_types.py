"""``Program(column_types="spark")``: the local engine learns and checks column types as
``SparkEngine`` does (issue 27), refusing a value its column cannot hold with the same
``ColumnValueError`` before the tick changes anything; the default stays dynamically typed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blooml import Program, bloom, channel, lmin, scratch, table
from blooml.errors import ColumnTypeError, ColumnValueError, ProgramError
from blooml.ir.coltypes import check_column_types, type_family, widened


class Paths(Program):
    link = table(["src", "dst"], ["c"])
    step = scratch(["src", "dst", "c"])
    path = table(["src", "dst"], ["c"])
    best = table(["src"], ["c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda r: (r.src, r.dst, r.c))
        self.link < +self.step
        self.best <= self.link.map(lambda r: (r.src, lmin(r.c)))


def state(p):
    return {n: sorted(map(tuple, getattr(p, n)), key=repr) for n in ("link", "path", "best")}


@pytest.mark.parametrize("incremental", [True, False])
def test_a_string_into_a_numeric_column_is_refused_naming_the_place_and_changes_nothing(
    incremental,
):
    p = Paths(column_types="spark", incremental=incremental)
    p.link.insert([("a", "b", 1)])
    p.tick()
    before = state(p)
    p.link.insert([("a", "c", 2), ("a", "d", "x")])
    with pytest.raises(ColumnValueError) as e:
        p.tick()
    err = e.value
    assert isinstance(err, ColumnTypeError)
    assert (err.collection, err.column, err.value) == ("link", "c", "x")
    assert err.spark_type is None and err.holds == "bigint"
    assert "'link' column 'c'" in str(err) and "'x'" in str(err)
    assert state(p) == before and p.tick_count == 1
    p.discard_pending()
    p.link.insert([("a", "c", 2)])
    p.tick()
    assert ("a", "c", 2) in state(p)["path"]


def test_int_then_float_widens_and_none_fits_any_column():
    p = Paths(column_types="spark")
    p.link.insert([("a", "b", 1), ("a", "n", None)])
    p.tick()
    p.link.insert([("a", "c", 2.5)])
    p.tick()
    p.link.insert([("a", "d", 3), (None, "e", 4)])
    p.tick()
    assert p._rt.col_families["link"] == ["string", "string", "double"]
    assert set(state(p)["best"]) == {(None, lmin(4)), ("a", lmin(1))}
    with pytest.raises(ColumnValueError, match="holds double"):
        p.link.insert([("a", "f", True)])
        p.tick()


def test_next_tick_rows_and_derived_rows_are_checked_too():
    p = Paths(column_types="spark")
    p.link.insert([("a", "b", 1.0)])
    p.tick()
    p.step.insert([("a", "c", "far")])
    p.tick()  # <+: the row arrives next tick, where it is refused
    before = state(p)
    with pytest.raises(ColumnValueError) as e:
        p.tick()
    assert (e.value.collection, e.value.column, e.value.value) == ("link", "c", "far")
    assert state(p) == before


def test_a_lattice_column_holds_one_raw_family():
    class L(Program):
        cost = table(["k"], ["c"])

        @bloom
        def rules(self):
            pass

    p = L(column_types="spark")
    p.cost.insert([("a", lmin(1)), ("b", lmin(2.5))])
    p.tick()
    assert p._rt.col_families["cost"] == ["string", "lmin of double"]
    p.cost.insert([("c", lmin("x"))])  # another key: no merge fails, the column's type does
    with pytest.raises(ColumnValueError) as e:
        p.tick()
    assert (e.value.column, e.value.holds) == ("c", "lmin of double")


class Copy(Program):
    link = table(["src", "dst"], ["c"])
    path = table(["src", "dst"], ["c"])

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda r: (r.src, r.dst, r.c))


def test_the_default_stays_dynamically_typed():
    p = Copy()
    assert p._rt.column_types == "dynamic"
    p.link.insert([("a", "b", 1), ("a", "c", "x"), ("a", "d", 2.5), ("a", "e", True)])
    p.tick()
    assert [r.c for r in sorted(p.path)] == [1, "x", 2.5, True]
    q = Copy(column_types="spark")
    q.link.insert([("a", "b", 1), ("a", "c", "x")])
    with pytest.raises(ColumnValueError, match="'link' column 'c' holds bigint"):
        q.tick()


@pytest.mark.parametrize("bad", ["Spark", "strict", 1, True])
def test_a_bad_mode_is_a_program_error(bad):
    with pytest.raises(ProgramError, match="column_types must be one of 'dynamic', 'spark'"):
        Paths(column_types=bad)


def test_families_follow_spark_types():
    import datetime
    import decimal

    assert [type_family(v) for v in (True, 1, 1.5, "s", b"b", None)] == [
        "boolean",
        "bigint",
        "double",
        "string",
        "binary",
        None,
    ]
    assert type_family(decimal.Decimal(1)) == "decimal"
    assert type_family(datetime.datetime(2020, 1, 1)) == "timestamp"
    assert type_family(datetime.date(2020, 1, 1)) == "date"
    assert widened("bigint", "double") == widened("double", "bigint") == "double"
    assert widened("lmin of bigint", "lmin of double") == "lmin of double"
    assert widened("lmin of bigint", "lmax of double") is None
    assert widened("bigint", "boolean") is None
    assert type_family(lmin(None)) is None  # ⊥: a NULL cell on Spark, fits any column
    assert check_column_types("t", ["m"], [(lmin(None),), (lmin("a"),)], [None]) == [
        "lmin of string"
    ]


@given(st.lists(st.one_of(st.none(), st.integers(), st.floats(allow_nan=False))))
def test_numbers_and_none_always_fit_together(values):
    fams = check_column_types("t", ["v"], [(v,) for v in values], [None])
    kinds = {type(v) for v in values} - {type(None)}
    assert fams == [None if not kinds else "double" if float in kinds else "bigint"]


@given(
    st.lists(st.one_of(st.integers(), st.floats(allow_nan=False)), min_size=1),
    st.text(),
    st.integers(min_value=0),
)
def test_a_string_among_numbers_is_always_refused(numbers, s, at):
    rows = [(v,) for v in numbers]
    rows.insert(at % (len(rows) + 1), (s,))
    known: list[str | None] = [None]
    with pytest.raises(ColumnValueError):
        check_column_types("t", ["v"], rows, known)
    assert known == [None]


class Inbox(Program):
    msg = channel(["@dst", "src", "n"])
    got = table(["src"], ["n"])

    @bloom
    def rules(self):
        self.got <= self.msg.map(lambda m: (m.src, m.n))


def test_a_message_its_column_cannot_hold_is_refused_on_arrival_with_nothing_queued():
    p = Inbox(column_types="spark")
    assert p._rt.receive_batch("peer", [("msg", [("localhost", "a", 1)])]) == 1
    p.tick()
    with pytest.raises(ColumnValueError) as e:
        p._rt.receive_batch("peer", [("msg", [("localhost", "b", 2), ("localhost", "c", "x")])])
    assert (e.value.collection, e.value.column, e.value.value) == ("msg", "n", "x")
    p.tick()
    assert sorted(map(tuple, p.got)) == [("a", 1)]
