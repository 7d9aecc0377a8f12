"""The theta-free check of a tally's mechanism and epsilon (bayesldp.check_mechanism)."""

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.bayes.mechanism_check import binomial_sum_tails
from bayesldp.errors import NotSupportedError
from bayesldp.tally import Tally
from tests.stats_helpers import assert_chi_square_fit_with_power


def _binomial_sum_pmf(n, p, m, q):
    """The exact pmf of Binomial(n, p) + Binomial(m, q) by a full convolution (small n, m)."""
    return np.convolve(stats.binom.pmf(np.arange(n + 1), n, p),
                       stats.binom.pmf(np.arange(m + 1), m, q))  # fmt: skip


def test_binomial_sum_tails_match_the_full_convolution():
    n, p, m, q = 40, 0.6, 160, 0.2
    cdf = np.cumsum(_binomial_sum_pmf(n, p, m, q))
    for t in (10, 35, 56, 80, 120):
        below, above = binomial_sum_tails(t, n, p, m, q)
        assert below == pytest.approx(cdf[t], abs=1e-12)
        assert above == pytest.approx(1.0 - cdf[t - 1], abs=1e-12)


def test_total_support_count_of_unary_encoding_has_the_exact_binomial_law():
    """T = sum_x h(x) of OUE tallies made by perturbing users (not from binomials) against
    Binomial(n, p*) + Binomial(n (K - 1), q*), in 8 bins of equal probability: Pearson's test
    at level 1e-3 with power > 0.999 against the law with a 1.25 times larger sd (what local
    hashing's pairwise independent hashes give), 3,000 tallies."""
    k, n, reps = 5, 200, 3000
    mech = bayesldp.OUE(k, 1.0)
    p, q = mech.p_star, mech.q_star
    rng = np.random.default_rng(11)
    x = rng.choice(k, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])  # one population: T is free of it
    totals = np.array([mech.tally(mech.perturb(x, rng)).stat.sum() for _ in range(reps)])
    pmf = _binomial_sum_pmf(n, p, n * (k - 1), q)
    cdf = np.cumsum(pmf)
    edges = np.searchsorted(cdf, np.linspace(0, 1, 9)[1:-1])  # bin upper ends (inclusive)
    upper = np.append(edges, pmf.size - 1)
    expected = np.diff(np.concatenate([[0.0], cdf[upper]]))
    mean, sd = n * (p + (k - 1) * q), np.sqrt(n * p * (1 - p) + n * (k - 1) * q * (1 - q))
    wide = stats.norm.cdf(upper + 0.5, mean, 1.25 * sd)
    wide[-1] = 1.0
    wrong = np.diff(np.concatenate([[0.0], wide]))
    observed = np.bincount(np.searchsorted(upper, totals), minlength=upper.size)
    assert_chi_square_fit_with_power(observed, expected, wrong)


CASES = [
    ("OUE", lambda k, e, made: bayesldp.OUE(k, e)),
    ("SUE", lambda k, e, made: bayesldp.SUE(k, e)),
    ("THE", lambda k, e, made: bayesldp.THE(k, e)),
    ("OLH", lambda k, e, made: bayesldp.OLH(k, e, g=bayesldp.OLH(k, made).g)),
]


@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
def test_p_values_are_uniform_under_the_right_mechanism(name, make):
    """60 seeded tallies (K = 10, n = 1,000; populations from Dirichlet(1) and point masses,
    where local hashing's law could depend on the value held) at epsilon 1.5.  Under a uniform
    p-value the number below 0.05 is Binomial(60, 0.05): at most 9 with probability
    1 - 7.4e-4; and the KS test at level 1e-3 (power > 0.99 against a distance of 0.3 from
    the uniform law, as the in-sample posterior predictive p-values of GRR show)."""
    k, n, eps = 10, 1000, 1.5
    mech = make(k, eps, eps)
    rng = np.random.default_rng(5)
    pvals = []
    for i in range(60):
        theta = np.eye(k)[i % k] if i % 6 == 0 else rng.dirichlet(np.ones(k))
        x = rng.choice(k, size=n, p=theta)
        pvals.append(bayesldp.check_mechanism(mech.tally(mech.perturb(x, rng))).p_value)
    pvals = np.array(pvals)
    assert stats.binom.sf(9, 60, 0.05) < 7.5e-4
    assert np.sum(pvals < 0.05) <= 9
    assert stats.kstest(pvals, "uniform").pvalue > 1e-3


@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(("made", "analysed"), [(2.0, 1.0), (1.0, 2.0)])
def test_a_wrong_epsilon_is_flagged(name, make, made, analysed):
    """Reports made at one epsilon, analysed at the other (K = 10, n = 4,000).  The mean
    support size per report moves by ``shift`` >= 0.23 (OLH; 0.87-1.35 for the others) against
    a per-report sd of at most 1.53 (1.39 for OLH, times at most 1.3 for its hashes' pairwise
    dependence), so ``E|z| >= 0.23 sqrt(4000) / (1.39 * 1.3) = 8.0``; ``p < 1e-3`` needs
    ``|z| > 3.29``: each of the 5 tallies misses with probability below Phi(-4.7) = 1.3e-6."""
    k, n = 10, 4000
    maker, reader = make(k, made, made), make(k, analysed, made)

    def mean(m):
        return m.p_star + (k - 1) * m.q_star

    assert abs(mean(maker) - mean(reader)) > 0.23
    rng = np.random.default_rng(8)
    for _ in range(5):
        x = rng.choice(k, size=n, p=rng.dirichlet(np.ones(k)))
        result = bayesldp.check_mechanism(reader.tally(maker.perturb(x, rng)))
        assert result.p_value < 1e-3, result
        # the sign says which way: more supported categories than the analysed law predicts
        assert np.sign(result.z) == np.sign(mean(maker) - mean(reader)), result


def test_result_fields_and_text():
    mech = bayesldp.OUE(4, 1.0)
    tally = mech.tally(mech.perturb(np.arange(400) % 4, rng=0))
    result = bayesldp.check_mechanism(tally)
    assert result.n == 400 and result.statistic == "support size"
    assert result.expected == pytest.approx(mech.p_star + 3 * mech.q_star)
    assert result.observed == pytest.approx(tally.stat.sum() / 400)
    assert result.z == pytest.approx((result.observed - result.expected) / result.sd)
    assert "Binomial" in result.law and "p = " in str(result)


@pytest.mark.parametrize(
    ("mech", "words"),
    [
        (bayesldp.GRR(5, 1.0), ["saturated", "audit", "OUE"]),
        (bayesldp.HadamardResponse(5, 1.0), ["same number of categories", "audit"]),
        (bayesldp.SubsetSelection(5, 1.0), ["same number of categories", "audit"]),
        (bayesldp.SHE(5, 1.0), ["mean n at every epsilon", "THE"]),
    ],
    ids=["GRR", "HadamardResponse", "SubsetSelection", "SHE"],
)
def test_mechanisms_without_a_theta_free_statistic_say_what_to_use(mech, words):
    tally = mech.tally(mech.perturb(np.arange(50) % 5, rng=0))
    with pytest.raises(NotSupportedError) as info:
        bayesldp.check_mechanism(tally)
    for word in words:
        assert word in str(info.value)


def test_a_candidate_olh_tally_is_rejected():
    from bayesldp.heavy_hitters.candidates import CandidateOLH

    source = bayesldp.OLH(64, 1.0)
    reports = source.perturb(np.arange(200) % 64, rng=0)
    tally = CandidateOLH([1, 5, 9], 1.0, source.g, other=True).tally(reports)
    with pytest.raises(NotSupportedError, match="candidate"):
        bayesldp.check_mechanism(tally)


def test_local_hashing_variants_are_checked():
    """BLH, OLHXX and BLHXX (K = 100, n = 3,000) at the right epsilon: p > 1e-4 on each (a
    uniform p-value falls below with probability 1e-4)."""
    for make in (bayesldp.BLH, bayesldp.OLHXX, bayesldp.BLHXX):
        mech = make(100, 1.0)
        result = bayesldp.check_mechanism(mech.tally(mech.perturb(np.arange(3000) % 100, rng=4)))
        assert result.p_value > 1e-4 and "t-test" in result.law, result


def test_a_mixed_tally_and_a_non_tally_are_rejected():
    mech = bayesldp.GRR(3, 1.0)
    mixed = Tally([3, 2], rows=mech.channel.T[:2], stat=[3.0, 2.0, 0.0], family=mech.family)
    with pytest.raises(NotSupportedError, match="mixes"):
        bayesldp.check_mechanism(mixed)
    with pytest.raises(TypeError):
        bayesldp.check_mechanism([1, 2, 3])
