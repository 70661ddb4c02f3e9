"""Loading a command-line target (``package.module:Attr`` or ``path/to/file.py:Attr``).

Shared by the subcommands that take a class to work on (``check-laws``, ``analyze``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["UsageError", "describe", "load_target"]


class UsageError(Exception):
    """A bad command-line target; the subcommand prints it and exits with status 2.

    Attributes:
        cause: the exception raised while importing the target, if that is what went wrong.
    """

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def load_target(target: str) -> Any:
    """Import ``package.module:Attr`` (or ``path/to/file.py:Attr``) and return the attribute.

    Raises:
        UsageError: the target is malformed, cannot be imported, or lacks the attribute; an
            exception raised while importing is kept as ``cause``.
    """
    module_part, sep, attr = target.rpartition(":")
    if not sep or not module_part or not attr:
        raise UsageError(
            f"target {target!r} must look like package.module:Class or path/to/file.py:Class"
        )
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        module = _load_file(Path(module_part))
    else:
        if os.getcwd() not in sys.path:  # like `python -m`: modules of the current directory
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            if exc.name and module_part.startswith(exc.name):
                raise UsageError(f"cannot import module {module_part!r}: {exc}") from None
            raise UsageError(f"importing {module_part!r} failed: {exc}") from None
        except Exception as exc:
            raise UsageError(
                f"importing {module_part!r} failed: {type(exc).__name__}: {exc}", cause=exc
            ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{module_part!r} has no attribute {attr!r}") from None
    return obj


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise UsageError(f"no such file: {str(path)!r}")
    name = path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # so the file can import its neighbours
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UsageError(
            f"running {str(path)!r} failed: {type(exc).__name__}: {exc}", cause=exc
        ) from None
    return module


def describe(obj: Any) -> str:
    """A short description of ``obj`` for error messages."""
    if isinstance(obj, type):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    return f"{obj!r:.60} (of type {type(obj).__qualname__})"
