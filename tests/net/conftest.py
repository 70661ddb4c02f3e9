"""Network tests: nodes on 127.0.0.1 only, stopped after each test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def nodes() -> Iterator[list[Any]]:
    """A list to put programs in; each is stopped at teardown."""
    made: list[Any] = []
    yield made
    from blooml.net import node

    for p in made:
        with contextlib.suppress(Exception):  # best effort: a test may have stopped it
            node(p).stop(5.0)
