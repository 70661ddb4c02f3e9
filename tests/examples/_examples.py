"""Load the scripts in ``examples/`` as modules (they are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BENCHMARKS = ROOT / "benchmarks"


def _load(directory: Path, name: str, prefix: str) -> ModuleType:
    mod_name = f"{prefix}_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, directory / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"cannot load {directory / name}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return module


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (cached)."""
    return _load(EXAMPLES, name, "blooml_example")


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (cached); its directory goes on ``sys.path`` for
    ``_bloom_util``."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return _load(BENCHMARKS, name, "blooml_bench")


class FakeClock:
    """A settable clock (seconds) for programs with periodic or TTL collections."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
