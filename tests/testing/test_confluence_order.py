"""check_confluence at its default settings finds the bugs that timing hides (issue 20, bug 6),
passes confluent programs, and the CALM analysis lists ``<-``/``<+-`` rules fed by a channel."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, channel, table
from blooml.cli import main
from blooml.errors import ConfluenceViolation
from blooml.testing import check_confluence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import order_programs as op
from _examples import load_example

HERE = Path(__file__).resolve().parent / "order_programs.py"


@pytest.mark.parametrize("seed", range(10))
def test_the_timeout_election_is_caught_at_the_default_settings(seed: int) -> None:
    with pytest.raises(ConfluenceViolation) as ei:
        check_confluence(op.election_nodes, op.ELECTION_INPUTS, outputs=["leader"], seed=seed)
    v = ei.value
    ref, bad = v.outcomes
    leaders = lambda o: {w for a in ("a", "b") for (w,) in o[a]["leader"]}  # noqa: E731
    assert leaders(ref) == {"a"}
    assert leaders(bad) == {"a", "b"}  # two leaders
    (point,) = v.points_of_order["Candidate"]
    assert "leader <= notin(due, heard" in point and "after channel leader_chn" in point
    assert "notin(due, heard" in str(v)
    # no until: the run went on past the timers (the input fell quiet at t=0)
    assert v.schedules[0] == ["t=1.000 a -> b [leader_chn] delay 0.000"]


def test_the_last_writer_register_is_caught_and_its_report_names_the_replacement() -> None:
    with pytest.raises(ConfluenceViolation) as ei:
        check_confluence(
            op.client_server(op.LastWriterRegister), op.REGISTER_INPUTS, outputs=["register"]
        )
    text = str(ei.value)
    assert "(none)" not in text
    (point,) = ei.value.points_of_order["LastWriterRegister"]
    assert "register <+- " in point and "after channel write_chn" in point


def test_the_add_remove_cart_is_caught_and_its_report_names_the_deletion() -> None:
    with pytest.raises(ConfluenceViolation) as ei:
        check_confluence(op.client_server(op.AddRemoveCart), op.CART_INPUTS, outputs=["cart"])
    ref, bad = ei.value.outcomes
    assert ref["server"]["cart"] == [("pear",)]
    assert bad["server"]["cart"] == [("apple",), ("pear",)]  # the removal came first
    (point,) = ei.value.points_of_order["AddRemoveCart"]
    assert "cart <- " in point and "after channel remove_chn" in point


def test_calm_analysis_lists_deletions_and_replacements_fed_by_a_channel() -> None:
    cart = op.AddRemoveCart.ir().nonmonotone_after_channels()
    assert [(r.head, r.op, chans) for r, chans in cart] == [("cart", "<-", ["remove_chn"])]
    reg = op.LastWriterRegister.ir().nonmonotone_after_channels()
    assert [(r.head, r.op, chans) for r, chans in reg] == [("register", "<+-", ["write_chn"])]
    # the client only forwards: nothing downstream of its channels
    assert op.Client.ir().nonmonotone_after_channels() == []


def test_blooml_analyze_lists_the_deletion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", f"{HERE}:AddRemoveCart"]) == 0
    out = capsys.readouterr().out
    assert "every rule downstream of a channel is monotone" not in out
    assert "points of order (non-monotone after a channel" in out
    assert "cart <- map(remove_chn" in out
    assert main(["analyze", f"{HERE}:LastWriterRegister"]) == 0
    assert "register <+- map(write_chn" in capsys.readouterr().out


def test_the_plot_marks_the_deletion_as_a_point_of_order() -> None:
    dot = op.AddRemoveCart.ir().to_dot()
    line = next(ln for ln in dot.splitlines() if '"s_remove_chn" -> "s_cart"' in ln)
    assert "point of order" in line
    add = next(ln for ln in dot.splitlines() if '"s_add_chn" -> "s_cart"' in ln)
    assert "point of order" not in add


# -- no false positives: confluent programs pass at the default settings ----------------------


def test_monotone_heartbeats_on_a_timer_are_confluent() -> None:
    report = check_confluence(op.heartbeat_nodes, {}, outputs=["heard"], until=1.2)
    assert report.max_delay == 0.5  # the timer's 0.2 s period, at least 0.5
    assert {a: set(o["heard"].reveal()) for a, o in report.outcome.items()} == {
        "h0": {"h1", "h2"},
        "h1": {"h0", "h2"},
        "h2": {"h0", "h1"},
    }
    assert report.points_of_order == {"Heartbeats": []}


def test_sealed_and_gossiping_programs_are_confluent_at_the_defaults() -> None:
    cart = load_example("shopping_cart")
    inputs: list[Any] = [(0.0, "client", "client_checkout", [("server", "client", "s1", 5)])]
    for i, (reqid, item, qty) in enumerate(cart.SESSION_ACTIONS):
        inputs.append(
            (0.01 * i, "client", "client_action", [("server", "client", "s1", reqid, item, qty)])
        )

    def carts(sim: Any) -> list[Any]:
        return [
            cart.CartClient(addr="client", network=sim),
            cart.DisorderlyCart(addr="server", network=sim),
        ]

    report = check_confluence(carts, inputs, outputs={"client": ["response"]})
    assert report.runs > 100
    assert report.points_of_order["DisorderlyCart"]  # ordered by its seal

    crdt = load_example("crdt_cart")
    report = check_confluence(crdt.crdt_nodes, crdt.crdt_inputs(), outputs=["cart"], until=4.0)
    assert report.max_delay == 0.5 and report.points_of_order["CrdtCart"] == []


def test_an_explicit_max_delay_still_wins() -> None:
    report = check_confluence(
        op.heartbeat_nodes, {}, outputs=["heard"], until=2.0, max_delay=0.05, runs=5
    )
    assert report.max_delay == 0.05


def test_a_long_ttl_does_not_stretch_the_delays_past_five_seconds() -> None:
    class Cache(Program):
        add_chn = channel(["@to", "item"])
        cache = table(["item"], ttl=3600)

        # fmt: off
        @bloom
        def rules(self) -> None:
            self.cache <= self.add_chn.map(lambda m: (m.item,))
        # fmt: on

    report = check_confluence(
        op.client_server(Cache), [(0.0, "client", "add", [("server", "x")])], runs=5
    )
    assert report.max_delay == 5.0
    assert report.outcome["server"]["cache"] == [("x",)]
