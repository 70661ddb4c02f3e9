"""merge_by_key, fold_by_key and fold equal the in-process folds (random partitioning)."""

from __future__ import annotations

from typing import Any

import pytest
from _spark_helpers import (
    COLLECTIONS,
    CRDTS,
    ITEMS,
    KEYS,
    ORDERED,
    SPARK_SETTINGS,
    merged_by_key,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.errors import LatticeValueError
from blooml.lattices import Lattice, lbool, lmax, lmin, lset
from blooml.spark import fold, fold_by_key, from_worker_error, merge_by_key, worker_errors

pytestmark = pytest.mark.spark
PythonException = pytest.importorskip(
    "pyspark.errors", reason="Spark tests need pyspark (pip install 'blooml[spark]')"
).PythonException

ALL = {**ORDERED, **COLLECTIONS, **CRDTS}


@st.composite
def keyed_values(draw: Any) -> tuple[type[Lattice], list[tuple[str, Lattice]], int]:
    cls = draw(st.sampled_from(sorted(ALL, key=lambda c: c.__qualname__)))
    pairs = draw(st.lists(st.tuples(KEYS, ALL[cls]), max_size=40))
    return cls, pairs, draw(st.integers(1, 5))


@settings(**SPARK_SETTINGS)
@given(keyed_values(), st.booleans())
def test_merge_by_key_equals_in_process(sc: Any, case: Any, give_class: bool) -> None:
    cls, pairs, parts = case
    rdd = sc.parallelize(pairs, parts)
    result = merge_by_key(rdd, 3, lattice=cls if give_class else None).collect()
    assert dict(result) == merged_by_key(pairs)
    assert len(result) == len({k for k, _ in pairs})


def test_merge_by_key_different_classes_on_different_keys(sc: Any) -> None:
    pairs = [("x", lmax(1)), ("y", lmin(4)), ("x", lmax(7)), ("y", lmin(2)), ("z", lbool(True))]
    result = dict(merge_by_key(sc.parallelize(pairs, 2)).collect())
    assert result == {"x": lmax(7), "y": lmin(2), "z": lbool(True)}


def test_merge_by_key_result_is_partitioned_by_key(sc: Any) -> None:
    rdd = merge_by_key(sc.parallelize([(i % 7, lmax(i)) for i in range(50)], 3), 5)
    assert rdd.getNumPartitions() == 5
    assert rdd.partitioner is not None  # joins with rdds partitioned alike need no shuffle
    owners = [[k for k, _ in part] for part in rdd.glom().collect()]
    assert sorted(k for keys in owners for k in keys) == list(range(7))


def test_merge_by_key_mixed_classes_under_one_key_names_key_and_classes(sc: Any) -> None:
    # the two classes meet in one partition's seqFunc and, separately, across partitions
    for parts in (1, 2):
        rdd = sc.parallelize([("k1", lmax(1)), ("k1", lmin(2))], parts)
        with pytest.raises(PythonException) as info:
            merge_by_key(rdd).collect()
        msg = str(info.value)
        assert "LatticeTypeError" in msg and "'k1'" in msg
        assert "lmax" in msg and "lmin" in msg


def test_merge_by_key_with_class_rejects_other_class(sc: Any) -> None:
    rdd = sc.parallelize([("k", lmin(2))], 1)
    with pytest.raises(PythonException, match=r"key 'k' holds values of different .*lmax, lmin"):
        merge_by_key(rdd, lattice=lmax).collect()


def test_merge_by_key_rejects_plain_values_naming_the_key(sc: Any) -> None:
    rdd = sc.parallelize([("k", lmax(1)), ("j", 3)], 1)
    with pytest.raises(PythonException, match=r"key 'j' has a value that is not a lattice: 3"):
        merge_by_key(rdd).collect()


def test_merge_by_key_bad_arguments(sc: Any) -> None:
    with pytest.raises(TypeError, match="expects a pyspark RDD"):
        merge_by_key([("a", lmax(1))])
    with pytest.raises(ValueError, match="num_partitions must be a positive int"):
        merge_by_key(sc.parallelize([]), 0)
    with pytest.raises(TypeError, match="expects a Lattice subclass"):
        merge_by_key(sc.parallelize([]), lattice=int)  # type: ignore[arg-type]


@st.composite
def keyed_items(draw: Any) -> tuple[type[Lattice], list[tuple[str, Any]], int]:
    """Plain items of a builtin, or lattice values of a CRDT (from_item keeps those)."""
    items = {**ITEMS, **CRDTS}
    cls = draw(st.sampled_from(sorted(items, key=lambda c: c.__qualname__)))
    return cls, draw(st.lists(st.tuples(KEYS, items[cls]), max_size=40)), draw(st.integers(1, 4))


@settings(**SPARK_SETTINGS)
@given(keyed_items())
def test_fold_by_key_equals_in_process_fold(sc: Any, case: Any) -> None:
    cls, pairs, parts = case
    groups: dict[str, list[Any]] = {}
    for k, item in pairs:
        groups.setdefault(k, []).append(item)
    result = dict(fold_by_key(sc.parallelize(pairs, parts), cls).collect())
    assert result == {k: cls.fold(items) for k, items in groups.items()}


@settings(**SPARK_SETTINGS)
@given(keyed_items())
def test_fold_equals_in_process_fold(sc: Any, case: Any) -> None:
    cls, pairs, parts = case
    items = [item for _, item in pairs]
    assert fold(sc.parallelize(items, parts), cls) == cls.fold(items)


def test_fold_of_rows_uses_from_item(sc: Any) -> None:
    from blooml.lattices import llww

    rows = [("draft", 1, "a"), ("final", 3, "b"), ("mid", 2, "a")]
    assert fold(sc.parallelize(rows, 2), llww) == llww.fold(rows)
    assert fold(sc.parallelize(rows, 2), llww).reveal() == "final"


def test_fold_of_empty_rdd_is_bottom(sc: Any) -> None:
    assert fold(sc.parallelize([], 3), lmax) == lmax()
    assert fold(sc.emptyRDD(), lmin) == lmin()


def test_fold_bad_item_raises_its_lattice_error_on_the_driver(sc: Any) -> None:
    with pytest.raises(LatticeValueError, match=r"fold\(rdd, lbool\): .*lbool\(3\)") as info:
        fold(sc.parallelize([True, 3, False], 1), lbool)
    assert info.value.call == "fold(rdd, lbool)"  # type: ignore[attr-defined]
    with pytest.raises(LatticeValueError):
        lbool.fold([3])  # the same error in-process


def test_none_is_bottom_in_every_rdd_path(sc: Any) -> None:
    """The null policy: a None item or value contributes nothing (as NULL cells in SQL)."""
    assert fold(sc.parallelize([1, None, 3], 2), lmax) == lmax(3)
    assert fold(sc.parallelize([None], 1), lset) == lset()
    pairs = [("a", None), ("a", 2), ("b", None)]
    assert dict(fold_by_key(sc.parallelize(pairs, 2), lmax).collect()) == {
        "a": lmax(2),
        "b": lmax(),
    }
    got = dict(fold_by_key(sc.parallelize(pairs, 2), lset).collect())
    assert got == {"a": lset({2}), "b": lset()}  # no None element
    values = [("a", None), ("a", lmax(2)), ("b", lmax(1)), ("b", None)]
    assert dict(merge_by_key(sc.parallelize(values, 2)).collect()) == {
        "a": lmax(2),
        "b": lmax(1),
    }


def test_fold_by_key_bad_item_names_the_key_and_the_call(sc: Any) -> None:
    rdd = sc.parallelize([("ok", True), ("bad", 3)], 2)
    with pytest.raises(PythonException) as info:
        fold_by_key(rdd, lbool).collect()
    err = from_worker_error(info.value)
    assert isinstance(err, LatticeValueError)
    assert err.key == "'bad'" and err.call == "fold_by_key(rdd, lbool)"  # type: ignore[attr-defined]
    bad = pytest.raises(LatticeValueError, match=r"fold_by_key\(rdd, lbool\) for key 'bad'")
    with bad, worker_errors():
        fold_by_key(rdd, lbool).collect()


def test_fold_bad_arguments(sc: Any) -> None:
    with pytest.raises(TypeError, match="expects a Lattice subclass"):
        fold(sc.parallelize([1]), max)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expects a pyspark RDD"):
        fold([1, 2], lmax)
    with pytest.raises(TypeError, match="expects a Lattice subclass"):
        fold_by_key(sc.parallelize([]), lmax(1))  # type: ignore[arg-type]
