import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_realised_epsilon_is_tight(k, eps):
    mech = bayesldp.GRR(k, eps)
    assert mech.realised_epsilon() <= eps * (1 + 1e-9)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9)
    np.testing.assert_allclose(mech.channel.sum(axis=1), 1.0, rtol=1e-12)


def test_closed_form_var_star():
    for k, eps in [(10, 1.0), (100, 0.5), (3, 5.0)]:
        mech = bayesldp.GRR(k, eps)
        e = np.exp(eps)
        assert mech.var_star() == pytest.approx((e + k - 2) / (e - 1) ** 2, rel=1e-12)


@pytest.mark.parametrize("x", [0, 3])
def test_perturb_matches_channel_row(x):
    mech = bayesldp.GRR(6, 0.7)
    reports = mech.perturb(np.full(60_000, x), rng=11)
    assert_matches_distribution(np.bincount(reports, minlength=6), mech.channel[x])


def test_simulate_tally_matches_perturb_in_distribution():
    mech = bayesldp.GRR(5, 1.0)
    true_counts = np.array([4000, 3000, 2000, 1000, 0])
    tally = mech.simulate_tally(true_counts, rng=3)
    expected = true_counts @ mech.channel / true_counts.sum()
    observed = np.zeros(5)
    observed[np.argmax(tally.rows, axis=1)] = tally.counts
    assert_matches_distribution(observed, expected)


def test_oracle_unbiased_and_variance_formula():
    mech = bayesldp.GRR(8, 1.0)
    true_counts = np.array([500, 300, 100, 50, 30, 20, 0, 0])
    n = true_counts.sum()
    theta = true_counts / n
    gen = np.random.default_rng(5)
    x = np.repeat(np.arange(8), true_counts)
    est = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen))) for _ in range(4000)]
    )
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


def test_same_seed_same_bits():
    mech = bayesldp.GRR(10, 1.0)
    x = np.arange(1000) % 10
    assert np.array_equal(mech.perturb(x, rng=42), mech.perturb(x, rng=42))
    assert mech.simulate_tally(np.full(10, 100), rng=7) == mech.simulate_tally(
        np.full(10, 100), rng=7
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        ([0, 1, 10], "0..9"),
        ([-1, 2], "0..9"),
        ([0.5, 1], "integers"),
        ([np.nan, 1], "NaN"),
        ([], "empty"),
        (["a"], "dtype"),
    ],
)
def test_bad_values(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        bayesldp.GRR(10, 1.0).perturb(np.array(bad) if bad else np.array([], dtype=int))


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf")])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        bayesldp.GRR(10, eps)


def test_bad_k():
    with pytest.raises(ValueError, match="k"):
        bayesldp.GRR(1, 1.0)
    with pytest.raises(TypeError, match="k"):
        bayesldp.GRR(2.5, 1.0)


def test_empty_reports_and_foreign_tallies():
    mech = bayesldp.GRR(4, 1.0)
    with pytest.raises(ValueError, match="empty"):
        mech.tally(np.array([], dtype=int))
    tally = mech.tally(np.array([0, 1, 2]))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        tally + bayesldp.GRR(4, 2.0).tally(np.array([0]))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        bayesldp.GRR(4, 2.0).unbiased_frequencies(tally)


def test_audit_finds_no_violation():
    result = audit(bayesldp.GRR(10, 1.0), trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: GRR is tight


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int32, np.int64])
def test_large_tally_counts_every_dtype_exactly(dtype):
    """Above COMPILED_COUNT_MIN reports the compiled count runs; it equals bincount for every
    integer dtype a report file may hold, and out-of-range reports are still refused."""
    from bayesldp.mechanisms.base import COMPILED_COUNT_MIN

    mech = bayesldp.GRR(200, 1.0)
    reports = np.random.default_rng(3).integers(0, 200, COMPILED_COUNT_MIN + 7).astype(dtype)
    tally = mech.tally(reports)
    expected = np.bincount(reports.astype(np.int64), minlength=200)
    assert np.array_equal(tally.stat, expected) and tally.n == reports.size
    reports[-1] = 200
    with pytest.raises(bayesldp.InvalidInputError, match=r"must lie in 0\.\.199, got 200"):
        mech.tally(reports)
