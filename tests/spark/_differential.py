"""Random programs and random ticks for the differential test of the local engine against
``SparkEngine`` (tests/spark/test_differential.py; a Spark Connect server's Python imports this
module too, so it depends on nothing but blooml).

A program is a random subset of a catalogue of rule shapes that lower to DataFrame plans
(groups with every SQL aggregate, a global group, a join, a ``notin``, recursion, ``argmin``,
an ``lmax`` column, ``lmin``/``lmax`` built from a column holding None, ``<+``, ``<-`` and
``<+-``); a tick is random rows with None, unicode strings and ints and floats mixed in one
column, and deletes. ``compare`` runs both engines
tick by tick and returns the first difference (every collection, every tick), or None.
"""

from __future__ import annotations

import random
from typing import Any

from blooml import (
    Program,
    avg,
    bloom,
    count,
    lmax,
    lmin,
    max_,
    min_,
    scratch,
    sum_,
    table,
)

#: None, unicode and the empty string in string columns (Spark orders UTF-8 bytes, which is
#: Python's code-point order)
STRINGS = ["a", "b", "é", "日本", "", None]
#: ints and floats in one column (sums of 0.1, 0.2, 0.3 differ by order unless exact), None
NUMBERS = [1, 2, 3, -4, 0.1, 0.2, 0.3, 2.5, -0.7, 1e16, None]
#: values an lmax column is built from by ``<+-`` rows (None is ⊥ there, see ``_latnull``)
PLAIN = [1, 2, 5, 0.5, 7.25, -3]


# fmt: off
def _group(s: Any) -> None:
    s.g <= s.e.group(["s"], count(), count("w"), sum_("w"), min_("w"), max_("w"), avg("w"))


def _global(s: Any) -> None:
    s.gg <= s.e.group(None, count(), sum_("w"), count("d"))


def _join(s: Any) -> None:
    s.j <= s.e.join(s.f, s.e.d == s.f.k).map(lambda x, r: (x.s, r.v))


def _notin(s: Any) -> None:
    s.n <= s.e.notin(s.f, s.e.d == s.f.k)


def _reach(s: Any) -> None:
    s.r <= s.e.map(lambda x: (x.s, x.d))
    s.r <= s.r.join(s.e, s.r.d == s.e.s).map(lambda p, x: (p.s, x.d))


def _argmin(s: Any) -> None:
    s.am <= s.e.argmin(["s"], "w")


def _lattice(s: Any) -> None:
    s.lm <= s.cin.map(lambda r: (r.k, lmax(r.n)))


def _latnull(s: Any) -> None:  # lmin/lmax of a column holding None: ⊥ on both engines
    s.lo <= s.e.map(lambda x: (x.s, lmin(x.w)))
    s.hi <= s.e.map(lambda x: (x.d, lmax(x.s)))


def _later(s: Any) -> None:
    s.nx <+ s.e.map(lambda x: (x.d, x.w))


def _replace(s: Any) -> None:
    s.c <+- s.cin


def _delete(s: Any) -> None:
    s.e <- s.dl


# fmt: on


CATALOGUE = {
    f.__name__[1:]: f
    for f in (
        _group,
        _global,
        _join,
        _notin,
        _reach,
        _argmin,
        _lattice,
        _latnull,
        _later,
        _replace,
        _delete,
    )
}


def make_program(names: list[str]) -> type[Program]:
    """A program with the catalogue's rules ``names`` (every collection declared)."""
    chosen = [CATALOGUE[n] for n in names]

    class Differential(Program):
        e = table(["s", "d", "w"])
        f = table(["k", "v"])
        c = table(["k"], ["n"])
        cin = scratch(["k"], ["n"])
        dl = scratch(["s", "d", "w"])
        g = scratch(["s"], ["rows", "vals", "total", "lo", "hi", "mean"])
        gg = scratch([], ["rows", "total", "ds"])
        j = scratch(["s", "v"])
        n = scratch(["s", "d", "w"])
        r = table(["s", "d"])
        am = scratch(["s", "d", "w"])
        lm = table(["k"], ["m"])
        lo = table(["s"], ["m"])
        hi = table(["d"], ["m"])
        nx = table(["d", "w"])

        @bloom
        def rules(self) -> None:
            for f in chosen:
                f(self)

    Differential.__qualname__ = Differential.__name__ = "Differential_" + "_".join(names)
    return Differential


def draw_case(rnd: random.Random, n_ticks: int) -> tuple[list[str], list[dict[str, list[Any]]]]:
    """A random program (catalogue names) and ``n_ticks`` ticks of inputs for it."""
    names = sorted(rnd.sample(sorted(CATALOGUE), rnd.randint(1, 5)))
    stored: set[tuple[Any, ...]] = set()
    ticks = []
    for _ in range(n_ticks):
        tick: dict[str, list[Any]] = {}
        e = {
            (rnd.choice(STRINGS), rnd.choice(STRINGS), rnd.choice(NUMBERS))
            for _ in range(rnd.randint(0, 6))
        }
        if e:
            tick["e"] = sorted(e, key=repr)
        f = {(rnd.choice(STRINGS), rnd.choice(STRINGS)) for _ in range(rnd.randint(0, 3))}
        if f:
            tick["f"] = sorted(f, key=repr)
        cin = {rnd.choice(STRINGS): rnd.choice(PLAIN) for _ in range(rnd.randint(0, 3))}
        if cin:
            tick["cin"] = sorted(cin.items(), key=repr)
        if stored and rnd.random() < 0.5:
            tick["dl"] = sorted(rnd.sample(sorted(stored, key=repr), min(2, len(stored))), key=repr)
        stored |= e
        ticks.append(tick)
    return names, ticks


#: fixed cases every run compares (classic and Connect), besides the random ones: name ->
#: (catalogue names, ticks)
FIXED: dict[str, tuple[list[str], list[dict[str, list[Any]]]]] = {
    # lmin(x.w) / lmax(x.s) of None: ⊥ on both engines (Spark's least/greatest skip NULL)
    "lattice of None": (
        ["latnull"],
        [
            {"e": [("a", "b", None), ("a", None, 1), (None, "c", None), ("é", "c", 2.5)]},
            # a string into the double column w: ColumnValueError on both, nothing changed
            {"e": [("a", "y", 3), ("a", "z", "x")]},
            {"e": [("a", "x", 0.5), ("b", "c", None)]},
        ],
    ),
}


def _rows(rows: Any) -> set[tuple[Any, ...]]:
    return {tuple(r) for r in rows}


#: the inputs' Spark types, declared as a production job declares them: a column that holds
#: only None in a tick's rows has no type to infer
SCHEMAS = {
    "e": "s string, d string, w double",
    "dl": "s string, d string, w double",
    "f": "k string, v string",
    "cin": "k string, n double",
}


def error_class(exc: BaseException) -> str:
    """The class two engines' errors must share: the class's name, except that every
    ``ColumnValueError`` counts as one (the local engine raises its subclass
    ``LatticeColumnValueError``, also a ``LatticeValueError``, where a lattice column's merge
    meets a value of another type; ``SparkEngine`` refuses the same value before any job)."""
    from blooml.errors import ColumnValueError

    return "ColumnValueError" if isinstance(exc, ColumnValueError) else type(exc).__name__


def compare(spark: Any, names: list[str], ticks: list[dict[str, list[Any]]]) -> str | None:
    """Run the program of ``names`` on the local engine and on a new ``SparkEngine`` of the
    session ``spark`` (DataFrame plans) tick by tick; the first difference, described, or
    None. Rows compare as sets (3 == 3.0: a Spark column of doubles holds the local engine's
    ints); an error must be the same class on both engines, and leave both as they were."""
    from blooml.spark import SparkEngine

    cls = make_program(names)
    engine = SparkEngine(spark, path="dataframe", program=cls, schemas=SCHEMAS)
    p = cls(column_types="spark")  # a column holds one type, as on Spark
    for t, inputs in enumerate(ticks):
        where = f"program {names}, tick {t} ({inputs})"
        for name, rows in inputs.items():
            getattr(p, name).insert(rows)
        errors = []
        try:
            p.tick()
        except Exception as exc:
            errors.append(error_class(exc))
            p.discard_pending()
        try:
            result = engine.tick(inputs)
        except Exception as exc:
            errors.append(error_class(exc))
        if errors:
            if len(errors) != 2 or errors[0] != errors[1]:
                return f"{where}: errors {errors}"
            continue
        for name in cls.ir().collections:
            local = _rows(getattr(p, name))
            remote = _rows(result.rows(name))
            if local != remote:
                return (
                    f"{where}: {name}: local {sorted(local, key=repr)} vs Spark "
                    f"{sorted(remote, key=repr)}"
                )
    return None
