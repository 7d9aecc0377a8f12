"""The package's one EM engine: the EM map and SQUAREM in one numba-compiled loop.

The iterations run in one numba-compiled loop (SQUAREM included), so an EM map costs its
arithmetic and no per-call overhead; the MLE warm-starts from it and EM-MR runs it on reduced
mixtures (:mod:`bayesldp.estimators.em`).  Rows are the centred rows of
:class:`~bayesldp.likelihood.Likelihood` (``L[u] = a_u + C[u]``, ``C >= 0``) in one of three forms:

* dense ``C`` (dense tallies): O(U K) per map;
* support form: the 0/1 pattern of ``C`` (or of its complement, whichever is sparser) as
  compressed rows: O(nnz + K) per map;
* one-hot support form (GRR: every support row has exactly one True, ``L_u = lo + (hi - lo)
  e_{x_u}``): with ``d_u = L_u . theta = lo S + (hi - lo) theta_{x_u}`` (``S = sum theta``),
  the gradient is ``g_x = sum_u c_u L[u, x] / d_u = lo sum_u c_u / d_u + (hi - lo) h_x``,
  ``h_x = sum_{u: x_u = x} c_u / d_u``, and the map is ``theta_x <- theta_x g_x / n``
  (``theta . g = n`` exactly): O(U + K) per map, i.e. O(K) for a deduplicated GRR tally.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from bayesldp import likelihood as lk
from bayesldp.likelihood import Likelihood


# ============================================================================ compiled EM loop
@njit(cache=True)
def _em_map(rows, counts, theta, lth, w, out, pools):
    """One EM map ``out_x = theta_x g_x / (theta . g)``, ``g = L.T (c / lth)``; pools tied.

    ``rows`` is ``Likelihood.arrays``; ``pools`` is ``(pool_of, n_pools, pool_sum, pool_size)``,
    the last two scratch arrays.
    """
    offset = rows[5]
    pool_of, n_pools, pool_sum, pool_size = pools
    ws = 0.0
    for u in range(lth.shape[0]):
        wu = counts[u] / lth[u]
        w[u] = wu
        ws += wu * offset[u]
    lk.rmatvec_rows(rows, w, out)
    k = out.shape[0]
    total = 0.0
    for x in range(k):
        v = (out[x] + ws) * theta[x]
        out[x] = v
        total += v
    scale = 1.0 / total
    for x in range(k):
        out[x] *= scale
    if n_pools > 0:  # EM of the reduced mixture: each pool's members get their mean
        for j in range(n_pools):
            pool_sum[j] = 0.0
            pool_size[j] = 0.0
        for x in range(k):
            j = pool_of[x]
            if j >= 0:
                pool_sum[j] += out[x]
                pool_size[j] += 1.0
        for x in range(k):
            j = pool_of[x]
            if j >= 0:
                out[x] = pool_sum[j] / pool_size[j]


@njit(cache=True)
def _all_positive(v):
    for i in range(v.shape[0]):
        if not v[i] > 0:
            return False
    return True


@njit(cache=True)
def _squarem(rows, inv_offset, positive, counts, theta0, tol, ll_tol, max_iter, accelerate, pools):
    """The EM loop of :func:`run_em`."""
    k = theta0.shape[0]
    n_rows = counts.shape[0]
    theta = np.empty(k)
    live = np.empty(k, dtype=np.bool_)
    has_zero = False
    for x in range(k):
        theta[x] = theta0[x]
        live[x] = theta0[x] > 0
        has_zero = has_zero or not live[x]
    th1 = np.empty(k)
    th2 = np.empty(k)
    cand = np.empty(k)
    new = np.empty(k)
    diff = np.empty(k)
    curv = np.empty(k)
    r = np.empty(n_rows)
    lth = np.empty(n_rows)
    r1 = np.empty(n_rows)
    lth1 = np.empty(n_rows)
    rn = np.empty(n_rows)
    lthn = np.empty(n_rows)
    w = np.empty(n_rows)
    trace = np.empty(min(max_iter + 1, 1024))
    lk.evaluate_rows(rows, theta, r, lth)
    ll = lk.loglik_rel(r, lth, counts, inv_offset, positive)[0]
    trace[0] = ll
    n_trace = 1
    maps = cycles = fallbacks = 0
    residual = math.inf
    step_max = 1.0
    converged = False
    while maps < max_iter:
        _em_map(rows, counts, theta, lth, w, th1, pools)
        maps += 1
        dmax = -math.inf
        dmin = math.inf
        for x in range(k):
            d = th1[x] - theta[x]
            diff[x] = d
            dmax = max(dmax, d)
            dmin = min(dmin, d)
        residual = max(dmax, -dmin)
        lk.evaluate_rows(rows, th1, r1, lth1)
        if n_trace == trace.shape[0]:
            grown = np.empty(min(2 * n_trace, max_iter + 1))
            for i in range(n_trace):
                grown[i] = trace[i]
            trace = grown
        if residual < tol or not accelerate or maps >= max_iter:
            theta, th1 = th1, theta
            r, r1 = r1, r
            lth, lth1 = lth1, lth
            ll_before = ll
            ll = lk.loglik_rel(r, lth, counts, inv_offset, positive)[0]
            trace[n_trace] = ll
            n_trace += 1
            if residual < tol or (maps >= 2 and ll - ll_before < ll_tol):
                converged = True
                break
            continue
        _em_map(rows, counts, th1, lth1, w, th2, pools)
        maps += 1
        cycles += 1
        norm_r2 = 0.0
        norm_v2 = 0.0
        for x in range(k):
            v = th2[x] - th1[x]
            v -= diff[x]
            curv[x] = v
            norm_v2 += v * v
            norm_r2 += diff[x] * diff[x]
        alpha = -1.0
        if norm_v2 > 0:
            alpha = max(min(-math.sqrt(norm_r2 / norm_v2), -1.0), -step_max)
        used = alpha
        extrapolated = False
        if alpha < -1.0 and maps < max_iter:
            found = False
            for _ in range(30):
                positive_step = True
                a2 = 2.0 * alpha
                aa = alpha * alpha
                for x in range(k):
                    t = theta[x] - a2 * diff[x] + aa * curv[x]
                    if has_zero and not live[x]:
                        t = 0.0
                    elif not t > 0:
                        positive_step = False
                    cand[x] = t
                if positive_step:
                    found = True
                    break
                alpha = 0.5 * (alpha - 1.0)
                if alpha > -1.0 - 1e-6:
                    break
            if found:
                s = 0.0
                for x in range(k):
                    s += cand[x]
                s = 1.0 / s
                for x in range(k):
                    cand[x] *= s
                lk.evaluate_rows(rows, cand, rn, lthn)
                if _all_positive(lthn):
                    _em_map(rows, counts, cand, lthn, w, new, pools)
                    maps += 1
                    extrapolated = True
        if extrapolated:
            lk.evaluate_rows(rows, new, rn, lthn)
        else:
            lk.evaluate_rows(rows, th2, rn, lthn)
        lln, scale_n = lk.loglik_rel(rn, lthn, counts, inv_offset, positive)
        if extrapolated and not (lln >= ll or lln >= ll - 1e-13 * scale_n):
            fallbacks += 1
            step_max = max(1.0, -used / 4.0)
            extrapolated = False
            lk.evaluate_rows(rows, th2, rn, lthn)
            lln = lk.loglik_rel(rn, lthn, counts, inv_offset, positive)[0]
        elif used <= -step_max:
            step_max *= 4.0
        if extrapolated:
            theta, new = new, theta
        else:
            theta, th2 = th2, theta
        r, rn = rn, r
        lth, lthn = lthn, lth
        ll = lln
        trace[n_trace] = ll
        n_trace += 1
    out = np.empty(n_trace)
    for i in range(n_trace):
        out[i] = trace[i]
    return theta, maps, out, converged, residual, cycles, fallbacks


# ============================================================================ engine
@dataclass
class EMRun:
    """Outcome of :func:`run_em` (internal)."""

    theta: np.ndarray
    maps: int
    trace: np.ndarray
    converged: bool
    residual: float
    cycles: int = 0
    fallbacks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def tie_pools(theta: np.ndarray, pool_of: np.ndarray | None, n_pools: int) -> np.ndarray:
    """Replace each pool's members by their mean (EM for the reduced mixture, see em_mr)."""
    if pool_of is None or n_pools == 0:
        return theta
    members = pool_of >= 0
    sums = np.bincount(pool_of[members], weights=theta[members], minlength=n_pools)
    sizes = np.bincount(pool_of[members], minlength=n_pools)
    out = theta.copy()
    out[members] = (sums / sizes)[pool_of[members]]
    return out


def em_map(lik: Likelihood, theta: np.ndarray) -> np.ndarray:
    """One EM map ``theta_x g_x / (theta . g)`` (compiled; for tests and diagnostics)."""
    theta = np.ascontiguousarray(theta, dtype=float)
    _, lth = lik.evaluate(theta)
    out = np.empty(lik.k)
    _em_map(lik.arrays, lik.counts, theta, lth, np.empty(lth.shape[0]), out, _pools(None, 0, lik.k))
    return out


def _pools(pool_of: np.ndarray | None, n_pools: int, k: int) -> tuple:
    """The ``pools`` tuple of the compiled EM map (no pool: every category is its own)."""
    if pool_of is None:
        pool_of = np.full(k, -1, dtype=np.int64)
    size = max(n_pools, 1)
    return (np.ascontiguousarray(pool_of, dtype=np.int64), int(n_pools), np.empty(size),
            np.empty(size))  # fmt: skip


def run_em(
    lik: Likelihood,
    theta0: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    accelerate: bool,
    pool_of: np.ndarray | None = None,
    n_pools: int = 0,
    ll_tol: float = -math.inf,
) -> EMRun:
    """EM on a tally, plain or SQUAREM-accelerated, with a non-decreasing log-likelihood.

    Stops when one EM map moves no coordinate by more than ``tol``
    (``max_x |F(theta)_x - theta_x| < tol``, the criterion of the iterative Bayesian update in
    multi-freq-ldpy) and returns ``F(theta)``, or after ``max_iter`` evaluations of the map.
    The trace holds ``ell - const`` of every accepted iterate.

    SQUAREM, scheme S3 (Varadhan and Roland, Scand. J. Statist. 2008): with
    ``r = F(theta) - theta`` and ``v = F(F(theta)) - F(theta) - r``, the point
    ``theta' = theta - 2 a r + a^2 v``, ``a = clip(-|r|/|v|, -a_max, -1)``, is moved toward
    ``a = -1`` (which gives ``F(F(theta))``) until it is positive, then stabilised by one EM map.
    It is accepted if its log-likelihood is not below the current one (up to the rounding of the
    log-likelihood, 1e-13 of the magnitude of its terms), else ``F(F(theta))`` is taken.  The step
    bound ``a_max`` starts at 1, is multiplied by 4 after an accepted step that reached it and
    reset to a quarter of a rejected step (the step-length control of the SQUAREM R package,
    without which long extrapolations along slowly converging directions are rejected forever).
    Pools (``pool_of``, ``n_pools``) tie their members' weights after every map (EM-MR).

    ``ll_tol`` (plain EM only) adds the stopping rule of the LDP-EM-MR authors' code: stop
    when one map, from the second on, raises the log-likelihood ``sum_u c_u log(L_u . theta)``
    by less than ``ll_tol`` (an absolute amount, so the rule tightens relative to the
    log-likelihood's scale as n grows).
    """
    if ll_tol > -math.inf and accelerate:
        raise ValueError("ll_tol is a stopping rule of plain EM (accelerate=False)")
    theta, maps, trace, converged, residual, cycles, fallbacks = _squarem(
        lik.arrays,
        lik.inv_offset,
        lik.positive,
        lik.counts,
        np.ascontiguousarray(theta0, dtype=float),
        float(tol),
        float(ll_tol),
        int(max_iter),
        bool(accelerate),
        _pools(pool_of, n_pools, lik.k),
    )
    return EMRun(theta, int(maps), trace, bool(converged), float(residual), cycles, fallbacks)
