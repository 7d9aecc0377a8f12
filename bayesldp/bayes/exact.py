"""The exact posterior of ``theta`` under a Dirichlet prior: a finite mixture of Dirichlets.

Lopuhaä-Zwakenberg, Li, Škorić and Li ("Improving Frequency Estimation under Local Differential
Privacy", WPES 2020; Theorem 3.1 and Appendix A, Proposition A.3) show that the posterior mean is
the MMSE estimator of ``theta`` and that, under a Dirichlet prior and a likelihood that is a product
of terms linear in ``theta``, the posterior is a finite mixture of Dirichlets.  This module computes
that mixture for any :class:`~bayesldp.Tally` (likelihood ``prod_u (L_u . theta)^{c_u}``).

The expansion
-------------
On the simplex ``sum_x theta_x = 1``, so every likelihood row can be written
``L_u . theta = a_u + r_u . theta`` with ``a_u = min_x L[u, x] >= 0`` and the residual
``r_u = L_u - a_u >= 0`` (zero at the row's minimum).  Expanding each power by the binomial and
multinomial theorems,

.. math::

    (a_u + r_u\\cdot\\theta)^{c_u} = \\sum_{e} \\frac{c_u!}{(c_u-|e|)!\\,\\prod_x e_x!}\\,
        a_u^{c_u-|e|} \\prod_x r_{u,x}^{e_x}\\, \\theta^{e},

(``e`` over the vectors supported on ``supp(r_u)`` with ``|e| <= c_u``), the likelihood becomes a
polynomial ``sum_m C_m theta^m`` with non-negative coefficients (no cancellation), and since
``E_{Dir(alpha)}[theta^m] = B(alpha + m) / B(alpha)``,

.. math::

    p(\\theta \\mid \\text{data}) = \\sum_m w_m\\, \\mathrm{Dir}(\\theta; \\alpha + m), \\qquad
    w_m \\propto C_m\\, \\frac{B(\\alpha + m)}{B(\\alpha)}.

Monomials with equal exponent vectors ``m`` are merged as the product is formed, so the number of
components is the number of distinct ``m``.  Interpretation: a latent indicator per report says
which term of its row generated it (the constant ``a_u``, or ``r_{u,x} theta_x`` for a category
``x``), and each component counts how often each category was so chosen.

Special cases (``strategy="residual"``, the default):

* GRR (Lopuhaä-Zwakenberg et al. 2020, Theorem 3.1): ``L_y = q + (p - q) e_y``, so
  ``a = q``, ``r = (p - q) e_y``, and the components are the ``j`` with ``0 <= j_y <= c_y``:
  ``w_j ∝ prod_y C(c_y, j_y) (p-q)^{j_y} q^{c_y-j_y} B(alpha+j)/B(alpha)``, ``prod_y (c_y + 1)``
  of them.  Any row ``const + slope * e_y`` works the same way (RRRR columns ``y in S``; tallies
  from several subsets merge coordinate-wise: ``prod_y (C_y + 1)`` components, ``C_y`` the reports
  whose residual sits on ``y``).
* RRRR columns ``y not in S`` take three levels: ``c_S`` on ``S``, ``c_C`` on ``S^c \\ {y}`` and
  ``c_C + c_y`` at ``y``.  Subtracting the minimum leaves a residual supported on ``S^c`` (when
  ``c_C >= c_S``; otherwise on ``S u {y}``), whose powers are expanded by the multinomial theorem
  over that block; the block powers of different reports merge into the same monomials.

``strategy="latent"`` is the plain latent-true-value expansion (``a_u = 0``, ``r_u = L_u``): each
report's latent true value ``x``; the count table ``J[u, x]`` with row sums ``c_u`` gives the
component ``Dir(alpha + sum_u J[u, :])`` with weight
``prod_u multinomial(c_u; J[u]) prod_x L[u,x]^{J[u,x]} B(alpha + colsum) / B(alpha)``, tables with
equal column sums merged: at most ``C(n + K - 1, K - 1)`` components.  ``"auto"`` takes
``"residual"`` unless only ``"latent"`` fits the component limit.

Cost and limits
---------------
The component count is bounded before anything is expanded (the number of integer vectors under
the per-category caps and the total degree, counted exactly by dynamic programming), and the
mixture is refused with :class:`TooManyComponentsError` when the bound exceeds ``max_components``
(default 2,000,000); the expansion also stops if it would form more than ``50 * max_components``
term products.  Everything is in log space.  Rows are rescaled to maximum 1 (likelihood rows are
only defined up to a factor); residual entries below ``8 * machine epsilon`` of that maximum are
treated as 0.  Memory: about ``24 * M * K`` bytes for ``M`` components (exponents, parameter
vectors and temporaries of the moments).

The posterior moments are exact (Facts A.1/A.2 of Lopuhaä-Zwakenberg et al. 2020, law of total
covariance): ``mean = sum_m w_m mu_m`` with ``mu_m = (alpha + m)/(A + |m|)``, ``A = sum alpha``, and
``cov = sum_m w_m [(diag(mu_m) - mu_m mu_m^T)/(A + |m| + 1) + (mu_m - mean)(mu_m - mean)^T]``.

The expansion itself (the rows' split, the component bound, the product in packed exponents) is
in :mod:`bayesldp.bayes.exact_expansion`; this module chooses the plan and makes the mixture,
its draws and, under the adaptive prior, the mixture over the prior's grid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from bayesldp._validation import RNGLike, as_generator, check_int
from bayesldp.bayes import _feedback
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.exact_expansion import _Packer, _Plan  # noqa: F401 - _Packer for tests
from bayesldp.bayes.prior import AdaptiveDirichlet, Dirichlet, as_dirichlet, dirichlet_draws
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.tally import Tally

#: the options ``fit(method="exact", ...)`` passes here (``method="auto"`` reads them too)
OPTIONS = ("max_components", "strategy")
DEFAULT_MAX_COMPONENTS = 2_000_000
STRATEGIES = ("auto", "residual", "latent")
_PAIR_BUDGET_FACTOR = 50


class TooManyComponentsError(NotSupportedError):
    """The exact mixture would have more components than ``max_components`` allows."""


# ---------------------------------------------------------------------------------------------
# result
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ExactPosterior:
    """The exact posterior ``sum_m w_m Dirichlet(alpha + m)`` of ``theta`` given a tally.

    Attributes
    ----------
    prior : Dirichlet
        The prior.
    exponents : ndarray of int, shape (M, K)
        The latent count vectors ``m``; the components are ``alpha + m``.
    log_weights : ndarray, shape (M,)
        Normalised log mixture weights (``logsumexp(log_weights) == 0``).
    log_marginal_likelihood : float
        ``log integral prod_u (L_u . theta)^{c_u} Dir(theta; alpha) dtheta`` with the tally's rows
        as stored (the multinomial coefficient of the reports is not included).
    strategy : str
        ``"residual"`` or ``"latent"`` (see the module docstring).
    """

    prior: Dirichlet
    exponents: np.ndarray
    log_weights: np.ndarray
    log_marginal_likelihood: float
    strategy: str
    mean: np.ndarray = field(init=False)
    cov: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        mean, cov = _mixture_moments(self.components, self.weights)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", cov)

    @property
    def k(self) -> int:
        """Number of categories K."""
        return self.prior.k

    @property
    def n_components(self) -> int:
        """Number of mixture components M."""
        return int(self.log_weights.shape[0])

    @property
    def components(self) -> np.ndarray:
        """Dirichlet parameter vectors ``alpha + m`` of the components, shape (M, K)."""
        return self.prior.alpha + self.exponents

    @property
    def weights(self) -> np.ndarray:
        """Mixture weights ``w_m`` (sum to 1), shape (M,)."""
        return np.exp(self.log_weights)

    @property
    def sd(self) -> np.ndarray:
        """Posterior standard deviations ``sqrt(diag(cov))``."""
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    def sample(self, draws: int, rng: RNGLike = None) -> np.ndarray:
        """Independent posterior draws, shape (draws, K).

        Each draw picks a component with probability ``w_m`` (inverse CDF of one uniform), then
        draws from that Dirichlet (log-space Gamma normalisation).
        """
        theta, _ = self._sample(check_int(draws, "draws"), as_generator(rng))
        return theta

    def _sample(self, size: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        cumulative = np.cumsum(self.weights)
        cumulative /= cumulative[-1]
        index = np.searchsorted(cumulative, gen.random(size), side="right")
        index = np.minimum(index, self.n_components - 1)
        theta = dirichlet_draws(gen, self.components[index])
        return theta, index

    def logpdf(self, theta: Any) -> np.ndarray | float:
        """Posterior log density ``log sum_m w_m Dir(theta; alpha + m)`` at theta (..., K).

        Cost O(M * K) per point.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1] != self.k:
            raise InvalidInputError(
                f"theta: expected last dimension {self.k}, got shape {theta.shape}"
            )
        flat = theta.reshape(-1, self.k)
        comps = self.components
        log_b = gammaln(comps).sum(axis=1) - gammaln(comps.sum(axis=1))
        with np.errstate(divide="ignore"):
            log_theta = np.log(flat)
        out = np.empty(flat.shape[0])
        for i in range(flat.shape[0]):  # loop over evaluation points, vectorised over components
            with np.errstate(invalid="ignore"):
                terms = np.where(comps == 1.0, 0.0, (comps - 1.0) * log_theta[i])
            out[i] = logsumexp(self.log_weights + terms.sum(axis=1) - log_b)
        out = out.reshape(theta.shape[:-1])
        return float(out) if out.ndim == 0 else out

    def __repr__(self) -> str:
        return (
            f"ExactPosterior(k={self.k}, components={self.n_components}, "
            f"strategy={self.strategy!r}, prior={self.prior!r})"
        )


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------
def exact_posterior(
    tally: Tally,
    alpha: Any = None,
    max_components: int = DEFAULT_MAX_COMPONENTS,
    strategy: str = "auto",
    *,
    progressbar: bool = False,
) -> ExactPosterior:
    """The exact posterior of ``theta`` given a tally, as a mixture of Dirichlets.

    Parameters
    ----------
    tally : Tally
        The reports (any mechanism, dense or support form).
    alpha : Dirichlet, float, array_like or None
        The Dirichlet prior (see :func:`bayesldp.bayes.as_dirichlet`); None is ``Dirichlet(1)``.
    max_components : int
        Refuse (:class:`TooManyComponentsError`) when the mixture may have more components.
    strategy : {"auto", "residual", "latent"}
        The expansion (module docstring); all give the same posterior.
    progressbar : bool
        A tqdm bar on standard error over the expansion's factor products (the long loop).

    Returns
    -------
    ExactPosterior
        With ``mean``, ``cov``, ``log_weights``, ``components`` and ``sample(draws, rng)``.

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> from bayesldp.bayes.exact import exact_posterior
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> post = exact_posterior(mech.tally(np.array([0, 0, 1, 2, 0])), 1.0)
    >>> post.n_components  # prod_y (c_y + 1) with report counts c = (3, 1, 1)
    16
    >>> round(float(post.mean.sum()), 12)
    1.0
    """
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    prior = as_dirichlet(alpha, tally.k)
    max_components = check_int(max_components, "max_components")
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")

    plan, exponents, log_coef = _expand(tally, max_components, strategy, progressbar)
    log_beta_ratio = (
        gammaln(prior.alpha + exponents).sum(axis=1)
        - gammaln(prior.alpha.sum() + exponents.sum(axis=1))
        - prior.log_beta()
    )
    log_unnorm = log_coef + log_beta_ratio
    log_norm = float(logsumexp(log_unnorm))
    return ExactPosterior(
        prior=prior,
        exponents=exponents,
        log_weights=log_unnorm - log_norm,
        log_marginal_likelihood=log_norm + plan.log_const,
        strategy=plan.strategy,
    )


def sample(
    tally: Tally,
    alpha: np.ndarray,
    *,
    draws: int,
    chains: int,
    random_seed: int | None,
    progressbar: bool = False,
    **options: Any,
) -> SamplerOutput:
    """Backend of ``bayesldp.fit(method="exact")``: independent draws from the exact posterior.

    Every draw is independent (a component by weight, then a Dirichlet), so ``r_hat`` is 1 up to
    Monte Carlo noise and the effective sample size is ``chains * draws``.

    Parameters
    ----------
    tally, alpha
        The data and the Dirichlet concentration vector.
    draws, chains : int
        Output shape ``(chains, draws, K)``.
    random_seed : int or None
        Seed of the numpy Generator (same seed, same draws).
    progressbar : bool
        A tqdm bar over the mixture's expansion (the long loop; the draws are one vectorised
        step).
    **options
        ``max_components`` (int) and ``strategy`` ("auto", "residual", "latent").

    Returns
    -------
    SamplerOutput
        ``sample_stats``: ``lp`` (log prior density + ``tally.loglik``, unnormalised, in theta
        space) and ``component`` (index of the mixture component of each draw).  ``info``: the
        exact posterior mean and covariance (for ``K <= 100``), the number of components, the
        strategy and the log marginal likelihood.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: method='exact' does not take {unknown[0]!r}; "
            "valid options are 'max_components' and 'strategy'"
        )
    start = time.perf_counter()  # tally, alpha, draws and chains were checked by fit()
    max_components = check_int(options.get("max_components", DEFAULT_MAX_COMPONENTS),
                               "max_components")  # fmt: skip
    strategy = options.get("strategy", "auto")
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    gen = as_generator(random_seed)
    if isinstance(alpha, AdaptiveDirichlet):
        return _sample_adaptive(tally, alpha, chains, draws, gen, max_components, strategy, start,
                                progressbar)  # fmt: skip
    post = exact_posterior(tally, alpha, max_components=max_components, strategy=strategy,
                           progressbar=progressbar)  # fmt: skip
    built = time.perf_counter()
    theta, index = post._sample(chains * draws, gen)
    with np.errstate(invalid="ignore"):
        lp = post.prior.logpdf(theta) + tally.loglik(theta)
    k = tally.k
    info: dict[str, object] = {
        "backend": "exact",
        "strategy": post.strategy,
        "n_components": post.n_components,
        "max_components": max_components,
        "log_marginal_likelihood": post.log_marginal_likelihood,
        "build_seconds": built - start,
        "wall_time": time.perf_counter() - start,
    }
    if k <= 100:
        info["exact_mean"] = post.mean.tolist()
        info["exact_cov"] = post.cov.tolist()
    return SamplerOutput(
        theta=theta.reshape(chains, draws, k),
        sample_stats={
            "lp": np.asarray(lp, dtype=float).reshape(chains, draws),
            "component": index.reshape(chains, draws).astype(np.int64),
        },
        info=info,
    )


def _component_weights(exponents: np.ndarray, log_coef: np.ndarray, a: float, k: int) -> np.ndarray:
    """The mixture's component weights given the concentration ``a`` (normalised to sum 1)."""
    logw = log_coef + _log_beta_ratios(exponents, np.array([a]), k)[0]
    w = np.exp(logw - logw.max())
    return w / w.sum()


def _adaptive_moments(exponents: np.ndarray, log_coef: np.ndarray, prior: AdaptiveDirichlet,
                      post_a: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Exact posterior mean and covariance of ``theta`` under the adaptive prior.

    Given node ``j`` the posterior is ``sum_c w_jc Dir(beta_jc)``, ``beta_jc = a_j + m_c``,
    ``B_jc = K a_j + |m_c|``, so ``E[theta] = sum_jc p_j w_jc beta_jc / B_jc`` and
    ``E[theta_x theta_y] = sum_jc p_j w_jc (beta_x beta_y + [x = y] beta_x) / (B (B + 1))``.
    Expanding ``beta = a_j + m_c`` leaves weighted sums over components, accumulated over the
    nodes in blocks (one pass like the evidence's); nodes under ``1e-12`` of the most probable
    one are left out.
    """
    keep = np.flatnonzero(post_a > 1e-12 * post_a.max())
    p = post_a[keep] / post_a[keep].sum()
    m = exponents.astype(float)
    size = m.sum(axis=1)
    d_bar, e_bar, ae_bar = (np.zeros(m.shape[0]) for _ in range(3))
    ad, ae, aae = 0.0, 0.0, 0.0  # sum p_j a_j^(0, 1, 2) times the node's sums of D or E
    for block in _node_blocks(keep.size, m.shape[0], budget=4_000_000):
        a = prior.a[keep[block]]
        logw = log_coef + _log_beta_ratios(exponents, a, k)
        w = np.exp(logw - logsumexp(logw, axis=1, keepdims=True)) * p[block, None]
        d = w / (k * a[:, None] + size)  # p_j w_jc / B_jc
        e = d / (k * a[:, None] + size + 1)  # p_j w_jc / (B_jc (B_jc + 1))
        d_bar += d.sum(axis=0)
        e_bar += e.sum(axis=0)
        ae_bar += a @ e
        ad += float(a @ d.sum(axis=1))
        ae += float(a @ e.sum(axis=1))
        aae += float((a * a) @ e.sum(axis=1))
    mean = ad + d_bar @ m
    cross = ae_bar @ m
    second = aae + cross[:, None] + cross[None, :] + (m * e_bar[:, None]).T @ m
    second[np.diag_indices(k)] += ae + e_bar @ m
    cov = second - np.outer(mean, mean)
    return mean, (cov + cov.T) / 2


def _log_beta_ratios(exponents: np.ndarray, a: np.ndarray, k: int) -> np.ndarray:
    """``log B(a_j 1 + m) - log B(a_j 1)`` for every ``a_j`` and row ``m``: shape (J, M).

    ``sum_x log (a)_{m_x} - log (K a)_{|m|}`` with rising factorials from a (J, max m + 1) table.
    """
    a = np.asarray(a, dtype=float)[:, None]
    top = int(exponents.max(initial=0))
    table = gammaln(a + np.arange(top + 1)) - gammaln(a)  # log (a)_v
    out = np.zeros((a.shape[0], exponents.shape[0]))
    for x in range(k):
        out += table[:, exponents[:, x]]
    totals = exponents.sum(axis=1)
    return out - (gammaln(k * a + totals) - gammaln(k * a))


def _node_blocks(n_nodes: int, n_components: int, budget: int = 20_000_000) -> list[np.ndarray]:
    """Grid nodes in blocks of at most ``budget / M`` (a (block, M) matrix of the default
    budget stays ~160 MB)."""
    size = max(1, budget // max(n_components, 1))
    return [np.arange(i, min(i + size, n_nodes)) for i in range(0, n_nodes, size)]


def _sample_adaptive(tally: Tally, prior: AdaptiveDirichlet, chains: int, draws: int,
                     gen: np.random.Generator, max_components: int, strategy: str,
                     start: float, progressbar: bool = False) -> SamplerOutput:  # fmt: skip
    """Exact draws under the adaptive prior: the mixture's exponents do not depend on the
    prior, so the evidence ``p(tally | a_j)`` of every grid node is one reweighting of them;
    ``a`` is drawn from ``p(a_j | tally) ∝ w_j p(tally | a_j)``, then a component given ``a``,
    then ``theta ~ Dirichlet(a + m)``."""
    plan, exponents, log_coef = _expand(tally, max_components, strategy, progressbar)
    k = tally.k
    evidence = np.concatenate([
        logsumexp(log_coef + _log_beta_ratios(exponents, prior.a[block], k), axis=1)
        for block in _node_blocks(prior.a.shape[0], exponents.shape[0])
    ])  # fmt: skip
    log_post_a = prior.log_w + evidence
    log_marginal = float(logsumexp(log_post_a))
    post_a = np.exp(log_post_a - log_marginal)
    built = time.perf_counter()
    size = chains * draws
    node = np.minimum(np.searchsorted(np.cumsum(post_a), gen.random(size) * post_a.sum(),
                                      side="right"), len(post_a) - 1)  # fmt: skip
    theta = np.empty((size, k))
    index = np.empty(size, dtype=np.int64)
    for j in np.unique(node):
        at = np.flatnonzero(node == j)
        cumulative = np.cumsum(_component_weights(exponents, log_coef, prior.a[j], k))
        pick = np.searchsorted(cumulative, gen.random(at.size) * cumulative[-1], side="right")
        index[at] = np.minimum(pick, len(cumulative) - 1)
        theta[at] = dirichlet_draws(gen, prior.a[j] + exponents[index[at]])
    with np.errstate(invalid="ignore", divide="ignore"):
        lp = prior.logpdf(theta) + tally.loglik(theta)
    info = {
        "backend": "exact",
        "prior": "adaptive",
        "strategy": plan.strategy,
        "n_components": int(exponents.shape[0]),
        "max_components": max_components,
        "log_marginal_likelihood": log_marginal + plan.log_const,
        "a_posterior": {"log_a": prior.log_a.tolist(), "probability": post_a.tolist()},
        "build_seconds": built - start,
        "wall_time": time.perf_counter() - start,
    }
    if k <= 100:
        mean, cov = _adaptive_moments(exponents, log_coef, prior, post_a, k)
        info["exact_mean"], info["exact_cov"] = mean.tolist(), cov.tolist()
    return SamplerOutput(
        theta=theta.reshape(chains, draws, k),
        sample_stats={"lp": lp.reshape(chains, draws), "component": index.reshape(chains, draws)},
        info=info,
        extra={"a": prior.a[node].reshape(chains, draws)},
    )


# ---------------------------------------------------------------------------------------------
# the expansion: which plan (the plan and the product itself are in exact_expansion.py)
# ---------------------------------------------------------------------------------------------
def _expand(
    tally: Tally, max_components: int, strategy: str, progressbar: bool = False
) -> tuple[_Plan, np.ndarray, np.ndarray]:
    """The cheapest plan that fits, and its expansion: exponents (M, K) and log coefficients."""
    budget = _PAIR_BUDGET_FACTOR * max_components
    plans = [
        _Plan.build(tally, name, max_components)
        for name in (("residual", "latent") if strategy == "auto" else (strategy,))
    ]
    fitting = [p for p in plans if p.bound <= max_components and p.cost <= budget]
    if not fitting:
        smallest = min(plans, key=lambda p: (p.bound, p.cost))
        if smallest.bound > max_components:
            raise TooManyComponentsError(
                f"exact posterior: the Dirichlet mixture for this tally (K = {tally.k}, "
                f"n = {tally.n}, {tally.n_rows} distinct rows) has up to {smallest.bound_text} "
                f"components, over max_components = {max_components}; use method='hmc', "
                "'nuts' or 'sgld' (or raise max_components if memory and time allow)"
            )
        raise TooManyComponentsError(
            f"exact posterior: expanding the Dirichlet mixture for this tally (K = {tally.k}, "
            f"n = {tally.n}, up to {smallest.bound_text} components) needs about "
            f"{smallest.cost:.3g} term products, over the budget of {_PAIR_BUDGET_FACTOR} x "
            f"max_components = {budget:.3g}; use method='hmc', 'nuts' or 'sgld'"
        )
    # cheapest: term products to form, plus the per-component work of weights, moments, draws
    plan = min(fitting, key=lambda p: p.cost + 10 * p.bound)
    bar = _feedback.progress_bar(plan.n_products, "exact mixture", progressbar)
    try:
        exponents, log_coef = plan.expand(bar)
    finally:
        bar.close()
    return plan, exponents, log_coef


def _mixture_moments(components: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of ``sum_m w_m Dir(beta_m)`` (law of total covariance)."""
    conc = components.sum(axis=1)
    mu = components / conc[:, None]
    mean = weights @ mu
    within_w = weights / (conc + 1.0)
    within = np.diag(within_w @ mu) - (mu * within_w[:, None]).T @ mu
    dev = mu - mean
    between = (dev * weights[:, None]).T @ dev
    cov = within + between
    return mean, (cov + cov.T) / 2
