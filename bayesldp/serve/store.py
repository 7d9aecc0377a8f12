"""The live survey's durable record: assignments issued and reports accepted, exactly once.

One SQLite file in write-ahead-log mode, ``synchronous=FULL``: a report is acknowledged only
after its transaction is on disk, so a crash (``kill -9``) loses no acknowledged report.  Each
respondent gets an *assignment*: a single-use token, the RRRR subset its browser must randomise
with and an expiry time.  A report names its token; the token is the idempotency key:

* an unknown token, an expired one, or a report outside the channel's outputs (``0..K-1``) is
  refused (:class:`ReportRefused`, with the HTTP status a server answers with) and nothing is
  stored;
* a second report under a used token is refused (409) and the first is kept, so a replayed or
  retried request never counts twice.

Accepted reports get consecutive sequence numbers ``0, 1, 2, ...`` in the order they were
stored; the survey records them in batches of that order (:meth:`ReportStore.batch`), each
report with the subset of its own assignment.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bayesldp._validation import check_int
from bayesldp.errors import InvalidInputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS assignments (
    token TEXT PRIMARY KEY,
    subset TEXT NOT NULL,
    issued REAL NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
    seq INTEGER PRIMARY KEY,
    token TEXT NOT NULL UNIQUE REFERENCES assignments (token),
    report INTEGER NOT NULL,
    received REAL NOT NULL
);
"""


class ReportRefused(InvalidInputError):
    """A report the store does not take; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Assignment:
    """What one respondent is told: its token, the RRRR subset and when the token expires."""

    token: str
    subset: tuple[int, ...]
    expires: float


class ReportStore:
    """Assignments and reports of one live survey in the SQLite file ``path``.

    Parameters
    ----------
    path : str or PathLike
        The database file (created if missing).
    k : int
        Categories; a report outside ``0..k-1`` is refused.  A file made for another ``k`` is
        refused on opening.
    clock : callable, optional
        Seconds since the epoch (``time.time``); tests pass their own.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "survey.sqlite")
    >>> store = ReportStore(path, k=3)
    >>> a = store.issue((0, 2), ttl=60)
    >>> store.accept(a.token, 2)
    0
    >>> try:
    ...     store.accept(a.token, 1)
    ... except ReportRefused as refused:
    ...     print(refused.status)
    409
    >>> store.count()
    1
    """

    def __init__(self, path: str | os.PathLike[str], k: int, *, clock=time.time) -> None:
        self.path = Path(path)
        self.k = check_int(k, "k", 2)
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        stored = self._db.execute("SELECT value FROM meta WHERE key = 'k'").fetchone()
        if stored is None:
            self._db.execute("INSERT INTO meta VALUES ('k', ?)", (str(self.k),))
        elif int(stored[0]) != self.k:
            self._db.close()
            raise InvalidInputError(
                f"store: {str(self.path)!r} holds a survey of k = {stored[0]} categories, not "
                f"{self.k}; give another data directory"
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ReportStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes
    def issue(self, subset: tuple[int, ...] | list[int], ttl: float) -> Assignment:
        """A new single-use token for a respondent who randomises with RRRR on ``subset``."""
        subset = tuple(sorted(int(v) for v in subset))
        if any(not 0 <= v < self.k for v in subset) or len(set(subset)) != len(subset):
            raise InvalidInputError(f"subset: distinct categories in 0..{self.k - 1}, got "
                                    f"{list(subset)}")  # fmt: skip
        if not ttl > 0:
            raise InvalidInputError(f"ttl: seconds a token stays valid, > 0; got {ttl}")
        token, now = secrets.token_urlsafe(24), self._clock()
        with self._lock:
            self._db.execute("INSERT INTO assignments VALUES (?, ?, ?, ?)",
                             (token, json.dumps(subset), now, now + ttl))  # fmt: skip
        return Assignment(token, subset, now + ttl)

    def accept(self, token: str, report: int) -> int:
        """Store ``report`` under ``token`` (one transaction, on disk before this returns) and
        return its sequence number; :class:`ReportRefused` (nothing stored) for an unknown,
        expired or used token or a report outside ``0..k-1``."""
        if not isinstance(report, int | np.integer) or isinstance(report, bool):
            raise ReportRefused(422, f"report: an integer category, got {type(report).__name__}")
        if not 0 <= int(report) < self.k:
            raise ReportRefused(422, f"report: a category in 0..{self.k - 1}, got {report}")
        now = self._clock()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                seq = self._insert(token, int(report), now)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return seq

    def _insert(self, token: str, report: int, now: float) -> int:
        row = self._db.execute("SELECT expires FROM assignments WHERE token = ?",
                               (token,)).fetchone()  # fmt: skip
        if row is None:
            raise ReportRefused(404, "report: unknown token; ask for an assignment first")
        if self._db.execute("SELECT 1 FROM reports WHERE token = ?", (token,)).fetchone():
            raise ReportRefused(409, "report: this token was used already; a report is counted "
                                "once")  # fmt: skip
        if now > row[0]:
            raise ReportRefused(410, "report: this token has expired; ask for a new assignment")
        seq = int(self._db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM reports").fetchone()[0])
        self._db.execute("INSERT INTO reports VALUES (?, ?, ?, ?)", (seq, token, report, now))
        return seq

    # ------------------------------------------------------------------ reads
    def count(self) -> int:
        """Reports accepted so far."""
        return int(self._db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM reports").fetchone()[0])

    def batch(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Reports ``start..stop-1`` in their order and the ``(n, k)`` boolean masks of their
        assignments' subsets (what :meth:`bayesldp.AdaptiveSurvey.record` takes)."""
        rows = self._db.execute(
            "SELECT r.report, a.subset FROM reports r JOIN assignments a USING (token) "
            "WHERE r.seq >= ? AND r.seq < ? ORDER BY r.seq", (start, stop)
        ).fetchall()  # fmt: skip
        if len(rows) != stop - start:
            raise InvalidInputError(f"batch: reports {start}..{stop - 1} are not all stored "
                                    f"({len(rows)} are)")  # fmt: skip
        reports = np.array([r for r, _ in rows], dtype=np.int64)
        masks = np.zeros((len(rows), self.k), dtype=bool)
        for i, (_, subset) in enumerate(rows):
            masks[i, json.loads(subset)] = True
        return reports, masks
