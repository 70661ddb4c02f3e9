"""One name per concept: the error classes, their deprecated aliases, the root's ``__all__``,
and the DSL's rule recorder being per thread."""

from __future__ import annotations

import threading
import warnings

import pytest

import blooml
import blooml.dataflow
import blooml.dataflow.errors
import blooml.errors
from blooml import Program, bloom, lmax, table
from blooml.dataflow import Datalog, DatalogError
from blooml.errors import BloomlError, ProgramError, StratificationError


def test_root_all_lists_each_name_once_and_every_name_resolves() -> None:
    assert len(blooml.__all__) == len(set(blooml.__all__))
    for name in blooml.__all__:
        assert getattr(blooml, name) is not None
    assert set(blooml.__all__) <= set(dir(blooml))
    assert set(blooml.__all__) == set(blooml._WHERE) | {"__version__"}


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        (blooml, "BloomError", ProgramError),
        (blooml, "UnstratifiableError", StratificationError),
        (blooml.errors, "BloomError", ProgramError),
        (blooml.errors, "UnstratifiableError", StratificationError),
    ],
)
def test_deprecated_error_names_warn_and_are_the_same_class(module, old, new) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated; use .*{new.__name__}"):
        alias = getattr(module, old)
    assert alias is new
    with pytest.raises(alias):  # `except BloomError` keeps catching what blooml raises
        raise new(["a", "a"], ["r"]) if new is StratificationError else new("x")


def test_deprecated_names_are_not_exported_by_star_import() -> None:
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        exec("from blooml import *", namespace)
    assert "BloomError" not in namespace and "UnstratifiableError" not in namespace
    assert namespace["ProgramError"] is ProgramError


def test_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        blooml.nope


def test_one_stratification_error_for_rules_and_datalog() -> None:
    assert blooml.dataflow.StratificationError is StratificationError
    assert blooml.dataflow.errors.StratificationError is StratificationError
    with pytest.raises(StratificationError) as bloom_err:

        class Bad(Program):
            a = table(["k"])
            b = table(["k"])

            @bloom
            def rules(self):
                self.b <= self.a.notin(self.b)
                self.a <= self.b

    assert isinstance(bloom_err.value, ProgramError)
    assert bloom_err.value.negated is None and bloom_err.value.rules
    p = Datalog()
    move, win = p.relation("move", 2), p.relation("win", 1)
    x, y = p.vars("X Y")
    p.rule(win(x), move(x, y), ~win(y))
    with pytest.raises(StratificationError) as dl_err:
        p.compile()
    err = dl_err.value
    assert isinstance(err, DatalogError) and isinstance(err, ValueError)
    assert isinstance(err, BloomlError)
    assert err.cycle == ["win", "win"] and err.negated == ("win", "win") and err.rules == []


def test_two_threads_define_programs_at_once() -> None:
    """Each thread's @bloom block records into its own recorder (it was a class attribute)."""
    inside = threading.Barrier(2, timeout=10)
    made: dict[str, type] = {}
    errors: list[BaseException] = []

    def define(tag: str) -> None:
        try:

            class P(Program):
                src = table(["k"])
                dst = table(["k"])
                best = lmax()

                @bloom
                def rules(self):
                    self.dst <= self.src.map(lambda r: (r.k,))
                    inside.wait()  # both threads are now inside a @bloom block
                    self.best <= self.src.map(lambda r: lmax(r.k))
                    inside.wait()

            made[tag] = P
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=define, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    for cls in made.values():
        ir = cls.ir()
        assert [r.head for r in ir.rules] == ["dst", "best"]
    p = made["a"]()
    p.src.insert([(1,), (7,)])
    p.tick()
    assert sorted(p.dst) == [(1,), (7,)] and p.best.value.reveal() == 7
