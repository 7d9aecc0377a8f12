"""The square wave mechanism (SW; Li, Wang, Lopuhaä-Zwakenberg, Li, Skoric, SIGMOD 2020)."""

from __future__ import annotations

import math

import numpy as np

from bayesldp._docs import fill_doc, numerical_parameters
from bayesldp.mechanisms.numerical.base import WindowMechanism


def square_wave_b(epsilon: float) -> float:
    """SW's optimal half-width on ``[0, 1]`` (Li et al. 2020, Theorem 2).

    .. math:: b = \\frac{\\varepsilon e^\\varepsilon - e^\\varepsilon + 1}
                       {2 e^\\varepsilon (e^\\varepsilon - 1 - \\varepsilon)},

    computed as ``(eps + expm1(-eps)) / (2 (expm1(eps) - eps))`` (no overflow at large eps, no
    cancellation at small eps); ``b -> 1/2`` as ``eps -> 0``.
    """
    eps = float(epsilon)
    if eps < 1e-4:  # series b = 1/2 - eps/3 + eps^2/9 + O(eps^3): the quotient loses digits
        return 0.5 - eps / 3.0 + eps * eps / 9.0
    return (eps + math.expm1(-eps)) / (2.0 * (math.expm1(eps) - eps))


@fill_doc(parameters=numerical_parameters())
class SquareWave(WindowMechanism):
    """Square wave mechanism over ``[lo, hi]``, discretised into ``k`` input bins.

    On the unit scale ``t = (v - lo) / (hi - lo)`` SW reports ``y`` in ``[-b, 1 + b]`` with
    density ``p = e^eps / (2 b e^eps + 1)`` within ``|y - t| <= b`` and ``q = 1 / (2 b e^eps + 1)``
    elsewhere (Li et al., SIGMOD 2020, section 4; ``b`` from :func:`square_wave_b`).  Reports are
    returned in the units of the values: ``lo + (hi - lo) y``, in ``[lo - b (hi - lo), hi +
    b (hi - lo)]``.  ``p / q = e^eps`` exactly, reached by ``v = lo`` against ``v = hi`` at
    ``y = lo``, so the realised epsilon equals the budget.

    The discretised channel is that of the code of Ye, Wang, Zhang and Feng ("Revisiting EM-based
    Estimation for Locally Differentially Private Protocols"; ``SW.py``: ``randomized_bins`` equal
    output bins over ``[-b, 1 + b]``, ``domain_bins`` input bins, a value uniform within its bin),
    with every integral exact; ``output_bins`` defaults to ``k`` as there (1024 x 1024 in the
    paper).

    {parameters}
    output_bins : int, optional
        Output bins over the report range (default ``k``).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.SquareWave(16, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 2000)
    >>> tally = mech.tally(mech.perturb(values, rng=1))
    >>> est = bayesldp.estimate(tally, "em")
    >>> est.frequencies.shape, round(mech.realised_epsilon(), 12)
    ((16,), 1.0)
    """

    name = "SquareWave"

    def _setup(self) -> None:
        eps, width = self.epsilon, self.width
        self.b = square_wave_b(eps)  #: half-width of the window on the unit scale
        # log(2 b e^eps + 1) without overflow: e^eps (2b + e^-eps)
        log_norm = eps + math.log(2.0 * self.b + math.exp(-eps))
        self._log_p = eps - log_norm - math.log(width)
        self._log_q = -log_norm - math.log(width)
        self._alpha = -self.b * width  # l(v) = v - b (hi - lo)
        self._slope = 1.0
        self._w = 2.0 * self.b * width
        self._ylo = self.lo - self.b * width
        self._yhi = self.hi + self.b * width

    def unit_reports(self, reports: np.ndarray) -> np.ndarray:
        """Reports on SW's own scale ``[-b, 1 + b]`` (the paper's and the authors' code's)."""
        return (self.check_reports(reports) - self.lo) / self.width
