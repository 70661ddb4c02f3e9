"""Lattice merges and folds over RDDs: ``merge_by_key``, ``fold_by_key`` and ``fold``.

Everything here runs ``aggregateByKey`` (or a per-partition loop) with a lattice *builder* as
the accumulator: within a partition the builder mutates a plain Python structure in place, and
it is frozen into an immutable lattice value once per key. Building an immutable value per row
instead is ~30x slower on collection lattices (see ``docs/spark.md``).

Null policy (as everywhere in blooml.spark): a ``None`` value or item is ⊥ and contributes
nothing.

Bad rows do not raise inside ``seqFunc`` (where the key is unknown): they turn the key's
accumulator into a :class:`_Problem` (or :class:`_Failed`), which absorbs everything merged into
it, and the final per-key step raises naming the key and the blooml call. Spark reports a
worker's exception on the driver as a ``pyspark.errors.PythonException``;
:func:`blooml.spark.worker_errors` turns it back into the blooml class (``fold``, an action,
does so itself).

These functions need RDDs, which Spark Connect sessions do not have: there, use
``df.groupBy(...).agg(lmerge(...))`` / ``lfold`` (:mod:`blooml.spark.functions`) or
:func:`blooml.spark.merge_column`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from blooml.errors import LatticeTypeError
from blooml.lattices._base import Lattice, LatticeBuilder
from blooml.spark._errors import WorkerErrors, failure_record, worker_errors
from blooml.spark._lazy import check_worker_python, require_rdd

__all__ = ["fold", "fold_by_key", "merge_by_key"]

L = TypeVar("L", bound=Lattice)


def merge_by_key(
    rdd: Any, num_partitions: int | None = None, *, lattice: type[Lattice] | None = None
) -> Any:
    """Merge the lattice values of each key: RDD of ``(key, lattice)`` → RDD of ``(key, lattice)``.

    Runs ``aggregateByKey`` with a builder as the zero value (⊥), ``builder.merge`` within a
    partition and ``merge_builder`` across partitions, then freezes once per key. The result is
    hash-partitioned by key (``num_partitions`` partitions, Spark's default when ``None``).

    Each key's values must all be of one lattice class; different keys may hold different
    classes. Passing ``lattice`` states the class up front (slightly faster; every value is then
    checked against it).

    Args:
        rdd: a pyspark ``RDD`` of ``(key, lattice value)`` pairs. Keys must be hashable and
            picklable, as for any Spark pair RDD.
        num_partitions: number of result partitions.
        lattice: the lattice class of every value, when known.

    Returns:
        A lazy RDD; errors surface when an action runs it.

    Raises:
        ImportError: pyspark is not installed.
        TypeError: ``rdd`` is not an RDD, or ``lattice`` is not a Lattice subclass.
        LatticeTypeError: (inside the Spark job, reported by Spark as a ``PythonException``) a
            key holds values of two lattice classes, or a value that is not a lattice; the
            message names the key and the classes.

    Example::

        merged = merge_by_key(sc.parallelize([("a", lmax(1)), ("a", lmax(3)), ("b", lmax(2))]))
        dict(merged.collect())   # {'a': lmax(3), 'b': lmax(2)}
    """
    require_rdd("merge_by_key", rdd)
    check_worker_python("merge_by_key", rdd.context)
    _check_partitions("merge_by_key", num_partitions)
    zero: Any
    if lattice is None:
        zero = _UNTYPED
    else:
        _check_lattice_class("merge_by_key", lattice)
        zero = lattice.builder()
    errors = WorkerErrors(
        f"merge_by_key(rdd{'' if lattice is None else ', lattice=' + _name(lattice)})"
    )

    def finish(kv: tuple[Any, Any]) -> tuple[Any, Any]:
        key, acc = kv
        if isinstance(acc, _Problem):
            errors.raise_for(acc.error(key), key)
        if isinstance(acc, _Failed):
            errors.raise_for(acc.exc, key)
        return key, acc.freeze()

    return rdd.aggregateByKey(zero, _seq_merge, _comb, num_partitions).map(
        finish, preservesPartitioning=True
    )


def fold_by_key(rdd: Any, lattice: type[L], num_partitions: int | None = None) -> Any:
    """Fold each key's plain items into one lattice value: ``(key, item)`` → ``(key, lattice)``.

    The per-key form of the seed's collection-to-lattice fold: each item becomes
    ``lattice.from_item(item)`` (``lmax(7)``, a singleton ``lset``, ...) and the results are
    merged, through the lattice's builder (``builder.add``), so a collection lattice mutates one
    Python set per key and partition.

    Args:
        rdd: a pyspark ``RDD`` of ``(key, item)`` pairs.
        lattice: the lattice class to fold into.
        num_partitions: number of result partitions.

    Raises:
        ImportError: pyspark is not installed.
        TypeError: ``rdd`` is not an RDD or ``lattice`` is not a Lattice subclass.
        LatticeValueError: (inside the job) an item is outside the lattice's domain; the
            message names the item.

    Example::

        fold_by_key(sc.parallelize([("a", 1), ("a", 2)]), lset).collect()
        # [('a', lset({1, 2}))]
    """
    require_rdd("fold_by_key", rdd)
    check_worker_python("fold_by_key", rdd.context)
    _check_lattice_class("fold_by_key", lattice)
    _check_partitions("fold_by_key", num_partitions)
    errors = WorkerErrors(f"fold_by_key(rdd, {_name(lattice)})")

    def finish(kv: tuple[Any, Any]) -> tuple[Any, Any]:
        key, acc = kv
        if isinstance(acc, _Failed):
            errors.raise_for(acc.exc, key)
        return key, acc.freeze()

    return rdd.aggregateByKey(lattice.builder(), _seq_add, _comb, num_partitions).map(
        finish, preservesPartitioning=True
    )


def fold(rdd: Any, lattice: type[L]) -> L:
    """Fold an RDD of plain items (or tuples) into one lattice value (an action: runs a job).

    The seed's collection-to-lattice fold, distributed: each partition folds its items with the
    lattice's builder (``add``, i.e. ``lattice.from_item`` then merge), and the per-partition
    builders are merged in a tree. The result equals ``lattice.fold(rdd.collect())`` without
    collecting the items. An empty RDD gives ⊥.

    Raises:
        ImportError: pyspark is not installed.
        TypeError: ``rdd`` is not an RDD or ``lattice`` is not a Lattice subclass.
        LatticeValueError: (inside the job) an item is outside the lattice's domain.

    Example::

        fold(sc.parallelize([3, 9, 4]), lmax)   # lmax(9)
    """
    require_rdd("fold", rdd)
    check_worker_python("fold", rdd.context)
    _check_lattice_class("fold", lattice)
    if rdd.getNumPartitions() == 0:
        return lattice()
    errors = WorkerErrors(f"fold(rdd, {_name(lattice)})")

    def build(items: Iterable[Any]) -> Iterator[LatticeBuilder[L]]:
        b = lattice.builder()
        add = b.add
        try:
            for item in items:
                if item is not None:  # None is ⊥
                    add(item)
        except Exception as exc:
            errors.raise_for(exc)
        yield b

    with worker_errors():
        return rdd.mapPartitions(build).treeReduce(_comb_same, depth=2).freeze()  # type: ignore[no-any-return]


# -- accumulator plumbing ---------------------------------------------------------------------


def _check_lattice_class(feature: str, lattice: Any) -> None:
    if not (isinstance(lattice, type) and issubclass(lattice, Lattice)):
        raise TypeError(
            f"blooml.spark.{feature} expects a Lattice subclass (such as lmax or lset) as the "
            f"lattice, got {lattice!r}"
        )


def _check_partitions(feature: str, n: Any) -> None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(
            f"blooml.spark.{feature}: num_partitions must be a positive int or None, got {n!r}"
        )


class _Untyped:
    """The zero of ``merge_by_key`` when no class is given: becomes the first value's builder."""

    __slots__ = ()
    lattice = None

    def merge(self, value: Any) -> Any:
        if isinstance(value, Lattice):
            return type(value).builder(value)
        if value is None:
            return self  # None is ⊥
        return _Problem(None, value)

    def freeze(self) -> None:
        return None  # only None values: the key's value is ⊥ of no known class

    def __deepcopy__(self, memo: dict[int, Any]) -> _Untyped:
        return self  # stateless, so the per-key copy Spark makes of the zero can be shared

    def __reduce__(self) -> str:
        return "_UNTYPED"


_UNTYPED = _Untyped()


class _Problem:
    """A key's accumulator after a bad value: absorbs the rest, raises once the key is known."""

    __slots__ = ("bad_value", "classes")
    lattice = None

    def __init__(self, classes: Any, bad_value: Any = None) -> None:
        self.classes: list[type] = list(classes or [])
        self.bad_value = bad_value

    @classmethod
    def of(cls, a: Any, b: Any) -> _Problem:
        classes: list[type] = []
        bad = None
        for side in (a, b):
            if isinstance(side, _Problem):
                classes.extend(side.classes)
                bad = side.bad_value if bad is None else bad
            elif isinstance(side, LatticeBuilder):
                classes.append(side.lattice)
        return cls(dict.fromkeys(classes), bad)

    def merge(self, value: Any) -> _Problem:
        if isinstance(value, Lattice):
            if type(value) not in self.classes and len(self.classes) < 8:
                self.classes.append(type(value))
        elif self.bad_value is None:
            self.bad_value = value
        return self

    def error(self, key: Any) -> LatticeTypeError:
        if self.bad_value is not None or len(self.classes) < 2:
            err = LatticeTypeError(Lattice, type(self.bad_value), "merge")
            err.args = (
                f"merge_by_key: key {key!r} has a value that is not a lattice: "
                f"{self.bad_value!r:.200} ({type(self.bad_value).__qualname__}); rows must be "
                "(key, lattice value) pairs (use fold_by_key to fold plain items)",
            )
        else:
            err = LatticeTypeError(self.classes[0], self.classes[1], "merge")
            names = ", ".join(_name(c) for c in self.classes)
            err.args = (
                f"merge_by_key: key {key!r} holds values of different lattice classes ({names}); "
                "all values merged under one key must be of one lattice class",
            )
        err.key = key  # type: ignore[attr-defined]
        return err


def _name(cls: type) -> str:
    name = getattr(cls, "wrapper_name", "")
    return name if name and name == cls.__qualname__ else cls.__qualname__


class _Failed:
    """A key's accumulator after its lattice code raised: keeps the exception for the key."""

    __slots__ = ("exc",)
    lattice = None

    def __init__(self, exc: BaseException) -> None:
        # kept as text: exceptions with their own __init__ do not survive pickling (a shuffle)
        self.exc = failure_record(exc)

    def merge(self, value: Any) -> _Failed:
        return self

    def add(self, item: Any) -> _Failed:
        return self


def _seq_merge(acc: Any, value: Any) -> Any:
    if value is None or isinstance(acc, _Failed):
        return acc  # None is ⊥
    try:
        return acc.merge(value)
    except LatticeTypeError as exc:
        if type(value) is acc.lattice:
            return _Failed(exc)  # the lattice's own merge failed on a value of its class
        return _Problem.of(acc, None).merge(value)
    except Exception as exc:
        return _Failed(exc)


def _comb(a: Any, b: Any) -> Any:
    if isinstance(a, _Failed):
        return a
    if isinstance(b, _Failed):
        return b
    if a is _UNTYPED:
        return b
    if b is _UNTYPED:
        return a
    la = a.lattice
    if la is not None and la is b.lattice:
        try:
            return a.merge_builder(b)
        except Exception as exc:
            return _Failed(exc)
    return _Problem.of(a, b)


def _seq_add(acc: Any, item: Any) -> Any:
    if item is None or isinstance(acc, _Failed):
        return acc  # None is ⊥
    try:
        return acc.add(item)
    except Exception as exc:
        return _Failed(exc)


def _comb_same(a: LatticeBuilder[Any], b: LatticeBuilder[Any]) -> LatticeBuilder[Any]:
    return a.merge_builder(b)
