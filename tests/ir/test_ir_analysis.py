"""The rule IR: dependency edges, strata, unstratifiable cycles, the printout."""

from __future__ import annotations

import pytest

from blooml import (
    Program,
    ProgramError,
    StratificationError,
    bloom,
    channel,
    count,
    lmax,
    lset,
    scratch,
    table,
)
from blooml.ir import ProgramIR, has_nonmonotone, sources
from blooml.ir import nodes as N


class Quorum(Program):
    vote_chn = channel(["@addr", "voter_id"])
    result_chn = channel(["@addr"])
    votes = lset()
    cnt = lmax()
    done = lmax().gt_eq(3)  # an lbool value declares an lbool variable

    @bloom
    def logic(self):
        self.votes <= self.vote_chn.map(lambda v: v.voter_id)
        self.cnt <= self.votes.size()
        self.done <= self.cnt.gt_eq(3)
        self.result_chn < ~self.done.when_true(lambda: [("x",)])


def test_quorum_compiles_to_ir_with_monotone_and_temporal_edges():
    ir = Quorum.ir()
    assert isinstance(ir, ProgramIR)
    kinds = {(e.src, e.dst): e.kind for e in ir.edges}
    assert kinds == {
        ("vote_chn", "votes"): "monotone",
        ("votes", "cnt"): "monotone",
        ("cnt", "done"): "monotone",
        ("done", "result_chn"): "temporal",
    }
    assert len(ir.strata) == 1 and ir.temporal == (3,)
    size = ir.rules[1].body
    assert isinstance(size, N.LatMethod) and size.kind == "monotone" and size.name == "size"
    assert ir.rules[2].body.kind == "morph"


def test_printout_is_readable():
    text = Quorum.ir().format()
    assert "channel vote_chn [@addr, voter_id]" in text
    assert "lattice votes: lset" in text
    assert "cnt <= votes.size()" in text
    assert "result_chn <~ rows(done.when_true(<lambda>@" in text
    assert "end of tick" in text
    assert "votes -> cnt  (monotone, rule 1)" in text
    assert str(Quorum.ir()) == text
    assert "4 rules" in repr(Quorum.ir())


def test_negation_puts_the_reader_in_a_later_stratum():
    class P(Program):
        a = table(["k"])
        b = table(["k"])
        c = table(["k"])
        d = scratch(["k"], ["n"])

        @bloom
        def r(self):
            self.b <= self.a
            self.c <= self.a.notin(self.b)
            self.d <= self.c.group(["k"], count())

    ir = P.ir()
    assert ir.stratum_of["b"] < ir.stratum_of["c"] < ir.stratum_of["d"]
    kinds = {(e.src, e.dst): e.kind for e in ir.edges}
    assert kinds[("a", "c")] == "monotone"
    assert kinds[("b", "c")] == "nonmonotone"
    assert kinds[("c", "d")] == "nonmonotone"
    assert [len(s) for s in ir.strata] == [1, 1, 1]


def test_cycle_through_negation_is_unstratifiable_naming_collections_and_lines():
    with pytest.raises(StratificationError) as ei:

        class Win(Program):
            move = table(["x", "y"])
            win = table(["x"])

            @bloom
            def r(self):
                self.win <= self.move.notin(self.win, self.move.y == self.win.x).map(
                    lambda m: (m.x,)
                )

    err = ei.value
    assert err.cycle == ["win", "win"]
    assert "test_ir_analysis.py:" in err.rules[0] and "non-monotone" in err.rules[0]
    assert isinstance(err, ProgramError)


def test_mutual_cycle_through_aggregate_names_all_rules():
    with pytest.raises(StratificationError) as ei:

        class P(Program):
            a = table(["k"])
            b = table(["k", "n"])

            @bloom
            def r(self):
                self.b <= self.a.group(["k"], count())
                self.a <= self.b.map(lambda r: (r.k,))

    err = ei.value
    assert set(err.cycle) == {"a", "b"} and len(err.rules) == 2
    assert "a -> b -> a" in str(err)


def test_nonmonotone_lattice_method_in_a_cycle_is_unstratifiable():
    with pytest.raises(StratificationError):

        class P(Program):
            s = lset()
            t = table(["v"])

            @bloom
            def r(self):
                self.t <= self.s.to_collection()
                self.s <= self.t.map(lambda r: r.v)
                self.s <= self.t.empty().when_true(lambda: [(0,)])


def test_temporal_operators_break_cycles():
    class P(Program):
        a = table(["k"])
        b = table(["k", "n"])

        @bloom
        def r(self):
            self.b <= self.a.group(["k"], count())
            self.a < +self.b.map(lambda r: (r.k,))
            self.a < -self.b.map(lambda r: (r.k,)).notin(self.a)

    ir = P.ir()
    assert {e.kind for e in ir.edges if e.dst == "a"} == {"temporal"}


def test_sources_and_has_nonmonotone():
    body = Quorum.ir().rules[1].body
    assert list(sources(body)) == [("votes", False)]
    assert not has_nonmonotone(body)


def test_points_of_order_are_nonmonotone_rules_downstream_of_channels():
    class P(Program):
        req = channel(["@addr", "k"])
        seen = table(["k"])
        fresh = scratch(["k"])

        @bloom
        def r(self):
            self.seen <= self.req.map(lambda r: (r.k,))
            self.fresh <= self.req.map(lambda r: (r.k,)).notin(self.seen)

    points = P.ir().nonmonotone_after_channels()
    assert [(r.head, chans) for r, chans in points] == [("fresh", ["req"])]
    assert Quorum.ir().nonmonotone_after_channels() == []
