"""examples/priority_queue.py: the Dedalus queue drains one job per user (or overall) per tick."""

from __future__ import annotations

from _examples import load_example
from hypothesis import given
from hypothesis import strategies as st

pq = load_example("priority_queue")

Job = tuple[str, int, str]


def per_user_model(jobs: list[Job], first_tick: int = 1) -> list[tuple[int, str, str, int]]:
    """Each user's k-th smallest position runs at tick ``first_tick + k``."""
    out = []
    for user in {u for u, _, _ in jobs}:
        mine = sorted((p, j) for u, p, j in jobs if u == user)
        out += [(first_tick + k, user, j, p) for k, (p, j) in enumerate(mine)]
    return sorted(out)


def global_model(jobs: list[Job], first_tick: int = 1) -> list[tuple[int, str, str, int]]:
    ordered = sorted(jobs, key=lambda j: j[1])
    return sorted((first_tick + k, u, j, p) for k, (u, p, j) in enumerate(ordered))


jobs_st = st.lists(
    st.tuples(st.sampled_from(["ann", "bob", "eve"]), st.integers(0, 50), st.sampled_from("xyz")),
    max_size=8,
    unique_by=lambda j: (j[0], j[1]),  # (user, position) is the key
)


def test_seed_facts_per_user() -> None:
    out = pq.main()
    assert out["per_user"] == [
        (1, "alice", "ssh", 204),
        (1, "bob", "bash", 200),
        (1, "eve", "john", 1),
        (2, "bob", "ssh", 205),
    ]
    assert [(t, j, p) for t, _, j, p in out["global"]] == [
        (1, "john", 1),
        (2, "bash", 200),
        (3, "ssh", 204),
        (4, "ssh", 205),
    ]


@given(jobs_st)
def test_per_user_order_matches_model(jobs: list[Job]) -> None:
    assert pq.drain(pq.PriorityQueue(), jobs) == per_user_model(jobs)


@given(jobs_st.filter(lambda js: len({p for _, p, _ in js}) == len(js)))
def test_global_order_matches_model(jobs: list[Job]) -> None:
    assert pq.drain(pq.GlobalPriorityQueue(), jobs) == global_model(jobs)


def test_late_arrivals_join_the_queue() -> None:
    p = pq.PriorityQueue()
    p.m_priority_queue.insert([("ann", 5, "a"), ("ann", 9, "b")])
    p.tick()  # tick 0: (ann, 5) chosen, emitted in tick 1
    p.m_priority_queue.insert([("ann", 1, "urgent")])
    p.tick(4)
    log = sorted((r.tick, r.job) for r in p.processed)
    assert log == [(1, "a"), (2, "urgent"), (3, "b")]
    assert len(p.m_priority_queue) == 0
