"""Which batch a report file is, for a tally store: the rule, and the counting it decides.

A batch is named by the user (``batch_id``, ``--batch-id``), else by the file's path without
its ``.csv`` or ``.parquet`` suffix (:func:`default_batch_id`).  Under a name counted before,
the same rows count nothing, those rows followed by new ones count only the new ones, and other
content is refused (:func:`_same_batch`).  A new name is a new batch, except that where its
first rows repeat a counted batch's with a chance below
:data:`~bayesldp.workflows.batch_identity.IMPLAUSIBLE` the append is refused naming the other
batch (:func:`_check_repeat`), and ``distinct=True`` counts it anyway.

Each input counted keeps, in the store's manifest, the digests of its first 1, 2, 4, ... rows
(:func:`~bayesldp.workflows.batch_identity.ladder`) and of all of them, so a repeat is found
whether the new file is a copy, an older (shorter) snapshot or a grown copy of another batch.
:mod:`bayesldp.workflows.tally_store` keeps the store's files, locks and generations.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any

from bayesldp._report_stamp import PARQUET_SUFFIXES
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import Mechanism
from bayesldp.tally import Tally
from bayesldp.workflows import store_files as sf
from bayesldp.workflows.batch_identity import IMPLAUSIBLE, batch_content, ladder
from bayesldp.workflows.report_files import check_one_tally, read_table

__all__ = ["count_files", "default_batch_id"]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _tally_rows(mechanism: Mechanism, frame: Any, path: Path) -> Tally:
    """The tally of a file's rows (all of them, or the new ones); errors name the file."""
    try:
        return mechanism.tally_frame(frame, path)
    except InvalidInputError as exc:
        if str(path) in str(exc):
            raise
        raise InvalidInputError(f"{path}: {exc}") from None


def check_batch_id(batch_id: Any) -> str | None:
    """``batch_id``: None, or a non-empty string."""
    if batch_id is None:
        return None
    if not isinstance(batch_id, str) or not batch_id.strip():
        raise InvalidInputError(f"batch_id: expected a non-empty name, got {batch_id!r}")
    return batch_id.strip()


def default_batch_id(path: Path) -> str:
    """A file's batch name when none is given: its absolute path without the report suffix
    (``/data/day1.csv`` and ``/data/day1.parquet`` are one batch saved two ways)."""
    resolved = path.resolve()
    stem = resolved.name
    for suffix in (".csv", *PARQUET_SUFFIXES):
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    return str(resolved.with_name(stem))


def _batch_of(entry: dict[str, Any]) -> str | None:
    """The batch an input was counted as (inputs counted before batches had names: the name
    their path gives)."""
    if "batch" in entry:
        return entry["batch"]
    return default_batch_id(Path(entry["path"])) if "path" in entry else None


def _digests(entry: dict[str, Any]) -> dict[int, str]:
    """The prefix digests an input keeps, by length (its whole content's at least)."""
    if "content" not in entry:
        return {}
    heads = {int(m): digest for m, digest in entry.get("heads", {}).items()}
    return heads | {entry["rows"]: entry["content"]}


def _longest_repeat(
    prefixes: dict[int, str], entries: list[dict[str, Any]]
) -> tuple[int, dict[str, Any] | None]:
    """The longest known common beginning of a file (its ``prefixes``) and a counted input:
    ``(rows, input)``, or ``(0, None)``."""
    best, other = 0, None
    for entry in entries:
        for m, digest in _digests(entry).items():
            if m > best and prefixes.get(m) == digest:
                best, other = m, entry
    return best, other


def _same_batch(
    path: Path, batch: str, last: dict[str, Any], content: Any, prefixes: dict[int, str]
) -> int:
    """How many of a file's rows its batch ``batch`` counted before (``last`` is the batch's
    latest input): all of them, or the batch's rows followed by new ones; other content under
    the batch's name is refused."""
    if prefixes.get(content.rows) == last["content"]:
        return content.rows
    if last["rows"] < content.rows and prefixes.get(last["rows"]) == last["content"]:
        return last["rows"]
    raise InvalidInputError(
        f"{path}: batch {batch!r} was counted with {last['rows']:,} rows (appended at "
        f"{last['appended_at']}) and this file's {content.rows:,} rows are neither those rows nor "
        "those rows followed by new ones (an older copy, or edited): refused, since some of its "
        "reports may be counted already; if every report in it is new, append it under another "
        "batch name (--batch-id); nothing of this call was stored"
    )


def _check_repeat(
    path: Path, content: Any, prefixes: dict[int, str], inputs: list[dict[str, Any]]
) -> None:
    """A new batch whose first rows repeat a counted batch's at a size where chance is
    implausible (:data:`~bayesldp.workflows.batch_identity.IMPLAUSIBLE`) is refused."""
    rows, other = _longest_repeat(prefixes, inputs)
    if not rows:
        return
    chance = math.exp(content.log_chance(rows))
    if chance >= IMPLAUSIBLE:
        return
    raise InvalidInputError(
        f"{path}: its first {rows:,} rows repeat those of batch {_batch_of(other)!r} (counted "
        f"from {other['name']}), a repeat with a chance of {chance:.1e} between independent "
        "batches: refused as a copy (nothing of this call was stored); if it is that batch "
        "again or grown, append it with --batch-id "
        f"{_batch_of(other)!r} (only new rows count); if its reports are new, append it with "
        "--distinct"
    )


def _prefix_lengths(content: Any, inputs: list[dict[str, Any]]) -> set[int]:
    """The lengths at which a file's prefix digests are compared with the counted inputs'."""
    known = {m for entry in inputs for m in _digests(entry)}
    return {*ladder(content.rows), *(m for m in known if m <= content.rows)}


def count_files(
    paths: list[Path],
    manifest: dict[str, Any],
    mechanism: Mechanism,
    total: Tally | None,
    batch_id: str | None = None,
    distinct: bool = False,
) -> tuple[list[dict[str, Any]], Tally | None]:
    """Count ``paths`` into ``manifest`` (its inputs grow in place) and ``total``; returns the
    records and the new total.  Raises before anything is written when a file is refused.

    The rule (the module docstring): a file is its batch's (``batch_id``, else the name its
    path gives); the same batch again counts nothing, grown counts its new rows, otherwise it
    is refused; a new batch is counted unless its first rows repeat a counted batch's at a
    chance below :data:`~bayesldp.workflows.batch_identity.IMPLAUSIBLE` (``distinct``: counted
    all the same)."""
    inputs = manifest["inputs"]
    latest = {_batch_of(entry): entry for entry in inputs if "content" in entry}
    legacy = {entry["sha256"]: entry for entry in inputs if "content" not in entry}  # bytes only
    records = []
    for path in paths:
        sha = sf.file_digest(path)
        batch = batch_id if batch_id is not None else default_batch_id(path)
        record = {"name": str(path), "sha256": sha}
        last = latest.get(batch)
        if (last is not None and last["sha256"] == sha) or sha in legacy:
            known = last if sha not in legacy else legacy[sha]
            note = f"the same bytes as {known['name']}, counted before; nothing counted"
            records.append({**record, "reports": 0, "status": "already counted", "note": note})
            continue
        frame = read_table(path)
        check_one_tally(frame, path)
        content = batch_content(frame)
        prefixes = content.prefix_digests(_prefix_lengths(content, inputs))
        if last is not None:
            before = _same_batch(path, batch, last, content, prefixes)
        else:
            before = 0
            if not distinct:
                _check_repeat(path, content, prefixes, inputs)
        if before == content.rows:
            note = (f"the same reports as {last['name']} (batch {batch!r}), counted before; "
                    "nothing counted")  # fmt: skip
            records.append({**record, "reports": 0, "status": "already counted", "note": note})
            continue
        tally = _tally_rows(mechanism, frame.iloc[before:].reset_index(drop=True), path)
        total = tally if total is None else total + tally
        heads = {str(m): prefixes[m] for m in ladder(content.rows) if m < content.rows}
        entry = {**record, "path": str(path.resolve()), "batch": batch, "rows": content.rows,
                 "content": prefixes[content.rows], "heads": heads, "reports": int(tally.n),
                 "appended_at": _now()}  # fmt: skip
        if before:
            entry |= {"continues": last["name"], "rows_before": before}
            note = (f"its first {before:,} rows were counted before (as {last['name']}, batch "
                    f"{batch!r}); only the {content.rows - before:,} rows after them were "
                    "counted")  # fmt: skip
            status = "new rows counted"
        else:
            note, status = "", "counted"
        inputs.append(entry)
        latest[batch] = entry
        records.append({**record, "reports": int(tally.n), "status": status, "note": note})
    return records, total
