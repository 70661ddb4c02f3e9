"""The embedded engine: timesteps, operators, joins, aggregates, lattices, keys."""

from __future__ import annotations

import pytest

from blooml import (
    KeyConstraintError,
    Program,
    ProgramError,
    accum,
    avg,
    bloom,
    bool_and,
    bool_or,
    count,
    interface,
    lbool,
    lmap,
    lmax,
    lmin,
    lset,
    max_,
    min_,
    rows,
    scratch,
    sum_,
    table,
)


def tuples(coll):
    return {tuple(r) for r in coll}


class Paths(Program):
    link = table(["src", "dst", "c"])
    path = table(["src", "dst", "hop"], ["c"])
    best = table(["src", "dst"], ["c"])
    seen = lset()

    @bloom
    def rules(self):
        self.path <= self.link.map(lambda lk: (lk.src, lk.dst, "direct", lmin(lk.c)))
        self.path <= self.link.join(self.path, self.link.dst == self.path.src).map(
            lambda lk, p: (lk.src, p.dst, lk.dst, p.c + lk.c)
        )
        self.best <= self.path.map(lambda p: (p.src, p.dst, p.c))
        self.seen <= self.link.map(lambda lk: lk.src)


def test_paths_contract_example():
    p = Paths()
    p.link.insert([("a", "b", 10), ("b", "c", 5)])
    assert tuples(p.best) == set()  # pending until the tick
    p.tick()
    best = {(r.src, r.dst): r.c for r in p.best}
    assert best == {("a", "b"): lmin(10), ("b", "c"): lmin(5), ("a", "c"): lmin(15)}
    r = next(iter(p.best))
    assert r[0] == r.src
    assert p.seen.value == lset(["a", "b"])
    p.link.insert([("a", "c", 3)])
    p.tick()
    best = {(r.src, r.dst): r.c for r in p.best}
    assert best[("a", "c")] == lmin(3)
    assert p.tick_count == 2


def test_scratch_is_emptied_and_table_persists():
    class P(Program):
        inp = scratch(["k"])
        t = table(["k"])
        s = scratch(["k"])

        @bloom
        def r(self):
            self.t <= self.inp
            self.s <= self.inp

    p = P()
    p.inp.insert([("a",)])
    p.tick()
    assert tuples(p.s) == {("a",)} and tuples(p.t) == {("a",)}
    p.tick()
    assert tuples(p.s) == set() and tuples(p.t) == {("a",)}


def test_deferred_and_delete_timing_as_in_bud():
    class P(Program):
        t = table(["k"])
        nxt = table(["k"])
        kill = scratch(["k"])

        @bloom
        def r(self):
            self.nxt < +self.t
            self.t < -self.kill

    p = P()
    p.t.insert([("a",), ("b",)])
    p.tick()  # tick 1
    assert tuples(p.nxt) == set()
    p.kill.insert([("a",)])
    p.tick()  # tick 2: <+ from tick 1 applied; <- issued now
    assert tuples(p.nxt) == {("a",), ("b",)}
    assert tuples(p.t) == {("a",), ("b",)}  # still visible after tick n
    p.tick()  # tick 3: the deletion took effect at its start
    assert tuples(p.t) == {("b",)}


def test_replace_operator():
    class P(Program):
        kv = table(["k"], ["v"])
        put = scratch(["k"], ["v"])

        @bloom
        def r(self):
            self.kv < +-self.put

    p = P()
    p.put.insert([("a", 1)])
    p.tick(2)
    assert tuples(p.kv) == {("a", 1)}
    p.put.insert([("a", 2)])
    p.tick(2)
    assert tuples(p.kv) == {("a", 2)}


def test_external_delete_and_len_contains():
    class P(Program):
        t = table(["k"], ["v"])

    p = P()
    p.t.insert([("a", 1), ("b", 2)])
    p.tick()
    assert len(p.t) == 2 and ("a", 1) in p.t and ("a", 2) not in p.t
    p.t.delete([("a", 1)])
    p.tick()
    assert tuples(p.t) == {("b", 2)}


def test_filter_flat_map_pro_and_none_drops():
    class P(Program):
        t = table(["k", "v"])
        out = table(["x"])
        fm = table(["x"])

        @bloom
        def r(self):
            self.out <= self.t.filter(lambda r: r.v > 1).pro(lambda r: r.k)
            self.out <= self.t.map(lambda r: None)
            self.fm <= self.t.flat_map(lambda r: [(r.k + str(i),) for i in range(r.v)])

    p = P()
    p.t.insert([("a", 1), ("b", 2)])
    p.tick()
    assert tuples(p.out) == {("b",)}
    assert tuples(p.fm) == {("a0",), ("b0",), ("b1",)}


def test_three_way_join_and_natural_join_and_left_join():
    class P(Program):
        a = table(["x", "y"])
        b = table(["y", "z"])
        c = table(["z", "w"])
        j3 = table(["x", "w"])
        nat = table(["x", "y", "y2", "z"])
        lj = table(["x", "z"])

        @bloom
        def r(self):
            self.j3 <= self.a.join(self.b, self.a.y == self.b.y).join(
                self.c, self.b.z == self.c.z
            ).map(lambda a, b, c: (a.x, c.w))
            self.nat <= self.a.natjoin(self.b)
            self.lj <= self.a.leftjoin(self.b, self.a.y == self.b.y).map(
                lambda a, b: (a.x, b.z if b is not None else None)
            )

    p = P()
    p.a.insert([(1, 2), (5, 6)])
    p.b.insert([(2, 3)])
    p.c.insert([(3, 4)])
    p.tick()
    assert tuples(p.j3) == {(1, 4)}
    assert tuples(p.nat) == {(1, 2, 2, 3)}
    assert tuples(p.lj) == {(1, 3), (5, None)}


def test_notin_with_and_without_predicates_and_function():
    class P(Program):
        a = table(["k", "v"])
        b = table(["k", "v"])
        plain = scratch(["k", "v"])
        bykey = scratch(["k", "v"])
        byfn = scratch(["k", "v"])

        @bloom
        def r(self):
            self.plain <= self.a.notin(self.b)
            self.bykey <= self.a.notin(self.b, self.a.k == self.b.k)
            self.byfn <= self.a.notin(self.b, lambda x, y: x.v < y.v)

    p = P()
    p.a.insert([("x", 1), ("y", 2), ("z", 9)])
    p.b.insert([("x", 1), ("y", 5)])
    p.tick()
    assert tuples(p.plain) == {("y", 2), ("z", 9)}
    assert tuples(p.bykey) == {("z", 9)}
    assert tuples(p.byfn) == {("z", 9)}


def test_group_with_every_aggregate():
    class P(Program):
        t = table(["k", "i"], ["c", "b"])
        g = scratch(["k"], ["n", "s", "lo", "hi", "mean", "all", "and_", "or_"])
        tot = scratch([], ["n"])

        @bloom
        def r(self):
            self.g <= self.t.group(
                ["k"],
                count(),
                sum_("c"),
                min_("c"),
                max_("c"),
                avg("c"),
                accum("c"),
                bool_and("b"),
                bool_or("b"),
            )
            self.tot <= self.t.group(None, count())

    p = P()
    p.t.insert([("a", 1, 2, True), ("a", 2, 4, False), ("b", 1, 5, True)])
    p.tick()
    assert tuples(p.g) == {
        ("a", 2, 6, 2, 4, 3.0, frozenset({2, 4}), False, True),
        ("b", 1, 5, 5, 5, 5.0, frozenset({5}), True, True),
    }
    assert tuples(p.tot) == {(3,)}


def test_argmin_argmax_argagg_reduce_choose():
    class P(Program):
        t = table(["k", "j"], ["c"])
        lo = scratch(["k", "j"], ["c"])
        hi = scratch(["k", "j"], ["c"])
        hi2 = scratch(["k", "j"], ["c"])
        total = scratch(["n"])
        one = scratch(["k", "j"], ["c"])

        @bloom
        def r(self):
            self.lo <= self.t.argmin(["k"], "c")
            self.hi <= self.t.argmax(["k"], "c")
            self.hi2 <= self.t.argagg("max", ["k"], "c")
            self.total <= self.t.reduce(0, lambda m, r: m + r.c)
            self.one <= self.t.choose(["k"], seed=3)

    p = P()
    p.t.insert([("a", 1, 5), ("a", 2, 1), ("a", 3, 1), ("b", 1, 7)])
    p.tick()
    assert tuples(p.lo) == {("a", 2, 1), ("a", 3, 1), ("b", 1, 7)}
    assert tuples(p.hi) == tuples(p.hi2) == {("a", 1, 5), ("b", 1, 7)}
    assert tuples(p.total) == {(14,)}
    chosen = tuples(p.one)
    assert len(chosen) == 2 and {r[0] for r in chosen} == {"a", "b"}
    q = P()
    q.t.insert(list(p.t))
    q.tick()
    assert tuples(q.one) == chosen  # deterministic from the seed


def test_include_and_empty():
    class P(Program):
        t = table(["k"])
        flag = table(["name"])

        @bloom
        def r(self):
            self.flag <= self.t.include(("a",)).when_true(lambda: [("has_a",)])
            self.flag <= self.t.empty().when_true(lambda: [("empty",)])

    p = P()
    p.tick()
    assert tuples(p.flag) == {("empty",)}
    p.t.insert([("a",)])
    p.tick()
    assert tuples(p.flag) == {("empty",), ("has_a",)}


def test_lattice_methods_on_variables_and_operators():
    class P(Program):
        vote = scratch(["who"])
        votes = lset()
        cnt = lmax()
        done = lbool()
        nxt = lmax()
        m = lmap()
        got = lmax()
        out = table(["msg"])

        @bloom
        def r(self):
            self.votes <= self.vote.map(lambda v: v.who)
            self.cnt <= self.votes.size()
            self.done <= self.cnt.gt_eq(2)
            self.nxt <= self.cnt + 10
            self.m <= self.vote.map(lambda v: (v.who, lmax(len(v.who))))
            self.got <= self.m.at("bob", lmax)
            self.out <= self.done.when_true(lambda: [("quorum",)])

    p = P()
    p.vote.insert([("al",)])
    p.tick()
    assert p.cnt.value == lmax(1) and not p.done.value and p.nxt.value == lmax(11)
    assert tuples(p.out) == set() and p.got.value == lmax()
    p.vote.insert([("bob",)])
    p.tick()
    assert p.cnt.value == lmax(2) and p.done.value == lbool(True)
    assert tuples(p.out) == {("quorum",)}
    assert p.got.value == lmax(3)


def test_to_collection_of_lset_and_lmap():
    class P(Program):
        s = lset()
        m = lmap()
        rows_s = table(["v"])
        rows_m = table(["k"], ["v"])

        @bloom
        def r(self):
            self.rows_s <= self.s.to_collection()
            self.rows_m <= self.m.to_collection()

    p = P()
    p.s.insert(lset([1, 2]))
    p.m.insert(lmap({"a": lmax(1)}))
    p.tick()
    assert tuples(p.rows_s) == {(1,), (2,)}
    assert tuples(p.rows_m) == {("a", lmax(1))}


def test_literal_rows_read_lattice_variables_when_they_grow():
    class P(Program):
        bump = scratch(["v"])
        m1 = lmax()
        t = table(["name"], ["v"])

        @bloom
        def r(self):
            self.m1 <= self.bump.map(lambda b: b.v)
            self.t <= [("m1", self.m1)]

    p = P()
    p.bump.insert([(3,)])
    p.tick()
    assert tuples(p.t) == {("m1", lmax(3))}
    p.bump.insert([(7,)])
    p.tick()
    assert tuples(p.t) == {("m1", lmax(7))}  # merged, not conflicting


def test_lattice_read_inside_lambda_is_current_value():
    class P(Program):
        truth = table(["k"])
        cloq = lmax(0)

        @bloom
        def r(self):
            self.cloq < +self.truth.map(lambda t: self.cloq + 1)

    p = P()
    p.truth.insert([("x",)])
    p.tick(4)
    assert p.cloq.value == lmax(3)  # +1 per tick after the first


def test_tick_count_in_rules_is_the_current_tick():
    class P(Program):
        go = scratch(["k"])
        log = table(["k", "t"])

        @bloom
        def r(self):
            self.log <= self.go.map(lambda g: (g.k, self.tick_count))

    p = P()
    p.go.insert([("a",)])
    p.tick()
    p.tick()
    p.go.insert([("b",)])
    p.tick()
    assert tuples(p.log) == {("a", 0), ("b", 2)}


def test_lattice_columns_merge_and_key_conflicts_raise():
    class P(Program):
        t = table(["k"], ["name", "c"])

    p = P()
    p.t.insert([("a", "x", lmax(1)), ("a", "x", lmax(5))])
    p.tick()
    assert tuples(p.t) == {("a", "x", lmax(5))}
    p.t.insert([("a", "y", lmax(1))])
    with pytest.raises(KeyConstraintError) as ei:
        p.tick()
    e = ei.value
    assert e.collection == "t" and e.key == "a"
    assert e.old == ("a", "x", lmax(5)) and e.new == ("a", "y", lmax(1))
    assert tuples(p.t) == {("a", "x", lmax(5))}


def test_lattice_key_columns_are_rejected_at_insert():
    class P(Program):
        t = table(["k"], ["v"])
        u = table(["k"])

        @bloom
        def r(self):
            self.u <= self.t.map(lambda r: (r.v,))

    p = P()
    with pytest.raises(ProgramError, match="cannot be key columns"):
        p.t.insert([(lmax(1), 2)])
    p.t.insert([("a", lmax(2))])
    with pytest.raises(ProgramError, match="cannot be key columns") as ei:
        p.tick()
    assert any("rule 0" in n for n in ei.value.__notes__)


def test_arity_errors_name_the_collection():
    class P(Program):
        t = table(["k"], ["v"])

    p = P()
    with pytest.raises(ProgramError, match=r"'t' has 2 columns"):
        p.t.insert([("a",)])
    with pytest.raises(ProgramError, match="iterable of tuples"):
        p.t.insert("ab")


def test_lattice_insert_type_checked():
    class P(Program):
        m = lmax()

    p = P()
    with pytest.raises(ProgramError, match="expected a lmax value"):
        p.m.insert(3)
    p.m.insert(lmax(3))
    p.tick()
    assert p.m.value == lmax(3)


def test_rows_wrapper_with_deferred_ops():
    class P(Program):
        t = table(["k"], ["v"])

        @bloom
        def r(self):
            self.t < +rows([("a", 1)])

    p = P()
    p.tick()
    assert tuples(p.t) == set()
    p.tick()
    assert tuples(p.t) == {("a", 1)}


def test_interfaces_connect_modules_via_mixins():
    class Proto(Program, abstract=True):
        req = interface(["k"])
        resp = interface(["k"], ["v"], input=False)

    class Impl:
        store = table(["k"], ["v"])

        @bloom
        def serve(self):
            self.resp <= self.req.join(self.store, self.req.k == self.store.k).map(lambda q, s: s)

    class Server(Impl, Proto):
        pass

    s = Server()
    s.store.insert([("a", 1), ("b", 2)])
    s.req.insert([("a",)])
    s.tick()
    assert tuples(s.resp) == {("a", 1)}


def test_collections_cannot_be_read_inside_rule_functions():
    class P(Program):
        t = table(["k"])
        u = table(["k"])

        @bloom
        def r(self):
            self.u <= self.t.map(lambda r: (len(self.u),))

    p = P()
    p.t.insert([("a",)])
    with pytest.raises(ProgramError, match="rule functions cannot read collections"):
        p.tick()


def test_tick_n_and_bad_n():
    class P(Program):
        t = table(["k"])

    p = P()
    p.tick(3)
    assert p.tick_count == 3
    with pytest.raises(ProgramError):
        p.tick(-1)


def test_gc_is_paused_during_a_tick_and_restored_even_on_errors():
    import gc

    class P(Program):
        t = scratch(["k"])
        out = table(["k"])

        @bloom
        def r(self):
            self.out <= self.t.map(lambda r: (r.k, gc.isenabled()))

    class Q(Program):
        t = scratch(["k"])
        out = table(["k", "gc"])

        @bloom
        def r(self):
            self.out <= self.t.map(lambda r: (r.k, gc.isenabled()))

    assert gc.isenabled()
    p = P()
    p.t.insert([("a",)])
    with pytest.raises(ProgramError):  # a 2-tuple into a 1-column table
        p.tick()
    assert gc.isenabled()
    q = Q()
    q.t.insert([("a",)])
    q.tick()
    assert tuples(q.out) == {("a", False)} and gc.isenabled()


def test_filtered_join_as_a_body_concatenates_rows_and_folds():
    class P(Program):
        a = table(["x", "y"])
        b = table(["y", "z"])
        out = table(["x", "y", "y2", "z"])
        pairs = lset()

        @bloom
        def r(self):
            self.out <= self.a.join(self.b, self.a.y == self.b.y).filter(lambda a, b: b.z > 0)
            self.pairs <= self.a.join(self.b, self.a.y == self.b.y).filter(lambda a, b: True)

    p = P()
    p.a.insert([(1, 2)])
    p.b.insert([(2, 3), (2, -1)])
    p.tick()
    assert tuples(p.out) == {(1, 2, 2, 3)}
    assert p.pairs.value == lset([(1, 2, 2, 3), (1, 2, 2, -1)])
