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
from numba import njit

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


_MAX_EDGES_PER_ROW = 8  # band rows: at most this many entries off the band's level per row
# The discretised channels carry quadrature rounding of ~1e-14 (rows scaled to a maximum of 1);
# entries within this of the band's level (or of 0 off the band) are read as that level.
_LEVEL_TOL = 1e-12


@njit(cache=True)
def _band_matvec(lo, hi, level, eptr, eidx, eval_, offset, theta, prefix, out):
    """``out = L theta`` for band rows: ``a_u sum(theta) + v_u sum_{lo_u <= x < hi_u} theta_x``
    plus the corrections ``sum_j e_j theta_{x_j}`` of row ``u`` (prefix sums, O(U + K + E))."""
    k = theta.shape[0]
    prefix[0] = 0.0
    for x in range(k):
        prefix[x + 1] = prefix[x] + theta[x]
    total = prefix[k]
    for u in range(out.shape[0]):
        s = level[u] * (prefix[hi[u]] - prefix[lo[u]])
        for j in range(eptr[u], eptr[u + 1]):
            s += eval_[j] * theta[eidx[j]]
        out[u] = offset[u] * total + s


@njit(cache=True)
def _band_rmatvec(lo, hi, level, eptr, eidx, eval_, offset, w, diff, out):
    """``out = L^T w`` for band rows (a difference array, O(U + K + E))."""
    k = out.shape[0]
    for x in range(k + 1):
        diff[x] = 0.0
    base = 0.0
    for u in range(w.shape[0]):
        wv = w[u] * level[u]
        diff[lo[u]] += wv
        diff[hi[u]] -= wv
        base += offset[u] * w[u]
    run = 0.0
    for x in range(k):
        run += diff[x]
        out[x] = base + run
    for u in range(w.shape[0]):
        for j in range(eptr[u], eptr[u + 1]):
            out[eidx[j]] += eval_[j] * w[u]


def _band_form(dense: np.ndarray) -> tuple | None:
    """The centred rows ``C`` as (lo, hi, level, eptr, eidx, corrections), or None.

    Row ``u`` is read as ``level_u`` on ``[lo_u, hi_u)`` (its first to last entry above
    ``_LEVEL_TOL``, the level its maximum) plus the entries more than ``_LEVEL_TOL`` from that
    level (partial-bin edges), stored as ``C[u, x] - level_u``; entries within ``_LEVEL_TOL``
    of the level, or of 0 off the band, are the channel's quadrature rounding (rows are scaled
    to a maximum of 1) and are read as the level or 0.  None when some row has more than
    ``_MAX_EDGES_PER_ROW`` corrections (Laplace, Gaussian, finite channels).
    """
    n_rows = dense.shape[0]
    lo = np.zeros(n_rows, dtype=np.int64)
    hi = np.zeros(n_rows, dtype=np.int64)
    level = np.zeros(n_rows)
    eptr = np.zeros(n_rows + 1, dtype=np.int64)
    idx: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for u in range(n_rows):  # once per tally, U rows
        row = dense[u]
        nz = np.flatnonzero(row > _LEVEL_TOL)
        if nz.size == 0:
            eptr[u + 1] = eptr[u]
            continue
        a, b = int(nz[0]), int(nz[-1]) + 1
        seg = row[a:b]
        v = float(seg.max())
        off = np.flatnonzero(np.abs(seg - v) > _LEVEL_TOL)
        if off.size > _MAX_EDGES_PER_ROW:
            return None
        lo[u], hi[u], level[u] = a, b, v
        idx.append(off + a)
        vals.append(seg[off] - v)
        eptr[u + 1] = eptr[u] + off.size
    eidx = np.concatenate(idx).astype(np.int64) if idx else np.zeros(0, dtype=np.int64)
    evals = np.concatenate(vals) if vals else np.zeros(0)
    return lo, hi, level, eptr, eidx, evals


def centred_products(lik: Likelihood):
    """``(theta -> L theta, w -> L^T w)`` for the EM step, exact and as cheap as the rows allow.

    A discretised SW or PM channel is its low level ``q`` everywhere plus ``p - q`` on a band
    around the input bin (with partial-bin edges), so each centred row ``C_u = L_u - a_u`` of
    :class:`~bayesldp.likelihood.Likelihood` is one level ``v_u`` on a contiguous range plus a
    few edge entries.  Those rows are read once from the dense rows (:func:`_band_form`, the
    same numbers) and the products become

    ``L theta = a sum(theta) + v (P[hi] - P[lo]) + edges``, ``P`` the prefix sums of theta,
    ``L^T w = a . w + cumsum(difference array of v w) + edges``,

    O(U + K) per product instead of O(U K); they differ from the dense product only in
    rounding.  Other rows (Laplace, Gaussian, finite channels) keep the dense form.
    """
    offset = np.ascontiguousarray(
        np.broadcast_to(np.asarray(lik.offset, dtype=float), lik.counts.shape)
    )
    band = _band_form(lik.dense) if lik.dense is not None else None
    if band is not None:
        prefix = np.empty(lik.k + 1)
        lth = np.empty(lik.n_rows)
        g = np.empty(lik.k)

        def lmat(theta: np.ndarray) -> np.ndarray:
            _band_matvec(*band, offset, np.ascontiguousarray(theta), prefix, lth)
            return lth.copy()

        def lrmat(w: np.ndarray) -> np.ndarray:
            _band_rmatvec(*band, offset, np.ascontiguousarray(w), prefix, g)
            return g.copy()

        return lmat, lrmat

    def lmat_dense(theta: np.ndarray) -> np.ndarray:
        return lik.evaluate(theta)[1]

    def lrmat_dense(w: np.ndarray) -> np.ndarray:
        return lik.rmatvec(w) + offset @ w

    return lmat_dense, lrmat_dense


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
    lmat, lrmat = centred_products(lik)
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
        lth = lmat(theta)
        w = counts / lth
        theta = theta * lrmat(w)
        theta = theta / theta.sum()
        if smooth_gain is None or gain > smooth_gain:
            theta = smooth(theta, kern)
            smoothed += 1
        lth = lmat(theta)
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
