"""Log-gamma coordinates for a fixed Dirichlet prior (:class:`_GammaTarget`; compiled
density :func:`bayesldp.bayes.hmc.densities._logp_grad_gamma`).

Large K (``coordinates="auto"``: a fixed prior with K >= 200 and every ``alpha_x >= 1``):
log-gamma coordinates ``x`` in R^K, ``theta = softmax(x)`` with independent log-Gamma(alpha_x)
priors (:class:`_GammaTarget`), and a diagonal metric, O(K) per leapfrog step.  In ALR
coordinates every ``z_x`` shares the reference's ``-log theta_{K-1}``, so a weakly measured
posterior has correlations of about 1/2 between all pairs and needs the dense metric (2 d^2
per step); in log-gamma coordinates such categories are independent.  GRR, K = 1000,
n = 1e6: 10.1 s whole process (benchmarks/results/posterior_large_n.md).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from bayesldp.bayes.hmc.targets import (
    _NO_JOINT,
    _NO_NEST,
    _NO_SMOOTH,
    _NO_WALK,
    _CompiledTarget,
    _Target,
)

#: ``coordinates="auto"`` samples a fixed prior on log-gamma coordinates from this K on
_LOG_GAMMA_MIN_K = 200


class _GammaTarget(_CompiledTarget):
    """The fixed Dirichlet prior's posterior on log-gamma coordinates ``x`` in R^K.

    ``g_x = e^{x_x}`` independent Gamma(``alpha_x``, 1) and ``theta = g / sum(g)`` give
    ``theta ~ Dirichlet(alpha)`` and ``sum(g) ~ Gamma(A)`` independent of it; the likelihood
    depends on ``theta`` alone, so the ``theta`` of draws of

    .. math:: \\log p(x) = \\sum_u c_u \\log(L_u \\cdot \\theta) + \\sum_x (\\alpha_x x_x - e^{x_x})
              - \\log\\Gamma(\\alpha_x)

    are exact posterior draws (:func:`_logp_grad_gamma`).  A category the data say little about
    is an independent log-Gamma coordinate here, where in ALR coordinates every ``z_x`` shares
    the reference's ``-log theta_{K-1}`` (correlation about 1/2 between all pairs: a diagonal
    metric cannot follow it, and a dense one costs O(K^2) per leapfrog step).  Sampled with a
    diagonal metric: O(K) per step besides the likelihood.
    """

    def __init__(self, marginal: _Target, z_mode: np.ndarray) -> None:
        self.lik, self.n, self.k = marginal.lik, marginal.n, marginal.k
        self.d = self.k
        self.alpha = marginal.alpha
        self.adaptive = None
        const = self.lik.scale_const - float(gammaln(self.alpha).sum())
        self._data = (*self.lik.arrays, self.lik.counts, self.alpha, float(self.n), const,
                      None, None, *_NO_JOINT, np.empty(0), *_NO_SMOOTH, *_NO_NEST,
                      *_NO_WALK)  # fmt: skip
        theta, log_theta = marginal.theta(z_mode[None, :])
        theta, log_theta = theta[0], log_theta[0]
        self.start = log_theta + math.log(float(self.alpha.sum()))  # sum(g) at its prior mean
        _, g = self.lik.grad(theta)
        info = theta**2 * (self.lik.fisher_diag(theta) - g) + theta * (1 - theta) * (self.n - g)
        self.laplace = (1.0 / (np.exp(self.start) + np.maximum(info, 0.0)))[None, :]

    def theta(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta = softmax(x)`` and ``log theta`` for ``x`` of shape (..., K)."""
        xs = x - x.max(axis=-1, keepdims=True)
        log_theta = xs - np.log(np.exp(xs).sum(axis=-1, keepdims=True))
        return np.exp(log_theta), log_theta
