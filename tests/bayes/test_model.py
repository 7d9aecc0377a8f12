"""The PyMC model of a tally: exact log-density, finite-channel form, predictive draws."""

import numpy as np
import pytest
from scipy.stats import dirichlet

import bayesldp
from bayesldp.bayes.model import build_model, finite_channel_form, pointwise_loglik
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally
from tests.tally_forms import three_forms

pm = pytest.importorskip("pymc")

# PyTensor warns once per process when it finds no BLAS to link its C code against; that is an
# installation property, not a problem of the model.
pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")


def _tallies():
    return three_forms([5, 0, 3, 2], 5)


@pytest.mark.parametrize("form", ["grr", "support", "dense"])
def test_logp_is_loglik_plus_dirichlet_on_the_value_scale(form):
    tally = _tallies()[form]
    alpha = np.array([0.7, 1.0, 2.5, 1.3])
    model = build_model(tally, alpha)
    logp = model.compile_logp(jacobian=False)
    transform = model.rvs_to_transforms[model["theta"]]
    gen = np.random.default_rng(1)
    for theta in gen.dirichlet(np.ones(4), size=4):
        point = {"theta_simplex__": transform.forward(theta).eval()}
        expected = tally.loglik(theta) + dirichlet.logpdf(theta, alpha)
        assert logp(point) == pytest.approx(expected, rel=1e-7)
        np.testing.assert_allclose(pointwise_loglik(tally, theta).sum(), tally.loglik(theta))


def test_finite_channel_form_lists_every_report():
    mech = bayesldp.GRR(4, 1.0)
    tally = mech.tally_from_report_counts([5, 0, 3, 2])
    columns, counts, multiplicity, report = finite_channel_form(tally)
    np.testing.assert_array_equal(report, np.arange(4))
    np.testing.assert_array_equal(counts, [5, 0, 3, 2])
    np.testing.assert_allclose(columns, mech.channel.T)
    np.testing.assert_array_equal(multiplicity, 1)
    model = build_model(tally, np.ones(4), labels=["a", "b", "c", "d"])
    assert model.coords["category"] == ("a", "b", "c", "d")
    assert len(model.coords["report"]) == 4
    for tally in (_tallies()["support"], _tallies()["dense"]):
        assert finite_channel_form(tally) is None


def test_predictive_draws_of_report_counts():
    mech = bayesldp.GRR(3, 2.0)
    tally = mech.tally_from_report_counts([30, 10, 20])
    model = build_model(tally, np.array([2.0, 1.0, 1.0]))
    with model:
        prior = pm.sample_prior_predictive(draws=400, random_seed=2)
    counts = prior.prior_predictive["counts"].values[0]
    theta = prior.prior["theta"].values[0]
    assert counts.shape == (400, 3)
    np.testing.assert_array_equal(counts.sum(axis=1), 60)
    # E[counts | theta] = n theta P: the residuals average to zero within 4 standard errors
    resid = counts - 60 * theta @ mech.channel
    assert np.all(np.abs(resid.mean(axis=0)) < 4 * resid.std(axis=0) / np.sqrt(400))


def test_generic_tally_has_no_count_predictive():
    model = build_model(_tallies()["dense"], np.ones(4))
    with model, pytest.raises(NotImplementedError, match="random"):
        pm.sample_prior_predictive(draws=2, random_seed=0)
    with model:
        prior = pm.sample_prior_predictive(draws=2, random_seed=0, var_names=["theta"])
    assert prior.prior["theta"].shape == (1, 2, 4)


def test_bad_arguments():
    tally = _tallies()["grr"]
    with pytest.raises(InvalidInputError, match="prior: has 3 concentrations"):
        build_model(tally, np.ones(3))
    with pytest.raises(InvalidInputError, match="prior"):
        build_model(tally, [1.0, -1.0, 1.0, 1.0])
    with pytest.raises(InvalidInputError, match="labels"):
        build_model(tally, np.ones(4), labels=["a", "a", "b", "c"])
    with pytest.raises(InvalidTypeError, match="tally"):
        build_model(np.ones(4), np.ones(4))


@pytest.mark.slow
def test_large_support_tally_is_usable():
    """U = n = 1e5 distinct support rows, K = 100: builds, compiles and evaluates."""
    gen = np.random.default_rng(0)
    u, k = 100_000, 100
    tally = Tally(np.ones(u, dtype=np.int64), support=gen.random((u, k)) < 0.4,
                  levels=(0.3, 0.7), stat=np.zeros(k), family="big")  # fmt: skip
    model = build_model(tally, np.ones(k))
    dlogp = model.compile_dlogp()
    grad = dlogp(model.initial_point())
    assert grad.shape == (k - 1,) and np.all(np.isfinite(grad))


class _Pooled(bayesldp.mechanisms.base.FiniteChannelMechanism):
    """Two report values with the same channel column (their counts are pooled)."""

    name = "pooled"

    @property
    def channel(self):
        return np.array([[0.5, 0.25, 0.25], [0.2, 0.4, 0.4]])

    def perturb(self, x, rng=None):  # pragma: no cover - not used
        raise NotImplementedError

    def _oracle_stat(self, report_counts):
        return report_counts[:2].astype(float)


def test_identical_channel_columns_are_pooled():
    mech = _Pooled(2, 1.0)
    tally = mech.tally_from_report_counts([3, 4, 5])
    _, counts, multiplicity, report = finite_channel_form(tally)
    np.testing.assert_array_equal(report, [0, 1])
    np.testing.assert_array_equal(counts, [3, 9])
    np.testing.assert_array_equal(multiplicity, [1, 2])
    model = build_model(tally, np.ones(2))
    logp = model.compile_logp(jacobian=False)
    transform = model.rvs_to_transforms[model["theta"]]
    theta = np.array([0.3, 0.7])
    point = {"theta_simplex__": transform.forward(theta).eval()}
    expected = tally.loglik(theta) + dirichlet.logpdf(theta, np.ones(2))
    assert logp(point) == pytest.approx(expected, rel=1e-7)
    with model:
        prior = pm.sample_prior_predictive(draws=50, random_seed=1)
    np.testing.assert_array_equal(prior.prior_predictive["counts"].values.sum(axis=-1), 12)


def test_extensible_model_with_pymc_priors_and_several_tallies():
    """build_model takes PyMC variables as the prior and adds to a given model; tally_likelihood
    adds further tallies: a learnt concentration shared by two regions (partial pooling)."""
    pm = pytest.importorskip("pymc")
    import pytensor.tensor as pt

    k = 4
    mech_a, mech_b = bayesldp.GRR(k, 2.0), bayesldp.OUE(k, 2.0)
    tally_a = mech_a.simulate_tally(np.array([400, 300, 200, 100]), rng=1)
    tally_b = mech_b.simulate_tally(np.array([350, 350, 200, 100]), rng=2)
    with pm.Model() as model:
        base = pm.Dirichlet("base", a=np.ones(k))
        conc = pm.LogNormal("concentration", mu=np.log(20.0), sigma=1.0)
    bayesldp.build_model(tally_a, conc * base, model=model, name="theta_a", labels=list("wxyz"))
    with model:
        theta_b = pm.Dirichlet("theta_b", a=conc * base, dims="category")
        bayesldp.tally_likelihood(tally_b, theta_b, name="counts_b")
    assert {"base", "concentration", "theta_a", "theta_b", "counts_theta_a", "counts_b"} <= set(
        model.named_vars
    )
    assert list(model.coords["category"]) == list("wxyz")
    # the observed variables' log-density is the two tallies' log-likelihoods (up to the rows'
    # scale constants): compare its change between two values of theta_a with tally.loglik
    logp = model.compile_logp(vars=[model["counts_theta_a"], model["counts_b"]], jacobian=False)

    def value(theta_a):
        point = {"theta_a": theta_a, "theta_b": np.array([0.3, 0.3, 0.3, 0.1]),
                 "base": np.full(k, 0.25), "concentration": 20.0}  # fmt: skip
        return {model.rvs_to_values[model[name]].name:
                model.rvs_to_transforms[model[name]].forward(pt.as_tensor(v)).eval()
                for name, v in point.items()}  # fmt: skip

    one, two = np.array([0.4, 0.3, 0.2, 0.1]), np.full(k, 0.25)
    want = tally_a.loglik(one) - tally_a.loglik(two)
    assert logp(value(one)) - logp(value(two)) == pytest.approx(want, rel=1e-9)
    with pytest.raises(bayesldp.InvalidInputError, match="labels"):
        bayesldp.build_model(tally_b, np.ones(k), model=model, name="theta_c", labels=list("abcd"))
