"""EM (iterative Bayesian update) and EM with mixture reduction on tallies.

EM for the LDP mixture model (seed 001, Ye, Wang, Zhang, Feng, "Revisiting EM-based locally
differentially private protocols"; Agrawal and Aggarwal 2001; ElSalamouny and Palamidessi 2020):
E-step ``gamma_{ux} = theta_x L[u, x] / (L_u . theta)``, M-step
``theta_x = (1/n) sum_u c_u gamma_{ux}``.  On a tally the E-step is per distinct row, so one
iteration costs O(U K) (O(nnz) in support form), not O(n K).  Every iteration increases the
log-likelihood ``sum_u c_u log(L_u . theta)``; its fixed points with full support are the MLE.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.estimators.mle import (
    RowLikelihood,
    _check_positive,
    _check_theta0,
    _tie,
    run_em,
    single_thread_blas,
)
from bayesldp.estimators.oracle import check_tally
from bayesldp.estimators.result import Estimate
from bayesldp.tally import Tally


@single_thread_blas
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
    """
    tally = check_tally(tally)
    _check_positive(tol, "tol")
    _check_positive(max_iter, "max_iter", integer=True)
    _check_bool(accelerate, "accelerate")
    lik = RowLikelihood(tally)
    run = run_em(lik, _check_theta0(theta0, lik), tol=tol, max_iter=max_iter, accelerate=accelerate)
    return Estimate(
        run.theta,
        None,
        "em",
        on_simplex=True,
        iterations=run.maps,
        loglik_trace=np.asarray(run.trace) + lik.const,
        converged=run.converged,
        details={
            "residual": run.residual,
            "squarem_cycles": run.cycles,
            "fallbacks": run.fallbacks,
        },
    )


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise InvalidInputError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def _noise_sd(tally: Tally, lik: RowLikelihood) -> np.ndarray:
    """Per-category standard deviation of a frequency that is 0 (the merge scale of EM-MR).

    ``sqrt(Var*_x / n)`` from the mechanism's oracle; for a tally mixing mechanisms, the
    Cramér-Rao standard deviations of the tally's observed information at the uniform
    distribution (pseudo-inverse when that information is singular).
    """
    from bayesldp.bounds import observed_information, var_star_by_category
    from bayesldp.estimators.mle import _full_covariance

    if tally.mechanism is not None:
        return np.sqrt(var_star_by_category(tally.mechanism) / tally.n)
    info = observed_information(tally, np.full(tally.k, 1.0 / tally.k), lik=lik)
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
    lik = RowLikelihood(tally)
    k, n = lik.k, lik.n
    if threshold is None:
        _check_positive(threshold_sd, "threshold_sd")
        thr = threshold_sd * _noise_sd(tally, lik)
    else:
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (k,)).copy()
        if not np.all(np.isfinite(thr)) or np.any(thr < 0):
            raise InvalidInputError(f"threshold: must be finite and >= 0, got {threshold!r}")

    run = run_em(lik, _check_theta0(theta0, lik), tol=tol, max_iter=max_iter, accelerate=accelerate)
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
        start = _tie(theta, trial_pool_of, n_pools + 1)
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
