"""``blooml trace show`` / ``html`` and the merging of several nodes' traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _cart import cart_traces

from blooml import LocalNetwork, Program, bloom, channel, scratch, table
from blooml.cli import main
from blooml.cli._traces import load, merge
from blooml.engine.trace import Tracer


class Echo(Program):
    out = channel(["@to", "txt"])
    got = table(["to", "txt"])
    say = scratch(["to", "txt"])

    @bloom
    def rules(self):
        self.out < ~self.say
        self.got <= self.out


def test_merge_pairs_every_message_and_points_down(tmp_path: Path) -> None:
    files, _ = cart_traces(tmp_path)
    m = merge(load(files))
    assert set(m.nodes) == {"client", "server"}
    # three actions and a checkout from the client, one response: a message derived twice in
    # one tick (here by both sides of a join of two new scratches) is sent once
    assert len(m.arrows) == 5 and all(a["dst"] is not None for a in m.arrows)
    steps = {s["id"]: s for s in m.steps}
    for a in m.arrows:
        src, dst = steps[a["src"]], steps[a["dst"]]
        assert src["node"] != dst["node"]
        assert dst["row"] > src["row"]
        # the receipt without a known sender (held back by the network) got it from the merge
        assert all(r["from"] for r in dst["recvs"])
    for node in m.nodes:
        rows = [s["row"] for s in sorted(m.steps, key=lambda s: s["tick"]) if s["node"] == node]
        assert rows == sorted(set(rows))


def test_one_shared_file_merges_like_two(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    _, _ = cart_traces(one, shared=Tracer(one / "all.jsonl"))
    two = tmp_path / "two"
    two.mkdir()
    files, _ = cart_traces(two)
    a, b = merge(load([one / "all.jsonl"])), merge(load(files))
    assert len(a.steps) == len(b.steps) and len(a.arrows) == len(b.arrows) == 5

    def shape(m):  # type: ignore[no-untyped-def]
        st = {s["id"]: s for s in m.steps}
        return sorted(
            (st[x["src"]]["node"], st[x["src"]]["tick"], st[x["dst"]]["tick"], x["chan"])
            for x in m.arrows
        )

    assert shape(a) == shape(b)


def test_duplicates_and_lost_messages(tmp_path: Path) -> None:
    net = LocalNetwork(seed=0, dup_prob=1.0)
    a = Echo(addr="a", network=net, trace=str(tmp_path / "a.jsonl"))
    Echo(addr="b", network=net, trace=str(tmp_path / "b.jsonl"))
    a.say.insert([("b", "hi")])
    net.tick(2)
    m = merge(load([tmp_path / "a.jsonl", tmp_path / "b.jsonl"]))
    assert len(m.arrows) == 2 and sum(bool(x.get("dup")) for x in m.arrows) == 1
    # only the sender's trace: the message is drawn as never received
    m1 = merge(load([tmp_path / "a.jsonl"]))
    assert [x["dst"] for x in m1.arrows] == [None]


def test_show_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _ = cart_traces(tmp_path)
    assert main(["trace", "show", *files, "--ticks", "3"]) == 0
    out = capsys.readouterr().out
    assert "node client (CartClient)" in out and "node server (DisorderlyCart)" in out
    assert "ticks: 9 committed, 0 rolled back" in out
    assert "messages: 4 sent, 1 received" in out and "messages: 1 sent, 4 received" in out
    # the incremental engine derives a scratch's rows when they change, not every tick
    assert re.search(r"r4 +3 +3 +3  \[shopping_cart.py:\d+\] contents <= group", out)
    assert re.search(r"r5 +1 +1 +-  \[shopping_cart.py:\d+\] response_msg <~", out)
    assert "time per stratum: s0 " in out
    assert (
        "tick 0: in 2 (client_checkout insert 1, client_action insert 1), derived 2, sent 2" in out
    )
    assert "... 6 more (--ticks N)" in out


def test_show_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class Bad(Program):
        t = table(["x"])
        u = table(["x"])

        @bloom
        def rules(self):
            self.u <= self.t.map(lambda r: (1 // r.x,))

    f = tmp_path / "bad.jsonl"
    p = Bad(trace=str(f))
    p.t.insert([(0,)])
    with pytest.raises(ZeroDivisionError):
        p.tick()
    assert main(["trace", "show", str(f)]) == 0
    out = capsys.readouterr().out
    assert "0 committed, 1 rolled back" in out
    assert re.search(r"tick 0: ZeroDivisionError: .* in rule 0 \[test_trace_cli.py:\d+\]", out)
    assert "tick 0 ROLLED BACK:" in out


def test_bad_trace_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text('{"ev": "run", "node": "a"}\nnot json\n')
    assert main(["trace", "show", str(f)]) == 2
    assert f"{f}:2: not a JSON line" in capsys.readouterr().err
    f.write_text('{"a": 1}\n')
    assert main(["trace", "html", str(f), "-o", str(tmp_path / "t.html")]) == 2
    assert "not a blooml trace event" in capsys.readouterr().err
    assert main(["trace", "show", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read trace" in capsys.readouterr().err


def test_html_is_self_contained_and_embeds_the_data(tmp_path: Path) -> None:
    net = LocalNetwork()
    a = Echo(addr="a", network=net, trace=str(tmp_path / "a.jsonl"))
    Echo(addr="b", network=net, trace=str(tmp_path / "b.jsonl"))
    a.say.insert([("b", "</script><b>x")])
    net.tick(2)
    out = tmp_path / "t.html"
    assert main(["trace", "html", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                 "-o", str(out), "--title", "echo"]) == 0  # fmt: skip
    text = out.read_text()
    assert "<title>echo</title>" in text
    assert text.count("</script>") == 2  # the row's "</script>" is escaped in the JSON
    data = text.split('id="trace-data">', 1)[1].split("</script>", 1)[0]
    d = json.loads(data.replace("<\\/", "</"))
    assert set(d["nodes"]) == {"a", "b"} and len(d["arrows"]) == 1
    assert d["arrows"][0]["row"] == ["b", "</script><b>x"]
