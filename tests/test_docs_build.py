"""The built site shows every notebook with its figures: each ``examples/<notebook>.html`` of
``docs/_build/html`` holds at least one ``<img>``, and so does the gallery page.

The notebooks are rendered from their stored outputs (CI builds with ``BAYESLDP_DOCS_EXECUTE=0``),
so a notebook committed without outputs, or a build that drops them, gives a page without a
figure.  The tests run only where the site has been built (``.ci/run`` runs them right after its
Sphinx build); elsewhere they skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IMG = re.compile(r"<img\b[^>]*\bsrc=\"([^\"]+)\"", re.IGNORECASE)

pytestmark = pytest.mark.skipif(
    not (HTML / "index.html").is_file(), reason="the site is not built (docs/_build/html)"
)


def _images(page: Path) -> list[str]:
    assert page.is_file(), f"{page.relative_to(ROOT)} was not built"
    return IMG.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_page_has_a_figure(notebook: Path) -> None:
    page = HTML / "examples" / f"{notebook.stem}.html"
    images = _images(page)
    assert images, f"{page.relative_to(ROOT)}: no <img>"
    missing = [src for src in images if not src.startswith("data:")
               and not (page.parent / src).resolve().is_file()]  # fmt: skip
    assert not missing, f"{page.relative_to(ROOT)}: images not in the build: {missing}"


def test_gallery_has_a_thumbnail_per_notebook() -> None:
    page = HTML / "examples" / "index.html"
    images = _images(page)
    for notebook in NOTEBOOKS:
        thumbnails = [src for src in images if src.endswith(f"/{notebook.stem}.png")]
        assert thumbnails, f"{page.relative_to(ROOT)}: no thumbnail of {notebook.name}"
        assert (page.parent / thumbnails[0]).resolve().is_file(), thumbnails[0]
