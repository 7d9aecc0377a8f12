"""The documentation site's sources: the README's links into docs/ resolve, and the API
reference (docs/conf.py's API_MODULES) covers every public subpackage with an ``__all__``."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_links_into_docs_exist():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into docs/"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing


def _assigned(tree: ast.Module, name: str):
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(getattr(t, "id", None) == name for t in targets):
            return node.value
    return None


def test_api_reference_covers_every_public_subpackage():
    conf = ast.parse((ROOT / "docs" / "conf.py").read_text())
    documented = set(ast.literal_eval(_assigned(conf, "API_MODULES")))
    public = {"bayesldp"}
    for init in (ROOT / "bayesldp").rglob("__init__.py"):
        parts = init.parent.relative_to(ROOT).parts
        if any(part.startswith("_") for part in parts):
            continue
        if _assigned(ast.parse(init.read_text()), "__all__") is not None:
            public.add(".".join(parts))
    assert public <= documented, public - documented
