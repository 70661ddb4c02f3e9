"""Minimal reproductions of rule-layer problems found while writing the examples.

Each test states the contract it checks; see /tmp/brief/engine_bugs.md for the discussion.
"""

from __future__ import annotations

import pytest

from blooml import BloomError, Program, bloom, table


@pytest.mark.parametrize("col", ["name", "node", "info", "group", "empty"])
def test_column_named_like_a_handle_attribute(col: str) -> None:
    """A column whose name is also an attribute of collection handles (``name``, ``node``,
    ``info``) must either work in join predicates or be rejected when declared, with an error
    naming the column. (Found with ``seq = table(["name"], ...)`` in dedalus_time.py and
    ``dist = table(["node"], ...)`` in bench_bloom_paths.py: both gave a misleading
    "predicates are written `a.x == b.y`" error.)"""
    try:

        class P(Program):
            a = table([col], ["x"])
            b = table([col], ["y"])
            c = table([col], ["x", "y"])

            # fmt: off
            @bloom
            def rules(self):
                self.c <= self.a.join(self.b, getattr(self.a, col) == getattr(self.b, col)).map(
                    lambda a, b: (a[0], a.x, b.y)
                )
            # fmt: on

    except BloomError as e:
        assert repr(col) in str(e) or f"`{col}`" in str(e), str(e)
        return
    p = P()
    p.a.insert([("k", 1), ("j", 2)])
    p.b.insert([("k", 3)])
    p.tick()
    assert {tuple(r) for r in p.c} == {("k", 1, 3)}
