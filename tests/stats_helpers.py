"""Seeded statistical checks shared by the tests."""

from __future__ import annotations

import numpy as np
from scipy import stats


def assert_matches_distribution(observed_counts, probabilities, *, p_min=1e-4, min_expected=5):
    """Chi-square goodness of fit of counts to probabilities (bins with tiny expectation pooled)."""
    observed = np.asarray(observed_counts, dtype=float)
    probs = np.asarray(probabilities, dtype=float)
    assert np.isclose(probs.sum(), 1.0), probs.sum()
    expected = probs * observed.sum()
    small = expected < min_expected
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        keep = expected > 0
        observed, expected = observed[keep], expected[keep]
    if observed.size < 2:
        return
    result = stats.chisquare(observed, expected)
    assert result.pvalue > p_min, f"chi-square p = {result.pvalue:.2e}"


def assert_chi_square_fit_with_power(observed, expected, wrong, *, alpha=1e-3, power=0.999):
    """``observed`` counts (n draws) fit the probabilities ``expected`` by Pearson's chi-square
    at level ``alpha``, and the test has at least ``power`` against the alternative ``wrong``
    (noncentral chi-square, noncentrality ``n sum (wrong - expected)^2 / expected``), so a pass
    says something."""
    observed = np.asarray(observed, dtype=float)
    expected, wrong = np.asarray(expected, dtype=float), np.asarray(wrong, dtype=float)
    n = observed.sum()
    df = expected.size - 1
    critical = stats.chi2.ppf(1 - alpha, df)
    noncentrality = n * np.sum((wrong - expected) ** 2 / expected)
    assert stats.ncx2.sf(critical, df, noncentrality) > power  # the stated power
    statistic = np.sum((observed - n * expected) ** 2 / (n * expected))
    assert statistic < critical, (
        f"chi-square {statistic:.1f} above {critical:.1f} (df {df}); counts {observed.astype(int)}"
    )


def rank_law_of_misscaled_posterior(scale, bins=10):
    """Bin probabilities of an SBC rank when the draws' spread is ``scale`` times the
    posterior's (a normal posterior; the truth's quantile among the draws is
    ``Phi(z / scale)``, ``z ~ N(0, 1)``): ``scale < 1`` too narrow (a U shape), ``> 1`` too wide."""
    edges = stats.norm.ppf(np.linspace(0.0, 1.0, bins + 1)) * scale
    return np.diff(stats.norm.cdf(edges))


def assert_sbc_ranks_uniform(ranks, max_rank, *, bins=10, alpha=1e-3, scale=0.75, power=0.9):
    """Simulation-based calibration ranks (``(L, C)``, ``C`` quantities, each in
    ``0..max_rank``) uniform by Pearson's chi-square per quantity, at family-wise level
    ``alpha`` (Bonferroni over the ``C`` quantities), with at least ``power`` against draws
    ``scale`` times as spread out as the posterior (:func:`rank_law_of_misscaled_posterior`)."""
    from bayesldp.bayes.calibration import rank_histogram

    ranks = np.asarray(ranks)
    counts = rank_histogram(ranks, max_rank, bins)
    uniform = np.full(bins, 1.0 / bins)
    wrong = rank_law_of_misscaled_posterior(scale, bins)
    for column in counts.T:
        assert_chi_square_fit_with_power(column, uniform, wrong, alpha=alpha / ranks.shape[1],
                                         power=power)  # fmt: skip


def assert_unbiased_with_variance(estimates, truth, variance, *, z=4.0, rel_var=0.10):
    """Monte Carlo mean within z standard errors of truth; empirical variance within rel_var."""
    estimates = np.asarray(estimates, dtype=float)
    reps = estimates.shape[0]
    mean = estimates.mean(axis=0)
    se = np.sqrt(np.asarray(variance) / reps)
    assert np.all(np.abs(mean - truth) <= z * se), (mean - truth) / se
    emp_var = estimates.var(axis=0, ddof=1)
    rel = emp_var / variance - 1
    assert np.all(np.abs(rel) <= rel_var), rel


def assert_divergence_rate(diverging, rate=1e-3, p_min=1e-4):
    """Divergent transitions are random: instead of "none", the count must be one that a run
    diverging at ``rate`` per draw exceeds with probability below ``p_min`` (the binomial
    ``1 - p_min`` quantile; at the default 1e-3 per draw: at most 3 of 1,000, 14 of 4,000,
    29 of 16,000 draws)."""
    diverging = np.asarray(diverging)
    limit = int(stats.binom.ppf(1 - p_min, diverging.size, rate))
    count = int(diverging.sum())
    assert count <= limit, f"{count} divergent draws of {diverging.size}, above {limit}"


def assert_derivatives_match_differences(target, z, h=1e-6, rel_grad=1e-6, rel_hess=1e-5,
                                         abs_grad=0.0):  # fmt: skip
    """An HMC target's gradient and Hessian at ``z`` against central differences of its
    log-density and gradient (``target(z[None, :]) -> (logp, grad)``, ``target.hessian(z)``;
    the Hessian only where the target has one: the compiled targets do not)."""
    import pytest

    _, grad = target(z[None, :])
    hess = target.hessian(z) if hasattr(target, "hessian") else None
    for i in range(z.shape[0]):
        dz = np.zeros_like(z)
        dz[i] = h
        lp_plus, g_plus = target((z + dz)[None, :])
        lp_minus, g_minus = target((z - dz)[None, :])
        diff = (lp_plus[0] - lp_minus[0]) / (2 * h)
        assert grad[0, i] == pytest.approx(diff, rel=rel_grad, abs=abs_grad)
        if hess is not None:
            np.testing.assert_allclose(hess[:, i], (g_plus[0] - g_minus[0]) / (2 * h),
                                       rtol=rel_hess)  # fmt: skip


def assert_prior_draws_match_pymc(prior, tally, columns, size=4000, seeds=(11, 12)):
    """``prior.sample`` and PyMC's prior draws of theta from ``build_model(tally, prior)``
    agree: the means of theta at ``columns`` and of its largest entry, each within 4 standard
    errors of the difference (seeded)."""
    import pymc as pm

    from bayesldp.bayes import build_model

    ours = prior.sample(size, rng=seeds[0])
    with build_model(tally, prior):
        theirs = pm.sample_prior_predictive(size, var_names=["theta"], random_seed=seeds[1])
    theirs = theirs.prior["theta"].values.reshape(-1, prior.k)
    for a, b in [*((ours[:, c], theirs[:, c]) for c in columns),
                 (ours.max(axis=1), theirs.max(axis=1))]:  # fmt: skip
        se = np.sqrt(a.var() / a.size + b.var() / b.size)
        assert abs(a.mean() - b.mean()) < 4 * se
    np.testing.assert_allclose(ours.sum(axis=1), 1.0)


def rrrr_and_grr_tallies(seed: int, n: int = 100_000) -> tuple:
    """RRRR (K = 10, S = {0, 1, 2}, eps = 1, eps1 = 0.8) and GRR (eps = 1) tallies of one
    population of ``n`` users drawn from Dirichlet(1) (the quickstart's setting at 100,000)."""
    import bayesldp

    gen = np.random.default_rng([seed, 7])
    counts = gen.multinomial(n, gen.dirichlet(np.ones(10)))
    rrrr = bayesldp.RRRR(k=10, epsilon=1.0, subset=[0, 1, 2], eps1=0.8)
    grr = bayesldp.GRR(10, 1.0)
    return rrrr.simulate_tally(counts, rng=gen), grr.simulate_tally(counts, rng=gen)
