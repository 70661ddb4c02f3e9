"""The DSL: declarations, operators, the operator-overloading traps, block overriding."""

from __future__ import annotations

import pytest

from blooml import (
    Program,
    ProgramError,
    bloom,
    channel,
    count,
    interface,
    lbool,
    lmax,
    lset,
    periodic,
    rows,
    scratch,
    table,
)
from blooml.ir import nodes as N


class Base(Program):
    t = table(["k"], ["v"])
    s = scratch(["k"], ["v"])
    c = channel(["@addr", "k"])
    cnt = lmax()

    @bloom
    def rules(self):
        self.s <= self.t.map(lambda r: (r.k, r.v))


def test_rules_are_recorded_with_op_head_line_and_block():
    ir = Base.ir()
    (r,) = ir.rules
    assert (r.head, r.op, r.block) == ("s", "<=", "rules")
    assert r.file.endswith("test_bloom_dsl.py")
    assert isinstance(r.body, N.Map) and r.body.input == N.Scan("t", ("k", "v"))
    assert r.line > 0 and str(r.line) in r.describe()


def test_ir_classmethod_and_property_agree():
    assert Base().ir is Base.ir()


def test_every_operator_parses():
    class P(Program):
        t = table(["k"], ["v"])
        u = table(["k"], ["v"])
        c = channel(["@a", "k"])
        m = lmax()

        @bloom
        def r(self):
            self.t <= self.u
            self.t < +self.u
            self.t < -self.u
            self.t < +-self.u
            self.c < ~self.u.map(lambda r: ("x", r.k))
            self.m <= self.u.map(lambda r: r.v)
            self.m < +self.m + 1
            self.t < +rows([("a", 1)])

    ops = [r.op for r in P.ir().rules]
    assert ops == ["<=", "<+", "<-", "<+-", "<~", "<=", "<+", "<+"]


@pytest.mark.parametrize(
    ("head", "op"),
    [
        ("m", "<-"),
        ("m", "<~"),
        ("s", "<-"),
        ("s", "<~"),
        ("c", "<="),
        ("c", "<+"),
        ("t", "<~"),
        ("p", "<="),
    ],
)
def test_invalid_operator_for_target_is_a_definition_error_naming_the_rule(head, op):
    body = {
        "<=": "self.u",
        "<+": "+self.u",
        "<-": "-self.u",
        "<~": "~self.u",
    }[op]
    src = f"""
class P(Program):
    t = table(["k"], ["v"])
    u = table(["k"], ["v"])
    s = scratch(["k"], ["v"])
    c = channel(["@a", "k"])
    p = periodic(1)
    m = lmax()

    @bloom
    def rules(self):
        self.{head} {"<=" if op == "<=" else "<"} {body}
"""
    with pytest.raises(ProgramError) as ei:
        exec(
            src,
            {
                "Program": Program,
                "table": table,
                "scratch": scratch,
                "channel": channel,
                "periodic": periodic,
                "lmax": lmax,
                "bloom": bloom,
            },
        )
    msg = str(ei.value)
    assert f"`{head} {op} ...`" in msg and "block rules" in msg and op in msg


def test_bool_of_handles_and_rules_raises():
    seen = []

    class P(Program, abstract=True):
        t = table(["k"])
        m = lmax()

        @bloom
        def r(self):
            for x in (self.t, self.m, self.t.map(lambda r: r), self.m.gt(3), self.t.k):
                with pytest.raises(TypeError, match="no truth value"):
                    bool(x)
                seen.append(x)

    P.ir()
    assert len(seen) == 5


def test_chained_comparison_raises():
    with pytest.raises(TypeError, match="no truth value"):

        class P(Program):
            a = table(["k"])
            b = table(["k"])
            c = table(["k"])

            @bloom
            def r(self):
                self.a <= self.b <= self.c


def test_reversed_comparison_raises_instead_of_recording():
    with pytest.raises(ProgramError, match="head <= body"):

        class P(Program):
            m = lmax()

            @bloom
            def r(self):
                self.m >= 3


def test_plain_less_than_is_not_a_rule():
    with pytest.raises(ProgramError, match="not a rule"):

        class P(Program):
            a = table(["k"])
            b = table(["k"])

            @bloom
            def r(self):
                self.a < self.b


def test_literal_rows_need_rows_wrapper_for_unary_ops():
    class P(Program):
        a = table(["k", "v"])

        @bloom
        def r(self):
            self.a <= [("x", 1)]
            self.a < +rows([("y", 2)])

    assert [type(r.body) for r in P.ir().rules] == [N.Literal, N.Literal]
    with pytest.raises(TypeError):
        +[("x", 1)]  # the Python error the docs explain


def test_column_refs_hash_by_identity_and_eq_builds_predicates():
    class P(Program, abstract=True):
        a = table(["x", "y"])
        b = table(["y", "z"])

        @bloom
        def r(self):
            ref = self.a.x
            assert hash(ref) == id(ref) or isinstance(hash(ref), int)
            d = {ref: 1}
            assert d[ref] == 1
            # a comparison with a constant is a filter predicate, not a join predicate
            with pytest.raises(ProgramError, match=r"compare two columns.*filter"):
                self.a.join(self.b, ref == 3)
            with pytest.raises(ProgramError, match="only equality"):
                self.a.join(self.b, ref != self.b.y)

    P.ir()


def test_unknown_column_is_an_attribute_error_listing_columns():
    with pytest.raises(AttributeError, match=r"no column or method 'nope'.*\['x'\]"):

        class P(Program):
            a = table(["x"])

            @bloom
            def r(self):
                self.a <= self.a.join(self.a, self.a.nope == self.a.x)


def test_rule_outside_a_block_is_an_error():
    class P(Program, abstract=True):
        a = table(["x"])

        @bloom
        def r(self):
            global leaked
            leaked = self.a

    P.ir()
    with pytest.raises(ProgramError, match="outside a @bloom block"):
        leaked <= [(1,)]


def test_block_overriding_by_name_in_subclass_and_mixin():
    class A(Program):
        t = table(["k"])
        u = table(["k"])

        @bloom
        def logic(self):
            self.u <= self.t

    class Mixin:
        @bloom
        def logic(self):
            self.u <= self.t.map(lambda r: (r.k + "!",))

    class B(Mixin, A):
        pass

    class C(A):
        logic = None  # removes the block

    assert isinstance(A.ir().rules[0].body, N.Scan)
    assert isinstance(B.ir().rules[0].body, N.Map)
    assert C.ir().rules == ()
    b = B()
    b.t.insert([("a",)])
    b.tick()
    assert {tuple(r) for r in b.u} == {("a!",)}


def test_state_redeclared_in_subclass_overrides():
    class A(Program):
        t = table(["k"])

    class B(A):
        t = table(["k"], ["v"])

    assert B.ir().collections["t"].values == ("v",)
    assert A.ir().collections["t"].values == ()


def test_declaration_errors():
    with pytest.raises(ProgramError, match="exactly one key column must start with '@'"):

        class P(Program):
            c = channel(["addr", "k"])

    with pytest.raises(ProgramError, match="only channels"):

        class Q(Program):
            t = table(["@a"])

    with pytest.raises(ProgramError, match="distinct"):
        table(["a"], ["a"])
    with pytest.raises(ProgramError, match="list of column names"):
        table("abc")
    with pytest.raises(ProgramError, match="positive"):
        periodic(0)
    with pytest.raises(ProgramError, match="ttl"):
        table(["a"], ttl=-1)
    with pytest.raises(ProgramError, match="reserved"):

        class R(Program):
            tick = table(["a"])


def test_lattice_rule_type_mismatch_is_a_definition_error():
    with pytest.raises(ProgramError, match="same lattice"):

        class P(Program):
            m = lmax()
            b = lbool()

            @bloom
            def r(self):
                self.b <= self.m


def test_lattice_value_into_collection_is_rejected_with_a_hint():
    with pytest.raises(ProgramError, match="to_collection"):

        class P(Program):
            t = table(["k"])
            s = lset()

            @bloom
            def r(self):
                self.t <= self.s


def test_group_and_argagg_resolve_columns_and_reject_unknown():
    class P(Program):
        t = table(["k", "c"])
        g = scratch(["k"], ["n"])

        @bloom
        def r(self):
            self.g <= self.t.group(["k"], count())

    body = P.ir().rules[0].body
    assert isinstance(body, N.Group) and body.keys == (0,)
    with pytest.raises(ProgramError, match="no column 'zz'"):

        class Q(Program):
            t = table(["k", "c"])
            g = scratch(["k"], ["n"])

            @bloom
            def r(self):
                self.g <= self.t.group(["zz"], count())


def test_interfaces_are_recorded_with_direction():
    class P(Program):
        i = interface(["a"])
        o = interface(["a"], input=False)

        @bloom
        def r(self):
            self.o <= self.i

    ir = P.ir()
    assert ir.collections["i"].direction == "input"
    assert ir.collections["o"].direction == "output"


def test_lambda_reads_of_lattice_variables_are_dependencies():
    class P(Program):
        truth = table(["k"])
        cloq = lmax()

        @bloom
        def r(self):
            self.cloq < +self.truth.map(lambda t: self.cloq + 1)

    (rule,) = P.ir().rules
    assert rule.reads == frozenset({"cloq"})


def test_instance_attribute_outside_lambda_is_a_clear_error():
    with pytest.raises(AttributeError, match="only inside rule functions"):

        class P(Program):
            t = table(["k"])

            @bloom
            def r(self):
                self.t <= [(self.peer,)]


@pytest.mark.parametrize("col", ["group", "empty", "map", "join"])
def test_column_named_like_a_method_is_rejected_naming_it(col):
    with pytest.raises(ProgramError, match=f"column '{col}' has the name of a collection method"):

        class P(Program):
            a = table([col], ["x"])


def test_chained_lattice_calls_through_an_unknown_result_class():
    from blooml import lmap

    class P(Program):
        m = lmap()
        flag = lbool()

        @bloom
        def r(self):
            self.flag <= self.m.at("a").gt(3)
            self.flag <= self.m.at("b", lmax).gt_eq(1)

    gt, gt_eq = (r.body for r in P.ir().rules)
    assert gt.kind == "morph" and gt.cls is None
    assert gt_eq.cls is lmax
    with pytest.raises(ProgramError, match="no lattice class has a method 'nope'"):

        class Q(Program):
            m = lmap()
            flag = lbool()

            @bloom
            def r(self):
                self.flag <= self.m.at("a").nope()


def test_lattice_reads_through_helper_methods_are_dependencies():
    class P(Program):
        t = table(["k"])
        out = table(["k"], ["m"])
        hi = lmax()

        def label(self, r):
            return (r.k, self.hi)

        @bloom
        def r(self):
            self.out <= self.t.map(lambda r: self.label(r))

    (rule,) = P.ir().rules
    assert rule.reads == frozenset({"hi"})
