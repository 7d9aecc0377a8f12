"""The piecewise mechanism (PM; Wang, Xiao, Yang, Zhao, Hu, Shin, Yu, ICDE 2019)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._docs import fill_doc, numerical_parameters
from bayesldp._validation import check_positive
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import Parameter
from bayesldp.mechanisms.numerical.base import HI, LO, OUTPUT_BINS, WindowMechanism
from bayesldp.mechanisms.numerical.discretise import check_real_values


def pm_slope(half_width: float, epsilon: float) -> float:
    """The slope ``k = B e^eps / (B e^eps - 1 - B)`` that makes PM with window half-width ``B``
    unbiased (``E[y | t] = t``); defined for ``B > 1 / (e^eps - 1)``."""
    b = half_width
    return b / (-b * math.expm1(-epsilon) - math.exp(-epsilon))


@fill_doc(parameters=numerical_parameters())
class Piecewise(WindowMechanism):
    """Piecewise mechanism over ``[lo, hi]``, discretised into ``k`` input bins.

    On PM's scale ``t = 2 (v - lo) / (hi - lo) - 1`` in ``[-1, 1]`` the report ``y`` lies in ``[-C,
    C]``, ``C = k_s + B``, with density ``p = e^eps q`` on the window ``[k_s t - B, k_s t + B]`` and
    ``q = 1 / (2 B e^eps + 2 k_s)`` elsewhere; the slope ``k_s = B e^eps / (B e^eps - 1 - B)``
    (:func:`pm_slope`) makes ``E[y | t] = t``.  Wang et al.'s PM (ICDE 2019, Algorithm 2) is the
    half-width ``B = 1 / (e^{eps/2} - 1)`` (the default): then ``C = (e^{eps/2} + 1) / (e^{eps/2} -
    1)``, ``k_s = (C + 1) / 2`` and ``p = (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2)``.  Other
    half-widths ``B > 1 / (e^eps - 1)`` give the same family, e.g. the ``B = (e^{eps/2} + 9) / (10
    e^{eps/2} - 10)`` in the PCKV-PM code of Ye, Wang, Zhang and Feng ("Revisiting EM-based
    Estimation for Locally Differentially Private Protocols"; :class:`~bayesldp.PCKVPM`).  Reports
    are returned in the units of the values, ``lo + (y + 1)(hi - lo) / 2``, so their mean is an
    unbiased estimate of the values' mean (:meth:`unbiased_mean`).  The windows of ``lo`` and ``hi``
    differ, so the realised epsilon from the density is exactly ``log(p / q) = eps``.

    The discretised channel follows Ye et al.'s ``PM_EM_reduction.py`` (``randomized_bins`` equal
    output bins over ``[-C, C]``, ``domain_bins`` input bins); ``output_bins`` defaults to ``k``.

    {parameters}
    output_bins : int, optional
        Output bins over the report range (default ``k``).
    half_width : float, optional
        The window's half-width ``B`` on PM's scale (default Wang et al.'s ``1 / (e^{eps/2} -
        1)``); must exceed ``1 / (e^eps - 1)``.

    Examples
    --------
    Values in ``[0, 1]``, estimated on 8 bins:

    >>> import numpy as np
    >>> import bayesldp
    >>> mech = bayesldp.Piecewise(8, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 200)
    >>> tally = mech.tally(mech.perturb(values, rng=1))
    >>> tally.n, round(mech.realised_epsilon(), 12)
    (200, 1.0)
    """

    name = "Piecewise"
    PARAMETERS = (LO, HI, OUTPUT_BINS, Parameter(
        "half_width", float, "PM's window half-width B on its [-1, 1] scale (default Wang et al.'s)"
    ))  # fmt: skip

    def __init__(
        self,
        k: int,
        epsilon: float,
        lo: float = 0.0,
        hi: float = 1.0,
        output_bins: int | None = None,
        half_width: float | None = None,
    ) -> None:
        self._half_width_arg = (
            None if half_width is None else check_positive(half_width, "half_width")
        )
        super().__init__(k, epsilon, lo, hi, output_bins)

    def _setup(self) -> None:
        eps, width = self.epsilon, self.width
        half = 0.5 * eps
        if self._half_width_arg is None:  # Wang et al.'s PM, in closed form
            self.B = 1.0 / math.expm1(half)
            self.slope_pm = 1.0 / -math.expm1(-half)
        else:
            self.B = self._half_width_arg
            if self.B * math.expm1(eps) <= 1.0:
                raise InvalidInputError(
                    f"half_width: must exceed 1 / (e^eps - 1) = {1.0 / math.expm1(eps):.6g} at "
                    f"eps = {eps}, got {self.B}"
                )
            self.slope_pm = pm_slope(self.B, eps)
        #: the report range [-C, C] on PM's scale, C = k_s + B
        self.C = self.slope_pm + self.B
        scale = 0.5 * width  # report units per unit of PM's scale
        # log q = -log(2 B e^eps + 2 k_s), in logs without overflow
        self._log_q_pm = -eps - math.log(2.0 * self.B + 2.0 * self.slope_pm * math.exp(-eps))
        self._log_p = self._log_q_pm + eps - math.log(scale)
        self._log_q = self._log_q_pm - math.log(scale)
        # l(v) in report units: lo + k_s (v - lo) + (1 - C)(hi - lo) / 2
        self._slope = self.slope_pm
        self._alpha = self.lo - self._slope * self.lo - (self.C - 1.0) * scale
        self._w = 2.0 * self.B * scale
        self._ylo = self.lo - (self.C - 1.0) * scale
        self._yhi = self.hi + (self.C - 1.0) * scale

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self._half_width_arg is not None:
            out["half_width"] = self._half_width_arg
        return out

    def _pm_scale(self, values: Any) -> np.ndarray:
        return 2.0 * (np.asarray(values, dtype=float) - self.lo) / self.width - 1.0

    def _second_moment_constant(self) -> float:
        """``c`` in ``E[y^2 | t] = k_s t^2 + c`` on PM's scale: ``2 q C^3 / 3 + B^2 / (3 k_s)``
        (for Wang et al.'s ``B``: ``(e^{eps/2} + 3) / (3 (e^{eps/2} - 1)^2)``)."""
        return 2.0 * math.exp(self._log_q_pm) * self.C**3 / 3.0 + self.B**2 / (3.0 * self.slope_pm)

    def report_variance(self, values: Any) -> np.ndarray:
        """Exact ``Var[y | v]`` of one report, in squared value units.

        ``((hi - lo) / 2)^2 [(k_s - 1) t^2 + c]`` (:meth:`_second_moment_constant`); for Wang
        et al.'s half-width ``((hi - lo) / 2)^2 [t^2 / (e^{eps/2} - 1) + (e^{eps/2} + 3) / (3
        (e^{eps/2} - 1)^2)]`` (ICDE 2019, Lemma 1).
        """
        values = check_real_values(values, self.lo, self.hi)
        t = self._pm_scale(values)
        c = self._second_moment_constant()
        return (0.5 * self.width) ** 2 * (t * t * (self.slope_pm - 1.0) + c)

    def unbiased_mean(self, reports: Any) -> tuple[float, float]:
        """PM's unbiased mean of the values and an unbiased estimate of its variance.

        The mean of the reports is unbiased for the mean of the values (``E[y | v] = v``).  Its
        variance ``sum_i Var[y_i | v_i] / n^2`` (:meth:`report_variance`) depends on the
        unknown ``t_i^2``, estimated without bias by ``(y_i^2 - c) / k_s`` on PM's scale
        (``E[y^2 | t] = k_s t^2 + c``).

        Returns
        -------
        (mean, variance) : (float, float)
        """
        y = self.check_reports(reports)
        n = y.size
        c = self._second_moment_constant()
        ys = self._pm_scale(y)
        t2_hat = (ys * ys - c) / self.slope_pm
        var_each = (0.5 * self.width) ** 2 * (t2_hat * (self.slope_pm - 1.0) + c)
        return float(y.mean()), float(var_each.sum() / n**2)
