"""Simulation-based calibration (Talts et al. 2018): the SBC machinery and the default sampler.

Fast tests check the rank / coverage / thinning helpers on synthetic posteriors whose
calibration is known (exact conjugate draws pass; over- and under-confident and biased draws,
and autocorrelated draws ranked without thinning, fail).  The slow test runs a reduced SBC of
bayesldp's default sampler (hmc): GRR, K = 3, eps = 1, n = 500, L = 200.
"""

import math

import numpy as np
import pytest

from bayesldp.bayes import AdaptiveDirichlet
from bayesldp.bayes.calibration import (
    BackendSampler,
    effective_sample_size,
    interval_contains,
    loglik_ranks,
    rank_histogram,
    rank_statistics,
    rank_uniformity_test,
    run_sbc,
    sbc_replication,
    summarise_sbc,
    thin_by_ess,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.grr import GRR
from bayesldp.tally import Tally

M = 99  # draws per rank: ranks 0..99, 10 bins of 10


def _normal_sbc(reps, k, *, scale=1.0, shift=0.0, seed=0, m=999):
    """Normal-normal SBC: mu ~ N(0, 1), y ~ N(mu, 1); exact posterior N(y/2, 1/2).

    The 'sampler' draws from N(y/2 + shift * sd, (scale * sd)^2), sd = sqrt(1/2): calibrated
    iff scale = 1 and shift = 0.
    """
    gen = np.random.default_rng(seed)
    mu = gen.normal(size=(reps, k))
    y = mu + gen.normal(size=(reps, k))
    sd = math.sqrt(0.5)
    draws = y[:, None, :] / 2 + sd * (shift + scale * gen.normal(size=(reps, m, k)))
    return mu, draws


def _summary(mu, draws, seed=1):
    """Ranks against the first M draws; intervals from all of them (sample quantiles of only
    99 draws cover about 88 %, not 90 %)."""
    ranks = rank_statistics(mu, draws[:, :M], seed)
    inside = interval_contains(mu, draws, 0.9)
    return summarise_sbc(ranks, inside, max_rank=M)


# ---------------------------------------------------------------------------- rank statistics
def test_rank_statistics_counts_draws_below_the_truth():
    truth = np.array([0.5, 2.0])
    draws = np.array([[0.0, 1.0], [1.0, 3.0], [0.2, 2.5], [0.7, -1.0]])
    np.testing.assert_array_equal(rank_statistics(truth, draws), [2, 2])
    # batched over replications
    ranks = rank_statistics(np.stack([truth, truth + 10]), np.stack([draws, draws]))
    np.testing.assert_array_equal(ranks, [[2, 2], [4, 4]])


def test_rank_statistics_breaks_ties_uniformly():
    truth = np.ones((4000, 1))
    draws = np.concatenate([np.zeros((4000, 1, 1)), np.ones((4000, 3, 1))], axis=1)
    ranks = rank_statistics(truth, draws, rng=3)[:, 0]
    # one draw below, three tied: rank uniform on {1, 2, 3, 4}
    counts = np.bincount(ranks, minlength=5)
    assert counts[0] == 0
    assert np.all(np.abs(counts[1:] / 4000 - 0.25) < 0.03), counts
    np.testing.assert_array_equal(ranks, rank_statistics(truth, draws, rng=3)[:, 0])


def test_rank_statistics_rejects_mismatched_shapes():
    with pytest.raises(InvalidInputError, match="draws"):
        rank_statistics(np.zeros(3), np.zeros((10, 2)))
    with pytest.raises(InvalidInputError, match="NaN"):
        rank_statistics(np.array([np.nan]), np.zeros((10, 1)))


def test_rank_histogram_bins_and_validation():
    ranks = np.array([[0], [9], [10], [99], [55]])
    counts = rank_histogram(ranks, 99, 10)
    assert counts.shape == (10, 1)
    np.testing.assert_array_equal(counts[:, 0], [2, 1, 0, 0, 0, 1, 0, 0, 0, 1])
    with pytest.raises(InvalidInputError, match="bins"):
        rank_histogram(ranks, 99, 7)
    with pytest.raises(InvalidInputError, match=r"0\.\.99"):
        rank_histogram(np.array([[100]]), 99, 10)
    with pytest.raises(InvalidTypeError, match="ranks"):
        rank_histogram(np.array([[0.5]]), 99, 10)
    with pytest.raises(InvalidInputError, match="replications"):
        rank_uniformity_test(np.zeros((20, 1), dtype=int), 99, 10)


# ---------------------------------------------------------------------------- known calibration
def test_exact_posterior_draws_pass():
    summary = _summary(*_normal_sbc(1000, 4))
    assert summary.min_p > 1e-3, summary.pvalues
    assert abs(summary.mean_coverage - 0.9) < 0.015, summary.coverage
    assert summary.passed and summary.verdict == "pass"
    assert summary.rank_counts.sum(axis=0).tolist() == [1000] * 4


@pytest.mark.parametrize(
    ("scale", "shift", "coverage_side"),
    [(0.6, 0.0, "low"), (1.6, 0.0, "high"), (1.0, 0.6, None)],
    ids=["overconfident", "underconfident", "biased"],
)
def test_miscalibrated_draws_fail(scale, shift, coverage_side):
    summary = _summary(*_normal_sbc(1000, 4, scale=scale, shift=shift))
    assert summary.min_p < 1e-6, summary.pvalues
    assert not summary.passed and summary.verdict.startswith("FAIL (ranks")
    counts = summary.rank_counts.sum(axis=1)
    if coverage_side == "low":  # too narrow: U-shaped ranks, truth often outside
        assert counts[0] + counts[-1] > 3 * counts[4:6].sum() / 2
        assert summary.mean_coverage < 0.8
    elif coverage_side == "high":  # too wide: hump-shaped ranks
        assert counts[4:6].sum() > 2 * (counts[0] + counts[-1])
        assert summary.mean_coverage > 0.97
    else:  # shifted up: truth ranks low
        assert counts[:5].sum() > 1.5 * counts[5:].sum()


def test_loglik_ranks_count_draws_with_a_lower_likelihood():
    """Direct observation of counts (3, 1): log-likelihood 3 log theta_0 + log theta_1, highest
    at the MLE (0.75, 0.25); a draw that makes an observed report impossible ranks lowest."""
    tally = _Direct(2).simulate_tally([3, 1])
    draws = np.array([[0.5, 0.5], [0.9, 0.1], [0.6, 0.4]])
    assert loglik_ranks(tally, np.array([0.75, 0.25]), draws) == 3
    # -3.26 at (0.4, 0.6) is below -2.77, -2.62 and -2.45 at the draws
    assert loglik_ranks(tally, np.array([0.4, 0.6]), draws) == 0
    impossible = np.array([[1.0, 0.0], [0.75, 0.25]])
    assert loglik_ranks(tally, np.array([0.5, 0.5]), impossible) == 1
    ranks = np.tile(np.arange(100), 2)[:, None]
    inside = np.ones((200, 1), dtype=bool)
    piled = summarise_sbc(ranks, inside, max_rank=99, loglik_ranks=np.full(200, 99))
    assert piled.ranks_ok is False and piled.verdict.startswith("FAIL (loglik ranks: p")
    assert piled.loglik_counts.tolist() == [0] * 9 + [200]
    with pytest.raises(InvalidInputError, match="loglik_ranks"):
        summarise_sbc(ranks, inside, max_rank=99, loglik_ranks=np.zeros(5, dtype=int))


def test_interval_contains_matches_quantiles():
    draws = np.arange(101, dtype=float)[:, None]  # quantiles 5 and 95
    np.testing.assert_array_equal(
        [interval_contains(np.array([t]), draws, 0.9)[0] for t in (4.9, 5.0, 95.0, 95.1)],
        [False, True, True, False],
    )
    with pytest.raises(InvalidInputError, match="level"):
        interval_contains(np.zeros(1), draws, 1.0)


def test_summary_coverage_failure_is_reported():
    ranks = np.tile(np.arange(100), 2)[:, None]  # perfectly uniform ranks
    inside = np.zeros((200, 1), dtype=bool)
    inside[:150] = True  # 75 % coverage
    summary = summarise_sbc(ranks, inside, max_rank=99)
    assert summary.ranks_ok and not summary.coverage_ok
    assert summary.verdict == "FAIL (coverage 0.750)"
    assert summary.bonferroni_p == pytest.approx(1.0)
    assert summary.coverage_se == pytest.approx(math.sqrt(0.09 / 200))


# ---------------------------------------------------------------------------- thinning
def _ar1(gen, reps, chains, length, rho, centre, sd):
    """Stationary AR(1) chains with marginal N(centre, sd^2), shape (reps, chains, length)."""
    x = np.empty((reps, chains, length))
    x[..., 0] = gen.normal(size=(reps, chains))
    noise = math.sqrt(1 - rho**2)
    for t in range(1, length):
        x[..., t] = rho * x[..., t - 1] + noise * gen.normal(size=(reps, chains))
    return centre[:, None, None] + sd * x


def test_thin_by_ess_uses_ceil_n_over_ess():
    theta = np.arange(2 * 50 * 1, dtype=float).reshape(2, 50, 1)
    out = thin_by_ess(theta, 10, ess=20.0)  # thin ceil(100 / 20) = 5: 10 + 10 kept, take 10
    assert out.thin == 5 and out.sufficient
    np.testing.assert_array_equal(out.draws[:, 0], [0, 10, 20, 30, 40, 50, 60, 70, 80, 90])
    low = thin_by_ess(theta, 30, ess=20.0)  # only 20 survive: fall back to the raw draws
    assert not low.sufficient and low.draws.shape == (30, 1)
    with pytest.raises(InvalidInputError, match="size"):
        thin_by_ess(theta, 101, ess=20.0)


def test_effective_sample_size_tracks_autocorrelation():
    gen = np.random.default_rng(5)
    iid = gen.normal(size=(4, 500, 2))
    ar = _ar1(gen, 1, 4, 500, 0.9, np.zeros(1), 1.0)[0][..., None]
    ess_iid = effective_sample_size(iid)
    ess_ar = float(effective_sample_size(ar)[0])
    assert ess_iid.shape == (2,) and np.all(ess_iid > 1000)
    expected = 2000 * 0.1 / 1.9  # N (1 - rho) / (1 + rho)
    assert 0.5 * expected < ess_ar < 2 * expected, ess_ar
    assert thin_by_ess(ar, 50).thin == math.ceil(2000 / ess_ar)


def test_thinning_restores_uniform_ranks_of_autocorrelated_draws():
    gen = np.random.default_rng(11)
    reps, rho = 500, 0.95
    mu = gen.normal(size=reps)
    y = mu + gen.normal(size=reps)
    chains = _ar1(gen, reps, 8, 1000, rho, y / 2, math.sqrt(0.5))  # exact posterior, correlated
    ess = 8000 * (1 - rho) / (1 + rho)  # about 205
    raw = chains[:, 0, :M, None]  # 99 consecutive draws of one chain
    p_raw = rank_uniformity_test(rank_statistics(mu[:, None], raw), M)[1][0]
    assert p_raw < 1e-6, p_raw
    thinned = np.stack([thin_by_ess(c[..., None], M, ess=ess).draws for c in chains])
    p_thin = rank_uniformity_test(rank_statistics(mu[:, None], thinned), M)[1][0]
    assert p_thin > 1e-3, p_thin


# ---------------------------------------------------------------------------- full pipeline
class _Direct:
    """Direct (non-private) observation: the tally rows are the identity."""

    def __init__(self, k):
        self.k = k

    def simulate_tally(self, counts, rng=None):
        counts = np.asarray(counts)
        return Tally(counts, rows=np.eye(self.k), stat=counts.astype(float), family="direct")


def _conjugate(power):
    """Dirichlet(alpha + power * counts) draws: the exact posterior iff power == 1."""

    def sampler(tally, alpha, seed):
        gen = np.random.default_rng(seed)
        return gen.dirichlet(alpha + power * tally.stat, size=(4, 100))

    return sampler


def test_run_sbc_pipeline_passes_exact_and_fails_overconfident():
    alpha = np.ones(3)
    good, reps = run_sbc(_Direct(3), alpha, 50, _conjugate(1.0), 100, 2024)
    assert good.reps == 100 and len(reps) == 100
    assert good.min_p > 1e-3 and 0.85 <= good.mean_coverage <= 0.95, good
    bad, bad_reps = run_sbc(_Direct(3), alpha, 50, _conjugate(4.0), 100, 2024)
    assert bad.min_p < 1e-6 and bad.mean_coverage < 0.7, bad
    # same seed, same data sets whatever the sampler; same sampler too: identical ranks
    np.testing.assert_array_equal(reps[7].truth, bad_reps[7].truth)
    again, _ = run_sbc(_Direct(3), alpha, 50, _conjugate(1.0), 100, 2024)
    np.testing.assert_array_equal(again.rank_counts, good.rank_counts)


def test_sbc_replication_with_the_default_sampler():
    rep = sbc_replication(GRR(3, 1.0), np.ones(3), 200, BackendSampler("hmc", 200, 2), 9)
    assert rep.rank.shape == (3,) and rep.rank.min() >= 0 and rep.rank.max() <= M
    assert rep.inside.dtype == bool and rep.ess > 50 and rep.thin >= 1
    with pytest.raises(InvalidInputError, match="alpha"):
        sbc_replication(GRR(3, 1.0), np.ones(4), 200, BackendSampler("hmc", 200, 2), 9)
    with pytest.raises(InvalidInputError, match="method"):
        BackendSampler("gibbs", 10, 1)


def test_sbc_replication_under_the_adaptive_prior():
    """theta~ comes from the adaptive prior (the same Generator draws it first) and the
    sampler is handed the prior object itself."""
    prior = AdaptiveDirichlet(4)
    seen = []

    def sampler(tally, alpha, seed):
        seen.append(alpha)
        return np.random.default_rng(seed).dirichlet(np.ones(4), size=(2, 300))

    rep = sbc_replication(GRR(4, 1.0), prior, 100, sampler, 5)
    np.testing.assert_array_equal(rep.truth, prior.sample(1, rng=np.random.default_rng(5))[0])
    assert seen == [prior] and rep.rank.shape == (4,)
    with pytest.raises(InvalidInputError, match="alpha: length 4"):
        sbc_replication(GRR(3, 1.0), prior, 100, sampler, 5)


# ---------------------------------------------------------------------------- slow: real SBC
@pytest.mark.slow
def test_hmc_is_calibrated_grr_k3_eps1():
    """Reduced SBC of the default sampler: L = 200, chi-square p > 0.001, coverage 85-95 %."""
    summary, _ = run_sbc(
        GRR(3, 1.0), np.ones(3), 500, BackendSampler("hmc", 1000, 2), 200, 20261122
    )
    assert summary.reps == 200
    # a rate bound, not "none" (the count is random): were 1 replication in 500 below the
    # ESS floor, more than 3 of 200 would have probability 8e-4
    assert summary.low_ess <= 3
    assert summary.min_p > 1e-3, summary.pvalues
    assert 0.85 <= summary.mean_coverage <= 0.95, summary.coverage
    assert np.all((summary.coverage >= 0.85) & (summary.coverage <= 0.95)), summary.coverage


@pytest.mark.slow
@pytest.mark.parametrize("prior", ["Dirichlet(1)", "adaptive"])
def test_hmc_on_nested_log_ratios_is_calibrated_rrrr(prior, monkeypatch):
    """Reduced SBC of NUTS on nested log-ratios, forced in every replication (the group
    {1, 2, 3} outside RRRR's subset {0}, K = 4, n = 500), under Dirichlet(1) and under the
    adaptive prior (its joint scheme on the same coordinates): L = 200, chi-square p > 0.001,
    coverage 85-95 % per coordinate.  Under the adaptive prior a few replications whose
    group total is near 0 (a Dirichlet(a) draw at small a) mix slower (8 of 200 below 99
    effective draws in a scratch run), so up to 10 are allowed here, at target_accept 0.95
    as in that run (11 at the default 0.9); the default does not nest a group whose total is
    below ``hmc.NESTED_TOTAL``, and the next test checks the default where it nests."""
    from bayesldp.bayes import hmc
    from bayesldp.mechanisms.rrrr import RRRR

    calls = []

    def nesting(m, m_free, theta):
        calls.append(1)
        return hmc._group_codes(np.array([False, True, True, True]), theta)

    monkeypatch.setattr(hmc.run, "_nesting", nesting)
    alpha = np.ones(4) if prior == "Dirichlet(1)" else AdaptiveDirichlet(4)
    mech = RRRR(k=4, epsilon=2.0, subset=[0], eps1=1.5)
    sampler = BackendSampler("hmc", 1000, 2, {"target_accept": 0.95})
    summary, _ = run_sbc(mech, alpha, 500, sampler, 200, 20261126)
    assert len(calls) == 200
    assert summary.low_ess <= (3 if prior == "Dirichlet(1)" else 10)  # 3: as in the test above
    assert summary.min_p > 1e-3, summary.pvalues
    assert np.all((summary.coverage >= 0.85) & (summary.coverage <= 0.95)), summary.coverage


@pytest.mark.slow
def test_default_hmc_on_rrrr_is_calibrated_under_the_adaptive_prior(monkeypatch):
    """Reduced SBC of the default fit of RRRR's reports (K = 10, S = {0, 1, 2}, eps = 1,
    eps1 = 0.8, n = 20,000) under the adaptive prior, with the default's own choice of
    coordinates (nested log-ratios in most replications): L = 200, chi-square p > 0.001 per
    coordinate, pooled coverage 85-95 % and each coordinate's within 83-97 % (about 3 binomial
    s.e.), at most 6 replications below 99 effective draws (11 when every group found was
    nested, whatever its total; 4 in a scratch run of this code, s19_sbc_rrrr.py)."""
    from bayesldp.bayes import hmc
    from bayesldp.mechanisms.rrrr import RRRR

    nested = []
    nesting = hmc._nesting
    monkeypatch.setattr(hmc.run, "_nesting", lambda *a: nested.append(nesting(*a)) or nested[-1])
    mech = RRRR(k=10, epsilon=1.0, subset=[0, 1, 2], eps1=0.8)
    summary, _ = run_sbc(mech, AdaptiveDirichlet(10), 20_000, BackendSampler("hmc", 1000, 2), 200,
                         20261126)  # fmt: skip
    assert sum(c is not None for c in nested) >= 100
    assert summary.low_ess <= 6
    assert summary.min_p > 1e-3, summary.pvalues
    assert 0.85 <= summary.mean_coverage <= 0.95, summary.coverage
    assert np.all((summary.coverage >= 0.83) & (summary.coverage <= 0.97)), summary.coverage
