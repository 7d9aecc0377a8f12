"""One posterior (and one MLE) from tallies collected under different mechanisms or budgets."""

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.tally import joint_tally


def two_tallies(n=(4000, 4000), seed=0):
    theta = np.array([0.45, 0.3, 0.15, 0.1])
    rng = np.random.default_rng(seed)
    grr, oue = bayesldp.GRR(4, 1.0), bayesldp.OUE(4, 2.0)
    a = grr.simulate_tally(rng.multinomial(n[0], theta), rng=rng)
    b = oue.simulate_tally(rng.multinomial(n[1], theta), rng=rng)
    return theta, a, b


def test_joint_loglik_is_the_sum_of_the_parts():
    _, a, b = two_tallies()
    joint = joint_tally([a, b])
    assert joint.mechanism is None and joint.n == a.n + b.n and joint.family.startswith("joint(")
    points = np.random.default_rng(1).dirichlet(np.ones(4), size=5)
    got = joint.loglik(points)
    want = a.loglik(points) + b.loglik(points)
    np.testing.assert_allclose(np.diff(got), np.diff(want), rtol=1e-10)  # rows up to a factor


def test_joint_fit_is_narrower_than_either_tally_alone():
    _, a, b = two_tallies()
    sd = {}
    for name, tally in [("a", a), ("b", b), ("joint", [a, b])]:
        idata = bayesldp.fit(tally, draws=1000, random_seed=2)
        sd[name] = idata.posterior["theta"].std(("chain", "draw")).values
    assert np.all(sd["joint"] < sd["a"]) and np.all(sd["joint"] < sd["b"])


def test_joint_exact_posterior_equals_brute_force_on_a_tiny_case():
    grr, ue = bayesldp.GRR(3, 1.0), bayesldp.SUE(3, 1.5)
    a = grr.tally_from_report_counts([3, 1, 1])
    b = ue.tally(np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=bool))
    idata = bayesldp.fit([a, b], prior=1.0, method="exact", draws=20_000, chains=1, random_seed=3)
    mean = idata.posterior["theta"].mean(("chain", "draw")).values
    # brute force: the uniform prior times both likelihoods on a fine simplex grid
    g = np.linspace(0, 1, 801)
    t0, t1 = np.meshgrid(g, g, indexing="ij")
    inside = t0 + t1 <= 1
    pts = np.stack([t0[inside], t1[inside], 1 - t0[inside] - t1[inside]], axis=1)
    logw = a.loglik(pts) + b.loglik(pts)
    w = np.exp(logw - logw.max())
    want = (w[:, None] * pts).sum(axis=0) / w.sum()
    se = idata.posterior["theta"].std(("chain", "draw")).values / np.sqrt(20_000)
    assert np.all(np.abs(mean - want) < 4 * se + 2e-4)  # MC error + grid error


def test_joint_mle_and_em_agree_and_oracles_refuse():
    theta, a, b = two_tallies(n=(20_000, 20_000))
    mle = bayesldp.estimate([a, b], "mle").frequencies
    em = bayesldp.estimate([a, b], "em", tol=1e-13).frequencies
    np.testing.assert_allclose(mle, em, atol=1e-6)
    assert np.abs(mle - theta).max() < 0.03
    with pytest.raises(NotSupportedError, match="mle"):
        bayesldp.estimate([a, b], "norm_sub")


def test_same_family_merges_and_bad_input():
    grr = bayesldp.GRR(4, 1.0)
    a = grr.simulate_tally([10, 10, 10, 10], rng=0)
    b = grr.simulate_tally([5, 5, 5, 5], rng=1)
    assert joint_tally([a, b]) == a + b and joint_tally([a, b]).mechanism == grr
    with pytest.raises(InvalidInputError, match=r"tallies\[1\]: has K = 3"):
        joint_tally([a, bayesldp.GRR(3, 1.0).simulate_tally([5, 5, 5], rng=2)])
    with pytest.raises(InvalidInputError, match="non-empty list"):
        joint_tally([])
    with pytest.raises(InvalidTypeError, match=r"tallies\[1\]"):
        joint_tally([a, "reports"])
