import itertools
import math
import time

import numpy as np
import pytest
from scipy import integrate
from scipy.special import gammaln, logsumexp

import bayesldp
from bayesldp import Tally
from bayesldp.bayes import Dirichlet
from bayesldp.bayes.exact import (
    TooManyComponentsError,
    _Packer,
    _Plan,
    exact_posterior,
    sample,
)

TOL = 1e-10


# ------------------------------------------------------------------------------ references
def brute_force(rows, counts, alpha):
    """Posterior mean, covariance and log evidence by enumerating every report's latent x.

    Independent of bayesldp.bayes.exact: one term per assignment x in K^n, weight
    prod_i L[u_i, x_i] * B(alpha + counts(x)) / B(alpha), component Dirichlet(alpha + counts(x)).
    """
    rows = np.asarray(rows, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    k = rows.shape[1]
    report_rows = np.repeat(np.arange(len(counts)), counts)
    xs = np.array(list(itertools.product(range(k), repeat=report_rows.size)), dtype=int)
    xs = xs.reshape(-1, report_rows.size)
    with np.errstate(divide="ignore"):
        loglik = np.log(rows[report_rows, xs]).sum(axis=1)
    m = np.stack([np.bincount(x, minlength=k) for x in xs])
    comps = alpha + m
    log_b0 = gammaln(alpha).sum() - gammaln(alpha.sum())
    logw = loglik + gammaln(comps).sum(axis=1) - gammaln(comps.sum(axis=1)) - log_b0
    log_evidence = logsumexp(logw)
    w = np.exp(logw - log_evidence)
    conc = comps.sum(axis=1)
    mean = w @ (comps / conc[:, None])
    second = np.einsum("m,mi,mj->ij", w / (conc * (conc + 1)), comps, comps)
    second += np.diag(w @ (comps / (conc * (conc + 1))[:, None]))
    return mean, second - np.outer(mean, mean), log_evidence


def rrrr_table_channel(k, subset, eps1, eps2):
    """RRRR channel written out case by case from its definition (Aydın and Yıldırım 2025)."""
    a, b = math.exp(eps1), math.exp(eps2)
    s = len(subset)
    m = k - s
    channel = np.zeros((k, k))
    for x in range(k):
        for y in range(k):
            if y in subset:
                channel[x, y] = a / (a + s) if y == x else 1 / (a + s)
            elif x in subset:
                channel[x, y] = 1 / ((a + s) * m)
            else:
                channel[x, y] = (a / (a + s)) * (b if y == x else 1) / (b + m - 1)
    return channel


def dense_tally(channel, reports):
    report_counts = np.bincount(reports, minlength=channel.shape[1])
    seen = np.flatnonzero(report_counts)
    return Tally(
        report_counts[seen],
        rows=channel[:, seen].T,
        stat=np.zeros(channel.shape[0]),
        family="hand-made",
    )


def assert_matches_brute(tally, alpha, strategy="auto", reference=None):
    post = exact_posterior(tally, alpha, strategy=strategy)
    mean, cov, log_ev = reference or brute_force(tally.rows, tally.counts, alpha)
    np.testing.assert_allclose(post.mean, mean, rtol=0, atol=TOL)
    np.testing.assert_allclose(post.cov, cov, rtol=0, atol=TOL)
    assert post.log_marginal_likelihood == pytest.approx(log_ev, abs=TOL)
    np.testing.assert_allclose(post.weights.sum(), 1.0, atol=1e-12)
    return post


# ------------------------------------------------------------------------------ GRR
@pytest.mark.parametrize("strategy", ["auto", "residual", "latent"])
@pytest.mark.parametrize(
    "eps, reports, alpha",
    [
        (1.0, [0, 0, 1, 2, 0, 1, 1], [1.0, 1.0, 1.0]),
        (0.3, [2, 2, 2, 2, 2, 2, 2, 2], [0.5, 0.5, 0.5]),
        (3.0, [0, 1, 2, 1, 0], [1.0, 2.5, 0.7]),
        (0.1, [1], [0.2, 3.0, 1.0]),
    ],
)
def test_grr_matches_latent_enumeration(eps, reports, alpha, strategy):
    mech = bayesldp.GRR(3, eps)
    assert_matches_brute(mech.tally(np.array(reports)), np.array(alpha), strategy)


def test_grr_components_follow_the_seed_formula():
    """REFERENCE section 5: j with 0 <= j_y <= c_y, w_j ∝ prod C(c_y,j_y)(p-q)^j_y q^(c_y-j_y) B."""
    mech = bayesldp.GRR(3, 0.8)
    report_counts = np.array([3, 1, 2])
    tally = mech.tally_from_report_counts(report_counts)
    alpha = np.array([0.5, 1.0, 2.0])
    post = exact_posterior(tally, alpha, strategy="residual")
    assert post.n_components == np.prod(report_counts + 1)
    p, q = mech.p, mech.q
    expected = {}
    for j in itertools.product(*[range(c + 1) for c in report_counts]):
        j = np.array(j)
        logw = sum(
            math.log(math.comb(c, jy)) + jy * math.log(p - q) + (c - jy) * math.log(q)
            for c, jy in zip(report_counts, j, strict=True)
        )
        logw += gammaln(alpha + j).sum() - gammaln(alpha.sum() + j.sum())
        expected[tuple(j)] = logw
    norm = logsumexp(list(expected.values()))
    got = {tuple(m): lw for m, lw in zip(post.exponents, post.log_weights, strict=True)}
    assert got.keys() == expected.keys()
    for key, lw in expected.items():
        assert got[key] == pytest.approx(lw - norm, abs=1e-12)
    np.testing.assert_array_equal(post.components, alpha + post.exponents)


# ------------------------------------------------------------------------------ RRRR and others
@pytest.mark.parametrize("strategy", ["auto", "residual", "latent"])
@pytest.mark.parametrize(
    "subset, eps1, eps2",
    [([0], 0.8, 0.6), ([1], 1.5, 0.2), ([0, 2], 0.7, 1.0), ([2], 0.3, 2.0)],
)
def test_rrrr_table_channel_matches_latent_enumeration(subset, eps1, eps2, strategy):
    channel = rrrr_table_channel(3, subset, eps1, eps2)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    reports = np.array([0, 1, 2, 2, 0, 1, 2, 2])
    assert_matches_brute(dense_tally(channel, reports), np.array([1.0, 0.5, 2.0]), strategy)


@pytest.mark.parametrize("subset", [[0], [1, 2], []])
def test_rrrr_mechanism_matches_latent_enumeration(subset):
    mech = bayesldp.RRRR(3, 1.0, subset=subset)
    reports = mech.perturb(np.array([0, 0, 1, 2, 2, 0, 1]), rng=5)
    assert_matches_brute(mech.tally(reports), np.array([0.5, 0.5, 0.5]))


def test_adaptive_rrrr_tally_with_two_subsets():
    first = bayesldp.RRRR(3, 1.0, subset=[0])
    second = bayesldp.RRRR(3, 1.0, subset=[1, 2], eps1=0.6)
    merged = first.tally(np.array([0, 1, 2, 2])) + second.tally(np.array([1, 0, 2, 1]))
    assert merged.mechanism is None
    assert_matches_brute(merged, np.array([1.0, 1.0, 1.0]))


def test_support_form_tally_matches_latent_enumeration():
    support = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)
    tally = Tally([2, 1, 3, 1], support=support, levels=(0.25, 0.75), stat=np.zeros(3), family="t")
    for strategy in ("residual", "latent"):
        assert_matches_brute(tally, np.array([1.0, 2.0, 0.5]), strategy)


def test_rows_with_zeros_and_uninformative_rows():
    # an exact channel (no privacy): the posterior is Dirichlet(alpha + counts)
    tally = dense_tally(np.eye(3), np.array([0, 0, 2, 1, 0]))
    post = exact_posterior(tally, [1.0, 2.0, 3.0])
    assert post.n_components == 1
    np.testing.assert_array_equal(post.components[0], [4.0, 3.0, 4.0])
    # a constant row carries no information: the posterior is the prior
    flat = Tally([4], rows=[[0.3, 0.3, 0.3]], stat=np.zeros(3), family="t")
    prior = Dirichlet([1.0, 2.0, 3.0])
    post = exact_posterior(flat, prior)
    np.testing.assert_allclose(post.mean, prior.mean, atol=1e-15)
    assert post.log_marginal_likelihood == pytest.approx(4 * math.log(0.3), abs=1e-12)
    _, cov, _ = brute_force(flat.rows, flat.counts, prior.alpha)
    np.testing.assert_allclose(post.cov, cov, atol=TOL)


def test_wide_support_rows_use_multiword_codes():
    # latent expansion: K = 32 exponents up to 3 each, 4^32 = 2^64 codes need two int64 words
    gen = np.random.default_rng(8)
    support = gen.random((3, 32)) < 0.6
    tally = Tally([1, 1, 1], support=support, levels=(0.3, 0.9), stat=np.zeros(32), family="t")
    assert _Packer(_Plan.build(tally, "latent", 10**6).caps).n_words == 2
    reference = brute_force(tally.rows, tally.counts, np.full(32, 0.7))
    post = assert_matches_brute(tally, np.full(32, 0.7), "latent", reference)
    assert post.n_components == math.comb(34, 3)
    assert_matches_brute(tally, np.full(32, 0.7), "residual", reference)


def test_larger_k_against_latent_enumeration():
    mech = bayesldp.GRR(5, 0.7)
    tally = mech.tally(np.array([0, 4, 4, 2, 1, 4]))
    assert_matches_brute(tally, np.full(5, 0.5))


# ------------------------------------------------------------------------------ integration
def simplex_moments(tally, alpha):
    """Evidence and first two moments by adaptive quadrature over the 2-simplex (K = 3)."""
    prior = Dirichlet(alpha)

    def density(t1, t0, f):
        theta = np.array([t0, t1, max(1.0 - t0 - t1, 0.0)])
        return f(theta) * math.exp(prior.logpdf(theta) + tally.loglik(theta))

    def integral(f):
        value, _ = integrate.dblquad(
            lambda t1, t0: density(t1, t0, f),
            0.0,
            1.0,
            0.0,
            lambda t0: 1.0 - t0,
            epsabs=1e-13,
            epsrel=1e-11,
        )
        return value

    z = integral(lambda th: 1.0)
    mean = np.array([integral(lambda th, i=i: th[i]) for i in range(3)]) / z
    e01 = integral(lambda th: th[0] * th[1]) / z
    e00 = integral(lambda th: th[0] ** 2) / z
    return math.log(z), mean, e00 - mean[0] ** 2, e01 - mean[0] * mean[1]


@pytest.mark.parametrize("which", ["grr", "rrrr"])
def test_against_numerical_integration_over_the_simplex(which):
    alpha = np.array([1.0, 1.5, 2.0])
    if which == "grr":
        tally = bayesldp.GRR(3, 1.2).tally(np.array([0, 0, 0, 1, 2, 0, 1, 0, 0, 2, 0, 1]))
    else:
        mech = bayesldp.RRRR(3, 2.0, subset=[1])
        tally = mech.tally(np.array([0, 0, 1, 2, 2, 0, 1, 2, 0, 0]))
    post = exact_posterior(tally, alpha)
    log_z, mean, var0, cov01 = simplex_moments(tally, alpha)
    assert post.log_marginal_likelihood == pytest.approx(log_z, abs=1e-8)
    np.testing.assert_allclose(post.mean, mean, atol=1e-8)
    assert post.cov[0, 0] == pytest.approx(var0, abs=1e-8)
    assert post.cov[0, 1] == pytest.approx(cov01, abs=1e-8)


def test_logpdf_is_prior_times_likelihood_over_evidence():
    mech = bayesldp.RRRR(4, 1.0, subset=[0, 3])
    tally = mech.tally(np.array([0, 1, 2, 3, 3, 3, 1, 0, 2]))
    prior = Dirichlet([0.5, 1.0, 1.5, 2.0])
    post = exact_posterior(tally, prior)
    theta = prior.sample(20, rng=0)
    expected = prior.logpdf(theta) + tally.loglik(theta) - post.log_marginal_likelihood
    np.testing.assert_allclose(post.logpdf(theta), expected, rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------ sampling
def test_draws_match_exact_moments_and_are_reproducible():
    mech = bayesldp.GRR(4, 1.0)
    tally = mech.simulate_tally([30, 10, 5, 0], rng=2)
    post = exact_posterior(tally, 0.5)
    n = 40_000
    draws = post.sample(n, rng=3)
    assert draws.shape == (n, 4)
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, atol=1e-12)
    se = post.sd / math.sqrt(n)
    assert np.all(np.abs(draws.mean(axis=0) - post.mean) <= 4 * se)
    emp_cov = np.cov(draws, rowvar=False)
    np.testing.assert_allclose(emp_cov, post.cov, atol=0.05 * post.sd.max() ** 2)
    np.testing.assert_array_equal(draws, post.sample(n, rng=3))


def test_backend_sample_contract():
    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(np.array([0, 1, 1, 2, 0, 0]))
    out = sample(tally, np.ones(3), draws=50, chains=3, random_seed=1)
    assert out.theta.shape == (3, 50, 3)
    assert set(out.sample_stats) == {"lp", "component"}
    assert all(v.shape == (3, 50) for v in out.sample_stats.values())
    assert np.all(np.isfinite(out.sample_stats["lp"]))
    assert out.info["backend"] == "exact" and out.info["n_components"] == 4 * 3 * 2
    again = sample(tally, np.ones(3), draws=50, chains=3, random_seed=1)
    np.testing.assert_array_equal(out.theta, again.theta)
    with pytest.raises(ValueError, match=r"'step_size'.*max_components"):
        sample(tally, np.ones(3), draws=5, chains=1, random_seed=1, step_size=0.1)


# ------------------------------------------------------------------------------ limits and errors
def test_too_many_components_fails_fast_with_the_count():
    mech = bayesldp.GRR(20, 1.0)
    tally = mech.simulate_tally(np.full(20, 100), rng=0)
    start = time.perf_counter()
    with pytest.raises(TooManyComponentsError, match=r"up to .* components.*method='hmc'"):
        exact_posterior(tally, 1.0)
    assert time.perf_counter() - start < 2.0
    small = bayesldp.GRR(3, 1.0).tally_from_report_counts([3, 4, 5])
    with pytest.raises(TooManyComponentsError, match=r"up to 91 components.*max_components = 40"):
        exact_posterior(small, 1.0, max_components=40, strategy="latent")
    with pytest.raises(NotImplementedError, match="'nuts' or 'sgld'"):
        exact_posterior(small, 1.0, max_components=50, strategy="residual")
    assert exact_posterior(small, 1.0, max_components=200).n_components == 4 * 5 * 6
    # bounds: residual 31*41*51 = 64821 components, latent C(122, 2) = 7381 (but costlier)
    larger = bayesldp.GRR(3, 1.0).tally_from_report_counts([30, 40, 50])
    with pytest.raises(TooManyComponentsError, match="term products"):
        exact_posterior(larger, 1.0, max_components=8000)
    post = exact_posterior(larger, 1.0, max_components=50_000)
    assert post.strategy == "latent" and post.n_components == 7381
    reference = exact_posterior(larger, 1.0, strategy="residual")
    assert reference.n_components == 64821
    np.testing.assert_allclose(post.mean, reference.mean, atol=1e-12)
    np.testing.assert_allclose(post.cov, reference.cov, atol=1e-12)


def test_bad_arguments():
    tally = bayesldp.GRR(3, 1.0).tally(np.array([0, 1]))
    with pytest.raises(TypeError, match=r"tally: expected a bayesldp\.Tally"):
        exact_posterior(np.array([0, 1]), 1.0)
    with pytest.raises(ValueError, match="strategy"):
        exact_posterior(tally, 1.0, strategy="fast")
    with pytest.raises(ValueError, match="prior: has 2 concentrations but the tally has K = 3"):
        exact_posterior(tally, [1.0, 1.0])
    with pytest.raises(ValueError, match="max_components: must be >= 1"):
        exact_posterior(tally, 1.0, max_components=0)
    with pytest.raises(ValueError, match="draws: must be >= 1"):
        exact_posterior(tally, 1.0).sample(0)


# ------------------------------------------------------------------------------ Bayes optimality
def test_posterior_mean_beats_frequentist_estimators_under_the_prior():
    """Lopuhaä-Zwakenberg et al. 2020, Theorem 3.1: the posterior mean minimises the prior-averaged
    squared error.

    theta ~ Dirichlet(1), n = 10 users from theta, GRR(3, eps = 1); squared error against
    theta.  Paired differences must be positive by more than 3 standard errors.
    """
    gen = np.random.default_rng(2024)
    mech = bayesldp.GRR(3, 1.0)
    reps, n = 150, 10
    errors = {name: np.empty(reps) for name in ("bayes", "mle", "norm_sub", "oracle")}
    for r in range(reps):
        theta = gen.dirichlet(np.ones(3))
        tally = mech.simulate_tally(gen.multinomial(n, theta), rng=gen)
        estimates = {"bayes": exact_posterior(tally, 1.0).mean}
        for name in ("mle", "norm_sub", "oracle"):
            estimates[name] = bayesldp.estimate(tally, name).frequencies
        for name, value in estimates.items():
            errors[name][r] = np.sum((value - theta) ** 2)
    for name in ("mle", "norm_sub", "oracle"):
        diff = errors[name] - errors["bayes"]
        assert diff.mean() > 3 * diff.std(ddof=1) / math.sqrt(reps), name
