"""The package's import graph has no cycle, counting imports inside functions too.

Only imports under ``if TYPE_CHECKING:`` (type-only) are left out.  A module importing a
package (``bayesldp.mechanisms``) depends on that package's ``__init__``; the implicit import of
a parent package when a submodule is imported is not an edge (a package's ``__init__`` re-exporting
its submodules is not a cycle).
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bayesldp"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = _type_only_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import submodule` depends on the submodule, `from mod import x` on mod
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [sub for sub in subs if sub in modules] or [node.module]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _imports(path, modules) - {name} for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_import_graph_has_no_cycle():
    graph = import_graph()
    assert "bayesldp.likelihood" in graph and len(graph) > 30
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_library_never_imports_the_workflows():
    graph = import_graph()
    # ``python -m bayesldp`` (bayesldp/__main__.py) is the command line, not the library
    library = [m for m in graph
               if not m.startswith("bayesldp.workflows") and m != "bayesldp.__main__"]  # fmt: skip
    offenders = {m: d for m in library if (d := {x for x in graph[m] if "workflows" in x})}
    assert not offenders, offenders
