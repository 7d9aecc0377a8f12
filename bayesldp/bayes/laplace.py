"""Large-n posterior: the likelihood's Laplace approximation in theta, the exact prior, and a
Pareto-smoothed importance-sampling check.

For mechanisms whose tally keeps one row per report (unary encoding, local hashing, Hadamard
response: SUE, OUE, BLH, OLH, SHE, THE, ...) every gradient of the exact log-likelihood
``ell(theta) = sum_u c_u log(L_u . theta)`` touches all ``n`` rows, so a NUTS run (thousands of
gradients) costs ``n`` times thousands.  This method pays for ``n`` a fixed number of times and
then samples at a cost per draw that does not depend on ``n``:

1. **Expansion point.**  The mode ``z*`` of the exact posterior in additive log-ratio coordinates
   ``z_x = log(theta_x / theta_{K-1})`` (the HMC's damped Newton search,
   :func:`bayesldp.bayes.hmc.targets._find_mode`); ``theta* = softmax([z*, 0])``.  Each Newton
   step costs one gradient (``O(nnz)``) and one Gram matrix ``L^T diag(c / mu^2) L``
   (``O(sum_u |S_u|^2)`` in support form, :meth:`bayesldp.likelihood.Likelihood.gram`).
2. **Gaussian likelihood in theta.**  With ``g = L^T (c / mu)`` and ``H = L^T diag(c / mu^2) L``
   at ``theta*``, ``mu = L theta*``, the second-order Taylor expansion of ``ell`` on the simplex is
   ``ell(theta*) + g . delta - delta^T H delta / 2`` for tangent ``delta = theta - theta*``.  The
   likelihood is a sum of ``n`` logs of *linear* functions of ``theta``, so by the
   Bernstein-von Mises argument its remainder is ``O(n^{-1/2})`` in posterior units; the
   posterior's departures from a Gaussian at large ``n`` come from the simplex and the prior
   (categories near 0), which are kept *exact*: the surrogate posterior is
   ``Dirichlet(alpha) x exp(quadratic)``.  (A Gaussian in log-ratio coordinates would instead
   approximate those boundary effects, and fail where a category's frequency is within a few
   sd of 0.)
3. **Sampling.**  With ``A = I - theta* 1^T`` (so ``A delta = delta`` on the tangent space and
   ``A theta* = 0``), ``A^T H A = sum_j lambda_j e_j e_j^T`` and ``m_j = (A^T g) . e_j /
   lambda_j``, the quadratic is ``-sum_j lambda_j (e_j . theta - m_j)^2 / 2`` (+ const).  Each
   term is the limit of a pair of likelihood rows ``beta_j 1 +- (e_j - m_j 1)`` with count
   ``w_j = lambda_j beta_j^2 / 2``:
   ``w_j log(beta_j^2 - y^2) = const - lambda_j y^2 / 2 - lambda_j y^4 / (4 beta_j^2) - ...``,
   ``y = e_j . theta - m_j``, with ``beta_j`` large (``rho = 100`` times the largest ``|y|`` on
   the simplex, so the quartic term is below ``1e-4`` of the quadratic everywhere).  These
   ``2 (K - 1)`` pseudo-rows form a dense :class:`~bayesldp.Tally` sampled by the package's NUTS
   (:mod:`bayesldp.bayes.hmc`): each gradient costs ``O(K^2)``, whatever ``n``.
4. **Check.**  For every draw the log importance ratio ``ell(theta) - ell_surrogate(theta)``
   is computed (exactly from every row, or for large tallies estimated from a fixed number of
   rows around the quadratic, :func:`_log_ratio`) and Pareto-smoothed (``arviz.psislw``;
   Vehtari, Simpson, Gelman, Yao and Gabry, "Pareto smoothed importance sampling", JMLR 2024).
   Its tail index ``k`` is reported (``pareto_k`` in ``backend_info`` and the posterior attrs);
   ``k > 0.7`` warns: the surrogate then differs from the posterior more than importance
   sampling can repair, use ``method="hmc"``.  Below that, the PSIS-weighted means are reported
   beside the draws' means (``backend_info``), and their largest difference in posterior sd
   (``is_shift_sd``) tells how much the surrogate's error matters: above ``SHIFT_WARN`` = 0.1
   it warns.  The weights are stored as ``sample_stats["log_weight"]`` (normalised log PSIS
   weights), so ``np.exp(log_weight)`` reweights any summary.

Cost: the Newton search (a few gradients and Gram matrices, ``O(nnz |S|)`` each), then
``O(K^2)`` per leapfrog step, then ``O(m K)`` per draw for the check (``m`` rows, at most
``IMPORTANCE_ROWS``).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from bayesldp._validation import as_generator, check_int
from bayesldp.bayes import hmc
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.diagnostics import PARETO_K_MAX
from bayesldp.bayes.prior import AdaptiveDirichlet
from bayesldp.errors import InvalidInputError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

__all__ = ["SHIFT_WARN", "sample", "surrogate_tally"]

#: a difference of the PSIS-weighted and plain means above this many posterior sd warns
SHIFT_WARN = 0.1
#: ``beta_j`` is this many times the largest ``|e_j . theta - m_j|`` on the simplex
_RHO = 100.0
#: each pseudo-row's count is at least this (integer rounding below 1e-7 relative)
_MIN_COUNT = 1e7
#: the importance check reads every row up to this many distinct rows, else a sample of this many
IMPORTANCE_ROWS = 5_000
_HMC_OPTIONS = ("tune", "target_accept", "max_treedepth", "metric", "adaptive_scheme")
#: the options ``fit(method="laplace", ...)`` passes here (``method="auto"`` reads them too)
OPTIONS = (*_HMC_OPTIONS, "importance_rows")


def surrogate_tally(
    tally: Tally, theta_star: np.ndarray, lik: Likelihood | None = None
) -> tuple[Tally, dict[str, np.ndarray]]:
    """The pseudo-tally whose likelihood is the Laplace approximation of ``tally``'s in theta.

    Parameters
    ----------
    tally : Tally
        Any tally.
    theta_star : array of float, shape (K,)
        The expansion point, on the open simplex (every observed row must have ``L_u . theta*
        > 0``).

    Returns
    -------
    (Tally, dict)
        A dense tally of ``2 (K - 1)`` rows (fewer when ``H`` is singular) whose log-likelihood
        is, up to a constant and a relative ``1e-4``, the second-order expansion of
        ``tally.loglik`` at ``theta*`` (module docstring, step 3); and the arrays ``e`` (J, K),
        ``m``, ``beta``, ``w``, ``lam`` (J,) that define it (:func:`_surrogate_loglik` reads
        them).
    lik : Likelihood, optional
        ``Likelihood(tally)`` when already built.
    """
    lik = Likelihood(tally) if lik is None else lik
    theta_star = np.asarray(theta_star, dtype=float)
    _, mu = lik.evaluate(theta_star)
    if np.any(mu <= 0):
        raise InvalidInputError("theta_star: gives probability 0 to an observed report")
    # scaled rows: L = row_scale * (offset + C); the scale is a constant of the likelihood
    w_mu = lik.counts / mu
    g = lik.rmatvec(w_mu) + float(w_mu @ lik.offset)
    hess = lik.full_gram(lik.counts / (mu * mu))
    k = lik.k
    a = np.eye(k) - np.outer(theta_star, np.ones(k))  # A delta = delta - theta* (1 . delta)
    h_t = a.T @ hess @ a
    h_t = 0.5 * (h_t + h_t.T)
    g_t = a.T @ g
    lam, vecs = np.linalg.eigh(h_t)
    keep = lam > 1e-10 * max(float(lam.max()), 1e-300)
    lam, e = lam[keep], vecs[:, keep].T  # rows e_j, each with e_j . theta* = 0 (up to rounding)
    m = (e @ g_t) / lam
    v = e - m[:, None]  # v_j . theta = e_j . theta - m_j on the simplex
    spread = np.abs(v).max(axis=1)
    beta = np.maximum(_RHO * spread, np.sqrt(2.0 * _MIN_COUNT / lam))
    w = np.round(0.5 * lam * beta**2)
    rows = np.concatenate([beta[:, None] + v, beta[:, None] - v])
    counts = np.concatenate([w, w]).astype(np.int64)
    pseudo = Tally(counts, rows=rows, stat=np.zeros(k), family="laplace-surrogate", dedupe=False)
    return pseudo, {"e": e, "m": m, "beta": beta, "w": w, "lam": lam}


def _surrogate_loglik(parts: dict[str, np.ndarray], thetas: np.ndarray) -> np.ndarray:
    """``sum_j w_j log(1 - y_j^2 / beta_j^2)``, ``y_j = e_j . theta - m_j``, for thetas (S, K)."""
    y = thetas @ parts["e"].T - parts["m"]
    return np.log1p(-((y / parts["beta"]) ** 2)) @ parts["w"]


def sample(
    tally: Tally,
    alpha: np.ndarray | AdaptiveDirichlet,
    *,
    draws: int,
    chains: int,
    random_seed: int | None,
    progressbar: bool = False,
    **options: Any,
) -> SamplerOutput:
    """Backend of ``bayesldp.fit(method="laplace")`` (module docstring).

    Parameters
    ----------
    tally, alpha
        The data and the Dirichlet concentration vector (or the adaptive prior).
    draws, chains : int
        Output shape ``(chains, draws, K)``.
    random_seed : int or None
        Seed (same seed, same draws).
    progressbar : bool
        Passed to the surrogate's sampler.
    **options
        ``tune``, ``target_accept``, ``max_treedepth``, ``metric``, ``adaptive_scheme``: of the
        NUTS run on the surrogate (:func:`bayesldp.bayes.hmc.sample`).
        ``importance_rows`` (int >= 0, default ``IMPORTANCE_ROWS``): the PSIS check computes
        the log importance ratio of every draw from all distinct rows when there are at most
        this many, else from this many rows drawn by count (:func:`_log_ratio`); 0 skips it.

    Returns
    -------
    SamplerOutput
        The surrogate's draws with the HMC's sample_stats plus ``log_weight`` (normalised log
        PSIS weights: ``np.exp(log_weight)`` reweights any summary to the exact posterior);
        ``info`` holds ``pareto_k``, ``is_ess`` (the weights' effective sample size),
        ``is_shift_sd`` (largest difference of the weighted and plain means, in posterior sd),
        ``log_ratio_se``, ``importance_rows`` and the timings.
    """
    started = time.perf_counter()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of method 'laplace'; valid: {list(OPTIONS)}"
        )
    hmc_options = {key: options[key] for key in _HMC_OPTIONS if key in options}
    n_rows_imp = check_int(options.get("importance_rows", IMPORTANCE_ROWS), "importance_rows", 0)
    gen = as_generator(random_seed)
    seeds = gen.integers(0, 2**63 - 1, size=2)

    # 1. the exact posterior's mode in ALR coordinates (also under the adaptive prior)
    target = hmc._Target(tally, alpha)
    theta_star, pseudo, parts, n_expansions = _expansion_point(tally, alpha, target)
    mode_seconds = time.perf_counter() - started

    # 2.-3. the surrogate and its posterior, by NUTS on 2 (K - 1) dense rows
    built = time.perf_counter()
    out = hmc.sample(pseudo, alpha, draws=draws, chains=chains, random_seed=int(seeds[0]),
                     progressbar=progressbar, **hmc_options)  # fmt: skip
    sampled = time.perf_counter()

    # 4. the PSIS check
    total = chains * draws
    flat = out.theta.reshape(total, -1)
    stats = dict(out.sample_stats)
    info: dict[str, Any] = {
        "backend": "bayesldp.laplace",
        "sampler": "Laplace approximation of the likelihood in theta (exact prior), NUTS on "
        "its 2(K-1) pseudo-rows, PSIS check with the exact likelihood",
        "expansion_point": theta_star.tolist(),
        "surrogate_rows": int(pseudo.n_rows),
        "expansions": n_expansions,
        "hmc": out.info,
    }
    if n_rows_imp > 0:
        log_ratio, se, used = _log_ratio(target.lik, parts, theta_star, flat, n_rows_imp,
                                         np.random.default_rng(int(seeds[1])))  # fmt: skip
        pareto_k, log_w, ess = _psis(log_ratio - np.max(log_ratio))
        mean_is = np.exp(log_w) @ flat
        sd = flat.std(axis=0)
        shift = float(np.max(np.abs(mean_is - flat.mean(axis=0)) / np.maximum(sd, 1e-300)))
        stats["log_weight"] = log_w.reshape(chains, draws)
        info.update(pareto_k=pareto_k, is_ess=ess, is_shift_sd=shift, importance_rows=used,
                    log_ratio_se=se, is_mean=mean_is.tolist())  # fmt: skip
        # a Pareto k above 0.7 warns in fit's convergence checks (diagnostics.check_pareto_k)
        if pareto_k <= PARETO_K_MAX and shift > SHIFT_WARN:
            worst = int(np.argmax(np.abs(mean_is - flat.mean(axis=0)) / np.maximum(sd, 1e-300)))
            warnings.warn(
                f"method='laplace': the importance-weighted posterior mean of category {worst} "
                f"differs from the draws' mean by {shift:.2f} posterior sd (above {SHIFT_WARN}): "
                "the likelihood's quadratic approximation is off here; reweight the draws with "
                "np.exp(sample_stats['log_weight']) or use method='hmc'",
                UserWarning,
                stacklevel=3,
            )
    info.update(
        mode_seconds=mode_seconds,
        sampling_seconds=sampled - built,
        importance_seconds=time.perf_counter() - sampled,
        wall_time=time.perf_counter() - started,
    )
    return SamplerOutput(theta=out.theta, sample_stats=stats, info=info, extra=out.extra)


def _expansion_point(
    tally: Tally, alpha: np.ndarray | AdaptiveDirichlet, target: Any, max_iter: int = 30
) -> tuple[np.ndarray, Tally, dict[str, np.ndarray], int]:
    """The exact posterior's ALR mode, by Newton steps in theta: expand the likelihood at
    ``theta_t``, move to the mode of that surrogate's posterior (the prior kept exact), repeat.

    A fixed point is the exact mode (there the surrogate and the exact log-likelihood have the
    same gradient).  Each step costs one gradient and one Gram matrix of the tally; the inner
    mode search (:func:`bayesldp.bayes.hmc.targets._find_mode` on the ``2 (K - 1)`` pseudo-rows)
    costs ``O(K^3)`` per Newton step.  A step that lowers the exact log-density is halved in ALR
    coordinates.  Stops when the mode moves less than ``1e-3`` surrogate posterior sd.
    """
    z = np.log(target.alpha[:-1]) - np.log(target.alpha[-1])
    logp = float(target(z[None, :])[0][0])
    for it in range(1, max_iter + 1):
        theta = target.theta(z[None, :])[0][0]
        pseudo, parts = surrogate_tally(tally, theta, target.lik)
        inner = hmc._Target(pseudo, alpha)
        with np.errstate(all="ignore"):
            z_new, cov = hmc._find_mode(inner, z)
        sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        for _ in range(30):
            lp_new = float(target(z_new[None, :])[0][0])
            if np.isfinite(lp_new) and lp_new >= logp - 1e-9 * abs(logp):
                break
            z_new = 0.5 * (z + z_new)
        moved = float(np.max(np.abs(z_new - z) / sd))
        if moved < 1e-3:  # theta is the mode to 1e-3 sd: keep its expansion
            return theta, pseudo, parts, it
        z, logp = z_new, lp_new
    theta = target.theta(z[None, :])[0][0]
    pseudo, parts = surrogate_tally(tally, theta, target.lik)
    return theta, pseudo, parts, max_iter + 1


def _log_ratio(lik: Likelihood, parts: dict[str, np.ndarray], theta_star: np.ndarray,
               thetas: np.ndarray, max_rows: int,
               gen: np.random.Generator) -> tuple[np.ndarray, float, int]:  # fmt: skip
    """``log p(theta) - log p_surrogate(theta)`` (+ const) for thetas (S, K) and its s.e.

    With ``x_u = L_u . (theta - theta*) / mu_u*`` (exactly ``mu_u(theta) / mu_u* - 1`` on the
    simplex), ``ell(theta) - ell(theta*) = sum_u c_u (x_u - x_u^2 / 2) + R(theta)`` where the
    first sum is the quadratic expansion and ``R = sum_u c_u r_u``, ``r_u = log(1 + x_u) - x_u +
    x_u^2 / 2`` (about ``x_u^3 / 3``).  ``R`` is summed over every row when there are at most
    ``max_rows``, else estimated from ``max_rows`` rows drawn with probability ``c_u / n``
    (``(n / m) sum_i r_{u_i}``, unbiased; the difference estimator with a second-order Taylor
    control variate of Quiroz, Kohn, Villani and Tran, JASA 2019), so the cost per draw is
    ``O(max_rows K)`` whatever ``n``.  The surrogate's own log-likelihood differs from the
    quadratic by the pairs' quartic terms, added exactly.  Returns the log-ratio (S,), the
    largest standard error of ``R`` over the draws (0 when exact) and the rows read.
    """
    if lik.n_rows <= max_rows:
        idx = np.arange(lik.n_rows)
        weights = lik.counts
    else:
        idx = gen.choice(lik.n_rows, size=max_rows, replace=True, p=lik.counts / lik.n)
        weights = np.full(max_rows, lik.n / max_rows)
    rows = lik.rows_at(idx)
    mu_star = rows @ theta_star
    remainder = np.empty(thetas.shape[0])
    se = 0.0
    step = max(1, (1 << 22) // max(idx.size, 1))
    for start in range(0, thetas.shape[0], step):
        x = (thetas[start : start + step] @ rows.T) / mu_star - 1.0
        r = np.log1p(x) - x + 0.5 * x * x
        remainder[start : start + step] = r @ weights
        if idx.size < lik.n_rows:
            spread = float(np.max(r.std(axis=1)))
            se = max(se, lik.n * spread / math.sqrt(idx.size))
    y = thetas @ parts["e"].T - parts["m"]
    quadratic = -0.5 * (y * y) @ parts["lam"]
    return remainder + quadratic - _surrogate_loglik(parts, thetas), se, int(idx.size)


def _psis(log_ratio: np.ndarray) -> tuple[float, np.ndarray, float]:
    """Pareto-smoothed normalised log weights, their k and effective sample size.

    Where the tail fit is undefined (fewer than 5 draws, or NaN weights from ArviZ's smoothing,
    seen in :func:`bayesldp.loo` where the largest ratios tie) the raw normalised weights are
    returned with ``k = inf``, so fit's Pareto-k check warns instead of a NaN passing on."""
    from scipy.special import logsumexp

    from bayesldp.bayes._arviz import import_arviz

    az = import_arviz()
    log_w, k = None, math.inf
    if log_ratio.size >= 5:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ArviZ warns on few draws; k says it
            log_w, k = az.psislw(log_ratio, reff=1.0)
        log_w = np.asarray(log_w, dtype=float)
    if log_w is None or np.isnan(log_w).any() or np.isnan(k):
        log_w, k = log_ratio - logsumexp(log_ratio), math.inf
    return float(k), log_w, float(1.0 / np.sum(np.exp(2 * log_w)))
