"""PyMC's pointwise log-likelihood of a build_model model: one value per report, sums unchanged."""

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import pointwise
from bayesldp.bayes.fit import import_arviz
from bayesldp.bayes.model import build_model
from bayesldp.errors import PointwiseSizeError
from tests.tally_forms import three_forms

pm = pytest.importorskip("pymc")
pt = pytest.importorskip("pytensor.tensor")
az = import_arviz()

# PyTensor warns once per process when it finds no BLAS to link its C code against; that is an
# installation property, not a problem of the model.
pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")


def _tallies():
    # a report value never observed (count 0 in the finite-channel form, no row in the tally)
    return three_forms([25, 0, 13, 12], 9)


def _posterior(idata):
    """The posterior draws alone, as pm.sample would give them (no bayesldp groups)."""
    theta = idata.posterior["theta"].values
    return az.from_dict(posterior={"theta": theta}, dims={"theta": ["category"]})


# one form in the default suite, the others in the statistical tier (minutes of PyMC compiling)
OTHER_FORMS = [pytest.param(form, marks=pytest.mark.slow) for form in ("support", "dense")]


@pytest.mark.parametrize("form", ["grr", *OTHER_FORMS])
def test_pymc_log_likelihood_is_fit_s_per_report_group(form):
    """pm.compute_log_likelihood on the model holds fit's per-report values (rows in the
    finite-channel form come in channel-column order, so compare each draw's sorted values), so
    az.loo on it equals bayesldp.loo (both PSIS-LOO over the N reports) to 1e-6."""
    tally = _tallies()[form]
    fitted = bayesldp.fit(tally, prior=1.0, method="exact", draws=400, chains=2, random_seed=3,
                          idata_kwargs={"log_likelihood": True})  # fmt: skip
    model = build_model(tally, np.ones(tally.k))
    idata = pm.compute_log_likelihood(_posterior(fitted), model=model, progressbar=False)
    ours = idata.log_likelihood["counts"]
    assert ours.shape == (2, 400, tally.n)
    np.testing.assert_allclose(np.sort(ours.values, axis=-1),
                               np.sort(fitted.log_likelihood["counts"].values, axis=-1),
                               rtol=1e-12)  # fmt: skip
    theirs, exact = az.loo(idata), bayesldp.loo(fitted)
    assert theirs.n_data_points == exact.n_data_points == tally.n
    for key in ("elpd_loo", "se", "p_loo"):
        assert theirs[key] == pytest.approx(exact[key], rel=1e-6), key
    np.testing.assert_allclose(np.sort(theirs.pareto_k.values), np.sort(exact.pareto_k.values),
                               rtol=1e-6)  # fmt: skip


@pytest.mark.slow
def test_pm_sample_then_az_loo_is_leave_one_report_out():
    """The route of a PyMC user: pm.sample(..., log_likelihood) then az.loo, against
    bayesldp.loo on the same draws (the tally taken from the model, given or as context)."""
    tally = _tallies()["grr"]
    model = build_model(tally, np.ones(4))
    with model:
        idata = pm.sample(draws=300, tune=300, chains=2, cores=1, random_seed=5,
                          progressbar=False, compute_convergence_checks=False,
                          idata_kwargs={"log_likelihood": True})  # fmt: skip
    theirs = az.loo(idata)
    exact = bayesldp.loo(idata, model=model)
    assert theirs.n_data_points == exact.n_data_points == tally.n == 50
    for key in ("elpd_loo", "se", "p_loo"):
        assert theirs[key] == pytest.approx(exact[key], rel=1e-6), key
    with model:
        assert bayesldp.loo(idata).elpd_loo == exact.elpd_loo
    assert bayesldp.loo(idata, tally).elpd_loo == exact.elpd_loo
    # at most K - 1 = 3 effective parameters (fewer: 50 reports at epsilon = 1 against a
    # Dirichlet(1) prior), not thousands as for the rows left out whole
    assert 0 < exact.p_loo < 3


@pytest.mark.parametrize("form", ["grr", *OTHER_FORMS])
def test_sampled_density_and_gradient_are_the_per_row_ones(form):
    """What sampling evaluates is unchanged: logp and its gradient on the transformed scale
    equal those of the per-row likelihood sum_u c_u log(L_u . theta) (a Potential) at fixed
    points, and the compiled function never expands the reports."""
    tally = _tallies()[form]
    alpha = np.array([0.7, 1.0, 2.5, 1.3])
    model = build_model(tally, alpha)
    with pm.Model() as reference:
        theta = pm.Dirichlet("theta", a=alpha)
        pm.Potential("loglik", pt.sum(tally.counts * pt.log(pt.dot(tally.rows, theta))))
    gen = np.random.default_rng(1)
    transform = model.rvs_to_transforms[model["theta"]]
    compiled = [(m.compile_logp(), m.compile_dlogp()) for m in (model, reference)]
    for value in gen.dirichlet(np.ones(4), size=5):
        point = {"theta_simplex__": transform.forward(value).eval()}
        (logp, dlogp), (ref_logp, ref_dlogp) = compiled
        assert logp(point) == pytest.approx(ref_logp(point), rel=1e-12)
        np.testing.assert_allclose(dlogp(point), ref_dlogp(point), rtol=1e-10, atol=1e-12)
    function = model.logp_dlogp_function(ravel_inputs=True)._pytensor_function
    ops = {type(node.op) for node in function.maker.fgraph.toposort()}
    assert not ops & {pointwise.PerReport, pointwise.ReportSum}


def test_refused_beyond_the_size_with_one_line(monkeypatch):
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts([40, 35, 25])
    monkeypatch.setattr(pointwise, "POINTWISE_MAX_REPORTS", 99)
    model = build_model(tally, np.ones(3))
    fitted = bayesldp.fit(tally, prior=1.0, method="exact", draws=200, chains=2, random_seed=0)
    idata = _posterior(fitted)
    theta = idata.posterior["theta"].values
    with pytest.raises(PointwiseSizeError, match=r"counts: .* of 100 reports is refused") as err:
        pm.compute_log_likelihood(idata, model=model, progressbar=False)
    assert "\n" not in str(err.value) and "bayesldp.loo(idata, model=model)" in str(err.value)
    assert isinstance(err.value, ValueError)
    # sampling never evaluates the per-report values: the log-density is still there
    point = {"theta_simplex__": model.rvs_to_transforms[model["theta"]].forward(theta[0, 0]).eval()}
    assert np.isfinite(model.compile_logp()(point))
    assert bayesldp.loo(idata, model=model).elpd_loo == bayesldp.loo(fitted).elpd_loo
    # the stated size: 500 MB of float64 at PyMC's default 4 chains x 1000 draws
    monkeypatch.undo()
    assert pointwise.POINTWISE_MAX_REPORTS * 8 * 4000 == 500_000_000


def test_per_report_values_and_their_gradient_outside_a_sum():
    """A weighted sum of the per-report values is not rewritten: the gradient goes through
    ReportSum (per-row sums of the reports' gradients)."""
    values = pt.dvector("values")
    counts = np.array([2, 0, 3, 1])
    weights = np.arange(1.0, 7.0)
    expanded = pointwise.per_report(values, counts)
    x = np.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_array_equal(expanded.eval({values: x}), np.repeat(x, counts))
    grad = pt.grad(pt.sum(weights * expanded), values).eval({values: x})
    np.testing.assert_allclose(grad, [1 + 2, 0, 3 + 4 + 5, 6])
    plain = pt.grad(pt.sum(expanded), values).eval({values: x})
    np.testing.assert_array_equal(plain, counts)
