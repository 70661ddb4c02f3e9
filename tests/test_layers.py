"""The layer order of docs/architecture.md, checked on the import graph (ast), and the lazy
root package: ``import blooml.lattices`` loads no engine."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"

# Lowest first. A module may import from its own package and from packages of strictly lower
# layers; packages in one layer are independent of each other. `blooml.net` (LocalNetwork and
# the network nodes) sits above the engine it drives and below the DSL's factory.
LAYERS: list[tuple[str, ...]] = [
    ("blooml.errors",),
    ("blooml.lattices",),
    ("blooml.ir", "blooml.testing"),
    ("blooml.engine", "blooml.spark"),
    # PomoFlow: its Datalog runs on the engine's core, beside the network layer
    ("blooml.net", "blooml.dataflow"),
    ("blooml._factory",),
    ("blooml.bloom",),
    # libraries of rules written in the DSL (membership, delta anti-entropy): above the network
    ("blooml.net.membership", "blooml.net.antientropy"),
    ("blooml",),  # the root package: lazy re-exports of everything above
    ("blooml.cli",),
    ("blooml.__main__",),
]

# On top of the order: the DSL records IR and evaluates nothing, so it reaches no engine
# directly; the runtime comes from blooml._factory.
FORBIDDEN = {
    "blooml.bloom": ("blooml.engine", "blooml.spark", "blooml.dataflow", "blooml.net"),
}


def _unit(module: str) -> str:
    """The layer unit a module belongs to: the longest LAYERS entry that prefixes it."""
    best = ""
    for layer in LAYERS:
        for unit in layer:
            if (module == unit or module.startswith(unit + ".")) and len(unit) > len(best):
                best = unit
    if not best:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it (and to the docs)")
    return best


def _rank(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every ``blooml`` module imported anywhere in the file (also inside functions and
    ``TYPE_CHECKING`` blocks), with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            if node.module is None or node.level:
                # `from . import x` / `from .a import b`: x may be a submodule
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
            out.append((node.lineno, base))
    return [(ln, m) for ln, m in out if m == "blooml" or m.startswith("blooml.")]


def _violations() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        src_unit = _unit(module)
        for line, target in _imports(path, module):
            tgt_unit = _unit(target)
            if tgt_unit == src_unit:
                continue
            where = f"{path.relative_to(SRC)}:{line}: {module} imports {target}"
            if _rank(tgt_unit) >= _rank(src_unit):
                bad.append(f"{where} (layer {tgt_unit} is not below {src_unit})")
            for prefix, banned in FORBIDDEN.items():
                if src_unit == prefix and any(
                    target == b or target.startswith(b + ".") for b in banned
                ):
                    bad.append(f"{where} (the DSL reaches engines only through blooml._factory)")
    return bad


def test_imports_follow_the_layer_order() -> None:
    assert _violations() == []


def test_the_checker_catches_an_upward_import(tmp_path, monkeypatch) -> None:
    """The walker is not vacuous: an engine module importing the DSL, and the DSL importing
    the engine (even inside a function), are both reported."""
    fake = tmp_path / "src" / "blooml"
    (fake / "engine").mkdir(parents=True)
    (fake / "bloom").mkdir()
    (fake / "engine" / "bad.py").write_text("from blooml.bloom import Program\n")
    (fake / "bloom" / "bad.py").write_text("def f():\n    from ..engine import runtime\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "src")
    found = _violations()
    assert any("engine/bad.py:1" in v and "blooml.bloom is not below" in v for v in found)
    assert any("bloom/bad.py:2" in v and "only through blooml._factory" in v for v in found)


def test_architecture_doc_states_the_same_order() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"## Layer order\n(.*?)\n## ", text, re.S)
    assert block, "docs/architecture.md lacks its '## Layer order' section"
    named = re.findall(r"`(blooml(?:\.\w+)*)`", block.group(1))
    first = list(dict.fromkeys(named))  # in order of first mention
    want = [u for layer in LAYERS for u in layer]
    assert [u for u in first if u in want] == want


@pytest.mark.parametrize(
    ("statement", "absent"),
    [
        ("import blooml", ("blooml.bloom", "blooml.engine", "blooml.lattices")),
        ("import blooml.lattices", ("blooml.bloom", "blooml.engine", "blooml.ir")),
        ("import blooml.bloom", ("blooml.engine",)),
        ("from blooml import Program, lmax", ("blooml.engine",)),
        ("import blooml.ir", ("blooml.engine", "blooml.bloom")),
    ],
)
def test_lazy_imports_load_no_engine(statement: str, absent: tuple[str, ...]) -> None:
    code = (
        f"import sys; {statement}; "
        "print(sorted({m.rsplit('.', 1)[0] if m.count('.') > 1 else m "
        "for m in sys.modules if m.startswith('blooml')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip()
    for mod in absent:
        assert f"'{mod}'" not in loaded, f"`{statement}` loaded {mod}: {loaded}"


def test_a_program_instance_reaches_the_engine_through_the_factory() -> None:
    code = (
        "import sys\n"
        "from blooml import Program, bloom, table\n"
        "class P(Program):\n"
        "    t = table(['k'])\n"
        "    @bloom\n"
        "    def r(self):\n"
        "        self.t <= self.t\n"
        "assert 'blooml.engine.runtime' not in sys.modules\n"
        "p = P()\n"
        "print(type(p._rt).__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "blooml.engine.runtime"
