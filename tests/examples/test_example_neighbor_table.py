"""examples/neighbor_table.py: soft state expires without heartbeats and comes back with them."""

from __future__ import annotations

from _examples import FakeClock, load_example

nt = load_example("neighbor_table")


def view(timeline: list[dict[str, object]], t: float, node: str) -> list[str]:
    (row,) = [r for r in timeline if r["t"] == t]
    return row[node]  # type: ignore[return-value]


def test_main_timeline() -> None:
    out = nt.main()
    tl = out["timeline"]
    assert out["last_before"] == 3.0
    assert nt.TTL <= out["vanished"] - out["last_before"] <= nt.TTL + 1.0
    # warmed up: everyone sees both others
    for t in (2.5, 3.0, 3.5):
        assert view(tl, t, "a") == ["b", "c"]
        assert view(tl, t, "b") == ["a", "c"]
        assert view(tl, t, "c") == ["a", "b"]
    # c silent from t=4: it is still remembered for about TTL seconds (not expired early) ...
    assert "c" in view(tl, 5.5, "a") and "c" in view(tl, 5.5, "b")
    # ... then forgotten, while a and b keep each other
    for t in (8.0, 9.0, 9.5):
        assert view(tl, t, "a") == ["b"]
        assert view(tl, t, "b") == ["a"]
    # c itself still hears a and b all along (they keep greeting it)
    assert all(view(tl, t, "c") == ["a", "b"] for t in (5.0, 8.0, 9.5))
    # c speaks again at t=10: back within a heartbeat period or two
    for t in (12.0, 14.0, 16.0):
        assert view(tl, t, "a") == ["b", "c"]
        assert view(tl, t, "b") == ["a", "c"]


def test_expiry_time_is_ttl_after_last_heartbeat() -> None:
    """Drive one receiver by hand: a hello at t refreshes the entry until t + TTL."""
    clock = FakeClock()
    p = nt.NeighborTable(addr="me", clock=clock)
    p.link.insert([("me",)])  # greets itself over the loopback channel
    sent: list[float] = []
    for step in range(1, 9):
        clock.now = step * 0.5
        p.tick()
        sent += [r.last_hello for r in p.neighbor]
    assert sent, "a loopback heartbeat should have arrived"
    p.link.delete([("me",)])  # stop greeting
    times = []
    for step in range(9, 30):
        clock.now = step * 0.5
        p.tick()
        rows = list(p.neighbor)
        sent += [r.last_hello for r in rows]
        times.append((clock.now, rows))
    gone = [t for t, rows in times if not rows]
    assert gone, "the entry never expired"
    last_sent = max(sent)
    # it vanishes TTL after the last heartbeat (give or take a tick), and stays gone
    assert last_sent + nt.TTL - 0.5 <= gone[0] <= last_sent + nt.TTL + 1.0
    assert all(not rows for t, rows in times if t >= gone[0])


def test_new_heartbeat_replaces_the_row_under_the_key() -> None:
    clock = FakeClock()
    p = nt.NeighborTable(addr="me", clock=clock)
    p.link.insert([("me",)])
    stamps = set()
    for step in range(1, 12):
        clock.now = step * 0.5
        p.tick()
        rows = list(p.neighbor)
        assert len(rows) <= 1  # one row per key: a newer hello replaces the older one
        stamps |= {r.last_hello for r in rows}
    assert len(stamps) >= 3
