"""Generalised randomised response (GRR), also called direct encoding (DE) or k-RR."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc
from bayesldp._validation import RNGLike, as_generator, check_counts, check_memory, check_values
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import (
    DirectSupportProtocol,
    FiniteChannelMechanism,
    PureProtocol,
    built_once,
)
from bayesldp.tally import Tally


@fill_doc(parameters=categorical_parameters())
class GRR(FiniteChannelMechanism, DirectSupportProtocol):
    """Generalised randomised response over ``k`` categories.

    Each user reports the true value with probability ``p = e^eps / (e^eps + k - 1)`` and otherwise
    one of the other ``k - 1`` values uniformly (Kairouz et al. 2016; Wang et al., USENIX Security
    2017, section 4.1).  Channel ``P[x, y] = p`` if ``y = x`` else ``q = 1 / (e^eps + k - 1)``;
    it is exactly eps-LDP (``p / q = e^eps``).  Oracle: ``p* = p``, ``q* = q``, so
    ``n Var* = (e^eps + k - 2) / (e^eps - 1)^2``.

    {parameters}

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

    @built_once
    def channel(self) -> np.ndarray:
        """``P = q 1 + (p - q) I`` (built once, read-only)."""
        what = f"GRR({self.k}).channel"
        check_memory(16.0 * self.k**2, what, "GRR's tallies use the one-hot support form")
        return np.full((self.k, self.k), self.q) + (self.p - self.q) * np.eye(self.k)

    @property
    def n_outputs(self) -> int:
        return self.k

    def tally_from_report_counts(self, report_counts: Any) -> Tally:
        """Support-form tally: one one-hot row per observed report, levels ``(q, p)``.

        The same likelihood as the dense channel columns, without a K x K float matrix.
        """
        report_counts = check_counts(report_counts, "report_counts", length=self.k)
        if report_counts.sum() == 0:
            raise InvalidInputError("report_counts: all zero; at least one report is needed")
        seen = np.flatnonzero(report_counts)
        support = np.zeros((seen.size, self.k), dtype=bool)
        support[np.arange(seen.size), seen] = True
        return Tally(
            report_counts[seen],
            support=support,
            levels=(self.q, self.p),
            stat=report_counts.astype(float),
            mechanism=self,
            dedupe=False,  # one row per distinct report value already
        )

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise ``x``: keep each value w.p. ``p``, else a uniform other value."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        keep = gen.random(x.shape[0]) < self.p
        other = gen.integers(0, self.k - 1, size=x.shape[0])
        other += other >= x  # uniform over the k - 1 values other than x
        return np.where(keep, x, other)

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A GRR report ``y`` supports exactly ``{y}``."""
        return np.asarray(reports) == x

    def unbiased_frequencies(self, tally):  # the pure-protocol closed form, no linear solve
        return PureProtocol.unbiased_frequencies(self, tally)

    def oracle_variance(self, theta, n):
        return PureProtocol.oracle_variance(self, theta, n)
