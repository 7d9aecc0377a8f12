"""The posterior of the sample's own frequencies (Lopuhaä-Zwakenberg et al. 2020)."""

import itertools
import warnings

import numpy as np
import pytest
from scipy import special, stats

import bayesldp
from bayesldp.errors import InvalidInputError


def _brute_force(mech, reports, alpha):
    """P(counts of the true values = c | reports) under a Dirichlet(alpha) prior, by
    enumerating every assignment of true values: P(x) = B(alpha + c(x)) / B(alpha) (theta
    integrated out) times prod_i P(y_i | x_i)."""
    channel = np.asarray(mech.channel, dtype=float)  # (K, outputs)
    k, n = mech.k, len(reports)
    alpha = np.full(k, float(alpha))
    log_beta = lambda a: special.gammaln(a).sum() - special.gammaln(a.sum())  # noqa: E731
    law: dict[tuple, float] = {}
    for xs in itertools.product(range(k), repeat=n):
        c = np.bincount(xs, minlength=k)
        weight = np.exp(log_beta(alpha + c) - log_beta(alpha))
        weight *= np.prod([channel[x, y] for x, y in zip(xs, reports, strict=True)])
        law[tuple(c)] = law.get(tuple(c), 0.0) + weight
    total = sum(law.values())
    return {c: w / total for c, w in law.items()}


@pytest.mark.parametrize("mech, reports", [
    (bayesldp.GRR(2, 1.0), [0, 0, 1, 0, 1]),
    (bayesldp.GRR(3, 1.5), [0, 2, 2, 1]),
    (bayesldp.RRRR(3, 1.0, subset=[0, 1], eps1=0.7), [0, 1, 1, 2]),
], ids=["GRR2", "GRR3", "RRRR3"])  # fmt: skip
def test_the_law_of_the_sample_counts_is_the_brute_force_one(mech, reports):
    """Exact posterior draws of theta (Dirichlet(1), the mixture), then f: the law of the
    sample's counts matches the enumeration over all K^n assignments of true values (a
    chi-square test on 8,000 draws, at level 1e-3: it detects a shift of 0.03 in a cell of
    probability 0.2 with power above 0.99)."""
    tally = mech.tally(np.asarray(reports))
    idata = bayesldp.fit(tally, method="exact", prior=1.0, draws=2000, chains=4, random_seed=5)
    f = bayesldp.sample_shares(idata, random_seed=6).posterior["f"].values.reshape(-1, mech.k)
    counts = np.rint(f * len(reports)).astype(int)
    law = _brute_force(mech, reports, 1.0)
    cells = sorted(law)
    observed = np.array([np.sum(np.all(counts == c, axis=1)) for c in cells])
    assert observed.sum() == counts.shape[0]  # no draw outside the support
    expected = np.array([law[c] for c in cells]) * counts.shape[0]
    keep = expected >= 5
    obs = np.r_[observed[keep], observed[~keep].sum()]
    exp = np.r_[expected[keep], expected[~keep].sum()]
    obs, exp = (obs, exp) if exp[-1] > 0 else (obs[:-1], exp[:-1])
    assert stats.chisquare(obs, exp).pvalue > 1e-3


def test_support_form_tallies_and_every_draw_sums_to_one():
    mech = bayesldp.OUE(4, 1.0)
    tally = mech.simulate_tally([30, 20, 10, 0], rng=2)
    idata = bayesldp.fit(tally, random_seed=1, progressbar=False)
    f = bayesldp.sample_shares(idata, random_seed=2).posterior["f"].values
    assert np.allclose(f.sum(axis=-1), 1.0)
    assert np.allclose(f * 60, np.rint(f * 60))


def test_the_same_seed_gives_the_same_draws_and_the_fit_is_unchanged():
    tally = bayesldp.GRR(3, 1.0).simulate_tally([6, 3, 1], rng=4)
    idata = bayesldp.fit(tally, method="exact", prior=1.0, draws=200, random_seed=0)
    a = bayesldp.sample_shares(idata, random_seed=3).posterior["f"].values
    b = bayesldp.sample_shares(idata, random_seed=3).posterior["f"].values
    assert np.array_equal(a, b) and "f" not in idata.posterior


def test_a_tally_that_is_not_the_fitted_one_is_refused():
    tally = bayesldp.GRR(3, 1.0).simulate_tally([6, 3, 1], rng=4)
    other = bayesldp.GRR(3, 1.0).simulate_tally([1, 3, 6], rng=4)
    idata = bayesldp.fit(tally, method="exact", prior=1.0, draws=100, random_seed=0)
    with pytest.raises(InvalidInputError, match="counts differ"):
        bayesldp.sample_shares(idata, other)


@pytest.mark.slow
def test_f_intervals_cover_the_sample_and_theta_intervals_over_cover_it():
    """GRR, K = 4, eps = 2, groups of n = 60 users drawn from a fixed theta: over 200 groups
    the 90% equal-tailed intervals of f cover the group's own shares in 0.85-0.95 of the 800
    (category, group) cases (binomial sd 0.011 if independent; the four categories of a group
    are dependent, so the band is wider than 4 sd), and theta's intervals cover them more
    often (they include the sampling error of the group)."""
    mech = bayesldp.GRR(4, 2.0)
    theta = np.array([0.5, 0.3, 0.15, 0.05])
    rng = np.random.default_rng(21)
    hit_f = hit_theta = 0
    for rep in range(200):
        values = rng.choice(4, size=60, p=theta)
        truth = np.bincount(values, minlength=4) / 60
        tally = mech.tally(mech.perturb(values, rng=rng))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = bayesldp.fit(tally, random_seed=rep, progressbar=False)
        post = bayesldp.sample_shares(idata, random_seed=rep).posterior
        for name in ("f", "theta"):
            draws = post[name].values.reshape(-1, 4)
            lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
            covered = int(np.sum((truth >= lo - 1e-12) & (truth <= hi + 1e-12)))
            hit_f += covered if name == "f" else 0
            hit_theta += covered if name == "theta" else 0
    assert 0.85 <= hit_f / 800 <= 0.95, hit_f
    assert hit_theta > hit_f
