"""Importing ArviZ without its import-time FutureWarning (internal)."""

from __future__ import annotations

import warnings
from typing import Any


def import_arviz() -> Any:
    """Import ArviZ without its import-time FutureWarning about the 1.0 refactor."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning
        )
        import arviz

    return arviz
