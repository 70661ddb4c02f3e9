"""How lattice values are stored in Spark DataFrame columns, and how each format merges.

A *column spec* says what a column holds: a lattice class (``lmax``, ``lset``, a CRDT, a user
class), :class:`MapOf` (an ``lmap`` and the lattice class of its values) or :class:`Pickled`
(any lattice, stored as pickled bytes). :func:`column_format` turns a spec into a
:class:`ColumnFormat`, which converts values to and from cells and, for the native formats,
merges a column with Spark SQL aggregates alone (no Python worker).

==================  ===========================  =========================================
lattice             Spark column                 ⊥ / merge in Spark SQL
==================  ===========================  =========================================
``lmax``/``lmin``   the value (any orderable)    ``NULL`` / ``max`` / ``min``
``lbool``           ``boolean``                  ``false`` (``NULL`` reads as ⊥) / ``bool_or``
``lset``/``lpset``  ``array<elem>``               ``[]`` (or ``NULL``) / explode + ``collect_set``
``lbag``            ``map<elem, bigint>`` counts  ``{}`` / explode + ``max`` per element
``MapOf(V)``        ``map<key, V's column>``      ``{}`` / explode + V's merge per map key
anything else       ``binary``: pickled value     ``NULL`` / RDD ``merge_by_key`` (Python)
==================  ===========================  =========================================
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Mapping
from typing import Any

from blooml.errors import LatticeTypeError, LatticeValueError
from blooml.lattices._base import Lattice

__all__ = ["ColumnFormat", "MapOf", "Pickled", "Structured", "column_format"]


class MapOf:
    """Column spec: an ``lmap`` whose values are all of lattice class (or spec) ``values``.

    Stored as a Spark ``map<key, cell of values>``; ``MapOf(lmax)`` is ``map<key, value>``,
    ``MapOf(lset)`` is ``map<key, array<elem>>``, and specs nest (``MapOf(MapOf(lbool))``).
    """

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        if not _is_spec(values):
            raise TypeError(
                f"MapOf expects the lattice class of the map's values (such as lmax), got "
                f"{values!r}"
            )
        self.values = values

    def __eq__(self, other: object) -> bool:
        return type(other) is MapOf and other.values == self.values

    def __hash__(self) -> int:
        return hash(("MapOf", self.values))

    def __repr__(self) -> str:
        return f"MapOf({_spec_name(self.values)})"


class Pickled:
    """Column spec: values of ``lattice`` stored as pickled bytes (a ``binary`` column).

    The default for CRDTs and user lattices; use it explicitly for a builtin whose values have
    no Spark type. Merging such a column runs Python workers (``merge_by_key``). Pickle is only
    acceptable inside one Spark application, whose processes trust each other: never read such
    a column from an untrusted source, and never use it as a network or storage protocol.
    """

    __slots__ = ("lattice",)

    def __init__(self, lattice: type[Lattice]) -> None:
        if not (isinstance(lattice, type) and issubclass(lattice, Lattice)):
            raise TypeError(f"Pickled expects a Lattice subclass, got {lattice!r}")
        self.lattice = lattice

    def __eq__(self, other: object) -> bool:
        return type(other) is Pickled and other.lattice is self.lattice

    def __hash__(self) -> int:
        return hash(("Pickled", self.lattice))

    def __repr__(self) -> str:
        return f"Pickled({self.lattice.__qualname__})"


class Structured:
    """Column spec: a CRDT built from builtin lattices, stored as Spark columns of its parts.

    Its merge then lowers to Spark SQL like the builtins' (no Python worker runs):

    =================  ===================================================================
    CRDT               Spark column
    =================  ===================================================================
    ``lorset``         ``struct<adds: map<elem, array<tag>>, removes: map<elem, array<tag>>>``
    ``l2pset``         ``struct<added: array<elem>, removed: array<elem>>``
    ``lgcounter``      ``map<node, bigint>`` (increments per node; merge: max per node)
    ``lvclock``        ``map<node, bigint>`` (events per node; merge: max per node)
    =================  ===================================================================

    Raises:
        TypeError: ``lattice`` has no structural form (use the class itself: pickled).
    """

    __slots__ = ("lattice",)

    def __init__(self, lattice: type[Lattice]) -> None:
        if lattice not in _structured_parts():
            names = ", ".join(sorted(c.__qualname__ for c in _structured_parts()))
            raise TypeError(
                f"Structured expects one of the CRDTs with a structural column form ({names}), "
                f"got {lattice!r}; store other lattices pickled (the class itself as the spec)"
            )
        self.lattice = lattice

    def __eq__(self, other: object) -> bool:
        return type(other) is Structured and other.lattice is self.lattice

    def __hash__(self) -> int:
        return hash(("Structured", self.lattice))

    def __repr__(self) -> str:
        return f"Structured({self.lattice.__qualname__})"


def _structured_parts() -> dict[type[Lattice], Any]:
    """CRDT class -> (field names and their specs, to parts, from parts)."""
    from blooml.lattices import lmax, lset
    from blooml.lattices.crdts import l2pset, lgcounter, lorset, lvclock
    from blooml.lattices.crdts.pair import lpair

    return {
        lorset: (
            (("adds", MapOf(lset)), ("removes", MapOf(lset))),
            lambda v: (v._adds(), v._removes()),
            lambda parts: lorset._make(lpair(*parts)),
        ),
        l2pset: (
            (("added", lset), ("removed", lset)),
            lambda v: (v.added(), v.removed()),
            lambda parts: l2pset._make(lpair(*parts)),
        ),
        lgcounter: ((("", MapOf(lmax)),), lambda v: (v._v,), lambda p: _counts(lgcounter, p[0])),
        lvclock: ((("", MapOf(lmax)),), lambda v: (v._v,), lambda p: _counts(lvclock, p[0])),
    }


def _counts(cls: Any, m: Any) -> Any:
    return cls({k: v.reveal() for k, v in m.reveal().items() if not v.is_bottom()})


def _is_spec(spec: Any) -> bool:
    return isinstance(spec, (MapOf, Pickled, Structured)) or (
        isinstance(spec, type) and issubclass(spec, Lattice)
    )


def _spec_name(spec: Any) -> str:
    if isinstance(spec, type):
        return getattr(spec, "wrapper_name", "") or spec.__qualname__
    return repr(spec)


class ColumnFormat:
    """How one column spec is stored in Spark and merged there.

    Attributes:
        spec: the column spec this format serves.
        lattice: the lattice class of the values.
        kind: ``"value"``, ``"boolean"``, ``"array"``, ``"bag"``, ``"map"`` or ``"pickle"``.
        native: whether merging lowers to Spark SQL aggregates (no Python worker).
    """

    kind = ""
    native = True

    def __init__(self, spec: Any, lattice: type[Lattice]) -> None:
        self.spec = spec
        self.lattice = lattice

    def to_cell(self, value: Lattice) -> Any:
        """Return the Python object Spark stores for ``value`` (a Row field)."""
        raise NotImplementedError  # pragma: no cover - every subclass overrides it

    def from_cell(self, cell: Any) -> Lattice:
        """Return the lattice value stored in ``cell`` (a collected Row field)."""
        raise NotImplementedError  # pragma: no cover - every subclass overrides it

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        """Return the Spark ``DataType`` of the column (see :func:`blooml.spark.spark_type`)."""
        raise NotImplementedError  # pragma: no cover - every subclass overrides it

    def _check(self, value: Any) -> None:
        if type(value) is not self.lattice:
            if isinstance(value, Lattice):
                raise LatticeTypeError(self.lattice, type(value), f"store as {self.spec!r}")
            raise LatticeValueError(
                _spec_name(self.spec),
                value,
                f"expected a {self.lattice.__qualname__} value to store in a Spark column",
            )

    def __repr__(self) -> str:
        return f"<ColumnFormat {self.kind} for {_spec_name(self.spec)}>"


class _ValueFormat(ColumnFormat):
    """``lmax``/``lmin``: the value itself; ⊥ is NULL; merge is SQL ``max``/``min``."""

    kind = "value"

    def __init__(self, spec: Any, lattice: type[Lattice], sql_agg: str) -> None:
        super().__init__(spec, lattice)
        self.sql_agg = sql_agg

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        return value.reveal()

    def from_cell(self, cell: Any) -> Lattice:
        return self.lattice() if cell is None else self.lattice(plain(cell))

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        return _need(element, "element", self.spec)

    def aggregate(self, column: Any) -> Any:
        from pyspark.sql import functions as F

        return getattr(F, self.sql_agg)(column)


class _BoolFormat(ColumnFormat):
    """``lbool``: a boolean; ⊥ is false (NULL reads as ⊥); merge is SQL ``bool_or``."""

    kind = "boolean"

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        return bool(value.reveal())

    def from_cell(self, cell: Any) -> Lattice:
        return self.lattice(bool(cell)) if cell is not None else self.lattice()

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import BooleanType

        return BooleanType()

    def aggregate(self, column: Any) -> Any:
        from pyspark.sql import functions as F

        return F.coalesce(F.bool_or(column), F.lit(False))


class _ArrayFormat(ColumnFormat):
    """``lset``/``lpset``: an array of distinct elements; ⊥ is [] (or NULL); merge is a union."""

    kind = "array"

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        return _sorted_if_possible(value.reveal())

    def from_cell(self, cell: Any) -> Lattice:
        if cell is None:
            return self.lattice()
        return self.lattice([plain_hashable(e) for e in cell])

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import ArrayType

        return ArrayType(_need(element, "element", self.spec), containsNull=False)


class _BagFormat(ColumnFormat):
    """``lbag``: a map element → multiplicity; ⊥ is {}; merge keeps the larger multiplicity."""

    kind = "bag"

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        return dict(_bag_items(value))

    def from_cell(self, cell: Any) -> Lattice:
        if not cell:
            return self.lattice()
        return self.lattice({plain_hashable(k): int(n) for k, n in cell.items()})

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import LongType, MapType

        return MapType(_need(element, "element", self.spec), LongType(), valueContainsNull=False)


class _MapFormat(ColumnFormat):
    """``MapOf(V)``: a map key → V's cell; ⊥ is {}; merge merges V per map key."""

    kind = "map"

    def __init__(self, spec: MapOf, lattice: type[Lattice], values: ColumnFormat) -> None:
        super().__init__(spec, lattice)
        self.values = values
        self.native = values.native

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        to = self.values.to_cell
        return {k: to(v) for k, v in _map_items(value)}

    def from_cell(self, cell: Any) -> Lattice:
        if not cell:
            return self.lattice()
        fr = self.values.from_cell
        return self.lattice({plain_hashable(k): fr(v) for k, v in cell.items()})

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import MapType

        return MapType(
            _need(key, "key", self.spec),
            self.values.spark_type(element, None if self.values.kind != "map" else key),
            valueContainsNull=True,
        )


class _PickleFormat(ColumnFormat):
    """Any lattice as pickled bytes (``binary``); ⊥ is NULL; merged by ``merge_by_key``.

    Values are pickled by reference to their class (module and qualified name), so a cell is
    small and readable by any process that imports the class. A class defined in ``__main__``
    (a script, a notebook) reaches a Spark worker by value, inside the cloudpickled function
    that uses this format; the worker's ``__main__`` is PySpark's, so the class is bound there
    under its name before the first cell is pickled or read (:func:`_findable`). A class that
    no process can find by name (defined inside a function) is pickled by value (cloudpickle).
    """

    kind = "pickle"
    native = False

    def __init__(self, spec: Any, lattice: type[Lattice]) -> None:
        super().__init__(spec, lattice)
        self._by_value: bool | None = None  # decided in the process that uses the format

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_by_value": None}  # another process decides again

    def _pickles_by_value(self) -> bool:
        if self._by_value is None:
            self._by_value = not _findable(self.lattice)
        return self._by_value

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        if self._pickles_by_value():
            from pyspark import cloudpickle

            return bytearray(cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        return bytearray(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def from_cell(self, cell: Any) -> Lattice:
        if cell is None:
            return self.lattice()
        self._pickles_by_value()  # binds a class shipped from __main__ before pickle looks it up
        value = pickle.loads(bytes(cell))  # only ever our own column: see Pickled
        if type(value) is not self.lattice:
            raise LatticeTypeError(self.lattice, type(value), "read a pickled column cell as")
        return value  # type: ignore[no-any-return]

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import BinaryType

        return BinaryType()


#: ``__main__`` attribute name -> the lattice class this process bound there (a Spark worker)
_BOUND_IN_MAIN: dict[str, type] = {}


def _findable(cls: type) -> bool:
    """Whether ``pickle`` finds ``cls`` by reference in this process (its module's attribute
    of its qualified name is ``cls``).

    A class of ``__main__`` missing from this process's ``__main__`` (a Spark worker, which got
    the class by value inside a cloudpickled function) is bound there first, as is a newer
    class of that name shipped later to a reused worker; a name the user's own ``__main__``
    defines is never replaced by another class."""
    module = sys.modules.get(cls.__module__)
    name = cls.__qualname__
    if module is not None and cls.__module__ == "__main__" and "." not in name:
        current = getattr(module, name, None)
        if current is None or current is _BOUND_IN_MAIN.get(name):
            setattr(module, name, cls)
            _BOUND_IN_MAIN[name] = cls
    obj: Any = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


class _StructFormat(ColumnFormat):
    """``Structured(cls)``: the CRDT's parts as builtin columns; merged part by part in SQL.

    With one part (the counters) the column is that part's column itself; with several, a
    struct with one field per part.
    """

    kind = "struct"

    def __init__(self, spec: Structured, parts: Any) -> None:
        super().__init__(spec, spec.lattice)
        fields, self._to_parts, self._from_parts = parts
        self.fields: tuple[tuple[str, ColumnFormat], ...] = tuple(
            (name, column_format(sub)) for name, sub in fields
        )

    @property
    def single(self) -> bool:
        """Whether the column is its one part's column (no struct)."""
        return len(self.fields) == 1

    def to_cell(self, value: Lattice) -> Any:
        self._check(value)
        cells = [f.to_cell(p) for (_, f), p in zip(self.fields, self._to_parts(value), strict=True)]
        return cells[0] if self.single else tuple(cells)

    def from_cell(self, cell: Any) -> Lattice:
        if cell is None:
            return self.lattice()
        cells = [cell] if self.single else list(cell)
        return self._from_parts(  # type: ignore[no-any-return]
            [f.from_cell(c) for (_, f), c in zip(self.fields, cells, strict=True)]
        )

    def spark_type(self, element: Any = None, key: Any = None) -> Any:
        from pyspark.sql.types import StructField, StructType

        types = [f.spark_type(element, key) for _, f in self.fields]
        if self.single:
            return types[0]
        return StructType(
            [StructField(name, t, True) for (name, _), t in zip(self.fields, types, strict=True)]
        )


def check_column_type(feature: str, fmt: ColumnFormat, column: str, dt: Any) -> None:
    """Raise :class:`~blooml.errors.ColumnTypeError` unless Spark type ``dt`` holds ``fmt``'s
    cells (called before any job is built, so the error names the user's column)."""
    from pyspark.sql import types as T

    why = _type_mismatch(fmt, dt, T)
    if why is not None:
        from blooml.errors import ColumnTypeError

        raise ColumnTypeError(
            column, dt.simpleString(), _spec_name(fmt.spec), f"{why} (blooml.spark.{feature})"
        )


def _type_mismatch(fmt: ColumnFormat, dt: Any, T: Any) -> str | None:
    if isinstance(dt, T.NullType):
        return None  # every cell NULL: ⊥
    if isinstance(fmt, _ValueFormat):
        if isinstance(dt, (T.MapType, T.BinaryType)):
            return f"{_spec_name(fmt.spec)} cells are orderable values; maps are not"
        return None
    if isinstance(fmt, _BoolFormat):
        return None if isinstance(dt, T.BooleanType) else "lbool cells are booleans"
    if isinstance(fmt, _ArrayFormat):
        if not isinstance(dt, T.ArrayType):
            return (
                f"{_spec_name(fmt.spec)} cells are arrays of elements; to fold plain items into "
                f"a set use lfold(column, {_spec_name(fmt.spec)}) "
                "(blooml.spark.functions) or fold_by_key"
            )
        return None
    if isinstance(fmt, _BagFormat):
        if not (isinstance(dt, T.MapType) and isinstance(dt.valueType, T.IntegralType)):
            return "lbag cells are maps element -> integer multiplicity"
        return None
    if isinstance(fmt, _MapFormat):
        if not isinstance(dt, T.MapType):
            return "MapOf cells are maps key -> value cell"
        return _type_mismatch(fmt.values, dt.valueType, T)
    if isinstance(fmt, _StructFormat):
        if fmt.single:
            return _type_mismatch(fmt.fields[0][1], dt, T)
        if not isinstance(dt, T.StructType) or len(dt.fields) != len(fmt.fields):
            names = ", ".join(n for n, _ in fmt.fields)
            return f"{_spec_name(fmt.spec)} cells are structs of ({names})"
        for (_, sub), field in zip(fmt.fields, dt.fields, strict=True):
            why = _type_mismatch(sub, field.dataType, T)
            if why:
                return why
        return None
    if isinstance(fmt, _PickleFormat) and not isinstance(dt, T.BinaryType):
        return (
            f"{_spec_name(fmt.spec)} cells are pickled bytes (binary); to fold plain items "
            "use lfold (blooml.spark.functions)"
        )
    return None


def _need(t: Any, what: str, spec: Any) -> Any:
    if t is None:
        raise TypeError(
            f"spark_type({_spec_name(spec)}) needs the Spark type of the {what}s "
            f"(for example {what}=LongType())"
        )
    return t


def _builtin(name: str) -> type[Lattice] | None:
    import blooml.lattices as lat

    cls = getattr(lat, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Lattice) else None


def column_format(spec: Any) -> ColumnFormat:
    """Return the :class:`ColumnFormat` for a column spec (see the module docstring's table).

    Raises:
        TypeError: ``spec`` is neither a Lattice subclass, :class:`MapOf` nor :class:`Pickled`,
            or it is ``lmap`` itself (use ``MapOf(value_class)``: the column needs one value
            class).
    """
    if isinstance(spec, Pickled):
        return _PickleFormat(spec, spec.lattice)
    if isinstance(spec, Structured):
        return _StructFormat(spec, _structured_parts()[spec.lattice])
    if isinstance(spec, MapOf):
        lmap = _builtin("lmap")
        if lmap is None:  # pragma: no cover - lmap is a builtin
            raise TypeError("MapOf needs blooml.lattices.lmap")
        return _MapFormat(spec, lmap, column_format(spec.values))
    if not (isinstance(spec, type) and issubclass(spec, Lattice)):
        raise TypeError(
            "a lattice column spec is a Lattice subclass (lmax, lset, a CRDT, your class), "
            f"MapOf(value_class) or Pickled(class); got {spec!r}"
        )
    if spec is _builtin("lmax"):
        return _ValueFormat(spec, spec, "max")
    if spec is _builtin("lmin"):
        return _ValueFormat(spec, spec, "min")
    if spec is _builtin("lbool"):
        return _BoolFormat(spec, spec)
    if spec is not None and spec in (_builtin("lset"), _builtin("lpset")):
        return _ArrayFormat(spec, spec)
    if spec is _builtin("lbag"):
        return _BagFormat(spec, spec)
    if spec is _builtin("lmap"):
        raise TypeError(
            "an lmap column needs the lattice class of its values: use MapOf(lmax) (or "
            "MapOf(lset), ...) as the spec, or Pickled(lmap) for maps of mixed value classes"
        )
    return _PickleFormat(spec, spec)


def spec_of(value: Lattice) -> Any:
    """Return the natural column spec of a value (``MapOf(V)`` for an ``lmap`` of ``V``)."""
    cls = type(value)
    if cls is _builtin("lmap"):
        classes = {spec_of(v) for _, v in _map_items(value)}
        if len(classes) == 1:
            return MapOf(classes.pop())
        if not classes:
            raise TypeError(
                "cannot tell the value class of an empty lmap: pass the spec, e.g. MapOf(lmax)"
            )
        return Pickled(cls)
    return cls


# -- plain Python values from collected Spark cells ---------------------------------------------


def plain(cell: Any) -> Any:
    """Turn a collected cell into plain Python: Rows (structs) become tuples, recursively."""
    if isinstance(cell, tuple):  # a Row (a tuple subclass) becomes a plain tuple
        return tuple(plain(x) for x in cell)
    if isinstance(cell, list):
        return [plain(x) for x in cell]
    if isinstance(cell, dict):
        return {plain_hashable(k): plain(v) for k, v in cell.items()}
    return cell


def plain_hashable(cell: Any) -> Any:
    """Like :func:`plain`, with arrays as tuples (set elements and map keys must be hashable)."""
    if isinstance(cell, (list, tuple)):
        return tuple(plain_hashable(x) for x in cell)
    if isinstance(cell, dict):
        raise LatticeValueError(
            "spark", cell, "a map cannot be a set element or a map key (it is not hashable)"
        )
    return cell


def _sorted_if_possible(items: Any) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return list(items)


def _bag_items(value: Lattice) -> Any:
    raw = value.reveal()
    return raw.items() if isinstance(raw, Mapping) or hasattr(raw, "items") else raw


def _map_items(value: Lattice) -> Any:
    raw = value.reveal()
    return raw.items() if hasattr(raw, "items") else raw
