"""Laplace noise on a bounded numerical domain (the "Laplace" row of Ye et al.'s Table I).

Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally Differentially Private
Protocols", Table I.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._docs import fill_doc, numerical_parameters
from bayesldp.mechanisms.numerical.base import AdditiveNoiseMechanism


@fill_doc(parameters=numerical_parameters())
class LaplaceNumeric(AdditiveNoiseMechanism):
    """Laplace mechanism on ``[lo, hi]``: ``y = v + Lap(lambda)``, ``lambda = (hi - lo) / eps``.

    The sensitivity of ``v`` is the width of the domain, so ``f(y | v) = exp(-|y - v| /
    lambda) / (2 lambda)`` is eps-LDP: ``log f(y | v) / f(y | v') = (|y - v'| - |y - v|) /
    lambda <= |v - v'| / lambda <= eps``, reached by ``v = lo``, ``v' = hi``, ``y <= lo``
    (Dwork et al. 2006; the "Laplace" row of Ye et al.: binning, the pdf of the Laplace
    distribution, reports unbounded and not truncated).  The discretised channel integrates the
    density exactly over each output bin for a value uniform within each input bin, with
    ``G1(x) = x + (lambda / 2) e^{-|x| / lambda}`` for ``x >= 0`` and ``(lambda / 2) e^{x /
    lambda}`` below.

    {parameters}
    output_bins : int, optional
        Output bins, two tails included (default: see
        :class:`AdditiveNoiseMechanism`).

    Examples
    --------
    Values in ``[0, 1]``, estimated on 8 bins:

    >>> import numpy as np
    >>> import bayesldp
    >>> mech = bayesldp.LaplaceNumeric(8, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 200)
    >>> tally = mech.tally(mech.perturb(values, rng=1))
    >>> tally.n, round(mech.realised_epsilon(), 12)
    (200, 1.0)
    """

    name = "LaplaceNumeric"

    def _setup(self) -> None:
        self.scale = self.width / self.epsilon  #: the Laplace scale lambda

    def log_density(self, y: Any, v: Any) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        return -np.abs(y - np.asarray(v, dtype=float)) / self.scale - math.log(2.0 * self.scale)

    def _tail(self, x: np.ndarray) -> np.ndarray:
        return 0.5 * self.scale * np.exp(-x / self.scale)

    def _perturb_values(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return v + gen.laplace(0.0, self.scale, v.shape[0])
