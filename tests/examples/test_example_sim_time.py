"""examples/sim_time.py: the Lamport-clock rewrite and causal delivery, in a Simulation."""

from __future__ import annotations

import pytest
from _examples import load_example

st = load_example("sim_time")


@pytest.mark.parametrize("seed", [0, 1, 7, 42])
def test_the_lamport_receiver_never_sees_an_effect_before_its_cause(seed: int) -> None:
    out = st.lamport_demo(seed=seed)
    assert out["lamport"]["received"] == out["naive"]["received"] == 12
    assert out["lamport"]["before_cause"] == 0
    assert out["naive"]["before_cause"] > 0  # the literal @async rule does
    # the Lamport clock jumped past the beats of the slow local clock
    assert out["lamport"]["clock"].reveal() > out["beats"]


@pytest.mark.parametrize("seed", [0, 3, 9])
def test_causal_delivery_with_lvclock(seed: int) -> None:
    out = st.causal_demo(seed=seed)
    assert out["done"]
    assert out["delivered"] == [20, 20, 20]
    assert out["violations"] == []


def test_messages_did_arrive_out_of_causal_order() -> None:
    held = [st.causal_demo(seed=s)["held_back"] for s in range(4)]
    assert max(held) > 0  # the vector clocks had something to hold back


def test_runs_are_deterministic_and_main_prints(capsys: pytest.CaptureFixture[str]) -> None:
    assert st.lamport_demo(seed=5) == st.lamport_demo(seed=5)
    a, b = st.causal_demo(seed=5), st.causal_demo(seed=5)
    assert a == b
    out = st.main()
    assert out["lamport"]["lamport"]["before_cause"] == 0
    assert "answers delivered before their question: 0" in capsys.readouterr().out
