"""Bad input does not jam a program: a failed tick names the queued input it could not take
(``pending_input`` and a note), ``discard_pending()`` drops what is queued, and the next
``tick()`` runs on the stored state, which the failed tick left as it was."""

from __future__ import annotations

import pytest

from blooml import KeyConstraintError, LatticeValueError, Program, bloom, lmax, scratch, table


def tuples(coll):
    return {tuple(r) for r in coll}


class KV(Program):
    put = scratch(["k", "v"])
    kv = table(["k"], ["v"])

    @bloom
    def rules(self):
        self.kv <= self.put


class Inverse(Program):
    inp = scratch(["x"])
    other = scratch(["y"])
    out = table(["x", "inv"])
    seen = table(["y"])

    @bloom
    def rules(self):
        self.out <= self.inp.map(lambda r: (r.x, 1 / r.x))
        self.seen <= self.other


class High(Program):
    num = scratch(["n"])
    best = lmax()
    t = table(["k"], ["m"])

    @bloom
    def rules(self):
        self.best <= self.num.map(lambda r: lmax(r.n))


def _note_text(exc: BaseException) -> str:
    return "\n".join(getattr(exc, "__notes__", ()))


def test_key_conflict_inside_one_batch_is_named_and_discarded():
    p = KV()
    p.put.insert([("a", 1)])
    p.tick()
    p.put.insert([("b", 2), ("b", 3), ("c", 4)])
    with pytest.raises(KeyConstraintError) as info:
        p.tick()
    exc = info.value
    assert exc.pending_input == {"put": [("b", 3)]}
    assert "could not take the queued input {put: [('b', 3)]}" in _note_text(exc)
    assert "discard_pending()" in _note_text(exc)
    assert tuples(p.kv) == {("a", 1)} and p.tick_count == 1
    with pytest.raises(KeyConstraintError):  # still queued: the same error again
        p.tick()
    dropped = p.discard_pending()
    assert dropped == {"put": [("b", 2), ("b", 3), ("c", 4)]}
    assert dropped["put"][0].k == "b"  # rows come back as named tuples
    p.tick()
    assert tuples(p.kv) == {("a", 1)} and p.tick_count == 2
    p.put.insert([("d", 5)])
    p.tick()
    assert tuples(p.kv) == {("a", 1), ("d", 5)}


def test_rule_raising_on_a_row_names_the_input_it_reads():
    p = Inverse()
    p.inp.insert([(2,)])
    p.tick()
    p.inp.insert([(4,), (0,)])
    p.other.insert([("unrelated",)])
    with pytest.raises(ZeroDivisionError) as info:
        p.tick()
    exc = info.value
    # the failing rule reads only inp: other's input is not blamed
    assert exc.pending_input == {"inp": [(4,), (0,)]}
    assert "could not take the queued input {inp: [(4,), (0,)]}" in _note_text(exc)
    assert tuples(p.out) == {(2, 0.5)} and tuples(p.seen) == set()
    assert p.discard_pending() == {"inp": [(4,), (0,)], "other": [("unrelated",)]}
    p.tick()
    assert tuples(p.out) == {(2, 0.5)} and tuples(p.seen) == set()
    p.inp.insert([(4,)])
    p.tick()
    assert tuples(p.out) == {(2, 0.5), (4, 0.25)}


def test_string_reaching_an_lmax_of_ints_is_blamed_and_discarded():
    p = High()
    p.num.insert([(3,)])
    p.tick()
    p.num.insert([("x",)])
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    exc = info.value
    assert exc.value == "x"  # the offending value, not the stored 3
    assert "lmax('x'): cannot be compared with 3" in str(exc)
    assert exc.pending_input == {"num": [("x",)]}
    assert p.best.value == lmax(3)
    assert p.discard_pending() == {"num": [("x",)]}
    p.num.insert([(7,)])
    p.tick()
    assert p.best.value == lmax(7)


def test_lattice_variable_input_is_named_exactly():
    p = High()
    p.best.insert(lmax(3))
    p.tick()
    p.best.insert(lmax(5))
    p.best.insert(lmax("x"))
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.pending_input == {"best": [lmax("x")]}
    assert p.best.value == lmax(3)
    assert p.discard_pending() == {"best": [lmax(5), lmax("x")]}
    p.tick()
    assert p.best.value == lmax(3)


def test_bad_lattice_value_in_a_table_column_is_named():
    p = High()
    p.t.insert([("a", lmax(1))])
    p.tick()
    p.t.insert([("b", lmax(2)), ("a", lmax("x"))])
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.pending_input == {"t": [("a", lmax("x"))]}
    assert tuples(p.t) == {("a", lmax(1))}
    p.discard_pending()
    p.tick()
    assert tuples(p.t) == {("a", lmax(1))}


def test_discard_pending_returns_deletions_and_next_tick_facts_separately():
    class P(Program):
        t = table(["k"])
        later = table(["k"])

        @bloom
        def rules(self):
            self.later < +self.t

    p = P()
    p.t.insert([(1,), (2,)])
    p.tick()  # t holds 1, 2; later's <+ facts wait
    p.t.delete([(1,)])
    dropped = p.discard_pending()
    assert dropped == {"later": [(1,), (2,)]}
    assert dropped.deletes == {"t": [(1,)]}  # type: ignore[attr-defined]
    p.tick()
    assert tuples(p.t) == {(1,), (2,)} and tuples(p.later) == set()
    assert p.discard_pending() == {}  # nothing left: ticks again queued nothing new


def test_discard_pending_on_nothing_queued_is_empty_and_harmless():
    p = KV()
    assert p.discard_pending() == {}
    p.tick()
    assert p.tick_count == 1


@pytest.mark.parametrize(
    ("left", "right"),
    [("x", 1), (1, "x"), ("x", 2.5), (2.5, "x")],
)
def test_lmax_lmin_blame_the_non_number(left, right):
    from blooml import lmin

    for cls in (lmax, lmin):
        with pytest.raises(LatticeValueError) as info:
            cls(left) | cls(right)
        assert info.value.value == "x"
        assert str(info.value).startswith(f"{cls.__name__}('x'): cannot be compared with")


def test_lmax_bottom_then_string_blames_the_string_for_later_numbers():
    p = High()
    p.best.insert(lmax("x"))  # ⊥ takes it: nothing to compare with yet
    p.tick()
    p.best.insert(lmax(3))
    with pytest.raises(LatticeValueError) as info:
        p.tick()
    assert info.value.value == "x"
    assert "lmax('x'): cannot be compared with 3" in str(info.value)
    assert info.value.pending_input == {"best": [lmax(3)]}


def test_key_conflict_in_direct_table_input_names_the_second_row():
    p = KV()
    p.kv.insert([("a", 1)])
    p.tick()
    p.kv.insert([("z", 0), ("a", 2)])  # conflicts with the stored ("a", 1)
    with pytest.raises(KeyConstraintError) as info:
        p.tick()
    assert info.value.pending_input == {"kv": [("a", 2)]}
    assert tuples(p.kv) == {("a", 1)}
    assert p.discard_pending() == {"kv": [("z", 0), ("a", 2)]}
    p.tick()
    assert tuples(p.kv) == {("a", 1)}
