"""The documentation site's sources: the README's links into docs/ resolve, the API reference
(docs/conf.py's API_MODULES) covers every public subpackage with an ``__all__``, and every
user-guide page runs an example when the site is built."""

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


def test_every_user_guide_page_runs_an_example():
    """Each user-guide page is a MyST text notebook that the docs build executes (even where the
    gallery's notebooks are rendered without running: ``execution_mode: force``), with at least
    one code cell, so no example on it can rot."""
    pages = sorted((ROOT / "docs" / "user_guide").glob("*.md"))
    assert len(pages) >= 8
    for page in pages:
        if page.name == "index.md":
            continue
        text = page.read_text(encoding="utf-8")
        front = text.split("---", 2)[1] if text.startswith("---") else ""
        assert "file_format: mystnb" in front and "execution_mode: force" in front, page.name
        assert "output_stderr: remove-warn" in front, page.name  # a warning fails the build
        assert "```{code-cell}" in text, page.name
