"""Helpers for the network tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(pred: Callable[[], Any], timeout: float = 5.0, every: float = 0.01) -> Any:
    """Poll ``pred`` until it is truthy (return it) or ``timeout`` s pass (fail)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)
