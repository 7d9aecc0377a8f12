"""Reading collected LDP reports from CSV or Parquet files into a Tally.

File layouts (one row per report unless a ``count`` column is given):

=====================================  ===================================================
mechanism                              columns
=====================================  ===================================================
GRR, RRRR, HadamardResponse            ``report`` (int), optional ``count`` (aggregated)
SUE, OUE                               K columns of 0/1 bits, in category order
BLH, OLH                               ``a``, ``b``, ``y`` (the hash seed pair and value)
SHE, THE                               K numeric columns (the noisy vector), category order
=====================================  ===================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import FiniteChannelMechanism, Mechanism, make_mechanism
from bayesldp.tally import Tally


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
    else:
        try:
            frame = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"reports: cannot read {path} as CSV: {exc}") from None
    if frame.shape[0] == 0:
        raise InvalidInputError(f"reports: {path} has a header but no reports")
    return frame


def _columns(frame, names: list[str], path: Any) -> list[np.ndarray]:
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"reports: {path} lacks column(s) {', '.join(missing)}; it has "
            f"{', '.join(map(str, frame.columns))}"
        )
    out = []
    for name in names:
        col = frame[name].to_numpy()
        if col.dtype.kind not in "iu":
            raise InvalidInputError(f"reports: column {name!r} must hold integers, got {col.dtype}")
        out.append(col.astype(np.int64))
    return out


def _k_columns(frame, k: int, path: Any) -> np.ndarray:
    if frame.shape[1] != k:
        raise InvalidInputError(
            f"reports: {path} must have exactly k = {k} columns (one per category), "
            f"got {frame.shape[1]}"
        )
    values = frame.to_numpy()
    if values.dtype.kind not in "iuf":
        raise InvalidInputError(f"reports: {path} must hold numbers only, got {values.dtype}")
    return values


def tally_from_frame(mech: Mechanism, frame, path: Any = "reports") -> Tally:
    """Tally a DataFrame of reports for ``mech`` (layouts in the module docstring)."""
    name = type(mech).__name__
    if isinstance(mech, FiniteChannelMechanism):
        if "count" in frame.columns:
            reports, counts = _columns(frame, ["report", "count"], path)
            if counts.min() < 0:
                raise InvalidInputError("reports: column 'count' must be >= 0")
            mech.check_reports(reports)
            return mech.tally_from_report_counts(
                np.bincount(reports, weights=counts, minlength=mech.n_outputs).astype(np.int64)
            )
        (reports,) = _columns(frame, ["report"], path)
        return mech.tally(reports)
    if name in ("OLH", "BLH"):
        from bayesldp.mechanisms.hashing import HashReports

        a, b, y = _columns(frame, ["a", "b", "y"], path)
        return mech.tally(HashReports(a, b, y))
    values = _k_columns(frame, mech.k, path)
    if name in ("SUE", "OUE"):
        if values.dtype.kind == "f":
            raise InvalidInputError("reports: unary-encoding bits must be integers 0/1")
        return mech.tally(values)
    return mech.tally(values.astype(float))


def read_reports(path: str | Path, mechanism: str, *, k: int, epsilon: float, **params: Any):
    """Build the mechanism and tally the reports in ``path``; returns ``(mechanism, tally)``."""
    mech = make_mechanism(mechanism, k, epsilon, **params)
    return mech, tally_from_frame(mech, read_table(path), path)
