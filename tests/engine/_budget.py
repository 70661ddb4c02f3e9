"""Test helper: lift a recursive view's retraction budget (``DRed``)."""

from __future__ import annotations

import pytest

from blooml.engine._dred import DRed


def lift_retraction_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let every retraction run to the end instead of falling back to re-deriving, for tests
    that count what Backward/Forward does (whether a small view re-derives faster is a
    matter of CPU time, see ``DRed.limit_share``). The floor is lifted too (10 s): the cap
    under it subtracts the measured cost of the versions (``over``), which a preemption
    during one ``settle`` can inflate past a small view's re-derivation, leaving only the
    0.2 ms floor (the retraction fell back once in CI)."""
    monkeypatch.setattr(DRed, "limit_share", 100.0)
    monkeypatch.setattr(DRed, "limit_fallback", 1000.0)
    monkeypatch.setattr(DRed, "limit_floor", 10.0)
    monkeypatch.setattr(DRed, "limit_floor_found", 10.0)
