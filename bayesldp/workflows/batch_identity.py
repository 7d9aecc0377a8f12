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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BatchContent", "batch_content"]


#: rows turned into bytes at a time (a batch is hashed in chunks: bounded memory)
CHUNK_ROWS = 1 << 16


@dataclass(frozen=True)
class BatchContent:
    """The normalised rows of one report table: ``rows`` of them, hashed chunk by chunk."""

    header: bytes
    rows: int
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
        return BatchContent(header, n_rows, [np.asarray(v) for v in values], None)
    cells = [
        [repr(float(v)) if k == "f" else str(v) for v in column]
        for column, k in zip(values, kinds, strict=True)
    ]
    lines = [("\x1f".join(row) + "\n").encode() for row in zip(*cells, strict=True)]
    return BatchContent(header, n_rows, None, lines)
