"""EM with a smoothing step (EMS) as the seed 001 authors run it on numerical mechanisms.

EMS is EM over ordered bins with a binomial smoothing of the weights after each EM map (Li et
al., SIGMOD 2020, section 5, for the square wave; the seed 001 authors' code ``SW.py`` and
``PM_EM.py`` of yyt20080808/LDP-EM-MR for SW and PM).  It regularises the 1024-bin estimates
towards smooth densities, and its stopping rule stops far earlier than EM to the MLE.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._validation import check_int, check_positive
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally


def smooth(theta: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``S theta`` renormalised, ``S`` the row-normalised banded matrix of a symmetric kernel.

    Row ``i`` of ``S`` is the kernel centred on ``i``, cut at the ends and divided by its sum
    there (the authors' ``smoothing_matrix``: with ``[1, 2, 1]`` the first row is
    ``[2, 1] / 3``).
    """
    num = np.convolve(theta, kernel, mode="same")
    den = np.convolve(np.ones_like(theta), kernel, mode="same")
    out = num / den
    return out / out.sum()


def ems(
    tally: Tally,
    *,
    kernel: Any = (1.0, 2.0, 1.0),
    smooth_gain: float | None = None,
    tol: Any = None,
    max_iter: int = 10_000,
) -> Estimate:
    """EM with a smoothing step over ordered bins, with the LDP-EM-MR authors' stopping rule.

    From the uniform start, each step is the EM map
    ``theta_x <- theta_x sum_u c_u L[u, x] / (N L_u . theta)`` followed by the smoothing
    ``theta <- S theta / |S theta|`` (:func:`smooth`), then the log-likelihood
    ``l = sum_u c_u log(L_u . theta)`` of the smoothed weights.  Stop (as the authors'
    ``EMS`` of ``SW.py`` and ``PM_EM.py``, seed 001):

    * when the L1 change of one step is at most ``1 / N``;
    * from the third step on, when ``|l_t - l_{t-1}| < tol`` (default ``1e-3 e^eps``, the
      authors' ``loglikelihood_threshold``; ``l_{-1} = 0``);
    * after ``max_iter`` steps (their 10,000 for SW, 5,000 for PM).

    Parameters
    ----------
    tally : Tally
        Reports of a mechanism whose categories are ordered bins (e.g. ``SquareWave``).
    kernel : sequence of float
        Symmetric smoothing kernel of odd length: ``(1, 2, 1)`` is PM's ``EMS`` and the
        authors' EM-MR, ``(1, 4, 1)`` is SW's ``EMS``.
    smooth_gain : float, optional
        Smooth a step only when the previous step's log-likelihood gain exceeded this
        (SW's ``EMS``: 0.003, with the gain before the first step taken as +inf and the first
        step's gain ``l_0 - 0`` negative, so the second step is never smoothed).  ``None``
        (default): smooth every step (PM's ``EMS``).
    tol : float, optional
        Log-likelihood tolerance (default ``1e-3 e^eps`` from the tally's mechanism).
    max_iter : int

    Returns
    -------
    Estimate
        ``iterations``: steps; ``converged``: a rule other than the cap stopped it;
        ``details``: ``kernel``, ``tol``, ``smoothed`` (steps smoothed).
    """
    tally = check_tally(tally)
    kern = np.asarray(kernel, dtype=float)
    symmetric = kern.ndim == 1 and kern.size % 2 == 1 and np.allclose(kern, kern[::-1])
    if not symmetric or np.any(kern < 0):
        raise InvalidInputError(
            f"kernel: expected a symmetric non-negative sequence of odd length, got {kernel!r}"
        )
    check_int(max_iter, "max_iter")
    if tol is None:
        eps = getattr(tally.mechanism, "epsilon", None)
        if eps is None:
            raise InvalidInputError("tol: the tally's mechanism has no epsilon; give tol")
        tol = 1e-3 * math.exp(float(eps))
    tol = check_positive(tol, "tol")
    lik = Likelihood(tally)
    counts = np.asarray(lik.counts, dtype=float)
    n = counts.sum()
    offset = np.broadcast_to(np.asarray(lik.offset, dtype=float), counts.shape)
    theta = np.full(lik.k, 1.0 / lik.k)
    old_theta = np.zeros(lik.k)
    old_ll, gain = 0.0, math.inf
    steps = smoothed = 0
    converged = False
    trace = []
    while steps < max_iter:
        if np.abs(old_theta - theta).sum() <= 1.0 / n:
            converged = True
            break
        old_theta = theta
        _, lth = lik.evaluate(theta)
        w = counts / lth
        theta = theta * (lik.rmatvec(w) + offset @ w)
        theta = theta / theta.sum()
        if smooth_gain is None or gain > smooth_gain:
            theta = smooth(theta, kern)
            smoothed += 1
        _, lth = lik.evaluate(theta)
        ll = float(counts @ np.log(lth)) + lik.scale_const  # sum_u c_u log(L_u . theta)
        trace.append(ll)
        gain = ll - old_ll
        if steps > 1 and abs(gain) < tol:
            steps += 1
            converged = True
            break
        old_ll = ll
        steps += 1
    return Estimate(
        theta,
        None,
        "ems",
        on_simplex=True,
        iterations=steps,
        loglik_trace=np.asarray(trace),
        converged=converged,
        details={"kernel": kern.tolist(), "tol": float(tol), "smoothed": smoothed},
    )
