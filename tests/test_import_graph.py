"""The package's import graph has no cycle, counting every import in the source.

Module-level imports, imports inside functions and type-only imports (under ``if
TYPE_CHECKING:``) all count, absolute and relative: a module a type-only import names is still
one it depends on.  A module importing a package (``bayesldp.mechanisms``) depends on that
package's ``__init__``, and ``from pkg import sub`` on the submodule ``pkg.sub``; the implicit
import of a parent package when a submodule is imported is not an edge (a package's
``__init__`` re-exporting its submodules is not a cycle).
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bayesldp"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module ``from ... import`` reads, relative imports resolved against ``module``."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path.name == "__init__.py")
            # `from pkg import submodule` depends on the submodule, `from mod import x` on mod
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, name, modules) - {name} for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module, each closed
    (first module repeated at the end), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(_cycle_in(graph, component) for component in components)


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first)."""
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parent:
                    parent[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in the component {sorted(component)}")


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    two = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}
    assert cycles(two) == [["a", "b", "a"], ["c", "d", "c"]]


def test_relative_and_type_only_imports_count(tmp_path, monkeypatch):
    package = tmp_path / "bayesldp"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("from .sub import leaf\n")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..base import X\n"
    )
    monkeypatch.setitem(globals(), "PACKAGE", package)
    graph = import_graph()
    assert graph["bayesldp.base"] == {"bayesldp.sub.leaf"}
    assert graph["bayesldp.sub"] == {"bayesldp.sub.leaf"}
    assert graph["bayesldp.sub.leaf"] == {"bayesldp.base"}
    assert cycles(graph) == [["bayesldp.base", "bayesldp.sub.leaf", "bayesldp.base"]]


def test_import_graph_has_no_cycle():
    graph = import_graph()
    assert "bayesldp.likelihood" in graph and len(graph) > 30
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_library_never_imports_the_workflows():
    graph = import_graph()
    # ``python -m bayesldp`` (bayesldp/__main__.py) is the command line, not the library
    library = [m for m in graph
               if not m.startswith("bayesldp.workflows") and m != "bayesldp.__main__"]  # fmt: skip
    offenders = {m: d for m in library if (d := {x for x in graph[m] if "workflows" in x})}
    assert not offenders, offenders
