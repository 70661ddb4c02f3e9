"""Minimal reproductions of rule-layer problems found while writing the examples.

Each test states the contract it checks; see /tmp/brief/engine_bugs.md for the discussion.
"""

from __future__ import annotations

import pytest

from blooml import Program, ProgramError, bloom, table


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

    except ProgramError as e:
        assert repr(col) in str(e) or f"`{col}`" in str(e), str(e)
        return
    p = P()
    p.a.insert([("k", 1), ("j", 2)])
    p.b.insert([("k", 3)])
    p.tick()
    assert {tuple(r) for r in p.c} == {("k", 1, 3)}


def test_conflicting_deferred_facts_are_reported_by_the_rule_that_derived_them() -> None:
    """Two `<+` facts with one key (Bud's KVS with two puts to a key in one tick): the tick that
    derives them must raise KeyConstraintError with a note naming the rule and its line, as the
    contract says for a key conflict. (Found with TableKVS in examples/kvs.py: the error came
    one tick later, "while applying the facts queued for this tick", naming no rule.)"""
    from blooml import KeyConstraintError, interface

    class P(Program):
        put = interface(["reqid"], ["k", "v"])
        kv = table(["k"], ["v"])

        # fmt: off
        @bloom
        def store(self):
            self.kv <+ self.put.map(lambda p: (p.k, p.v))
        # fmt: on

    p = P()
    p.put.insert([(1, "k", "a"), (2, "k", "b")])
    with pytest.raises(KeyConstraintError) as err:
        p.tick()
    assert p.tick_count == 0  # raised by the tick that derived the facts, rolled back
    notes = " ".join(getattr(err.value, "__notes__", []))
    assert "test_engine_findings.py" in notes and "kv <+" in notes, notes
