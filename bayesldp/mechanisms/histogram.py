"""Histogram encoding: summation (SHE) and thresholding (THE).

Wang, Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency Estimation",
USENIX Security 2017, section 4.2.  The input ``x`` is one-hot encoded as ``B = e_x`` in ``R^k``
and the client reports ``v = B + L`` with ``L`` a vector of ``k`` independent Laplace(0, 2/eps)
variables.  Two one-hot vectors are at L1 distance 2, so this is the Laplace mechanism with
sensitivity 2: eps-LDP (Theorem 4).  SHE sums the reports; THE counts, per category, the reports
whose coordinate exceeds a threshold ``theta`` (a pure protocol).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from scipy import optimize

from bayesldp._docs import categorical_parameters, fill_doc, perturb_parameters
from bayesldp._validation import RNGLike, as_generator, check_epsilon, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.base import Mechanism, Parameter, PureProtocol, report_matrix
from bayesldp.tally import Tally

#: L1 distance between two different one-hot encodings: the Laplace mechanism's sensitivity.
L1_SENSITIVITY = 2.0


class HistogramEncoding(Mechanism):
    """Client side shared by SHE and THE: one-hot encoding plus Laplace(0, 2/eps) noise.

    The density of a report ``v`` given ``X = x`` is
    ``prod_j (1/(2b)) exp(-|v_j - 1[j = x]| / b)`` with ``b = 2/eps``; as a function of ``x`` it
    is proportional to

    .. math:: L(v, x) = \\exp\\left(-\\frac{\\varepsilon}{2} (|v_x - 1| - |v_x|)\\right),

    the exact likelihood row used by both tallies (stored divided by its row maximum, so every
    entry lies in ``[e^-eps, 1]``).
    """

    @property
    def scale(self) -> float:
        """Scale ``b = 2 / eps`` of the Laplace noise added to every coordinate."""
        return L1_SENSITIVITY / self.epsilon

    # ------------------------------------------------------------------ client
    @fill_doc(parameters=perturb_parameters("reports"))
    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise ``x`` into noisy one-hot vectors ``e_x + Laplace(0, 2/eps)^k``.

        {parameters}

        Returns
        -------
        array of float, shape (n, k)
        """
        x = check_values(x, self.k)
        gen = as_generator(rng)
        out = gen.laplace(0.0, self.scale, size=(x.shape[0], self.k))
        out[np.arange(x.shape[0]), x] += 1.0
        return out

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> np.ndarray:
        """Validate reports: a finite real ``(n, k)`` matrix, ``n >= 1``; returned as float."""
        arr = report_matrix(reports, self.k, "one noisy vector per user")
        if arr.dtype == bool or arr.dtype.kind not in "iuf":
            raise InvalidTypeError(f"reports: expected real-valued vectors, got dtype {arr.dtype}")
        arr = arr.astype(float, copy=False)
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError("reports: contains NaN or infinite values")
        return arr

    def likelihood_rows(self, reports: Any) -> np.ndarray:
        """Per-report likelihood rows ``L[u, x]`` (see the class docstring), shape ``(n, k)``."""
        return self._likelihood_rows(self.check_reports(reports))

    def _likelihood_rows(self, v: np.ndarray) -> np.ndarray:
        d = np.abs(v - 1.0) - np.abs(v)  # in [-1, 1]
        d -= d.min(axis=1, keepdims=True)
        return np.exp(-0.5 * self.epsilon * d)

    # ------------------------------------------------------------------ privacy
    def noise_logpdf(self, u: Any) -> np.ndarray:
        """Log density of the noise added to each coordinate: Laplace(0, b), ``b = 2/eps``."""
        u = np.asarray(u, dtype=float)
        return -math.log(2.0 * self.scale) - np.abs(u) / self.scale

    def realised_epsilon(self) -> float:
        """The largest log density ratio of two inputs, computed from :meth:`noise_logpdf`.

        Inputs ``x`` and ``x'`` change the density of a report only in coordinates ``x`` and
        ``x'`` (``v_x`` has mean 1 under ``x``, 0 under ``x'``, and the other way round), so the
        supremum over reports of ``log f(v | x) - log f(v | x')`` is the sum of two one-coordinate
        suprema, ``sup_t [log g(t - 1) - log g(t)] + sup_t [log g(t) - log g(t - 1)]``, with ``g``
        the noise density.  For Laplace noise the one-coordinate ratio is linear between its kinks
        at 0 and 1 and constant outside, so the suprema are attained on ``{-1, 0, 1, 2}``: with
        ``b = 2/eps`` the result is ``2 / b = eps`` (tight, and attained with positive
        probability: ``v_x >= 1``, ``v_x' <= 0``).
        """
        t = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
        ratio = self.noise_logpdf(t - 1.0) - self.noise_logpdf(t)
        return float(ratio.max() + (-ratio).max())

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """``v_x0 > 1`` and ``v_x1 < 0``: probability 1/4 under ``x0``, ``e^-eps / 4`` under ``x1``.

        On this event the density ratio of ``x0`` to ``x1`` is exactly ``e^eps``.
        """
        v = self.check_reports(reports)
        return (v[:, x0] > 1.0) & (v[:, x1] < 0.0)


@fill_doc(parameters=categorical_parameters())
class SHE(HistogramEncoding):
    """Summation with histogram encoding.

    The oracle sums the noisy vectors: ``f_hat = (1/n) sum_i v_i``, unbiased, with exact variance
    ``Var[f_hat(x)] = 2 b^2 / n = 8 / (eps^2 n)`` for every coordinate and every fixed population
    (Wang et al. 2017, section 4.2, Theorem 5).  SHE is not a pure protocol.  The tally keeps the
    exact per-report likelihood rows (dense form, one row per report) with ``stat = sum_i v_i``.

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.SHE(3, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 1, 2] * 100, rng=0))
    >>> mech.unbiased_frequencies(tally).shape
    (3,)
    """

    name = "SHE"

    def tally(self, reports: Any) -> Tally:
        """Dense tally of the exact likelihood rows; ``stat`` is the sum of the reports."""
        v = self.check_reports(reports)
        return Tally(
            np.ones(v.shape[0], dtype=np.int64),
            rows=self._likelihood_rows(v),
            stat=v.sum(axis=0),
            mechanism=self,
        )

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """``stat / n``: the mean noisy vector."""
        self.check_tally(tally)
        return tally.stat / tally.n

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """``8 / (eps^2 n)`` for every coordinate (the noise is independent of ``theta``)."""
        theta = np.asarray(theta, dtype=float)
        return np.full(theta.shape, 2.0 * self.scale**2 / n)

    def var_star(self) -> float:
        """``n * Var = 8 / eps^2``."""
        return 2.0 * self.scale**2


def the_support_probabilities(epsilon: float, threshold: float) -> tuple[float, float]:
    """``(p*, q*)`` of THE: ``Pr[1 + L > theta]`` and ``Pr[L > theta]``, ``L ~ Laplace(0, 2/eps)``.

    For ``0 <= theta <= 1``: ``p* = 1 - exp(-(1 - theta) eps / 2) / 2`` and
    ``q* = exp(-theta eps / 2) / 2``.
    """
    half = 0.5 * epsilon
    return 1.0 - 0.5 * math.exp(-(1.0 - threshold) * half), 0.5 * math.exp(-threshold * half)


def optimal_threshold(epsilon: float) -> float:
    """The threshold in ``(1/2, 1)`` minimising THE's ``Var* = q*(1-q*) / (p*-q*)^2``.

    Wang et al. (2017, section 4.2) show the optimum lies in ``(1/2, 1)``; found with
    ``scipy.optimize.minimize_scalar`` (bounded, ``xatol = 1e-10``).
    """
    epsilon = check_epsilon(epsilon)

    def var_star(theta: float) -> float:
        p, q = the_support_probabilities(epsilon, theta)
        return q * (1.0 - q) / (p - q) ** 2

    result = optimize.minimize_scalar(
        var_star, bounds=(0.5, 1.0), method="bounded", options={"xatol": 1e-10}
    )
    return float(result.x)


@fill_doc(parameters=categorical_parameters())
class THE(HistogramEncoding, PureProtocol):
    """Thresholding with histogram encoding.

    Same client as :class:`SHE`; the aggregator counts, per category ``x``, the reports with
    ``v_x > theta``.  A pure protocol with ``Support(v) = {x : v_x > theta}``,
    ``p* = Pr[1 + L > theta]``, ``q* = Pr[L > theta]`` (``L ~ Laplace(0, 2/eps)``), so the
    Wang et al. oracle and variance apply (section 4.2).  Thresholding is post-processing: the
    privacy is SHE's, ``eps``.  The tally keeps SHE's exact likelihood rows (the aggregator holds
    ``v``) with ``stat`` the thresholded support counts.

    {parameters}
    threshold : float, optional
        ``theta`` in ``[0, 1]``; by default the value in ``(1/2, 1)`` minimising ``Var*``
        (:func:`optimal_threshold`).  Thresholds outside ``[0, 1]`` are rejected: they lower
        ``p* - q*`` exponentially and are never better.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.THE(10, 1.0)
    >>> round(mech.threshold, 4)
    0.6186
    """

    name = "THE"
    PARAMETERS = (
        Parameter("threshold", float, "support threshold (default: the one minimising Var*)"),
    )

    def __init__(self, k: int, epsilon: float, threshold: float | None = None) -> None:
        super().__init__(k, epsilon)
        if threshold is None:
            self.threshold = optimal_threshold(self.epsilon)
        else:
            self.threshold = _check_threshold(threshold)
        p, q = self.p_star, self.q_star
        if not p > q:
            raise InvalidInputError(
                f"epsilon: {self.epsilon} with threshold {self.threshold} gives p* = {p!r} <= "
                f"q* = {q!r} in float64"
            )

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "threshold": self.threshold}

    @property
    def p_star(self) -> float:
        return the_support_probabilities(self.epsilon, self.threshold)[0]

    @property
    def q_star(self) -> float:
        return the_support_probabilities(self.epsilon, self.threshold)[1]

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A report supports ``x`` iff ``v_x > theta``."""
        return self.check_reports(reports)[:, x] > self.threshold

    def tally(self, reports: Any) -> Tally:
        """Dense tally of SHE's exact likelihood rows; ``stat`` the support counts ``h(x)``."""
        v = self.check_reports(reports)
        return Tally(
            np.ones(v.shape[0], dtype=np.int64),
            rows=self._likelihood_rows(v),
            stat=np.count_nonzero(v > self.threshold, axis=0).astype(float),
            mechanism=self,
        )


def _check_threshold(threshold: object) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise InvalidTypeError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    value = float(threshold)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidInputError(
            f"threshold: must lie in [0, 1] (the optimum is in (1/2, 1)), got {value}"
        )
    return value
