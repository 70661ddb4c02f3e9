"""Dependencies of rule functions: the bytecode scan, ``reads(...)`` declarations, and the
run-time verification that a function reads nothing the IR does not declare (issue 10)."""

from __future__ import annotations

import dis
import sys

import pytest

from blooml import (
    Program,
    ProgramError,
    StratificationError,
    bloom,
    lbool,
    lmax,
    lmin,
    lset,
    reads,
    scratch,
    table,
)
from blooml.bloom._reads import function_reads, reads_columns_nonmonotonically
from blooml.lattices._base import registered_lattices

BEST, TICK = "best", "tick_count"  # names read through getattr: the scan cannot see them


class Repro(Program):
    """The issue's reproducer: a helper method reveals a lattice variable."""

    t = table(["k"])
    out = table(["k", "top"])
    best = lmax()

    @bloom
    def rules(self):
        self.out <= self.t.map(lambda r: self.row(r.k))
        self.best <= self.t.map(lambda r: lmax(r.k))

    def row(self, k):
        return (k, self.best.value.reveal())


class Inline(Program):
    t = table(["k"])
    out = table(["k", "top"])
    best = lmax()

    @bloom
    def rules(self):
        self.out <= self.t.map(lambda r: (r.k, self.best.reveal()))
        self.best <= self.t.map(lambda r: lmax(r.k))


@pytest.mark.parametrize("cls", [Repro, Inline])
def test_reveal_in_a_rule_function_is_a_nonmonotone_dependency(cls) -> None:
    ir = cls.ir()
    rule = ir.rules[0]
    assert rule.reads == {"best"} and rule.nonmonotone_reads == {"best"}
    assert any(e.src == "best" and e.dst == "out" and e.kind == "nonmonotone" for e in ir.edges)
    assert ir.stratum_of["best"] < ir.stratum_of["out"]
    p = cls()
    p.t.insert([(1,), (5,)])
    p.tick()
    assert sorted(p.out) == [(1, 5), (5, 5)]  # never (1, None), (5, None)


def test_helper_scan_sees_through_fused_loads() -> None:
    """On 3.13 ``(k, self.best...)`` compiles to LOAD_FAST_LOAD_FAST (k, self): the read
    used to be lost there."""
    if sys.version_info >= (3, 13):
        fused = [i for i in dis.get_instructions(Repro.row) if isinstance(i.argval, tuple)]
        assert fused and fused[0].argval[-1] == "self"
    found = function_reads(Repro.row, {"best": lmax}, Repro)
    assert found == {"best": True}


def test_monotone_method_keeps_a_monotone_edge_and_runs() -> None:
    class Mono(Program):
        t = table(["k"])
        out = table(["k"], ["big"])
        best = lmax()

        @bloom
        def rules(self):
            self.out <= self.t.map(lambda r: (r.k, self.best.gt(3)))
            self.best <= self.t.map(lambda r: lmax(r.k))

    rule = Mono.ir().rules[0]
    assert rule.reads == {"best"} and rule.nonmonotone_reads == frozenset()
    p = Mono()
    p.t.insert([(1,), (5,)])
    p.tick()
    assert sorted(p.out) == [(1, lbool(True)), (5, lbool(True))]


def test_revealing_the_result_of_a_monotone_method_is_nonmonotone() -> None:
    class Chain(Program):
        t = table(["k"])
        out = table(["k", "big"])
        best = lmax()

        @bloom
        def rules(self):
            self.out <= self.t.map(lambda r: (r.k, self.best.gt(3).reveal()))
            self.best <= self.t.map(lambda r: lmax(r.k))

    assert Chain.ir().rules[0].nonmonotone_reads == {"best"}
    p = Chain()
    p.t.insert([(1,), (5,)])
    p.tick()
    assert sorted(p.out) == [(1, True), (5, True)]


def test_nonmonotone_read_on_a_cycle_is_unstratifiable() -> None:
    with pytest.raises(StratificationError) as err:

        class Cyc(Program):
            t = table(["k"])
            best = lmax()

            @bloom
            def rules(self):
                self.t <= self.t.map(lambda r: (self.best.reveal(),))
                self.best <= self.t.map(lambda r: lmax(r.k))

    assert set(err.value.cycle) >= {"t", "best"}


class Hidden(Program):
    """A read the scan cannot see: ``getattr(self, name)``."""

    t = table(["k"])
    out = table(["k", "top"])
    best = lmax()

    @bloom
    def rules(self):
        self.out <= self.t.map(lambda r: (r.k, getattr(self, BEST).reveal()))
        self.best <= self.t.map(lambda r: lmax(r.k))


def test_undeclared_read_raises_and_rolls_the_tick_back() -> None:
    assert Hidden.ir().rules[0].reads == frozenset()
    p = Hidden()
    p.t.insert([(1,), (5,)])
    with pytest.raises(ProgramError) as err:
        p.tick()
    msg = str(err.value)
    assert "test_reads.py:" in msg and "block rules" in msg  # the rule and where it is
    assert "'best'" in msg and "reads('best')" in msg  # the variable and how to declare it
    assert p.tick_count == 0 and list(p.out) == [] and p.best.value == lmax()
    assert list(p.t) == []  # nothing half-applied


def test_declared_read_on_the_function() -> None:
    class Declared(Program):
        t = table(["k"])
        out = table(["k", "top"])
        best = lmax()

        @bloom
        def rules(self):
            self.out <= self.t.map(reads("best")(lambda r: (r.k, getattr(self, BEST).reveal())))
            self.best <= self.t.map(lambda r: lmax(r.k))

    assert Declared.ir().rules[0].nonmonotone_reads == {"best"}
    p = Declared()
    p.t.insert([(1,), (5,)])
    p.tick()
    assert sorted(p.out) == [(1, 5), (5, 5)]


def test_declared_read_on_a_helper_method() -> None:
    class Helper(Program):
        t = table(["k"])
        out = table(["k", "top"])
        best = lmax()

        @bloom
        def rules(self):
            self.out <= self.t.map(lambda r: self.row(r.k))
            self.best <= self.t.map(lambda r: lmax(r.k))

        @reads("best")
        def row(self, k):
            view = getattr(self, BEST)
            return (k, view.value.reveal())

    assert Helper.ir().rules[0].nonmonotone_reads == {"best"}
    p = Helper()
    p.t.insert([(1,), (5,)])
    p.tick()
    assert sorted(p.out) == [(1, 5), (5, 5)]


def test_nonmonotone_use_of_a_monotone_read_is_an_error_not_a_wrong_answer() -> None:
    class Liar(Program):
        t = table(["k"])
        out = table(["k", "top"])
        best = lmax()

        @bloom
        def rules(self):
            f = reads("best", monotone=True)(lambda r: (r.k, getattr(self, BEST).reveal()))
            self.out <= self.t.map(f)
            self.best <= self.t.map(lambda r: lmax(r.k))

    assert Liar.ir().rules[0].nonmonotone_reads == frozenset()
    p = Liar()
    p.t.insert([(1,), (5,)])
    with pytest.raises(ProgramError, match=r"non-monotonically \(\.reveal\).*reads\('best'\)"):
        p.tick()
    assert list(p.out) == [] and p.tick_count == 0


@pytest.mark.parametrize(
    ("use", "what"),
    [
        (lambda v: v == lmax(1), "=="),
        (lambda v: v < lmax(1), "<"),
        (lambda v: bool(v), "bool"),
        (lambda v: hash(v), "hash"),
        (lambda v: v.reveal(), ".reveal"),
    ],
)
def test_monotone_guard_refuses_every_nonmonotone_use(use, what) -> None:
    from blooml.engine._reads import guard_class

    g = guard_class(lmax)(lmax(3), "best", "rule 0")
    assert g.gt(2) == lbool(True) and (g | lmax(5)) == lmax(5) and g + 1 == lmax(4)
    with pytest.raises(ProgramError, match=what.replace(".", r"\.")):
        use(g)


def test_undeclared_tick_count_read_raises_and_declared_one_works() -> None:
    class TickHidden(Program):
        t = table(["k"])
        out = table(["k", "n"])

        @bloom
        def rules(self):
            self.out <= self.t.map(lambda r: (r.k, getattr(self, TICK)))

    p = TickHidden()
    p.t.insert([(1,)])
    with pytest.raises(ProgramError, match=r"self\.tick_count"):
        p.tick()

    class TickDeclared(Program):
        t = table(["k"])
        out = table(["k", "n"])

        @bloom
        def rules(self):
            self.out <= self.t.map(reads("tick_count")(lambda r: (r.k, getattr(self, TICK))))

    assert TickDeclared.ir().rules[0].reads_tick
    q = TickDeclared()
    q.t.insert([(1,)])
    q.tick(2)
    assert sorted(q.out) == [(1, 0), (1, 1)]


def test_collection_read_through_a_helper_is_refused() -> None:
    class CollHelper(Program):
        t = table(["k"])
        out = table(["k", "n"])

        @bloom
        def rules(self):
            self.out <= self.t.map(lambda r: (r.k, self.size()))

        def size(self):
            return len(self.t)

    p = CollHelper()
    p.t.insert([(1,)])
    with pytest.raises(ProgramError, match=r"self\.t is a collection"):
        p.tick()
    assert list(p.out) == []


def test_reads_rejects_bad_arguments() -> None:
    with pytest.raises(ProgramError, match="lattice variable names"):
        reads(3)  # type: ignore[arg-type]
    with pytest.raises(ProgramError, match="name at least one"):
        reads()
    with pytest.raises(ProgramError, match="True or False"):
        reads("x", monotone="yes")  # type: ignore[arg-type]
    with pytest.raises(ProgramError, match="decorates a function"):
        reads("x")(5)  # type: ignore[type-var]
    with pytest.raises(
        ProgramError, match=r"'nope': not a lattice variable of .*lattice variables: best"
    ):

        class Unknown(Program):
            t = table(["k"])
            best = lmax()

            @bloom
            def rules(self):
                self.t <= self.t.map(reads("nope")(lambda r: r))


class ShortestReveal(Program):
    """Issue 24's disagreement: a recursive lmin view, its column revealed by a scratch."""

    e = table(["a", "b"], ["c"])
    root = table(["n"])
    d = scratch(["n"], ["d"])
    dd = scratch(["n"], ["v"])

    @bloom
    def rules(self):
        self.d <= self.root.map(lambda r: (r.n, lmin(0)))
        self.d <= self.d.join(self.e, self.d.n == self.e.a).map(lambda x, y: (y.b, x.d + y.c))
        self.dd <= self.d.map(lambda x: (x.n, x.d.reveal()))


def test_a_revealed_lattice_column_is_a_nonmonotone_dependency() -> None:
    ir = ShortestReveal.ir()
    assert ir.rules[2].nonmonotone_inputs == {"d"}
    assert ir.rules[1].nonmonotone_inputs == frozenset()  # x.d + y.c: a morphism
    assert any(e.src == "d" and e.dst == "dd" and e.kind == "nonmonotone" for e in ir.edges)
    assert ir.stratum_of["d"] < ir.stratum_of["dd"]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_revealed_column_of_a_recursive_view_is_read_at_its_fixpoint(incremental) -> None:
    """The reference read the view mid-fixpoint (5 via node 2, then 4 via node 3) and raised
    KeyConstraintError; both modes now read d's final values."""
    p = ShortestReveal(incremental=incremental)
    p.e.insert([(1, 3, 2), (3, 5, 2), (2, 5, 5)])
    p.root.insert([(1,), (2,)])
    p.tick()
    assert sorted(p.dd) == [(1, 0), (2, 0), (3, 2), (5, 4)]


def test_a_revealed_column_on_a_cycle_is_unstratifiable() -> None:
    with pytest.raises(StratificationError):

        class Cyclic(Program):
            e = table(["a", "b"])
            d = scratch(["n"], ["d"])

            @bloom
            def rules(self):
                self.d <= self.e.map(lambda r: (r.a, lmin(0)))
                self.d <= self.d.join(self.e, self.d.n == self.e.a).map(
                    lambda x, y: (y.b, lmin(x.d.reveal() + 1))
                )

        Cyclic.ir()


@pytest.mark.parametrize(
    ("fn", "revealing"),
    [
        (lambda x: (x.n, x.d.reveal()), True),
        (lambda x: (x.n, x.d.lt(3).reveal()), True),  # the result of a monotone method
        (lambda x: (x.n, x.d.is_bottom()), True),  # an unmarked method
        (lambda x: (x.n, x.d.lt(3)), False),  # a morphism
        (lambda x: (x.n, x.d + 1), False),
        (lambda x: (x.n, lset.from_item(x.v)), False),  # a constructor, not a read
        (lambda x: (x.n, x.tags.get("k")), False),  # dicts answer to get too
    ],
)
def test_the_column_scan(fn, revealing) -> None:
    classes = list(registered_lattices().values())
    assert reads_columns_nonmonotonically(fn, ["best"], classes) is revealing


def test_revealing_a_lattice_variable_is_not_a_column_read() -> None:
    classes = list(registered_lattices().values())
    assert not reads_columns_nonmonotonically(Inline.rules, ["best"], classes)
    assert not reads_columns_nonmonotonically(Repro.row, ["best"], classes)
