"""Which rule functions are recovered as expressions, pinned per CPython version.

Recovery (``blooml.ir.exprs.decompile``) reads bytecode, which changes between CPython
versions. A function that is not recovered still runs (as Python), only slower and opaque to
``P.ir()`` and to the engines' lowering; so a change of the interpreter that stops recovering a
rule would go unnoticed. This test pins, for each supported version, the set of catalogue
entries (``inline_catalogue.py``) that are recovered, and the instructions the reader meets
doing so; together the versions must exercise every instruction the reader knows
(``exprs.INSTRUCTIONS``), so that it names none that no test runs. CI runs it on 3.11, 3.12
and 3.13.
"""

from __future__ import annotations

import dis
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inline_catalogue import CATALOGUE

from blooml.ir.exprs import INSTRUCTIONS, decompile

NEVER = {"builtin_call", "chained_compare", "closure", "conditional", "nonmonotone_method"}
RECOVERED = {
    (3, 11): set(CATALOGUE) - NEVER,
    (3, 12): set(CATALOGUE) - NEVER - {"unary_plus"},  # +x became CALL_INTRINSIC_1
    (3, 13): set(CATALOGUE) - NEVER - {"unary_plus"},
}
_COMMON = {
    "BINARY_OP",
    "BINARY_SUBSCR",
    "BUILD_TUPLE",
    "CALL",
    "COMPARE_OP",
    "EXTENDED_ARG",
    "LOAD_ATTR",
    "LOAD_CONST",
    "LOAD_FAST",
    "LOAD_GLOBAL",
    "RESUME",
    "RETURN_VALUE",
    "UNARY_INVERT",
    "UNARY_NEGATIVE",
    "UNARY_NOT",
}
OPS = {
    (3, 11): _COMMON | {"LOAD_METHOD", "PRECALL", "UNARY_POSITIVE"},
    (3, 12): _COMMON | {"RETURN_CONST"},
    (3, 13): _COMMON | {"RETURN_CONST", "LOAD_FAST_LOAD_FAST", "TO_BOOL"},
}
VERSION = sys.version_info[:2]
IDIOMATIC = {"sp_base", "sp_step", "sp_base_hop", "sp_step_hop", "tc_step"}


def _pinned() -> None:
    if VERSION not in RECOVERED:
        pytest.fail(
            f"CPython {VERSION[0]}.{VERSION[1]} has no pinned inline catalogue: run this test's "
            "catalogue on it and pin what is recovered (and teach the reader its instructions)"
        )


def test_recovered_set_is_pinned_for_this_version():
    _pinned()
    got = {name for name, fn in CATALOGUE.items() if decompile(fn) is not None}
    assert got == RECOVERED[VERSION], (
        f"lost: {sorted(RECOVERED[VERSION] - got)}, gained: {sorted(got - RECOVERED[VERSION])}"
    )


def test_idiomatic_rules_are_recovered_on_every_version():
    for version, names in RECOVERED.items():
        assert names >= IDIOMATIC, version


def test_instructions_met_are_pinned_for_this_version():
    _pinned()
    met: set[str] = set()
    for name in RECOVERED[VERSION]:
        met |= {i.opname for i in dis.get_instructions(CATALOGUE[name].__code__)}
    assert met <= INSTRUCTIONS  # a recovered function uses only known instructions
    assert met == OPS[VERSION]


def test_every_known_instruction_is_exercised_on_some_version():
    assert set().union(*OPS.values()) == INSTRUCTIONS
