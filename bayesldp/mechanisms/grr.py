"""Generalised randomised response (GRR), also called direct encoding (DE) or k-RR."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._validation import RNGLike, as_generator, check_values
from bayesldp.mechanisms.base import FiniteChannelMechanism, PureProtocol


class GRR(FiniteChannelMechanism, PureProtocol):
    """Generalised randomised response over ``k`` categories.

    Each user reports the true value with probability ``p = e^eps / (e^eps + k - 1)`` and otherwise
    one of the other ``k - 1`` values uniformly (Kairouz et al. 2016; Wang et al., USENIX Security
    2017, section 4.1).  Channel ``P[x, y] = p`` if ``y = x`` else ``q = 1 / (e^eps + k - 1)``;
    it is exactly eps-LDP (``p / q = e^eps``).  Oracle: ``p* = p``, ``q* = q``, so
    ``n Var* = (e^eps + k - 2) / (e^eps - 1)^2``.

    Parameters
    ----------
    k : int
        Number of categories (>= 2).
    epsilon : float
        Privacy budget (> 0, finite).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.GRR(5, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 3, 4] * 100, rng=0))
    >>> tally.n
    500
    """

    name = "GRR"

    @property
    def p(self) -> float:
        """Probability of reporting the true value."""
        return math.exp(self.epsilon) / (math.exp(self.epsilon) + self.k - 1)

    @property
    def q(self) -> float:
        """Probability of reporting one given other value."""
        return 1.0 / (math.exp(self.epsilon) + self.k - 1)

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return self.q

    @property
    def channel(self) -> np.ndarray:
        p, q = self.p, self.q
        return np.full((self.k, self.k), q) + (p - q) * np.eye(self.k)

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise ``x``: keep each value w.p. ``p``, else a uniform other value."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        keep = gen.random(x.shape[0]) < self.p
        shift = gen.integers(1, self.k, size=x.shape[0])
        return np.where(keep, x, (x + shift) % self.k)

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A GRR report ``y`` supports exactly ``{y}``."""
        return np.asarray(reports) == x

    def unbiased_frequencies(self, tally):  # the pure-protocol closed form, no linear solve
        return PureProtocol.unbiased_frequencies(self, tally)

    def oracle_variance(self, theta, n):
        return PureProtocol.oracle_variance(self, theta, n)
