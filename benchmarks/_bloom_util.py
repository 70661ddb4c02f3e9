"""Shared helpers of the Bloom^L benchmarks: timing, peak memory, loading examples, verdicts."""

from __future__ import annotations

import gc
import importlib.util
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (the benchmarks measure the example programs themselves)."""
    mod_name = f"blooml_example_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Run ``fn`` once after a full collection; return (seconds, result)."""
    gc.collect()
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """The fastest of ``repeat`` runs (the least disturbed by other processes) and its result."""
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        t, result = timed(fn)
        best = min(best, t)
    return best, result


def best_of_pair(
    repeat: int, baseline: Callable[[], T], engine: Callable[[], T]
) -> tuple[float, T, float, T]:
    """Best times of ``baseline`` and ``engine``, run alternately ``repeat`` times each so that
    a change in machine load affects both alike. Returns (t_base, result, t_engine, result)."""
    tb = te = float("inf")
    rb: Any = None
    re_: Any = None
    for _ in range(repeat):
        t, rb = timed(baseline)
        tb = min(tb, t)
        t, re_ = timed(engine)
        te = min(te, t)
    return tb, rb, te, re_


def timed_cpu(fn: Callable[[], T]) -> tuple[float, float, T]:
    """Run ``fn`` once after a full collection; return (process CPU seconds, wall seconds,
    result). CPU time is what the run itself cost, whatever else loads the machine."""
    gc.collect()
    c0 = time.process_time()
    t0 = time.perf_counter()
    result = fn()
    t1 = time.perf_counter()
    return time.process_time() - c0, t1 - t0, result


def best_of_pair_cpu(
    repeat: int, baseline: Callable[[], T], engine: Callable[[], T]
) -> tuple[tuple[float, float], T, tuple[float, float], T]:
    """Like ``best_of_pair``, but each side's time is ``(best CPU seconds, best wall
    seconds)`` (the two minima may come from different runs).

    Every timed run starts from the same heap: no earlier result is alive (it is dropped,
    untimed, right after its run). A held result would tax the other side: the cyclic
    collector traverses every tracked object, so a run that triggers a full collection pays
    for whatever the previous run left behind. The results returned come from one more,
    untimed, call of each.
    """
    bc = bw = ec = ew = float("inf")
    for _ in range(repeat):
        c, w, _ = timed_cpu(baseline)
        _ = None
        bc, bw = min(bc, c), min(bw, w)
        c, w, _ = timed_cpu(engine)
        _ = None
        ec, ew = min(ec, c), min(ew, w)
    return (bc, bw), baseline(), (ec, ew), engine()


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated by Python while ``fn`` runs (tracemalloc; run apart from timing,
    because tracing slows allocation down)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def mib(n: int) -> str:
    """``n`` bytes in MiB, for printing."""
    return f"{n / 2**20:.1f} MiB"


def header(title: str, params: dict[str, Any]) -> None:
    """Print the benchmark's title, the machine and its parameters."""
    print(f"== {title}")
    print(f"   python {platform.python_version()} on {platform.machine()}, {platform.system()}")
    for k, v in params.items():
        print(f"   {k}: {v}")


class Verdicts:
    """Collects target checks; ``exit_code()`` is 1 if any was missed."""

    def __init__(self) -> None:
        self.missed: list[str] = []

    def check(self, name: str, ok: bool, detail: str) -> None:
        """Record and print one check."""
        print(f"   [{'ok' if ok else 'MISSED'}] {name}: {detail}")
        if not ok:
            self.missed.append(name)

    def unjudged(self, name: str, detail: str, why: str) -> None:
        """Print a check this run does not judge (a smoke run too small for it), saying
        why, so that its number is never read as a target met."""
        print(f"   [not judged] {name}: {detail} ({why})")

    def exit_code(self) -> int:
        """0 when every target was met, else 1 (after printing which were missed)."""
        if self.missed:
            print(f"targets missed: {', '.join(self.missed)}")
            return 1
        print("all targets met")
        return 0
