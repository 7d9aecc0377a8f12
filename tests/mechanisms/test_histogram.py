import math

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms.base import PureProtocol
from bayesldp.mechanisms.histogram import optimal_threshold, the_support_probabilities
from tests.stats_helpers import assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]
CLASSES = [bayesldp.SHE, bayesldp.THE]


def log_density(v, x, eps):
    """Exact log density of a report v (n, k) given true value x, from scipy's Laplace."""
    onehot = np.zeros(v.shape[1])
    onehot[x] = 1.0
    return stats.laplace.logpdf(v - onehot, scale=2 / eps).sum(axis=1)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_realised_epsilon_is_tight(cls, k, eps):
    mech = cls(k, eps)
    assert mech.realised_epsilon() <= eps * (1 + 1e-9)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9)
    with pytest.raises(bayesldp.NotSupportedError):
        _ = mech.channel


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_realised_epsilon_reads_the_noise_density(cls, factor):
    """A mechanism whose noise is narrower (wider) than 2/eps realises more (less) than eps:
    the realised epsilon is computed from the density, not from the requested budget."""

    class Miscalibrated(cls):
        @property
        def scale(self):
            return factor * 2.0 / self.epsilon

    mech = Miscalibrated(5, 1.0)
    assert mech.realised_epsilon() == pytest.approx(1.0 / factor, rel=1e-12)
    # the noise density the check reads is the one perturb draws from
    noise = mech.perturb(np.zeros(200_000, dtype=int), rng=3)[:, 1]
    assert stats.kstest(noise, stats.laplace(scale=mech.scale).cdf).pvalue > 1e-3
    t = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(
        mech.noise_logpdf(t), stats.laplace.logpdf(t, scale=mech.scale), rtol=1e-12
    )


@pytest.mark.parametrize("eps", EPSILONS)
def test_density_ratio_never_exceeds_realised_epsilon(eps):
    # Privacy loss of inputs 0 vs 1, evaluated with scipy on a grid and at random points.
    mech = bayesldp.SHE(3, eps)
    grid = np.linspace(-3.0, 4.0, 141)
    g0, g1 = np.meshgrid(grid, grid, indexing="ij")
    v_grid = np.column_stack([g0.ravel(), g1.ravel(), np.zeros(g0.size)])
    v_rand = np.random.default_rng(0).normal(0.5, 3.0, size=(20_000, 3))
    for v in (v_grid, v_rand):
        loss = log_density(v, 0, eps) - log_density(v, 1, eps)
        assert np.abs(loss).max() <= mech.realised_epsilon() * (1 + 1e-9)
    loss = log_density(v_grid, 0, eps) - log_density(v_grid, 1, eps)
    assert loss.max() == pytest.approx(mech.realised_epsilon(), rel=1e-9)  # attained: tight
    # and on the audit event the ratio is exactly e^eps
    event = mech.audit_event(v_grid, 0, 1)
    np.testing.assert_allclose(loss[event], eps, rtol=1e-9)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("eps", [0.5, 2.0, 10.0])
def test_tally_rows_are_the_exact_density_ratios(cls, eps):
    mech = cls(4, eps)
    x = np.arange(300) % 4
    reports = mech.perturb(x, rng=8)
    rows = mech.likelihood_rows(reports)
    exact = np.column_stack([log_density(reports, j, eps) for j in range(4)])
    diff = np.log(rows) - exact  # a per-report constant
    np.testing.assert_allclose(diff - diff[:, :1], 0.0, atol=1e-9)
    assert rows.max() == pytest.approx(1.0) and rows.min() >= math.exp(-eps) * (1 - 1e-12)
    # the tally holds exactly these rows with their multiplicities
    tally = mech.tally(reports)
    assert not tally.is_support_form and tally.n == 300
    uniq, counts = np.unique(rows, axis=0, return_counts=True)
    np.testing.assert_array_equal(tally.rows, uniq)
    np.testing.assert_array_equal(tally.counts, counts)
    thetas = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    exact_ll = np.log(np.exp(exact) @ thetas.T).sum(axis=0)
    ll = tally.loglik(thetas)
    assert ll[0] - ll[1] == pytest.approx(exact_ll[0] - exact_ll[1], rel=1e-9)


@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_noise_is_laplace(eps):
    # 400,000 draws: the KS test detects a 5% error in the noise scale
    n = 400_000
    mech = bayesldp.SHE(3, eps)
    reports = mech.perturb(np.zeros(n, dtype=int), rng=4)
    law = stats.laplace(scale=2 / eps)
    assert stats.kstest(reports[:, 0] - 1.0, law.cdf).pvalue > 1e-4
    assert stats.kstest(reports[:, 2], law.cdf).pvalue > 1e-4
    # coordinates are independent: correlation of two noise columns is ~ 0
    r = np.corrcoef(reports[:, 1], reports[:, 2])[0, 1]
    assert abs(r) < 4 / math.sqrt(n)


@pytest.mark.parametrize("cls", CLASSES)
def test_oracle_unbiased_and_variance_formula(cls):
    mech = cls(8, 1.0)
    true_counts = np.array([150, 100, 60, 40, 30, 20, 0, 0])
    n = true_counts.sum()
    theta = true_counts / n
    gen = np.random.default_rng(5)
    x = np.repeat(np.arange(8), true_counts)
    est = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen))) for _ in range(4000)]
    )
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


def test_she_variance_and_stat():
    mech = bayesldp.SHE(5, 2.0)
    np.testing.assert_allclose(mech.oracle_variance(np.full(5, 0.2), 100), 8 / (4 * 100))
    assert mech.var_star() == pytest.approx(2.0)
    assert not isinstance(mech, PureProtocol)
    reports = mech.perturb(np.arange(50) % 5, rng=1)
    tally = mech.tally(reports)
    np.testing.assert_allclose(tally.stat, reports.sum(axis=0))
    np.testing.assert_allclose(mech.unbiased_frequencies(tally), reports.mean(axis=0))
    merged = mech.tally(reports[:20]) + mech.tally(reports[20:])
    assert merged.n == 50
    np.testing.assert_allclose(merged.stat, tally.stat)


@pytest.mark.parametrize("eps", EPSILONS)
def test_the_support_probabilities_and_default_threshold(eps):
    mech = bayesldp.THE(10, eps)
    theta = mech.threshold
    assert 0.5 < theta < 1.0
    law = stats.laplace(scale=2 / eps)
    assert mech.p_star == pytest.approx(law.sf(theta - 1), rel=1e-12)
    assert mech.q_star == pytest.approx(law.sf(theta), rel=1e-12)

    def var_star(t):
        p, q = law.sf(t - 1), law.sf(t)
        return q * (1 - q) / (p - q) ** 2

    grid = np.linspace(0.0, 1.0, 2001)
    assert mech.var_star() <= var_star(grid).min() * (1 + 1e-9)
    assert mech.var_star() == pytest.approx(var_star(theta), rel=1e-12)
    assert mech.var_star() < 8 / eps**2  # THE beats SHE (Wang et al. 2017, Table 1)


def test_the_user_threshold_and_supports():
    mech = bayesldp.THE(4, 1.0, threshold=0.75)
    assert mech.threshold == 0.75 and mech.params()["threshold"] == 0.75
    assert mech != bayesldp.THE(4, 1.0)
    assert the_support_probabilities(1.0, 0.75) == (mech.p_star, mech.q_star)
    assert optimal_threshold(1.0) == bayesldp.THE(4, 1.0).threshold
    reports = mech.perturb(np.arange(400) % 4, rng=6)
    tally = mech.tally(reports)
    for x in range(4):
        np.testing.assert_array_equal(mech.supports(reports, x), reports[:, x] > 0.75)
    np.testing.assert_array_equal(tally.stat, (reports > 0.75).sum(axis=0))
    # same client and same likelihood rows as SHE; only the statistic differs
    she = bayesldp.SHE(4, 1.0)
    np.testing.assert_array_equal(tally.rows, she.tally(reports).rows)
    assert np.array_equal(she.perturb(np.arange(40) % 4, rng=3), mech.perturb(np.arange(40) % 4, 3))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        tally + she.tally(reports)


@pytest.mark.parametrize(
    "threshold, error",
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (-0.1, ValueError),
        (1.5, ValueError),
        ("0.7", TypeError),
        (True, TypeError),
    ],
)
def test_bad_threshold(threshold, error):
    with pytest.raises(error, match="threshold"):
        bayesldp.THE(4, 1.0, threshold=threshold)


@pytest.mark.parametrize("cls", CLASSES)
def test_same_seed_same_reports(cls):
    mech = cls(10, 1.0)
    x = np.arange(1000) % 10
    a = mech.perturb(x, rng=42)
    assert a.shape == (1000, 10) and a.dtype == float
    assert np.array_equal(a, mech.perturb(x, rng=42))
    assert not np.array_equal(a, mech.perturb(x, rng=43))
    assert mech.tally(a) == mech.tally(mech.perturb(x, rng=42))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(
    "bad, error, match",
    [
        (np.zeros((3, 5)), ValueError, r"shape \(n, 4\)"),
        (np.zeros(4), ValueError, r"shape \(n, 4\)"),
        (np.zeros((0, 4)), ValueError, "empty"),
        (np.array([[0.1, np.nan, 0.0, 1.0]]), ValueError, "NaN"),
        (np.array([[0.1, np.inf, 0.0, 1.0]]), ValueError, "NaN or infinite"),
        (np.zeros((3, 4), dtype=bool), TypeError, "dtype bool"),
        (np.full((3, 4), "a"), TypeError, "dtype"),
    ],
)
def test_bad_reports(cls, bad, error, match):
    mech = cls(4, 1.0)
    with pytest.raises(error, match=match):
        mech.tally(bad)
    with pytest.raises(error, match=match):
        mech.audit_event(bad, 0, 1)


@pytest.mark.parametrize("cls", CLASSES)
def test_bad_values_and_foreign_tallies(cls):
    with pytest.raises(ValueError, match=r"0\.\.3"):
        cls(4, 1.0).perturb([0, 4])
    with pytest.raises(ValueError, match="epsilon"):
        cls(4, -1.0)
    tally = cls(4, 1.0).tally(np.eye(4))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        cls(4, 2.0).unbiased_frequencies(tally)


@pytest.mark.parametrize("cls", CLASSES)
def test_audit_finds_no_violation(cls):
    result = audit(cls(10, 1.0), trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: histogram encoding is tight
