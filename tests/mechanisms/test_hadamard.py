import math

import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.hadamard import HadamardResponse
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]


def _sylvester(order):
    h = np.array([[1]])
    while h.shape[0] < order:
        h = np.kron(h, np.array([[1, 1], [1, -1]]))
    return h


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_realised_epsilon_is_tight(k, eps):
    mech = HadamardResponse(k, eps)
    assert mech.realised_epsilon() <= eps * (1 + 1e-9)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9)
    assert realised_epsilon_of_channel(mech.channel) == pytest.approx(
        mech.realised_epsilon(), rel=1e-12
    )
    np.testing.assert_allclose(mech.channel.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("k, order", [(2, 4), (3, 4), (4, 8), (7, 8), (8, 16), (100, 128)])
def test_sets_are_hadamard_rows(k, order):
    mech = HadamardResponse(k, 1.0)
    assert mech.n_outputs == order
    sets = mech.sets
    np.testing.assert_array_equal(sets, _sylvester(order)[1 : k + 1] == 1)
    assert np.all(sets.sum(axis=1) == order // 2)
    overlap = sets.astype(int) @ sets.T.astype(int)
    assert np.all(overlap[~np.eye(k, dtype=bool)] == order // 4)
    e = math.exp(1.0)
    hi, lo = 2 * e / ((e + 1) * order), 2 / ((e + 1) * order)
    np.testing.assert_allclose(mech.channel, np.where(sets, hi, lo), rtol=1e-14)


@pytest.mark.parametrize("k, eps", [(3, 0.5), (10, 1.0), (100, 2.0)])
def test_p_star_q_star_from_channel(k, eps):
    mech = HadamardResponse(k, eps)
    chan, sets = mech.channel, mech.sets
    mass = chan @ sets.T.astype(float)  # mass[x, x'] = Pr[Y in C_x' | X = x]
    np.testing.assert_allclose(np.diag(mass), mech.p_star, rtol=1e-12)
    np.testing.assert_allclose(mass[~np.eye(k, dtype=bool)], mech.q_star, rtol=1e-12)
    assert mech.p_star == pytest.approx(math.exp(eps) / (math.exp(eps) + 1), rel=1e-14)
    e = math.exp(eps)
    assert mech.var_star() == pytest.approx((e + 1) ** 2 / (e - 1) ** 2, rel=1e-12)


@pytest.mark.parametrize("k, x", [(6, 0), (6, 3), (6, 5), (10, 7), (2, 1)])
def test_perturb_matches_channel_row(k, x):
    mech = HadamardResponse(k, 0.7)
    reports = mech.perturb(np.full(60_000, x), rng=11)
    assert_matches_distribution(np.bincount(reports, minlength=mech.n_outputs), mech.channel[x])


def test_tally_and_stat():
    mech = HadamardResponse(10, 1.0)
    reports = mech.perturb(np.arange(5000) % 10, rng=2)
    tally = mech.tally(reports)
    assert tally.n == 5000 and tally.is_support_form
    for x in range(10):
        assert tally.stat[x] == np.count_nonzero(mech.supports(reports, x))
    theta = np.random.default_rng(0).dirichlet(np.ones(10), size=2)
    direct = np.log(theta @ mech.channel[:, reports]).sum(axis=1)
    np.testing.assert_allclose(tally.loglik(theta), direct, rtol=1e-12)
    counts = np.bincount(reports, minlength=mech.n_outputs)
    assert mech.tally_from_report_counts(counts) == tally


@pytest.mark.parametrize("use_simulate", [False, True], ids=["perturb", "simulate_tally"])
def test_oracle_unbiased_and_variance_formula(use_simulate):
    mech = HadamardResponse(8, 1.0)
    true_counts = np.array([500, 300, 100, 50, 30, 20, 0, 0])
    n = true_counts.sum()
    theta = true_counts / n
    gen = np.random.default_rng(5)
    x = np.repeat(np.arange(8), true_counts)

    def one():
        tally = (
            mech.simulate_tally(true_counts, gen)
            if use_simulate
            else mech.tally(mech.perturb(x, gen))
        )
        return mech.unbiased_frequencies(tally)

    est = np.array([one() for _ in range(4000)])
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


def test_merge():
    mech = HadamardResponse(5, 1.0)
    r = mech.perturb(np.arange(1000) % 5, rng=9)
    assert mech.tally(r[:400]) + mech.tally(r[400:]) == mech.tally(r)


def test_same_seed_same_bits():
    mech = HadamardResponse(10, 1.0)
    x = np.arange(1000) % 10
    assert np.array_equal(mech.perturb(x, rng=42), mech.perturb(x, rng=42))
    assert mech.simulate_tally(np.full(10, 100), rng=7) == mech.simulate_tally(
        np.full(10, 100), rng=7
    )


def test_audit_finds_no_violation():
    result = audit(HadamardResponse(10, 1.0), trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: HR is tight


@pytest.mark.parametrize(
    "bad, match",
    [([0, 1, 10], "0..9"), ([-1, 2], "0..9"), ([0.5, 1], "integers"), ([], "empty")],
)
def test_bad_values(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        HadamardResponse(10, 1.0).perturb(np.array(bad) if bad else np.array([], dtype=int))


def test_bad_reports_and_foreign_tallies():
    mech = HadamardResponse(10, 1.0)  # K' = 16
    with pytest.raises(ValueError, match=r"0\.\.15, got 16"):
        mech.tally(np.array([0, 16]))
    with pytest.raises(ValueError, match="integer"):
        mech.tally(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="empty"):
        mech.tally(np.array([], dtype=int))
    with pytest.raises(ValueError, match="report_counts"):
        mech.tally_from_report_counts(np.zeros(16, dtype=int))
    with pytest.raises(ValueError, match="report_counts"):
        mech.tally_from_report_counts(np.ones(10, dtype=int))
    with pytest.raises(ValueError, match="true_counts"):
        mech.simulate_tally(np.zeros(10, dtype=int))
    with pytest.raises(ValueError, match=r"x: must lie in 0\.\.9"):
        mech.supports(np.array([1, 2]), 10)
    with pytest.raises(ValueError, match="epsilon"):
        HadamardResponse(10, -1.0)
    with pytest.raises(ValueError, match="k"):
        HadamardResponse(1, 1.0)
    tally = mech.tally(np.array([0, 1, 2]))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        tally + HadamardResponse(10, 2.0).tally(np.array([0]))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        HadamardResponse(10, 2.0).unbiased_frequencies(tally)
