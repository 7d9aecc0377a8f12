"""EM (iterative Bayesian update) and EM with mixture reduction on tallies.

EM for the LDP mixture model (seed 001, Ye, Wang, Zhang, Feng, "Revisiting EM-based locally
differentially private protocols"; Agrawal and Aggarwal 2001; ElSalamouny and Palamidessi 2020):
E-step ``gamma_{ux} = theta_x L[u, x] / (L_u . theta)``, M-step
``theta_x = (1/n) sum_u c_u gamma_{ux}``.  On a tally the E-step is per distinct row, so one
iteration costs O(U K) (O(nnz) in support form), not O(n K).  Every iteration increases the
log-likelihood ``sum_u c_u log(L_u . theta)``; its fixed points with full support are the MLE.

The iterations run in one numba-compiled loop (SQUAREM included), so an EM map costs its
arithmetic and no per-call overhead.  Rows are centred as in :class:`~bayesldp.estimators.mle.
RowLikelihood` (``L[u] = a_u + C[u]``, ``C >= 0``) and stored in one of three forms:

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
from typing import Any

import numpy as np
from numba import njit

from bayesldp.errors import InvalidInputError
from bayesldp.estimators.mle import (
    EMRun,
    _check_positive,
    _tie,
    single_thread_blas,
)
from bayesldp.estimators.oracle import check_tally
from bayesldp.estimators.result import Estimate
from bayesldp.tally import Tally


# ============================================================================ compiled kernels
# The row form is told apart by which of ``dense`` (dense C), ``indices`` (support form) and
# ``indptr`` (compressed rows; None for one-hot rows) are None: numba prunes a branch on
# ``x is not None`` / ``x is None`` when ``x`` is None at compile time, so each form gets its
# own compiled specialisation, compiled (or loaded from the cache) on first use.
@njit(cache=True)
def _matvec(dense, indptr, indices, delta, complement, theta, out):
    """``out = C @ theta`` (U,)."""
    n_rows = out.shape[0]
    k = theta.shape[0]
    if dense is not None:
        for u in range(n_rows):
            s = 0.0
            for x in range(k):
                s += dense[u, x] * theta[x]
            out[u] = s
    if indices is not None:
        total = 0.0
        if complement:
            for x in range(k):
                total += theta[x]
        if indptr is None:  # one-hot rows: C[u] = delta e_{indices[u]}
            for u in range(n_rows):
                s = theta[indices[u]]
                out[u] = delta * (total - s) if complement else delta * s
        else:
            for u in range(n_rows):
                s = 0.0
                for j in range(indptr[u], indptr[u + 1]):
                    s += theta[indices[j]]
                out[u] = delta * (total - s) if complement else delta * s


@njit(cache=True)
def _rmatvec(dense, indptr, indices, delta, complement, w, out):
    """``out = C.T @ w`` (K,)."""
    n_rows = w.shape[0]
    k = out.shape[0]
    for x in range(k):
        out[x] = 0.0
    if dense is not None:
        for u in range(n_rows):
            wu = w[u]
            for x in range(k):
                out[x] += wu * dense[u, x]
    if indices is not None:
        total = 0.0
        if indptr is None:
            for u in range(n_rows):
                total += w[u]
                out[indices[u]] += w[u]
        else:
            for u in range(n_rows):
                wu = w[u]
                total += wu
                for j in range(indptr[u], indptr[u + 1]):
                    out[indices[j]] += wu
        for x in range(k):
            out[x] = delta * (total - out[x]) if complement else delta * out[x]


@njit(cache=True)
def _evaluate(dense, indptr, indices, delta, complement, offset, theta, r, lth):
    """``r = C theta`` and ``lth = L theta = a sum(theta) + r``."""
    _matvec(dense, indptr, indices, delta, complement, theta, r)
    s = 0.0
    for x in range(theta.shape[0]):
        s += theta[x]
    for u in range(r.shape[0]):
        lth[u] = offset[u] * s + r[u]


@njit(cache=True)
def _em_map(
    dense,
    indptr,
    indices,
    delta,
    complement,
    offset,
    counts,
    theta,
    lth,
    w,
    out,
    pool_of,
    n_pools,
    pool_sum,
    pool_size,
):
    """One EM map ``out_x = theta_x g_x / (theta . g)``, ``g = L.T (c / lth)``; pools tied."""
    ws = 0.0
    for u in range(lth.shape[0]):
        wu = counts[u] / lth[u]
        w[u] = wu
        ws += wu * offset[u]
    _rmatvec(dense, indptr, indices, delta, complement, w, out)
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
def _row_pattern(support):
    """Number of True per row of a boolean matrix and the column of each row's first True."""
    n_rows, k = support.shape
    nnz = np.empty(n_rows, dtype=np.int64)
    first = np.empty(n_rows, dtype=np.int32)
    for u in range(n_rows):
        first[u] = -1
        count = 0
        for x in range(k):
            if support[u, x]:
                if count == 0:
                    first[u] = x
                count += 1
        nnz[u] = count
    return nnz, first


@njit(cache=True)
def _loglik_rel(r, lth, counts, inv_offset, positive):
    """``(ell(theta) - const, sum_u c_u |t_u|)`` in one pass over the rows.

    ``t_u = log1p(r_u / a_u)`` (``log r_u`` when ``a_u = 0``); the first value is ``-inf`` if an
    observed report gets probability 0; the second is the magnitude that sets the rounding
    error of the first (``RowLikelihood.loglik_scale``).
    """
    total = 0.0
    scale = 0.0
    zero = False
    for u in range(r.shape[0]):
        if lth[u] <= 0.0:
            zero = True
        t = math.log1p(r[u] * inv_offset[u]) if positive[u] else math.log(r[u])
        total += counts[u] * t
        scale += counts[u] * abs(t)
    return (-math.inf if zero else total), scale


@njit(cache=True)
def _all_positive(v):
    for i in range(v.shape[0]):
        if not v[i] > 0:
            return False
    return True


@njit(cache=True)
def _squarem(
    dense,
    indptr,
    indices,
    delta,
    complement,
    offset,
    inv_offset,
    positive,
    counts,
    theta0,
    tol,
    max_iter,
    accelerate,
    pool_of,
    n_pools,
):
    """The EM loop of :func:`run_em_compiled` (same steps as ``mle.run_em``)."""
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
    pool_sum = np.empty(max(n_pools, 1))
    pool_size = np.empty(max(n_pools, 1))
    trace = np.empty(min(max_iter + 1, 1024))
    _evaluate(dense, indptr, indices, delta, complement, offset, theta, r, lth)
    ll = _loglik_rel(r, lth, counts, inv_offset, positive)[0]
    trace[0] = ll
    n_trace = 1
    maps = cycles = fallbacks = 0
    residual = math.inf
    step_max = 1.0
    converged = False
    while maps < max_iter:
        _em_map(
            dense,
            indptr,
            indices,
            delta,
            complement,
            offset,
            counts,
            theta,
            lth,
            w,
            th1,
            pool_of,
            n_pools,
            pool_sum,
            pool_size,
        )
        maps += 1
        dmax = -math.inf
        dmin = math.inf
        for x in range(k):
            d = th1[x] - theta[x]
            diff[x] = d
            dmax = max(dmax, d)
            dmin = min(dmin, d)
        residual = max(dmax, -dmin)
        _evaluate(dense, indptr, indices, delta, complement, offset, th1, r1, lth1)
        if n_trace == trace.shape[0]:
            grown = np.empty(min(2 * n_trace, max_iter + 1))
            for i in range(n_trace):
                grown[i] = trace[i]
            trace = grown
        if residual < tol or not accelerate or maps >= max_iter:
            theta, th1 = th1, theta
            r, r1 = r1, r
            lth, lth1 = lth1, lth
            ll = _loglik_rel(r, lth, counts, inv_offset, positive)[0]
            trace[n_trace] = ll
            n_trace += 1
            if residual < tol:
                converged = True
                break
            continue
        _em_map(
            dense,
            indptr,
            indices,
            delta,
            complement,
            offset,
            counts,
            th1,
            lth1,
            w,
            th2,
            pool_of,
            n_pools,
            pool_sum,
            pool_size,
        )
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
                _evaluate(dense, indptr, indices, delta, complement, offset, cand, rn, lthn)
                if _all_positive(lthn):
                    _em_map(
                        dense,
                        indptr,
                        indices,
                        delta,
                        complement,
                        offset,
                        counts,
                        cand,
                        lthn,
                        w,
                        new,
                        pool_of,
                        n_pools,
                        pool_sum,
                        pool_size,
                    )
                    maps += 1
                    extrapolated = True
        if extrapolated:
            _evaluate(dense, indptr, indices, delta, complement, offset, new, rn, lthn)
        else:
            _evaluate(dense, indptr, indices, delta, complement, offset, th2, rn, lthn)
        lln, scale_n = _loglik_rel(rn, lthn, counts, inv_offset, positive)
        if extrapolated and not (lln >= ll or lln >= ll - 1e-13 * scale_n):
            fallbacks += 1
            step_max = max(1.0, -used / 4.0)
            extrapolated = False
            _evaluate(dense, indptr, indices, delta, complement, offset, th2, rn, lthn)
            lln = _loglik_rel(rn, lthn, counts, inv_offset, positive)[0]
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


# ============================================================================ prepared rows
class CompiledRows:
    """A tally's centred likelihood rows in the arrays the compiled EM loop reads (internal).

    ``L[u, x] = offset[u] + C[u, x]``, ``C >= 0``, exactly as in
    :class:`~bayesldp.estimators.mle.RowLikelihood`: ``offset = min_x L[u, x]`` for dense rows
    (``C`` stored densely), ``min(lo, hi)`` in support form, where ``C = |hi - lo| M`` with the
    0/1 matrix ``M`` (the support, or its complement when ``hi < lo``) stored as compressed rows
    of ``M`` or of ``1 - M``, whichever is sparser (``complement``), and as one column index per
    row when every support row has exactly one True (``kind == "onehot"``).
    """

    def __init__(self, tally: Tally) -> None:
        self.k = tally.k
        self.counts = tally.counts.astype(float)
        self.n = float(self.counts.sum())
        n_rows = self.counts.shape[0]
        # exactly one form is set: dense C; or indices (one-hot), with indptr (compressed rows)
        self.dense: np.ndarray | None = None
        self.indptr: np.ndarray | None = None
        self.indices: np.ndarray | None = None
        self.delta = 0.0
        self.complement = False
        if tally.is_support_form:
            lo, hi = tally.levels
            support = np.ascontiguousarray(tally.support)
            self.delta = abs(hi - lo)
            self.offset = np.full(n_rows, min(lo, hi))
            row_nnz, first = _row_pattern(support)
            if row_nnz.min() == 1 and row_nnz.max() == 1:  # GRR: one True per row
                self.kind = "onehot"
                self.indices = first
                self.complement = bool(hi < lo)
            else:
                self.kind = "sparse"
                mask = ~support if hi < lo else support
                mask_nnz = self.k - row_nnz if hi < lo else row_nnz
                self.complement = bool(mask_nnz.sum() > 0.5 * support.size)
                stored = ~mask if self.complement else mask
                stored_nnz = self.k - mask_nnz if self.complement else mask_nnz
                self.indptr = np.zeros(n_rows + 1, dtype=np.int64)
                np.cumsum(stored_nnz, out=self.indptr[1:])
                self.indices = np.nonzero(stored)[1].astype(np.int32)
        else:
            self.kind = "dense"
            rows = tally.rows
            self.offset = rows.min(axis=1)
            self.dense = np.ascontiguousarray(rows - self.offset[:, None])
        self.positive = self.offset > 0
        if tally.is_support_form and self.offset[0] > 0:  # one positive offset for every row
            self.inv_offset = np.full(n_rows, 1.0 / self.offset[0])
            self.const = self.n * math.log(self.offset[0])
        else:
            self.inv_offset = np.where(
                self.positive, 1.0 / np.where(self.positive, self.offset, 1.0), 0.0
            )
            log_offset = np.log(np.where(self.positive, self.offset, 1.0))
            self.const = float(self.counts[self.positive] @ log_offset[self.positive])

    def _rows_args(self) -> tuple:
        return (
            self.dense,
            self.indptr,
            self.indices,
            self.delta,
            self.complement,
            self.offset,
        )

    def evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(C theta, L theta)``."""
        theta = np.ascontiguousarray(theta, dtype=float)
        r = np.empty(self.counts.shape[0])
        lth = np.empty(self.counts.shape[0])
        _evaluate(*self._rows_args(), theta, r, lth)
        return r, lth

    def em_map(self, theta: np.ndarray) -> np.ndarray:
        """One EM map ``theta_x g_x / (theta . g)`` (compiled; for tests and diagnostics)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        _, lth = self.evaluate(theta)
        out = np.empty(self.k)
        _em_map(
            *self._rows_args(),
            self.counts,
            theta,
            lth,
            np.empty(lth.shape[0]),
            out,
            np.full(self.k, -1, dtype=np.int64),
            0,
            np.empty(1),
            np.empty(1),
        )
        return out

    def loglik_rel(self, theta: np.ndarray) -> float:
        """``ell(theta) - const``."""
        r, lth = self.evaluate(theta)
        return float(_loglik_rel(r, lth, self.counts, self.inv_offset, self.positive)[0])


def run_em_compiled(
    rows: CompiledRows,
    theta0: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    accelerate: bool,
    pool_of: np.ndarray | None = None,
    n_pools: int = 0,
) -> EMRun:
    """:func:`bayesldp.estimators.mle.run_em`, compiled: the same steps, decisions and trace.

    Plain or SQUAREM-accelerated EM (scheme S3 with step-length control and a monotonicity
    safeguard, see ``run_em``), stopping when one EM map moves no coordinate by more than
    ``tol`` or after ``max_iter`` maps.  The trace holds ``ell - const`` of every accepted
    iterate.
    """
    if pool_of is None:
        pool_of = np.full(rows.k, -1, dtype=np.int64)
    theta, maps, trace, converged, residual, cycles, fallbacks = _squarem(
        *rows._rows_args(),
        rows.inv_offset,
        rows.positive,
        rows.counts,
        np.ascontiguousarray(theta0, dtype=float),
        float(tol),
        int(max_iter),
        bool(accelerate),
        np.ascontiguousarray(pool_of, dtype=np.int64),
        int(n_pools),
    )
    return EMRun(theta, int(maps), trace, bool(converged), float(residual), cycles, fallbacks)


def _check_theta0(theta0: Any, rows: CompiledRows) -> np.ndarray:
    if theta0 is None:
        return np.full(rows.k, 1.0 / rows.k)
    arr = np.asarray(theta0, dtype=float)
    if arr.shape != (rows.k,) or not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise InvalidInputError(f"theta0: expected {rows.k} finite non-negative frequencies")
    if abs(arr.sum() - 1.0) > 1e-8:
        raise InvalidInputError(f"theta0: must sum to 1, sums to {arr.sum()!r}")
    _, lth = rows.evaluate(arr)
    if np.any(lth <= 0):
        raise InvalidInputError(
            "theta0: gives probability 0 to some observed report; start from a point with "
            "theta0 > 0 on every category"
        )
    return arr / arr.sum()


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise InvalidInputError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def em(
    tally: Tally,
    *,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    accelerate: bool = True,
    theta0: Any = None,
) -> Estimate:
    """EM / iterative Bayesian update for any tally.

    Parameters
    ----------
    tally : Tally
        Reports of any mechanism (also mixed-family tallies).
    tol : float
        Stop when one EM iteration changes no frequency by more than ``tol``
        (``max_x |theta_new_x - theta_x| < tol``, the stopping rule of multi-freq-ldpy's IBU)
        and return the last iterate.
    max_iter : int
        Maximum number of EM iterations (evaluations of the EM map).
    accelerate : bool
        Use SQUAREM (Varadhan and Roland 2008, scheme S3) with a monotonicity safeguard: same
        fixed point, far fewer iterations.  False gives plain EM (one map per iteration).
    theta0 : array, optional
        Starting point (default uniform); categories at 0 stay at 0.

    Returns
    -------
    Estimate
        ``iterations``: EM maps evaluated; ``loglik_trace``: the log-likelihood of every accepted
        iterate (non-decreasing); ``converged``: the stopping rule was met; ``details``:
        ``residual`` (the last ``max |change|``), ``squarem_cycles``, ``fallbacks``.

    Notes
    -----
    The loop is numba-compiled (module docstring): an EM map costs O(U K) for dense rows,
    O(nnz + K) in support form and O(U + K) for one-hot support rows (GRR), plus the
    log-likelihood of each accepted iterate (U logarithms).  The first call with a row form
    in a process loads its compiled code from numba's cache (compiles it, once, if there is
    no cache).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.GRR(4, 2.0)
    >>> tally = mech.simulate_tally([400, 300, 200, 100], rng=1)
    >>> est = em(tally, tol=1e-12)
    >>> est.converged, bool(abs(est.frequencies.sum() - 1) < 1e-12)
    (True, True)
    """
    tally = check_tally(tally)
    _check_positive(tol, "tol")
    _check_positive(max_iter, "max_iter", integer=True)
    _check_bool(accelerate, "accelerate")
    rows = CompiledRows(tally)
    run = run_em_compiled(
        rows, _check_theta0(theta0, rows), tol=tol, max_iter=max_iter, accelerate=accelerate
    )
    return Estimate(
        run.theta,
        None,
        "em",
        on_simplex=True,
        iterations=run.maps,
        loglik_trace=run.trace + rows.const,
        converged=run.converged,
        details={
            "residual": run.residual,
            "squarem_cycles": run.cycles,
            "fallbacks": run.fallbacks,
        },
    )


def _noise_sd(tally: Tally) -> np.ndarray:
    """Per-category standard deviation of a frequency that is 0 (the merge scale of EM-MR).

    ``sqrt(Var*_x / n)`` from the mechanism's oracle; for a tally mixing mechanisms, the
    Cramér-Rao standard deviations of the tally's observed information at the uniform
    distribution (pseudo-inverse when that information is singular).
    """
    from bayesldp.bounds import observed_information, var_star_by_category
    from bayesldp.estimators.mle import _full_covariance

    if tally.mechanism is not None:
        return np.sqrt(var_star_by_category(tally.mechanism) / tally.n)
    info = observed_information(tally, np.full(tally.k, 1.0 / tally.k))
    cov = _full_covariance(np.linalg.pinv(info, rcond=1e-10, hermitian=True))
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


@single_thread_blas
def em_mr(
    tally: Tally,
    *,
    threshold_sd: float = 1.5,
    threshold: Any = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    max_rounds: int = 10,
    accelerate: bool = True,
    theta0: Any = None,
) -> Estimate:
    """EM with mixture reduction (seed 001), stopped by BIC.

    1. Run EM on the full mixture (K components).
    2. Round ``t = 1, 2, ...``: among the unpooled components whose weight is below the noise
       threshold (``threshold_sd`` times the standard deviation of the unbiased estimate of a
       frequency that is 0, or ``threshold``), take the smallest, at most ``max(2, K // 2^t)``
       of them (the halving schedule of the authors' code), and merge them into one pooled
       component whose likelihood row is the average of theirs; re-run EM on the reduced
       mixture (warm start).  Keep the round only if ``BIC = -2 log L + K' log n`` (``K'`` the
       number of components) decreases, else revert and stop.
    3. Split each pooled weight equally over its members (as the authors' code does; the
       slides' error analysis ``MSE = K'/K MSE_EM + (1/K) sum_i h_i sigma_i^2`` is that of this
       equal split).

    EM on the reduced mixture equals EM on all K categories followed by averaging the weights
    inside each pool, which is how it is computed (any row form, no densification).

    Parameters
    ----------
    tally : Tally
    threshold_sd : float
        ``c`` in the merge threshold ``c * sd``: the REFERENCE suggests 1 to 2; the authors'
        code uses 4/3 (and 5 when ``e^eps < 5``).
    threshold : float or array (K,), optional
        Explicit merge threshold (overrides ``threshold_sd``).
    tol, max_iter, accelerate, theta0
        As for :func:`em` (``max_iter`` per EM run).
    max_rounds : int
        Maximum number of merge rounds.

    Returns
    -------
    Estimate
        ``iterations``: EM maps over all runs; ``loglik_trace``: the accepted runs' traces
        concatenated (non-decreasing within a run; it drops at each merge, the reduced model
        being smaller); ``details``: ``pools`` (member indices of each pool), ``bic_trace``
        (BIC of the full model and of every accepted round), ``rounds``, ``threshold``.
    """
    tally = check_tally(tally)
    _check_positive(tol, "tol")
    _check_positive(max_iter, "max_iter", integer=True)
    _check_positive(max_rounds, "max_rounds", integer=True)
    _check_bool(accelerate, "accelerate")
    rows = CompiledRows(tally)
    k, n = rows.k, rows.n
    if threshold is None:
        _check_positive(threshold_sd, "threshold_sd")
        thr = threshold_sd * _noise_sd(tally)
    else:
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (k,)).copy()
        if not np.all(np.isfinite(thr)) or np.any(thr < 0):
            raise InvalidInputError(f"threshold: must be finite and >= 0, got {threshold!r}")

    run = run_em_compiled(
        rows, _check_theta0(theta0, rows), tol=tol, max_iter=max_iter, accelerate=accelerate
    )
    theta = run.theta
    loglik = run.trace[-1] + rows.const
    bic = -2.0 * loglik + k * math.log(n)
    trace = list(run.trace)
    maps = run.maps
    converged = run.converged
    pool_of = np.full(k, -1)
    n_pools = 0
    bic_trace = [bic]
    rounds: list[dict[str, Any]] = []
    for t in range(1, max_rounds + 1):
        candidates = np.flatnonzero((pool_of < 0) & (theta < thr))
        limit = max(2, k // 2**t)
        chosen = candidates[np.argsort(theta[candidates], kind="stable")][:limit]
        if chosen.size < 2:
            break
        trial_pool_of = pool_of.copy()
        trial_pool_of[chosen] = n_pools
        start = _tie(theta, trial_pool_of, n_pools + 1)
        trial = run_em_compiled(
            rows,
            start,
            tol=tol,
            max_iter=max_iter,
            accelerate=accelerate,
            pool_of=trial_pool_of,
            n_pools=n_pools + 1,
        )
        maps += trial.maps
        n_components = int((trial_pool_of < 0).sum()) + n_pools + 1
        trial_loglik = trial.trace[-1] + rows.const
        trial_bic = -2.0 * trial_loglik + n_components * math.log(n)
        accepted = trial_bic < bic
        rounds.append({"round": t, "merged": chosen, "bic": trial_bic, "accepted": bool(accepted)})
        if not accepted:
            break
        pool_of, n_pools = trial_pool_of, n_pools + 1
        theta, bic, converged = trial.theta, trial_bic, trial.converged
        trace.extend(trial.trace)
        bic_trace.append(bic)
    pools = [np.flatnonzero(pool_of == j) for j in range(n_pools)]
    return Estimate(
        theta,
        None,
        "em_mr",
        on_simplex=True,
        iterations=maps,
        loglik_trace=np.asarray(trace) + rows.const,
        converged=converged,
        details={
            "pools": pools,
            "bic_trace": np.asarray(bic_trace),
            "rounds": rounds,
            "threshold": thr,
        },
    )
