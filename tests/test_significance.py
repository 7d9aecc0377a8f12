"""Frequent items: the significance test of Wang et al. (2017) and the posterior's rule."""

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.significance import largest_variance


def _vertex_variances(mech, x, t):
    """``n Var f_x`` at every vertex sample ``t e_x + (1 - t) e_j``, by the mechanism's own
    oracle variance (the brute force the closed form must match: the variance is linear in the
    other frequencies, so its largest value is at a vertex)."""
    out = []
    for j in range(mech.k):
        if j == x:
            continue
        theta = np.zeros(mech.k)
        theta[x] += t
        theta[j] += 1.0 - t
        out.append(mech.oracle_variance(theta, 1)[x])
    return np.array(out)


@pytest.mark.parametrize("t", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("mech", [bayesldp.GRR(6, 1.0), bayesldp.OUE(6, 2.0), bayesldp.OLH(6, 1.0)],
                         ids=["GRR", "OUE", "OLH"])  # fmt: skip
def test_the_general_formula_is_the_pure_protocols_exact_variance(mech, t):
    expected = mech.oracle_variance(np.full(mech.k, t), 1)
    assert np.allclose(largest_variance(mech, t), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("t", [0.0, 0.2])
@pytest.mark.parametrize("mech", [bayesldp.RRRR(5, 1.0, subset=[0, 1], eps1=0.7),
                                  bayesldp.SHE(5, 1.0)], ids=["RRRR", "SHE"])  # fmt: skip
def test_the_largest_variance_is_the_largest_over_the_vertices(mech, t):
    found = largest_variance(mech, t)
    for x in range(mech.k):
        assert found[x] == pytest.approx(_vertex_variances(mech, x, t).max(), rel=1e-10)


def test_bonferroni_at_zero_is_the_papers_threshold():
    """``f_x >= Phi^{-1}(1 - alpha/K) sqrt(Var*/n)``, Var* = q*(1-q*)/(p*-q*)^2."""
    mech = bayesldp.OUE(8, 1.0)
    tally = mech.simulate_tally([3000, 1000, 500, 200, 100, 0, 0, 0], rng=4)
    found = bayesldp.frequent_items(tally, alpha=0.05)
    p, q = 0.5, 1.0 / (np.e + 1.0)
    cut = stats.norm.ppf(1 - 0.05 / 8) * np.sqrt(q * (1 - q) / (p - q) ** 2 / tally.n)
    f = bayesldp.estimate(tally, "oracle").frequencies
    assert set(found.items) == set(np.flatnonzero(f >= cut))
    assert list(found.items) == sorted(found.items, key=lambda x: -f[x])


def test_bh_finds_at_least_what_bonferroni_finds():
    mech = bayesldp.GRR(30, 2.0)
    counts = np.r_[np.full(15, 400), np.zeros(15, int)]
    for seed in range(5):
        tally = mech.simulate_tally(counts, rng=seed)
        bonf = set(bayesldp.frequent_items(tally).items)
        bh = set(bayesldp.frequent_items(tally, correction="bh").items)
        assert bonf <= bh


def test_family_wise_error_and_power():
    """OUE, K = 20, eps = 1, n = 20,000: ten categories held by no one and ten by 10% each.
    Over 300 replications the share with any false find estimates the family-wise error
    (nominal at most 0.05; a binomial standard error of 0.0126, so 0.05 + 3 se = 0.088 bounds
    it, with the normal approximation's slack); every held category is found in at least 99%
    of its 3,000 chances (the threshold 2.81 sd = 0.038 lies 4.4 sd of its estimate below
    0.1, so each is missed with probability 6e-6)."""
    mech = bayesldp.OUE(20, 1.0)
    counts = np.r_[np.full(10, 2000), np.zeros(10, int)]
    rng = np.random.default_rng(11)
    false_any, found_true = 0, 0
    for _ in range(300):
        tally = mech.simulate_tally(counts, rng=rng)
        items = bayesldp.frequent_items(tally).items
        false_any += bool(np.any(items >= 10))
        found_true += int(np.sum(items < 10))
    assert false_any / 300 <= 0.088
    assert found_true / 3000 >= 0.99


def test_a_threshold_above_zero_is_tested_at_that_share():
    """H0: theta_x <= 0.05 for categories at exactly 0.05: the one-sided p-values are about
    uniform (a share below alpha near alpha), while categories at 0.15 are found."""
    mech = bayesldp.GRR(10, 2.0)
    counts = np.r_[np.full(5, 750), np.full(5, 250)]  # 0.15 and 0.05 of n = 5,000
    rng = np.random.default_rng(5)
    p_null = []
    for _ in range(200):
        found = bayesldp.frequent_items(mech.simulate_tally(counts, rng=rng), threshold=0.05)
        p_null.extend(found.scores[5:])
        assert set(range(5)) <= set(found.items)
    # 1,000 p-values (200 tallies, dependent within one): the share below 0.1 within
    # 0.1 +- 0.05 (four binomial standard errors of independent ones, 0.0095, with room for
    # the dependence)
    assert abs(np.mean(np.array(p_null) < 0.1) - 0.1) < 0.05


def test_posterior_rule_probabilities_and_expected_fdr():
    tally = bayesldp.GRR(6, 1.0).simulate_tally([900, 500, 300, 200, 60, 40], rng=3)
    idata = bayesldp.fit(tally, random_seed=1, progressbar=False)
    theta = np.asarray(idata.posterior["theta"]).reshape(-1, 6)
    prob = (theta > 0.1).mean(axis=0)
    found = bayesldp.posterior_frequent_items(idata, threshold=0.1, level=0.9)
    assert np.allclose(found.scores, prob)
    assert set(found.items) == set(np.flatnonzero(prob >= 0.9))
    chosen = prob[found.items]
    assert found.expected_fdr == pytest.approx(np.mean(1 - chosen) if chosen.size else 0.0)
    # the fdr rule: the largest prefix by decreasing probability within the rate
    by_fdr = bayesldp.posterior_frequent_items(idata, threshold=0.1, fdr=0.2)
    order = np.argsort(-prob, kind="stable")
    rates = np.cumsum(1 - prob[order]) / np.arange(1, 7)
    size = int(np.flatnonzero(rates <= 0.2)[-1] + 1) if np.any(rates <= 0.2) else 0
    assert set(by_fdr.items) == set(order[:size]) and by_fdr.expected_fdr <= 0.2


@pytest.mark.parametrize("kwargs, error", [
    ({"threshold": -0.1}, InvalidInputError), ({"threshold": 1.0}, InvalidInputError),
    ({"alpha": 0.0}, InvalidInputError), ({"alpha": True}, InvalidTypeError),
    ({"correction": "holm"}, InvalidInputError),
])  # fmt: skip
def test_bad_options_are_refused(kwargs, error):
    tally = bayesldp.GRR(3, 1.0).simulate_tally([10, 10, 10], rng=0)
    with pytest.raises(error):
        bayesldp.frequent_items(tally, **kwargs)


def test_posterior_rule_bad_options_are_refused():
    tally = bayesldp.GRR(3, 1.0).simulate_tally([10, 10, 10], rng=0)
    idata = bayesldp.fit(tally, random_seed=1, progressbar=False)
    with pytest.raises(InvalidInputError, match=r"\(0, 1\)"):
        bayesldp.posterior_frequent_items(idata, threshold=0.0)
    with pytest.raises(InvalidInputError, match="not both"):
        bayesldp.posterior_frequent_items(idata, threshold=0.1, level=0.9, fdr=0.1)
    with pytest.raises(InvalidInputError, match="theta"):
        bayesldp.posterior_frequent_items(object(), threshold=0.1)
