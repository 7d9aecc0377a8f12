"""What a batch of reports *is*, for a tally store: its rows, whatever the file's encoding.

A tally store must never count a report twice, so it needs an identity for a batch that does not
change when the same reports are saved again differently.  The bytes of a file are not that
identity: CRLF against LF line ends, a byte-order mark, quoting, ``1`` against ``1.0``, the order
of the columns, and CSV against Parquet all change the bytes and none changes a report.  Neither
is the name (a log grows under one name).  Here a batch is the sequence of its *normalised rows*:

* columns sorted by name (stripped of spaces and a byte-order mark);
* booleans and whole-valued floats as 64-bit integers, other numbers as 64-bit floats, anything
  else as its text;
* each row then has one byte string, and the batch's identity is the SHA-256 of a header (the
  column names and kinds) followed by its rows in file order.

Because the digest runs over rows in order, the digest of the first ``m`` rows (a *prefix
digest*) is the identity of the batch those rows were: a file that grew since it was counted
(a log appended to) starts with the rows of the batch counted before, and the store counts only
the rows after them.  Reports themselves carry no identity (two users may send the same report),
so a batch is recognised as a whole or as a prefix, never row by row.

Two batches under different names may hold the same rows by chance (five users who each sent
the same single report).  :meth:`BatchContent.log_chance` measures how plausible that is: the
log-probability that independent reports repeat the first ``m`` rows, under those rows' own
frequencies (the model most generous to chance).  A tally store calls a repeat with a chance
below :data:`IMPLAUSIBLE` a copy, not a coincidence.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["IMPLAUSIBLE", "BatchContent", "batch_content", "ladder"]


#: rows turned into bytes at a time (a batch is hashed in chunks: bounded memory)
CHUNK_ROWS = 1 << 16
#: a repeat of rows whose chance is below this is a copy, not a coincidence (one in a billion)
IMPLAUSIBLE = 1e-9


def ladder(rows: int) -> list[int]:
    """The lengths at which a store keeps a batch's prefix digests: 1, 2, 4, ... up to
    ``rows``, and ``rows`` itself.  Any common beginning of two batches is then found to within
    a factor 2 of its length."""
    lengths = [1 << j for j in range(max(int(rows), 1).bit_length()) if 1 << j <= rows]
    return sorted({*lengths, int(rows)} - {0})


@dataclass(frozen=True)
class BatchContent:
    """The normalised rows of one report table: ``rows`` of them, hashed chunk by chunk."""

    header: bytes
    rows: int
    #: the column names, in the sorted order of the rows' cells
    names: tuple[str, ...]
    #: fixed-width form: one array per column (integers or booleans, hashed as int64; float64);
    #: None in text form
    columns: list[np.ndarray] | None
    #: text form: one byte string per row
    lines: list[bytes] | None

    def _bytes(self, start: int, stop: int) -> bytes:
        """The normalised bytes of rows ``start:stop``."""
        if self.lines is not None:
            return b"".join(self.lines[start:stop])
        chunks = [column[start:stop] for column in self.columns]
        if all(chunk.dtype.kind in "biu" for chunk in chunks):  # integers: one stacked copy
            return np.column_stack([c.astype("<i8", copy=False) for c in chunks]).tobytes()
        table = np.empty((stop - start, len(self.columns)), dtype="<u8")
        for j, column in enumerate(self.columns):
            chunk = column[start:stop]
            if chunk.dtype.kind != "f":
                chunk = chunk.astype(np.int64, copy=False)
            table[:, j] = chunk.view(np.uint64)
        return table.tobytes()

    def log_chance(self, m: int) -> float:
        """The natural log of the chance that ``m`` independent reports repeat the first ``m``
        rows, under those rows' own frequencies (their maximum-likelihood law, so the chance
        is never understated).

        One row per report: ``sum_v n_v log(n_v / m)`` over the distinct rows ``v`` (``n_v``
        times each).  Aggregated rows (a ``count`` column, one row per report value): the
        multinomial probability of exactly those counts at their own proportions,
        ``log N! - sum_i log c_i! + sum_i c_i log(c_i / N)``.  A single report is certain
        (0.0): one-report batches always repeat plausibly.
        """
        m = min(int(m), self.rows)
        if m <= 0:
            return 0.0
        if "count" in self.names:
            counts = self._column(self.names.index("count"), m)
            counts = counts[counts > 0].astype(np.float64)
            total = counts.sum()
            if total <= 1:
                return 0.0
            log_fact = math.lgamma(total + 1) - sum(math.lgamma(c + 1) for c in counts)
            return float(log_fact + np.sum(counts * np.log(counts / total)))
        if self.lines is not None:
            tallies = np.fromiter(Counter(self.lines[:m]).values(), dtype=np.float64)
        else:
            table = np.frombuffer(self._bytes(0, m), dtype=np.uint8).reshape(m, -1)
            _, tallies = np.unique(table, axis=0, return_counts=True)
            tallies = tallies.astype(np.float64)
        return float(np.sum(tallies * np.log(tallies / m)))

    def _column(self, j: int, m: int) -> np.ndarray:
        """Column ``j``'s first ``m`` values as numbers (text form: parsed)."""
        if self.columns is not None:
            return np.asarray(self.columns[j][:m], dtype=np.float64)
        cells = [line.rstrip(b"\n").split(b"\x1f")[j] for line in self.lines[:m]]
        try:
            return np.array([float(c) for c in cells])
        except ValueError:  # a count that is not a number: the reader refuses it later
            return np.ones(m)

    @property
    def digest(self) -> str:
        """The identity of the whole batch."""
        return self.prefix_digests([self.rows])[self.rows]

    def prefix_digests(self, lengths: Any) -> dict[int, str]:
        """``{m: digest of the first m rows}`` for each ``m`` in ``lengths`` (0 < m <= rows).

        One pass over the rows, ``CHUNK_ROWS`` at a time: the digest state is copied at each
        length."""
        wanted = sorted({int(m) for m in lengths if 0 < int(m) <= self.rows})
        hasher = hashlib.sha256(self.header)
        done, out = 0, {}
        for m in wanted:
            while done < m:
                stop = min(m, done + CHUNK_ROWS)
                hasher.update(self._bytes(done, stop))
                done = stop
            out[m] = hasher.copy().hexdigest()
        return out


def _normalised_columns(frame: Any) -> tuple[list[str], list[str], list[np.ndarray | list[str]]]:
    names, kinds, values = [], [], []
    order = sorted(range(frame.shape[1]), key=lambda i: str(frame.columns[i]).strip("\ufeff "))
    for i in order:
        name = str(frame.columns[i]).strip("\ufeff ")
        column = frame.iloc[:, i]
        data = column.to_numpy()
        kind = data.dtype.kind
        fits = kind != "u" or data.size == 0 or data.max() <= np.iinfo(np.int64).max
        if kind == "b" or (kind in "iu" and fits):
            kinds.append("i")
            values.append(data)  # widened to int64 a chunk at a time
        elif kind == "f":
            as_float = data.astype(np.float64, copy=False)
            integral = np.isfinite(as_float).all() and np.all(np.abs(as_float) < 2.0**62)
            if integral and np.array_equal(as_float, np.round(as_float)):
                kinds.append("i")
                values.append(as_float.astype(np.int64))
            else:
                kinds.append("f")
                values.append(as_float + 0.0)  # -0.0 and 0.0 alike
        else:
            kinds.append("s")
            values.append([str(v).strip() for v in column.tolist()])
        names.append(name)
    return names, kinds, values


def batch_content(frame: Any) -> BatchContent:
    """The normalised rows of a report table (a pandas DataFrame as ``read_table`` returns).

    Numbers take 8 bytes each, hashed ``CHUNK_ROWS`` rows at a time (a copy of the frame's
    columns as 64-bit values, not of its rows as bytes); a table with a text column is hashed
    as text lines."""
    names, kinds, values = _normalised_columns(frame)
    header = ("\x1f".join(f"{n}:{k}" for n, k in zip(names, kinds, strict=True)) + "\n").encode()
    n_rows = int(frame.shape[0])
    if all(k != "s" for k in kinds):
        return BatchContent(header, n_rows, tuple(names), [np.asarray(v) for v in values], None)
    cells = [
        [repr(float(v)) if k == "f" else str(v) for v in column]
        for column, k in zip(values, kinds, strict=True)
    ]
    lines = [("\x1f".join(row) + "\n").encode() for row in zip(*cells, strict=True)]
    return BatchContent(header, n_rows, tuple(names), None, lines)
