"""Anytime-valid confidence sequences for a survey's frequencies, by betting.

A survey that stops when its intervals are narrow enough looks at them many times; a
confidence sequence covers at every look at once: ``P(exists t: theta_j not in C_t) <= alpha``,
so it covers at any stopping time, whatever the rule.  These are the betting confidence
sequences of Waudby-Smith and Ramdas, "Estimating means of bounded random variables by
betting", JRSS B 2023 (the hedged capital process with predictable plug-in bets), applied to
each user's unbiased estimate of theta under its own channel.

User ``i`` reports through a channel ``P_i`` (rows: true values, columns: reports) chosen from
the reports before it (the survey's subset).  Since ``E[e_y] = P_i^T theta``, the vector
``Z_i = P_i^{-1}[y_i, :]`` has ``E[Z_i | past] = theta`` whatever ``P_i`` is, and its entry
``j`` lies in ``[l_ij, u_ij]``, the smallest and largest entries of column ``j`` of
``P_i^{-1}`` (``l <= 0`` and ``u >= 1``).  For a candidate ``m`` of ``theta_j`` the two
capitals

.. math::

    K^+_t(m) = \\prod_{i \\le t} (1 + \\lambda^+_i (Z_{ij} - m)), \\qquad
    K^-_t(m) = \\prod_{i \\le t} (1 - \\lambda^-_i (Z_{ij} - m)),

with bets ``0 <= lambda^+_i <= c / (m - l_ij)`` and ``0 <= lambda^-_i <= c / (u_ij - m)``
(``c = 1/2``) fixed before user ``i`` reports, are nonnegative martingales under
``theta_j = m``, and so is ``(K^+ + K^-) / 2``; by Ville's inequality it exceeds ``1 / alpha``
at some time with probability at most ``alpha``.  The sequence is the set of ``m`` (on a grid of
``[0, 1]``) never rejected so far.  The bets are the predictable plug-in
``lambda_t = sqrt(2 log(2 / alpha) / (s_t^2 t log(1 + t)))`` truncated as above, ``s_t^2`` the
variance of ``Z_ij`` under the user's channel at the running mean of the estimates before it
(a noisier channel bets less).  A bet is set once per epoch of users (their number fixed in
advance; :func:`sequences_from_reports` lets epochs grow by 10%) and channel, so an epoch's
capital is a sum over its channels' ``K`` distinct reports, and Ville's threshold is checked
at the end of each epoch (checking less often only widens the sequence).  A channel that is
singular (no unbiased estimate exists) bets nothing.

Each category's sequence covers its own ``theta_j`` with probability at least ``1 - alpha``;
all ``K`` at once with ``alpha / K`` each.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from bayesldp._validation import check_int, check_positive
from bayesldp.errors import InvalidInputError

#: the truncation of the bets (Waudby-Smith and Ramdas use 1/2 or 3/4)
TRUNCATION = 0.5
#: channels less well conditioned than this give no unbiased estimate: their batch bets nothing
SINGULAR_CONDITION = 1e12


class BettingConfidenceSequences:
    """Anytime-valid ``1 - alpha`` confidence sequences for each of ``k`` frequencies.

    Feed the batches in their order (:meth:`update`); :meth:`intervals` is the current
    sequence (see the module docstring).

    Parameters
    ----------
    k : int
        Categories.
    alpha : float
        Miscoverage of each category's sequence, over all times at once.
    grid : int
        Candidates for each frequency, evenly spaced on ``[0, 1]``.
    target_width : float, optional
        The width a survey will stop at: bets are tuned to reach it with the fewest users
        (:meth:`_horizon`); the sequences stay valid at every time.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp import GRR
    >>> mech, gen = GRR(3, 1.0), np.random.default_rng(0)
    >>> cs = BettingConfidenceSequences(3, alpha=0.1)
    >>> for _ in range(20):
    ...     reports = mech.perturb(gen.choice(3, size=500, p=[0.6, 0.3, 0.1]), rng=gen)
    ...     cs.update(mech.channel, np.bincount(reports, minlength=3))
    >>> lower, upper = cs.intervals()
    >>> bool(np.all((lower <= [0.6, 0.3, 0.1]) & ([0.6, 0.3, 0.1] <= upper)))
    True
    """

    def __init__(self, k: int, alpha: float = 0.1, grid: int = 2001,
                 target_width: float | None = None) -> None:  # fmt: skip
        self.k = check_int(k, "k", 2)
        self.target_width = (
            None if target_width is None else check_positive(target_width, "target_width")
        )
        if not 0 < alpha < 1:
            raise InvalidInputError(f"alpha: a miscoverage in (0, 1), got {alpha}")
        self.alpha = float(alpha)
        self.m = np.linspace(0.0, 1.0, check_int(grid, "grid", 3))
        self._log_plus = np.zeros((self.k, self.m.size))
        self._log_minus = np.zeros((self.k, self.m.size))
        self._rejected = np.zeros((self.k, self.m.size), dtype=bool)
        self.users = 0  # users with an unbiased estimate so far
        self._sum = np.zeros(self.k)  # of the Z_ij

    def update(self, channel: np.ndarray, counts: np.ndarray) -> None:
        """Add one batch: its users' common ``channel`` (``k x k``, rows the true values) and
        the counts of their reports.  The batch's size must be fixed before its reports are
        seen (its bet is set for its middle user)."""
        self.update_epoch([(channel, counts)])

    def update_epoch(self, groups: list[tuple[np.ndarray, np.ndarray]],
                     size: int | None = None) -> None:  # fmt: skip
        """Add an epoch of users whose number was fixed in advance, as ``(channel, counts)``
        groups (the channels chosen before each user reported).  Every user of a group is
        given the bet set at the epoch's start for its channel, so the order of the users
        within the epoch does not matter; the candidates are checked at the epoch's end.
        ``size``: the epoch's planned users, where the groups hold only its first ones (a look
        before the epoch ends): they bet as the whole epoch's users do, so the capital at the
        look is the one process's, as Ville's inequality needs."""
        checked = []
        for channel, counts in groups:
            channel, counts = self._checked(channel, counts)
            if counts.sum() > 0 and np.linalg.cond(channel) <= SINGULAR_CONDITION:
                checked.append((channel, counts, np.linalg.inv(channel)))
        if not checked:
            return
        n = sum(counts.sum() for _, counts, _ in checked)
        t = self.users + (n if size is None else size) / 2  # the epoch's middle user
        for channel, counts, z in checked:  # z[y, j]: entry j of the estimate of report y
            variance = self._variance(channel, z)
            bet = np.sqrt(2 * np.log(2 / self.alpha) / (variance * self._horizon(t, variance)))
            low, high = z.min(axis=0), z.max(axis=0)
            for j in range(self.k):  # one category at a time: (k, grid), not (k, k, grid)
                self._bet(j, z[:, j], counts, float(bet[j]), float(low[j]), float(high[j]))
        for _, counts, z in checked:
            self._sum += counts @ z
        self.users += int(n)
        hedged = np.logaddexp(self._log_plus, self._log_minus) - np.log(2)
        self._rejected |= hedged >= np.log(1 / self.alpha)

    def _checked(self, channel: Any, counts: Any) -> tuple[np.ndarray, np.ndarray]:
        channel = np.asarray(channel, dtype=float)
        counts = np.asarray(counts, dtype=float)
        if channel.shape != (self.k, self.k) or counts.shape != (self.k,):
            raise InvalidInputError(f"update: a {self.k} x {self.k} channel and {self.k} counts, "
                                    f"got {channel.shape} and {counts.shape}")  # fmt: skip
        return channel, counts

    def _horizon(self, t: float, variance: np.ndarray) -> np.ndarray:
        """The ``T`` of the bet ``sqrt(2 log(2 / alpha) / (s^2 T))``: ``t log(1 + t)`` (bets
        that spread ``alpha`` over all times), or, with a ``target_width`` ``w``, ``max(t,
        n*)`` with ``n* = 8 log(2 / alpha) s^2 / w^2``, the users at which a bet held at
        ``sqrt(2 log(2 / alpha) / (s^2 n*))`` narrows the sequence to about ``w`` (bets tuned
        to where a survey stopping at that width will stop; still valid at every time)."""
        if self.target_width is None:
            return np.full_like(variance, t * np.log1p(t))
        planned = 8 * np.log(2 / self.alpha) * variance / self.target_width**2
        return np.maximum(t, planned)

    def _variance(self, channel: np.ndarray, z: np.ndarray) -> np.ndarray:
        """The variance of each ``Z_ij`` under this channel at the plug-in ``theta`` (the
        running mean of the estimates, shrunk to uniform by one user and put on the simplex):
        a noisier channel gets smaller bets."""
        plug_in = np.clip((self._sum + 1.0 / self.k) / (self.users + 1), 0.0, None)
        plug_in = plug_in / plug_in.sum() if plug_in.sum() > 0 else np.full(self.k, 1 / self.k)
        reports = plug_in @ channel  # the law of a report
        return np.maximum(reports @ z**2 - (reports @ z) ** 2, 1e-12)

    def _bet(self, j: int, z: np.ndarray, counts: np.ndarray, bet: float, low: float,
             high: float) -> None:  # fmt: skip
        """Category ``j``'s capitals after a group whose reports ``y`` (``counts[y]`` users
        each) estimate ``theta_j`` by ``z[y]``, each user betting ``bet`` (truncated)."""
        m = self.m
        plus = np.minimum(bet, TRUNCATION / np.maximum(m - low, 1e-12))
        minus = np.minimum(bet, TRUNCATION / np.maximum(high - m, 1e-12))
        step = z[:, None] - m[None, :]  # (report, candidate)
        self._log_plus[j] += counts @ np.log1p(plus * step)
        self._log_minus[j] += counts @ np.log1p(-minus * step)

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Each category's sequence now, as ``(lower, upper)``: the hull of the candidates not
        rejected (where every candidate is rejected, an event of probability at most alpha,
        the candidate rejected with the least evidence, an interval of width 0)."""
        lower, upper = np.empty(self.k), np.empty(self.k)
        evidence = np.logaddexp(self._log_plus, self._log_minus)
        for j in range(self.k):
            kept = np.flatnonzero(~self._rejected[j])
            if kept.size == 0:
                kept = np.array([int(np.argmin(evidence[j]))])
            lower[j], upper[j] = self.m[kept[0]], self.m[kept[-1]]
        return lower, upper


class EpochedSequences:
    """Sequences fed users as they come, in epochs fixed in advance: the first ends at ``k``
    users, each next one ``growth`` times as long.  :meth:`look` adds the epochs completed
    since the last look and returns the sequences now (a partial last epoch bets as planned,
    on a copy), so a survey that looks at every refresh pays for each user once."""

    def __init__(self, k: int, alpha: float = 0.1, growth: float = 1.1,
                 target_width: float | None = None) -> None:  # fmt: skip
        self.complete = BettingConfidenceSequences(k, alpha, target_width=target_width)
        self.k, self.growth = k, growth
        self.start, self.end = 0, k  # the current epoch's users

    def look(self, channels: list[np.ndarray], codes: np.ndarray) -> BettingConfidenceSequences:
        """The sequences after the users whose ``codes`` (channel index times ``k`` plus the
        report) are given, all of them from the first user on."""
        n = len(codes)
        if n < self.start:
            raise InvalidInputError(f"look: {n} users, fewer than the {self.start} seen before")
        while self.end <= n:
            self._add(self.complete, channels, codes[self.start : self.end])
            self.start, self.end = self.end, max(self.end + 1, int(np.ceil(self.end * self.growth)))
        if n == self.start:
            return self.complete
        now = copy.deepcopy(self.complete)
        self._add(now, channels, codes[self.start : n])
        return now

    def _add(self, sequences: BettingConfidenceSequences, channels: list[np.ndarray],
             codes: np.ndarray) -> None:  # fmt: skip
        counts = np.bincount(codes, minlength=len(channels) * self.k).reshape(-1, self.k)
        groups = [(channels[c], counts[c]) for c in np.flatnonzero(counts.sum(1))]
        sequences.update_epoch(groups, size=self.end - self.start)


def sequences_from_reports(
    k: int,
    channels: list[np.ndarray],
    channel_of_user: np.ndarray,
    reports: np.ndarray,
    alpha: float = 0.1,
    growth: float = 1.1,
    target_width: float | None = None,
) -> BettingConfidenceSequences:
    """The sequences after users ``i = 0, 1, ...`` reported ``reports[i]`` through
    ``channels[channel_of_user[i]]``, in epochs that grow by ``growth`` (fixed in advance: the
    first ends at ``k`` users); one update per epoch and channel, whatever the number of users.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp import GRR
    >>> gen = np.random.default_rng(1)
    >>> reports = GRR(3, 2.0).perturb(gen.choice(3, size=5000, p=[0.6, 0.3, 0.1]), rng=gen)
    >>> cs = sequences_from_reports(3, [GRR(3, 2.0).channel], np.zeros(5000, int), reports)
    >>> lower, upper = cs.intervals()
    >>> bool(np.all((lower <= [0.6, 0.3, 0.1]) & ([0.6, 0.3, 0.1] <= upper)))
    True
    """
    codes = np.asarray(channel_of_user) * k + np.asarray(reports)
    return EpochedSequences(k, alpha, growth, target_width).look(channels, codes)
