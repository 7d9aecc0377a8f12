"""A report file's stamp: the public parameters of the protocol that made its reports.

:class:`~bayesldp.heavy_hitters.PEMReports` and :class:`~bayesldp.heavy_hitters.SFPReports`
carry their protocol's public parameters, so that a collector configured otherwise refuses them
(``check_reports``) instead of misreading them.  A report file keeps them as a stamp, a JSON
object: ``kind`` (the class's name) and each parameter, tuples as lists.  ``to_frame()`` puts it
in ``DataFrame.attrs[STAMP_KEY]``, which pandas keeps in a Parquet file's metadata; a CSV file
holds it on its first line, ``# bayesldp <kind> <json>``, before the usual header.  Reading a
file (:func:`bayesldp.workflows.report_files.read_table`) checks the stamp's form here, so a
hand-edited or damaged one is one line naming the file.

This module imports nothing heavy: every report file read passes through it.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import Any

from bayesldp._optional import require
from bayesldp.errors import InvalidInputError

#: the key of ``DataFrame.attrs`` that holds the stamp
STAMP_KEY = "bayesldp_protocol"
#: how a CSV file's stamp line starts
CSV_PREFIX = "# bayesldp "
#: the suffixes written as Parquet (anything else is CSV)
PARQUET_SUFFIXES = (".parquet", ".pq")
#: each kind's parameters and what their JSON values must be
FIELDS: dict[str, dict[str, str]] = {
    "PEMReports": {
        "fingerprint": "text",
        "prefix_lengths": "integers",
        "epsilon": "number",
        "g": "integer",
        "holdout": "number",
    },
    "SFPReports": {"fingerprint": "text", "layout": "object", "epsilon": "number", "g": "integer"},
}
#: the longest stamp line read (a stamp is a few hundred bytes)
MAX_LINE = 1 << 16


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: tuples as lists, numpy scalars as Python numbers."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value.item() if hasattr(value, "item") else value


def make_stamp(kind: str, **params: Any) -> dict[str, Any]:
    """The stamp of reports of ``kind`` made with ``params`` (JSON-serialisable)."""
    return {"kind": kind, **{name: _plain(v) for name, v in params.items()}}


def write_frame(frame: Any, path: str | Path) -> Path:
    """Write a stamped frame (``frame.attrs[STAMP_KEY]``) to ``path``: Parquet when the suffix
    is ``.parquet`` or ``.pq`` (the stamp in its metadata), else CSV with the stamp line first."""
    from bayesldp.errors import StoreWriteError

    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        what = "is not a directory" if folder.exists() else "does not exist"
        raise InvalidInputError(f"path: {path}: the directory {folder} {what}; create it first "
                                "or give a path in an existing directory")  # fmt: skip
    if path.is_dir():
        raise InvalidInputError(f"path: {path} is a directory; give a file name")
    stamp = frame.attrs[STAMP_KEY]
    try:
        if path.suffix.lower() in PARQUET_SUFFIXES:
            require("pyarrow", f"writing the Parquet file {path}")
            frame.to_parquet(path, index=False)
            return path
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(f"{CSV_PREFIX}{stamp['kind']} "
                         f"{json.dumps(stamp, separators=(',', ':'))}\n")  # fmt: skip
            frame.to_csv(handle, index=False, lineterminator="\n")
    except OSError as exc:
        raise StoreWriteError(f"path: cannot write {path} ({exc.strerror or exc})") from None
    return path


def csv_stamp(path: Path) -> dict[str, Any] | None:
    """The stamp on the first line of the CSV file ``path``, or None if it has none."""
    with path.open("rb") as handle:
        first = handle.readline(MAX_LINE)
    if not first.startswith(CSV_PREFIX.encode()):
        return None
    bad = f"reports: {path} line 1 is a bad bayesldp stamp"
    try:
        kind, _, text = first.decode("utf-8").removeprefix(CSV_PREFIX).strip().partition(" ")
        stamp = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{bad} (not '# bayesldp KIND {{JSON}}': {exc})") from None
    if not isinstance(stamp, dict) or stamp.get("kind") != kind:
        raise InvalidInputError(f"{bad}: its JSON is not an object of kind {kind!r}")
    return stamp


def _is(value: Any, want: str) -> bool:
    if want == "text":
        return isinstance(value, str)
    if want == "object":
        return isinstance(value, dict)
    if want == "integers":
        return isinstance(value, list) and all(_is(v, "integer") for v in value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return want == "number" or isinstance(value, numbers.Integral)


def check_stamp(stamp: Any, path: str | Path) -> dict[str, Any]:
    """``stamp`` if it is a known kind's, with each parameter of the right JSON type; else a
    one-line error naming the file and the fault."""
    if not isinstance(stamp, dict) or stamp.get("kind") not in FIELDS:
        kind = stamp.get("kind") if isinstance(stamp, dict) else stamp
        raise InvalidInputError(
            f"reports: {path} has a bayesldp stamp of unknown kind {kind!r}; expected one of "
            f"{', '.join(FIELDS)}"
        )
    for name, want in FIELDS[stamp["kind"]].items():
        if not _is(stamp.get(name), want):
            raise InvalidInputError(
                f"reports: {path} has a bad bayesldp stamp: {name} must be {want}, got "
                f"{stamp.get(name)!r}"
            )
    return stamp


class StampedReports:
    """Base of report classes whose ``to_frame()`` carries the stamp in ``attrs[STAMP_KEY]``."""

    def to_file(self, path: str | Path) -> Path:
        """Write ``to_frame()`` to ``path`` with the public parameters stamped on it, so that
        ``bayesldp estimate`` refuses the file under other parameters instead of misreading it:
        CSV, its first line ``# bayesldp KIND {json}``, unless the suffix is ``.parquet`` or
        ``.pq`` (Parquet, the parameters in its metadata).  Returns the path."""
        return write_frame(self.to_frame(), path)  # type: ignore[attr-defined]
