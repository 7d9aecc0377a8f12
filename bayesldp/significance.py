"""Which categories are frequent: the oracle's significance test and the posterior's rule.

Two answers to "which items hold more than a share ``t`` of the population?" from the same
reports:

* :func:`frequent_items`, the significance threshold of Wang, Blocki, Li and Jha ("Locally
  Differentially Private Protocols for Frequency Estimation", USENIX Security 2017, section
  "Identifying frequent values"): the unbiased estimate ``f_x`` of each category is compared
  with the threshold ``t + Phi^{-1}(1 - alpha / K) sigma_x(t)`` (Bonferroni over the ``K``
  categories; ``t = 0`` is the paper's ``Phi^{-1}(1 - alpha/K) sqrt(Var*/n)``), or the
  one-sided p-values ``1 - Phi((f_x - t) / sigma_x(t))`` go through the Benjamini-Hochberg
  procedure (false discovery rate ``alpha``);
* :func:`posterior_frequent_items`, the Bayesian rule on a fit: the posterior probability
  ``P(theta_x > t | reports)`` of each category, the categories whose probability reaches a
  level, and the expected false discovery rate of that set, ``mean_{x in set} (1 - P_x)``
  (the posterior expected share of the set that is not above ``t``); or, given a target rate,
  the largest set (by decreasing probability) whose expected rate is at most it (Müller,
  Parmigiani, Robert and Rousseau, "Optimal Sample Size for Multiple Testing: The Case of Gene
  Expression Microarrays", JASA 2004).

``sigma_x(t)`` is the largest standard deviation of ``f_x`` over samples in which a share
``t`` holds ``x``.  The oracle's per-user estimate ``g_x(y)`` is unbiased, ``E[g_x | j] =
1[j = x]``; given the users' values (as the oracle's variance is: the share is the sample's,
Wang et al.'s frequency), ``n Var f_x = sum_j f_j Var(g_x | j)``, linear in the other shares once
``f_x = t`` is fixed, so its largest value is at a vertex:

.. math::

    n \\sigma_x(t)^2 = t\\,V_x(e_x) + (1 - t)\\,\\text{Var}^*_x,

with ``V_x(e_x)`` the variance when everyone holds ``x`` and ``Var*_x`` the largest variance
when no one does (:func:`bayesldp.bounds.var_star_by_category`).  For a pure protocol the
variance of ``f_x`` depends on the share of ``x`` only and this is its exact value.  The test is the
paper's normal approximation: at small ``n`` and small ``q*`` the support count's law is
skewed and the nominal level is approximate (measured in
``benchmarks/investigations/results/significance.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from bayesldp._validation import check_choice, check_open_unit, check_probability
from bayesldp.errors import InvalidInputError

if TYPE_CHECKING:
    import arviz

    from bayesldp.mechanisms.base import Mechanism
    from bayesldp.tally import Tally

__all__ = ["FrequentItems", "frequent_items", "posterior_frequent_items"]

CORRECTIONS = ("bonferroni", "bh")


@dataclass(frozen=True)
class FrequentItems:
    """The categories found frequent, and the numbers that decided it.

    Attributes
    ----------
    items : ndarray of int
        The categories found above ``threshold``, by decreasing estimate (frequentist) or
        probability (posterior).
    estimates : ndarray
        Per category: the unbiased estimate ``f_x`` (frequentist) or the posterior mean.
    scores : ndarray
        Per category: the one-sided p-value (frequentist; small is frequent) or the posterior
        probability ``P(theta_x > t | reports)`` (large is frequent).
    threshold : float
        ``t``: a category is frequent when its share exceeds it.
    rule : str
        How the set was chosen: ``"bonferroni"`` or ``"bh"`` at level ``alpha``, ``"level"`` or
        ``"fdr"`` for the posterior's rules.
    expected_fdr : float or None
        The posterior rule's expected false discovery rate of ``items`` (None for a test).
    """

    items: np.ndarray
    estimates: np.ndarray
    scores: np.ndarray
    threshold: float
    rule: str
    expected_fdr: float | None = None

    def __repr__(self) -> str:
        fdr = "" if self.expected_fdr is None else f", expected_fdr={self.expected_fdr:.3g}"
        return (f"FrequentItems(items={self.items.tolist()}, threshold={self.threshold:g}, "
                f"rule={self.rule!r}{fdr})")  # fmt: skip


def _check_threshold(value: Any) -> float:
    """A share ``t`` in ``[0, 1)``."""
    value = check_probability(value, "threshold", low_open=False)
    if value >= 1.0:
        raise InvalidInputError(f"threshold: must lie in [0, 1), got {value}")
    return value


def null_sd(mechanism: Mechanism, n: int, threshold: float) -> np.ndarray:
    """``sigma_x(t)`` for every category: the largest standard deviation of the unbiased
    estimate ``f_x`` over samples of ``n`` users in which a share ``t`` holds ``x`` (module
    docstring).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.significance import null_sd
    >>> null_sd(bayesldp.GRR(3, 1.0), 100, 0.0).round(4)  # sqrt(Var*/n)
    array([0.1122, 0.1122, 0.1122])
    """
    from bayesldp.mechanisms.base import PureProtocol

    if isinstance(mechanism, PureProtocol):  # the variance of f_x depends on theta_x alone
        var = np.asarray(mechanism.oracle_variance(np.full(mechanism.k, threshold), 1), float)
    else:
        var = largest_variance(mechanism, threshold)
    return np.sqrt(np.maximum(var, 0.0) / n)


def largest_variance(mechanism: Mechanism, threshold: float) -> np.ndarray:
    """``n sigma_x(t)^2 = t V_x(e_x) + (1 - t) Var*_x`` for every category, from
    the mechanism's oracle variance at the vertices (module docstring); ``K`` calls."""
    from bayesldp._validation import check_memory
    from bayesldp.bounds import var_star_by_category

    k = mechanism.k
    check_memory(8.0 * k * k, f"the variances of {mechanism!r}", "use fewer categories")
    var_star = var_star_by_category(mechanism)
    own = np.array([mechanism.oracle_variance(np.eye(k)[x], 1)[x] for x in range(k)])
    return threshold * own + (1.0 - threshold) * var_star


def _by_decreasing(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    items = np.flatnonzero(chosen)
    return items[np.argsort(-values[items], kind="stable")]


def frequent_items(tally: Tally, threshold: float = 0.0, alpha: float = 0.05,
                   correction: str = "bonferroni") -> FrequentItems:  # fmt: skip
    """The categories whose share is significantly above ``threshold`` (Wang et al. 2017).

    Each category's unbiased estimate ``f_x`` is tested against ``H0: theta_x <= t`` with the
    one-sided p-value ``1 - Phi((f_x - t) / sigma_x(t))`` (module docstring).
    ``correction="bonferroni"`` (the paper's) keeps the categories with a p-value at most
    ``alpha / K``, i.e. ``f_x >= t + Phi^{-1}(1 - alpha/K) sigma_x(t)``: the chance of any
    false find is at most ``alpha``.  ``correction="bh"`` applies Benjamini and Hochberg's
    step-up rule: the expected share of false finds among the finds is at most ``alpha``
    (more finds than Bonferroni when many categories are frequent).

    Parameters
    ----------
    tally : Tally
        Reports of one mechanism with an unbiased frequency oracle.
    threshold : float
        ``t`` in ``[0, 1)``; 0 (the default) asks which categories anyone holds.
    alpha : float
        The family-wise error rate (Bonferroni) or the false discovery rate (BH), in (0, 1).
    correction : {"bonferroni", "bh"}

    Returns
    -------
    FrequentItems
        ``scores`` are the p-values.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.OUE(6, 2.0)
    >>> tally = mech.simulate_tally([500, 300, 200, 0, 0, 0], rng=1)
    >>> bayesldp.frequent_items(tally).items
    array([0, 1, 2])
    """
    from bayesldp.estimators.oracle import check_tally, unbiased

    tally = check_tally(tally)
    threshold = _check_threshold(threshold)
    alpha = check_open_unit(alpha, "alpha")
    check_choice(correction, "correction", CORRECTIONS)
    f, _ = unbiased(tally)
    sd = null_sd(tally.mechanism, tally.n, threshold)
    p = stats.norm.sf((f - threshold) / sd)
    k = f.shape[0]
    if correction == "bonferroni":
        chosen = p <= alpha / k
    else:  # Benjamini-Hochberg: the largest r with p_(r) <= r alpha / K, and all below it
        order = np.argsort(p, kind="stable")
        passing = np.flatnonzero(p[order] <= alpha * np.arange(1, k + 1) / k)
        chosen = np.zeros(k, dtype=bool)
        if passing.size:
            chosen[order[: passing[-1] + 1]] = True
    return FrequentItems(_by_decreasing(f, chosen), f, p, threshold, correction)


def posterior_frequent_items(idata: arviz.InferenceData, threshold: float,
                             level: float | None = None,
                             fdr: float | None = None) -> FrequentItems:  # fmt: skip
    """The categories a posterior finds above ``threshold``, with the expected false
    discovery rate of the set.

    ``P_x = P(theta_x > t | reports)`` is the share of posterior draws above ``t``.  With
    ``level``, the set is ``{x : P_x >= level}``; with ``fdr``, the largest set of the
    categories taken by decreasing ``P_x`` whose expected false discovery rate ``mean_{x in
    set} (1 - P_x)`` is at most ``fdr`` (Müller et al. 2004).  Give one of the two (the default
    is ``level=0.95``).  Under a Dirichlet posterior every share is positive, so ``t`` must be
    above 0.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit of categories (``posterior["theta"]``).
    threshold : float
        ``t`` in ``(0, 1)``.
    level, fdr : float, optional
        In ``(0, 1)``.

    Returns
    -------
    FrequentItems
        ``scores`` are the probabilities ``P_x``, ``estimates`` the posterior means and
        ``expected_fdr`` the set's expected false discovery rate (0 for an empty set).

    Examples
    --------
    >>> import bayesldp
    >>> tally = bayesldp.GRR(5, 2.0).simulate_tally([600, 300, 100, 0, 0], rng=2)
    >>> idata = bayesldp.fit(tally, random_seed=3, progressbar=False)
    >>> found = bayesldp.posterior_frequent_items(idata, threshold=0.05)
    >>> found.items, found.expected_fdr < 0.05
    (array([0, 1, 2]), True)
    """
    threshold = check_open_unit(threshold, "threshold")
    if level is not None and fdr is not None:
        raise InvalidInputError("give level or fdr, not both")
    rule, value = ("fdr", fdr) if fdr is not None else ("level", 0.95 if level is None else level)
    value = check_open_unit(value, rule)
    posterior = getattr(idata, "posterior", None)
    if posterior is None or "theta" not in posterior:
        raise InvalidInputError("idata: expected a fit of categories (posterior['theta'])")
    theta = np.asarray(posterior["theta"], dtype=float)
    draws = theta.reshape(-1, theta.shape[-1])
    prob = (draws > threshold).mean(axis=0)
    mean = draws.mean(axis=0)
    order = np.argsort(-prob, kind="stable")
    running = np.cumsum(1.0 - prob[order]) / np.arange(1, prob.size + 1)
    if rule == "level":
        size = int(np.sum(prob >= value))
    else:
        passing = np.flatnonzero(running <= value)
        size = int(passing[-1] + 1) if passing.size else 0
    chosen = np.zeros(prob.size, dtype=bool)
    chosen[order[:size]] = True
    expected = float(running[size - 1]) if size else 0.0
    return FrequentItems(_by_decreasing(prob, chosen), mean, prob, threshold,
                         rule, expected)  # fmt: skip
