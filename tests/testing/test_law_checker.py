"""check_laws: it passes true lattices and catches each kind of mistake, naming the law."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import strategies as st

from blooml import Lattice, lbool, lmax, lmin, monotone, morph
from blooml.testing import LawCheckError, LawReport, LawViolation, check_laws, elements, register

FAST = 25  # where the point is that a mistake is found, not an exhaustive search
PINNED_SEED = 2026  # a seed with which every FAST violation test finds its violation

MAX_ARGS = {
    name: st.integers(-25, 25)
    for name in ("gt", "gt_eq", "min_of", "__add__", "__radd__", "__sub__")
}


# -- user lattices, right and wrong --------------------------------------------------------


class Longest(Lattice):
    """The issue's user lattice, exactly."""

    wrapper_name = "llongest_chk"

    def __init__(self, value: str = ""):
        super().__init__(value)

    def merge(self, other):
        a, b = self.reveal(), other.reveal()
        return self if (len(a), a) >= (len(b), b) else other

    @monotone
    def length(self) -> lmax:
        return lmax(len(self.reveal()))


register(Longest, st.text(alphabet="abc", max_size=4).map(Longest))


class GSet(Lattice):
    """A grow-only set, correct: merge is union."""

    wrapper_name = "lgset_chk"

    def __init__(self, items: frozenset = frozenset()):
        super().__init__(frozenset(items))

    def merge(self, other):
        return type(self)(self.reveal() | other.reveal())

    @morph
    def contains(self, x: int) -> lbool:
        return lbool(x in self.reveal())

    @morph
    def intersect(self, other: GSet) -> GSet:
        return type(self)(self.reveal() & other.reveal())

    @monotone
    def size(self) -> lmax:
        return lmax(len(self.reveal()))

    @morph
    def rows(self) -> list:
        return [(x,) for x in self.reveal()]


def gsets(cls: type[GSet]) -> st.SearchStrategy[Any]:
    return st.frozensets(st.integers(0, 6), max_size=5).map(cls)


register(GSet, gsets(GSet))


class SizeAsMorph(GSet):
    """Mistake: size is monotone but not a morphism (the seed's own example)."""

    wrapper_name = "lsizemorph_chk"

    @morph
    def size(self) -> lmax:
        return lmax(len(self.reveal()))


register(SizeAsMorph, gsets(SizeAsMorph))


class NotMonotone(GSet):
    """Mistake: the number of *missing* small items shrinks as the set grows."""

    wrapper_name = "lnotmono_chk"

    @monotone
    def missing(self) -> lmax:
        return lmax(7 - len(self.reveal()))


register(NotMonotone, gsets(NotMonotone))


class Counter(Lattice):
    """A base for wrong merges over small non-negative ints; ⊥ is 0."""

    def __init__(self, value: int = 0):
        super().__init__(value)


def counters(cls: type[Counter]) -> st.SearchStrategy[Any]:
    return st.integers(0, 5).map(cls)


class SumMerge(Counter):
    """Mistake: merge adds (associative, commutative, not idempotent)."""

    wrapper_name = "lsum_chk"

    def merge(self, other):
        return SumMerge(self.reveal() + other.reveal())


class LeftMerge(Counter):
    """Mistake: merge keeps the left side unless it is ⊥ (not commutative)."""

    wrapper_name = "lleft_chk"

    def merge(self, other):
        return self if self.reveal() else other


class AvgMerge(Counter):
    """Mistake: merge averages (commutative, idempotent, not associative)."""

    wrapper_name = "lavg_chk"

    def merge(self, other):
        return AvgMerge((self.reveal() + other.reveal()) // 2)


class BadBottom(Counter):
    """Mistake: ⊥ is 0 but merge is min (0 absorbs instead of being the identity)."""

    wrapper_name = "lbadbot_chk"

    def merge(self, other):
        return BadBottom(min(self.reveal(), other.reveal()))


class BadOrder(Counter):
    """Mistake: a hand-written <= that disagrees with merge (max)."""

    wrapper_name = "lbadorder_chk"

    def merge(self, other):
        return BadOrder(max(self.reveal(), other.reveal()))

    def __le__(self, other):
        return self.reveal() >= other.reveal()


class BadHash(Counter):
    """Mistake: equal values hash differently (identity hash)."""

    wrapper_name = "lbadhash_chk"

    def merge(self, other):
        return self if self.reveal() >= other.reveal() else other

    def __eq__(self, other):
        return isinstance(other, BadHash) and self.reveal() == other.reveal()

    __hash__ = object.__hash__


for _cls in (SumMerge, LeftMerge, AvgMerge, BadBottom, BadOrder, BadHash):
    register(_cls, counters(_cls))


class Bag(Lattice):
    """Mistake: merge reverses the other side's list in place (mutates an input). Equality
    ignores the order, so every other law holds and only the mutation law can see it."""

    wrapper_name = "lmutbag_chk"

    def __init__(self, items: tuple = ()):
        super().__init__([*items])

    def merge(self, other):
        other.reveal().reverse()
        return Bag(tuple(sorted(set(self.reveal()) | set(other.reveal()))))

    def __eq__(self, other):
        return isinstance(other, Bag) and sorted(self.reveal()) == sorted(other.reveal())

    def __hash__(self):
        return hash(tuple(sorted(self.reveal())))


register(Bag, st.lists(st.integers(0, 3), max_size=3, unique=True).map(lambda xs: Bag(tuple(xs))))


def _violation(cls: type[Lattice], **kwargs: Any) -> LawViolation:
    kwargs.setdefault("max_examples", FAST)
    # pinned: these tests need hypothesis to find a violation within FAST random examples
    kwargs.setdefault("seed", PINNED_SEED)
    with pytest.raises(LawViolation) as info:
        check_laws(cls, **kwargs)
    return info.value


# -- true lattices pass ----------------------------------------------------------------------


def test_the_issue_user_lattice_passes_and_reports_what_was_checked():
    report = check_laws(Longest, max_examples=FAST)
    assert isinstance(report, LawReport)
    assert report.lattice is Longest
    assert report.checked == (
        "associative",
        "commutative",
        "idempotent",
        "bottom_identity",
        "order_agrees",
        "hash_agrees",
        "no_mutation",
        "monotone length",
    )
    assert report.skipped == ()
    assert "Longest: all 8 law checks passed" in str(report)


def test_builtin_ordered_lattices_pass_with_args():
    check_laws(lmax, args=MAX_ARGS, max_examples=FAST)
    check_laws(
        lbool, args={"when_true": elements(lmin).map(lambda v: lambda: v)}, max_examples=FAST
    )


def test_methods_typed_with_the_lattice_draw_from_elements_and_rows_compare_as_sets():
    report = check_laws(GSet, max_examples=FAST)
    assert {"morphism contains", "morphism intersect", "morphism rows", "monotone size"} <= set(
        report.checked
    )


# -- each kind of mistake is caught and named ---------------------------------------------


def test_rejects_a_non_idempotent_merge():
    v = _violation(SumMerge)
    # + is associative and commutative, so the first law to fail is idempotence
    assert v.law == "idempotent"
    assert v.method is None
    assert v.lattice is SumMerge
    assert v.example == {"a": SumMerge(1)}  # shrunk: ⊥ + ⊥ == ⊥, so 1 is the smallest
    assert "SumMerge violates the idempotent law" in str(v)
    assert "a ⊔ a = SumMerge(2)" in str(v)


def test_rejects_a_non_commutative_merge():
    v = _violation(LeftMerge)
    assert v.law == "commutative"
    assert {v.example["a"], v.example["b"]} == {LeftMerge(1), LeftMerge(2)}


def test_rejects_a_non_associative_merge():
    v = _violation(AvgMerge)
    assert v.law == "associative"
    assert "(a ⊔ b) ⊔ c" in v.observed


def test_rejects_a_bottom_that_is_not_the_identity():
    assert _violation(BadBottom).law == "bottom_identity"


def test_rejects_an_is_bottom_that_disagrees_with_bottom():
    class Zeroish(Counter):
        wrapper_name = "lzeroish_chk"

        def merge(self, other):
            return self if self.reveal() >= other.reveal() else other

        def is_bottom(self):
            return self.reveal() <= 1  # wrong: 1 is not ⊥

    v = _violation(Zeroish, elements=counters(Zeroish))
    assert v.law == "bottom_identity"
    assert v.example == {"a": Zeroish(1)}
    assert "is_bottom() is True" in v.detail


def test_rejects_an_order_that_disagrees_with_merge():
    v = _violation(BadOrder)
    assert v.law == "order_agrees"
    assert "x <= y must mean x ⊔ y == y" in v.detail


def test_rejects_equal_values_with_different_hashes():
    assert _violation(BadHash).law == "hash_agrees"


def test_rejects_a_merge_that_mutates_its_input():
    v = _violation(Bag)
    assert v.law == "no_mutation"
    assert v.example == {"a": Bag(()), "b": Bag((0, 1))}
    shown = {k: repr(x) for k, x in v.observed.items()}
    assert shown == {"b before": "Bag([0, 1])", "b after": "Bag([1, 0])"}


def test_rejects_size_wrongly_marked_morph():
    v = _violation(SizeAsMorph)
    assert v.law == "morphism"
    assert v.method == "size"
    assert v.observed["f(a ⊔ b)"] != v.observed["f(a) ⊔ f(b)"]
    assert "SizeAsMorph.size violates the morphism law" in str(v)


def test_rejects_a_non_monotone_method_marked_monotone():
    v = _violation(NotMonotone)
    assert v.law == "monotone"
    assert v.method == "missing"
    assert v.example["a"] == NotMonotone(frozenset())
    assert len(v.example["b"].reveal()) == 1


def test_rejects_a_method_returning_a_plain_value():
    class PlainSize(GSet):
        wrapper_name = "lplainsize_chk"

        @monotone
        def count(self) -> int:
            return len(self.reveal())

    v = _violation(PlainSize, elements=gsets(PlainSize))
    assert (v.law, v.method) == ("monotone", "count")
    assert "not a lattice value" in v.detail


def test_rejects_a_method_returning_different_lattices():
    class Mixed(GSet):
        wrapper_name = "lmixed_chk"

        @morph
        def either(self) -> Any:
            return lmax(1) if self.reveal() else lmin(1)

    v = _violation(Mixed, elements=gsets(Mixed))
    assert (v.law, v.method) == ("morphism", "either")
    assert "different kinds" in v.detail


def test_a_method_that_raises_is_a_violation_with_the_exception_chained():
    class Fragile(GSet):
        wrapper_name = "lfragile_chk"

        @monotone
        def first(self) -> lmax:
            return lmax(min(self.reveal()))

    v = _violation(Fragile, elements=gsets(Fragile))
    assert (v.law, v.method) == ("monotone", "first")
    assert "raised ValueError" in v.detail
    assert isinstance(v.__cause__, ValueError)
    assert v.example["a"] == Fragile(frozenset())


def test_a_method_that_mutates_self_is_a_no_mutation_violation():
    class Sneaky(Bag):
        wrapper_name = "lsneaky_chk"

        def merge(self, other):
            return Sneaky(tuple(sorted(set(self.reveal()) | set(other.reveal()))))

        @monotone
        def size(self) -> lmax:
            self.reveal().append(99)
            return lmax(len(set(self.reveal())))

    strategy = st.lists(st.integers(0, 3), max_size=3, unique=True).map(
        lambda xs: Sneaky(tuple(xs))
    )
    v = _violation(Sneaky, elements=strategy)
    assert (v.law, v.method) == ("no_mutation", "size")


# -- results: None is ⊥, collections compare as sets -------------------------------------


def test_none_counts_as_bottom_of_the_result():
    class Gate(Lattice):
        wrapper_name = "lgate_chk"

        def __init__(self, value: bool = False):
            super().__init__(value)

        def merge(self, other):
            return self if self.reveal() else other

        @morph
        def when_open(self) -> lmax | None:
            return lmax(1) if self.reveal() else None

        @morph
        def wrong(self) -> lmax | None:
            return None if self.reveal() else lmax(1)

    strategy = st.booleans().map(Gate)
    check_laws(Gate, strategy, args={"wrong": None}, max_examples=FAST)
    v = _violation(Gate, elements=strategy)
    assert (v.law, v.method) == ("morphism", "wrong")


# -- arguments -----------------------------------------------------------------------------


class Args(GSet):
    """Methods with every shape of parameter list."""

    wrapper_name = "largs_chk"

    @morph
    def shifted(self, by: int, scale: int = 1) -> GSet:
        return GSet(frozenset((x + by) * scale for x in self.reveal()))

    @morph
    def tagged(self, *tags: str, sep: str = ":") -> GSet:
        return GSet(frozenset(sep.join([*tags, str(x)]) for x in self.reveal()))

    @morph
    def anything(self, x: Any) -> lbool:
        return lbool(x in self.reveal())

    @morph
    def call(self, fn) -> lbool:
        return lbool(any(fn(x) for x in self.reveal()))


register(Args, gsets(Args))


def test_underivable_arguments_are_an_error_listing_every_method_and_the_fix():
    with pytest.raises(LawCheckError) as info:
        check_laws(Args, max_examples=FAST)
    msg = str(info.value)
    assert "Args.anything(x): parameter 'x' is typed Any" in msg
    assert "Args.call(fn): parameter 'fn' has no type hint" in msg
    assert "shifted" not in msg and "tagged" not in msg  # derived from hints / defaults
    assert 'args={"anything": ..., "call": ...}' in msg
    assert len(info.value.problems) == 2


def test_args_shapes_strategy_dict_tuple_and_none_skip():
    report = check_laws(
        Args,
        args={
            "anything": st.integers(0, 6),  # one parameter: the strategy draws it
            "call": None,  # knowingly skipped
            "shifted": st.tuples(st.integers(-2, 2), st.integers(1, 3)),  # several: a tuple
            "tagged": {"tags": st.tuples(st.sampled_from("ab")), "sep": st.just("/")},
        },
        max_examples=FAST,
    )
    assert report.skipped == (("call", "args['call'] is None"),)
    assert "morphism call" not in report.checked
    assert "morphism tagged" in report.checked
    assert "call: args['call'] is None" not in str(report)
    assert "call skipped" in str(report)


def test_args_for_a_multi_parameter_method_must_draw_tuples():
    with pytest.raises(LawCheckError, match="must draw a tuple of positional arguments"):
        check_laws(
            Args, args={"anything": st.just(1), "call": None, "shifted": st.just(1)}, max_examples=5
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"nope": st.just(1)}, "args names 'nope', but it is not a @morph or @monotone method"),
        ({"merge": st.just(1)}, "merge's laws are always checked"),
        ({"size": 3}, "args['size'] must be a hypothesis strategy"),
        ({"shifted": {"step": st.just(1)}}, "names parameter 'step'"),
        ({"shifted": {"by": 1}}, "args['shifted']['by'] must be a hypothesis strategy"),
        ([("size", st.just(1))], "args must be a dict"),
    ],
)
def test_malformed_args_are_clear_errors(args, message):
    with pytest.raises(LawCheckError, match=message.replace("(", r"\(").replace("[", r"\[")):
        check_laws(Args, args=args, max_examples=5)


# -- setup errors --------------------------------------------------------------------------


def test_unregistered_class_tells_the_user_to_register():
    class Unknown(Lattice):
        def merge(self, other):
            return self

    with pytest.raises(LawCheckError, match=r"blooml.testing.register\(.*Unknown, strategy\)"):
        check_laws(Unknown)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_laws(int), "expects a Lattice subclass"),
        (lambda: check_laws(Lattice), "expects a Lattice subclass"),
        (lambda: check_laws(lmax, elements=lmax), "elements must be a hypothesis strategy"),
        (lambda: check_laws(Longest, max_examples=0), "max_examples must be a positive int"),
        (lambda: check_laws(Longest, seed="x"), "seed must be an int"),
        (
            lambda: check_laws(Longest, elements=st.text().map(GSet), max_examples=5),
            "drew GSet",
        ),
    ],
)
def test_setup_errors(call, message):
    with pytest.raises(LawCheckError, match=message):
        call()


# -- replay ------------------------------------------------------------------------------


def test_the_same_seed_replays_the_same_counterexample_and_the_message_says_how():
    first = _violation(SizeAsMorph, seed=1234)
    again = _violation(SizeAsMorph, seed=1234)
    assert first.example == again.example
    assert first.seed == 1234
    assert "seed=1234, max_examples=25" in str(first)
    assert "--seed 1234" in str(first)


def test_violations_pickle():
    v = _violation(LeftMerge)
    back = pickle.loads(pickle.dumps(v))
    assert (back.law, back.lattice, back.example) == (v.law, v.lattice, v.example)
    assert isinstance(v, AssertionError)


class KeyMax(Lattice):
    """A map of key -> lmax, with methods returning rows."""

    wrapper_name = "lkeymax_chk"

    def __init__(self, items: tuple = ()):
        super().__init__(tuple(sorted(items)))

    def merge(self, other):
        out = dict(self.reveal())
        for k, v in other.reveal():
            out[k] = out[k].merge(v) if k in out else v
        return KeyMax(tuple(out.items()))

    @morph
    def rows(self) -> list:
        """(key, lmax) rows: rows differing only in the lattice column merge, so a morphism."""
        return [(k, v) for k, v in self.reveal()]

    @monotone
    def keys(self) -> set:
        return {k for k, _ in self.reveal()}

    @morph
    def plain_rows(self) -> list:
        """(key, number) rows: the numbers are plain values, so this is not a morphism."""
        return [(k, v.reveal()) for k, v in self.reveal()]


KEYMAX = st.dictionaries(st.sampled_from("ab"), st.integers(0, 3).map(lmax), max_size=2).map(
    lambda d: KeyMax(tuple(d.items()))
)


def test_rows_with_lattice_columns_compare_as_a_bloom_collection():
    report = check_laws(KeyMax, KEYMAX, args={"plain_rows": None}, max_examples=FAST)
    assert {"morphism rows", "monotone keys"} <= set(report.checked)
    v = _violation(KeyMax, elements=KEYMAX)
    assert (v.law, v.method) == ("morphism", "plain_rows")
    # e.g. a = {a: 0}, b = {a: 1}: the merge has one row (a, 1), the parts two rows for key a
    (row,) = v.observed["f(a ⊔ b)"]
    parts = set(v.observed["f(a)"]) | set(v.observed["f(b)"])
    assert len(parts) == 2 and row in parts and {k for k, _ in parts} == {row[0]}
    assert repr(v.observed["f(a) ⊔ f(b)"]).startswith("rows{")


def test_hints_resolve_one_by_one_when_another_name_is_local():
    class Local:
        pass

    class Partly(GSet):
        wrapper_name = "lpartly_chk"

        @morph
        def has(self, x: int, tag: Local | None = None) -> lbool:
            return lbool(x in self.reveal())

        @morph
        def meet(self, other: Partly) -> GSet:
            return GSet(self.reveal() & other.reveal())

    # "Local | None" cannot be resolved from the module, but "int" and "Partly" still are
    report = check_laws(Partly, gsets(Partly), max_examples=10)
    assert {"morphism has", "morphism meet"} <= set(report.checked)
