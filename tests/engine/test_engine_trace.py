"""Tick traces: ``P(trace=...)`` writes the documented JSON-lines events."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from blooml import (
    LocalNetwork,
    Program,
    ProgramError,
    bloom,
    channel,
    lmax,
    periodic,
    scratch,
    table,
)
from blooml.engine import runtime as runtime_mod
from blooml.engine.trace import SCHEMA_VERSION, Tracer, message_key


class Paths(Program):
    link = table(["a", "b"])
    path = table(["a", "b"])
    top = lmax()
    div = 1

    @bloom
    def rules(self):
        self.path <= self.link
        self.path <= self.link.join(self.path, self.link.b == self.path.a).map(
            lambda lk, p: (lk.a, p.b)
        )
        self.top <= self.link.map(lambda lk: lk.b // self.div)


class Ping(Program):
    ping = channel(["@to", "frm", "n"])
    pong = channel(["@to", "frm", "n"])
    got = table(["frm", "n"])
    start = scratch(["to", "n"])

    @bloom
    def rules(self):
        self.ping < ~self.start.map(lambda s: (s.to, self.addr_name, s.n))
        self.pong < ~self.ping.map(lambda p: (p.frm, p.to, p.n))
        self.got <= self.pong.map(lambda p: (p.frm, p.n))

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.addr_name = kw["addr"]


def _events(path: Path | str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_schema_of_one_program(tmp_path: Path) -> None:
    f = tmp_path / "run.jsonl"
    p = Paths(addr="solo", trace=str(f))
    p.link.insert([(i, i + 1) for i in range(8)])
    p.tick()
    p.tick()
    ev = _events(f)
    run = ev[0]
    assert run["ev"] == "run" and run["v"] == SCHEMA_VERSION and run["node"] == "solo"
    assert run["program"] == "Paths" and run["limit"] == 5
    assert [r["index"] for r in run["rules"]] == [0, 1, 2]
    assert run["rules"][1]["head"] == "path" and run["rules"][1]["where"].startswith(
        "test_engine_trace.py:"
    )
    assert all(e["node"] == "solo" for e in ev)
    assert all("tick" in e for e in ev[1:])
    kinds = [e["ev"] for e in ev if e.get("tick") == 0]
    assert kinds[0] == "tick" and kinds[-1] == "end"
    (inp,) = [e for e in ev if e["ev"] == "input"]
    assert inp == {
        "ev": "input",
        "node": "solo",
        "tick": 0,
        "coll": "link",
        "kind": "insert",
        "n": 8,
        "rows": [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]],
        "more": 3,
    }
    derives = {e["rule"]: e for e in ev if e["ev"] == "derive" and e["tick"] == 0}
    # the transitive closure of a chain of 9 nodes: 36 paths
    assert derives[0]["n"] == 8 and derives[0]["new"] == 8
    assert derives[0]["new"] + derives[1]["new"] == 36
    assert derives[1]["evals"] > 1 and len(derives[1]["rows"]) == 5
    assert derives[1]["more"] == derives[1]["n"] - 5
    assert derives[2]["head"] == "top" and derives[2]["n"] == 8
    strata = [e for e in ev if e["ev"] == "stratum" and e["tick"] == 0]
    assert [s["stratum"] for s in strata] == [0, "next"]
    assert all(s["ms"] >= 0 for s in strata)
    end0 = next(e for e in ev if e["ev"] == "end" and e["tick"] == 0)
    assert end0["derived"] == sum(d["n"] for d in derives.values())
    # tick 1 took nothing and derived nothing: rules that only see deltas stay quiet
    assert not [e for e in ev if e["ev"] in ("input", "derive") and e["tick"] == 1]


def test_error_and_rollback_then_retry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = tmp_path / "run.jsonl"
    p = Paths(addr="solo", trace=Tracer(f, limit=1))
    p.div = 0
    p.link.insert([(1, 2)])
    with caplog.at_level(logging.WARNING, logger="blooml"), pytest.raises(ZeroDivisionError):
        p.tick()
    (rec,) = [r for r in caplog.records if r.name == "blooml.engine"]
    assert rec.levelno == logging.WARNING
    assert "solo tick 0 rolled back: ZeroDivisionError" in rec.getMessage()
    assert "rule 2 (test_engine_trace.py:" in rec.getMessage()
    p.div = 1
    p.tick()
    ev = _events(f)
    err = next(e for e in ev if e["ev"] == "error")
    assert err["tick"] == 0 and err["rule"] == 2 and err["type"] == "ZeroDivisionError"
    assert err["where"].startswith("test_engine_trace.py:")
    rb = [i for i, e in enumerate(ev) if e["ev"] == "rollback"]
    assert len(rb) == 1 and ev[rb[0]]["tick"] == 0
    # the retry is tick 0 again, takes the same input and commits
    retry = ev[rb[0] + 1 :]
    assert retry[0]["ev"] == "tick" and retry[0]["tick"] == 0
    assert any(e["ev"] == "input" and e["n"] == 1 for e in retry)
    assert retry[-1]["ev"] == "end" and retry[-1]["tick"] == 0
    assert p.top.value == lmax(2)


def test_sends_and_receipts_carry_peer_and_identity(tmp_path: Path) -> None:
    shared = Tracer(tmp_path / "net.jsonl")
    net = LocalNetwork()
    a = Ping(addr="a", network=net, trace=shared)
    Ping(addr="b", network=net, trace=shared)
    a.start.insert([("b", 1), ("b", 2)])
    net.tick(3)
    assert sorted(tuple(r) for r in a.got) == [("b", 1), ("b", 2)]
    ev = _events(tmp_path / "net.jsonl")
    assert {e["node"] for e in ev if e["ev"] == "run"} == {"a", "b"}
    sends = [e for e in ev if e["ev"] == "send"]
    recvs = [e for e in ev if e["ev"] == "recv"]
    assert len(sends) == 4 and len(recvs) == 4
    s0 = next(s for s in sends if s["node"] == "a" and s["chan"] == "ping" and s["row"][2] == 1)
    assert s0["to"] == "b" and s0["tick"] == 0 and s0["msg"].startswith("a#0.")
    r0 = next(r for r in recvs if r["msg"] == s0["msg"])
    assert r0["node"] == "b" and r0["from"] == "a" and r0["key"] == s0["key"]
    assert r0["row"] == ["b", "a", 1] and r0["tick"] == 0  # b ticks after a in the round
    back = next(r for r in recvs if r["node"] == "a")
    assert back["from"] == "b" and back["tick"] == 1
    assert s0["key"] == message_key("ping", "b", ("b", "a", 1))


def test_loopback_and_explicit_sender(tmp_path: Path) -> None:
    f = tmp_path / "loop.jsonl"
    p = Ping(addr="me", trace=str(f))
    p.start.insert([("me", 7)])
    p.tick(3)
    # a transport that knows the sender (a socket node) passes it to receive_batch
    p._rt.receive_batch("far:9000", [("pong", [("me", "far", 9)])])
    ev = _events(f)
    recvs = [e for e in ev if e["ev"] == "recv"]
    assert [r["from"] for r in recvs] == ["me", "me", "far:9000"]
    assert recvs[-1]["msg"] is None and recvs[-1]["tick"] == 3
    assert recvs[-1]["key"] == message_key("pong", "me", ("me", "far", 9))


def test_delayed_message_has_no_sender_but_same_key(tmp_path: Path) -> None:
    net = LocalNetwork(seed=1, max_delay=3)
    a = Ping(addr="a", network=net, trace=str(tmp_path / "a.jsonl"))
    Ping(addr="b", network=net, trace=str(tmp_path / "b.jsonl"))
    a.start.insert([("b", n) for n in range(6)])
    net.tick(12)
    assert len(list(a.got)) == 6
    sends = [e for e in _events(tmp_path / "a.jsonl") if e["ev"] == "send"]
    recvs = [e for e in _events(tmp_path / "b.jsonl") if e["ev"] == "recv"]
    assert sorted(s["key"] for s in sends) == sorted(r["key"] for r in recvs)
    assert any(r["from"] is None for r in recvs)  # held back: delivered outside a's tick


def test_periodic_input_kind(tmp_path: Path) -> None:
    class Tick(Program):
        beat = periodic(1.0)
        seen = table(["id"])

        @bloom
        def rules(self):
            self.seen <= self.beat.map(lambda b: (b.ident,))

    now = [0.0]
    f = tmp_path / "p.jsonl"
    p = Tick(clock=lambda: now[0], trace=str(f))
    now[0] = 1.5
    p.tick()
    (tick,) = [e for e in _events(f) if e["ev"] == "tick"]
    assert tick["now"] == 1.5  # the program's clock (a fake one here)
    (inp,) = [e for e in _events(f) if e["ev"] == "input"]
    assert inp["kind"] == "periodic" and inp["coll"] == "beat" and inp["rows"][0][0] == 0


def test_trace_to_open_file_and_bad_arguments() -> None:
    buf = io.StringIO()
    p = Paths(trace=buf)
    p.link.insert([(1, 2)])
    p.tick()
    assert json.loads(buf.getvalue().splitlines()[-1])["ev"] == "end"
    with pytest.raises(ProgramError, match="trace must be a file path"):
        Paths(trace=42)
    with pytest.raises(ProgramError, match="limit must be a non-negative int"):
        Tracer(io.StringIO(), limit=-1)


def test_nothing_recorded_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("a TickRecorder was made although tracing and DEBUG are off")

    monkeypatch.setattr(runtime_mod, "TickRecorder", boom)
    logging.getLogger("blooml").setLevel(logging.NOTSET)
    p = Paths()
    p.link.insert([(1, 2), (2, 3)])
    p.tick()
    assert len(list(p.path)) == 3


def test_debug_log_per_tick(caplog: pytest.LogCaptureFixture) -> None:
    p = Paths(addr="dbg")
    p.link.insert([(1, 2), (2, 3)])
    with caplog.at_level(logging.DEBUG, logger="blooml.engine"):
        p.tick()
    (rec,) = [r for r in caplog.records if r.name == "blooml.engine"]
    assert rec.levelno == logging.DEBUG
    msg = rec.getMessage()
    assert msg.startswith("dbg tick 0: 3 rules fired (r0:2, r1:1, r2:2), 5 rows derived")
    assert msg.endswith(" ms")


def test_nothing_at_info_by_default(caplog: pytest.LogCaptureFixture) -> None:
    p = Paths()
    p.link.insert([(1, 2)])
    with caplog.at_level(logging.INFO, logger="blooml"):
        p.tick(3)
    assert not caplog.records
