"""Post-processing of an unbiased frequency estimate (consistency methods).

Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li, "Locally Differentially Private Frequency Estimation
with Consistency", NDSS 2020, section IV, and the authors' reference code
(github.com/vvv214/LDP_Protocols, ``post-process/``).  Each method is a pure function
``(f, sd) -> frequencies`` of the unbiased estimate ``f`` (shape ``(..., K)``, categories on the
last axis, any leading batch dimensions) and of its standard deviation ``sd`` (broadcastable to
``f``; only :func:`base_cut` reads it).  None returns NaN.

The paper's *Power* method (fit a power law to the counts, then take a posterior mean under
Gaussian noise) is not implemented: it is a count-scale heuristic with ad hoc binning in the
reference code, it needs ``n`` and a prior family rather than ``(f, sd)``, and the paper finds it
useful only for power-law data; the Bayesian part of this package covers prior knowledge properly.

:func:`pretest` (the default of :func:`bayesldp.estimate`) answers the uniform distribution
unless a chi-square-calibrated test on the unbiased estimate rejects uniformity, and Norm-Sub
otherwise; it reads ``sd`` too.

Methods that can be left with no positive entry at all (``norm_mul``, ``norm_cut``,
``norm_sub``) return the uniform distribution in that case; the paper does not define them there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from bayesldp.errors import InvalidInputError, InvalidTypeError


def _check_f(f: Any) -> np.ndarray:
    arr = np.asarray(f)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"f: expected real-valued frequency estimates, got {arr.dtype}")
    arr = arr.astype(float)
    if arr.ndim == 0 or arr.shape[-1] < 1:
        raise InvalidInputError(f"f: expected shape (..., K) with K >= 1, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError("f: contains NaN or infinite values")
    return arr


def _check_sd(sd: Any, f: np.ndarray, *, required: bool = False) -> np.ndarray | None:
    if sd is None:
        if required:
            raise InvalidInputError("sd: this method needs the standard deviation of f")
        return None
    arr = np.asarray(sd, dtype=float)
    try:
        arr = np.broadcast_to(arr, f.shape)
    except ValueError:
        raise InvalidInputError(
            f"sd: shape {arr.shape} does not broadcast to the shape of f {f.shape}"
        ) from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidInputError("sd: standard deviations must be finite and >= 0")
    return arr


def _uniform_where_empty(out: np.ndarray, empty: np.ndarray) -> np.ndarray:
    if np.any(empty):
        out[empty] = 1.0 / out.shape[-1]
    return out


def base_pos(f: Any, sd: Any = None) -> np.ndarray:
    """Base-Pos: replace negative estimates by 0, ``f'_x = max(f_x, 0)`` (does not sum to 1)."""
    return np.maximum(_check_f(f), 0.0)


def norm(f: Any, sd: Any = None) -> np.ndarray:
    """Norm: add the same amount to every estimate, ``f'_x = f_x + (1 - sum f) / K``.

    Sums to 1; may stay negative.  The least-squares projection onto the hyperplane sum = 1.
    """
    arr = _check_f(f)
    return arr + (1.0 - arr.sum(axis=-1, keepdims=True)) / arr.shape[-1]


def norm_mul(f: Any, sd: Any = None) -> np.ndarray:
    """Norm-Mul: clip at 0 and rescale, ``f'_x = max(f_x, 0) / sum_y max(f_y, 0)``."""
    pos = np.maximum(_check_f(f), 0.0)
    total = pos.sum(axis=-1, keepdims=True)
    empty = total[..., 0] <= 0
    out = pos / np.where(total > 0, total, 1.0)
    return _uniform_where_empty(out, empty)


def norm_cut(f: Any, sd: Any = None) -> np.ndarray:
    """Norm-Cut: keep the largest estimates until their running sum exceeds 1, zero the rest.

    Sort the estimates in decreasing order and keep the shortest prefix whose sum exceeds 1
    (the entry that crosses 1 is kept), then rescale the kept entries to sum 1, as the authors'
    reference code does.  If the positive estimates sum to at most 1, every positive estimate is
    kept (negative ones are zeroed) before rescaling; the reference code would keep the negative
    ones in that corner case.
    """
    arr = _check_f(f)
    shape = arr.shape
    flat = arr.reshape(-1, shape[-1])
    order = np.argsort(-flat, axis=-1, kind="stable")
    ranked = np.take_along_axis(flat, order, axis=-1)
    positive = ranked > 0
    csum = np.cumsum(np.where(positive, ranked, 0.0), axis=-1)
    n_pos = positive.sum(axis=-1)
    crosses = (csum > 1.0) & positive
    first_cross = np.where(crosses.any(axis=-1), np.argmax(crosses, axis=-1) + 1, n_pos)
    keep_ranked = np.arange(shape[-1]) < first_cross[:, None]
    kept = np.where(keep_ranked, ranked, 0.0)
    total = kept.sum(axis=-1, keepdims=True)
    out_ranked = kept / np.where(total > 0, total, 1.0)
    out = np.empty_like(flat)
    np.put_along_axis(out, order, out_ranked, axis=-1)
    out = _uniform_where_empty(out, n_pos == 0)
    return out.reshape(shape)


def projection(f: Any, sd: Any = None) -> np.ndarray:
    """Euclidean projection onto the probability simplex, ``argmin_{p in simplex} ||p - f||_2``.

    Sort-based, O(K log K) (Held, Wolfe, Crowder 1974; Duchi et al. 2008): with ``u`` the
    estimates sorted in decreasing order, ``rho = max{j : u_j - (sum_{i<=j} u_i - 1)/j > 0}``,
    ``tau = (sum_{i<=rho} u_i - 1)/rho`` and ``p_x = max(f_x - tau, 0)``.  This is the
    constrained-least-squares (CLS) method of Wang et al.
    """
    arr = _check_f(f)
    return _project(arr)


def _project(arr: np.ndarray) -> np.ndarray:
    k = arr.shape[-1]
    ranked = -np.sort(-arr, axis=-1)
    csum = np.cumsum(ranked, axis=-1) - 1.0
    ind = np.arange(1, k + 1)
    cond = ranked - csum / ind > 0
    rho = k - 1 - np.argmax(cond[..., ::-1], axis=-1)
    tau = np.take_along_axis(csum, rho[..., None], axis=-1) / (rho[..., None] + 1.0)
    return np.maximum(arr - tau, 0.0)


def norm_sub(f: Any, sd: Any = None) -> np.ndarray:
    """Norm-Sub: zero the negatives and shift the positives equally until consistent.

    The paper's iteration: repeat {set negative estimates to 0; add ``(1 - sum)/#positive`` to
    every positive estimate} until none is negative and the sum is 1.  Computed in closed form,
    O(K log K): with ``S = sum_x max(f_x, 0)``, if ``S < 1`` the first shift is upward and ends
    the iteration, so ``f'_x = f_x + (1 - S)/#{f > 0}`` on the positive entries; if ``S >= 1``
    every shift is downward and the result is the Euclidean projection of ``max(f, 0)`` onto the
    simplex (entries once zeroed stay below every later threshold).
    """
    arr = _check_f(f)
    pos = np.maximum(arr, 0.0)
    positive = arr > 0
    total = pos.sum(axis=-1, keepdims=True)
    count = positive.sum(axis=-1, keepdims=True)
    up = np.where(positive, arr + (1.0 - total) / np.maximum(count, 1), 0.0)
    down = _project(pos)
    out = np.where(total < 1.0, up, down)
    return _uniform_where_empty(out, count[..., 0] == 0)


def base_cut(f: Any, sd: Any, alpha: float = 0.05) -> np.ndarray:
    """Base-Cut: zero every estimate below the significance threshold.

    ``f'_x = f_x`` if ``f_x >= Phi^{-1}(1 - alpha/K) * sd_x`` else 0 (a one-sided test of
    ``f_x = 0`` with a Bonferroni correction over the K categories); ``sd`` should be the
    standard deviation of ``f_x`` when ``f_x = 0`` (``sqrt(Var*/n)`` for pure protocols).
    Does not sum to 1.
    """
    arr = _check_f(f)
    sd_arr = _check_sd(sd, arr, required=True)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise InvalidInputError(f"alpha: must be a number in (0, 1), got {alpha!r}")
    threshold = stats.norm.ppf(1.0 - alpha / arr.shape[-1]) * sd_arr
    return np.where(arr >= threshold, arr, 0.0)


def pretest(f: Any, sd: Any, alpha: float = 1e-4) -> np.ndarray:
    """The uniform answer unless the reports reject uniformity, else Norm-Sub.

    A preliminary-test estimator (Bancroft, "On Biases in Estimation Due to the Use of
    Preliminary Tests of Significance", Annals of Mathematical Statistics, 1944): with ``u =
    1/K`` and the statistic

    .. math::

        T = \\frac{\\lVert f - u \\rVert_2^2}{\\sum_x \\mathrm{sd}_x^2},

    the squared distance of the unbiased estimate from uniform against its expectation
    ``tr Cov(f)`` when the population is uniform (the ratio James and Stein, "Estimation with
    Quadratic Loss", 1961, shrink by), answer ``u`` when ``(K - 1) T < chi2_{K-1}(1 - alpha)``,
    the ``1 - alpha`` quantile of the chi-square law with ``K - 1`` degrees of freedom (the
    law of ``(K - 1) T`` for a uniform population when ``f`` is Gaussian with covariance
    proportional to the identity on the plane ``sum f = 1``), and ``norm_sub(f)`` otherwise.
    ``sd`` should be the standard deviation of ``f``: :func:`bayesldp.estimate` passes the
    oracle's plug-in standard deviations (Wang et al., USENIX Security 2017), the mechanism's
    exact variance at ``clip(f, 0, 1)``.  Where ``sum sd^2`` is 0 (no noise left in float64),
    ``T`` is infinite unless ``f = u``; for ``K = 1`` the answer is ``[1]``.

    Why: Norm-Sub spreads the noise of a weak signal over the categories it keeps and can be
    worse than answering uniform; the test answers uniform exactly where the reports carry no
    detectable departure from it.  ``alpha = 1e-4`` was chosen from ``{1e-2, 1e-3, 1e-4,
    1e-6}`` on a benchmark grid of six mechanisms, eps 0.25-4, K 8-256 and n 10^3-10^5
    (``benchmarks/estimator_default.py``; see the estimators benchmark page), on repeats apart
    from those the committed table reports.  It does not make the answer the better of
    clip-and-renormalise and the uniform answer in every cell: between no signal and a clear
    one either may still win (``benchmarks/results/estimator_default.md``).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.estimators.postprocess import pretest
    >>> sd = np.full(4, 0.05)  # trace 0.01; 3 T is compared with chi2_3(1 - 1e-4) = 21.1
    >>> pretest(np.array([0.5, 0.3, 0.2, 0.0]), sd)  # T = 0.13 / 0.01: Norm-Sub
    array([0.5, 0.3, 0.2, 0. ])
    >>> pretest(np.array([0.3, 0.25, 0.25, 0.2]), sd)  # T = 0.005 / 0.01: uniform
    array([0.25, 0.25, 0.25, 0.25])
    """
    arr = _check_f(f)
    sd_arr = _check_sd(sd, arr, required=True)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise InvalidInputError(f"alpha: must be a number in (0, 1), got {alpha!r}")
    k = arr.shape[-1]
    ns = norm_sub(arr)
    if k == 1:
        return ns
    statistic, threshold = pretest_decision(arr, sd_arr, alpha)
    return np.where((statistic < threshold)[..., None], 1.0 / k, ns)


def pretest_decision(f: np.ndarray, sd: np.ndarray, alpha: float = 1e-4) -> tuple[Any, float]:
    """:func:`pretest`'s ``(K - 1) T`` (per row of ``f``) and the threshold
    ``chi2_{K-1}(1 - alpha)`` it is compared with (uniform below it); ``K >= 2``."""
    k = f.shape[-1]
    return (k - 1) * _statistic(f, sd), float(stats.chi2.ppf(1.0 - alpha, k - 1))


def pretest_statistic(f: Any, sd: Any) -> np.ndarray:
    """The statistic ``T = ||f - 1/K||^2 / sum_x sd_x^2`` of :func:`pretest`, per row of ``f``.

    Infinite where ``sum sd^2 = 0`` and ``f != 1/K``, 0 where both vanish.
    """
    arr = _check_f(f)
    return _statistic(arr, _check_sd(sd, arr, required=True))


def _statistic(arr: np.ndarray, sd: np.ndarray) -> np.ndarray:
    dist = np.sum((arr - 1.0 / arr.shape[-1]) ** 2, axis=-1)
    trace = np.sum(sd**2, axis=-1)
    with np.errstate(over="ignore"):  # a vanishing trace: T is infinite, as it should be
        ratio = dist / np.where(trace > 0, trace, 1.0)
    return np.where(trace > 0, ratio, np.where(dist > 0, np.inf, 0.0))


#: Post-processing methods by name, each ``(f, sd) -> frequencies``.
POSTPROCESSORS = {
    "base_pos": base_pos,
    "norm": norm,
    "norm_mul": norm_mul,
    "norm_cut": norm_cut,
    "norm_sub": norm_sub,
    "base_cut": base_cut,
    "projection": projection,
    "pretest": pretest,
}
