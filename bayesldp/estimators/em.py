"""EM (iterative Bayesian update) and EM with mixture reduction on tallies.

EM for the LDP mixture model (Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally
Differentially Private Protocols"; Agrawal and Aggarwal 2001; ElSalamouny and Palamidessi 2020):
E-step ``gamma_{ux} = theta_x L[u, x] / (L_u . theta)``, M-step
``theta_x = (1/n) sum_u c_u gamma_{ux}``.  On a tally the E-step is per distinct row, so one
iteration costs O(U K) (O(nnz) in support form), not O(n K).  Every iteration increases the
log-likelihood ``sum_u c_u log(L_u . theta)``; its fixed points with full support are the MLE.

The iterations run in the package's one EM engine, :mod:`bayesldp.estimators.em_engine` (one
numba-compiled loop, SQUAREM included); the MLE warm-starts from it and EM-MR runs it on reduced
mixtures.  Its :func:`run_em`, :func:`em_map`, :func:`tie_pools` and :class:`EMRun` can be
imported from here too.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bayesldp._blas import single_thread_blas
from bayesldp._validation import (
    check_bool,
    check_choice,
    check_int,
    check_open_unit,
    check_positive,
)
from bayesldp.bounds import full_covariance, observed_information, var_star_by_category
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.em_engine import EMRun as EMRun
from bayesldp.estimators.em_engine import em_map as em_map
from bayesldp.estimators.em_engine import run_em as run_em
from bayesldp.estimators.em_engine import tie_pools as tie_pools
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally


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
    The loop is numba-compiled (:mod:`bayesldp.estimators.em_engine`): an EM map costs O(U K)
    for dense rows, O(nnz + K) in support form and O(U + K) for one-hot support rows (GRR), plus
    the log-likelihood of each accepted iterate (U logarithms).  The first call with a row form
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
    details = {"residual": run.residual, "squarem_cycles": run.cycles, "fallbacks": run.fallbacks}
    return _run_estimate(run, lik, "em", details)


def _run_estimate(run: EMRun, lik: Likelihood, method: str, details: dict[str, Any]) -> Estimate:
    """The Estimate of one EM run: its iterate, EM maps and log-likelihood trace (constant
    added back)."""
    return Estimate(
        run.theta,
        None,
        method,
        on_simplex=True,
        iterations=run.maps,
        loglik_trace=run.trace + lik.const,
        converged=run.converged,
        details=details,
    )


#: Stopping rules of :func:`ibu`: ``rule -> (tol, max_iter)`` defaults.
IBU_RULES = {"loglik": (1e-6, 1400), "change": (1e-12, 10_000)}


def ibu(tally: Tally, *, rule: str = "loglik", tol: Any = None, max_iter: Any = None) -> Estimate:
    """The iterative Bayesian update as its users run it: plain EM from the uniform start.

    Agrawal and Aggarwal (PODS 2001); ElSalamouny and Palamidessi (EuroS&P 2020); Ye et al.
    Each step is the EM map ``theta_x <- theta_x sum_u c_u L[u, x] / (n L_u . theta)``.
    Unlike :func:`em`, which iterates to the maximum-likelihood estimate, ``ibu`` stops early
    by the rule its users apply, and the early stop regularises (Ye et al., Observation 1: from
    the uniform start, the first iterations move mass onto the categories the reports support;
    the last ones push rare categories toward the MLE's zeros and noise).

    Parameters
    ----------
    tally : Tally
        Reports of any mechanism.
    rule : {"loglik", "change"}
        ``"loglik"`` (default): the code of Ye et al. (LDP-EM-MR, ``GRR_EM.py``): stop at
        the first step, from the second on, that raises the log-likelihood
        ``sum_u c_u log(L_u . theta)`` by less than ``tol`` (default 1e-6), at most
        ``max_iter`` steps (default 1400).  ``"change"``: multi-freq-ldpy's ``IBU``
        (``err_func="max_abs"``): stop when a step changes no frequency by more than ``tol``
        (default 1e-12), at most ``max_iter`` steps (default 10,000); this is close to the MLE.
    tol : float, optional
    max_iter : int, optional

    Returns
    -------
    Estimate
        ``iterations``: EM steps; ``converged``: the rule was met before the cap;
        ``details``: ``rule``, ``tol``, ``max_iter``.
    """
    tally = check_tally(tally)
    check_choice(rule, "rule", tuple(IBU_RULES))
    default_tol, default_cap = IBU_RULES[rule]
    tol = default_tol if tol is None else check_positive(tol, "tol")
    max_iter = default_cap if max_iter is None else check_int(max_iter, "max_iter")
    lik = Likelihood(tally)
    start = np.full(lik.k, 1.0 / lik.k)
    if rule == "loglik":
        run = run_em(lik, start, tol=0.0, ll_tol=tol, max_iter=max_iter, accelerate=False)
    else:
        run = run_em(lik, start, tol=tol, max_iter=max_iter, accelerate=False)
    details = {"rule": rule, "tol": float(tol), "max_iter": int(max_iter)}
    return _run_estimate(run, lik, "ibu", details)


def _noise_sd(tally: Tally) -> np.ndarray:
    """Per-category standard deviation of the unbiased estimate of a frequency that is 0.

    ``sqrt(Var*_x / n)`` from the mechanism's oracle (for GRR
    ``sqrt((K - 2 + e^eps) / n) / (e^eps - 1)``, the scale of the EM-MR authors' threshold); for
    a tally mixing mechanisms, the Cramér-Rao standard deviations of the tally's observed
    information at the uniform distribution (pseudo-inverse when that information is singular).
    """
    if tally.mechanism is not None:
        return np.sqrt(var_star_by_category(tally.mechanism) / tally.n)
    info = observed_information(tally, np.full(tally.k, 1.0 / tally.k))
    cov = full_covariance(np.linalg.pinv(info, rcond=1e-10, hermitian=True))
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


def _budget_ratio(tally: Tally, lik: Likelihood) -> float:
    """``e^eps`` of the tally: its mechanism's, or for a tally mixing mechanisms the largest
    likelihood ratio ``max_x L[u, x] / min_x L[u, x]`` over its rows (the tightest budget
    that every report satisfies)."""
    if tally.mechanism is not None:
        return math.exp(tally.mechanism.epsilon)
    if not np.all(lik.positive):
        raise InvalidInputError(
            "em_mr: a row of this tally is 0 for some category (no finite budget), so the "
            "authors' defaults do not apply; give threshold_sd (or threshold) and tol"
        )
    return float(np.max((lik.offset + lik.rowmax) / lik.offset))


def _em_mr_defaults(e_eps: float, threshold_sd: Any, tol: Any) -> tuple[float, float]:
    """The authors' ``c`` (1 when ``e^eps < 5``, else 2) and ``tol`` (``1e-3 e^eps``)."""
    c = (1.0 if e_eps < 5 else 2.0) if threshold_sd is None else threshold_sd
    tol = 1e-3 * e_eps if tol is None else tol
    return check_positive(c, "threshold_sd"), check_positive(tol, "tol")


def _protected(protect: Any, k: int) -> np.ndarray | int:
    """``protect`` as a count of largest estimates (int) or a boolean mask of categories."""
    if isinstance(protect, numbers.Integral) and not isinstance(protect, bool):
        return check_int(protect, "protect", low=0)
    idx = np.asarray(protect)
    if idx.ndim != 1 or idx.dtype.kind not in "iu" or np.any((idx < 0) | (idx >= k)):
        raise InvalidInputError(
            f"protect: expected a count or a sequence of category indices in 0..{k - 1}, "
            f"got {protect!r}"
        )
    mask = np.zeros(k, dtype=bool)
    mask[idx] = True
    return mask


def _merge_candidates(
    theta: np.ndarray, pool_of: np.ndarray, thr: np.ndarray, protect: Any, limit: int
) -> np.ndarray:
    """The ``limit`` smallest unpooled components below the threshold, less the protected ones
    (``protect``: the number of largest unpooled estimates, or a mask of categories), which
    count toward the limit as in the authors' code."""
    free = np.flatnonzero(pool_of < 0)
    below = free[theta[free] < thr[free]]
    chosen = below[np.argsort(theta[below], kind="stable")][:limit]
    if isinstance(protect, np.ndarray):
        return chosen[~protect[chosen]]
    largest = free[np.argsort(-theta[free], kind="stable")][:protect]
    return chosen[~np.isin(chosen, largest)]


def _stage_sizes(pool_of: np.ndarray, k: int, stages: int) -> list[int]:
    """Components of each stage's mixture: K, then K less the members merged by round t plus
    the t pools (pool ``j`` was made by round ``j + 1``)."""
    return [k - int(((pool_of >= 0) & (pool_of < t)).sum()) + t for t in range(stages)]


@single_thread_blas
def em_mr(
    tally: Tally,
    *,
    threshold_sd: Any = None,
    threshold: Any = None,
    rounds: int = 2,
    merge_fraction: float = 0.25,
    protect: Any = 10,
    tol: Any = None,
    max_iter: Any = None,
    theta0: Any = None,
) -> Estimate:
    """EM with mixture reduction (Ye et al.) as its authors run it.

    The schedule of the authors' code (LDP-EM-MR, ``ldp_reduction/protocols/MR/
    GRR_EM_reduction.py``), written for any channel through the oracle's ``Var*``:

    1. Stage 1: plain EM from the uniform start, stopped when a step raises the
       log-likelihood by less than ``tol`` (default ``1e-3 e^eps``), at most ``1000 + 10 K``
       steps.
    2. Round ``t = 1 .. rounds`` (default 2): among the components not yet pooled, take those
       whose weight is below the threshold ``c sqrt(Var*_x / n)`` (``c = threshold_sd``,
       default 1 when ``e^eps < 5`` else 2: for GRR the authors'
       ``c sqrt((K - 2 + e^eps) / n) / (e^eps - 1)``), at most ``int(merge_fraction K)`` of
       them, smallest first; pass over the protected ones (they count toward the limit, as in
       the authors' code), and merge the rest into one component
       whose likelihood row is the average of theirs, started at weight ``1/K``; then run plain
       EM on the reduced mixture from the previous stage's weights (same rule; ``1000 + 10 K``
       steps after the first round, 1000 after later ones).  Stop early when a round finds
       nothing to merge.
    3. Split each pooled weight equally over its members.

    EM on the reduced mixture equals EM on all K categories with each pool's weights tied to
    their mean, which is how it is computed (any row form).  For GRR it also equals the
    authors' EM with the pooled categories' reports pooled: within a pool every report has the
    same likelihood, so only the pool's total count matters.

    Where this differs from the authors' code, and why: their code keeps the first ``topk = 10``
    category *indices* out of the merge, which protects the true top 10 only because their data
    are sorted by true frequency; by default the ``protect = 10`` largest *estimates* are kept
    instead, which does not depend on the order of the categories (``protect=range(10)``
    reproduces the authors' rule).  Their code computes a BIC after each stage but its
    stopping test never fires (it compares the built-in ``iter`` with 0), so the authors' runs
    always make the ``rounds`` merges; so does this function (``details["bic"]`` records the
    BIC of each stage, ``-2 log L + K' log n``, for inspection).

    Parameters
    ----------
    tally : Tally
    threshold_sd : float, optional
        ``c`` above.
    threshold : float or array (K,), optional
        Explicit merge threshold on the weights (overrides ``threshold_sd``).
    rounds : int
        Merge rounds (the authors' ``maxtimes = 2``).
    merge_fraction : float
        At most ``int(merge_fraction K)`` components merged per round (the authors' 1/4).
    protect : int or sequence of int
        The number of largest estimates never merged, or the indices of the categories never
        merged (the authors' code: ``range(10)``).
    tol : float, optional
        Log-likelihood stopping tolerance of every stage.
    max_iter : int, optional
        EM steps per stage (default ``1000 + 10 K`` for the first two stages, 1000 after).
    theta0 : array, optional
        Start of stage 1 (default uniform).

    Returns
    -------
    Estimate
        ``iterations``: EM steps over all stages; ``loglik_trace``: the stages' traces
        concatenated; ``details``: ``pools`` (member indices of each pool), ``stages`` (EM steps
        per stage), ``bic`` (per stage), ``threshold``.
    """
    tally = check_tally(tally)
    check_int(rounds, "rounds", low=0)
    check_open_unit(merge_fraction, "merge_fraction")
    lik = Likelihood(tally)
    k, n = lik.k, lik.n
    protect = _protected(protect, k)
    needs_budget = tol is None or (threshold is None and threshold_sd is None)
    c, tol = _em_mr_defaults(_budget_ratio(tally, lik) if needs_budget else 1.0, threshold_sd, tol)
    if threshold is None:
        thr = c * _noise_sd(tally)
    else:
        thr = np.broadcast_to(np.asarray(threshold, dtype=float), (k,)).copy()
        if not np.all(np.isfinite(thr)) or np.any(thr < 0):
            raise InvalidInputError(f"threshold: must be finite and >= 0, got {threshold!r}")
    if max_iter is not None:
        check_int(max_iter, "max_iter")

    def stage(start: np.ndarray, s: int, pool_of: np.ndarray, n_pools: int) -> EMRun:
        cap = max_iter if max_iter is not None else (1000 + 10 * k if s < 2 else 1000)
        return run_em(
            lik, start, tol=0.0, ll_tol=tol, max_iter=cap, accelerate=False,
            pool_of=pool_of, n_pools=n_pools,
        )  # fmt: skip

    pool_of = np.full(k, -1)
    run = stage(lik.check_start(theta0), 0, pool_of, 0)
    runs = [run]
    for t in range(1, rounds + 1):
        chosen = _merge_candidates(run.theta, pool_of, thr, protect, int(merge_fraction * k))
        if chosen.size == 0:
            break
        pool_of = pool_of.copy()
        pool_of[chosen] = t - 1
        start = run.theta.copy()
        start[chosen] = 1.0 / (k * chosen.size)
        run = stage(start / start.sum(), t, pool_of, t)
        runs.append(run)
    n_pools = int(pool_of.max()) + 1
    return Estimate(
        run.theta,
        None,
        "em_mr",
        on_simplex=True,
        iterations=sum(r.maps for r in runs),
        loglik_trace=np.concatenate([r.trace for r in runs]) + lik.const,
        converged=run.converged,
        details={
            "pools": [np.flatnonzero(pool_of == j) for j in range(n_pools)],
            "stages": [r.maps for r in runs],
            "bic": [
                -2.0 * (r.trace[-1] + lik.const) + size * math.log(n)
                for r, size in zip(runs, _stage_sizes(pool_of, k, len(runs)), strict=True)
            ],
            "threshold": thr,
        },
    )
