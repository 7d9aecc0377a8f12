"""Reading collected LDP reports from CSV or Parquet files into a Tally.

The file is read here; what its columns mean is the mechanism's business
(:meth:`bayesldp.mechanisms.base.Mechanism.reports_from_frame`):

=====================================  ===================================================
mechanism                              columns
=====================================  ===================================================
GRR, RRRR, HadamardResponse            ``report`` (int), optional ``count`` (aggregated)
SUE, OUE                               K columns of 0/1 bits, in category order
BLH, OLH                               ``a``, ``b``, ``y`` (the hash seed pair and value)
BLHXX, OLHXX                           ``y``, ``seed`` (pure-ldp / multi-freq-ldpy LH tuples)
SHE, THE                               K numeric columns (the noisy vector), category order
=====================================  ===================================================

One row per report unless a ``count`` column is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import make_mechanism


def read_table(path: str | Path):
    """Read a CSV or Parquet file into a pandas DataFrame with clear errors."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"reports: no such file {path}")
    if path.stat().st_size == 0:
        raise InvalidInputError(f"reports: {path} is empty")
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except ImportError:
            raise InvalidInputError(
                "reports: reading Parquet needs pyarrow (pip install pyarrow)"
            ) from None
        except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
            raise InvalidInputError(
                f"reports: cannot read {path} as Parquet (truncated, or not Parquet?): {exc}"
            ) from None
    else:
        try:
            frame = pd.read_csv(path, skip_blank_lines=False)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"reports: cannot read {path} as CSV: {exc}") from None
    if frame.shape[0] == 0:
        raise InvalidInputError(f"reports: {path} has a header but no reports")
    missing = frame.isna().any(axis=1).to_numpy()
    if missing.any():  # blank lines and empty cells alike: nothing is dropped silently
        rows = np.flatnonzero(missing)
        shown = ", ".join(str(r + 2) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
        raise InvalidInputError(
            f"reports: {path} has {rows.size} row(s) with a missing value (blank line or empty "
            f"cell; CSV line {shown})"
        )
    return frame


def read_reports(path: str | Path, mechanism: str, *, k: int, epsilon: float, **params: Any):
    """Build the mechanism and tally the reports in ``path``; returns ``(mechanism, tally)``."""
    mech = make_mechanism(mechanism, k, epsilon, **params)
    return mech, mech.tally_frame(read_table(path), path)
