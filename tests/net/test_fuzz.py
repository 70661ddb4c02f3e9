"""Fuzzing nodes: garbage never crashes a node nor changes its state (a short CI run; the
100,000-datagram run is ``benchmarks/bench_net_fuzz.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blooml.net import node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _examples import load_benchmark

fz = load_benchmark("bench_net_fuzz")


def test_fuzz_live_nodes_over_udp() -> None:
    keyed = fz.fuzz(1_000, seed=3, key=fz.KEY)
    assert keyed["alive"] and keyed["errors"] == 0
    assert keyed["counted"] == keyed["sent"] == 1_000
    assert keyed["received"] == 0 and keyed["unchanged"]
    open_ = fz.fuzz(1_000, seed=4, key=None)
    assert open_["alive"] and open_["errors"] == 0
    assert open_["counted"] == open_["sent"]
    assert 0 < open_["received"] <= open_["accepted_predicted"]
    assert open_["state_as_predicted"]


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=5)
    | st.binary(max_size=5)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=6)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=80),
        msgpack_values.map(msgpack.packb),
        st.tuples(st.integers(0, 3), msgpack_values, msgpack_values).map(
            lambda t: msgpack.packb([t[0], msgpack.packb(t[1]), t[2]])
        ),
        st.tuples(msgpack_values, msgpack_values).map(
            lambda t: msgpack.packb(
                [1, msgpack.packb(["127.0.0.1:9", 0, [["msg", [t[0], t[1]]]]]), None]
            )
        ),
    )
)
def test_generated_datagrams_are_accepted_or_counted(data: bytes) -> None:
    p = fz.Target(addr="127.0.0.1:0")
    n = node(p)
    try:
        before = n.stats()
        ok = n.accept(data)
        after = n.stats()
        if ok:
            assert after["received"] == before["received"] + 1
        else:
            assert after["dropped_total"] == before["dropped_total"] + 1
            assert not p._rt.has_pending()  # nothing queued: the state cannot change
        p.tick()  # whatever was accepted applies cleanly
        assert n.stats()["errors"] == 0
    finally:
        n.stop()


@pytest.mark.slow
def test_fuzz_live_nodes_longer() -> None:
    for key in (fz.KEY, None):
        r = fz.fuzz(20_000, seed=99, key=key)
        assert r["alive"] and r["errors"] == 0 and r["counted"] == r["sent"]
        assert r["state_as_predicted"] and (key is None or r["unchanged"])
