"""What users want from numerical data: the mean with an interval, quantiles, the density.

The numerical mechanisms (:class:`~bayesldp.SquareWave`, :class:`~bayesldp.Piecewise`,
:class:`~bayesldp.LaplaceNumeric`, :class:`~bayesldp.Gaussian`) estimate the distribution
``theta`` over ``k`` equal bins of ``[lo, hi]``.  From it:

* :func:`mean` -- the mean ``sum_i theta_i c_i`` (``c_i`` the bins' centres: exact for values
  uniform within their bins, within half a bin width otherwise), with an equal-tailed credible
  interval from posterior draws of ``theta`` (:func:`bayesldp.fit`), or a point value from an
  :class:`~bayesldp.Estimate`;
* :func:`unbiased_mean` -- the frequentist baseline straight from the real reports (PM's
  unbiased mean and its unbiased variance estimate, Wang et al. ICDE 2019; a debiased report
  mean for the others), with a normal interval;
* :func:`quantiles` -- quantiles of the binned distribution (linear within a bin), per draw;
* :func:`bin_density` -- densities per bin (``theta_i / width``); the figure with the posterior
  band is :func:`bayesldp.plotting.plot_density`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from bayesldp._validation import check_instance, check_open_unit
from bayesldp.errors import InvalidInputError


@dataclass(frozen=True)
class MeanEstimate:
    """A mean of numerical data with an interval.

    Attributes
    ----------
    mean : float
        Point estimate (posterior mean, or the frequentist estimate).
    lower, upper : float or None
        The interval's ends (None for a point estimate without one).
    sd : float or None
        Posterior standard deviation or standard error.
    prob : float
        The interval's nominal coverage.
    method : str
        How it was obtained (``"posterior"``, ``"estimate:<method>"``, ``"unbiased"``).

    Examples
    --------
    What :func:`mean` and :func:`unbiased_mean` return:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import unbiased_mean
    >>> mech = bayesldp.SquareWave(8, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 500)
    >>> est = unbiased_mean(mech, mech.perturb(values, rng=1))
    >>> est.method, round(est.mean, 3), round(est.lower, 3), round(est.upper, 3)
    ('unbiased', 0.249, 0.172, 0.325)
    """

    mean: float
    lower: float | None
    upper: float | None
    sd: float | None
    prob: float
    method: str


def _numerical(mechanism: Any) -> Any:
    from bayesldp.mechanisms.numerical.base import NumericalMechanism

    expected = "a numerical mechanism (SquareWave, Piecewise, LaplaceNumeric, Gaussian)"
    return check_instance(mechanism, NumericalMechanism, "mechanism", expected)


def theta_draws(posterior: Any, k: int | None = None) -> np.ndarray:
    """Distributions over the bins as an array of shape ``(D, k)``.

    ``posterior``: an InferenceData of :func:`bayesldp.fit` (its ``theta``, chains stacked), an
    :class:`~bayesldp.Estimate` (one row), or an array whose last axis is the bins.

    Examples
    --------
    Draws as an array (here made up; an InferenceData of :func:`bayesldp.fit` or an
    :class:`~bayesldp.Estimate` work too):

    >>> import numpy as np
    >>> from bayesldp.numerical import theta_draws
    >>> draws = np.random.default_rng(0).dirichlet(np.ones(8), size=(2, 50))
    >>> theta_draws(draws).shape
    (100, 8)
    """
    from bayesldp.estimators.result import Estimate

    if isinstance(posterior, Estimate):
        arr = np.asarray(posterior.frequencies, dtype=float)[None, :]
    elif hasattr(posterior, "posterior") and "theta" in getattr(posterior, "posterior", {}):
        theta = posterior.posterior["theta"]
        arr = np.asarray(theta.values, dtype=float).reshape(-1, theta.shape[-1])
    else:
        arr = np.asarray(posterior, dtype=float)
        if arr.ndim == 0:
            raise InvalidInputError("posterior: expected draws of theta, got a scalar")
        arr = arr.reshape(-1, arr.shape[-1])
    if k is not None and arr.shape[1] != k:
        raise InvalidInputError(
            f"posterior: has {arr.shape[1]} bins, the mechanism {k}; fitted on another tally?"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError("posterior: contains NaN or infinite values")
    return arr


def mean_draws(posterior: Any, mechanism: Any) -> np.ndarray:
    """The mean ``theta . c`` of each draw (``c``: the mechanism's bin centres), shape ``(D,)``.

    Examples
    --------
    The mean of the values each draw of the bin weights implies:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import mean_draws
    >>> mech = bayesldp.SquareWave(8, 1.0)
    >>> uniform = np.full((1, 8), 1 / 8)
    >>> mean_draws(uniform, mech).round(3)
    array([0.5])
    """
    mech = _numerical(mechanism)
    return theta_draws(posterior, mech.k) @ mech.bin_centres


def mean(posterior: Any, mechanism: Any, prob: float = 0.9) -> MeanEstimate:
    """The mean of the values with an equal-tailed ``prob`` credible interval.

    Parameters
    ----------
    posterior : InferenceData, Estimate or array (..., k)
        Posterior draws of ``theta`` (:func:`bayesldp.fit`), or an estimate (then a point
        value and no interval).
    mechanism : numerical mechanism
        The mechanism whose bins ``theta`` is over.
    prob : float, default 0.9
        Coverage of the interval (the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import mean
    >>> mech = bayesldp.SquareWave(8, 1.0)
    >>> draws = np.random.default_rng(0).dirichlet(np.full(8, 50.0), size=400)
    >>> est = mean(draws, mech)
    >>> est.method, round(est.mean, 2), est.lower < est.mean < est.upper
    ('posterior', 0.5, True)
    """
    from bayesldp.estimators.result import Estimate

    prob = check_open_unit(prob, "prob")
    draws = mean_draws(posterior, mechanism)
    if isinstance(posterior, Estimate):
        return MeanEstimate(float(draws[0]), None, None, None, prob, f"estimate:{posterior.method}")
    lower, upper = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2])
    sd = float(draws.std(ddof=1)) if draws.size > 1 else None
    return MeanEstimate(float(draws.mean()), float(lower), float(upper), sd, prob, "posterior")


def unbiased_mean(mechanism: Any, reports: Any, prob: float = 0.9) -> MeanEstimate:
    """The frequentist mean from the real reports, with a normal ``prob`` interval.

    :meth:`~bayesldp.mechanisms.numerical.base.NumericalMechanism.unbiased_mean`: for PM the
    report mean and the unbiased estimate of its variance (Wang et al. 2019); for the others the
    report mean made unbiased by ``E[y | v] = a + b v`` and the sample variance of the debiased
    reports over ``n``.

    Examples
    --------
    The unbiased estimate from the reports, with a normal interval:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import unbiased_mean
    >>> mech = bayesldp.SquareWave(8, 1.0)
    >>> values = np.random.default_rng(0).beta(2, 5, 500)
    >>> round(unbiased_mean(mech, mech.perturb(values, rng=1)).mean, 3)
    0.249
    """
    mech = _numerical(mechanism)
    prob = check_open_unit(prob, "prob")
    est, var = mech.unbiased_mean(reports)
    sd = float(np.sqrt(max(var, 0.0)))
    z = float(stats.norm.ppf((1 + prob) / 2))
    return MeanEstimate(est, est - z * sd, est + z * sd, sd, prob, "unbiased")


def quantiles(posterior: Any, mechanism: Any, q: Any) -> np.ndarray:
    """Quantiles of the binned distribution, linear within each bin, per draw.

    The CDF at the bin edges is the cumulative sum of ``theta``; between edges it rises
    linearly (values uniform within a bin), so the ``q``-quantile of a draw is the point where
    it reaches ``q``.  Returns shape ``(D, len(q))`` (``D = 1`` for an Estimate); summarise
    across draws, e.g. ``np.quantile(out, [0.05, 0.95], axis=0)`` for an interval.

    Examples
    --------
    The median of a uniform density on ``[0, 1]``:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import quantiles
    >>> mech = bayesldp.SquareWave(8, 1.0)
    >>> quantiles(np.full((1, 8), 1 / 8), mech, [0.25, 0.5]).round(3)
    array([[0.25, 0.5 ]])
    """
    mech = _numerical(mechanism)
    theta = np.clip(theta_draws(posterior, mech.k), 0.0, None)
    theta = theta / theta.sum(axis=1, keepdims=True)
    qs = np.atleast_1d(np.asarray(q, dtype=float))
    if qs.ndim != 1 or not np.all((qs >= 0) & (qs <= 1)):
        raise InvalidInputError(f"q: expected probabilities in [0, 1], got {q!r}")
    edges = mech.bin_edges
    cdf = np.concatenate([np.zeros((theta.shape[0], 1)), np.cumsum(theta, axis=1)], axis=1)
    cdf[:, -1] = 1.0
    out = np.empty((theta.shape[0], qs.size))
    for j, level in enumerate(qs):
        # the first bin whose upper CDF reaches the level (and has mass, unless level == 0)
        reach = (cdf[:, 1:] >= level) & ((theta > 0) | (level == 0))
        i = np.argmax(reach, axis=1)
        rows = np.arange(theta.shape[0])
        mass = theta[rows, i]
        frac = np.where(mass > 0, (level - cdf[rows, i]) / np.where(mass > 0, mass, 1.0), 0.0)
        out[:, j] = edges[i] + np.clip(frac, 0.0, 1.0) * (edges[i + 1] - edges[i])
    return out


def bin_density(posterior: Any, mechanism: Any) -> np.ndarray:
    """Densities per bin, ``theta_i / (bin width)``, per draw: shape ``(D, k)``.

    Examples
    --------
    Bin weights as a density on the value scale (weight over bin width):

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.numerical import bin_density
    >>> mech = bayesldp.SquareWave(8, 1.0, lo=0.0, hi=2.0)
    >>> bin_density(np.full((1, 8), 1 / 8), mech).round(3)
    array([[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
    """
    mech = _numerical(mechanism)
    return theta_draws(posterior, mech.k) / np.diff(mech.bin_edges)
