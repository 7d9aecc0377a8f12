import math

import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms.base import PureProtocol
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]
CLASSES = [bayesldp.SUE, bayesldp.OUE]


def exact_p_q(cls, eps):
    """p, q straight from Wang et al. (2017), section 4.3."""
    if cls is bayesldp.SUE:
        p = math.exp(eps / 2) / (math.exp(eps / 2) + 1)
        return p, 1 - p
    return 0.5, 1 / (math.exp(eps) + 1)


def pattern_index(reports):
    """Column of the channel: the integer whose bit j is the report's bit for category j."""
    return reports.astype(np.int64) @ (1 << np.arange(reports.shape[1]))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_realised_epsilon_is_tight(cls, k, eps):
    mech = cls(k, eps)
    assert mech.realised_epsilon() <= eps * (1 + 1e-9)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9)
    p, q = exact_p_q(cls, eps)
    assert mech.p_star == pytest.approx(p, rel=1e-12)
    assert mech.q_star == pytest.approx(q, rel=1e-12)
    if k <= 12:
        channel = mech.channel
        assert channel.shape == (k, 2**k)
        np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    else:
        with pytest.raises(bayesldp.NotSupportedError, match="k <= 12"):
            _ = mech.channel


@pytest.mark.parametrize("cls", CLASSES)
def test_channel_entries_are_products_of_bit_probabilities(cls):
    mech = cls(3, 1.3)
    p, q = exact_p_q(cls, 1.3)
    for x in range(3):
        for y in range(8):
            expected = 1.0
            for j in range(3):
                prob = p if j == x else q
                expected *= prob if (y >> j) & 1 else 1 - prob
            assert mech.channel[x, y] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("cls", CLASSES)
def test_per_bit_epsilon_equals_channel_epsilon(cls):
    # The k > 12 branch of realised_epsilon must agree with the exact channel computation.
    for eps in EPSILONS:
        small = cls(12, eps).realised_epsilon()
        big = cls(13, eps).realised_epsilon()
        assert big == pytest.approx(small, rel=1e-12)


def test_closed_form_var_star():
    for k, eps in [(10, 1.0), (100, 0.5), (3, 5.0)]:
        e = math.exp(eps)
        sue, oue = bayesldp.SUE(k, eps), bayesldp.OUE(k, eps)
        assert sue.var_star() == pytest.approx(math.sqrt(e) / (math.sqrt(e) - 1) ** 2, rel=1e-12)
        assert oue.var_star() == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("x", [0, 3])
def test_perturb_matches_channel_row(cls, x):
    # 300,000 users of width 4 span two internal blocks of random bytes.
    mech = cls(4, 0.7)
    reports = mech.perturb(np.full(300_000, x), rng=11)
    assert reports.shape == (300_000, 4) and reports.dtype == bool
    observed = np.bincount(pattern_index(reports), minlength=16)
    assert_matches_distribution(observed, mech.channel[x])


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_bit_rates_on_wide_reports(cls, eps):
    # K = 1000: several blocks; the true bit is 1 w.p. p, every other bit w.p. q.
    k, n = 1000, 3000
    mech = cls(k, eps)
    x = np.arange(n) % k
    reports = mech.perturb(x, rng=3)
    true_bits = reports[np.arange(n), x]
    hits_p = true_bits.sum()
    hits_q = reports.sum() - hits_p
    p, q = mech.p, mech.q
    m = n * (k - 1)
    assert abs(hits_p - n * p) <= 4 * math.sqrt(n * p * (1 - p))
    assert abs(hits_q - m * q) <= 4 * math.sqrt(m * q * (1 - q))
    # bits of different categories are independent: pairwise co-occurrence of two columns
    both = np.count_nonzero(reports[x > 1, 0] & reports[x > 1, 1])
    m2 = np.count_nonzero(x > 1)
    assert abs(both - m2 * q * q) <= 4 * math.sqrt(m2 * q * q * (1 - q * q)) + 1


@pytest.mark.parametrize("cls", CLASSES)
def test_tally_support_form_equals_dense_definition(cls):
    mech = cls(4, 1.2)
    reports = mech.perturb(np.arange(2000) % 4, rng=2)
    tally = mech.tally(reports)
    assert tally.is_support_form and tally.n == 2000
    p, q = mech.p, mech.q
    assert tally.levels == pytest.approx((q * (1 - p), p * (1 - q)), rel=1e-15)
    # each stored row is proportional to the channel column of its bit pattern
    columns = mech.channel[:, pattern_index(tally.support)].T
    ratio = columns / tally.rows
    np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones((1, 4)), rtol=1e-12)
    # log-likelihood differences equal the exact ones
    exact = np.log(mech.channel[:, pattern_index(reports)].T)
    thetas = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    exact_ll = np.log(np.exp(exact) @ thetas.T).sum(axis=0)
    ll = tally.loglik(thetas)
    assert ll[0] - ll[1] == pytest.approx(exact_ll[0] - exact_ll[1], rel=1e-10)
    # the statistic is the column sums, and supports() reads the bits
    np.testing.assert_array_equal(tally.stat, reports.sum(axis=0))
    for x in range(4):
        np.testing.assert_array_equal(mech.supports(reports, x), reports[:, x])


@pytest.mark.parametrize("k", [2, 4, 16, 17, 40])
def test_tally_equals_the_per_report_tally(k):
    # k <= 16 counts bit patterns first; the result must be the tally of one row per report
    mech = bayesldp.OUE(k, 0.5)
    reports = mech.perturb(np.arange(3000) % k, rng=12)
    direct = bayesldp.Tally(
        np.ones(3000, dtype=int),
        support=reports,
        levels=mech.levels,
        stat=reports.sum(axis=0),
        mechanism=mech,
    )
    assert mech.tally(reports) == direct


@pytest.mark.parametrize("cls", CLASSES)
def test_integer_reports_and_merging(cls):
    mech = cls(5, 1.0)
    reports = mech.perturb(np.arange(500) % 5, rng=4)
    assert mech.tally(reports.astype(np.int8)) == mech.tally(reports)
    merged = mech.tally(reports[:200]) + mech.tally(reports[200:])
    assert merged == mech.tally(reports)


@pytest.mark.parametrize("cls", CLASSES)
def test_oracle_unbiased_and_variance_formula(cls):
    mech = cls(8, 1.0)
    assert isinstance(mech, PureProtocol)
    true_counts = np.array([500, 300, 100, 50, 30, 20, 0, 0])
    n = true_counts.sum()
    theta = true_counts / n
    gen = np.random.default_rng(5)
    x = np.repeat(np.arange(8), true_counts)
    est = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen))) for _ in range(4000)]
    )
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


@pytest.mark.parametrize("cls", CLASSES)
def test_simulate_tally(cls):
    mech = cls(6, 2.0)
    true_counts = np.array([3000, 2000, 1000, 0, 0, 0])
    tally = mech.simulate_tally(true_counts, rng=9)
    assert tally.n == 6000
    theta = true_counts / 6000
    z = (mech.unbiased_frequencies(tally) - theta) / np.sqrt(mech.oracle_variance(theta, 6000))
    assert np.all(np.abs(z) < 4.5), z


@pytest.mark.parametrize("cls", CLASSES)
def test_same_seed_same_bits(cls):
    mech = cls(300, 1.0)
    x = np.arange(5000) % 300  # several blocks
    a = mech.perturb(x, rng=42)
    assert np.array_equal(a, mech.perturb(x, rng=42))
    assert not np.array_equal(a, mech.perturb(x, rng=43))
    assert np.array_equal(
        mech.perturb(x, rng=np.random.default_rng(7)), mech.perturb(x, rng=np.random.default_rng(7))
    )


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize(
    "bad, error, match",
    [
        (np.zeros((3, 5), dtype=bool), ValueError, r"shape \(n, 4\)"),
        (np.zeros(4, dtype=bool), ValueError, r"shape \(n, 4\)"),
        (np.zeros((0, 4), dtype=bool), ValueError, "empty"),
        (np.zeros((3, 4)), TypeError, "dtype float64"),
        (np.full((3, 4), 2), ValueError, "0 or 1, got 2"),
        (np.full((3, 4), -1), ValueError, "0 or 1, got -1"),
        (np.full((3, 4), "a"), TypeError, "dtype"),
    ],
)
def test_bad_reports(cls, bad, error, match):
    mech = cls(4, 1.0)
    with pytest.raises(error, match=match):
        mech.tally(bad)
    with pytest.raises(error, match=match):
        mech.supports(bad, 0)


@pytest.mark.parametrize("cls", CLASSES)
def test_bad_values_and_parameters(cls):
    with pytest.raises(ValueError, match=r"0\.\.3"):
        cls(4, 1.0).perturb([0, 4])
    with pytest.raises(ValueError, match="empty"):
        cls(4, 1.0).perturb(np.array([], dtype=int))
    with pytest.raises(ValueError, match="epsilon"):
        cls(4, 0.0)
    with pytest.raises(ValueError, match="k"):
        cls(1, 1.0)
    # an epsilon so large that a bit probability rounds to 0 or 1 is refused, not mis-run
    with pytest.raises(ValueError, match="epsilon"):
        cls(4, 2000.0)
    with pytest.raises(bayesldp.IncompatibleTallyError):
        cls(4, 2.0).unbiased_frequencies(cls(4, 1.0).tally(np.eye(4, dtype=bool)))


@pytest.mark.parametrize("cls", CLASSES)
def test_audit_finds_no_violation(cls):
    result = audit(cls(10, 1.0), trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: unary encoding is tight
