import datetime
import importlib
import json
import math
import sys
import types

import numpy as np
import pytest

import bayesldp
from bayesldp import Tally
from bayesldp.bayes import Dirichlet, fit, fit_prior, load_fit, save_fit
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.exact import exact_posterior
from bayesldp.bayes.fit import import_arviz

az = import_arviz()
fit_module = importlib.import_module("bayesldp.bayes.fit")  # the name `fit` is the function


@pytest.fixture(scope="module")
def grr_tally():
    mech = bayesldp.GRR(3, 1.0)
    return mech.tally(mech.perturb(np.array([0] * 12 + [1] * 5 + [2] * 3), rng=1))


@pytest.fixture(scope="module")
def exact_fit(grr_tally):
    return fit(grr_tally, prior=0.5, method="exact", draws=1000, chains=4, random_seed=11)


# ------------------------------------------------------------------------------ the fit
def test_exact_fit_converges_to_the_exact_mean(exact_fit, grr_tally):
    summary = az.summary(exact_fit)
    assert list(summary.index) == ["theta[0]", "theta[1]", "theta[2]"]
    assert summary["r_hat"].max() <= 1.01
    assert summary["ess_bulk"].min() > 2000  # independent draws
    post = exact_posterior(grr_tally, 0.5)
    mean = exact_fit.posterior["theta"].mean(("chain", "draw")).values
    assert np.all(np.abs(mean - post.mean) <= 4 * post.sd / math.sqrt(4000))
    info = json.loads(exact_fit.posterior.attrs["backend_info"])
    np.testing.assert_allclose(info["exact_mean"], post.mean, rtol=1e-12)


def test_groups_dims_and_attrs(exact_fit, grr_tally):
    assert set(exact_fit.groups()) == {
        "posterior",
        "sample_stats",
        "observed_data",
        "constant_data",
    }
    theta = exact_fit.posterior["theta"]
    assert theta.dims == ("chain", "draw", "category")
    assert theta.shape == (4, 1000, 3)
    np.testing.assert_array_equal(theta["category"], [0, 1, 2])
    assert set(exact_fit.sample_stats) == {"lp", "component"}
    attrs = exact_fit.posterior.attrs
    assert attrs["method"] == "exact" and attrs["requested_method"] == "exact"
    assert attrs["mechanism"] == "GRR(k=3, epsilon=1)"
    assert attrs["family"] == grr_tally.family
    assert Dirichlet.from_json(attrs["prior"]) == Dirichlet.jeffreys(3)
    assert fit_prior(exact_fit) == Dirichlet.jeffreys(3)
    assert attrs["random_seed"] == 11
    assert attrs["bayesldp_version"] == bayesldp.__version__
    assert json.loads(attrs["backend_info"])["backend"] == "exact"
    observed = exact_fit.observed_data
    np.testing.assert_array_equal(observed["counts"], grr_tally.counts)
    # GRR tallies are in support form: one-hot rows with levels (q, p)
    np.testing.assert_array_equal(observed["support"], grr_tally.support)
    np.testing.assert_array_equal(observed["levels"], grr_tally.levels)
    np.testing.assert_array_equal(observed["stat"], grr_tally.stat)
    const = exact_fit.constant_data
    np.testing.assert_array_equal(const["channel"], bayesldp.GRR(3, 1.0).channel)
    assert float(const["epsilon"]) == 1.0
    np.testing.assert_array_equal(const["prior_alpha"], [0.5, 0.5, 0.5])


def test_log_likelihood_is_log_l_theta_per_report(grr_tally):
    exact_fit = fit(
        grr_tally,
        prior=0.5,
        method="exact",
        draws=1000,
        chains=4,
        random_seed=11,
        idata_kwargs={"log_likelihood": True},
    )
    loglik = exact_fit.log_likelihood["counts"]
    assert loglik.dims == ("chain", "draw", "report")
    theta = exact_fit.posterior["theta"].values
    expected = np.repeat(np.log(theta @ grr_tally.rows.T), grr_tally.counts, axis=-1)
    np.testing.assert_allclose(loglik.values, expected, rtol=1e-13)
    np.testing.assert_array_equal(loglik["row"], np.repeat(np.arange(3), grr_tally.counts))
    np.testing.assert_allclose(
        loglik.values.sum(axis=-1), grr_tally.loglik(theta), rtol=1e-12, atol=1e-12
    )


def test_labels_support_form_and_mixed_tallies():
    support = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]], dtype=bool)
    tally = Tally([3, 2, 2], support=support, levels=(0.25, 0.75), stat=np.zeros(3), family="ue")
    idata = fit(tally, method="exact", draws=20, chains=2, random_seed=0, labels=["a", "b", "c"])
    np.testing.assert_array_equal(idata.posterior["category"], ["a", "b", "c"])
    np.testing.assert_array_equal(idata.observed_data["support"], tally.support)
    assert idata.observed_data["support"].dims == ("row", "category")
    np.testing.assert_array_equal(idata.observed_data["levels"], [0.25, 0.75])
    assert "channel" not in idata.constant_data and "epsilon" not in idata.constant_data
    assert idata.posterior.attrs["mechanism"] == "None"
    # an adaptive RRRR tally: mechanism None, family kept
    merged = bayesldp.RRRR(3, 1.0, subset=[0]).tally(np.array([0, 1])) + bayesldp.RRRR(
        3, 1.0, subset=[2]
    ).tally(np.array([2, 2]))
    idata = fit(merged, method="exact", draws=10, chains=1, random_seed=0)
    assert idata.posterior.attrs["family"] == merged.family
    rrrr = bayesldp.RRRR(4, 1.0, subset=[1, 3])
    idata = fit(rrrr.tally(np.array([0, 1, 3])), method="exact", draws=10, chains=1, random_seed=0)
    np.testing.assert_array_equal(idata.constant_data["param_subset"], [1, 3])
    assert float(idata.constant_data["param_eps1"]) == pytest.approx(0.8)
    assert json.loads(idata.posterior.attrs["mechanism_params"])["subset"] == [1, 3]


def test_same_seed_same_draws_and_recorded_seeds(grr_tally):
    kwargs = {"method": "exact", "draws": 50, "chains": 2}
    a = fit(grr_tally, random_seed=5, **kwargs)
    b = fit(grr_tally, random_seed=5, **kwargs)
    c = fit(grr_tally, random_seed=6, **kwargs)
    np.testing.assert_array_equal(a.posterior["theta"], b.posterior["theta"])
    assert not np.array_equal(a.posterior["theta"], c.posterior["theta"])
    fresh = fit(grr_tally, **kwargs)
    seed = int(fresh.posterior.attrs["random_seed"])
    assert 0 <= seed < 2**63
    replay = fit(grr_tally, random_seed=seed, **kwargs)
    np.testing.assert_array_equal(fresh.posterior["theta"], replay.posterior["theta"])
    g1 = fit(grr_tally, random_seed=np.random.default_rng(3), **kwargs)
    g2 = fit(grr_tally, random_seed=np.random.default_rng(3), **kwargs)
    np.testing.assert_array_equal(g1.posterior["theta"], g2.posterior["theta"])


# ------------------------------------------------------------------------------ idata_kwargs
def test_lean_by_default_log_likelihood_on_request(grr_tally):
    kwargs = {"method": "exact", "draws": 30, "chains": 2, "random_seed": 4}
    lean = fit(grr_tally, **kwargs)
    assert "log_likelihood" not in lean.groups()
    assert "log_likelihood" not in fit(grr_tally, idata_kwargs={"log_likelihood": False}, **kwargs)
    full = fit(grr_tally, idata_kwargs={"log_likelihood": True}, **kwargs)
    assert "log_likelihood" in full.groups()
    assert full.log_likelihood["counts"].shape == (2, 30, grr_tally.n)
    np.testing.assert_array_equal(lean.posterior["theta"], full.posterior["theta"])
    # the adaptive survey's builder is lean too
    out = SamplerOutput(theta=lean.posterior["theta"].values)
    built = fit_module.build_inference_data(out, grr_tally, Dirichlet.symmetric(3), method="sgld")
    assert "log_likelihood" not in built.groups()


def test_float32_storage(grr_tally, tmp_path):
    kwargs = {"method": "exact", "draws": 40, "chains": 2, "random_seed": 4}
    full = fit(grr_tally, idata_kwargs={"log_likelihood": True}, **kwargs)
    for dtype in ("float32", np.float32, np.dtype("float32")):
        small = fit(grr_tally, idata_kwargs={"dtype": dtype, "log_likelihood": True}, **kwargs)
        assert small.posterior["theta"].dtype == np.float32
        assert small.log_likelihood["counts"].dtype == np.float32
        np.testing.assert_array_equal(
            small.posterior["theta"].values, full.posterior["theta"].values.astype(np.float32)
        )
    back = load_fit(save_fit(small, tmp_path / "small.nc"))
    assert back.posterior["theta"].dtype == np.float32
    adaptive = fit(grr_tally, prior="adaptive", idata_kwargs={"dtype": "float32"}, **kwargs)
    assert adaptive.posterior["a"].dtype == np.float32


@pytest.mark.parametrize(
    "idata_kwargs, error, match",
    [
        (
            {"log_likelihod": True},
            ValueError,
            r"idata_kwargs: unknown key\(s\) \['log_likelihod'\]",
        ),
        ({"save_warmup": True}, ValueError, r"valid keys are \['dtype', 'log_likelihood'\]"),
        ({"log_likelihood": 1}, TypeError, r"idata_kwargs\['log_likelihood'\]: expected True"),
        ({"dtype": "float16"}, ValueError, r"idata_kwargs\['dtype'\]: expected one of"),
        ({"dtype": [1]}, ValueError, r"idata_kwargs\['dtype'\]"),
        ([("log_likelihood", True)], TypeError, "idata_kwargs: expected a dict"),
    ],
)
def test_idata_kwargs_errors(grr_tally, idata_kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        fit(grr_tally, method="exact", draws=5, chains=1, idata_kwargs=idata_kwargs)
    assert isinstance(info.value, bayesldp.BayesLDPError)


def test_arviz_standard_attrs(exact_fit):
    for group in ("posterior", "sample_stats", "observed_data", "constant_data"):
        attrs = exact_fit[group].attrs
        assert attrs["inference_library"] == "bayesldp", group
        assert attrs["inference_library_version"] == bayesldp.__version__
        assert attrs["arviz_version"] == az.__version__
        created = datetime.datetime.fromisoformat(attrs["created_at"])
        assert created.tzinfo is not None
        age = datetime.datetime.now(datetime.UTC) - created
        assert datetime.timedelta(0) <= age < datetime.timedelta(hours=1)
    # the same keys az.from_dict sets
    reference = az.from_dict(posterior={"mu": np.zeros((1, 3))}).posterior.attrs
    assert set(reference) - {"inference_library", "inference_library_version"} <= set(
        exact_fit.posterior.attrs
    )


def test_random_seed_sequence_is_one_seed_sequence(grr_tally):
    kwargs = {"method": "exact", "draws": 50, "chains": 3}
    a = fit(grr_tally, random_seed=[1, 2, 3], **kwargs)
    b = fit(grr_tally, random_seed=[1, 2, 3], **kwargs)
    np.testing.assert_array_equal(a.posterior["theta"], b.posterior["theta"])
    for same in ((1, 2, 3), np.array([1, 2, 3])):
        c = fit(grr_tally, random_seed=same, **kwargs)
        np.testing.assert_array_equal(a.posterior["theta"], c.posterior["theta"])
    for other in ([3, 2, 1], [1, 2], [1, 2, 4]):
        d = fit(grr_tally, random_seed=other, **kwargs)
        assert not np.array_equal(a.posterior["theta"], d.posterior["theta"]), other
    seed = int(a.posterior.attrs["random_seed"])
    expected = np.random.SeedSequence([1, 2, 3]).generate_state(1, np.uint64)[0] >> np.uint64(1)
    assert seed == int(expected)
    replay = fit(grr_tally, random_seed=seed, **kwargs)
    np.testing.assert_array_equal(a.posterior["theta"], replay.posterior["theta"])
    # the sequence need not have one seed per chain
    fit(grr_tally, random_seed=[7], **kwargs)
    hmc = {"method": "hmc", "draws": 30, "chains": 2, "compute_convergence_checks": False}
    e = fit(grr_tally, random_seed=[5, 6], tune=30, **hmc)
    f = fit(grr_tally, random_seed=[5, 6], tune=30, **hmc)
    np.testing.assert_array_equal(e.posterior["theta"], f.posterior["theta"])


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"prior": [1.0, 1.0]}, ValueError, "prior: has 2 concentrations but the tally has K = 3"),
        ({"prior": [1.0, 0.0, 1.0]}, ValueError, "prior: alpha: entries must be > 0"),
        ({"prior": -1.0}, ValueError, "prior: a symmetric concentration must be finite and > 0"),
        ({"draws": 0}, ValueError, "draws: must be >= 1, got 0"),
        ({"chains": -2}, ValueError, "chains: must be >= 1, got -2"),
        ({"draws": 10.0}, TypeError, "draws: expected an integer >= 1"),
        ({"chains": True}, TypeError, "chains: expected an integer >= 1"),
        ({"method": "mcmc"}, ValueError, r"unknown method 'mcmc'.*'exact', 'hmc', 'laplace'"),
        ({"method": None}, TypeError, "method: expected one of"),
        ({"random_seed": -1}, ValueError, "random_seed: must lie in"),
        ({"random_seed": "x"}, TypeError, "random_seed: expected"),
        ({"random_seed": []}, ValueError, "random_seed: an empty sequence"),
        ({"random_seed": [1, -2]}, ValueError, "random_seed: a sequence of seeds must hold"),
        ({"random_seed": [1, 2.5]}, TypeError, "random_seed: a sequence of seeds must hold"),
        ({"random_seed": [True]}, TypeError, "random_seed: a sequence of seeds must hold"),
        ({"progressbar": "yes"}, TypeError, "progressbar"),
        ({"labels": ["a", "b"]}, ValueError, "labels: expected 3 labels"),
        ({"labels": ["a", "a", "b"]}, ValueError, "labels: must be distinct"),
        ({"max_comps": 3}, ValueError, "'max_comps'"),
    ],
)
def test_bad_arguments(grr_tally, kwargs, error, match):
    kwargs = {"method": "exact", "draws": 5, "chains": 1, **kwargs}
    with pytest.raises(error, match=match):
        fit(grr_tally, **kwargs)


def test_tally_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"tally: expected a bayesldp\.Tally, got ndarray"):
        fit(np.array([1, 2, 3]), method="exact")


def test_auto_is_hmc():
    assert fit_module._resolve_method("auto") == "hmc"
    assert fit_module.BACKENDS["hmc"] == "bayesldp.bayes.hmc"


def test_missing_backend_and_missing_dependency(grr_tally, monkeypatch):
    monkeypatch.setitem(fit_module.BACKENDS, "ghost", "bayesldp.bayes._no_such_backend")
    with pytest.raises(
        NotImplementedError, match=r"backend module bayesldp\.bayes\._no_such_backend"
    ):
        fit(grr_tally, prior=1.0, method="ghost", draws=5, chains=1)

    def needs_nutpie(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'nutpie'", name="nutpie")

    fake = types.ModuleType("bayesldp_fake_backend")
    fake.sample = needs_nutpie
    monkeypatch.setitem(sys.modules, "bayesldp_fake_backend", fake)
    monkeypatch.setitem(fit_module.BACKENDS, "fake", "bayesldp_fake_backend")
    with pytest.raises(NotImplementedError, match=r"'nutpie'.*pip install 'bayesldp\[nutpie\]'"):
        fit(grr_tally, prior=1.0, method="fake", draws=5, chains=1)

    def bad_shape(tally, alpha, *, draws, chains, random_seed, progressbar=False, **options):
        return SamplerOutput(theta=np.full((chains, draws + 1, tally.k), 1 / tally.k))

    fake.sample = bad_shape
    with pytest.raises(bayesldp.BayesLDPError, match="theta has shape"):
        fit(grr_tally, prior=1.0, method="fake", draws=5, chains=1)


# --------------------------------------------------------------- pm.sample-shaped arguments
def test_fit_takes_draws_and_tune_as_pm_sample_does(grr_tally):
    """``fit(tally, 200, tune=100)`` is 200 draws after 100 warm-up iterations."""
    idata = fit(grr_tally, 200, tune=100, chains=2, method="hmc", random_seed=0,
                compute_convergence_checks=False)  # fmt: skip
    assert idata.posterior["theta"].shape == (2, 200, grr_tally.k)
    assert json.loads(idata.posterior.attrs["backend_info"])["tune"] == 100


@pytest.mark.parametrize("old", [1.0, 200.0, "adaptive", [1.0, 1.0, 1.0]])
def test_a_prior_in_draws_place_is_refused_naming_prior(grr_tally, old):
    """The old ``fit(tally, prior)``: never a silent Dirichlet(200) or 1 draw."""
    with pytest.raises(bayesldp.InvalidTypeError, match=r"fit's second argument.*prior="):
        fit(grr_tally, old)


def test_options_no_method_takes_are_named_as_such(grr_tally):
    def refused(match, **kwargs):
        with pytest.raises(bayesldp.InvalidInputError, match=match):
            fit(grr_tally, 10, chains=1, method="laplace", **kwargs)

    refused(r"'draw' is not an option of fit or of any method; did you mean 'draws'", draw=5)
    refused(r"'return_inferencedata' is PyMC's.*always returns", return_inferencedata=False)
    refused(r"'nuts_sampler' is not an option of method 'laplace'.*option of 'nuts'",
            nuts_sampler="pymc")  # fmt: skip
    with pytest.raises(bayesldp.InvalidInputError, match=r"chosen by method='auto'"):
        fit(grr_tally, 10, chains=1, nuts_sampler="pymc")
    with pytest.raises(bayesldp.InvalidInputError, match="'exact' draws independent samples"):
        fit(grr_tally, 10, chains=1, method="exact", tune=5)


# ------------------------------------------------------------------------------ save / load
def test_save_load_round_trip(exact_fit, tmp_path):
    path = save_fit(exact_fit, tmp_path / "fit.nc")
    back = load_fit(path)
    assert set(back.groups()) == set(exact_fit.groups())
    for group in exact_fit.groups():
        assert back[group].identical(exact_fit[group]), group
    assert back.posterior.attrs == exact_fit.posterior.attrs
    np.testing.assert_array_equal(back.posterior["theta"].values, exact_fit.posterior["theta"])
    summary = az.summary(back)
    assert summary["r_hat"].max() <= 1.01
    # a support-form tally keeps its boolean support
    support = np.array([[1, 0, 1], [0, 1, 0]], dtype=bool)
    tally = Tally([3, 2], support=support, levels=(0.2, 0.8), stat=np.zeros(3), family="ue")
    idata = fit(tally, method="exact", draws=5, chains=1, random_seed=0, labels=["x", "y", "z"])
    back = load_fit(save_fit(idata, str(tmp_path / "support.nc")))
    assert back.observed_data["support"].dtype == bool
    assert back.observed_data.identical(idata.observed_data)
    assert back.posterior.identical(idata.posterior)


def test_load_errors(tmp_path, exact_fit):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_fit(tmp_path / "missing.nc")
    text = tmp_path / "notes.txt"
    text.write_text("not a netCDF file")
    with pytest.raises(ValueError, match=r"not a netCDF file written by bayesldp\.save_fit"):
        load_fit(text)
    foreign = az.from_dict(posterior={"mu": np.zeros((1, 3))})
    foreign_path = tmp_path / "foreign.nc"
    foreign.to_netcdf(str(foreign_path))
    with pytest.raises(ValueError, match="not a bayesldp fit"):
        load_fit(foreign_path)
    with pytest.raises(ValueError, match="not a bayesldp fit"):
        save_fit(foreign, tmp_path / "x.nc")
    with pytest.raises(TypeError, match=r"idata: expected the arviz\.InferenceData"):
        save_fit({"theta": 1}, tmp_path / "x.nc")
    with pytest.raises(ValueError, match="does not exist"):
        save_fit(exact_fit, tmp_path / "no" / "dir" / "fit.nc")
    with pytest.raises(TypeError, match="path: expected a str"):
        load_fit(3)
