"""Exceptions raised on Spark workers, brought back to the driver as the blooml class they were.

A Python worker's exception reaches the driver as a ``pyspark.errors.PythonException`` holding
the worker's traceback as text. blooml code running on workers (the Arrow UDFs of
:mod:`blooml.spark.functions`, the RDD folds) raises a :class:`WorkerError` whose message starts
with a marker naming the original class, the blooml call and the key; :func:`worker_errors`
(a context manager) and :func:`from_worker_error` turn such a ``PythonException`` back into an
instance of that blooml class, with ``.key``, ``.call`` and ``.worker_message`` attributes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import blooml.errors as _errors_module
from blooml.errors import BloomlError

__all__ = ["WorkerErrors", "from_worker_error", "worker_errors"]

_MARK = "BLOOML_WORKER_ERROR"
_PATTERN = re.compile(
    _MARK + r"<(?P<cls>[A-Za-z_][A-Za-z0-9_]*)> (?P<msg>.*?) " + _MARK + "_END", re.S
)


class WorkerError(RuntimeError):
    """Raised on a worker: carries the original exception's class name, the call and the key."""


class WorkerErrors:
    """On a worker: re-raise an exception from user lattice code naming the key and the call."""

    __slots__ = ("call",)

    def __init__(self, call: str) -> None:
        self.call = call

    def raise_for(self, exc: BaseException | tuple[str, str, str], key: Any = None) -> None:
        """Raise a :class:`WorkerError` for ``exc`` (or its :func:`failure_record`), met while
        merging ``key``'s values (``None``: no key)."""
        name, qualname, text = exc if isinstance(exc, tuple) else failure_record(exc)
        where = f" for key {key!r}" if key is not None else ""
        raise WorkerError(f"{_MARK}<{name}> {self.call}{where}: {qualname}: {text} {_MARK}_END")


def failure_record(exc: BaseException) -> tuple[str, str, str]:
    """``exc`` as picklable text: (blooml class name to re-raise as, its qualname, message)."""
    cls = type(exc)
    name = cls.__name__ if _blooml_class(cls.__name__) is cls else "BloomlError"
    return name, cls.__qualname__, str(exc)


def _blooml_class(name: str) -> type[BloomlError] | None:
    cls = getattr(_errors_module, name, None)
    if isinstance(cls, type) and issubclass(cls, BloomlError):
        return cls
    return None


def from_worker_error(exc: BaseException) -> BloomlError | None:
    """The blooml exception a worker raised inside ``exc`` (a ``PythonException``), or None."""
    m = _PATTERN.search(str(exc))
    if m is None:
        return None
    cls = _blooml_class(m.group("cls")) or BloomlError
    msg = m.group("msg")
    err = cls.__new__(cls)
    Exception.__init__(err, msg)
    call, _, rest = msg.partition(": ")
    key_match = re.match(r"(?P<call>.*?) for key (?P<key>.*)$", call)
    err.call = key_match.group("call") if key_match else call  # type: ignore[attr-defined]
    err.key = key_match.group("key") if key_match else None  # type: ignore[attr-defined]
    err.worker_message = rest  # type: ignore[attr-defined]
    return err  # type: ignore[no-any-return]


#: pyspark exceptions that carry a worker's traceback: a job's, and a streaming query's (which
#: stopped on a failed micro-batch, e.g. in ``stream_lfold``)
_WRAPPERS = frozenset({"PythonException", "StreamingQueryException"})


@contextmanager
def worker_errors() -> Iterator[None]:
    """Re-raise blooml exceptions from Spark workers as their blooml class (on the driver).

    Wrap the action that runs the job (``collect``, ``write``, ``count``, a streaming query's
    ``processAllAvailable``/``awaitTermination``)::

        with worker_errors():
            df.groupBy("k").agg(lmerge("v", MyLattice)).collect()
        # raises e.g. LatticeTypeError("lmerge('v', MyLattice) for key 'a': ...")

    Other exceptions pass through unchanged. blooml's own actions (``fold``,
    ``SparkEngine.run``) do this already.
    """
    try:
        yield
    except Exception as exc:
        if not _WRAPPERS & {c.__name__ for c in type(exc).__mro__}:
            raise
        err = from_worker_error(exc)
        if err is None:
            raise
        raise err from exc
