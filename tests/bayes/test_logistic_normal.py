"""The exchangeable logistic-normal prior (LogisticNormal): its basis, draws, PyMC model and fit.
Its posterior against importance sampling from the prior is in test_sampler_reference.py."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.bayes import LogisticNormal, as_prior, build_model, fit, load_fit, save_fit
from bayesldp.bayes.calibration import rank_statistics, thin_by_ess
from bayesldp.bayes.io import fit_prior
from bayesldp.bayes.prior import prior_from_json
from bayesldp.errors import InvalidInputError, NotSupportedError
from tests.stats_helpers import (
    assert_derivatives_match_differences,
    assert_prior_draws_match_pymc,
    assert_sbc_ranks_uniform,
)


def _zipf_tally(k: int = 12, n: int = 5000, eps: float = 1.0, seed: int = 0):
    theta = np.arange(1.0, k + 1) ** -1.5
    theta /= theta.sum()
    rng = np.random.default_rng(seed)
    mech = bayesldp.GRR(k, eps)
    return mech.simulate_tally(rng.multinomial(n, theta), rng=seed + 1), theta


@pytest.mark.parametrize("k", [2, 5, 40])
def test_basis_is_orthonormal_and_sums_to_zero(k):
    line, modes, scale = LogisticNormal(k).basis()
    assert modes.shape == (k, k - 1)
    np.testing.assert_allclose(modes.T @ modes, np.eye(k - 1), atol=1e-12)
    np.testing.assert_allclose(modes.sum(axis=0), 0.0, atol=1e-12)
    assert not line.any() and np.all(scale == 1.0)


def test_draws_have_the_defined_law():
    """theta = softmax(y), y_x i.i.d. N(m, lambda^2): each log-ratio log theta_x - log theta_z is
    N(0, 2 lambda^2) given lambda, and log lambda ~ N(mu, sigma^2).  20,000 draws, KS tests at
    level 1e-3: a log-ratio whose sd is 8 % too large is rejected in 200 of 200 simulated
    samples, 5 % too large in 0.735 of them (one-off simulation of the same KS test)."""
    prior = LogisticNormal(6, log_scale_mean=0.4, log_scale_sd=0.7)
    theta, lam = prior.draws(20_000, rng=7)
    assert stats.kstest(np.log(lam), "norm", args=(0.4, 0.7)).pvalue > 1e-3
    ratio = (np.log(theta[:, 1]) - np.log(theta[:, 4])) / (np.sqrt(2.0) * lam)
    assert stats.kstest(ratio, "norm").pvalue > 1e-3
    # the categories are exchangeable: the first and the last have the same law
    assert stats.ks_2samp(theta[:, 0], theta[:, 5]).pvalue > 1e-3
    assert prior.sample((2, 3), rng=1).shape == (2, 3, 6)


def test_sample_matches_the_pymc_prior():
    """prior.sample and PyMC's prior draws of theta agree (seeded; 4 MC standard errors)."""
    tally, _ = _zipf_tally(k=6, n=100)
    prior = LogisticNormal(6, log_scale_mean=0.5, log_scale_sd=0.5)
    assert_prior_draws_match_pymc(prior, tally, columns=(0, 5))


def test_named_and_serialised():
    assert as_prior("logistic_normal", 10) == LogisticNormal(10)
    prior = LogisticNormal(10, log_scale_mean=0.5, log_scale_sd=2.0)
    assert prior_from_json(prior.to_json()) == prior
    assert prior.with_k(12) == LogisticNormal(12, log_scale_mean=0.5, log_scale_sd=2.0)
    assert repr(prior) == "LogisticNormal(k=10, log_scale_mean=0.5, log_scale_sd=2)"
    assert bayesldp.LogisticNormal is LogisticNormal


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 1}, "k"),
        ({"k": 5, "log_scale_mean": float("inf")}, "log_scale_mean"),
        ({"k": 5, "log_scale_mean": "0"}, "log_scale_mean"),
        ({"k": 5, "log_scale_sd": 0.0}, "log_scale_sd"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        LogisticNormal(**kwargs)


def test_fit_errors():
    tally, _ = _zipf_tally()
    with pytest.raises(InvalidInputError, match="LogisticNormal on 5 categories"):
        fit(tally, prior=LogisticNormal(5))
    with pytest.raises(NotSupportedError, match="LogisticNormal prior is not available"):
        fit(tally, prior="logistic_normal", method="sgld")
    with pytest.raises(InvalidInputError, match="its own coordinates"):
        fit(tally, prior="logistic_normal", method="hmc", coordinates="alr", draws=10, chains=1)


def test_hmc_density_matches_the_pymc_model():
    """The compiled density on (u, b, log lambda) and its gradient: differences of the log
    density equal PyMC's model (the same coordinates and weights; PyMC's has no slope, which
    here is a free N(0, 1) coordinate) and the gradient equals finite differences."""
    from bayesldp.bayes.hmc import _SmoothTarget
    from bayesldp.bayes.hmc.smooth import pilot_information

    tally, _ = _zipf_tally(k=9, n=3000)
    prior = LogisticNormal(9, log_scale_mean=0.3, log_scale_sd=1.0)
    target = _SmoothTarget(tally, prior, pilot_information(tally, prior, np.random.default_rng(0)))
    d = prior.n_modes + 2
    assert target.d == d and np.isfinite(target.start).all()
    logp = build_model(tally, prior).compile_logp()
    rng = np.random.default_rng(3)
    points = target.start + 0.3 * rng.standard_normal((3, d))
    ours, _ = target(points)

    def pymc(q):
        return logp({"coef": q[:-2], "log_spread": q[-1]}) - 0.5 * q[-2] ** 2

    for q, value in zip(points[1:], ours[1:], strict=True):
        assert value - ours[0] == pytest.approx(pymc(q) - pymc(points[0]), rel=1e-9, abs=1e-8)
    assert_derivatives_match_differences(target, points[0], rel_grad=1e-5, abs_grad=1e-5)


@pytest.mark.parametrize("method", ["auto", "nuts"])
def test_fit_learns_the_spread_and_round_trips(method, tmp_path):
    """On a Zipf(1.5) population (K = 12, 5,000 GRR reports at eps 1) the posterior of the
    spread sits near the population's own sd of log-frequencies (1.26): the 95 % interval of
    the draws holds it; the posterior variable is ``spread`` and the prior survives save/load."""
    tally, theta = _zipf_tally()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short run's convergence warnings are not tested here
        idata = fit(tally, prior="logistic_normal", method=method, draws=500, tune=500,
                    chains=2, cores=1, random_seed=4, progressbar=False)  # fmt: skip
    post = idata.posterior
    assert post.attrs["method"] == ("hmc" if method == "auto" else "nuts")
    assert json.loads(post.attrs["prior"])["distribution"] == "LogisticNormal"
    spread = post["spread"].values.ravel()
    truth = np.log(theta).std(ddof=1)
    lo, hi = np.quantile(spread, [0.025, 0.975])
    assert lo < truth < hi, (lo, truth, hi)
    save_fit(idata, tmp_path / "fit.nc")
    assert fit_prior(load_fit(tmp_path / "fit.nc")) == LogisticNormal(12)


@pytest.mark.slow
def test_simulation_based_calibration():
    """Simulation-based calibration (Talts et al. 2018) of fit's default under the default
    logistic-normal prior: 400 populations drawn from the prior (K = 6, their spread kept),
    300 users each, GRR at eps = 2; the ranks of theta_0 and of the spread among 99 draws
    thinned by their effective sample size are uniform (chi-square over 10 bins, family-wise
    level 1e-3), a test with power 0.98 against draws 0.75 times as spread out as the
    posterior and 0.94 against 1.33 times."""
    k, n, reps = 6, 300, 400
    prior = LogisticNormal(k)
    mech = bayesldp.GRR(k, 2.0)
    rng = np.random.default_rng(8)
    ranks = []
    for rep in range(reps):
        theta, lam = prior.draws(1, rng=rng)
        tally = mech.simulate_tally(rng.multinomial(n, theta[0]), rng=rng)
        idata = fit(tally, prior=prior, draws=1000, tune=500, chains=2, random_seed=rep,
                    progressbar=False, compute_convergence_checks=False)  # fmt: skip
        post = idata.posterior
        draws = np.stack([post["theta"].values[..., 0], post["spread"].values], axis=-1)
        truth = np.array([theta[0, 0], lam[0]])
        ranks.append(rank_statistics(truth, thin_by_ess(draws, 99).draws, rng))
    assert_sbc_ranks_uniform(ranks, 99, scale=0.75, power=0.95)
    assert_sbc_ranks_uniform(ranks, 99, scale=1.33, power=0.9)
