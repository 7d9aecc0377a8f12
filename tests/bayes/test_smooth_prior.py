"""The smoothness prior for ordered bins (SmoothDensity): its PyMC model, draws and fit."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import softmax

import bayesldp
from bayesldp.bayes import SmoothDensity, as_prior, build_model, fit, load_fit, save_fit
from bayesldp.bayes.calibration import rank_statistics, thin_by_ess
from bayesldp.bayes.io import fit_prior
from bayesldp.bayes.prior import prior_from_json
from bayesldp.errors import InvalidInputError, NotSupportedError
from tests.stats_helpers import assert_prior_draws_match_pymc, assert_sbc_ranks_uniform


def _sw_tally(k: int = 8, n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(0.2, 0.25, n), -1.0, 1.0)
    mech = bayesldp.SquareWave(k, 1.0, lo=-1.0, hi=1.0, output_bins=k)
    return mech.tally(mech.perturb(x, rng=seed + 1)), x


def test_basis_diagonalises_the_rw2_precision():
    """modes @ diag(lambda^2 scale^2) @ modes.T + a line is the RW2 prior's covariance: the
    modes are orthonormal eigenvectors of D^T D, orthogonal to the constant and the line."""
    k = 9
    line, modes, scale = SmoothDensity(k).basis()
    diff2 = np.diff(np.eye(k), n=2, axis=0)
    precision = diff2.T @ diff2 * k**3  # of f per lambda^-2
    np.testing.assert_allclose(modes.T @ modes, np.eye(k - 2), atol=1e-12)
    np.testing.assert_allclose(
        modes.T @ precision @ modes, np.diag(scale**-2), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(line @ modes, 0.0, atol=1e-12)
    np.testing.assert_allclose(modes.sum(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(diff2 @ line, 0.0, atol=1e-15)
    np.testing.assert_allclose(line, (np.arange(k) + 0.5) / k - 0.5)


def test_max_modes_keeps_the_smoothest_modes():
    _, modes, scale = SmoothDensity(20).basis()
    _, cut, cut_scale = SmoothDensity(20, max_modes=5).basis()
    np.testing.assert_array_equal(cut, modes[:, :5])
    np.testing.assert_array_equal(cut_scale, scale[:5])
    assert np.all(np.diff(scale) < 0)  # the smoothest (largest prior sd) first
    assert SmoothDensity(20, max_modes=5).n_modes == 5
    assert SmoothDensity(20, max_modes=None).n_modes == SmoothDensity(20).n_modes == 18
    assert SmoothDensity(20, max_modes=5).sample(3, rng=0).shape == (3, 20)


def test_the_default_cut_drops_little_at_1024_bins():
    """The max_modes docstring's figures: at K = 1024 and lambda = 4,029 the 257th mode moves a
    log-weight by at most 0.0092 (prior sd) and the dropped modes together by 0.065 (rms)."""
    k, lam = 1024, math.exp(math.log(30) + 1.96 * 2.5)
    _, modes, scale = SmoothDensity(k, max_modes=None).basis()
    assert lam == pytest.approx(4029, abs=0.5)
    assert lam * scale[256] * np.abs(modes[:, 256]).max() == pytest.approx(0.0092, abs=5e-5)
    assert lam * math.sqrt((scale[256:] ** 2).sum() / k) == pytest.approx(0.065, abs=5e-4)
    assert SmoothDensity(k).n_modes == 256


@pytest.mark.parametrize("information", [None, "data"])
def test_model_log_density_matches_the_formula(information):
    """PyMC's joint log-density equals the docstring's prior plus tally.loglik, by hand, with
    the coefficients non-centred (no information) or partially so (the data's, as the pilot
    chain measures it)."""
    from bayesldp.bayes.hmc.smooth import pilot_information

    tally, _ = _sw_tally()
    prior = SmoothDensity(8, log_scale_mean=1.0, log_scale_sd=0.7, slope_sd=3.0)
    model = build_model(tally, prior)
    info = np.zeros(6)
    if information:  # build_model's pilot: seed 0
        info = pilot_information(tally, prior, np.random.default_rng(0))
    if information is None:  # the same prior without the data's information
        import pymc as pm

        from bayesldp.bayes.model import smooth_theta, tally_likelihood

        model = pm.Model(coords={"category": np.arange(8)})
        with model:
            tally_likelihood(tally, smooth_theta(prior))
    rng = np.random.default_rng(5)
    point = {"log_smoothness": 0.4, "slope": 1.3, "coef": rng.normal(size=6)}
    logp = model.compile_logp()(point)

    line, modes, scale = prior.basis()
    sd = math.exp(0.4) * scale
    weight = 1.0 / (1.0 + info * (math.e * scale) ** 2)
    y = sd**weight * point["coef"]
    theta = softmax(1.3 * line + modes @ y)
    expected = (
        stats.norm.logpdf(0.4, 1.0, 0.7)
        + stats.norm.logpdf(1.3, 0.0, 3.0)
        + stats.norm.logpdf(point["coef"], 0.0, sd ** (1.0 - weight)).sum()
        + tally.loglik(theta)
    )
    assert logp == pytest.approx(expected, rel=1e-10, abs=1e-8)
    if information:  # the data's case is partially centred, not the non-centred one again
        assert weight.min() < 0.95, weight  # 0.925 on the committed seed


def test_sample_matches_the_pymc_prior():
    """prior.sample and PyMC's prior draws of theta agree (seeded; 4 MC standard errors)."""
    tally, _ = _sw_tally(k=6)
    prior = SmoothDensity(6, log_scale_mean=2.0, log_scale_sd=1.0, slope_sd=4.0)
    assert_prior_draws_match_pymc(prior, tally, columns=(0, 2))


def test_named_and_serialised():
    assert as_prior("smooth", 10) == SmoothDensity(10)
    prior = SmoothDensity(10, log_scale_mean=0.5, slope_sd=7.0, max_modes=4)
    assert prior_from_json(prior.to_json()) == prior
    assert prior.with_k(12) == SmoothDensity(12, log_scale_mean=0.5, slope_sd=7.0, max_modes=4)
    assert "slope_sd=7, max_modes=4" in repr(prior)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 2}, "at least 3 bins"),
        ({"k": 5, "log_scale_mean": float("nan")}, "log_scale_mean"),
        ({"k": 5, "log_scale_sd": 0.0}, "log_scale_sd"),
        ({"k": 5, "slope_sd": -1.0}, "slope_sd"),
        ({"k": 5, "log_scale_mean": True}, "log_scale_mean"),
        ({"k": 5, "max_modes": 0}, "max_modes"),
        ({"k": 5, "max_modes": 2.5}, "max_modes"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        SmoothDensity(**kwargs)


def test_it_is_the_default_prior_on_numerical_reports():
    tally, _ = _sw_tally(k=6, n=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short run's convergence warnings are not tested here
        idata = fit(tally, draws=20, chains=1, tune=20, random_seed=0, progressbar=False)
    assert json.loads(idata.posterior.attrs["prior"])["distribution"] == "SmoothDensity"
    assert "smoothness" in idata.posterior


def test_methods_without_it_default_to_dirichlet_1_with_a_warning():
    tally, _ = _sw_tally(k=4, n=40)
    with pytest.warns(UserWarning, match="prior='smooth'.*needs method 'auto'"):
        idata = fit(tally, method="exact", draws=5, chains=1, random_seed=0, progressbar=False)
    assert idata.constant_data["prior_alpha"].values.tolist() == [1.0] * 4
    few, _ = _sw_tally(k=2, n=40)  # under 3 bins there is no smoothness prior
    with pytest.warns(UserWarning, match="at least 3 bins"):
        idata = fit(few, method="exact", draws=5, chains=1, random_seed=0, progressbar=False)
    assert "smoothness" not in idata.posterior


def test_fit_errors():
    tally, _ = _sw_tally()
    with pytest.raises(InvalidInputError, match="SmoothDensity on 5 categories"):
        fit(tally, prior=SmoothDensity(5))
    with pytest.raises(NotSupportedError, match="SmoothDensity prior is not available"):
        fit(tally, prior="smooth", method="exact")
    with pytest.raises(InvalidInputError, match="the named priors are"):
        fit(tally, prior="smoothest")


@pytest.mark.parametrize("max_modes", [None, 4])
def test_hmc_density_matches_the_pymc_model(max_modes):
    """The compiled density on (u, b, log lambda) and its gradient: differences of the log
    density equal PyMC's model (same coordinates and weights) and the gradient equals finite
    differences."""
    from bayesldp.bayes.hmc import _SmoothTarget
    from bayesldp.bayes.hmc.smooth import pilot_information

    tally, _ = _sw_tally(k=12, n=3000)
    prior = SmoothDensity(12, log_scale_mean=2.0, log_scale_sd=1.0, slope_sd=5.0,
                          max_modes=max_modes)  # fmt: skip
    target = _SmoothTarget(tally, prior, pilot_information(tally, prior, np.random.default_rng(0)))
    d = prior.n_modes + 2
    assert target.d == d
    logp = build_model(tally, prior).compile_logp()
    rng = np.random.default_rng(3)
    points = target.start + 0.3 * rng.standard_normal((3, d))
    ours, grad = target(points)

    def pymc(q):
        return logp({"coef": q[:-2], "slope": q[-2], "log_smoothness": q[-1]})

    for q, value in zip(points[1:], ours[1:], strict=True):
        assert value - ours[0] == pytest.approx(pymc(q) - pymc(points[0]), rel=1e-9, abs=1e-8)
    h = 1e-6
    numeric = [(target(points[:1] + h * e)[0][0] - target(points[:1] - h * e)[0][0]) / (2 * h)
               for e in np.eye(d)]  # fmt: skip
    np.testing.assert_allclose(grad[0], numeric, rtol=1e-5, atol=1e-5)


def test_hmc_decorrelating_map():
    """After ``decorrelate`` the density at ``v`` is the density at ``q = centre + T v`` on the
    block (the smoothest mode and the slope), its gradient ``T^T`` that of ``q`` and equal to
    finite differences; the mode maps to 0 there and the returned covariance is ``T^{-1} cov
    T^{-T}`` (the identity on the block)."""
    from bayesldp.bayes.hmc import _SmoothTarget

    tally, _ = _sw_tally(k=12, n=3000)
    target = _SmoothTarget(tally, SmoothDensity(12))
    mode = target.start
    cov = target.laplace(mode)
    rng = np.random.default_rng(5)
    v = mode + 0.3 * rng.standard_normal((2, target.d))
    before, grad_q = target(v)  # the identity map
    new_mode, new_cov = target.decorrelate(mode, cov)
    idx = [0, target.d - 2]
    t = np.linalg.cholesky(cov[np.ix_(idx, idx)])
    assert np.all(new_mode[idx] == 0.0)
    np.testing.assert_allclose(new_cov[np.ix_(idx, idx)], np.eye(2), atol=1e-9)
    x = v.copy()
    x[:, idx] = (v[:, idx] - mode[idx]) @ np.linalg.inv(t).T  # the same points q in v
    after, grad_v = target(x)
    np.testing.assert_allclose(after, before, rtol=1e-12)
    expected = grad_q.copy()
    expected[:, idx] = grad_q[:, idx] @ t
    np.testing.assert_allclose(grad_v, expected, rtol=1e-9, atol=1e-9)
    h = 1e-6
    numeric = [(target(x[:1] + h * e)[0][0] - target(x[:1] - h * e)[0][0]) / (2 * h)
               for e in np.eye(target.d)]  # fmt: skip
    np.testing.assert_allclose(grad_v[0], numeric, rtol=1e-5, atol=1e-5)


def test_hmc_rejects_other_coordinates():
    tally, _ = _sw_tally()
    with pytest.raises(InvalidInputError, match="its own coordinates"):
        fit(tally, prior="smooth", method="hmc", coordinates="alr", draws=10, chains=1)


@pytest.mark.parametrize("method", ["auto", "nuts"])
def test_fit_recovers_the_mean_and_round_trips(method, tmp_path):
    tally, x = _sw_tally(k=8, n=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short run's convergence warnings are not tested here
        idata = fit(tally, prior="smooth", method=method, draws=300, tune=300, chains=2,
                    cores=1, random_seed=4, progressbar=False)  # fmt: skip
    post = idata.posterior
    assert post.attrs["method"] == ("hmc" if method == "auto" else "nuts")
    if method == "auto":
        assert "SmoothDensity" in post.attrs["auto_reason"]
    assert post["smoothness"].shape == (2, 300)
    assert np.all(post["smoothness"].values > 0)
    # the posterior mean of the values' mean is near the sample's (SW, n = 5000: sd about 0.02)
    mean = float((post["theta"].mean(("chain", "draw")).values * tally.mechanism.bin_centres).sum())
    assert abs(mean - x.mean()) < 0.1
    save_fit(idata, tmp_path / "fit.nc")
    assert fit_prior(load_fit(tmp_path / "fit.nc")) == SmoothDensity(8)


@pytest.mark.slow
def test_simulation_based_calibration():
    """Simulation-based calibration (Talts et al. 2018) of the default sampler under the
    smoothness prior: 400 populations drawn from the prior (K = 6), 300 values each, SW at
    eps = 2; the ranks of theta_0 and of the mean among 99 draws thinned by their effective
    sample size are uniform (chi-square over 10 bins, family-wise level 1e-3), a test with
    power 0.98 against draws 0.75 times as spread out as the posterior and 0.94 against 1.33
    times."""
    k, n, reps = 6, 300, 400
    prior = SmoothDensity(k)
    mech = bayesldp.SquareWave(k, 2.0, lo=0.0, hi=1.0, output_bins=k)
    centres = mech.bin_centres
    rng = np.random.default_rng(7)
    ranks = []
    for rep in range(reps):
        theta = prior.sample(1, rng=rng)[0]
        x = rng.choice(k, size=n, p=theta)
        tally = mech.tally(mech.perturb((x + rng.random(n)) / k, rng=rng))
        idata = fit(tally, prior=prior, draws=1000, tune=500, chains=2, random_seed=rep,
                    progressbar=False, compute_convergence_checks=False)  # fmt: skip
        post = idata.posterior["theta"].values
        draws = np.stack([post[..., 0], post @ centres], axis=-1)
        truth = np.array([theta[0], theta @ centres])
        ranks.append(rank_statistics(truth, thin_by_ess(draws, 99).draws, rng))
    assert_sbc_ranks_uniform(ranks, 99, scale=0.75, power=0.95)
    assert_sbc_ranks_uniform(ranks, 99, scale=1.33, power=0.9)
