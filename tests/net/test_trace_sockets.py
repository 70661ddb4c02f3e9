"""Tick traces of nodes on real loopback sockets: receipts name their sender, and the viewer
pairs every message (the trace is recorded in the engine, whatever the transport)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _net import wait_until

from blooml import Program, bloom, channel, table
from blooml.cli._traces import load, merge
from blooml.net import node


class Relay(Program):
    msg = channel(["@dst", "src", "k"])
    out = table(["dst", "k"])
    got = table(["src", "k"])

    @bloom
    def rules(self):
        self.got <= self.msg.map(lambda m: (m.src, m.k))
        self.msg < ~self.out.map(lambda o: (o.dst, self.addr, o.k))


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_socket_nodes_trace_their_messages(
    transport: str, nodes: list[Any], tmp_path: Path
) -> None:
    fa, fb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = Relay(addr="127.0.0.1:0", transport=transport, trace=str(fa))
    b = Relay(addr="127.0.0.1:0", transport=transport, trace=str(fb))
    nodes += [a, b]
    a.start()
    b.start()
    a.sync_do(lambda p: p.out.insert([(b.addr, i) for i in range(3)]))
    wait_until(lambda: len(b.sync_do(lambda q: list(q.got))) == 3)
    node(a).stop(5.0)
    node(b).stop(5.0)
    recvs = [json.loads(ln) for ln in fb.read_text().splitlines() if '"ev":"recv"' in ln]
    assert len(recvs) == 3
    assert {r["from"] for r in recvs} == {a.addr}  # the socket transport names the sender
    sends = [json.loads(ln) for ln in fa.read_text().splitlines() if '"ev":"send"' in ln]
    assert sorted(s["key"] for s in sends) == sorted(r["key"] for r in recvs)
    m = merge(load([fa, fb]))
    assert len(m.arrows) == 3 and all(x["dst"] is not None for x in m.arrows)
    steps = {s["id"]: s for s in m.steps}
    assert all(steps[x["dst"]]["row"] > steps[x["src"]]["row"] for x in m.arrows)
    # the run events name the bound ports, not 127.0.0.1:0
    assert set(m.nodes) == {a.addr, b.addr}
    assert all(run.get("program") == "Relay" for run in m.nodes.values())
