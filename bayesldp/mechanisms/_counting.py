"""A compiled count of integer reports: one pass, in the reports' own dtype.

``np.bincount`` first converts its input to ``intp`` (eight bytes per report, a copy of the whole
array), which costs five times the count itself on the ``uint8`` / ``uint16`` columns that report
files hold; this kernel reads the values where they are.  Callers check the range first
(``0 <= value < m``): the loop does not.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_codes(values: np.ndarray, m: int) -> np.ndarray:  # pragma: no cover - compiled
    """``out[v]`` = how many entries of ``values`` equal ``v``, for ``v`` in ``0..m-1``."""
    out = np.zeros(m, np.int64)
    for v in values:
        out[v] += 1
    return out
