"""Posterior predictive checks (bayesldp.sample_posterior_predictive) for every mechanism."""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import build_inference_data, fit, loo, sample_posterior_predictive
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.fit import import_arviz
from bayesldp.bayes.prior import Dirichlet
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms import make_mechanism, mechanism_class, names
from bayesldp.mechanisms.base import FiniteChannelMechanism, PureProtocol

az = import_arviz()

K = 5
THETA = np.array([0.4, 0.25, 0.2, 0.1, 0.05])
#: RRRR needs its subset; every other mechanism is built from k and epsilon alone
EXTRA = {"RRRR": {"subset": [0, 2]}}
#: the mechanisms sized by their categories (PCKV by its keys, PCKV-PM by its value bins:
#: their key-value checks are in tests/mechanisms/test_keyvalue.py)
NAMES = [name for name in names() if mechanism_class(name).SIZE == "k"]


def _mechanism(name, epsilon=1.0, **params):
    return make_mechanism(name, K, epsilon, **{**EXTRA.get(name, {}), **params})


def _expected_stat(mech):
    """``S[x]``: the expected oracle statistic of one report of a user holding ``x``."""
    if isinstance(mech, PureProtocol):  # support counts: p* on x, q* elsewhere
        return mech.q_star + (mech.p_star - mech.q_star) * np.eye(mech.k)
    if isinstance(mech, FiniteChannelMechanism) and mech.n_outputs != mech.k:
        # numerical mechanisms with more output bins: a linear map of the report counts
        per_report = np.stack([mech._oracle_stat(e) for e in np.eye(mech.n_outputs, dtype=int)])
        return mech.channel @ per_report
    if isinstance(mech, FiniteChannelMechanism):  # report counts of a K x K channel
        channel = mech.channel
        assert channel.shape == (mech.k, mech.k)
        return channel
    if hasattr(mech, "support_matrix"):  # CMS, HCMS: support counts, M[x', x] = Pr[x in S | x']
        return mech.support_matrix()
    # SHE: the sum of the noisy one-hot vectors; RAPPOR: its unbiased (debiased-bit regression)
    # count estimate, DBitFlipPM the paper's (debiased bits scaled by k/d), linear in the reports:
    # one user holding x adds e_x in expectation
    assert mech.name in ("SHE", "RAPPOR", "DBitFlipPM")
    return np.eye(mech.k)


def _posterior_idata(tally, chains=2, draws=150, seed=0):
    """An InferenceData of Dirichlet draws around THETA (no sampler: the check is about the
    predictive draws, not the posterior)."""
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(200 * THETA + 1, size=(chains, draws))
    return build_inference_data(
        SamplerOutput(theta=theta), tally, Dirichlet(np.ones(K)), method="exact"
    )


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    mech = _mechanism(request.param)
    tally = mech.simulate_tally(np.random.default_rng(1).multinomial(2000, THETA), rng=2)
    return mech, tally, _posterior_idata(tally)


def test_group_shape_and_arviz_plots(case):
    _, tally, idata = case
    ppc = sample_posterior_predictive(idata, random_seed=3, num_draws=40)
    pred = ppc.posterior_predictive["stat"]
    assert pred.dims == ("chain", "draw", "category")
    assert pred.shape == (2, 20, K)
    np.testing.assert_array_equal(pred.draw.values, np.linspace(0, 149, 20).round())
    assert list(ppc.observed_data.data_vars) == ["stat"]
    assert ppc.observed_data["stat"].dims == ("category",)
    np.testing.assert_array_equal(ppc.observed_data["stat"].values, tally.stat)
    assert np.all(np.isfinite(pred.values))
    # the fit is unchanged; the tally moved to constant_data and still feeds loo
    assert "posterior_predictive" not in idata.groups()
    assert "counts" in idata.observed_data
    np.testing.assert_array_equal(ppc.constant_data["tally_counts"].values, tally.counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k of these made-up draws
        assert loo(ppc).elpd_loo == pytest.approx(loo(idata).elpd_loo)
    # ArviZ: the default calls compare exactly the pair (observed stat, predicted stat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ and matplotlib deprecation notices
        axes = np.atleast_1d(az.plot_ppc(ppc))
        assert axes.size == 1 and "stat" in axes[0].get_xlabel()
        az.plot_bpv(ppc)
        az.plot_bpv(ppc, kind="p_value")
        az.plot_bpv(ppc, kind="t_stat", t_stat="mean")
    plt.close("all")


def test_seeded(case):
    _, tally, idata = case
    first = sample_posterior_predictive(idata, random_seed=5, num_draws=10)
    again = sample_posterior_predictive(idata, tally, random_seed=5, num_draws=10)
    other = sample_posterior_predictive(idata, random_seed=6, num_draws=10)
    pred = first.posterior_predictive["stat"]
    assert pred.equals(again.posterior_predictive["stat"])
    assert not pred.equals(other.posterior_predictive["stat"])
    # a checked InferenceData can be checked again (tally read from constant_data)
    twice = sample_posterior_predictive(first, random_seed=5, num_draws=10)
    assert pred.equals(twice.posterior_predictive["stat"])


def test_predictive_mean_is_n_theta_times_expected_stat(case):
    """E[stat_rep | theta_d] = n theta_d^T S: the residuals stat_rep - n theta_d^T S have mean 0
    (within 5 standard errors, every category)."""
    mech, tally, idata = case
    ppc = sample_posterior_predictive(idata, random_seed=7, num_draws=300)
    pred = ppc.posterior_predictive["stat"]
    theta = idata.posterior["theta"].sel(draw=pred.draw).values.reshape(-1, K)
    resid = pred.values.reshape(-1, K) - tally.n * theta @ _expected_stat(mech)
    se = resid.std(axis=0, ddof=1) / np.sqrt(resid.shape[0])
    assert resid.shape[0] == 300
    assert np.all(np.abs(resid.mean(axis=0)) < 5 * se), (resid.mean(axis=0), se)


def _p_value(ppc):
    """Posterior predictive p-value of T(y) = sum_x (y_x - m_x)^2 / v_x (m, v: the predictive
    mean and variance of stat_x): Pr(T(y_rep) >= T(y_obs))."""
    rep = ppc.posterior_predictive["stat"].values.reshape(-1, K)
    obs = ppc.observed_data["stat"].values
    mean, var = rep.mean(axis=0), rep.var(axis=0)

    def discrepancy(y):
        return ((y - mean) ** 2 / var).sum(axis=-1)

    return float(np.mean(discrepancy(rep) >= discrepancy(obs)))


@pytest.mark.parametrize("name", NAMES)
def test_check_passes_with_the_true_mechanism_and_fails_with_a_wrong_epsilon(name):
    """10,000 users with two empty categories randomised at eps = 3; analysed at eps = 3 the
    p-value Pr(T(y_rep) >= T(y)) is above 0.01 (theta has as many free coordinates as stat has
    values, so a fitting posterior reproduces stat closely and this p-value tends to be large,
    the known conservativeness of posterior predictive p-values); analysed at eps = 1 (same
    other parameters) it is 0: no theta reproduces statistics that much sharper than eps = 1
    allows."""
    truth = _mechanism(name, 3.0)
    params = {key: v for key, v in truth.params().items() if key not in ("k", "epsilon", "eps1")}
    x = np.repeat(np.arange(K), [5000, 3000, 2000, 0, 0])
    reports = truth.perturb(truth.category_values(x, rng=0), rng=1)
    p_values = []
    for epsilon in (3.0, 1.0):
        tally = _mechanism(name, epsilon, **params).tally(reports)
        idata = fit(tally, 150, prior=1.0, chains=2, random_seed=0,  # Dirichlet(1), no warning
                    compute_convergence_checks=False)  # fmt: skip
        p_values.append(_p_value(sample_posterior_predictive(idata, random_seed=1)))
    right, wrong = p_values
    assert right > 0.01, p_values  # seeded; measured 0.087 (SUE) to 0.990 (HR)
    assert wrong < 0.005, p_values


def test_pm_sample_output_finds_its_tally_through_the_model():
    """``pm.sample`` keeps no bayesldp attrs: the tally comes from the :func:`build_model`
    model, given as ``model=`` or found as the enclosing ``with model:`` block (as PyMC's own
    ``sample_posterior_predictive`` finds its model); outside one the error says so."""
    pm = pytest.importorskip("pymc")
    from bayesldp.bayes.model import build_model

    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(mech.perturb(np.repeat([0, 1, 2], [50, 30, 20]), rng=1))
    model = build_model(tally, 1.0)
    theta = np.random.default_rng(0).dirichlet([5.0, 3.0, 2.0], size=(2, 50))
    idata = az.from_dict(posterior={"theta": theta}, dims={"theta": ["category"]})
    with model:
        inside = sample_posterior_predictive(idata, random_seed=1, num_draws=20)
    given = sample_posterior_predictive(idata, model=model, random_seed=1, num_draws=20)
    np.testing.assert_array_equal(inside.observed_data["stat"].values, tally.stat)
    np.testing.assert_array_equal(inside.posterior_predictive["stat"].values,
                                  given.posterior_predictive["stat"].values)  # fmt: skip
    assert inside.posterior_predictive["stat"].shape == (2, 10, 3)
    with pytest.raises(InvalidInputError, match="model=, or call inside `with model:`"):
        sample_posterior_predictive(idata)
    assert pm.Model.get_context(error_if_none=False) is None


def test_bad_input():
    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(np.array([0, 1, 2, 0, 0]))
    idata = fit(tally, method="exact", draws=20, chains=1, random_seed=0)
    with pytest.raises(InvalidTypeError, match="idata"):
        sample_posterior_predictive({"posterior": None})
    with pytest.raises(InvalidInputError, match="num_draws"):
        sample_posterior_predictive(idata, num_draws=0)
    with pytest.raises(InvalidTypeError, match="num_draws"):
        sample_posterior_predictive(idata, num_draws=True)
    other = mech.tally(np.array([0, 1, 1]))
    with pytest.raises(InvalidInputError, match="counts differ"):
        sample_posterior_predictive(idata, other)
    mixed = bayesldp.Tally(tally.counts, rows=tally.rows, stat=tally.stat, family="mixed")
    mixed_fit = fit(mixed, method="exact", draws=20, chains=1, random_seed=0)
    with pytest.raises(NotSupportedError, match="mixes"):
        sample_posterior_predictive(mixed_fit)
    with pytest.raises(NotSupportedError, match="mixes"):
        sample_posterior_predictive(mixed_fit, mixed)
    # all draws are used when fewer than asked for
    ppc = sample_posterior_predictive(idata, random_seed=0, num_draws=10_000)
    assert ppc.posterior_predictive["stat"].shape == (1, 20, 3)


def test_exported():
    assert bayesldp.sample_posterior_predictive is sample_posterior_predictive
    assert "sample_posterior_predictive" in bayesldp.__all__


@pytest.mark.parametrize("name", ["GRR", "OUE", "SUE", "SHE", "THE", "HadamardResponse", "RRRR"])
def test_closed_forms_match_simulate_tally(name):
    """The closed-form draws of stat (finite channels, unary and histogram encoding) have the
    mean and variance of ``mechanism.simulate_tally(c).stat``, c ~ Multinomial(n, theta): means
    within 5 standard errors, variance ratios in [0.7, 1.43] (600 draws each: the ratio's sd is
    about 0.08, so the bounds are about 4 sd away)."""
    from bayesldp.bayes.ppc import simulate_stats

    mech = _mechanism(name)
    draws, n = 600, 400
    rng = np.random.default_rng(11)
    closed = simulate_stats(mech, np.tile(THETA, (draws, 1)), n, rng)
    generic = np.array(
        [mech.simulate_tally(rng.multinomial(n, THETA), rng).stat for _ in range(draws)]
    )
    se = np.sqrt((closed.var(axis=0) + generic.var(axis=0)) / draws)
    assert np.all(np.abs(closed.mean(axis=0) - generic.mean(axis=0)) < 5 * se)
    ratio = closed.var(axis=0) / generic.var(axis=0)
    assert np.all((ratio > 0.7) & (ratio < 1.43)), ratio
