"""Gaussian noise on a bounded numerical domain, (eps, delta)-LDP.

The "Gaussian" row of Table I of Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for
Locally Differentially Private Protocols".
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
from scipy import integrate, optimize, special

from bayesldp._docs import fill_doc, numerical_parameters
from bayesldp._validation import check_open_unit
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import Parameter
from bayesldp.mechanisms.numerical.base import HI, LO, OUTPUT_BINS, AdditiveNoiseMechanism

DELTA = Parameter("delta", float, "delta of (epsilon, delta)-LDP, in (0, 1) (default 1e-5)")


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The exact delta of the Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8).

    .. math:: \\delta(\\varepsilon) = \\Phi\\left(\\frac{\\Delta}{2\\sigma}
              - \\frac{\\varepsilon\\sigma}{\\Delta}\\right) - e^{\\varepsilon}
              \\Phi\\left(-\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\right)
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest ``sigma`` whose exact delta at ``epsilon`` is ``delta`` (Balle & Wang 2018).

    Solved by bracketing on ``log sigma`` (delta decreases in sigma) to float precision; the
    classic ``sqrt(2 ln(1.25 / delta)) / eps`` calibration is looser and valid only for
    ``eps < 1``.
    """

    def gap(log_s: float) -> float:
        return analytic_gaussian_delta(math.exp(log_s), epsilon, sensitivity) - delta

    lo = math.log(sensitivity) - 5.0
    while gap(lo) < 0:
        lo -= 5.0
    hi = math.log(sensitivity) + 5.0
    while gap(hi) > 0:
        hi += 5.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return math.exp(root)


@fill_doc(parameters=numerical_parameters())
class Gaussian(AdditiveNoiseMechanism):
    """Gaussian mechanism on ``[lo, hi]``: ``y = v + N(0, sigma^2)``, (eps, delta)-LDP.

    Calibration: the *analytic Gaussian mechanism* of Balle & Wang (ICML 2018, Theorem 8,
    Algorithm 1), with sensitivity ``hi - lo``: ``sigma`` is the smallest noise whose exact
    privacy profile meets ``delta`` at ``eps`` (:func:`analytic_gaussian_sigma`), tighter than
    the classic ``sqrt(2 ln(1.25 / delta)) (hi - lo) / eps`` and valid for every ``eps``.

    A Gaussian has no finite pure epsilon.  :meth:`realised_delta` is the hockey-stick
    divergence ``int max(0, f(y | lo) - e^eps f(y | hi)) dy`` integrated numerically from the
    density (the extreme pair is the worst for a location family), and :meth:`realised_epsilon`
    the smallest eps at which that divergence is ``delta``: equal to the budget when the
    calibration is exact.  Output bins as in :class:`AdditiveNoiseMechanism` (4 sigma of pad).

    {parameters}
    output_bins : int, optional
        Output bins, two tails included.
    delta : float, default 1e-5
        The delta of (eps, delta)-LDP, in (0, 1).

    Examples
    --------
    Values in ``[0, 1]``, estimated on 8 bins; (1, 1e-5)-LDP, so the noise's ``sigma`` is
    several times the domain's width:

    >>> import numpy as np
    >>> import bayesldp
    >>> mech = bayesldp.Gaussian(8, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 200)
    >>> tally = mech.tally(mech.perturb(values, rng=1))
    >>> tally.n, round(mech.sigma, 3)
    (200, 3.731)
    """

    name = "Gaussian"
    PARAMETERS: ClassVar[tuple[Parameter, ...]] = (LO, HI, OUTPUT_BINS, DELTA)
    PAD_SCALES = 4.0

    def __init__(
        self,
        k: int,
        epsilon: float,
        lo: float = 0.0,
        hi: float = 1.0,
        output_bins: int | None = None,
        delta: float = 1e-5,
    ) -> None:
        self.delta = check_open_unit(delta, "delta")
        super().__init__(k, epsilon, lo, hi, output_bins)

    def _setup(self) -> None:
        self.scale = analytic_gaussian_sigma(self.epsilon, self.delta, self.width)  #: sigma

    @property
    def sigma(self) -> float:
        """The noise standard deviation."""
        return self.scale

    def params(self) -> dict[str, Any]:
        return {**super().params(), "delta": self.delta}

    def log_density(self, y: Any, v: Any) -> np.ndarray:
        z = (np.asarray(y, dtype=float) - np.asarray(v, dtype=float)) / self.scale
        return -0.5 * z * z - math.log(self.scale) - 0.5 * math.log(2.0 * math.pi)

    def _tail(self, x: np.ndarray) -> np.ndarray:
        """``G1(-x) = sigma (phi(z) - z Phi(-z))``, ``z = x / sigma``, via ``erfcx``."""
        z = x / self.scale
        phi = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return (
            self.scale
            * phi
            * (1.0 - z * math.sqrt(0.5 * math.pi) * special.erfcx(z / math.sqrt(2)))
        )

    def _perturb_values(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return v + gen.normal(0.0, self.scale, v.shape[0])

    def hockey_stick(self, epsilon: float) -> float:
        """``int max(0, f(y | lo) - e^eps f(y | hi)) dy``, integrated from the density.

        The integrand is positive exactly for ``y < y* = (lo + hi)/2 - eps sigma^2 / (hi - lo)``;
        ``scipy.integrate.quad`` integrates it over ``(-inf, y*]``.
        """
        if epsilon < 0:
            raise InvalidInputError(f"epsilon: must be >= 0, got {epsilon}")
        y_star = 0.5 * (self.lo + self.hi) - epsilon * self.scale**2 / self.width

        def integrand(y: float) -> float:
            return float(
                np.exp(self.log_density(y, self.lo))
                - np.exp(epsilon + self.log_density(y, self.hi))
            )

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", integrate.IntegrationWarning)
                value, _ = integrate.quad(integrand, -np.inf, y_star, epsabs=0.0, epsrel=1e-12,
                                          limit=200)  # fmt: skip
        except integrate.IntegrationWarning:
            # the two densities agree to float precision (tiny epsilon: sigma >> hi - lo), so
            # quadrature of their difference is roundoff; the integral's closed form (Balle &
            # Wang 2018, Theorem 8) is the same quantity, without the cancellation
            value = analytic_gaussian_delta(self.scale, epsilon, self.width)
        return max(float(value), 0.0)

    def realised_delta(self) -> float:
        """The delta at the budget's epsilon, from the density (:meth:`hockey_stick`)."""
        return self.hockey_stick(self.epsilon)

    def realised_epsilon(self) -> float:
        """The smallest eps whose hockey-stick divergence (from the density) is ``delta``."""

        def gap(eps: float) -> float:
            return self.hockey_stick(eps) - self.delta

        high = 2.0 * self.epsilon + 1.0
        while gap(high) > 0:
            high *= 2.0
        return float(optimize.brentq(gap, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps))

    def channel_epsilon(self) -> float:
        """The pure epsilon of the discretised channel (finite: the tail bins are shared)."""
        return super().channel_epsilon()
