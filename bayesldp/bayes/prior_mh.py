"""Exact sampling where the data are weak: independence Metropolis-Hastings with the prior as
proposal (``fit(method="prior_mh")``, and ``method="auto"`` where :func:`check` holds).

A proposal ``theta'`` is an independent draw from the prior (with its hyperparameter: the
smoothness ``lambda`` of :class:`~bayesldp.bayes.SmoothDensity`, the concentration ``a`` of
:class:`~bayesldp.bayes.AdaptiveDirichlet`); it replaces the current state ``theta`` with
probability ``min(1, L(theta') / L(theta))``, ``L`` the tally's likelihood
(``tally.loglik``): the prior's density cancels, so the chain's stationary law is the exact
posterior of ``(theta, hyperparameter)`` (Tierney 1994, "Markov chains for exploring posterior
distributions", Ann. Statist., section 2.3.3).  It mixes well exactly when the posterior is
close to the prior, which :func:`check` measures before sampling: ``M`` prior draws, their
log-likelihoods as importance log-weights, the Pareto k of their upper tail (Vehtari, Simpson,
Gelman, Yao and Gabry 2024, "Pareto smoothed importance sampling", JMLR) below
:data:`PARETO_K_MAX` and the normalised weights' efficiency ``ESS / M = 1 / (M sum_i w_i^2)``
above :data:`EFFICIENCY_MIN`, and the best draw's log-likelihood within :func:`reach_limit`
of the maximum likelihood's (``estimate(tally, "mle")``; draws tied on a vertex of the simplex
can fake a high efficiency where the posterior is elsewhere).  Where the data dominate (``n``
in the thousands) the weights pile on a few draws and the check fails after its first
:data:`FIRST_STAGE` draws, so it costs about a millisecond there (0.8-1.6 ms median on GRR,
K = 10, n = 5,000; 4-9 ms where it weighs all 4,000 draws,
``benchmarks/investigations/results/prior_mh_rule.md``).

The sampler is vectorised: each chain draws its proposals in blocks (numpy), evaluates
the tally's log-likelihood on the block's ``(B, K)`` array, and a compiled scalar loop over the
precomputed log-weights and log-uniforms accepts or rejects in order.  Each kept draw is the
state after ``thin`` proposals (``thin = ceil(THIN_PER_EFFICIENCY / efficiency)``, clipped to
``[1, MAX_THIN]``), about one effective draw per kept draw (smallest bulk ESS 2,410-3,615 of
4 x 1,000 draws on the weak-data tallies of that table); chains start from a draw resampled
(by importance weight) from ``M`` prior draws and discard ``tune`` kept-draw intervals.  No
step size, no divergences: ``sample_stats`` holds ``diverging`` (all False, for ArviZ and fit's
checks) and ``acceptance_rate`` (the share of the draw's ``thin`` proposals accepted).
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from bayesldp._validation import as_generator, check_int
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.prior import AdaptiveDirichlet, Dirichlet, LogWeightPrior, dirichlet_draws
from bayesldp.errors import InvalidInputError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

__all__ = ["OPTIONS", "RuleResult", "check", "prior_draws", "sample"]

#: the options ``fit(method="prior_mh", ...)`` passes here
OPTIONS = ("tune", "thin")
#: prior draws the rule weighs
RULE_DRAWS = 4000
#: draws of the rule's first stage: the rule stops there when their efficiency is below
#: :data:`FIRST_STAGE_FLOOR` (the data dominate; the full ``M`` would not reach the floor)
FIRST_STAGE = 250
FIRST_STAGE_FLOOR = 0.02
#: the Pareto k above which importance weights from the prior are unreliable (PSIS)
PARETO_K_MAX = 0.7
#: the least importance efficiency (ESS / M of the normalised weights) the rule accepts
EFFICIENCY_MIN = 0.1
#: kept draws are ``ceil(THIN_PER_EFFICIENCY / efficiency)`` proposals apart: bulk ESS per
#: proposal was 0.28-0.64 times the efficiency (benchmarks/investigations/prior_mh_rule.py), so
#: about one effective draw per kept draw
THIN_PER_EFFICIENCY = 3.0
MAX_THIN = 30
#: the best prior draw must be within ``reach_limit(K)`` of the maximum log-likelihood
REACH_TAIL = 1e-3
#: log-weights within TIE of the largest count as tied with it (:func:`_pareto_k`)
TIE = 1e-9
#: proposals per block (per chain), at most BLOCK_FLOATS / K (32 MB of draws a block)
BLOCK = 65_536
BLOCK_FLOATS = 4_194_304
#: default warm-up (kept-draw intervals discarded per chain)
DEFAULT_TUNE = 20


@dataclass(frozen=True)
class RuleResult:
    """The rule's verdict: ``ok``, the Pareto k, the efficiency, the draws weighed, the thinning
    it implies and the seconds it took; :attr:`reason` says it in a sentence."""

    ok: bool
    pareto_k: float
    efficiency: float
    draws: int
    thin: int
    seconds: float
    k: int = 2
    #: how far the best draw's log-likelihood is below the maximum likelihood's (NaN: not
    #: computed, the first stage stopped the rule or the maximum could not be found)
    reach: float = math.nan

    @property
    def reason(self) -> str:
        verdict = "independence MH from the prior" if self.ok else "NUTS"
        reach = "" if math.isnan(self.reach) else (
            f", best draw's log-likelihood {self.reach:.2f} below the maximum (<= "
            f"{reach_limit(self.k):.2f} needed)")  # fmt: skip
        return (f"{self.draws:,} prior draws as importance proposals: Pareto k "
                f"{self.pareto_k:.2f} (<= {PARETO_K_MAX} needed), efficiency ESS/M "
                f"{self.efficiency:.3f} (>= {EFFICIENCY_MIN} needed){reach}: "
                f"{verdict}")  # fmt: skip


def prior_draws(prior: Any, size: int, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """``size`` independent draws of ``theta`` (``(size, K)``) from ``prior`` (a Dirichlet
    concentration vector, :class:`~bayesldp.bayes.Dirichlet`,
    :class:`~bayesldp.bayes.AdaptiveDirichlet`, :class:`~bayesldp.bayes.SmoothDensity` or
    :class:`~bayesldp.bayes.LogisticNormal`) and its hyperparameter's draws: ``{"a": ...}``,
    ``{"smoothness": ...}`` or ``{"spread": ...}`` (``lambda``), as
    :func:`bayesldp.fit` names them; ``{}`` for a fixed Dirichlet."""
    if isinstance(prior, LogWeightPrior):  # SmoothDensity, LogisticNormal: theta and lambda
        theta, lam = prior.draws(size, rng)
        return theta, {prior.HYPER: lam}
    if isinstance(prior, AdaptiveDirichlet):
        a = rng.choice(prior.a, size=size, p=np.exp(prior.log_w))
        return dirichlet_draws(rng, np.broadcast_to(a[:, None], (size, prior.k))), {"a": a}
    alpha = prior.alpha if isinstance(prior, Dirichlet) else np.asarray(prior, dtype=float)
    return dirichlet_draws(rng, np.broadcast_to(alpha, (size, alpha.shape[0]))), {}


def _efficiency(loglik: np.ndarray) -> float:
    """``1 / (M sum_i w_i^2)`` of the normalised weights ``w ∝ exp(loglik)`` (0 if none is
    finite)."""
    top = np.max(loglik)
    if not np.isfinite(top):
        return 0.0
    w = np.exp(loglik - top)
    w /= w.sum()
    return float(1.0 / (loglik.shape[0] * (w @ w)))


def _pareto_k(loglik: np.ndarray) -> float:
    """PSIS's k of the importance log-weights ``loglik`` (``-inf`` for weights of zero).

    The weights ``L(theta) / Z`` are bounded by the likelihood's maximum; where the prior puts
    mass on a plateau of that maximum (a vertex of the simplex under the smoothness prior's
    wide slope, where every draw's likelihood is the same number) the whole tail PSIS fits is
    one value (to :data:`TIE` in log weight, the rounding of ``tally.loglik``) and its generalised
    Pareto fit breaks down (``inf``): a tail tied at its bound is the lightest there is, read as
    ``k = -inf``."""
    from bayesldp.bayes.laplace import _psis

    finite = np.isfinite(loglik)
    lw = np.where(finite, loglik, np.min(loglik[finite]) - 745.0)
    lw = lw - lw.max()
    tail = math.ceil(min(0.2 * lw.shape[0], 3 * math.sqrt(lw.shape[0])))  # PSIS's tail length
    if tail > 0 and np.count_nonzero(lw > -TIE) > tail:
        return -math.inf
    return _psis(lw)[0]


def reach_limit(k: int) -> float:
    """Half the ``1 - REACH_TAIL`` quantile of chi-square with ``K - 1`` degrees of freedom: the
    posterior's bulk lies within it of the maximum log-likelihood (Wilks), so prior draws whose
    best falls further below never reached the posterior (ties at a vertex can fake a high
    efficiency there)."""
    from scipy.stats import chi2

    return 0.5 * float(chi2.isf(REACH_TAIL, max(k - 1, 1)))


def _max_loglik(tally: Tally) -> float:
    """The log-likelihood at the maximum-likelihood estimate (``estimate(tally, "mle")``), NaN
    where that fails."""
    from bayesldp.estimators import estimate

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the estimator's own notes are not fit's
            theta = np.asarray(estimate(tally, "mle").frequencies, dtype=float)
        return float(Likelihood(tally).loglik(theta))
    except Exception:  # a tally the estimator does not take: no guard
        return math.nan


def _thin(efficiency: float) -> int:
    if efficiency <= 0:
        return MAX_THIN
    return int(min(MAX_THIN, max(1, math.ceil(THIN_PER_EFFICIENCY / efficiency))))


def check(tally: Tally, prior: Any, rng: np.random.Generator,
          draws: int = RULE_DRAWS) -> RuleResult:  # fmt: skip
    """The rule (module docstring): sample by independence MH from the prior when ``draws``
    prior draws weighted by the likelihood have Pareto k <= :data:`PARETO_K_MAX` and
    efficiency >= :data:`EFFICIENCY_MIN`.  A first stage of :data:`FIRST_STAGE` draws stops
    the check (``ok`` False) when its efficiency is below :data:`FIRST_STAGE_FLOOR`."""
    started = time.perf_counter()
    loglik_of = Likelihood(tally).loglik
    first = min(FIRST_STAGE, draws)
    theta, _ = prior_draws(prior, first, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = loglik_of(theta)
    eff = _efficiency(loglik)
    if eff < FIRST_STAGE_FLOOR or first == draws:
        k = _pareto_k(loglik) if eff > 0 else math.inf
        ok = first == draws and k <= PARETO_K_MAX and eff >= EFFICIENCY_MIN
        return RuleResult(ok, k, eff, first, _thin(eff), time.perf_counter() - started, tally.k)
    more, _ = prior_draws(prior, draws - first, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = np.concatenate([loglik, loglik_of(more)])
    eff = _efficiency(loglik)
    k = _pareto_k(loglik)
    ok = bool(k <= PARETO_K_MAX and eff >= EFFICIENCY_MIN)
    reach = _max_loglik(tally) - float(np.max(loglik)) if ok else math.nan
    ok = ok and not reach > reach_limit(tally.k)
    return RuleResult(ok, k, eff, draws, _thin(eff), time.perf_counter() - started, tally.k,
                      reach)  # fmt: skip


@njit(cache=True, nogil=True)
def _accept(loglik: np.ndarray, log_u: np.ndarray, current: float, state: np.ndarray,
            accepted: np.ndarray) -> float:  # fmt: skip
    """Independence MH over one block: proposal ``j`` (index ``j + 1``; 0 is the state carried
    in, of log-likelihood ``current``) is accepted when ``log_u[j] < loglik[j] - current``.
    Writes the state's index after each proposal to ``state`` and whether it moved to
    ``accepted``; returns the final state's log-likelihood."""
    index = 0
    for j in range(loglik.shape[0]):
        if log_u[j] < loglik[j] - current:
            index = j + 1
            current = loglik[j]
            accepted[j] = True
        else:
            accepted[j] = False
        state[j] = index
    return current


def _one_chain(loglik_of: Any, prior: Any, rng: np.random.Generator, start: np.ndarray,
               start_extra: dict, start_loglik: float, keep: int, tune: int,
               thin: int) -> tuple[np.ndarray, dict, np.ndarray]:  # fmt: skip
    """``keep`` draws of one chain after ``tune`` discarded intervals of ``thin`` proposals
    (blocks hold whole intervals, so each kept draw is the state at its block's interval end)."""
    theta_out = np.empty((tune + keep, start.shape[0]))
    extra_out = {name: np.empty(tune + keep) for name in start_extra}
    accept_out = np.empty(tune + keep)
    cur_theta, cur_extra, cur_ll = start, dict(start_extra), start_loglik
    per_block = max(1, min(BLOCK, BLOCK_FLOATS // start.shape[0]) // thin)  # (B, K) a block
    done = 0  # intervals done
    while done < tune + keep:
        n_int = min(per_block, tune + keep - done)
        size = n_int * thin
        theta, extra = prior_draws(prior, size, rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            loglik = loglik_of(theta)
        log_u = np.log(rng.random(size))
        state = np.empty(size, dtype=np.int64)
        accepted = np.empty(size, dtype=np.bool_)
        cur_ll = _accept(loglik, log_u, cur_ll, state, accepted)
        ends = state[thin - 1 :: thin]  # the state at each interval's end (0: carried in)
        moved = ends > 0
        out = slice(done, done + n_int)
        theta_out[out] = np.where(moved[:, None], theta[np.maximum(ends - 1, 0)], cur_theta)
        for name in extra_out:
            extra_out[name][out] = np.where(moved, extra[name][np.maximum(ends - 1, 0)],
                                            cur_extra[name])  # fmt: skip
        accept_out[out] = accepted.reshape(n_int, thin).mean(axis=1)
        if state[-1] > 0:
            cur_theta = theta[state[-1] - 1]
            cur_extra = {name: extra[name][state[-1] - 1] for name in extra}
        done += n_int
    return theta_out[tune:], {n: v[tune:] for n, v in extra_out.items()}, accept_out[tune:]


def sample(
    tally: Tally,
    alpha: Any,
    *,
    draws: int,
    chains: int,
    random_seed: Any,
    progressbar: bool = False,
    **options: Any,
) -> SamplerOutput:
    """Draw from the posterior by independence Metropolis-Hastings with the prior as proposal.

    Parameters
    ----------
    tally : Tally
        The reports.
    alpha : array of float, Dirichlet, AdaptiveDirichlet, SmoothDensity or LogisticNormal
        The prior (also the proposal).
    draws, chains : int
        Draws kept per chain and number of chains.
    random_seed : int, Generator or None
        Seed of the Generator that draws the rule's check, the starts and (through
        ``Generator.spawn``) each chain's proposals.
    progressbar : bool
        Ignored (a fit of this kind takes a fraction of a second where the rule holds).
    **options
        ``tune`` (int, default :data:`DEFAULT_TUNE`): kept-draw intervals discarded per chain;
        ``thin`` (int >= 1; default from the efficiency of :func:`check`'s draws,
        ``ceil(3 / efficiency)`` clipped to ``[1, 30]``): proposals per kept draw.

    Returns
    -------
    SamplerOutput
        ``theta`` (chains, draws, K); ``extra["a"]``, ``extra["smoothness"]`` or
        ``extra["spread"]`` under the adaptive, smoothness and logistic-normal priors;
        sample_stats ``diverging`` (False) and
        ``acceptance_rate``; ``info`` with the rule's Pareto k, efficiency and the overall
        acceptance rate.
    """
    started = time.perf_counter()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of method 'prior_mh'; valid: {list(OPTIONS)}"
        )
    tune = check_int(options.get("tune", DEFAULT_TUNE), "tune", 0)
    rng = as_generator(random_seed)
    # the rule's draws: its numbers for info, and the chains' starts resampled from them
    loglik_of = Likelihood(tally).loglik  # built once (tally.loglik builds it per call)
    pool, pool_extra = prior_draws(alpha, RULE_DRAWS, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        pool_ll = loglik_of(pool)
    eff = _efficiency(pool_ll)
    k_hat = _pareto_k(pool_ll) if eff > 0 else math.inf
    thin = options.get("thin")
    thin = _thin(eff) if thin is None else check_int(thin, "thin", 1)
    if not np.isfinite(np.max(pool_ll)):
        raise InvalidInputError(
            "prior_mh: no prior draw of 4,000 has a positive likelihood; use method='hmc'"
        )
    w = np.exp(pool_ll - np.max(pool_ll))
    starts = rng.choice(RULE_DRAWS, size=chains, p=w / w.sum())
    children = rng.spawn(chains)
    k = pool.shape[1]
    theta = np.empty((chains, draws, k))
    extra = {name: np.empty((chains, draws)) for name in pool_extra}
    accept = np.empty((chains, draws))
    for c in range(chains):
        s = starts[c]
        theta[c], ex, accept[c] = _one_chain(
            loglik_of, alpha, children[c], pool[s], {n: v[s] for n, v in pool_extra.items()},
            float(pool_ll[s]), draws, tune, thin,
        )  # fmt: skip
        for name in extra:
            extra[name][c] = ex[name]
    stats = {"diverging": np.zeros((chains, draws), dtype=bool), "acceptance_rate": accept}
    info = {
        "backend": "bayesldp.prior_mh",
        "sampler": "independence Metropolis-Hastings with the prior as proposal",
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "thin": thin,
        "rule_pareto_k": k_hat,
        "rule_efficiency": eff,
        "acceptance": float(accept.mean()),
        "random_seed": random_seed if isinstance(random_seed, numbers.Integral) else None,
        "wall_time": time.perf_counter() - started,
    }
    return SamplerOutput(theta=theta, sample_stats=stats, info=info, extra=extra)
