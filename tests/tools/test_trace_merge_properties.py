"""Properties of merging traces: on any network (delays, duplicates, several nodes), every
message sent is drawn to a tick that took it, arrows point down, each node's ticks go down."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from blooml import LocalNetwork, Program, bloom, channel, table
from blooml.cli._traces import load, merge
from blooml.engine.trace import Tracer


class Gossip(Program):
    """Forwards each new fact once to the next node of a ring (``next`` holds its address)."""

    fact = channel(["@to", "n"])
    seen = table(["n"])
    nxt = table(["to"])
    start = table(["n"])

    @bloom
    def rules(self):
        self.seen <= self.fact.map(lambda f: (f.n,))
        self.seen <= self.start
        self.fact < ~self.start.join(self.nxt).map(lambda s, x: (x.to, s.n))
        self.fact < ~self.fact.notin(self.seen, lambda f, s: f.n == s.n).join(self.nxt).map(
            lambda f, x: (x.to, f.n)
        )


@settings(max_examples=25, deadline=None)
@given(
    nodes=st.integers(2, 4),
    facts=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    seed=st.integers(0, 10_000),
    max_delay=st.integers(0, 3),
    dup=st.sampled_from([0.0, 0.5]),
    shared=st.booleans(),
)
def test_merge_pairs_every_message_and_keeps_causality(
    nodes: int, facts: list[int], seed: int, max_delay: int, dup: float, shared: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        net = LocalNetwork(seed, max_delay=max_delay, dup_prob=dup)
        one = Tracer(folder / "all.jsonl") if shared else None
        names = [f"n{i}" for i in range(nodes)]
        progs = [Gossip(addr=a, network=net, trace=one or folder / f"{a}.jsonl") for a in names]
        for i, p in enumerate(progs):
            p.nxt.insert([(names[(i + 1) % nodes],)])
        progs[0].start.insert([(n,) for n in facts])
        for _ in range(40):
            net.tick()
            if net.quiescent() and all(len(list(p.seen)) == len(set(facts)) for p in progs):
                break
        net.tick(max_delay + 2)  # deliver what is held back and take it in
        assert net.quiescent()
        files = [folder / "all.jsonl"] if shared else [folder / f"{a}.jsonl" for a in names]
        m = merge(load(files))
        steps = {s["id"]: s for s in m.steps}
        sent = sum(len(s["sends"]) for s in m.steps)
        received = sum(len(s["recvs"]) for s in m.steps)
        assert sent == net.sent
        # every send is drawn to a receipt; duplicates add arrows, never lose one
        assert all(a["dst"] is not None for a in m.arrows)
        assert len(m.arrows) == received >= sent
        for a in m.arrows:
            src, dst = steps[a["src"]], steps[a["dst"]]
            assert dst["node"] == a["to"] and dst["row"] > src["row"]
            assert any(r["key"] == a["key"] for r in dst["recvs"])
        for name in names:
            own = sorted((s for s in m.steps if s["node"] == name), key=lambda s: s["tick"])
            rows = [s["row"] for s in own]
            assert rows == sorted(rows) and len(set(rows)) == len(rows)
        assert all(r["from"] for s in m.steps for r in s["recvs"])
