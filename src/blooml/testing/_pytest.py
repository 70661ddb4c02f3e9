"""``LatticeLaws``: the law checker as a pytest base class, one test per law and per method."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hypothesis.strategies import SearchStrategy

from blooml.lattices import Lattice
from blooml.testing._args import checked_methods
from blooml.testing._laws import Session

__all__ = ["LatticeLaws"]

_PARAM = "lattice_method"


class LatticeLaws:
    """Subclass in a test module to check a lattice's laws as separate pytest tests::

        class TestLongest(LatticeLaws):
            lattice = Longest
            elements = st.text(alphabet="ab", max_size=4).map(Longest)   # optional
            args = {"starts_with": st.text(max_size=1)}                  # optional

    yields ``test_associative``, ``test_commutative``, ``test_idempotent``,
    ``test_bottom_identity``, ``test_order_agrees``, ``test_hash_agrees``, ``test_no_mutation``,
    and ``test_morphisms[<method>]`` / ``test_monotones[<method>]`` per marked method (skipped
    when there is none). A failing test raises :class:`~blooml.testing.LawViolation`.

    Class attributes (as for :func:`~blooml.testing.check_laws`):
        lattice: the lattice class (required; a subclass without it is not collected).
        elements: strategy of values; default ``blooml.testing.elements(lattice)``.
        args: method arguments by method name.
        max_examples: examples per test; default the active hypothesis profile's.
        seed: replay the examples of a reported violation.
        edge: run the deterministic edge pass first (default ``True``; see ``check_laws``).

    The base class itself is never collected. A subclass that defines its own
    ``pytest_generate_tests`` must call ``super().pytest_generate_tests(metafunc)``.
    """

    __test__: ClassVar[bool] = False
    lattice: ClassVar[type[Lattice] | None] = None
    elements: ClassVar[SearchStrategy[Any] | None] = None
    args: ClassVar[Mapping[str, Any] | None] = None
    max_examples: ClassVar[int | None] = None
    seed: ClassVar[int | None] = None
    edge: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = cls.lattice is not None

    # -- one test per law of merge -----------------------------------------------------------

    def test_associative(self) -> None:
        """(a ⊔ b) ⊔ c == a ⊔ (b ⊔ c)."""
        self._check("associative")

    def test_commutative(self) -> None:
        """a ⊔ b == b ⊔ a."""
        self._check("commutative")

    def test_idempotent(self) -> None:
        """a ⊔ a == a."""
        self._check("idempotent")

    def test_bottom_identity(self) -> None:
        """⊥ ⊔ a == a == a ⊔ ⊥, Cls.bottom() == Cls(), and is_bottom() agrees."""
        self._check("bottom_identity")

    def test_order_agrees(self) -> None:
        """<=, <, >=, > and | agree with merge."""
        self._check("order_agrees")

    def test_hash_agrees(self) -> None:
        """Equal values hash equally."""
        self._check("hash_agrees")

    def test_no_mutation(self) -> None:
        """Merge never changes its inputs."""
        self._check("no_mutation")

    # -- one test per marked method ----------------------------------------------------------

    def test_morphisms(self, lattice_method: str) -> None:
        """The @morph method distributes over merge: f(a ⊔ b) == f(a) ⊔ f(b)."""
        self._check("morphism", lattice_method)

    def test_monotones(self, lattice_method: str) -> None:
        """The @monotone method preserves the order: f(a) <= f(a ⊔ b)."""
        self._check("monotone", lattice_method)

    def pytest_generate_tests(self, metafunc: Any) -> None:
        """Parametrize ``test_morphisms``/``test_monotones`` by the lattice's marked methods."""
        if _PARAM not in metafunc.fixturenames or self.lattice is None:
            return
        name = metafunc.function.__name__
        kind = {"test_morphisms": "morph", "test_monotones": "monotone"}.get(name)
        if kind is None:
            return
        methods = [m for m, k in checked_methods(self.lattice) if k == kind]
        if methods:
            metafunc.parametrize(_PARAM, methods)
        else:
            import pytest

            reason = f"{self.lattice.__qualname__} has no @{kind} methods besides merge"
            metafunc.parametrize(
                _PARAM, [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="none")]
            )

    def _check(self, law: str, method: str | None = None) -> None:
        cls = type(self)
        session = Session(
            cls.lattice,
            cls.elements,
            cls.args,
            cls.max_examples,
            cls.seed,
            only_method=method if method is not None else "",
            edge=cls.edge,
        )
        check = session.find(law, method)
        if check is None:  # args[method] is None: knowingly not checked
            import pytest

            pytest.skip(f"{method}: args[{method!r}] is None (knowingly not checked)")
        violation = session.run(check)
        if violation is not None:
            raise violation
