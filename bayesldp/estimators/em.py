"""EM (iterative Bayesian update) and EM with mixture reduction on tallies.

EM for the LDP mixture model (seed 001, Ye, Wang, Zhang, Feng, "Revisiting EM-based locally
differentially private protocols"; Agrawal and Aggarwal 2001; ElSalamouny and Palamidessi 2020):
E-step ``gamma_{ux} = theta_x L[u, x] / (L_u . theta)``, M-step
``theta_x = (1/n) sum_u c_u gamma_{ux}``.  On a tally the E-step is per distinct row, so one
iteration costs O(U K) (O(nnz) in support form), not O(n K).  Every iteration increases the
log-likelihood ``sum_u c_u log(L_u . theta)``; its fixed points with full support are the MLE.

This is the package's one EM engine: the iterations run in one numba-compiled loop (SQUAREM
included), so an EM map costs its arithmetic and no per-call overhead; the MLE warm-starts from
it and EM-MR runs it on reduced mixtures.  Rows are the centred rows of
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
from bayesldp._blas import single_thread_blas
from bayesldp._validation import check_bool, check_int, check_positive
from bayesldp.bounds import full_covariance, observed_information, var_star_by_category
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally


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
def _squarem(rows, inv_offset, positive, counts, theta0, tol, max_iter, accelerate, pools):
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
            ll = lk.loglik_rel(r, lth, counts, inv_offset, positive)[0]
            trace[n_trace] = ll
            n_trace += 1
            if residual < tol:
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
    """
    theta, maps, trace, converged, residual, cycles, fallbacks = _squarem(
        lik.arrays,
        lik.inv_offset,
        lik.positive,
        lik.counts,
        np.ascontiguousarray(theta0, dtype=float),
        float(tol),
        int(max_iter),
        bool(accelerate),
        _pools(pool_of, n_pools, lik.k),
    )
    return EMRun(theta, int(maps), trace, bool(converged), float(residual), cycles, fallbacks)


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
    check_positive(tol, "tol")
    check_int(max_iter, "max_iter")
    check_bool(accelerate, "accelerate")
    lik = Likelihood(tally)
    run = run_em(lik, lik.check_start(theta0), tol=tol, max_iter=max_iter, accelerate=accelerate)
    return Estimate(
        run.theta,
        None,
        "em",
        on_simplex=True,
        iterations=run.maps,
        loglik_trace=run.trace + lik.const,
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
    if tally.mechanism is not None:
        return np.sqrt(var_star_by_category(tally.mechanism) / tally.n)
    info = observed_information(tally, np.full(tally.k, 1.0 / tally.k))
    cov = full_covariance(np.linalg.pinv(info, rcond=1e-10, hermitian=True))
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
    check_positive(tol, "tol")
    check_int(max_iter, "max_iter")
    check_int(max_rounds, "max_rounds")
    check_bool(accelerate, "accelerate")
    lik = Likelihood(tally)
    k, n = lik.k, lik.n
    if threshold is None:
        check_positive(threshold_sd, "threshold_sd")
        thr = threshold_sd * _noise_sd(tally)
    else:
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (k,)).copy()
        if not np.all(np.isfinite(thr)) or np.any(thr < 0):
            raise InvalidInputError(f"threshold: must be finite and >= 0, got {threshold!r}")

    run = run_em(lik, lik.check_start(theta0), tol=tol, max_iter=max_iter, accelerate=accelerate)
    theta = run.theta
    loglik = run.trace[-1] + lik.const
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
        start = tie_pools(theta, trial_pool_of, n_pools + 1)
        trial = run_em(
            lik,
            start,
            tol=tol,
            max_iter=max_iter,
            accelerate=accelerate,
            pool_of=trial_pool_of,
            n_pools=n_pools + 1,
        )
        maps += trial.maps
        n_components = int((trial_pool_of < 0).sum()) + n_pools + 1
        trial_loglik = trial.trace[-1] + lik.const
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
        loglik_trace=np.asarray(trace) + lik.const,
        converged=converged,
        details={
            "pools": pools,
            "bic_trace": np.asarray(bic_trace),
            "rounds": rounds,
            "threshold": thr,
        },
    )
