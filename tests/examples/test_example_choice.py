"""examples/choice.py: choose keeps one tuple per key, deterministically from its seed."""

from __future__ import annotations

from _examples import load_example
from hypothesis import given
from hypothesis import strategies as st

ch = load_example("choice")


def test_assignment_respects_the_functional_dependency() -> None:
    capable: dict[str, set[str]] = {}
    for task, worker in ch.CAN_DO:
        capable.setdefault(task, set()).add(worker)
    picks = set()
    for seed in range(10):
        a = ch.assignment(seed)
        assert set(a) == set(capable)  # every task exactly once
        assert all(a[t] in capable[t] for t in a)
        assert ch.assignment(seed) == a  # replayable
        picks.add(tuple(sorted(a.items())))
    assert len(picks) > 1, "the seed never changes the choice"


@given(st.integers(0, 10_000))
def test_async_as_choice_monotone_result_is_seed_independent(seed: int) -> None:
    msgs = ["m1", "m2", "m3"]
    r = ch.async_run(seed, msgs, range(1, 4))
    assert r["seen"] == set(msgs)
    # sent in tick 0 with a delay of 1..3 ticks
    assert all(1 <= t <= 3 for t in r["ticks"].values())
    assert ch.async_run(seed, msgs, range(1, 4)) == r


def test_first_arrival_depends_on_the_choice() -> None:
    firsts = {
        tuple(ch.async_run(seed, ["m1", "m2", "m3", "m4"], range(1, 5))["first"])
        for seed in range(12)
    }
    assert len(firsts) > 1


def test_main() -> None:
    out = ch.main()
    assert set(out["assignments"]) == {0, 1, 2}
    assert all(r["seen"] == {"m1", "m2", "m3", "m4"} for r in out["async"].values())
