"""The wire's limits (issue 20): fragments, the replay window, queue and frame bounds, stop(),
kernel drops, name resolution. Loopback only, bounded in time."""

from __future__ import annotations

import hmac
import importlib
import os
import socket
import struct
import threading
import time
from hashlib import sha256
from typing import Any

import msgpack
import pytest
from _net import wait_until
from hypothesis import given
from hypothesis import strategies as st
from test_node import Echo, got

from blooml.errors import CodecError, ProgramError
from blooml.net import decode_envelope, encode_envelope, encode_row, node
from blooml.net._fragment import FRAGMENT_OVERHEAD, Reassembler, fragment
from blooml.net.codec import ReplayGuard

# the node's transport (name resolution) lives in blooml.net._transport
transport_mod = importlib.import_module("blooml.net._transport")


def _env(n: int = 1, key: bytes | None = b"k", ts: float | None = None) -> bytes:
    return encode_envelope("a:1", [("ch", [encode_row((n,))])], key=key, ts=ts)


# -- the replay window ------------------------------------------------------------------------


def test_a_datagram_stamped_ahead_is_remembered_until_its_timestamp_leaves_the_window() -> None:
    guard = ReplayGuard(window=30.0)
    now = 1_000_000.0
    data = _env(ts=now + 25.0)  # a sender whose clock runs 25 s ahead
    decode_envelope(data, b"k", guard, now=now)
    with pytest.raises(CodecError) as ei:  # 31 s later: still within its window
        decode_envelope(data, b"k", guard, now=now + 31.0)
    assert ei.value.reason == "replay"
    with pytest.raises(CodecError) as ei:  # once forgotten, it is stale
        decode_envelope(data, b"k", guard, now=now + 56.0)
    assert ei.value.reason == "stale"


def test_a_full_replay_guard_never_accepts_a_forgotten_signature() -> None:
    guard = ReplayGuard(window=30.0, capacity=10)
    now = 1_000_000.0
    sent = [_env(i, ts=now - 10 + i * 0.01) for i in range(25)]
    for data in sent:
        decode_envelope(data, b"k", guard, now=now)
    assert len(guard) == 10
    for data in sent:  # the 15 forgotten ones included
        with pytest.raises(CodecError) as ei:
            decode_envelope(data, b"k", guard, now=now)
        assert ei.value.reason == "replay"
    decode_envelope(_env(99, ts=now), b"k", guard, now=now)  # newer traffic still passes


def test_a_replay_is_refused_before_its_rows_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = ReplayGuard()
    data = encode_envelope("a:1", [("ch", [encode_row((i,)) for i in range(1000)])], key=b"k")
    decode_envelope(data, b"k", guard)
    calls: list[int] = []
    real = msgpack.unpackb  # what decodes the rows (the envelope calls it, not _Decoder.unpack)
    monkeypatch.setattr(
        msgpack, "unpackb", lambda d, *a, **k: calls.append(len(d)) or real(d, *a, **k)
    )
    with pytest.raises(CodecError, match="received before"):
        decode_envelope(data, b"k", guard)
    assert calls == []


# -- bound envelopes: sender, destination and sequence are signed (issue 25, item 5) ----------


def _bound(dest: str, seq: int = 1, ts: float | None = None, key: bytes | None = b"k") -> bytes:
    return encode_envelope("a:1", [("ch", [encode_row((7,))])], key=key, ts=ts, dest=dest, seq=seq)


def test_a_datagram_captured_on_its_way_to_b_is_refused_at_c() -> None:
    data = _bound("b:2")
    env = decode_envelope(data, b"k", ReplayGuard(), dest="b:2")
    assert (env.sender, env.dest, env.seq, env.batches) == ("a:1", "b:2", 1, (("ch", ((7,),)),))
    with pytest.raises(CodecError) as ei:  # C has its own guard: it never saw it
        decode_envelope(data, b"k", ReplayGuard(), dest="c:3")
    assert ei.value.reason == "misdirected" and ei.value.value == "b:2"
    with pytest.raises(CodecError) as ei:  # a predicate or a set of addresses works alike
        decode_envelope(data, b"k", ReplayGuard(), dest={"c:3", "[::1]:3"})
    assert ei.value.reason == "misdirected"
    decode_envelope(data, b"k", ReplayGuard(), dest=lambda to: to.endswith(":2"))


@given(data=st.data(), field=st.sampled_from([0, 1, 2]))
def test_the_signature_covers_sender_destination_and_sequence(data: Any, field: int) -> None:
    """Rewriting the sender (0), destination (1) or sequence (2), keeping the signature, is a
    bad signature."""
    version, body, sig = msgpack.unpackb(_bound("b:2", seq=5), raw=False)
    fields = msgpack.unpackb(body, raw=False, strict_map_key=False)
    new = data.draw(st.integers(0, 2**40) if field == 2 else st.text(max_size=12))
    if new == fields[field]:
        return
    fields[field] = new
    forged = msgpack.packb([version, msgpack.packb(fields), sig])
    with pytest.raises(CodecError) as ei:
        decode_envelope(forged, b"k", dest=lambda to: True)
    assert ei.value.reason == "bad_signature"


def test_two_datagrams_with_the_same_rows_in_one_millisecond_are_both_accepted() -> None:
    """Their sequence numbers differ, so their signatures do: not a replay (it was one)."""
    guard, now = ReplayGuard(), 1_000_000.0
    for seq in (1, 2):
        decode_envelope(_bound("b:2", seq=seq, ts=now), b"k", guard, now=now, dest="b:2")
    with pytest.raises(CodecError) as ei:
        decode_envelope(_bound("b:2", seq=2, ts=now), b"k", guard, now=now, dest="b:2")
    assert ei.value.reason == "replay"


def test_format_version_1_is_refused_with_a_key_and_read_without() -> None:
    body = msgpack.packb(["a:1", 5, [["ch", [[7]]]]])
    old = msgpack.packb([1, body, hmac.new(b"k", body, sha256).digest()])
    with pytest.raises(CodecError) as ei:
        decode_envelope(old, b"k", dest="b:2")
    assert ei.value.reason == "version" and "does not bind its destination" in str(ei.value)
    env = decode_envelope(msgpack.packb([1, body, None]), None, dest="b:2")
    assert (env.sender, env.dest, env.seq, env.batches) == ("a:1", "", 0, (("ch", ((7,),)),))


def test_with_a_key_a_datagram_that_names_no_destination_is_misdirected() -> None:
    with pytest.raises(CodecError) as ei:
        decode_envelope(_bound(""), b"k", dest="c:3")
    assert ei.value.reason == "misdirected"
    decode_envelope(_bound("b:2", key=None), None, dest="c:3")  # without a key: unchecked


# -- frames and datagrams: limits before decoding -------------------------------------------


def test_a_forged_frame_is_refused_before_anything_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forged = msgpack.packb([1, [[0, 1]] * 200_000, None])  # millions of values, no body
    sizes: list[int] = []
    real = msgpack.unpackb

    def spy(data: bytes, *a: Any, **k: Any) -> Any:
        sizes.append(len(data))
        return real(data, *a, **k)

    monkeypatch.setattr(msgpack, "unpackb", spy)  # the module both codec halves call
    for key in (b"k", None):
        with pytest.raises(CodecError) as ei:
            decode_envelope(forged, key)
        assert ei.value.reason == "malformed"
    assert all(n < 1000 for n in sizes), sizes
    # and a signed envelope with a forged body is refused by its signature, body undecoded
    body = msgpack.packb([[0, 1]] * 200_000)
    sizes.clear()
    with pytest.raises(CodecError) as ei:
        decode_envelope(msgpack.packb([2, body, b"x" * 32]), b"k")
    assert ei.value.reason == "bad_signature" and sizes == []


def test_a_datagram_larger_than_max_datagram_is_dropped(nodes: list[Any]) -> None:
    b = Echo(addr="127.0.0.1:0").start()
    nodes.append(b)
    big = encode_envelope("x:1", [("msg", [encode_row((b.addr, "s", 1, "v" * 65_200))])])
    assert 65_000 < len(big) <= 65_507
    small = encode_envelope("x:1", [("msg", [encode_row((b.addr, "s", 2, "v"))])])
    host, port = b.addr.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(big, (host, int(port)))
        s.sendto(small, (host, int(port)))
    wait_until(lambda: got(b) == {("s", 2, "v")})
    assert b.stats()["dropped"] == {"too_large": 1}


def test_a_tcp_frame_over_max_message_is_refused_unread(nodes: list[Any]) -> None:
    b = Echo(addr="127.0.0.1:0", transport="tcp").start()
    nodes.append(b)
    host, port = b.addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">I", 18_900_000) + b"\x93\x01")  # 18.9 MB announced
        wait_until(lambda: b.stats()["dropped"].get("too_large") == 1)
        s.settimeout(5)
        assert s.recv(1) == b""  # and the connection is closed, the rest never read


# -- fragments ------------------------------------------------------------------------------


def test_fragments_round_trip_out_of_order_and_duplicated() -> None:
    payload = bytes(range(256)) * 1000
    parts = fragment(payload, 2000, b"k", time.time())
    assert all(len(p) <= 2000 for p in parts) and len(parts) == -(
        -len(payload) // (2000 - FRAGMENT_OVERHEAD)
    )
    r = Reassembler(max_message=1 << 20, max_bytes=1 << 20, key=b"k")
    now = time.monotonic()
    out = [r.add("src", p, now, time.time()) for p in [*reversed(parts), parts[0]]]
    assert out[len(parts) - 1] == payload and out.count(None) == len(parts)
    assert len(r) == 0 and r.buffered == 0


def test_a_forged_fragment_does_not_poison_reassembly() -> None:
    payload = b"z" * 10_000
    parts = fragment(payload, 1200, b"k", time.time())
    r = Reassembler(max_message=1 << 20, max_bytes=1 << 20, key=b"k")
    now, wall = time.monotonic(), time.time()
    # a forger copies a real header, changes the chunk, signs with the wrong key
    forged = fragment(b"E" * 10_000, 1200, b"wrong", time.time())
    header = msgpack.unpackb(parts[0])[1]
    chunk = b"E" * 1000
    sig = hmac.new(b"wrong", b"blooml-fragment\x00" + header + chunk, sha256).digest()
    for bad in (
        forged[0],
        msgpack.packb([1, header, chunk, sig]),
        msgpack.packb([1, header, chunk, None]),
    ):
        with pytest.raises(CodecError) as ei:
            r.add("src", bad, now, wall)
        assert ei.value.reason in ("bad_signature", "unsigned")
    assert len(r) == 0 and r.buffered == 0  # nothing was buffered
    results = [r.add("src", p, now, wall) for p in parts]
    assert results[-1] == payload
    # a stale fragment is refused before it is buffered
    old = fragment(payload, 1200, b"k", wall - 100)
    with pytest.raises(CodecError) as ei:
        r.add("src", old[0], now, wall)
    assert ei.value.reason == "stale" and len(r) == 0


def test_reassembly_is_bounded_in_messages_bytes_and_time() -> None:
    r = Reassembler(max_message=100_000, max_bytes=50_000, per_peer=2, timeout=1.0, key=None)
    wall, now = time.time(), 100.0
    msgs = [fragment(bytes([i]) * 20_000, 5000, None, wall) for i in range(4)]
    for m in msgs:  # the first fragment of each: only two per sender are kept
        r.add("src", m[0], now, wall)
    assert len(r) == 2 and r.lost["evicted"] == 2
    for i in range(12):  # many senders: bytes stay under max_bytes
        r.add(("other", i), msgs[0][1], now, wall)
        assert r.buffered <= 50_000
    r.expire(now + 2.0)
    assert len(r) == 0 and r.buffered == 0 and r.lost["timeout"] > 0
    with pytest.raises(CodecError) as ei:
        r.add("src", fragment(b"x" * 200_000, 60_000, None, wall)[0], now, wall)
    assert ei.value.reason == "too_large" and len(r) == 0


# -- sending: bounded queues, bounded stop ----------------------------------------------------


def test_the_send_queue_to_a_dead_tcp_peer_is_bounded_in_bytes(nodes: list[Any]) -> None:
    a = Echo(addr="127.0.0.1:0", transport="tcp")
    nodes.append(a)
    node(a).send_buffer = 1 << 20
    a.start()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    for i in range(40):
        a.sync_do(lambda p, i=i: p.out.insert([(dead, i, "x" * 50_000)]))
    st = a.stats()
    assert st["send_queue_bytes"] <= 1 << 20
    assert st["send_dropped"] >= 15


def test_stop_is_bounded_and_quiet_with_peers_that_never_read(
    nodes: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    a = Echo(addr="127.0.0.1:0", transport="tcp").start()
    nodes.append(a)
    sinks = []
    for _ in range(3):  # they accept, never read: the kernel buffers fill, then drain() waits
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        sinks.append(s)
    try:
        for s in sinks:
            addr = f"127.0.0.1:{s.getsockname()[1]}"
            for i in range(6):
                a.sync_do(lambda p, i=i, addr=addr: p.out.insert([(addr, i, "x" * 4_000_000)]))
        time.sleep(0.3)
        t0 = time.monotonic()
        a.stop(timeout=2.0)  # raised ProgramError after the timeout before
        assert time.monotonic() - t0 < 4.0
        assert not node(a).running
        assert a.stats()["send_dropped"] > 0
    finally:
        for s in sinks:
            s.close()


# -- receiving: kernel drops ----------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/net/udp"), reason="Linux: /proc/net/udp")
def test_kernel_receive_buffer_drops_show_in_stats(nodes: list[Any]) -> None:
    b = Echo(addr="127.0.0.1:0")  # bound, not started: nobody reads the socket
    nodes.append(b)
    host, port = b.addr.rsplit(":", 1)
    data = encode_envelope("x:1", [("msg", [encode_row((b.addr, "s", 1, "v" * 30_000))])])
    rcvbuf = node(b).sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)  # type: ignore[union-attr]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(rcvbuf // len(data) * 2 + 20):
            s.sendto(data, (host, int(port)))
    wait_until(lambda: b.stats()["dropped"].get("kernel", 0) > 0, timeout=2)
    assert b.stats()["dropped_total"] >= b.stats()["dropped"]["kernel"]


# -- name resolution --------------------------------------------------------------------------


def test_names_resolve_off_the_node_thread_and_are_refreshed(
    nodes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = Echo(addr="127.0.0.1:0").start()
    port = int(b.addr.rsplit(":", 1)[1])
    c = Echo(addr=f"127.0.0.2:{port}").start()  # the same port on another loopback address
    a = Echo(addr="127.0.0.1:0").start()
    nodes += [a, b, c]
    target = {"ip": "127.0.0.1"}
    real = socket.getaddrinfo
    calls = []

    def fake(host: Any, *args: Any, **kw: Any) -> Any:
        if host == "replica.test":
            calls.append(threading.current_thread().name)
            time.sleep(1.0)  # a slow resolver
            return real(target["ip"], *args, **kw)
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    monkeypatch.setattr(transport_mod, "RESOLVE_TTL", 0.3)
    name = f"replica.test:{port}"
    t0 = time.monotonic()
    a.sync_do(lambda p: p.out.insert([(name, 1, "first")]))
    a.sync_do(lambda p: p.out.insert([(b.addr, 0, "other")]))  # the node keeps ticking
    assert time.monotonic() - t0 < 0.8  # the node's thread never waited for the resolver
    wait_until(lambda: got(b) == {(a.addr, 1, "first"), (a.addr, 0, "other")})
    assert calls and not any(n.startswith("blooml-node") for n in calls)
    target["ip"] = "127.0.0.2"  # the name moves; once its entry is older than the TTL ...
    deadline = time.monotonic() + 10
    i = 2
    while not any(r[2] == "moved" for r in got(c)) and time.monotonic() < deadline:
        a.sync_do(lambda p, i=i: p.out.insert([(name, i, "moved")]))
        i += 1
        time.sleep(0.1)
    assert any(r[2] == "moved" for r in got(c))  # ... it is resolved again, in the background


def test_the_public_resolve_ttl_is_the_one_the_node_uses() -> None:
    """``blooml.net.node.RESOLVE_TTL`` was a dead copy: setting it changed nothing (the
    node read ``_transport.RESOLVE_TTL``). Both spellings of the public name now read and
    set the live value; a bad value is refused with nothing changed."""
    import sys

    import blooml.net.node as node_attr  # the package's ``node`` (it shadows the module)

    module = sys.modules["blooml.net.node"]
    before = transport_mod.RESOLVE_TTL
    p = Echo(addr="127.0.0.1:0")
    try:
        node_attr.RESOLVE_TTL = 123.0
        assert transport_mod.RESOLVE_TTL == 123.0 == module.RESOLVE_TTL
        t0 = time.monotonic()
        node(p)._resolve("localhost:9", b"")  # not running: resolved here, kept for the TTL
        assert 120 < node(p)._resolved["localhost:9"][1] - t0 < 126
        module.RESOLVE_TTL = 7
        assert node_attr.RESOLVE_TTL == 7.0 == transport_mod.RESOLVE_TTL
        node_attr.CONNECT_TIMEOUT = 4
        assert sys.modules["blooml.net._peers"].CONNECT_TIMEOUT == 4.0
        for bad in (0, -1.0, "5", True, None):
            with pytest.raises(ProgramError, match="RESOLVE_TTL"):
                node_attr.RESOLVE_TTL = bad
        assert transport_mod.RESOLVE_TTL == 7.0
        with pytest.raises(AttributeError, match="only the settings"):
            node_attr.RESOLVE_TLL = 5  # a typo is not silently a new attribute
    finally:
        transport_mod.RESOLVE_TTL = before
        sys.modules["blooml.net._peers"].CONNECT_TIMEOUT = 30.0
        p.stop()


def test_a_backlog_of_large_messages_is_applied_over_several_ticks(nodes: list[Any]) -> None:
    b = Echo(addr="127.0.0.1:0", transport="tcp")
    nodes.append(b)
    per_tick: list[int] = []
    b.watch("got", lambda rows: per_tick.append(len(rows)))
    for k in range(3):  # three 3 MB messages already waiting when the node starts
        row = encode_row((b.addr, "s", k, "v" * 3_000_000))
        node(b)._inbox_put(encode_envelope("x:1", [("msg", [row])]))
    b.start()
    wait_until(lambda: sum(per_tick) == 3, timeout=10)
    assert per_tick == [1, 1, 1]  # 4 MiB per tick at most: one 3 MB message each
