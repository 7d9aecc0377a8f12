"""Hadamard response (HR).

Acharya, Sun, Zhang, "Hadamard Response: Estimating Distributions Privately, Efficiently, and
with Little Communication", AISTATS 2019.  Let ``K'`` be the smallest power of two ``>= k + 1``
and ``H`` the ``K' x K'`` Sylvester Hadamard matrix, ``H[r, y] = (-1)^{popcount(r & y)}``.  Input
``x`` owns row ``r = x + 1`` (row 0, all ones, is skipped) and its set of ``+1`` columns

.. math:: C_x = \\{ y \\in 0..K'-1 : \\mathrm{popcount}((x + 1) \\,\\&\\, y) \\text{ even} \\},
          \\qquad |C_x| = K'/2.

The user reports a uniform element of ``C_x`` with probability ``e^eps / (e^eps + 1)`` and a
uniform element of its complement otherwise: ``log2 K'`` bits per report.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc
from bayesldp._validation import RNGLike, as_generator, check_counts, check_memory, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.base import (
    FiniteChannelMechanism,
    PureProtocol,
    realised_epsilon_of_channel,
)
from bayesldp.tally import Tally

_BLOCK_ENTRIES = 1 << 22  # K x block entries of the channel built at a time


def _parity(v: np.ndarray) -> np.ndarray:
    """``popcount(v) mod 2`` for non-negative integers below ``2^32`` (uint8 0/1)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(v) & np.uint8(1)
    v = v ^ (v >> 16)
    v ^= v >> 8
    v ^= v >> 4
    v ^= v >> 2
    v ^= v >> 1
    return (v & 1).astype(np.uint8)


@fill_doc(parameters=categorical_parameters())
class HadamardResponse(FiniteChannelMechanism, PureProtocol):
    """Hadamard response over ``k`` categories (the basic HR of Acharya, Sun, Zhang 2019).

    Reports are integers ``y`` in ``0..K'-1`` with ``K'`` the smallest power of two ``>= k + 1``.
    Channel (``K x K'``):

    .. math::

        P[x, y] = \\frac{2 e^\\varepsilon}{(e^\\varepsilon + 1) K'} \\text{ if } y \\in C_x,
        \\qquad P[x, y] = \\frac{2}{(e^\\varepsilon + 1) K'} \\text{ otherwise},

    with ``C_x`` the ``+1`` columns of Hadamard row ``x + 1``; exactly eps-LDP.  As a pure
    protocol a report ``y`` supports ``{x : y in C_x}``: ``p* = e^eps/(e^eps + 1)`` and, since two
    distinct non-zero Hadamard rows agree on exactly half the columns
    (``|C_x \\cap C_{x'}| = K'/4``), ``q* = 1/2``.  So ``n Var* = (e^eps + 1)^2/(e^eps - 1)^2``,
    the same as BLH.  The oracle statistic is the support counts.

    This is the basic scheme (one Hadamard row per input).  The paper's variant for large eps,
    which splits the domain into blocks of size about ``e^eps`` to reach the ``O(e^eps)`` gain,
    is not implemented.

    The tally is exact and in support form: report ``y``'s likelihood row is ``P[:, y]``, which
    takes the value ``2 e^eps/((e^eps+1)K')`` on ``{x : y in C_x}`` and ``2/((e^eps+1)K')`` off it.

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.HadamardResponse(5, 1.0)
    >>> mech.n_outputs
    8
    >>> mech.tally(mech.perturb([0, 1, 2, 3, 4] * 100, rng=0)).n
    500
    """

    name = "HR"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        self._n_outputs = 1 << self.k.bit_length()  # smallest power of 2 >= k + 1

    @property
    def n_outputs(self) -> int:
        """``K'``: the smallest power of two ``>= k + 1`` (the Hadamard matrix order)."""
        return self._n_outputs

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """A ``report`` column of integers 0..K'-1, K' the smallest power of 2 >= K + 1."""
        return super().reports_from_frame(frame, source)

    # ------------------------------------------------------------------ probabilities
    @property
    def p(self) -> float:
        """Probability that the report lies in ``C_x``: ``e^eps / (e^eps + 1)``."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return 0.5

    def _levels(self) -> tuple[float, float]:
        e_neg = math.exp(-self.epsilon)
        scale = 2.0 / ((1.0 + e_neg) * self._n_outputs)
        return scale * e_neg, scale  # (2/((e^eps+1)K'), 2 e^eps/((e^eps+1)K'))

    # ------------------------------------------------------------------ sets and channel
    def _membership(self, ys: np.ndarray) -> np.ndarray:
        """Boolean (K, len(ys)): ``M[x, j] = ys[j] in C_x``."""
        rows = np.arange(1, self.k + 1, dtype=np.int64)
        return _parity(rows[:, None] & np.asarray(ys, dtype=np.int64)[None, :]) == 0

    @property
    def sets(self) -> np.ndarray:
        """Boolean K x K' matrix ``S[x, y] = (y in C_x)``."""
        return self._membership(np.arange(self._n_outputs))

    @property
    def channel(self) -> np.ndarray:
        what = f"HadamardResponse({self.k}).channel"
        check_memory(9.0 * self.k * self._n_outputs, what, "its tallies use the support form")
        lo, hi = self._levels()
        return np.where(self.sets, hi, lo)

    def realised_epsilon(self) -> float:
        """Exact epsilon of the channel, built ``_BLOCK_ENTRIES`` entries at a time."""
        lo, hi = self._levels()
        width = max(1, _BLOCK_ENTRIES // self.k)
        eps = 0.0
        for start in range(0, self._n_outputs, width):
            ys = np.arange(start, min(self._n_outputs, start + width))
            block = np.where(self._membership(ys), hi, lo)
            eps = max(eps, realised_epsilon_of_channel(block))
        return eps

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Draw ``y`` uniform on ``C_x`` w.p. ``e^eps/(e^eps+1)``, else uniform off it.

        Vectorised: ``y`` uniform on ``0..K'-1``; if its side of ``C_x`` is not the wanted one,
        flip the bit of ``y`` at the lowest set bit of ``x + 1`` (a bijection between ``C_x``
        and its complement, since it changes the parity of ``popcount((x + 1) & y)``).
        """
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n = x.shape[0]
        r = x + 1
        y = gen.integers(0, self._n_outputs, size=n, dtype=np.int64)
        want_in = gen.random(n) < self.p
        is_in = _parity(r & y) == 0
        return y ^ np.where(is_in != want_in, r & -r, 0)

    # ------------------------------------------------------------------ aggregator
    def tally_from_report_counts(self, report_counts: Any) -> Tally:
        """Support-form tally from counts of each report value ``0..K'-1``."""
        report_counts = check_counts(report_counts, "report_counts", length=self._n_outputs)
        if report_counts.sum() == 0:
            raise InvalidInputError("report_counts: all zero; at least one report is needed")
        seen = np.flatnonzero(report_counts)
        what = f"a HadamardResponse({self.k}) tally of {seen.size:,} distinct reports"
        check_memory(3.0 * self.k * seen.size, what, "use fewer categories")
        return Tally(
            report_counts[seen],
            support=self._membership(seen).T,
            levels=self._levels(),
            stat=self._oracle_stat(report_counts),
            mechanism=self,
        )

    def _oracle_stat(self, report_counts: np.ndarray) -> np.ndarray:
        """Support counts ``sum_y counts[y] 1[y in C_x]``."""
        seen = np.flatnonzero(report_counts)
        return (self._membership(seen) @ report_counts[seen]).astype(float)

    def simulate_tally(self, true_counts: Any, rng: RNGLike = None) -> Tally:
        """Tally of ``sum(true_counts)`` users without perturbing each one.

        For each category ``x`` with ``n_x`` users: ``Binomial(n_x, p)`` of them land in ``C_x``,
        spread by a uniform multinomial over its ``K'/2`` members, the rest uniformly over the
        complement; the same law as ``tally(perturb(x))``.  Cost ``O(K K')``, memory ``O(K')``.
        """
        counts = check_counts(true_counts, "true_counts", length=self.k)
        if counts.sum() == 0:
            raise InvalidInputError("true_counts: all zero; at least one user is needed")
        gen = as_generator(rng)
        half = self._n_outputs // 2
        uniform = np.full(half, 1.0 / half)
        ys = np.arange(self._n_outputs, dtype=np.int64)
        inside = gen.binomial(counts, self.p)
        report_counts = np.zeros(self._n_outputs, dtype=np.int64)
        for x in np.flatnonzero(counts):
            member = _parity((x + 1) & ys) == 0
            report_counts[member] += gen.multinomial(inside[x], uniform)
            report_counts[~member] += gen.multinomial(counts[x] - inside[x], uniform)
        return self.tally_from_report_counts(report_counts)

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A report ``y`` supports ``x`` iff ``y in C_x`` (``popcount((x+1) & y)`` even)."""
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise InvalidTypeError(f"x: expected an integer category, got {x!r}")
        if not 0 <= x < self.k:
            raise InvalidInputError(f"x: must lie in 0..{self.k - 1}, got {x}")
        reports = self.check_reports(reports)
        return _parity((int(x) + 1) & reports) == 0

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """``y in C_x0`` and ``y not in C_x1``: probability ratio ``e^eps`` between x0 and x1."""
        return PureProtocol.audit_event(self, reports, x0, x1)

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """Pure-protocol estimate ``(stat/n - 1/2) / (p* - 1/2)``."""
        return PureProtocol.unbiased_frequencies(self, tally)

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance ``1/(4 n (p*-1/2)^2) + theta (1/2 - p*)/(n (p*-1/2))``."""
        return PureProtocol.oracle_variance(self, theta, n)
