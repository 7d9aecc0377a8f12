"""The large-n posterior (method="laplace") and the cost-based choice of method="auto"."""

import json
import re
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

import bayesldp
import bayesldp.likelihood as likelihood
from bayesldp import Tally
from bayesldp.bayes import cost, diagnostics, fit, laplace
from bayesldp.errors import ConvergenceWarning, InvalidInputError
from bayesldp.likelihood import Likelihood


def _tally(name, k, n, seed=1, epsilon=1.0):
    gen = np.random.default_rng(seed)
    counts = gen.multinomial(n, gen.dirichlet(np.ones(k)))
    return getattr(bayesldp, name)(k, epsilon).simulate_tally(counts, rng=gen)


@pytest.fixture(scope="module")
def oue_tally():
    return _tally("OUE", 6, 20_000, seed=3)


@pytest.fixture(scope="module")
def laplace_fit(oue_tally):
    return fit(oue_tally, method="laplace", draws=500, chains=2, random_seed=7)


# ------------------------------------------------------------------------- the Gram kernel
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_sparse_gram_equals_the_dense_product(invert, packed, monkeypatch):
    """The Gram product of support rows, compressed or packed (the rule replaced), whose
    compressed rows are then built on first use."""
    monkeypatch.setattr(likelihood, "_packed_is_cheaper", lambda *args: packed)
    gen = np.random.default_rng(0)
    support = gen.random((300, 9)) < (0.8 if invert else 0.3)  # 0.8: stored as complement
    levels = (0.7, 0.2) if invert else (0.2, 0.7)
    tally = Tally(np.ones(300, dtype=int), support=support, levels=levels,
                  stat=np.zeros(9), family="test", dedupe=False)  # fmt: skip
    lik = Likelihood(tally)
    assert lik.kind == ("packed" if packed else "sparse")
    w = gen.random(300)
    rows = tally.rows / max(levels)
    dense = rows - rows.min(axis=1, keepdims=True)
    np.testing.assert_allclose(lik.gram(w), dense.T @ (w[:, None] * dense), rtol=1e-12)
    np.testing.assert_allclose(lik.full_gram(w), rows.T @ (w[:, None] * rows), rtol=1e-12)


# ------------------------------------------------------------------------- the surrogate
def test_surrogate_matches_the_likelihood_to_second_order(oue_tally):
    """On the simplex the pseudo-rows' log-likelihood is the exact one's second-order Taylor
    expansion at theta* (up to a constant and the pairs' quartic terms: ``(y / beta)^2 <=
    1e-4`` relative to the change of the quadratic, whose linear part is large here, theta*
    being far from the mode)."""
    k = oue_tally.k
    theta_star = np.array([0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    pseudo, parts = laplace.surrogate_tally(oue_tally, theta_star)
    assert pseudo.n_rows == 2 * (k - 1)
    rows, counts = oue_tally.rows, oue_tally.counts
    mu = rows @ theta_star
    g = rows.T @ (counts / mu)
    hess = rows.T @ ((counts / mu**2)[:, None] * rows)
    gen = np.random.default_rng(4)
    for _ in range(5):
        delta = gen.normal(size=k)
        delta -= delta.mean()
        delta *= 0.01 / np.abs(delta).max()
        theta = theta_star + delta
        taylor = g @ delta - 0.5 * delta @ hess @ delta
        surrogate = pseudo.loglik(theta) - pseudo.loglik(theta_star)
        size = abs(g @ delta) + 0.5 * delta @ hess @ delta
        assert abs(surrogate - taylor) <= 2e-4 * size + 1e-6
        # the module's own evaluation of the surrogate agrees with the tally's
        own = laplace._surrogate_loglik(parts, np.stack([theta, theta_star]))
        assert own[0] - own[1] == pytest.approx(surrogate, rel=1e-7, abs=1e-6)


def test_log_ratio_subsample_estimate_is_within_its_standard_error():
    tally = _tally("OUE", 8, 30_000, seed=5)
    lik = Likelihood(tally)
    theta_star = np.asarray(bayesldp.estimate(tally, "mle").frequencies)
    theta_star = 0.98 * theta_star + 0.02 / tally.k
    _, parts = laplace.surrogate_tally(tally, theta_star)
    gen = np.random.default_rng(6)
    thetas = theta_star + 0.01 * gen.dirichlet(np.ones(8), size=20) - 0.01 / 8
    exact, se0, used = laplace._log_ratio(lik, parts, theta_star, thetas, 10**9, gen)
    assert se0 == 0.0 and used == tally.n_rows
    # exact: log p - log p_surrogate up to one constant for every draw
    direct = tally.loglik(thetas) - laplace._surrogate_loglik(parts, thetas)
    np.testing.assert_allclose(exact - exact[0], direct - direct[0], atol=1e-6)
    est, se, used = laplace._log_ratio(lik, parts, theta_star, thetas, 200, gen)
    assert used == 200 and se > 0
    assert np.max(np.abs((est - est[0]) - (exact - exact[0]))) <= 8 * se


# ------------------------------------------------------------------------- the backend
def test_laplace_fit_has_the_groups_and_attrs_of_every_fit(laplace_fit, oue_tally):
    assert {"posterior", "sample_stats", "observed_data", "constant_data"} <= set(
        laplace_fit.groups()
    )
    theta = laplace_fit.posterior["theta"]
    assert theta.dims == ("chain", "draw", "category") and theta.shape == (2, 500, 6)
    attrs = laplace_fit.posterior.attrs
    assert attrs["method"] == "laplace" and attrs["requested_method"] == "laplace"
    info = json.loads(attrs["backend_info"])
    assert info["backend"] == "bayesldp.laplace"
    assert info["surrogate_rows"] == 10 and info["importance_rows"] == oue_tally.n_rows
    assert info["pareto_k"] < diagnostics.PARETO_K_MAX  # n = 20,000 for K = 6: near Gaussian
    assert attrs["pareto_k"] == info["pareto_k"]
    log_w = laplace_fit.sample_stats["log_weight"].values
    assert log_w.shape == (2, 500)
    assert logsumexp(log_w) == pytest.approx(0.0, abs=1e-9)  # normalised
    assert 0 < info["is_ess"] <= 1000


def test_laplace_agrees_with_the_exact_expansion_point(laplace_fit, oue_tally):
    """The expansion point is the exact posterior's ALR mode: the exact gradient of the
    log-density in z vanishes there."""
    from bayesldp.bayes import hmc

    info = json.loads(laplace_fit.posterior.attrs["backend_info"])
    theta_star = np.array(info["expansion_point"])
    target = hmc._Target(oue_tally, np.ones(6))
    z = np.log(theta_star[:-1] / theta_star[-1])
    _, grad = target(z[None, :])
    sd = np.sqrt(np.diag(np.linalg.inv(-target.hessian(z))))
    assert np.max(np.abs(grad[0]) * sd) < 1e-2


def test_same_seed_same_draws(oue_tally):
    kwargs = {"method": "laplace", "draws": 50, "chains": 2, "tune": 50,
              "compute_convergence_checks": False}  # fmt: skip
    a = fit(oue_tally, random_seed=3, **kwargs)
    b = fit(oue_tally, random_seed=3, **kwargs)
    c = fit(oue_tally, random_seed=4, **kwargs)
    np.testing.assert_array_equal(a.posterior["theta"], b.posterior["theta"])
    assert not np.array_equal(a.posterior["theta"], c.posterior["theta"])


def test_options_are_checked_and_the_check_can_be_skipped(oue_tally):
    with pytest.raises(InvalidInputError, match="'max_components' is not an option"):
        fit(oue_tally, method="laplace", draws=10, chains=1, max_components=3)
    with pytest.raises(InvalidInputError, match="importance_rows"):
        fit(oue_tally, method="laplace", draws=10, chains=1, importance_rows=-1)
    idata = fit(oue_tally, method="laplace", draws=20, chains=1, tune=20, importance_rows=0,
                compute_convergence_checks=False)  # fmt: skip
    assert "log_weight" not in idata.sample_stats
    assert "pareto_k" not in json.loads(idata.posterior.attrs["backend_info"])


def test_too_few_reports_warn_with_the_shift_of_the_weighted_mean():
    """Twelve reports for eight categories: measured is_shift_sd 0.16 (k 0.38)."""
    tally = _tally("OUE", 8, 12, seed=2, epsilon=4.0)
    with pytest.warns(UserWarning, match=r"differs from the draws' mean by 0\.\d\d posterior sd"):
        idata = fit(tally, prior=1.0, method="laplace", draws=500, chains=2, random_seed=1,
                    compute_convergence_checks=False)  # fmt: skip
    info = json.loads(idata.posterior.attrs["backend_info"])
    assert info["is_shift_sd"] > laplace.SHIFT_WARN
    theta = idata.posterior["theta"].values.reshape(-1, 8)
    weights = np.exp(idata.sample_stats["log_weight"].values.reshape(-1))
    np.testing.assert_allclose(weights @ theta, info["is_mean"], rtol=1e-10)


def test_a_pareto_k_above_the_threshold_warns_once(oue_tally, monkeypatch):
    """fit's convergence checks warn (ConvergenceWarning) with the number; the backend does not
    warn a second time."""
    monkeypatch.setattr(diagnostics, "PARETO_K_MAX", -10.0)  # every k is above it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(oue_tally, method="laplace", draws=300, chains=2, tune=300, random_seed=1)
    pareto = [w for w in caught if "Pareto k" in str(w.message)]
    assert len(pareto) == 1 and issubclass(pareto[0].category, ConvergenceWarning)
    assert re.search(r"Pareto k of the importance weights is -?\d\.\d\d", str(pareto[0].message))


def test_adaptive_prior(oue_tally):
    idata = fit(oue_tally, prior="adaptive", method="laplace", draws=100, chains=2, tune=100,
                random_seed=2, compute_convergence_checks=False)  # fmt: skip
    assert idata.posterior["a"].shape == (2, 100)


# ------------------------------------------------------------------------- auto
def test_auto_takes_exact_for_a_small_mixture():
    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(mech.perturb(np.array([0] * 12 + [1] * 5 + [2] * 3), rng=1))
    method, reason, _ = cost.choose_method(tally, draws=100, chains=2)
    assert method == "exact" and "components" in reason
    idata = fit(tally, prior=1.0, draws=100, chains=2, random_seed=0)
    attrs = idata.posterior.attrs
    assert attrs["method"] == "exact" and attrs["requested_method"] == "auto"
    assert attrs["auto_reason"] == reason


def test_auto_passes_over_a_method_that_does_not_take_the_options_given():
    """A study or notebook that passes ``tune=`` with method "auto" gets a sampler that takes
    it, not the exact mixture (which refused ``tune`` with an error)."""
    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(mech.perturb(np.array([0] * 12 + [1] * 5 + [2] * 3), rng=1))
    assert cost.choose_method(tally, draws=100, chains=2, options={"tune": 50})[0] == "hmc"
    exact_only = {"max_components": 10_000}
    assert cost.choose_method(tally, draws=100, chains=2, options=exact_only)[0] == "exact"
    idata = fit(tally, draws=100, chains=2, random_seed=0, tune=100,
                compute_convergence_checks=False)  # fmt: skip
    # 20 reports: the data are weak, so "auto" samples from the prior as proposal (which takes
    # tune, as NUTS does) where its rule holds
    assert idata.posterior.attrs["method"] in ("hmc", "prior_mh")
    assert json.loads(idata.posterior.attrs["backend_info"])["tune"] == 100


def test_auto_takes_hmc_for_few_rows_and_laplace_for_many():
    grr = _tally("GRR", 20, 100_000)
    method, reason, predicted = cost.choose_method(grr)
    assert method == "hmc" and predicted["hmc"] < cost.HMC_BUDGET, (reason, predicted)
    oue = _tally("OUE", 20, 200_000)  # one row per report: 200,000 rows
    assert oue.n_rows > 100_000
    method, reason, predicted = cost.choose_method(oue)
    assert method == "laplace", (reason, predicted)
    assert predicted["hmc"] > 100 * predicted["laplace"]  # measured: 550 s against seconds
    assert "does not grow with n" in reason
    # under the adaptive prior "exact" costs its mixture once per grid node: taken only where
    # that is predicted to beat the HMC (13,608 components: 0.38 s against 0.14 s, measured)
    tiny = bayesldp.GRR(3, 1.0).tally(np.array([0, 1, 2, 0]))
    assert cost.choose_method(tiny, adaptive=True)[0] == "exact"
    small = bayesldp.GRR(3, 1.0).simulate_tally(np.array([40, 20, 10]), rng=1)
    assert cost._exact_plan(small)[0] == 13_608
    method, _, predicted = cost.choose_method(small, adaptive=True)
    assert method == "hmc" and predicted["exact"] > predicted["hmc"]
    assert cost.choose_method(small)[0] == "exact"  # a fixed prior: one mixture


def test_auto_fit_records_the_choice(monkeypatch):
    tally = _tally("OUE", 20, 200_000)
    # NUTS is predicted at 17.8 s here (packed rows), within the budget: lower the budget so
    # that auto takes the Laplace method (0.16 s predicted) and the test stays fast
    monkeypatch.setattr(cost, "HMC_BUDGET", 1.0)
    idata = fit(tally, draws=200, chains=2, random_seed=1, tune=200,
                compute_convergence_checks=False)  # fmt: skip
    attrs = idata.posterior.attrs
    assert attrs["method"] == "laplace" and attrs["requested_method"] == "auto"
    assert "predicted" in attrs["auto_reason"]


def test_a_forced_slow_method_warns_before_it_starts(monkeypatch):
    tally = _tally("OUE", 5, 2_000)
    monkeypatch.setattr(cost, "SLOW_SECONDS", 1e-9)
    with pytest.warns(UserWarning, match=r"method='hmc': predicted to take about [\d.e+-]+ s"):
        fit(tally, method="hmc", draws=20, chains=1, tune=20, compute_convergence_checks=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(tally, draws=20, chains=1, tune=20, compute_convergence_checks=False)  # auto


def test_predictions_grow_with_the_rows_for_hmc_not_for_laplace_sampling():
    small, large = _tally("OUE", 20, 20_000), _tally("OUE", 20, 200_000)
    ratio_hmc = cost.predict_seconds(large, "hmc") / cost.predict_seconds(small, "hmc")
    assert ratio_hmc > 8  # ten times the rows
    assert cost.predict_seconds(large, "laplace") < cost.predict_seconds(large, "hmc") / 100
    assert np.isnan(cost.predict_seconds(small, "sgld"))


# ------------------------------------------------------------------------- agreement (slow)
@pytest.mark.slow
def test_agrees_with_hmc_at_n_1e5():
    """OUE, K = 10, n = 100,000 (1,011 distinct rows, so the HMC is cheap): posterior means
    within 0.1 posterior sd and sds within 10 % for every category."""
    tally = _tally("OUE", 10, 100_000, seed=1)
    a = fit(tally, method="laplace", random_seed=1).posterior["theta"].values.reshape(-1, 10)
    b = fit(tally, method="hmc", random_seed=2).posterior["theta"].values.reshape(-1, 10)
    sd = b.std(axis=0)
    assert np.max(np.abs(a.mean(axis=0) - b.mean(axis=0)) / sd) < 0.1
    assert np.max(np.abs(a.std(axis=0) / sd - 1)) < 0.1


def test_undefined_smoothing_gives_raw_weights_and_warns(oue_tally, monkeypatch):
    """Where ArviZ's Pareto smoothing returns NaN weights (tied largest ratios), the fit keeps the
    raw normalised importance weights and reports k = inf, which fit's check warns about; no NaN
    reaches the weights or the weighted means."""
    import arviz

    monkeypatch.setattr(arviz, "psislw", lambda lr, reff=1.0: (np.full_like(lr, np.nan), 0.1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = fit(oue_tally, method="laplace", draws=300, chains=2, tune=300, random_seed=1)
    assert any("Pareto k" in str(w.message) for w in caught)
    log_w = idata.sample_stats["log_weight"].values.ravel()
    assert np.all(np.isfinite(log_w)) and logsumexp(log_w) == pytest.approx(0.0, abs=1e-12)
    info = json.loads(idata.posterior.attrs["backend_info"])
    assert info["pareto_k"] == float("inf") and np.all(np.isfinite(info["is_mean"]))
