"""The serialised form shared by the priors that are not a plain Dirichlet."""

from __future__ import annotations

import json
from typing import Any


class _SerialisedPrior:
    """``to_json`` and equality from a subclass's ``to_dict`` (its JSON-friendly form)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def to_json(self) -> str:
        """The :meth:`to_dict` form as a JSON string."""
        return json.dumps(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None

