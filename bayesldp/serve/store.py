"""The live survey's durable record: assignments issued and reports accepted, exactly once.

One SQLite file in write-ahead-log mode, ``synchronous=FULL``: a report is acknowledged only
after its transaction is on disk, so a crash (``kill -9``) loses no acknowledged report.  Each
respondent gets an *assignment*: a single-use token, the RRRR subset its browser must randomise
with and an expiry time.  The token carries its subset and expiry and is signed (HMAC-SHA256
with a key made once per store and kept in it), so issuing one writes nothing and a token the
store did not issue, or one altered, is refused.  A report names its token; the token is the
idempotency key:

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

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp._validation import check_int
from bayesldp.errors import InvalidInputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
    seq INTEGER PRIMARY KEY,
    token TEXT NOT NULL UNIQUE,
    subset TEXT NOT NULL,
    report INTEGER NOT NULL,
    received REAL NOT NULL
);
"""


class ReportRefused(InvalidInputError):
    """A report the store does not take; ``status`` is the HTTP status to answer with.

    Examples
    --------
    >>> refused = ReportRefused(409, "report: this token was used already")
    >>> refused.status, str(refused)
    (409, 'report: this token was used already')
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Assignment:
    """What one respondent is told: its token, the RRRR subset and when the token expires.

    Examples
    --------
    >>> import tempfile, os
    >>> store = ReportStore(os.path.join(tempfile.mkdtemp(), "s.sqlite"), k=4)
    >>> a = store.issue([2, 0], ttl=60)
    >>> a.subset
    (0, 2)
    """

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
            self._db.execute("INSERT INTO meta VALUES ('key', ?)", (secrets.token_hex(32),))
        elif int(stored[0]) != self.k:
            self._db.close()
            raise InvalidInputError(
                f"store: {str(self.path)!r} holds a survey of k = {stored[0]} categories, not "
                f"{self.k}; give another data directory"
            )
        key = self._db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()[0]
        self._key = bytes.fromhex(key)

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
        expires = int((self._clock() + ttl) * 1000)  # milliseconds
        claims = f"{secrets.token_urlsafe(12)}.{expires}.{'-'.join(map(str, subset))}"
        return Assignment(f"{claims}.{self._sign(claims)}", subset, expires / 1000)

    def _sign(self, claims: str) -> str:
        return hmac.new(self._key, claims.encode(), hashlib.sha256).hexdigest()[:32]

    def _claims(self, token: str) -> tuple[float, str]:
        """A token's expiry and subset (as stored: JSON), or a 404 for one not issued here."""
        claims, _, signature = token.rpartition(".")
        if not hmac.compare_digest(self._sign(claims).encode(), signature.encode()):
            raise ReportRefused(404, "report: unknown token; ask for an assignment first")
        _, expires, subset = claims.split(".")  # signed here: the issued form
        members = [int(v) for v in subset.split("-")] if subset else []
        return int(expires) / 1000, json.dumps(members)

    def accept(self, token: str, report: int) -> int:
        """Store ``report`` under ``token`` (one transaction, on disk before this returns) and
        return its sequence number; :class:`ReportRefused` (nothing stored) for an unknown,
        expired or used token or a report outside ``0..k-1``."""
        outcome = self.accept_many([(token, report)])[0]
        if isinstance(outcome, ReportRefused):
            raise outcome
        return outcome

    def accept_many(self, items: list[tuple[str, Any]]) -> list[int | ReportRefused]:
        """:meth:`accept` for many reports in one transaction (one write to disk: a server
        commits the reports that arrived together at once); each item's sequence number, or
        the :class:`ReportRefused` that says why it was not stored."""
        now, outcomes = self._clock(), []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for token, report in items:
                    try:
                        outcomes.append(self._insert(token, self._category(report), now))
                    except ReportRefused as refused:
                        outcomes.append(refused)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return outcomes

    def _category(self, report: Any) -> int:
        if not isinstance(report, int | np.integer) or isinstance(report, bool):
            raise ReportRefused(422, f"report: an integer category, got {type(report).__name__}")
        if not 0 <= int(report) < self.k:
            raise ReportRefused(422, f"report: a category in 0..{self.k - 1}, got {report}")
        return int(report)

    def _insert(self, token: str, report: int, now: float) -> int:
        expires, subset = self._claims(token)
        if self._db.execute("SELECT 1 FROM reports WHERE token = ?", (token,)).fetchone():
            raise ReportRefused(409, "report: this token was used already; a report is counted "
                                "once")  # fmt: skip
        if now > expires:
            raise ReportRefused(410, "report: this token has expired; ask for a new assignment")
        seq = int(self._db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM reports").fetchone()[0])
        self._db.execute("INSERT INTO reports VALUES (?, ?, ?, ?, ?)",
                         (seq, token, subset, report, now))  # fmt: skip
        return seq

    def put(self, key: str, value: Any) -> None:
        """Keep a JSON value under ``key`` (the survey's stop, say), on disk when this returns."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (f"value:{key}", json.dumps(value)))  # fmt: skip

    def get(self, key: str) -> Any:
        """The value :meth:`put` kept under ``key``, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (f"value:{key}",))
        found = row.fetchone()
        return None if found is None else json.loads(found[0])

    # ------------------------------------------------------------------ reads
    def count(self) -> int:
        """Reports accepted so far."""
        return int(self._db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM reports").fetchone()[0])

    def batch(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Reports ``start..stop-1`` in their order and the ``(n, k)`` boolean masks of their
        assignments' subsets (what :meth:`bayesldp.AdaptiveSurvey.record` takes)."""
        rows = self._db.execute(
            "SELECT report, subset FROM reports WHERE seq >= ? AND seq < ? ORDER BY seq",
            (start, stop),
        ).fetchall()  # fmt: skip
        if len(rows) != stop - start:
            raise InvalidInputError(f"batch: reports {start}..{stop - 1} are not all stored "
                                    f"({len(rows)} are)")  # fmt: skip
        reports = np.array([r for r, _ in rows], dtype=np.int64)
        masks = np.zeros((len(rows), self.k), dtype=bool)
        for i, (_, subset) in enumerate(rows):
            masks[i, json.loads(subset)] = True
        return reports, masks
