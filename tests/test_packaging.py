"""Every third-party module the package or its benchmarks import is declared in pyproject.toml."""

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: import name -> distribution name, where they differ
DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "pure_ldp": "pure-ldp",
    "multi_freq_ldpy": "multi-freq-ldpy",
}
#: modules that come with a declared distribution (pytensor with pymc)
PROVIDED = {"pytensor": "pymc"}
#: imported only behind a check that it is installed, never required
OPTIONAL: set[str] = set()
#: imported by a benchmark from a reference repository's mirror given on its command line
#: (benchmarks/em_mr_parity.py --reference), never installed
FROM_MIRROR = {"ldp_reduction"}


def _declared(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower() for req in requirements}


def _third_party_imports(paths) -> set[str]:
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "bayesldp"}


def _distribution(module: str) -> str:
    module = PROVIDED.get(module, module)
    return DISTRIBUTION.get(module, module).lower().replace("_", "-")


def test_package_and_benchmark_imports_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _declared(project["dependencies"])
    extras = project["optional-dependencies"]
    dask = _declared(extras["dask"])  # the scale-out extra (bayesldp/_optional.py)
    bench = core | _declared(extras["bench"]) | dask  # bench installs bayesldp[dask]
    assert "bayesldp[dask]" in extras["bench"] and "bayesldp[dask]" in extras["test"]
    package = _third_party_imports((ROOT / "bayesldp").rglob("*.py")) - OPTIONAL
    optional_backends = {"nutpie", "numpyro", "jax", "blackjax"}  # lazily imported, own extras
    serve = _declared(extras["serve"])  # the live survey's web stack, imported by serve/ only
    missing = {_distribution(m) for m in package - optional_backends} - core - serve
    assert not missing, f"imported by bayesldp but not in [project].dependencies: {missing}"
    elsewhere = [p for p in (ROOT / "bayesldp").rglob("*.py") if "serve" not in p.parts]
    web = {_distribution(m) for m in _third_party_imports(elsewhere)} & serve
    assert not web, f"the web stack imported outside bayesldp/serve: {web}"
    scripts = list((ROOT / "benchmarks").glob("*.py"))
    siblings = {path.stem for path in scripts}  # a benchmark may import another one's helpers
    siblings |= {"tests", "benchmarks"}  # or the checkout's test helpers, or benchmarks.<sibling>
    benchmarks = _third_party_imports(scripts) - FROM_MIRROR - siblings
    missing = {_distribution(m) for m in benchmarks} - bench
    assert not missing, f"imported by benchmarks/ but not in the bench extra: {missing}"
    assert "pandas" in core and {"dask", "distributed", "pyarrow"} <= dask


def test_every_lazy_name_is_imported_for_type_checkers():
    """``bayesldp/__init__.py`` imports each lazily loaded public name under TYPE_CHECKING as
    ``X as X`` (an explicit re-export), so IDEs and type checkers see its real type."""

    import bayesldp

    tree = ast.parse(Path(bayesldp.__file__).read_text())
    block = next(
        node for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )  # fmt: skip
    exported = {
        alias.asname
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    assert exported == set(bayesldp._LAZY)
    assert (Path(bayesldp.__file__).parent / "py.typed").is_file()
