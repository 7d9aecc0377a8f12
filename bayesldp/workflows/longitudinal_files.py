"""Report files of repeated collection: one tally per round.

A longitudinal file (L-GRR and the longitudinal unary encodings, or any mechanism run again each
round) has one row per (user, round): columns ``user`` (any id), ``round`` (integers; every
round from the first to the last must have reports) and the mechanism's report column(s), in its
one-round layout (:meth:`~bayesldp.mechanisms.base.Mechanism.reports_from_frame`: ``report`` for
L-GRR, ``0..K-1`` bit columns for the unary ones).  :func:`read_rounds` checks it and tallies
each round; a user reported twice in one round, a round with no reports or a report outside the
mechanism's range is a one-line :class:`~bayesldp.errors.InvalidInputError` naming the file,
the round and the row.  With ``users=True`` it also returns each round's user ids, which tell a
panel (the same users in several rounds) from new users each round:
:func:`bayesldp.fit_rounds` (``users=``) warns on a panel, whose intervals it under-covers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.report_files import read_table

#: the columns that make a report file longitudinal (beside the mechanism's report columns)
ROUND_COLUMNS = ("user", "round")


def read_rounds(mechanism: Any, path: str | Path, *, users: bool = False) -> tuple:
    """The rounds of a longitudinal report file and one tally of ``mechanism`` per round.

    Returns ``(rounds, tallies)``, rounds ascending (consecutive integers); with ``users``,
    ``(rounds, tallies, user_ids)``, ``user_ids[i]`` the ids of round ``rounds[i]``'s users
    (for :func:`bayesldp.fit_rounds`' ``users``).
    """
    frame = read_table(path)
    return rounds_from_frame(mechanism, frame, path, users=users)


def rounds_from_frame(mechanism: Any, frame: Any, source: Any, *, users: bool = False) -> tuple:
    """:func:`read_rounds` of a table already read (``source`` names it in errors)."""
    missing = [c for c in ROUND_COLUMNS if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"reports: {source} lacks column(s) {', '.join(missing)}: a file of rounds has "
            f"columns user, round and the mechanism's report column(s); it has "
            f"{', '.join(map(str, frame.columns))}"
        )
    if "count" in frame.columns:
        raise InvalidInputError(
            f"reports: {source} has a count column beside user and round: a file of rounds "
            "holds one row per user and round, not aggregated counts"
        )
    rounds = frame["round"].to_numpy()
    if rounds.dtype.kind not in "iu":
        raise InvalidInputError(
            f"reports: {source} column 'round' must hold integers, got {rounds.dtype}"
        )
    twice = frame.duplicated(list(ROUND_COLUMNS), keep=False).to_numpy()
    if twice.any():
        lines = np.flatnonzero(twice)
        first = frame.iloc[lines[0]]
        user, when = first["user"], first["round"]
        same = lines[(frame["user"].to_numpy()[lines] == user) & (rounds[lines] == when)]
        shown = " and ".join(str(i + 2) for i in same[:2])
        raise InvalidInputError(
            f"reports: {source}: user {user} reported {same.size} times in round {when} (CSV "
            f"lines {shown}); a user reports at most once a round"
        )
    present = np.unique(rounds)
    every = np.arange(present[0], present[-1] + 1)
    empty = np.setdiff1d(every, present)
    if empty.size:
        more = f" (and {empty.size - 1} more)" if empty.size > 1 else ""
        raise InvalidInputError(
            f"reports: {source}: round {empty[0]}{more} has no reports; rounds "
            f"{present[0]}..{present[-1]} appear, and every round between needs reports"
        )
    reports = frame.drop(columns=list(ROUND_COLUMNS))
    order = np.argsort(rounds, kind="stable")
    bounds = np.searchsorted(rounds[order], present, side="left")
    ends = np.r_[bounds[1:], rounds.size]
    tallies, ids = [], []
    every_user = frame["user"].to_numpy()
    for when, lo, hi in zip(present, bounds, ends, strict=True):
        ids.append(every_user[order[lo:hi]])
        part = reports.iloc[order[lo:hi]].reset_index(drop=True)
        where = f"{source} (round {when})"
        try:
            tallies.append(mechanism.tally_frame(part, where))
        except InvalidInputError as exc:
            if where in str(exc):
                raise
            raise InvalidInputError(f"{where}: {exc}") from None
    if users:
        return [int(r) for r in present], tallies, ids
    return [int(r) for r in present], tallies
