"""Subset selection (k-subset): each user reports a set of ``d`` categories.

Wang, Wang, Li, Wang and Ma, "Mutual information optimally local private discrete distribution
estimation" (arXiv:1607.08025, 2016); Ye and Barg, "Optimal schemes for discrete distribution
estimation under locally differential privacy" (IEEE Trans. Inf. Theory 64(8), 2018).

A user holding ``x`` reports a subset ``S`` of ``d`` of the ``K`` categories with

.. math:: \\Pr[S \\mid x] = \\frac{e^\\varepsilon\\,[x \\in S] + [x \\notin S]}{Z}, \\qquad
          Z = \\binom{K-1}{d-1} e^\\varepsilon + \\binom{K-1}{d},

so every report's likelihood row takes two values, ``e^eps / Z`` on ``S`` and ``1 / Z`` off it
(a support-form tally, like unary encoding), and the ratio of any two rows' entries is at most
``e^eps``.  Sampling: with probability ``p = d e^eps / (d e^eps + K - d)`` the set contains ``x``
and ``d - 1`` of the other ``K - 1`` categories uniformly, otherwise ``d`` of the others.  As a
pure protocol (Wang et al., USENIX Security 2017) ``S`` supports each of its members:
``p* = p`` and ``q* = (p (d - 1) + (1 - p) d) / (K - 1)``.

The subset size: ``d = argmin_d Var*(d)`` over ``1..K-1`` (``Var* = q*(1-q*)/(p*-q*)^2``, the
oracle's variance of a rare category), computed exactly; Wang et al. and Ye and Barg give
``d ≈ K / (e^eps + 1)``, which multi-freq-ldpy rounds (``max(1, rint(K / (e^eps + 1)))``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from bayesldp._validation import RNGLike, as_generator, check_int, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms._splitmix import GOLDEN, bernoulli_threshold, mix64, stream_seed
from bayesldp.mechanisms.base import DirectSupportProtocol, Parameter, int_columns, report_matrix
from bayesldp.mechanisms.unary import support_tally
from bayesldp.tally import Tally

#: the channel over all C(K, d) subsets is built only up to this many columns
MAX_CHANNEL_COLUMNS = 1_000_000


@njit(cache=True)
def _floyd_subsets(x, seed, threshold, k, out, stamp):  # pragma: no cover - compiled
    """Row ``i`` of ``out``: the true ``x[i]`` (when a SplitMix64 draw ``(u >> 11)`` is below
    ``threshold = ceil(p 2^53)``) and uniformly drawn distinct others, by Floyd's algorithm over
    the ``K - 1`` others (index ``j`` is category ``j`` below ``x``, ``j + 1`` from it on).

    All draws come from the SplitMix64 stream seeded ``seed``.  Each uniform integer in
    ``0..r-1`` takes a 32-bit half of an output by Lemire's method (ACM TOMACS 29(1), 2019:
    multiply by ``r``, reject the ``2^32 mod r`` lowest products, so it is exactly uniform).
    ``stamp`` (int64, ``K - 1`` zeros) marks index ``t`` as taken by user ``i`` with
    ``stamp[t] = i + 1``, so nothing is cleared between users."""
    n, d = out.shape
    others = k - 1
    state = seed
    spare = np.uint64(0)
    have = False
    low32 = np.uint64(0xFFFFFFFF)
    two32 = np.uint64(0x100000000)
    for i in range(n):
        state += GOLDEN
        keep = (mix64(state) >> np.uint64(11)) < threshold
        m = d - 1 if keep else d
        xi = x[i]
        mark = i + 1
        for step in range(m):
            j = others - m + step
            r = np.uint64(j + 1)
            while True:
                if have:
                    word = spare
                    have = False
                else:
                    state += GOLDEN
                    z = mix64(state)
                    word = z & low32
                    spare = z >> np.uint64(32)
                    have = True
                prod = word * r
                low = prod & low32
                if low >= r or low >= (two32 - r) % r:
                    break
            t = np.int64(prod >> np.uint64(32))
            if stamp[t] == mark:
                t = j
            stamp[t] = mark
            out[i, step] = t + (t >= xi)
        if keep:
            out[i, d - 1] = xi


def _ss_probabilities(k: int, d: int, epsilon: float) -> tuple[float, float]:
    """``(p*, q*)`` of subset selection with subsets of size ``d``."""
    e = math.exp(epsilon)
    p = d * e / (d * e + k - d)
    return p, (p * (d - 1) + (1 - p) * d) / (k - 1)


def optimal_subset_size(k: int, epsilon: float) -> int:
    """The ``d`` in ``1..K-1`` with the smallest ``Var* = q*(1-q*)/(p*-q*)^2`` (ties: smaller)."""
    best, best_var = 1, math.inf
    for d in range(1, k):
        p, q = _ss_probabilities(k, d, epsilon)
        var = q * (1 - q) / (p - q) ** 2
        if var < best_var * (1 - 1e-12):
            best, best_var = d, var
    return best


class SubsetSelection(DirectSupportProtocol):
    """Subset selection: report ``d`` categories, the true one favoured by ``e^eps``.

    Parameters
    ----------
    k : int
        Domain size K >= 2.
    epsilon : float
        Privacy budget.
    d : int, optional
        Subset size in ``1..K-1`` (default :func:`optimal_subset_size`).

    Reports are int arrays of shape ``(n, d)``: the members of each user's subset (any order).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.SubsetSelection(10, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 3, 4] * 20, rng=0))
    >>> mech.d, tally.n, round(mech.realised_epsilon(), 12)
    (2, 100, 1.0)
    """

    name = "SubsetSelection"
    PARAMETERS = (Parameter("d", int, "subset size (default: the Var*-optimal one)"),)
    #: not ranked by ``recommend`` yet: its Fisher information would be simulated there, and the
    #: simulation's noise ties it with GRR, which it equals at ``d = 1``
    RECOMMEND = False

    def __init__(self, k: int, epsilon: float, d: int | None = None) -> None:
        super().__init__(k, epsilon)
        if d is None:
            d = optimal_subset_size(self.k, self.epsilon)
        self.d = check_int(d, "d", 1)
        if self.d >= self.k:
            raise InvalidInputError(f"d: the subset size must be in 1..{self.k - 1}, got {d}")
        self.p, self.q = _ss_probabilities(self.k, self.d, self.epsilon)

    @classmethod
    def l2_optimal(cls, k: int, epsilon: float) -> SubsetSelection:
        """Subset selection at the size with the smallest summed L2 loss: the optimal
        configuration of Pan, "Strict Optimality of Frequency and Distribution Estimation Under
        Local Differential Privacy" (arXiv 2603.11523, 2026), a symmetric extremal
        configuration at its optimised support size, whose loss is
        :func:`bayesldp.bounds.l2_lower_bound` (``d`` from
        :func:`bayesldp.bounds.optimal_support_size`; the default ``d`` minimises ``Var*``
        instead, and the two can differ by one).

        Examples
        --------
        >>> import numpy as np, bayesldp
        >>> from bayesldp.bounds import l2_lower_bound
        >>> mech = bayesldp.SubsetSelection.l2_optimal(20, 1.0)
        >>> loss = mech.oracle_variance(np.full(20, 0.05), 10_000).sum()
        >>> mech.d, bool(np.isclose(loss, l2_lower_bound(20, 1.0, 10_000)))
        (5, True)
        """
        from bayesldp.bounds import optimal_support_size

        return cls(k, epsilon, d=optimal_support_size(k, epsilon))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "d": self.d}

    @property
    def levels(self) -> tuple[float, float]:
        """Likelihood row values off / on the subset, ``(1, e^eps) / Z`` (scaled by ``Z``)."""
        return (1.0, math.exp(self.epsilon))

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Each user's subset of ``d`` categories, int64 array ``(n, d)``.

        Per user: with probability ``p`` the subset is the true value plus ``d - 1`` of the
        other ``K - 1`` categories, else ``d`` of the others, drawn uniformly without replacement
        by Floyd's algorithm (Bentley and Floyd, CACM 30(9), 1987: ``m`` distinct values from
        ``N`` with ``m`` uniform integers) in a compiled loop, O(d) per user.  The draws come
        from a SplitMix64 stream inside the loop (Bernoulli(``p``) as ``(u >> 11) < ceil(p
        2^53)``, integers exactly uniform by Lemire's method on 32-bit halves), seeded by one
        draw of ``rng``: the same seed gives the same subsets and no memory beyond the output
        is used.
        """
        x = check_values(x, self.k)
        if self.k > 2**32:
            raise NotSupportedError(f"k: perturb draws categories below 2^32, got k = {self.k}")
        gen = as_generator(rng)
        out = np.empty((x.shape[0], self.d), dtype=np.int64)
        stamp = np.zeros(self.k - 1, dtype=np.int64)
        _floyd_subsets(x, stream_seed(gen), bernoulli_threshold(self.p), self.k, out, stamp)
        return out

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> np.ndarray:
        """Validate reports: int array ``(n, d)`` of distinct categories per row."""
        arr = report_matrix(reports, self.d, f"each user's {self.d} categories")
        if arr.dtype.kind not in "iu":
            raise InvalidTypeError(f"reports: expected integer categories, got {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.k:
            bad = arr.min() if arr.min() < 0 else arr.max()
            raise InvalidInputError(f"reports: categories must be in 0..{self.k - 1}, got {bad}")
        ordered = np.sort(arr, axis=1)
        repeated = np.flatnonzero((np.diff(ordered, axis=1) == 0).any(axis=1))
        if repeated.size:
            raise InvalidInputError(
                f"reports: {repeated.size} report(s) name a category twice (first: row "
                f"{int(repeated[0])}); a subset has {self.d} distinct categories"
            )
        return arr.astype(np.int64)

    def membership(self, reports: Any) -> np.ndarray:
        """Bool ``(n, K)``: category ``x`` is in report ``i``'s subset."""
        arr = self.check_reports(reports)
        out = np.zeros((arr.shape[0], self.k), dtype=bool)
        out[np.arange(arr.shape[0])[:, None], arr] = True
        return out

    def tally(self, reports: Any) -> Tally:
        """Support-form tally: support = the subset, levels ``(1, e^eps)``; ``stat`` the
        support counts.  For ``K <= 16`` reports are counted per subset first."""
        return support_tally(self.membership(reports), self)

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A report supports ``x`` iff ``x`` is in its subset."""
        return (self.check_reports(reports) == x).any(axis=1)

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """Columns ``s0``, ..., ``s{d-1}``: the members of each user's subset (ints)."""
        names = [f"s{i}" for i in range(self.d)]
        return np.column_stack(int_columns(frame, names, source))

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        arr = self.check_reports(reports)
        return pd.DataFrame({f"s{i}": arr[:, i] for i in range(self.d)})

    def report_size(self) -> str:
        return f"{self.d} categories ({self.d * math.ceil(math.log2(self.k))} bits)"

    # ------------------------------------------------------------------ privacy
    @property
    def channel(self) -> np.ndarray:
        """The ``K x C(K, d)`` channel over subsets (columns in lexicographic order), for
        ``C(K, d) <= 1e6``."""
        from itertools import combinations

        columns = math.comb(self.k, self.d)
        if columns > MAX_CHANNEL_COLUMNS:
            raise NotSupportedError(
                f"SubsetSelection: the channel has C({self.k}, {self.d}) = {columns} columns; it "
                f"is only built up to {MAX_CHANNEL_COLUMNS}"
            )
        member = np.zeros((self.k, columns), dtype=bool)
        for j, subset in enumerate(combinations(range(self.k), self.d)):
            member[list(subset), j] = True
        e = math.exp(self.epsilon)
        z = math.comb(self.k - 1, self.d - 1) * e + math.comb(self.k - 1, self.d)
        return np.where(member, e, 1.0) / z

    def realised_epsilon(self) -> float:
        """Exact epsilon from the channel: ``max_S log(max_x P[x, S] / min_x P[x, S])``.

        Over the full channel when it has at most 1e6 columns.  Otherwise from the two values a
        column takes, in proportion ``levels = (1, e^eps)`` (``Z`` cancels; every subset with
        ``1 <= d <= K-1`` has members and non-members, so every column takes both).
        """
        if math.comb(self.k, self.d) > MAX_CHANNEL_COLUMNS:
            lo, hi = self.levels
            return math.log(hi / lo)
        channel = self.channel
        return float(np.max(np.log(channel.max(axis=0)) - np.log(channel.min(axis=0))))
