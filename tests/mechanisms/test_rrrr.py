import math

import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.rrrr import rrrr_channel, rrrr_eps2
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]
EPS1_FRACTIONS = [0.5, 0.8, 1.0]


def algorithm_channel(k, subset, eps1, eps2):
    """Exact law of Algorithm 1 of Aydın and Yıldırım 2025, by enumerating R (independent of
    rrrr_channel)."""
    subset = sorted(subset)
    comp = [v for v in range(k) if v not in subset]
    m = len(comp)

    def srr(value, omega, e):
        dist = np.zeros(k)
        denom = math.exp(e) + len(omega) - 1
        for w in omega:
            dist[w] = (math.exp(e) if w == value else 1.0) / denom
        return dist

    channel = np.zeros((k, k))
    for x in range(k):
        if x in subset:
            for r in comp:
                channel[x] += srr(x, [*subset, r], eps1) / m
        else:
            first = srr(x, comp, eps2)
            for r in comp:
                channel[x] += first[r] * srr(r, [*subset, r], eps1)
    return channel


def matlab_eps2(eps, eps1, s):
    """eps2 as the public MATLAB code of AdOBEst-LDP computes it (AdOBEst_LDP.m).

    No log, and indexed by s = |S| instead of |S^c|: for s >= ceil(e^(eps - eps1)),
    eps2 = min(eps, (s - 1) / (e^(eps1 - eps) s - 1)); otherwise eps2 = eps.
    """
    if s < math.ceil(math.exp(eps - eps1)):
        return eps
    return min(eps, (s - 1) / (math.exp(eps1 - eps) * s - 1))


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("frac", EPS1_FRACTIONS)
def test_realised_epsilon_never_exceeds_budget(k, eps, frac):
    """Every |S| in 0..K-1 (all sizes, also for K = 100), subsets drawn at random."""
    gen = np.random.default_rng(k)
    eps1 = frac * eps
    for size in range(k):
        subset = gen.choice(k, size=size, replace=False)
        mech = bayesldp.RRRR(k, eps, subset, eps1=eps1)
        channel = mech.channel
        assert np.all(np.isfinite(channel)) and channel.min() > 0
        np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
        assert 0.0 <= mech.eps2 <= eps
        realised = mech.realised_epsilon()
        assert realised <= eps * (1 + 1e-9)
        # Equality holds except when |S| = K - 1 with eps1 < eps: then RRRR is GRR(K, eps1).
        if size == k - 1 and eps1 < eps:
            assert realised == pytest.approx(eps1, rel=1e-9)
            assert realised < eps * (1 - 1e-6)
        else:
            assert realised == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize(
    "k, subset, eps, eps1",
    [
        (6, [1, 4], 1.0, 0.8),
        (6, [1, 4], 1.0, 1.0),  # eps2 = 0: uniform outside S
        (6, [], 2.0, 1.0),  # |S| = 0: GRR(k, eps)
        (6, [0, 1, 2, 3, 4], 2.0, 1.5),  # m = 1
        (7, [6], 0.3, 0.15),
        (5, [2, 0, 3], 5.0, 4.0),
    ],
)
def test_channel_table_matches_algorithm(k, subset, eps, eps1):
    mech = bayesldp.RRRR(k, eps, subset, eps1=eps1)
    np.testing.assert_allclose(
        mech.channel, algorithm_channel(k, subset, mech.eps1, mech.eps2), rtol=1e-12
    )
    np.testing.assert_allclose(
        mech.channel, rrrr_channel(k, subset, mech.eps1, mech.eps2), rtol=0, atol=0
    )


def test_eps2_formula_and_edge_cases():
    eps, eps1, k = 1.0, 0.8, 10
    for size in range(1, k - 1):
        m = k - size
        expected = min(eps, math.log((m - 1) / (math.exp(eps1 - eps) * m - 1)))
        assert rrrr_eps2(eps, eps1, size, k) == pytest.approx(expected, rel=1e-12)
    # eps - eps1 >= ln m: eps2 = eps (here ln 2 < 1.0)
    assert rrrr_eps2(2.0, 1.0, 8, 10) == 2.0
    assert bayesldp.RRRR(10, 1.0, [0, 1, 2], eps1=1.0).eps2 == 0.0
    assert bayesldp.RRRR(10, 1.0, list(range(9)), eps1=1.0).eps2 == 1.0  # m = 1
    assert bayesldp.RRRR(10, 1.0, list(range(9))).eps2 == 1.0
    assert bayesldp.RRRR(10, 1.0, []).eps2 == 1.0
    assert bayesldp.RRRR(4, 1.0, [0]).eps1 == pytest.approx(0.8)


def test_edge_subsets_reduce_to_grr():
    np.testing.assert_allclose(
        bayesldp.RRRR(7, 1.3, []).channel, bayesldp.GRR(7, 1.3).channel, rtol=1e-12
    )
    np.testing.assert_allclose(
        bayesldp.RRRR(7, 1.3, [0, 1, 2, 4, 5, 6], eps1=0.9).channel,
        bayesldp.GRR(7, 0.9).channel,
        rtol=1e-12,
    )


@pytest.mark.parametrize("eps", [0.5, 1.0, 5.0])
def test_matlab_eps2_bug_would_fail_the_check(eps):
    """The authors' reference MATLAB code's eps2 realises 0.87 / 1.71 / 6.83 for K = 20."""
    k, eps1 = 20, 0.8 * eps
    published = {0.5: 0.87, 1.0: 1.71, 5.0: 6.83}[eps]
    buggy = [
        realised_epsilon_of_channel(rrrr_channel(k, range(s), eps1, matlab_eps2(eps, eps1, s)))
        for s in range(1, k)
    ]
    assert max(buggy) == pytest.approx(published, abs=0.005)
    assert max(buggy) > eps * 1.3  # our privacy check catches it (by 37% or more)
    ours = [bayesldp.RRRR(k, eps, range(s), eps1=eps1).realised_epsilon() for s in range(1, k)]
    assert max(ours) <= eps * (1 + 1e-9)


@pytest.mark.parametrize("x", [1, 4, 0, 5])
def test_perturb_matches_channel_row(x):
    mech = bayesldp.RRRR(6, 1.0, [1, 4])
    reports = mech.perturb(np.full(60_000, x), rng=11 + x)
    assert_matches_distribution(np.bincount(reports, minlength=6), mech.channel[x])


@pytest.mark.parametrize(
    "subset, eps1, x",
    [
        ([1, 4], 1.0, 2),  # eps2 = 0
        ([0, 1, 2, 3, 4], 0.9, 5),  # m = 1, x not in S
        ([0, 1, 2, 3, 4], 0.9, 2),  # m = 1, x in S
        ([], 0.8, 3),  # |S| = 0
        ([3], 0.5, 3),  # |S| = 1, x in S
    ],
)
def test_perturb_edge_cases_match_channel(subset, eps1, x):
    mech = bayesldp.RRRR(6, 1.0, subset, eps1=eps1)
    reports = mech.perturb(np.full(40_000, x), rng=3)
    assert_matches_distribution(np.bincount(reports, minlength=6), mech.channel[x])


def test_perturb_mixed_population_matches_channel():
    mech = bayesldp.RRRR(12, 0.7, [3, 7, 8, 11], eps1=0.6)
    x = np.arange(120_000) % 12
    reports = mech.perturb(x, rng=5)
    for value in (3, 0):
        observed = np.bincount(reports[x == value], minlength=12)
        assert_matches_distribution(observed, mech.channel[value])


def test_simulate_tally_matches_perturb_in_distribution():
    mech = bayesldp.RRRR(6, 1.0, [2, 5])
    true_counts = np.array([4000, 3000, 2000, 1000, 500, 0])
    tally = mech.simulate_tally(true_counts, rng=3)
    expected = true_counts @ mech.channel / true_counts.sum()
    observed = np.zeros(6)
    for row, count in zip(tally.rows, tally.counts, strict=True):
        (match,) = np.flatnonzero(np.all(np.isclose(mech.channel.T, row, rtol=1e-12), axis=1))
        observed[match] += count
    assert_matches_distribution(observed, expected)


def test_oracle_unbiased_and_variance_formula():
    mech = bayesldp.RRRR(6, 2.0, [0, 2])
    true_counts = np.array([500, 300, 100, 60, 40, 0])
    n = true_counts.sum()
    theta = true_counts / n
    gen = np.random.default_rng(5)
    x = np.repeat(np.arange(6), true_counts)
    est = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen))) for _ in range(4000)]
    )
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


def test_singular_channel_oracle_raises():
    mech = bayesldp.RRRR(6, 1.0, [0, 1], eps1=1.0)  # eps2 = 0: rows of S^c identical
    assert mech.eps2 == 0.0
    tally = mech.tally(mech.perturb(np.arange(60) % 6, rng=1))
    with pytest.raises(bayesldp.NotSupportedError, match="MLE"):
        mech.unbiased_frequencies(tally)
    with pytest.raises(bayesldp.NotSupportedError, match="singular"):
        mech.oracle_variance(np.full(6, 1 / 6), 100)
    # m = 1 with eps1 = eps is GRR(k, eps): invertible
    ok = bayesldp.RRRR(6, 1.0, [0, 1, 2, 3, 4], eps1=1.0)
    est = ok.unbiased_frequencies(ok.tally(ok.perturb(np.arange(60) % 6, rng=1)))
    assert np.all(np.isfinite(est))


def test_merging_tallies_of_different_subsets():
    gen = np.random.default_rng(8)
    x = gen.integers(0, 10, 3000)
    mechs = [
        bayesldp.RRRR(10, 1.0, [0, 1]),
        bayesldp.RRRR(10, 1.0, [4, 2, 7], eps1=0.9),
        bayesldp.RRRR(10, 1.0, []),
    ]
    parts = [m.tally(m.perturb(x[i::3], gen)) for i, m in enumerate(mechs)]
    merged = parts[0] + parts[1] + parts[2]
    assert merged.mechanism is None
    assert merged.n == 3000
    assert merged.family == mechs[0].family
    thetas = gen.dirichlet(np.ones(10), size=5)
    np.testing.assert_allclose(
        merged.loglik(thetas), sum(t.loglik(thetas) for t in parts), rtol=1e-12
    )
    # and the log-likelihood is the exact per-report sum of log Pr_S(y | theta)
    theta = thetas[0]
    for i, m in enumerate(mechs):
        reports = m.perturb(x[i::3], np.random.default_rng([8, i]))
        assert m.tally(reports).loglik(theta) == pytest.approx(
            np.log(theta @ m.channel[:, reports]).sum(), rel=1e-12
        )
    with pytest.raises(bayesldp.IncompatibleTallyError):
        mechs[0].unbiased_frequencies(merged)
    with pytest.raises(bayesldp.IncompatibleTallyError):
        parts[0] + bayesldp.RRRR(10, 2.0, [0, 1]).tally(np.array([0, 1]))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        parts[0] + bayesldp.GRR(10, 1.0).tally(np.array([0, 1]))
    same = parts[0] + mechs[0].tally(np.array([3, 3, 0]))
    assert same.mechanism == mechs[0]


def test_identity_and_subset_normalisation():
    a = bayesldp.RRRR(10, 1.0, [7, 0, 3])
    assert a.subset == (0, 3, 7)
    assert a.complement == (1, 2, 4, 5, 6, 8, 9)
    assert a == bayesldp.RRRR(10, 1.0, np.array([3, 7, 0]))
    assert a == bayesldp.RRRR(10, 1.0, {0, 3, 7})
    assert a != bayesldp.RRRR(10, 1.0, [0, 3])
    assert a != bayesldp.RRRR(10, 1.0, [0, 3, 7], eps1=0.9)
    assert a.family == bayesldp.RRRR(10, 1.0, [1], eps1=0.3).family
    assert a.family != bayesldp.RRRR(10, 0.5, [0, 3, 7]).family
    assert a.params() == {"k": 10, "epsilon": 1.0, "subset": [0, 3, 7], "eps1": 0.8}
    assert "subset=[0, 3, 7]" in repr(a)
    with pytest.raises(ValueError):
        a.channel[0, 0] = 1.0  # read-only


def test_same_seed_same_bits():
    mech = bayesldp.RRRR(10, 1.0, [2, 5, 9])
    x = np.arange(1000) % 10
    assert np.array_equal(mech.perturb(x, rng=42), mech.perturb(x, rng=42))
    assert not np.array_equal(mech.perturb(x, rng=42), mech.perturb(x, rng=43))
    assert mech.simulate_tally(np.full(10, 100), rng=7) == mech.simulate_tally(
        np.full(10, 100), rng=7
    )


@pytest.mark.parametrize(
    "subset, exc, match",
    [
        ([1, 1], ValueError, "subset.*distinct"),
        ([0, 10], ValueError, "subset.*0..9"),
        ([-1], ValueError, "subset.*0..9"),
        ([0.5], TypeError, "subset.*integers"),
        ([1.0], TypeError, "subset.*integers"),
        ([True], TypeError, "subset.*integers"),
        (list(range(10)), ValueError, "subset.*k - 1"),
        (3, TypeError, "subset"),
        ("01", TypeError, "subset"),
        (None, TypeError, "subset"),
        (np.array([[0, 1]]), ValueError, "subset"),
        (np.array([0.0, 1.0]), TypeError, "subset"),
    ],
)
def test_bad_subset(subset, exc, match):
    with pytest.raises(exc, match=match):
        bayesldp.RRRR(10, 1.0, subset)


@pytest.mark.parametrize("eps1", [0.0, -0.1, 1.5, float("nan"), float("inf")])
def test_bad_eps1(eps1):
    with pytest.raises(ValueError, match="eps1"):
        bayesldp.RRRR(10, 1.0, [0], eps1=eps1)


def test_bad_epsilon_k_and_values():
    with pytest.raises(ValueError, match="epsilon"):
        bayesldp.RRRR(10, 0.0, [0])
    with pytest.raises(ValueError, match="k"):
        bayesldp.RRRR(1, 1.0, [])
    with pytest.raises(TypeError, match="eps1"):
        bayesldp.RRRR(10, 1.0, [0], eps1="0.5")
    mech = bayesldp.RRRR(10, 1.0, [0])
    with pytest.raises(ValueError, match=r"0\.\.9"):
        mech.perturb([0, 10])
    with pytest.raises(ValueError, match="empty"):
        mech.perturb(np.array([], dtype=int))
    with pytest.raises(ValueError, match=r"0\.\.9"):
        mech.tally(np.array([11]))


def test_audit_finds_no_violation():
    mech = bayesldp.RRRR(10, 1.0, [0, 1, 2])
    # x0 = 5 outside S, x1 = 0 in S: the report y = 5 has the full ratio e^eps
    result = audit(mech, x0=5, x1=0, trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: RRRR is tight
