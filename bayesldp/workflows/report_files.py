"""Reading collected LDP reports from CSV or Parquet files into a Tally.

The file is read here; what its columns mean is the mechanism's business
(:meth:`bayesldp.mechanisms.base.Mechanism.reports_from_frame`, whose docstring's first line
states the layout).  :func:`layouts` lists them for every registered mechanism (``bayesldp
estimate --help`` prints it).  One row per report unless a ``count`` column is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp._optional import require
from bayesldp._report_stamp import PARQUET_SUFFIXES, STAMP_KEY, check_stamp, csv_stamp
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import make_mechanism, mechanism_class, names

#: which ``--mechanism`` reads a stamped file of each kind (:mod:`bayesldp._report_stamp`)
STAMPED_READERS = {"PEMReports": "--mechanism PEM or TreeHist", "SFPReports": "--mechanism SFP"}
#: suffixes of compressed files: a compressed report file is refused, never read as text
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")
#: ``attrs`` key of the number of lines before a CSV file's header (1: a stamp line), if any
LINES_BEFORE_HEADER = "bayesldp_lines_before_header"


def read_table(
    path: str | Path, threads: bool = True, text: tuple[str, ...] = (), stamp: str | None = None
):
    """Read a CSV or Parquet file into a pandas DataFrame with clear errors.

    ``threads=False`` decodes Parquet on the calling thread only (for Dask workers that each
    own one core, as :mod:`bayesldp.workflows.dask_tally` starts them); the CSV columns named in
    ``text`` are read as text (bit strings such as ``0110`` keep their leading zeros).

    A file stamped with its protocol's public parameters (:mod:`bayesldp._report_stamp`: a CSV
    file's first line ``# bayesldp KIND {json}``, a Parquet file's metadata) is read only when
    ``stamp`` names its kind, the stamp in ``frame.attrs["bayesldp_protocol"]``; any other
    reader refuses it in one line naming the ``--mechanism`` that reads it, rather than
    tallying heavy-hitter reports as another mechanism's."""

    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"reports: no such file {path}")
    if path.stat().st_size == 0:
        raise InvalidInputError(f"reports: {path} is empty")
    if path.suffix.lower() in COMPRESSED:
        raise InvalidInputError(
            f"reports: {path} is compressed ({path.suffix}); decompress it first (e.g. gunzip)"
        )
    try:
        return _read_table(path, threads, text, stamp)
    except OSError as exc:  # unreadable (permissions), or an I/O error
        raise InvalidInputError(f"reports: cannot read {path}: {exc.strerror or exc}") from None


def _read_table(path: Path, threads: bool, text: tuple[str, ...], stamp: str | None):
    import pandas as pd

    found, before = None, None
    if path.suffix.lower() in PARQUET_SUFFIXES:
        require("pyarrow", f"reading the Parquet file {path}")
        try:
            frame = pd.read_parquet(path, use_threads=threads)
        except PermissionError:
            raise
        except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
            raise InvalidInputError(
                f"reports: cannot read {path} as Parquet (truncated, or not Parquet?): {exc}"
            ) from None
        found = frame.attrs.get(STAMP_KEY)
    else:
        found = csv_stamp(path)
        before = int(found is not None)  # lines before the header
        try:
            dtype = dict.fromkeys(text, str) if text else None
            frame = pd.read_csv(path, skip_blank_lines=False, dtype=dtype, skiprows=before)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"reports: cannot read {path} as CSV: {exc}") from None
    if found is not None:
        kind = check_stamp(found, path)["kind"]
        if kind != stamp:
            wanted = f", not the {stamp} that {STAMPED_READERS[stamp]} reads" if stamp else ""
            raise InvalidInputError(
                f"reports: {path} holds {kind} (its bayesldp stamp){wanted}; read it with "
                f"{STAMPED_READERS[kind]}"
            )
        frame.attrs[STAMP_KEY] = found
    _check_unique_columns(list(frame.columns) if before is None else _csv_header(path, before),
                          path)  # fmt: skip
    if frame.shape[0] == 0:
        raise InvalidInputError(f"reports: {path} has a header but no reports")
    if before:
        frame.attrs[LINES_BEFORE_HEADER] = before
    missing = frame.isna().any(axis=1).to_numpy()
    if missing.any():  # blank lines and empty cells alike: nothing is dropped silently
        rows = np.flatnonzero(missing)
        shown = ", ".join(str(r + 2 + (before or 0)) for r in rows[:5])
        shown += ", ..." if rows.size > 5 else ""
        raise InvalidInputError(
            f"reports: {path} has {rows.size} row(s) with a missing value (blank line or empty "
            f"cell; CSV line {shown})"
        )
    return frame


def _csv_header(path: Path, skip: int) -> list[str]:
    """The names on a CSV file's header line (after ``skip`` lines), as written: pandas renames
    a repeated name (``report``, ``report.1``), so duplicates are found here."""
    import csv

    with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
        for _ in range(skip):
            fh.readline()
        return next(csv.reader([fh.readline()]), [])


def _check_unique_columns(names: list[Any], path: Path) -> None:
    seen: dict[str, int] = {}
    for name in names:
        key = str(name).strip("\ufeff ")
        seen[key] = seen.get(key, 0) + 1
    repeated = [name for name, times in seen.items() if times > 1]
    if repeated:
        raise InvalidInputError(
            f"reports: {path} names the column(s) {', '.join(map(repr, repeated))} more than "
            "once; each column needs its own name (which one holds the reports?)"
        )


#: columns that make a file several tallies (one per round or attribute), never one
GROUPING_COLUMNS = {"round": "rounds", "attribute": "attributes"}


def check_one_tally(frame: Any, path: Any) -> None:
    """A table read as one tally (a file, a directory's files, a tally store's input) must not
    be a file of rounds or attributes, nor hold several reports of one user: pooling them
    would count a user's reports as other users'."""
    columns = {str(c).strip("\ufeff ").lower(): c for c in frame.columns}
    for key, what in GROUPING_COLUMNS.items():
        if key in columns:
            raise InvalidInputError(
                f"reports: {path} has a {columns[key]!r} column, so it is a file of {what} "
                "(one tally each), not one tally; estimate it alone with `bayesldp estimate "
                f"{path} --mechanism ...` (a column named exactly {key!r}), not in a directory, "
                "glob or tally store"
            )
    if "user" in columns:
        users = frame[columns["user"]]
        again = users.duplicated(keep=False).to_numpy()
        if again.any():
            first = int(np.flatnonzero(again)[0])
            line = first + 2 + frame.attrs.get(LINES_BEFORE_HEADER, 0)
            raise InvalidInputError(
                f"reports: {path}: user {users.iloc[first]} has more than one report (CSV line "
                f"{line}); {int(again.sum()):,} reports come from users who report more than "
                "once, and one tally counts each as another user's: give rounds a 'round' "
                "column and estimate the file alone"
            )


def read_reports(path: str | Path, mechanism: str, *, k: int, epsilon: float, **params: Any):
    """Build the mechanism and tally the reports in ``path``; returns ``(mechanism, tally)``."""
    mech = make_mechanism(mechanism, k, epsilon, **params)
    return mech, tally_file(mech, path)


def tally_file(mechanism: Any, path: str | Path, threads: bool = True):
    """The tally of one report file in ``mechanism``'s layout; an error about its reports
    names the file (a report outside the mechanism's range says which file holds it)."""
    try:
        frame = read_table(path, threads=threads)
        check_one_tally(frame, path)
        return mechanism.tally_frame(frame, path)
    except InvalidInputError as exc:
        if str(path) in str(exc):
            raise
        raise InvalidInputError(f"{path}: {exc}") from None


def layout(name: str) -> str:
    """The columns of a report file of mechanism ``name``, in its reader's own words.

    The first line of its ``reports_from_frame`` docstring, plus the aggregated form that every
    finite-channel mechanism also reads (:meth:`~bayesldp.mechanisms.base.FiniteChannelMechanism
    .tally_frame`).
    """
    import inspect

    from bayesldp.mechanisms.base import FiniteChannelMechanism

    cls = mechanism_class(name)
    text = inspect.getdoc(cls.reports_from_frame).splitlines()[0].replace("``", "").rstrip(".")
    if issubclass(cls, FiniteChannelMechanism):
        text += "; or aggregated: columns report and count (how many reports had that value)"
    return text


#: the layout of a file of rounds (:mod:`bayesldp.workflows.longitudinal_files`)
ROUND_LAYOUT = (
    "any mechanism above (e.g. LGRR, LOSUE), one estimate per round (or --method rounds: a "
    "random walk across rounds): columns user, round (integers; every round from the first to "
    "the last has reports; a user at most once a round) and the mechanism's report column(s)"
)

#: the layout of a file of attributes (:mod:`bayesldp.workflows.multidimensional_files`)
ATTRIBUTE_LAYOUT = (
    "several attributes, one table each (--k 3,4,2: each attribute's domain size; --base "
    "GRR|SUE|OUE; RSFD --fake zero|random): columns user, attribute (0..d-1) and report (GRR: "
    "the value; SUE, OUE: the attribute's bits as a string, bit 0 first, e.g. 0110); SPL and "
    "RSFD users report every attribute, SMP users one"
)

#: the layout of a file of PEM or TreeHist reports (:mod:`bayesldp.workflows.heavy_hitter_files`)
HEAVY_HITTER_LAYOUT = (
    "heavy hitters of open-ended items, one row per user: columns group (the user's round; "
    "with --holdout or TreeHist's final group, the last group) and a, b, y (the OLH report of "
    "the user's prefix), as PEMReports.to_file(path) writes them; --k, --bits, --eta, --key, "
    "--max-length, --holdout (TreeHist: --z, --max-survivors, --final-share) as collected "
    "(a positional code: --alphabet, --length in place of --bits, --key, --max-length; the "
    "file's stamp, a first line '# bayesldp PEMReports {...}', refuses others); --candidates "
    "names the found codes of a keyed hash"
)

#: the layout of a file of SFP reports (:mod:`bayesldp.workflows.heavy_hitter_files`)
SFP_LAYOUT = (
    "heavy hitters, SFP's two kinds of report, one row per user: columns kind (fragment, word "
    "or holdout), position, row, bits (a fragment user's position, sketch hash row and m "
    "entries as a string of 0/1) and a, b, y (a word or holdout user's OLH report); the cells "
    "a row's kind does not use hold 0 (bits: -), as SFPReports.to_file(path) writes them; "
    "--k, --max-length, --fragment-length, --hash-bits, --alphabet, --fragments, --word-share, "
    "--holdout, --bits, --key, --m, --k-hash, --hash-seed as collected (the file's stamp "
    "refuses others)"
)


def layouts() -> str:
    """Every registered mechanism's report-file layout, one line each, then the files of
    several tallies: rounds and attributes (for ``--help``)."""
    import textwrap

    lines = [
        textwrap.fill(f"{name}: {text}", 90, initial_indent="  ", subsequent_indent="    ")
        for name, text in [*((name, layout(name)) for name in names()),
                           ("Per round", ROUND_LAYOUT), ("SPL, SMP, RSFD", ATTRIBUTE_LAYOUT),
                           ("PEM, TreeHist", HEAVY_HITTER_LAYOUT), ("SFP", SFP_LAYOUT)]
    ]  # fmt: skip
    return "\n".join([*lines, "One row per report unless there is a count column."])
