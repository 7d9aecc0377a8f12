"""The piecewise mechanism (PM; Wang, Xiao, Yang, Zhao, Hu, Shin, Yu, ICDE 2019)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp.mechanisms.numerical.base import WindowMechanism
from bayesldp.mechanisms.numerical.discretise import check_real_values


class Piecewise(WindowMechanism):
    """Piecewise mechanism over ``[lo, hi]``, discretised into ``k`` input bins.

    On PM's scale ``t = 2 (v - lo) / (hi - lo) - 1`` in ``[-1, 1]``, with ``C = (e^{eps/2} + 1)
    / (e^{eps/2} - 1)``, ``l(t) = (C + 1) t / 2 - (C - 1) / 2`` and ``r(t) = l(t) + C - 1``, the
    report ``y`` in ``[-C, C]`` has density ``p = (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2)`` on
    ``[l(t), r(t)]`` and ``p / e^eps`` elsewhere (Wang et al., ICDE 2019, Algorithm 2).  Reports
    are returned in the units of the values, ``lo + (y + 1)(hi - lo) / 2``, so their mean is an
    unbiased estimate of the values' mean (:meth:`unbiased_mean`).  The windows of ``lo`` and
    ``hi`` are disjoint (``[-C, -1]`` and ``[1, C]``), so the realised epsilon from the density
    is exactly ``log(p / q) = eps``.

    The discretised channel follows the authors' ``PM_EM_reduction.py`` (``randomized_bins``
    equal output bins over ``[-C, C]``, ``domain_bins`` input bins); ``output_bins`` defaults
    to ``k``.

    Parameters
    ----------
    k : int
        Number of input bins of ``[lo, hi]``.
    epsilon : float
        Privacy budget.
    lo, hi : float, default 0, 1
        The value domain.
    output_bins : int, optional
        Output bins over the report range (default ``k``).
    """

    name = "Piecewise"

    def _setup(self) -> None:
        eps, width = self.epsilon, self.width
        half = 0.5 * eps
        #: PM's C = (e^{eps/2} + 1) / (e^{eps/2} - 1)
        self.C = (1.0 + math.exp(-half)) / -math.expm1(-half)
        scale = 0.5 * width  # report units per unit of PM's scale
        # p = (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2), in logs without overflow
        log_p = half + math.log(-math.expm1(-half) / 2.0) - math.log1p(math.exp(-half))
        self._log_p = log_p - math.log(scale)
        self._log_q = log_p - eps - math.log(scale)
        # l(v) in report units: lo + (C + 1)/2 (v - lo) - (C - 1)(hi - lo)/2
        self._slope = 0.5 * (self.C + 1.0)
        self._alpha = self.lo - self._slope * self.lo - 0.5 * (self.C - 1.0) * width
        self._w = 0.5 * (self.C - 1.0) * width
        self._ylo = self.lo - 0.5 * (self.C - 1.0) * width
        self._yhi = self.hi + 0.5 * (self.C - 1.0) * width

    def _pm_scale(self, values: Any) -> np.ndarray:
        return 2.0 * (np.asarray(values, dtype=float) - self.lo) / self.width - 1.0

    def report_variance(self, values: Any) -> np.ndarray:
        """Exact ``Var[y | v]`` of one report, in squared value units (ICDE 2019, Lemma 1).

        ``((hi - lo) / 2)^2 [t^2 / (e^{eps/2} - 1) + (e^{eps/2} + 3) / (3 (e^{eps/2} - 1)^2)]``.
        """
        values = check_real_values(values, self.lo, self.hi)
        t = self._pm_scale(values)
        em1 = math.expm1(0.5 * self.epsilon)
        return (0.5 * self.width) ** 2 * (t * t / em1 + (em1 + 4.0) / (3.0 * em1 * em1))

    def unbiased_mean(self, reports: Any) -> tuple[float, float]:
        """PM's unbiased mean of the values and an unbiased estimate of its variance.

        The mean of the reports is unbiased for the mean of the values (``E[y | v] = v``).  Its
        variance ``sum_i Var[y_i | v_i] / n^2`` (:meth:`report_variance`) depends on the
        unknown ``t_i^2``, estimated without bias by ``(y_i^2 - c) (e^{eps/2} - 1) /
        e^{eps/2}`` on PM's scale, with ``c = (e^{eps/2} + 3) / (3 (e^{eps/2} - 1)^2)``.

        Returns
        -------
        (mean, variance) : (float, float)
        """
        y = self.check_reports(reports)
        n = y.size
        em1 = math.expm1(0.5 * self.epsilon)
        c = (em1 + 4.0) / (3.0 * em1 * em1)
        ys = self._pm_scale(y)
        t2_hat = (ys * ys - c) * em1 / (em1 + 1.0)
        var_each = (0.5 * self.width) ** 2 * (t2_hat / em1 + c)
        return float(y.mean()), float(var_each.sum() / n**2)
