"""Subset selection: exact epsilon, the report law, the oracle, tallies and bad input."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.subset import SubsetSelection, optimal_subset_size


@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
def test_realised_epsilon_is_the_budget(k, eps):
    assert SubsetSelection(k, eps).realised_epsilon() == pytest.approx(eps, abs=1e-9)


@pytest.mark.parametrize("k, d", [(4, 1), (5, 2), (6, 3), (7, 6)])
def test_channel_is_the_stated_law(k, d):
    mech = SubsetSelection(k, 1.3, d=d)
    channel = mech.channel
    assert channel.shape == (k, math.comb(k, d))
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    # Pr[x in S | x] = p*, Pr[x in S | x'] = q*, from the channel itself
    from itertools import combinations

    member = np.array([[x in s for s in combinations(range(k), d)] for x in range(k)])
    p_in = (channel * member).sum(axis=1)
    np.testing.assert_allclose(p_in, mech.p_star, rtol=1e-12)
    q_in = (channel[0] * member[1]).sum()
    assert q_in == pytest.approx(mech.q_star, rel=1e-12)


def test_optimal_size_minimises_the_rare_category_variance():
    for k, eps in [(5, 0.5), (10, 1.0), (20, 2.0), (30, 0.2)]:
        variances = {d: SubsetSelection(k, eps, d=d).var_star() for d in range(1, k)}
        assert optimal_subset_size(k, eps) == min(variances, key=variances.get)
    # close to K / (e^eps + 1) (Wang et al. 2016)
    assert abs(optimal_subset_size(100, 1.0) - 100 / (math.e + 1)) <= 1


def test_perturb_draws_distinct_members_with_the_right_rates():
    mech = SubsetSelection(12, 1.0, d=4)
    x = np.repeat(np.arange(12), 20_000)
    reports = mech.perturb(x, rng=1)
    assert reports.shape == (x.size, 4) and reports.dtype == np.int64
    assert np.all(np.diff(np.sort(reports, axis=1), axis=1) > 0)
    member = mech.membership(reports)
    own = member[np.arange(x.size), x].mean()
    other = member[np.arange(x.size), (x + 1) % 12].mean()
    se = math.sqrt(0.25 / x.size)
    assert abs(own - mech.p_star) < 5 * se and abs(other - mech.q_star) < 5 * se
    assert np.array_equal(reports, mech.perturb(x, rng=1))


def test_oracle_is_unbiased_with_the_stated_variance():
    mech = SubsetSelection(6, 1.0)
    theta = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    n, reps = 2000, 400
    counts = (theta * n).astype(int)
    gen = np.random.default_rng(3)
    est = np.array([
        bayesldp.estimate(mech.simulate_tally(counts, rng=gen), "oracle").frequencies
        for _ in range(reps)
    ])  # fmt: skip
    var = mech.oracle_variance(theta, n)
    assert np.all(np.abs(est.mean(axis=0) - theta) < 4 * np.sqrt(var / reps))
    np.testing.assert_allclose(est.var(axis=0, ddof=1), var, rtol=0.25)


@pytest.mark.parametrize("k", [8, 20])  # bincount path and one row per report
def test_tally_and_estimates(k):
    mech = SubsetSelection(k, 2.0)
    gen = np.random.default_rng(4)
    theta = gen.dirichlet(np.ones(k))
    x = gen.choice(k, size=50_000, p=theta)
    reports = mech.perturb(x, rng=5)
    tally = mech.tally(reports)
    assert tally.n == x.size and tally.is_support_form
    np.testing.assert_array_equal(tally.stat, mech.membership(reports).sum(axis=0))
    for method in ("oracle", "mle", "em"):
        f = bayesldp.estimate(tally, method).frequencies
        assert np.abs(f - theta).max() < 0.03


def test_report_frames_round_trip():
    mech = SubsetSelection(9, 1.0, d=3)
    reports = mech.perturb(np.arange(9), rng=6)
    frame = mech.reports_to_frame(reports)
    assert list(frame.columns) == ["s0", "s1", "s2"]
    np.testing.assert_array_equal(mech.reports_from_frame(frame), reports)
    assert mech == bayesldp.mechanisms.make_mechanism("ss", 9, 1.0, d=3)


def test_bad_input():
    with pytest.raises(InvalidInputError, match="d: the subset size"):
        SubsetSelection(5, 1.0, d=5)
    mech = SubsetSelection(5, 1.0, d=2)
    with pytest.raises(InvalidInputError, match="shape"):
        mech.tally(np.zeros((3, 3), dtype=int))
    with pytest.raises(InvalidInputError, match="twice"):
        mech.tally(np.array([[0, 1], [2, 2]]))
    with pytest.raises(InvalidInputError, match=r"0\.\.4"):
        mech.tally(np.array([[0, 5]]))
    with pytest.raises(InvalidTypeError, match="integer"):
        mech.tally(np.array([[0.0, 1.0]]))


@pytest.mark.parametrize("k, d, x", [(6, 2, 0), (6, 3, 5), (7, 1, 3), (5, 4, 2)])
def test_subsets_follow_the_channel_row(k, d, x):
    from itertools import combinations

    from scipy.stats import chisquare

    mech = SubsetSelection(k, 0.8, d=d)
    reports = np.sort(mech.perturb(np.full(60_000, x), rng=7), axis=1)
    index = {s: j for j, s in enumerate(combinations(range(k), d))}
    observed = np.bincount([index[tuple(r)] for r in reports.tolist()], minlength=len(index))
    expected = mech.channel[x] * reports.shape[0]
    assert chisquare(observed, expected).pvalue > 1e-3
