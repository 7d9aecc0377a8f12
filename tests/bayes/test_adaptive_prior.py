"""The adaptive prior: theta | a ~ Dirichlet(a 1_K), log a ~ a discretised normal."""

import json
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import dirichlet

import bayesldp
from bayesldp.bayes import AdaptiveDirichlet, Dirichlet, as_prior, hmc
from bayesldp.bayes.exact import exact_posterior
from bayesldp.bayes.fit import import_arviz
from bayesldp.errors import InvalidInputError
from tests.stats_helpers import assert_derivatives_match_differences, assert_divergence_rate


def brute_logpdf(prior, theta):
    """log sum_j w_j Dir(theta; a_j 1) with scipy's Dirichlet density."""
    terms = [lw + dirichlet.logpdf(theta, np.full(prior.k, a)) for lw, a in
             zip(prior.log_w, prior.a, strict=True)]  # fmt: skip
    return logsumexp(terms)


# ------------------------------------------------------------------------------ the prior
def test_grid_is_a_discretised_normal_on_log_a():
    prior = AdaptiveDirichlet(6, log_a_mean=0.3, log_a_sd=1.5, step=0.25, width=3.0)
    np.testing.assert_allclose(np.diff(prior.log_a), 0.25)
    assert prior.log_a[0] >= 0.3 - 4.5 - 1e-12 and prior.log_a[-1] <= 0.3 + 4.5 + 1e-12
    assert logsumexp(prior.log_w) == pytest.approx(0.0, abs=1e-12)
    z = (prior.log_a - 0.3) / 1.5
    np.testing.assert_allclose(np.diff(prior.log_w), np.diff(-0.5 * z * z), rtol=1e-12)


@pytest.mark.parametrize("theta", [[0.25, 0.25, 0.25, 0.25], [0.7, 0.2, 0.09, 0.01],
                                   [0.97, 0.01, 0.01, 0.01]])  # fmt: skip
def test_logpdf_is_the_mixture_of_dirichlets(theta):
    prior = AdaptiveDirichlet(4)
    assert prior.logpdf(np.array(theta)) == pytest.approx(brute_logpdf(prior, theta), rel=1e-10)


def test_conditional_of_a_and_its_draws():
    prior = AdaptiveDirichlet(5, step=0.5)
    theta = np.array([0.6, 0.3, 0.05, 0.04, 0.01])
    log_p = prior.conditional_log_probs(prior.log_sum_theta(theta))
    brute = np.array([lw + dirichlet.logpdf(theta, np.full(5, a))
                      for lw, a in zip(prior.log_w, prior.a, strict=True)])  # fmt: skip
    np.testing.assert_allclose(log_p, brute - logsumexp(brute), atol=1e-10)
    draws = prior.draw_concentration(np.tile(theta, (40_000, 1)), rng=1)
    freq = np.array([np.mean(draws == a) for a in prior.a])
    p = np.exp(log_p)
    # each frequency within 5 binomial sd of its probability
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / 40_000) + 1e-12)


def test_prior_draws_have_the_mixture_mean_of_a():
    prior = AdaptiveDirichlet(3, log_a_sd=0.5)
    theta = prior.sample(20_000, rng=2)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(theta.mean(axis=0), np.full(3, 1 / 3), atol=0.01)


def test_as_prior_and_bad_input():
    assert as_prior("adaptive", 7) == AdaptiveDirichlet(7)
    assert as_prior(0.5, 3) == Dirichlet.symmetric(3, 0.5)
    with pytest.raises(InvalidInputError, match="adaptive"):
        as_prior("jeffreys", 3)
    with pytest.raises(InvalidInputError, match="K = 4"):
        as_prior(AdaptiveDirichlet(3), 4)
    with pytest.raises(InvalidInputError, match="log_a_sd"):
        AdaptiveDirichlet(3, log_a_sd=0)
    with pytest.raises(InvalidInputError, match="log_a_mean"):
        AdaptiveDirichlet(3, log_a_mean=float("nan"))
    with pytest.raises(InvalidInputError, match="step"):
        AdaptiveDirichlet(3, step=100.0)
    with pytest.raises(InvalidInputError, match="grid"):
        AdaptiveDirichlet(3, log_a_mean=40.0)


def test_round_trip():
    prior = AdaptiveDirichlet(4, log_a_mean=-1.0, log_a_sd=1.0)
    assert AdaptiveDirichlet.from_dict(json.loads(prior.to_json())) == prior


# ------------------------------------------------------------------------------ HMC target
def test_hmc_target_is_loglik_plus_marginal_prior_plus_jacobian():
    tally = bayesldp.GRR(4, 1.0).tally_from_report_counts([5, 0, 3, 2])
    prior = AdaptiveDirichlet(4)
    target = hmc._Target(tally, prior)
    z = np.random.default_rng(1).normal(scale=2.0, size=(6, 3))
    theta, log_theta = target.theta(z)
    logp, grad = target(z)
    expected = tally.loglik(theta) + prior.logpdf(theta) + log_theta.sum(axis=1)
    np.testing.assert_allclose(np.diff(logp), np.diff(expected), rtol=1e-10)
    data = target.data()
    lps = []
    for i in range(z.shape[0]):
        g_out = np.empty(3)
        lps.append(hmc._logp_grad(z[i].copy(), data, target.work(), g_out))
        np.testing.assert_allclose(g_out, grad[i], rtol=1e-9, atol=1e-12)
    # the compiled log-density differs from the Python one by a constant only
    np.testing.assert_allclose(np.diff(lps), np.diff(logp), rtol=1e-10)


def test_hmc_gradient_and_hessian_match_finite_differences():
    tally = bayesldp.GRR(5, 0.8).tally_from_report_counts([40, 10, 0, 25, 7])
    target = hmc._Target(tally, AdaptiveDirichlet(5))
    assert_derivatives_match_differences(target, np.array([0.3, -0.4, 1.1, -0.2]))


def test_joint_kernel_is_loglik_plus_prior_plus_jacobian_and_its_gradient():
    """The joint (u, log a) density: loglik + log Dirichlet(theta; a) on the ALR coordinates +
    log Normal(s; mu, sd) + log |dz/du| (numerical Jacobian), up to a constant; and its
    gradient by central differences, for weights between 0 and 1, effective counts from 0 to 40
    and a from 1.2e-4 to 1,800
    (the centres' knots span 1.7e-4 to 1,490)."""
    from scipy.stats import norm

    tally = bayesldp.GRR(5, 0.8).tally_from_report_counts([40, 10, 0, 25, 7])
    prior = AdaptiveDirichlet(5)
    marginal = hmc._Target(tally, prior)
    mode, _ = hmc._find_mode(marginal, np.zeros(4))
    target = hmc._JointTarget(marginal, mode)
    # tail weights w, then effective counts m: the kernel reads these (data[12])
    target.data()[12][:] = [1.0, 0.3, 0.0, 0.7, 0.0, 2.5, 40.0, 0.5]
    rng = np.random.default_rng(0)
    # log a: the pilot's, near it, between the centres' knots, below and above the end knots
    # (below: u large, or theta underflows at a = 1.2e-4)
    points = [target.start, target.start + rng.normal(size=5), [0.3, -1, 2, 0.5, -3.0],
              [0.3, -1, 2, 0.5, 2.0], [12, 14, 16, 13, -9.0], [0.3, -1, 2, 0.5, 7.5]]  # fmt: skip
    h = 1e-5  # at a = 1,800 lgamma(K a) ~ 6e4 cancels: rounding ~1e-11 in each log-density
    diffs = []
    for q in map(np.asarray, points):
        lp, grad = target(q[None])
        for i in range(5):
            dq = np.zeros(5)
            dq[i] = h
            fd = (target((q + dq)[None])[0][0] - target((q - dq)[None])[0][0]) / (2 * h)
            assert grad[0, i] == pytest.approx(fd, rel=1e-5, abs=1e-6)

        def alr(qq):
            theta = target.theta_hyper(qq[None])[0][0]
            return np.log(theta[target.idx[:-1]]) - np.log(theta[target.idx[-1]])

        jac = np.array([(alr(q + dq) - alr(q - dq)) / (2 * h) for dq in np.eye(5)[:4] * h]).T
        theta, a = target.theta_hyper(q[None])
        theta, a = theta[0], float(a[0])
        want = (tally.loglik(theta) + dirichlet.logpdf(theta, np.full(5, a))
                + np.log(theta).sum() + norm.logpdf(q[-1], prior.log_a_mean, prior.log_a_sd)
                + np.linalg.slogdet(jac)[1])  # fmt: skip
        diffs.append(lp[0] - want)
    np.testing.assert_allclose(np.diff(diffs), 0.0, atol=1e-6)


def test_joint_draws_map_to_theta_as_the_kernel_maps_them():
    """The joint target's vectorised ``theta_hyper`` (numpy, no likelihood pass) against the
    kernel's own ``theta`` (the base class's, one kernel call per draw), at log a between the
    centres' knots and beyond both ends, on GRR and OUE tallies."""
    rng = np.random.default_rng(0)
    for mech, n in ((bayesldp.GRR(10, 1.0), 100_000), (bayesldp.OUE(30, 0.5), 1_000)):
        tally = mech.simulate_tally(rng.multinomial(n, rng.dirichlet(np.ones(mech.k))), rng=rng)
        marginal = hmc._Target(tally, AdaptiveDirichlet(mech.k))
        target = hmc._JointTarget(marginal, hmc._find_mode(marginal, np.zeros(mech.k - 1))[0])
        q = rng.normal(size=(400, mech.k)) * 2
        q[:, -1] = np.linspace(-20, 20, 400)  # the knots span log a from -8.7 to 7.3
        theta, a = target.theta_hyper(q)
        want_theta, want_a = hmc._CompiledTarget.theta_hyper(target, q)
        np.testing.assert_allclose(theta, want_theta, rtol=1e-11, atol=1e-300)  # subnormals
        np.testing.assert_array_equal(a, want_a)


def test_centres_interpolate_a_cubic_through_the_knots_and_extend_it_linearly():
    """The joint scheme's centres in log a (:func:`hmc._hermite`): with exact slopes at the knots
    a cubic is reproduced between them, with its derivative; beyond the ends, the end knot's
    tangent line."""
    knots = np.arange(-2.0, 2.5, 0.5)
    f, df = (lambda s: s**3 - s), (lambda s: 3 * s**2 - 1)
    table = np.concatenate([f(knots), df(knots)])
    n = len(knots)
    for s in [-2.0, -1.3, 0.0, 0.7, 1.99, 2.0, -3.0, 2.8]:
        j0, j1, h = hmc._hermite(s, knots[0], 0.5, n)
        value = h[0] * table[j0] + h[1] * table[n + j0] + h[2] * table[j1] + h[3] * table[n + j1]
        slope = h[4] * table[j0] + h[5] * table[n + j0] + h[6] * table[j1] + h[7] * table[n + j1]
        end = knots[0] if s < knots[0] else knots[-1] if s > knots[-1] else None
        if end is None:
            assert value == pytest.approx(f(s), abs=1e-12) and slope == pytest.approx(df(s))
        else:
            assert value == pytest.approx(f(end) + df(end) * (s - end)) and slope == df(end)


def test_pilot_leaves_the_corner_it_reaches_from_the_peak_at_uniform():
    """Weak reports of a sparse population: from uniform theta the search stopped at the local
    mode the prior's large-a components make there, and the pilot came out degenerate (all mass
    on one category, a at the prior's median); the pilot's search from the Dirichlet(1) mode
    beats it."""
    k, n, eps = 30, 10_000, 0.5
    rng = np.random.default_rng([1, n, 5, 5])
    theta = rng.dirichlet(np.full(k, 0.05))
    mech = bayesldp.OUE(k, eps)
    tally = mech.tally(mech.perturb(rng.choice(k, size=n, p=theta), rng=1))
    marginal = hmc._Target(tally, AdaptiveDirichlet(k))
    mode, _ = hmc._find_mode(marginal, np.zeros(k - 1))
    assert np.abs(mode).max() < 0.05  # stopped at the peak at uniform theta
    a0, pilot = hmc._pilot(marginal, mode)
    assert a0 < 0.2  # the population is sparse: 4 categories hold 99.6% of it
    assert pilot.max() < 0.9 and np.sort(pilot)[-3:].sum() > 0.85


# ------------------------------------------------------------------------------ fits
@pytest.fixture(scope="module")
def small_tally():
    return bayesldp.GRR(4, 1.0).simulate_tally(np.array([30, 10, 3, 0]), rng=3)


@pytest.fixture(scope="module")
def brute(small_tally):
    """p(a_j | tally), the posterior mean of theta and of log a, from one exact posterior per
    grid node."""
    prior = AdaptiveDirichlet(4)
    posts = [exact_posterior(small_tally, Dirichlet.symmetric(4, a)) for a in prior.a]
    log_p = prior.log_w + np.array([p.log_marginal_likelihood for p in posts])
    p = np.exp(log_p - logsumexp(log_p))
    return p, p @ np.array([post.mean for post in posts]), p @ prior.log_a, posts


def test_exact_posterior_of_a_is_the_brute_force_one(small_tally, brute):
    idata = bayesldp.fit(small_tally, prior="adaptive", method="exact", draws=2000, random_seed=0)
    info = json.loads(idata.posterior.attrs["backend_info"])
    np.testing.assert_allclose(info["a_posterior"]["probability"], brute[0], atol=1e-12)
    # exact moments: E[theta theta^T] = sum_j p_j (cov_j + mean_j mean_j^T), node by node
    second = sum(p * (post.cov + np.outer(post.mean, post.mean)) for p, post in
                 zip(brute[0], brute[3], strict=True))  # fmt: skip
    np.testing.assert_allclose(info["exact_mean"], brute[1], atol=1e-10)
    np.testing.assert_allclose(info["exact_cov"], second - np.outer(brute[1], brute[1]), atol=1e-10)
    assert set(np.unique(idata.posterior["a"].values)) <= set(AdaptiveDirichlet(4).a)
    draws = idata.posterior["theta"].values.reshape(-1, 4)
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - brute[1]) < 4 * se)


@pytest.mark.parametrize("scheme", ["joint", "marginal"])
def test_hmc_under_the_adaptive_prior_matches_the_exact_posterior(small_tally, brute, scheme):
    az = import_arviz()
    # 43 reports at eps = 1 say little about a: its posterior runs from 0.03 to 70 (98%).  The
    # marginal scheme needs many draws here (bulk ESS about 1,200 of 16,000); the joint one
    # mixes better (about 1,600) but meets a few divergent transitions where a is large (57 of
    # 16,000 here: the posterior is prior-dominated there), which do not bias the means
    idata = bayesldp.fit(small_tally, prior="adaptive", draws=4000, random_seed=5,
                         adaptive_scheme=scheme, compute_convergence_checks=False)  # fmt: skip
    post = idata.posterior
    summary = az.summary(idata, var_names=["theta", "a"], kind="all")
    assert summary["r_hat"].max() <= 1.01
    # divergent draws are random: a rate bound, not a count (assert_divergence_rate); the
    # joint scheme's few at large a get 1 % (57 of 16,000 here: within 1 %, p_min 1e-4)
    assert_divergence_rate(idata.sample_stats["diverging"].values,
                           rate=1e-3 if scheme == "marginal" else 1e-2)  # fmt: skip
    mean = post["theta"].mean(("chain", "draw")).values
    mcse = summary["mcse_mean"].values[:4]
    assert np.all(np.abs(mean - brute[1]) < 4 * mcse)
    want_a = brute[0] @ AdaptiveDirichlet(4).a
    a_mcse = float(summary.loc["a", "mcse_mean"])
    assert abs(float(post["a"].mean()) - want_a) < 4 * a_mcse
    assert json.loads(post.attrs["prior"])["distribution"] == "AdaptiveDirichlet"
    assert json.loads(post.attrs["backend_info"])["adaptive_scheme"] == scheme
    assert "prior_log_a" in idata.constant_data
    assert bayesldp.bayes.fit_prior(idata) == AdaptiveDirichlet(4)


@pytest.fixture(scope="module")
def weak_tally():
    """28 reports at eps = 0.5 on K = 5: the posterior of a spans 0.01 to 7 (90%)."""
    return bayesldp.GRR(5, 0.5).simulate_tally(np.array([25, 3, 0, 0, 0]), rng=4)


def test_hmc_joint_scheme_on_weak_data_matches_the_exact_posterior(weak_tally):
    """Where the data say little about a (the marginal scheme's r_hat here: 1.02, bulk ESS
    about 240 of 16,000), the joint scheme (the default) agrees with the brute-force grid
    posterior: theta's mean and E[log a] within 4 MCSE, r_hat <= 1.01 (bulk ESS about 860),
    divergences below 0.5% (3 of 16,000 where this was written, 31 on an AMD EPYC with AVX-512:
    the trajectories differ in the last bits between machines)."""
    az = import_arviz()
    prior = AdaptiveDirichlet(5)
    posts = [exact_posterior(weak_tally, Dirichlet.symmetric(5, a)) for a in prior.a]
    log_p = prior.log_w + np.array([p.log_marginal_likelihood for p in posts])
    p = np.exp(log_p - logsumexp(log_p))
    want_theta = p @ np.array([post.mean for post in posts])
    idata = bayesldp.fit(weak_tally, prior="adaptive", method="hmc", draws=4000, random_seed=5,
                         compute_convergence_checks=False)  # fmt: skip
    post = idata.posterior
    assert json.loads(post.attrs["backend_info"])["adaptive_scheme"] == "joint"
    post["log_a"] = np.log(post["a"])
    summary = az.summary(idata, var_names=["theta", "log_a"], kind="all")
    assert summary["r_hat"].max() <= 1.01
    assert_divergence_rate(idata.sample_stats["diverging"].values, rate=5e-3)
    mean = post["theta"].mean(("chain", "draw")).values
    assert np.all(np.abs(mean - want_theta) < 4 * summary["mcse_mean"].values[:5])
    log_a_mcse = float(summary.loc["log_a", "mcse_mean"])
    assert abs(float(post["log_a"].mean()) - p @ prior.log_a) < 4 * log_a_mcse


def test_hmc_marginal_scheme_still_available(small_tally, brute):
    idata = bayesldp.fit(small_tally, prior="adaptive", draws=2000, random_seed=5,
                         adaptive_scheme="marginal", compute_convergence_checks=False)  # fmt: skip
    info = json.loads(idata.posterior.attrs["backend_info"])
    assert info["adaptive_scheme"] == "marginal"
    a = idata.posterior["a"].values
    assert set(np.unique(a)) <= set(AdaptiveDirichlet(4).a)  # a drawn on the grid by fit
    draws = idata.posterior["theta"].values.reshape(-1, 4)
    assert np.all(np.abs(draws.mean(axis=0) - brute[1]) < 0.05)
    with pytest.raises(InvalidInputError, match="adaptive_scheme"):
        bayesldp.fit(small_tally, prior="adaptive", adaptive_scheme="gibbs")


def test_it_is_the_default_prior_on_categories(small_tally):
    """``prior=None`` on categorical reports is the adaptive prior, under "auto" and "exact";
    PCKV-PM (a mechanism with a caveat) keeps Dirichlet(1) and says why."""
    for method in ("auto", "exact"):
        idata = bayesldp.fit(small_tally, method=method, draws=200, chains=2, random_seed=0,
                             compute_convergence_checks=False)  # fmt: skip
        assert json.loads(idata.posterior.attrs["prior"])["distribution"] == "AdaptiveDirichlet"
        assert idata.posterior["a"].shape == (2, 200)
    mech = bayesldp.PCKVPM(bins=4, epsilon=2.0)
    tally = mech.tally(mech.perturb_pairs(np.linspace(-1, 1, 50), np.arange(50) % 2 == 0, rng=1))
    with pytest.warns(UserWarning, match=r"default Dirichlet\(1\) puts `bins` pseudo-counts"):
        idata = bayesldp.fit(tally, method="exact", draws=20, chains=1, random_seed=0)
    assert "a" not in idata.posterior


def test_a_piled_at_the_grid_edge_warns_with_the_edge():
    tally = bayesldp.GRR(4, 3.0).simulate_tally(np.array([20, 20, 20, 20]), rng=3)
    narrow = AdaptiveDirichlet(4, log_a_mean=-2.0, log_a_sd=0.5, width=2.0)
    with pytest.warns(UserWarning, match=r"upper edge of its grid \(a = 0\.368"):
        bayesldp.fit(tally, prior=narrow, method="exact", random_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bayesldp.fit(tally, prior="adaptive", method="exact", random_seed=0)


def test_pymc_model_density_is_loglik_plus_the_marginal_prior(small_tally):
    pytest.importorskip("pymc")
    from bayesldp.bayes.model import build_model

    prior = AdaptiveDirichlet(4)
    model = build_model(small_tally, prior)
    logp = model.compile_logp(jacobian=False)
    transform = model.rvs_to_transforms[model["theta"]]
    points = np.random.default_rng(2).dirichlet(np.ones(4), size=5)
    got = [logp({"theta_simplex__": transform.forward(t).eval()}) for t in points]
    want = small_tally.loglik(points) + prior.logpdf(points)
    np.testing.assert_allclose(np.diff(got), np.diff(want), rtol=1e-9)


def test_build_model_takes_fit_s_priors(small_tally):
    """build_model(tally) is fit's default model (the adaptive prior, marginal form) and takes
    "adaptive", numbers and the joint form with ``a`` as a variable."""
    pytest.importorskip("pymc")
    from bayesldp.bayes.model import build_model

    default = set(build_model(small_tally).named_vars)
    assert default == set(build_model(small_tally, "adaptive").named_vars)
    assert {"theta", "adaptive_prior", "counts"} <= default
    assert "adaptive_prior" not in build_model(small_tally, 2.0).named_vars
    joint = build_model(small_tally, "adaptive", adaptive_form="joint")
    assert {"a_index", "a", "theta"} <= set(joint.named_vars)
    with pytest.raises(bayesldp.InvalidInputError, match="adaptive_form"):
        build_model(small_tally, adaptive_form="both")


@pytest.mark.slow
def test_pm_sample_on_the_joint_form_agrees_with_fit(small_tally, brute):
    """pm.sample on the joint form (exact Gibbs step for a_index) and fit each return theta
    and log a whose means lie within 5 Monte Carlo se of the exact ones (each a 5-sigma bound
    on its own Monte Carlo error, so a true agreement fails with probability below 1e-5 per
    mean), and within 5 combined se of each other."""
    pm = pytest.importorskip("pymc")
    az = import_arviz()
    from bayesldp.bayes.model import build_model

    model = build_model(small_tally, adaptive_form="joint")
    with model:
        step = pm.CategoricalGibbsMetropolis([model["a_index"]], proposal="proportional")
        idata = pm.sample(1000, tune=1000, chains=2, step=[step], random_seed=3,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    ours = bayesldp.fit(small_tally, 1000, random_seed=3, compute_convergence_checks=False)
    for post in (idata, ours):
        post.posterior["log_a"] = np.log(post.posterior["a"])
    means, mcse = [], []
    for post in (idata, ours):
        summary = az.summary(post, var_names=["theta", "log_a"], kind="all", round_to="none")
        means.append(summary["mean"].to_numpy())
        mcse.append(summary["mcse_mean"].to_numpy())
        exact = np.append(brute[1], brute[2])
        assert np.all(np.abs(means[-1] - exact) < 5 * mcse[-1]), (means[-1], exact, mcse[-1])
    assert np.all(np.abs(means[0] - means[1]) < 5 * np.hypot(*mcse))


def test_pymc_nuts_under_the_adaptive_prior(small_tally, brute):
    pytest.importorskip("pymc")
    az = import_arviz()
    idata = bayesldp.fit(small_tally, prior="adaptive", method="nuts", draws=1000,
                         random_seed=6, compute_convergence_checks=False)  # fmt: skip
    summary = az.summary(idata, var_names=["theta"], kind="all")
    mean = idata.posterior["theta"].mean(("chain", "draw")).values
    assert np.all(np.abs(mean - brute[1]) < 5 * summary["mcse_mean"].values)
    assert "a" in idata.posterior


def test_sgld_gibbs_step_for_a_matches_the_exact_posterior(small_tally, brute):
    az = import_arviz()
    idata = bayesldp.fit(small_tally, prior="adaptive", method="sgld", draws=2000, random_seed=1)
    post = idata.posterior
    summary = az.summary(idata, var_names=["theta"], kind="all")
    mean = post["theta"].mean(("chain", "draw")).values
    assert np.all(np.abs(mean - brute[1]) < 4 * summary["mcse_mean"].values)
    log_a = np.log(post["a"])
    log_a_mcse = float(az.mcse(log_a.to_dataset(name="log_a"))["log_a"])
    assert abs(float(log_a.mean()) - brute[2]) < 4 * log_a_mcse
    assert set(np.unique(post["a"].values)) <= set(AdaptiveDirichlet(4).a)


def test_sgld_state_keeps_the_concentration():
    from bayesldp.bayes.sgld import SGLDState

    state = SGLDState.initial(np.ones(3), 2, rng=0)
    state.concentration = np.array([0.5, 2.0])
    again = SGLDState.from_dict(state.to_dict())
    np.testing.assert_array_equal(again.concentration, [0.5, 2.0])
