"""The column-typing rules of ``SparkEngine`` in pure Python, for engines that check them.

A Spark column holds one type. ``SparkEngine`` learns it from the first non-None value it sees
in the column (or takes it from ``schemas=`` or the stored state) and refuses any later value
of another type with :class:`~blooml.errors.ColumnValueError`; an integer and a float meet
(the column widens to ``double``), and None fits every column and teaches nothing. This module
states those rules on Python values, with no pyspark import, so that the local engine's
``Program(column_types="spark")`` refuses exactly what ``SparkEngine`` refuses.

A value's *type family* is the Spark type name its Python type maps to: ``bool`` ->
``boolean``, ``int`` -> ``bigint``, ``float`` -> ``double``, ``str`` -> ``string``,
``bytes`` -> ``binary``, ``Decimal`` -> ``decimal``, ``datetime`` -> ``timestamp``, ``date``
-> ``date``; a lattice value is its class (``lmin``), followed for an ordered scalar lattice
by its raw value's family (``lmin of double``; its ⊥, ``lmin(None)``, is a NULL and fits any
column, as None does); any other value is its Python type's name.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable, Sequence
from typing import Any

from blooml.errors import ColumnValueError
from blooml.lattices._base import Lattice
from blooml.lattices.ordered import order_sign

__all__ = ["COLUMN_TYPE_MODES", "check_column_types", "type_family", "widened"]

#: The values of ``Program(column_types=...)``: ``"dynamic"`` (the default: a column holds any
#: Python values) and ``"spark"`` (a column holds one type family, as on ``SparkEngine``).
COLUMN_TYPE_MODES: tuple[str, ...] = ("dynamic", "spark")

_FAMILIES: dict[type, str] = {
    bool: "boolean",
    int: "bigint",
    float: "double",
    str: "string",
    bytes: "binary",
    bytearray: "binary",
    decimal.Decimal: "decimal",
    datetime.datetime: "timestamp",
    datetime.date: "date",
}


def type_family(value: Any) -> str | None:
    """The type family of ``value`` (see the module docstring); ``None`` for ``None`` (and an
    ordered lattice's ⊥), which fits every column."""
    if value is None:
        return None
    t = type(value)
    fam = _FAMILIES.get(t)
    if fam is not None:
        return fam
    if isinstance(value, Lattice):
        name = getattr(t, "wrapper_name", None) or t.__qualname__
        if order_sign(t):
            raw = type_family(value.reveal())
            # ⊥ (``lmin(None)``) is a NULL cell on Spark: it fits the column, as None does
            return f"{name} of {raw}" if raw is not None else None
        return str(name)
    for base, fam in _FAMILIES.items():  # subclasses (an IntEnum, a str subclass) map as bases
        if base is not bool and isinstance(value, base):
            return fam
    return t.__qualname__


def widened(held: str, new: str) -> str | None:
    """The family a column holding ``held`` holds once a value of family ``new`` arrives:
    ``held`` itself when they are the same, ``double`` for ``bigint`` and ``double`` (also
    inside a lattice: ``lmin of bigint`` and ``lmin of double`` give ``lmin of double``), and
    ``None`` when the column cannot hold both."""
    if held == new:
        return held
    hp, _, hr = held.rpartition(" of ")
    np_, _, nr = new.rpartition(" of ")
    if hp == np_ and {hr, nr} == {"bigint", "double"}:
        return f"{hp} of double" if hp else "double"
    return None


def check_column_types(
    collection: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    known: Sequence[str | None],
) -> list[str | None]:
    """Check ``rows`` (in order) against the families the columns are known to hold, learning
    the family of every column that has none yet, and return the families after the rows
    (``known`` itself is not changed, so a caller can drop the result of a refused batch).

    Raises:
        ColumnValueError: a value whose family the column cannot hold, naming the
            collection, the column and the value (``spark_type=None``: a local check;
            ``holds`` is the family the column holds).
    """
    out = list(known)
    width = len(out)
    for row in rows:
        for i in range(width):
            v = row[i]
            if v is None:
                continue
            fam = type_family(v)
            if fam is None:
                continue
            held = out[i]
            if held is None:
                out[i] = fam
                continue
            if held == fam:
                continue
            w = widened(held, fam)
            if w is None:
                raise ColumnValueError(
                    collection,
                    columns[i],
                    v,
                    None,
                    "a column holds one type, as on SparkEngine (Program(column_types='spark'))",
                    holds=held,
                )
            out[i] = w
    return out
