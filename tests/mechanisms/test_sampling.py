import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.sampling import NodeSampling, SampledReports
from tests.stats_helpers import assert_unbiased_with_variance

GRR = bayesldp.GRR(5, 1.0)
TRUE_COUNTS = np.array([400, 300, 200, 100, 0])  # a fixed population of n = 1000 nodes
X = np.repeat(np.arange(5), TRUE_COUNTS)
N = int(TRUE_COUNTS.sum())
PI = 0.3
REPS = 4000


@pytest.fixture(scope="module")
def common_pi_runs():
    """REPS rounds of node sampling of the fixed population, common pi = 0.3."""
    sampler = NodeSampling(GRR, PI)
    gen = np.random.default_rng(2024)
    out = {name: [] for name in ("c", "g", "c_hat", "T")}
    for _ in range(REPS):
        sampled = sampler.perturb(X, gen)
        for name in out:
            out[name].append(sampler.counts(sampled, name))
    return sampler, {name: np.array(v) for name, v in out.items()}


def test_g_unbiased_with_exact_variance(common_pi_runs):
    sampler, est = common_pi_runs
    assert_unbiased_with_variance(est["g"], TRUE_COUNTS, sampler.count_variance(X, "g"))


def test_plugin_unbiased_with_exact_variance(common_pi_runs):
    sampler, est = common_pi_runs
    assert_unbiased_with_variance(est["c_hat"], TRUE_COUNTS, sampler.count_variance(X, "c_hat"))


def test_plugin_beats_g_contrary_to_theorem_3_5(common_pi_runs):
    """The paper's Thm 3.5 (Var c_hat >= Var g) drops -2q Cov(H, S); in fact c_hat is better."""
    sampler, est = common_pi_runs
    var_g, var_c_hat = sampler.count_variance(X, "g"), sampler.count_variance(X, "c_hat")
    p, q = GRR.p, GRR.q
    diff = -(1 - PI) * q * (TRUE_COUNTS * (2 * p - q) + (N - TRUE_COUNTS) * q)
    np.testing.assert_allclose(var_c_hat - var_g, diff / (PI * (p - q) ** 2), rtol=1e-10)
    assert np.all(var_c_hat < 0.9 * var_g)
    assert np.all(est["c_hat"].var(axis=0) < est["g"].var(axis=0))


def test_t_equals_g_for_common_pi(common_pi_runs):
    _, est = common_pi_runs
    np.testing.assert_allclose(est["T"], est["g"], rtol=1e-12, atol=1e-9)


def test_naive_c_biased_as_the_paper_says(common_pi_runs):
    sampler, est = common_pi_runs
    p, q = GRR.p, GRR.q
    paper = PI * TRUE_COUNTS - N * q * (1 - PI) / (p - q)  # Biswas et al. 2022, eq. (4)
    np.testing.assert_allclose(sampler.expected_counts(X, "c"), paper, rtol=1e-12)
    var = sampler.count_variance(X, "c")
    se = np.sqrt(var / REPS)
    mean = est["c"].mean(axis=0)
    assert np.all(np.abs(mean - paper) <= 4 * se)
    assert np.all(np.abs(mean - TRUE_COUNTS) > 20 * se)  # far from the truth
    assert np.all(mean < TRUE_COUNTS)  # Theorem 2.1: biased downwards
    emp = est["c"].var(axis=0, ddof=1)
    assert np.all(np.abs(emp / var - 1) < 0.1)


def test_exact_variances_reduce_to_the_paper_var_star():
    """At f_x = 0 (category 4 holds nobody) the exact variance is the paper's Var*."""
    sampler = NodeSampling(GRR, PI)
    p, q = GRR.p, GRR.q
    assert sampler.var_star(N, "g") == pytest.approx(
        N * (q - q**2 * PI) / ((p - q) ** 2 * PI), rel=1e-12
    )
    for name in ("c", "g", "c_hat", "T"):
        assert sampler.count_variance(X, name)[4] == pytest.approx(
            sampler.var_star(N, name), rel=1e-12
        )
    pis = np.tile([0.1, 0.3, 0.6, 0.9], N // 4)
    t_star = N**2 * np.sum(q * pis * (1 - q * pis)) / (pis.sum() ** 2 * (p - q) ** 2)
    assert sampler.var_star(N, "T", pi=pis) == pytest.approx(t_star, rel=1e-12)
    assert sampler.count_variance(X, "T", pi=pis)[4] == pytest.approx(t_star, rel=1e-12)
    # Var* g >= Var* c with equality iff pi = 1 (the paper's remark); Var*(T) = Var*(g) at pi_j = pi
    assert sampler.var_star(N, "g") > sampler.var_star(N, "c")
    assert sampler.var_star(N, "g", pi=1.0) == pytest.approx(sampler.var_star(N, "c", pi=1.0))
    assert sampler.var_star(N, "T", pi=np.full(N, PI)) == pytest.approx(sampler.var_star(N, "g"))


def test_personalised_t_unbiased_with_exact_variance():
    # pi_j unrelated to x_j: every category holds the same multiset of pi_j
    pis = np.tile([0.1, 0.3, 0.6, 0.9], N // 4)
    sampler = NodeSampling(GRR, pis)
    np.testing.assert_allclose(sampler.expected_counts(X, "T"), TRUE_COUNTS, rtol=1e-12)
    gen = np.random.default_rng(7)
    est = np.array([sampler.personalised_counts(sampler.perturb(X, gen)) for _ in range(REPS)])
    assert_unbiased_with_variance(est, TRUE_COUNTS, sampler.count_variance(X, "T"))


def test_personalised_t_biased_when_pi_depends_on_the_value():
    """E T(x) = n sum_{j: x_j = x} pi_j / Pi: T needs pi_j unrelated to x_j."""
    pis = np.where(X == 0, 0.9, 0.2)
    sampler = NodeSampling(GRR, pis)
    expected = sampler.expected_counts(X, "T")
    np.testing.assert_allclose(
        expected, N * np.bincount(X, weights=pis, minlength=5) / pis.sum(), rtol=1e-12
    )
    assert expected[0] > 1.5 * TRUE_COUNTS[0]
    gen = np.random.default_rng(9)
    est = np.array([sampler.personalised_counts(sampler.perturb(X, gen)) for _ in range(1000)])
    se = np.sqrt(sampler.count_variance(X, "T") / 1000)
    assert np.all(np.abs(est.mean(axis=0) - expected) <= 4 * se)


def test_frequencies_and_pi_one_reduce_to_the_oracle():
    sampler = NodeSampling(GRR, 1.0)
    sampled = sampler.perturb(X, rng=3)
    assert sampled.n_sampled == N and sampled.pi == 1.0 and sampled.pi_sum == N
    tally = sampler.tally(sampled)
    oracle = GRR.unbiased_frequencies(tally)
    for name in ("c", "g", "c_hat", "T"):
        np.testing.assert_allclose(sampler.frequencies(sampled, name), oracle, atol=1e-12)
    np.testing.assert_allclose(sampler.counts(sampled, "g") / N, sampler.frequencies(sampled))


def test_tally_is_the_base_tally_of_the_sampled_reports():
    sampler = NodeSampling(GRR, 0.4)
    sampled = sampler.perturb(X, rng=11)
    tally = sampler.tally(sampled)
    assert tally.mechanism == GRR
    assert tally == GRR.tally(sampled.reports)
    assert tally.n == sampled.n_sampled
    h = np.array([GRR.supports(sampled.reports, v).sum() for v in range(5)])
    np.testing.assert_array_equal(sampler.support_counts(sampled), h)
    assert sampler.realised_epsilon() == GRR.realised_epsilon()
    assert sampler.k == 5 and sampler.epsilon == 1.0
    assert np.all(np.diff(sampled.nodes) > 0)


def test_nobody_sampled():
    sampler = NodeSampling(GRR, 1e-12)
    sampled = sampler.perturb([0, 1, 2], rng=0)
    assert sampled.n_sampled == 0 and sampled.reports is None
    np.testing.assert_array_equal(sampler.support_counts(sampled), np.zeros(5))
    for name in ("c", "g", "c_hat", "T"):
        assert np.all(np.isfinite(sampler.counts(sampled, name)))
    with pytest.raises(ValueError, match="no node was sampled"):
        sampler.tally(sampled)


def test_pi_given_to_perturb():
    sampler = NodeSampling(GRR)
    with pytest.raises(ValueError, match="pi"):
        sampler.perturb(X, rng=0)
    a = sampler.perturb(X, rng=0, pi=0.5)
    b = NodeSampling(GRR, 0.5).perturb(X, rng=0)
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.reports, b.reports)
    c = NodeSampling(GRR, 0.9).perturb(X, rng=0, pi=np.full(N, 0.5))  # the call's pi wins
    assert np.array_equal(c.nodes, a.nodes) and c.pi is None and c.pi_sum == 0.5 * N
    with pytest.raises(bayesldp.NotSupportedError, match="T"):
        sampler.unbiased_counts(c)
    with pytest.raises(bayesldp.NotSupportedError, match="T"):
        sampler.plugin_counts(c)


def test_same_seed_same_bits():
    sampler = NodeSampling(GRR, 0.3)
    a, b = sampler.perturb(X, rng=42), sampler.perturb(X, rng=42)
    assert isinstance(a, SampledReports)
    assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.reports, b.reports)
    assert (a.n, a.pi, a.pi_sum) == (b.n, b.pi, b.pi_sum)
    c = sampler.perturb(X, rng=43)
    assert not np.array_equal(a.nodes, c.nodes)


@pytest.mark.parametrize(
    "pi, exc",
    [
        (0.0, ValueError),
        (-0.1, ValueError),
        (1.5, ValueError),
        (float("nan"), ValueError),
        (True, TypeError),
        ("0.5", TypeError),
        (np.array([0.5, 0.0, 0.2]), ValueError),
        (np.array([[0.5, 0.5]]), ValueError),
        (np.array([], dtype=float), ValueError),
        (np.array([True, False]), TypeError),
    ],
)
def test_bad_pi(pi, exc):
    with pytest.raises(exc, match="pi"):
        NodeSampling(GRR, pi)


def test_bad_inputs():
    with pytest.raises(ValueError, match="pi: expected one probability per node"):
        NodeSampling(GRR, np.full(999, 0.5)).perturb(X)
    with pytest.raises(TypeError, match="mechanism"):
        NodeSampling(bayesldp.RRRR(5, 1.0, [0]), 0.5)
    sampler = NodeSampling(GRR, 0.5)
    with pytest.raises(ValueError, match=r"0\.\.4"):
        sampler.perturb([0, 5])
    with pytest.raises(TypeError, match="sampled"):
        sampler.naive_counts(np.array([0, 1]))
    with pytest.raises(ValueError, match="estimator"):
        sampler.counts(sampler.perturb(X, rng=0), "h")
    with pytest.raises(ValueError, match="n"):
        sampler.var_star(0)
    with pytest.raises(bayesldp.NotSupportedError, match="T"):
        sampler.count_variance(X, "g", pi=np.where(X == 0, 0.9, 0.2))


def test_audit_finds_no_violation_and_no_amplification():
    sampler = NodeSampling(bayesldp.GRR(10, 1.0), 0.5)
    result = audit(sampler, trials=100_000, rng=2)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # sampling does not amplify the local guarantee


@pytest.mark.parametrize("estimator", ["g", "c_hat", "T"])
def test_round_tally_reaches_the_papers_estimators_through_estimate(estimator):
    base = bayesldp.GRR(5, 1.0)
    x = np.repeat(np.arange(5), [4000, 3000, 1500, 1000, 500])
    pi = 0.3 if estimator != "T" else np.linspace(0.1, 0.9, x.size)
    sampler = NodeSampling(base, pi=pi)
    sampled = sampler.perturb(x, rng=2)
    tally = sampler.round_tally(sampled, estimator)
    est = bayesldp.estimate(tally, "oracle")
    np.testing.assert_allclose(est.frequencies, sampler.frequencies(sampled, estimator), rtol=1e-12)
    # standard errors: the exact variance, evaluated at the estimate (plug-in) vs at the truth
    exact = np.sqrt(sampler.count_variance(x, estimator) / x.size**2)
    np.testing.assert_allclose(est.std_errors, exact, rtol=0.1)
    # the likelihood is the base mechanism's: MLE and post-processing read the same tally
    assert bayesldp.estimate(tally, "mle").frequencies == pytest.approx(
        bayesldp.estimate(sampler.tally(sampled), "mle").frequencies
    )
    assert bayesldp.estimate(tally, "norm_sub").on_simplex


def test_round_tally_refuses_what_the_design_cannot_give():
    sampler = NodeSampling(bayesldp.GRR(3, 1.0), pi=np.full(30, 0.5))
    sampled = sampler.perturb(np.arange(30) % 3, rng=0)
    with pytest.raises(bayesldp.NotSupportedError, match="use estimator='T'"):
        sampler.round_tally(sampled, "g")
    with pytest.raises(InvalidInputError, match="'c' is biased"):
        NodeSampling(bayesldp.GRR(3, 1.0), pi=0.5).round_tally(sampled, "c")
