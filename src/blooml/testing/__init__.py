"""Property-based checks that a lattice is a lattice and that its method marks are true.

The public surface is small; the machinery lives in underscore modules::

    from hypothesis import strategies as st
    from blooml.testing import check_laws, elements, register

    register(Longest, st.text(alphabet="ab", max_size=4).map(Longest))
    check_laws(Longest)                      # raises LawViolation with a shrunk example

    class TestLongest(LatticeLaws):          # the same, as one pytest test per law
        lattice = Longest

Requires hypothesis (``pip install blooml[test]``). See ``docs/testing.md``.
"""

from __future__ import annotations

try:
    import hypothesis as _hypothesis  # noqa: F401  (fail early with the fix, not deep inside)
except ImportError as _exc:  # pragma: no cover - the test extra is installed in our suite
    raise ImportError(
        "blooml.testing needs hypothesis: pip install 'blooml[test]' (or pip install hypothesis)"
    ) from _exc

from blooml.testing import _collection_strategies as _collection_strategies
from blooml.testing import _crdt_strategies as _crdt_strategies  # registers the CRDTs
from blooml.testing._confluence import ConfluenceReport, check_confluence
from blooml.testing._errors import LawCheckError, LawCheckWarning, LawViolation
from blooml.testing._laws import LawReport, check_laws
from blooml.testing._pytest import LatticeLaws
from blooml.testing._strategies import elements, register

__all__ = [
    "ConfluenceReport",
    "LatticeLaws",
    "LawCheckError",
    "LawCheckWarning",
    "LawReport",
    "LawViolation",
    "check_confluence",
    "check_laws",
    "elements",
    "register",
]

# Public names show (and pickle) as blooml.testing.X, not as their private home module.
for _obj in (
    ConfluenceReport,
    LatticeLaws,
    LawCheckError,
    LawCheckWarning,
    LawReport,
    LawViolation,
    check_confluence,
    check_laws,
    elements,
    register,
):
    _obj.__module__ = __name__
del _obj
