"""SGLD (method "sgld", Aydın and Yıldırım 2025): gradients, the CIR step, exact posteriors,
resume, errors."""

import functools
import itertools
import json

import numpy as np
import pytest
from scipy.special import gammaln

import bayesldp
from bayesldp.bayes import sgld
from bayesldp.bayes.exact import exact_posterior
from bayesldp.bayes.fit import import_arviz
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

DRAWS, CHAINS = 1000, 4


def _support_tally(seed=0, u=12, k=4, levels=(0.2, 0.9)):
    gen = np.random.default_rng(seed)
    support = gen.random((u, k)) < 0.5
    support[:, 0] |= ~support.any(axis=1)
    counts = gen.integers(1, 6, size=u)
    return Tally(counts, support=support, levels=levels, stat=np.zeros(k), family="test-support")


def _grr_tally(k, eps, true_counts, seed):
    """A GRR tally (support form: GRR rows are two-level)."""
    return bayesldp.GRR(k, eps).simulate_tally(np.asarray(true_counts), rng=seed)


def _dense_copy(tally):
    return Tally(tally.counts, rows=tally.rows, stat=tally.stat, family="test-dense")


def _log_target(tally, alpha, phi):
    """log pi(phi) of the Gamma-expanded model, written independently of the module."""
    s = phi.sum()
    prior = np.sum((alpha - 1.0) * np.log(phi) - phi)
    return prior + tally.counts @ np.log(tally.rows @ phi) - tally.n * np.log(s)


def _summary(theta):
    """Posterior means, Monte Carlo standard errors (from bulk ESS), max split r_hat, min ESS."""
    az = import_arviz()
    ds = az.convert_to_dataset({"theta": theta})
    ess = az.ess(ds, method="bulk")["theta"].values
    mcse = theta.std(axis=(0, 1)) / np.sqrt(ess)
    return theta.mean(axis=(0, 1)), mcse, float(az.rhat(ds)["theta"].max()), float(ess.min())


@functools.cache
def _bruteforce(k, eps, reports, alpha):
    channel = bayesldp.GRR(k, eps).channel
    alpha = np.array(alpha)
    weights, means, second = [], [], []
    for xs in itertools.product(range(k), repeat=len(reports)):
        lik = np.prod(channel[list(xs), list(reports)])
        a = alpha + np.bincount(xs, minlength=k)
        weights.append(lik * np.exp(gammaln(a).sum() - gammaln(a.sum())))
        means.append(a / a.sum())
        second.append(a * (a + 1) / (a.sum() * (a.sum() + 1)))
    w = np.array(weights) / np.sum(weights)
    mean = w @ np.array(means)
    return mean, np.sqrt(w @ np.array(second) - mean**2)


def _bruteforce_moments(mech, reports, alpha):
    """Exact posterior mean and sd by enumerating the latent values of every report."""
    return _bruteforce(mech.k, mech.epsilon, tuple(int(y) for y in reports), tuple(alpha))


# ------------------------------------------------------------------------------- the dynamics
@pytest.mark.parametrize("form", ["dense", "support"])
def test_gradient_matches_finite_differences(form):
    tally = _support_tally(seed=2)
    if form == "dense":
        tally = _dense_copy(tally)
        assert not tally.is_support_form
    k = tally.k
    alpha = np.array([0.5, 1.0, 2.0, 3.5])
    phi = np.array([0.7, 1.3, 0.4, 2.2])
    h = Likelihood(tally).score((phi / phi.sum())[None, :])
    grad = sgld._grad_log_target(alpha, phi[None, :], h, 0.0)[0]
    numeric = np.empty(k)
    for i in range(k):
        step = 1e-6 * phi[i]
        up, down = phi.copy(), phi.copy()
        up[i] += step
        down[i] -= step
        numeric[i] = (_log_target(tally, alpha, up) - _log_target(tally, alpha, down)) / (2 * step)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_expanded_metric_step_is_the_langevin_drift():
    """Over a small step the exact-CIR update has mean phi + (gamma/2)(M grad + div M) and
    variance gamma M, M = diag(w S phi) (Ito term div M_i = w_i (S + phi_i))."""
    tally = _grr_tally(3, 1.0, [8, 6, 4], seed=3)
    alpha = np.array([0.5, 1.0, 2.0])
    phi0 = np.array([1.0, 2.0, 0.5])
    w = np.array([1.0, 0.5, 2.0])
    gamma, chains = 1e-3, 1_000_000
    state = sgld.SGLDState(
        np.tile(phi0, (chains, 1)), 0, np.random.default_rng(4).bit_generator.state, w
    )
    new, _ = sgld.sgld_run(tally, alpha, state, 1, step_size=gamma, refresh_scale=False)
    move = new.phi - phi0
    s = phi0.sum()
    grad = np.empty(3)
    for i in range(3):
        up, down = phi0.copy(), phi0.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        grad[i] = (_log_target(tally, alpha, up) - _log_target(tally, alpha, down)) / 2e-6
    metric = w * s * phi0
    drift = 0.5 * (metric * grad + w * (s + phi0))
    mcse = np.sqrt(gamma * metric / chains)
    np.testing.assert_allclose(
        move.mean(axis=0), gamma * drift, atol=5 * mcse.max() + 0.02 * gamma * np.abs(drift).max()
    )
    np.testing.assert_allclose(move.var(axis=0), gamma * metric, rtol=0.02)


def test_sample_rows_draws_reports_in_proportion_to_counts():
    tally = Tally(np.array([1, 3, 6]), rows=np.eye(3) + 0.1, stat=np.zeros(3), family="t")
    idx = sgld._sample_rows(Likelihood(tally), np.random.default_rng(0), (100, 1000))
    freq = np.bincount(idx.ravel(), minlength=3) / idx.size
    np.testing.assert_allclose(freq, tally.counts / tally.n, atol=0.004)


# ------------------------------------------------------------------------------- exact posteriors
@pytest.mark.parametrize("form", ["support", "dense"])
def test_matches_bruteforce_posterior_on_a_tiny_tally(form):
    mech = bayesldp.GRR(3, 1.0)
    reports = np.array([0, 0, 1, 2, 0, 1, 0, 2])
    alpha = np.array([0.5, 1.0, 2.0])
    exact_mean, exact_sd = _bruteforce_moments(mech, reports, alpha)
    tally = mech.tally(reports)
    if form == "dense":
        tally = _dense_copy(tally)
    out = sgld.sample(tally, alpha, draws=DRAWS, chains=CHAINS, random_seed=11)
    mean, mcse, rhat, _ = _summary(out.theta)
    assert rhat <= 1.01
    np.testing.assert_array_less(np.abs(mean - exact_mean), 4 * mcse)
    np.testing.assert_allclose(out.theta.std(axis=(0, 1)), exact_sd, rtol=0.08)


def test_matches_exact_posterior_with_a_category_piled_at_zero():
    """alpha = 0.1 and a 1% category: the prior's theta^(alpha-1) spike at 0 is where a reflected
    Euler step is biased (0.3 to 0.6 sd measured); the exact CIR step is not."""
    tally = _grr_tally(3, 3.0, [120, 78, 2], seed=8)
    alpha = np.full(3, 0.1)
    post = exact_posterior(tally, alpha)
    out = sgld.sample(tally, alpha, draws=DRAWS, chains=CHAINS, random_seed=5)
    mean, mcse, rhat, _ = _summary(out.theta)
    assert rhat <= 1.01
    np.testing.assert_array_less(np.abs(mean - post.mean), 4 * mcse)
    np.testing.assert_allclose(out.theta.std(axis=(0, 1)), np.sqrt(np.diag(post.cov)), rtol=0.1)


@pytest.mark.parametrize("control_variate", [True, False])
def test_minibatches_on_a_support_form_tally(control_variate):
    tally = _support_tally(seed=4, u=10, k=3)
    alpha = np.ones(3)
    post = exact_posterior(tally, alpha)
    out = sgld.sample(
        tally,
        alpha,
        draws=DRAWS,
        chains=CHAINS,
        random_seed=6,
        minibatch=4,
        control_variate=control_variate,
    )
    assert out.info["minibatch"] == 4 and out.info["control_variate"] is control_variate
    mean, mcse, _, _ = _summary(out.theta)
    if control_variate:  # unbiased and (n = 30 reports) nearly noise-free
        np.testing.assert_array_less(np.abs(mean - post.mean), 4 * mcse)
        np.testing.assert_allclose(out.theta.std(axis=(0, 1)), np.sqrt(np.diag(post.cov)), rtol=0.1)
    else:  # plain minibatch noise inflates the spread, never below the posterior's
        assert np.all(out.theta.std(axis=(0, 1)) > 0.9 * np.sqrt(np.diag(post.cov)))
        np.testing.assert_allclose(out.theta.sum(axis=-1), 1.0, rtol=1e-12)


def test_no_information_recovers_the_dirichlet_prior():
    tally = _grr_tally(3, 1e-6, [10, 20, 30], seed=0)
    alpha = np.array([0.5, 1.0, 2.0])
    a = alpha.sum()
    prior_mean = alpha / a
    prior_sd = np.sqrt(alpha * (a - alpha) / (a**2 * (a + 1)))
    out = sgld.sample(
        tally, alpha, draws=DRAWS, chains=CHAINS, random_seed=0, step_size=0.1, thin=20
    )
    mean, mcse, _, _ = _summary(out.theta)
    np.testing.assert_array_less(np.abs(mean - prior_mean), 4 * mcse)
    np.testing.assert_allclose(out.theta.std(axis=(0, 1)), prior_sd, rtol=0.08)


def test_identity_metric_recovers_the_prior_with_a_small_step():
    """The paper's reflected Euler update (alpha >= 1: no spike at 0)."""
    tally = _grr_tally(3, 1e-6, [10, 20, 30], seed=0)
    alpha = np.array([1.0, 2.0, 3.0])
    state = sgld.SGLDState.initial(alpha, 50, rng=1)
    assert state.metric is None
    state, draws = sgld.sgld_run(tally, alpha, state, 20_000, step_size=0.01, record_every=10)
    draws = draws[:, 400:]
    mean, mcse, _, _ = _summary(draws)
    np.testing.assert_array_less(np.abs(mean - alpha / 6), 4 * mcse)


def test_default_run_converges_on_a_small_case():
    tally = _grr_tally(5, 2.0, [400, 300, 200, 90, 10], seed=2)
    out = sgld.sample(tally, np.ones(5), draws=DRAWS, chains=CHAINS, random_seed=1)
    _, _, rhat, ess = _summary(out.theta)
    assert rhat <= 1.01
    assert ess >= 400
    assert out.theta.shape == (CHAINS, DRAWS, 5)
    assert set(out.sample_stats) >= {"step_size", "lp"}
    for stat in out.sample_stats.values():
        assert stat.shape == (CHAINS, DRAWS) and np.all(np.isfinite(stat))
    json.dumps(out.info)


def test_lp_is_the_log_posterior_up_to_a_constant():
    tally = _support_tally(seed=3)
    alpha = np.array([0.5, 1.0, 1.5, 2.0])
    out = sgld.sample(tally, alpha, draws=50, chains=2, random_seed=2, tune=100, thin=2)
    theta = out.theta
    expected = tally.loglik(theta) + np.log(theta) @ (alpha - 1.0)
    np.testing.assert_allclose(out.sample_stats["lp"], expected, rtol=1e-10)


def test_extreme_sparse_cases_never_give_nan():
    tally = _grr_tally(10, 8.0, [40, 10, 0, 0, 0, 0, 0, 0, 0, 0], seed=4)
    alpha = np.full(10, 0.01)
    for metric in ("adaptive", "identity"):
        out = sgld.sample(tally, alpha, draws=100, chains=2, random_seed=3, tune=200, metric=metric)
        assert np.all(np.isfinite(out.theta)) and out.theta.min() >= 0
        np.testing.assert_allclose(out.theta.sum(axis=-1), 1.0, rtol=1e-12)
        assert np.all(np.isfinite(out.sample_stats["lp"]))


# ------------------------------------------------------------------------------- state and seeds
def _roundtrip(state):
    """Through JSON: arrays to lists and back, as a survey checkpoint would."""
    data = state.to_dict()
    text = json.dumps(
        {key: np.asarray(v).tolist() if isinstance(v, np.ndarray) else v for key, v in data.items()}
    )
    loaded = json.loads(text)
    for key in ("phi", "metric", "anchor"):
        if key in loaded:
            loaded[key] = np.array(loaded[key])
    return sgld.SGLDState.from_dict(loaded)


@pytest.mark.parametrize("kind", ["identity", "expanded", "minibatch-cv-support"])
def test_resume_from_a_serialised_state_is_bit_identical(kind):
    if kind == "minibatch-cv-support":
        tally, minibatch = _support_tally(seed=5), 5
        alpha = np.ones(4)
        state = sgld.SGLDState.initial(alpha, 3, rng=7, metric=np.full(4, 0.05), anchor=np.ones(4))
    else:
        tally, minibatch = _grr_tally(4, 1.0, [30, 20, 10, 5], seed=5), None
        if kind == "expanded":
            tally = _dense_copy(tally)
        alpha = np.array([0.5, 1.0, 1.0, 2.0])
        metric = None if kind == "identity" else sgld.fisher_metric(tally, alpha)
        state = sgld.SGLDState.initial(alpha, 3, rng=7, metric=metric)
    opts = {"minibatch": minibatch, "record_every": 7}
    whole_state, whole = sgld.sgld_run(tally, alpha, state, 300, **opts)
    mid, first = sgld.sgld_run(tally, alpha, state, 123, **opts)
    end_state, second = sgld.sgld_run(tally, alpha, _roundtrip(mid), 177, **opts)
    assert np.array_equal(np.concatenate([first, second], axis=1), whole)
    assert np.array_equal(end_state.phi, whole_state.phi)
    assert end_state.step == whole_state.step == 300
    assert whole.shape == (3, 300 // 7, 4)
    assert end_state.rng_state == whole_state.rng_state


def test_same_seed_same_draws():
    tally = _grr_tally(4, 1.0, [30, 20, 10, 5], seed=6)
    kwargs = {"draws": 100, "chains": 2, "tune": 200}
    a = sgld.sample(tally, np.ones(4), random_seed=9, **kwargs)
    b = sgld.sample(tally, np.ones(4), random_seed=9, **kwargs)
    c = sgld.sample(tally, np.ones(4), random_seed=10, **kwargs)
    assert np.array_equal(a.theta, b.theta)
    assert np.array_equal(a.sample_stats["lp"], b.sample_stats["lp"])
    assert not np.array_equal(a.theta, c.theta)


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # structure only
def test_fit_dispatches_to_sgld_and_progressbar_is_optional():
    tally = _grr_tally(3, 2.0, [20, 10, 5], seed=7)
    idata = bayesldp.fit(tally, method="sgld", draws=50, chains=2, random_seed=1, tune=100)
    assert idata.posterior["theta"].shape == (2, 50, 3)
    assert "lp" in idata.sample_stats
    out = sgld.sample(
        tally, np.ones(3), draws=20, chains=1, random_seed=1, tune=60, progressbar=True
    )
    assert out.theta.shape == (1, 20, 3)


# ------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"step_size": 0.0}, InvalidInputError, "step_size"),
        ({"step_size": -1.0}, InvalidInputError, "step_size"),
        ({"step_size": float("nan")}, InvalidInputError, "step_size"),
        ({"step_size": "big"}, InvalidTypeError, "step_size"),
        ({"minibatch": 0}, InvalidInputError, "minibatch"),
        ({"minibatch": "some"}, InvalidInputError, "minibatch"),
        ({"minibatch": 2.5}, InvalidTypeError, "minibatch"),
        ({"thin": 0}, InvalidInputError, "thin"),
        ({"tune": -1}, InvalidInputError, "tune"),
        ({"metric": "dense"}, InvalidInputError, "metric"),
        ({"control_variate": "yes"}, InvalidTypeError, "control_variate"),
        ({"target_accept": 0.9}, InvalidInputError, "target_accept"),
    ],
)
def test_bad_options_are_rejected(options, error, match):
    tally = _grr_tally(3, 1.0, [5, 3, 2], seed=0)
    with pytest.raises(error, match=match):
        sgld.sample(tally, np.ones(3), draws=10, chains=1, random_seed=0, **options)


def test_bad_arguments_of_sgld_run():
    tally = _grr_tally(3, 1.0, [5, 3, 2], seed=0)
    alpha = np.ones(3)
    state = sgld.SGLDState.initial(alpha, 2, rng=0)
    with pytest.raises(InvalidInputError, match="step_size"):
        sgld.sgld_run(tally, alpha, state, 10, step_size=-0.1)
    with pytest.raises(InvalidInputError, match="minibatch"):
        sgld.sgld_run(tally, alpha, state, 10, minibatch=0)
    with pytest.raises(InvalidInputError, match="n_steps"):
        sgld.sgld_run(tally, alpha, state, -1)
    with pytest.raises(InvalidInputError, match="K = 4"):
        sgld.sgld_run(tally, alpha, sgld.SGLDState.initial(np.ones(4), 2, rng=0), 10)
    with pytest.raises(InvalidInputError, match="alpha"):
        sgld.sgld_run(tally, np.array([1.0, 0.0, 1.0]), state, 10)
    with pytest.raises(InvalidTypeError, match="tally"):
        sgld.sgld_run(np.ones((3, 3)), alpha, state, 10)
    with pytest.raises(InvalidTypeError, match="state"):
        sgld.sgld_run(tally, alpha, {"phi": state.phi}, 10)
    with pytest.raises(InvalidInputError, match="rng"):
        sgld.SGLDState.from_dict({"phi": state.phi, "step": 0})
    with pytest.raises(InvalidInputError, match="theta"):
        sgld.SGLDState.initial(alpha, 2, rng=0, theta=[0.5, 0.6, 0.1])
    state, draws = sgld.sgld_run(tally, alpha, state, 0)
    assert draws.shape == (2, 0, 3) and state.step == 0
