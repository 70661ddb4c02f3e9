"""The public API contract: documented names, importable without optional dependencies."""

import importlib
import inspect
import subprocess
import sys
import warnings

import pytest

PUBLIC_MODULES = [
    "blooml",
    "blooml.errors",
    "blooml.lattices",
    "blooml.testing",
    "blooml.ir",
    "blooml.engine",
    "blooml.dataflow",
    "blooml.spark",
]

# Names the issues quote: tests outside the project import exactly these.
CONTRACT = {
    "blooml": [
        "Lattice",
        "LatticeValueError",
        "lmax",
        "lmin",
        "lbool",
        "lset",
        "lpset",
        "lbag",
        "lmap",
        "morph",
        "monotone",
        "Program",
        "bloom",
        "table",
        "scratch",
        "channel",
        "periodic",
        "interface",
        "count",
        "sum_",
        "min_",
        "max_",
        "avg",
        "accum",
        "bool_and",
        "bool_or",
        "KeyConstraintError",
        "UnstratifiableError",  # deprecated alias of StratificationError (one release)
        "StratificationError",
        "ProgramError",
        "NotSupportedOnSpark",
        "lpair",
        "ldompair",
        "lvclock",
        "lgcounter",
        "lpncounter",
        "llww",
        "lmvreg",
        "lorset",
        "l2pset",
        "__version__",
    ],
    "blooml.lattices": ["kind_of"],
    "blooml.testing": ["elements", "register", "check_laws", "LawViolation", "LatticeLaws"],
    "blooml.dataflow": ["ZSet", "IndexedZSet", "Trace", "Circuit"],
    "blooml.spark": ["merge_by_key", "fold", "merge_column", "SparkEngine"],
}


@pytest.mark.parametrize("module", sorted(CONTRACT))
def test_contract_names_exist(module):
    mod = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated aliases count too
        missing = [n for n in CONTRACT[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_is_documented(module):
    mod = importlib.import_module(module)
    assert inspect.getdoc(mod), f"{module} has no module docstring"
    undocumented = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if name.startswith("__") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            undocumented.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                fn = getattr(member, "__func__", member)
                if attr.startswith("_") or not inspect.isfunction(fn):
                    continue
                if not inspect.getdoc(fn):
                    undocumented.append(f"{name}.{attr}")
    assert not undocumented, f"undocumented in {module}: {undocumented}"


def test_import_blooml_does_not_import_pyspark_or_hypothesis():
    code = (
        "import sys, blooml, blooml.spark; "
        "print(sorted(m for m in ('pyspark', 'hypothesis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
