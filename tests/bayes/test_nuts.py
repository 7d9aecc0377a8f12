"""NUTS through PyMC (method "nuts"): dispatch, errors, agreement with the exact posterior."""

import importlib.util

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import hmc
from bayesldp.errors import InvalidInputError
from tests.bayes.test_hmc import _exact_grr_moments, _summary

pytest.importorskip("pymc")
nuts = pytest.importorskip("bayesldp.bayes.nuts")

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")

MECH = bayesldp.GRR(3, 1.0)
REPORTS = np.array([7, 3, 5])
ALPHA = np.array([1.0, 1.5, 0.7])


def _tally():
    return MECH.tally_from_report_counts(REPORTS)


def test_unknown_sampler_and_option():
    with pytest.raises(InvalidInputError, match=r"nuts_sampler.*stan"):
        nuts.sample(_tally(), ALPHA, draws=5, chains=1, random_seed=0, nuts_sampler="stan")
    with pytest.raises(InvalidInputError, match="step_scale"):
        nuts.sample(_tally(), ALPHA, draws=5, chains=1, random_seed=0, step_scale=2)
    with pytest.raises(InvalidInputError, match="cores"):
        nuts.sample(_tally(), ALPHA, draws=5, chains=1, random_seed=0, nuts_sampler="nutpie",
                    cores=2)  # fmt: skip
    with pytest.raises(InvalidInputError, match="target_accept"):
        nuts.sample(_tally(), ALPHA, draws=5, chains=1, random_seed=0, target_accept=0)


@pytest.mark.parametrize("sampler, extra", [("nutpie", "nutpie"), ("numpyro", "numpyro"),
                                            ("blackjax", "blackjax")])  # fmt: skip
def test_missing_backend_names_the_extra(monkeypatch, sampler, extra):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == sampler else real(name, *a)
    )
    with pytest.raises(ModuleNotFoundError, match=rf"pip install 'bayesldp\[{extra}\]'"):
        nuts.sample(_tally(), ALPHA, draws=5, chains=1, random_seed=0, nuts_sampler=sampler)


def test_missing_backend_through_fit_is_not_supported(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "blackjax" else real(name, *a)
    )
    with pytest.raises(bayesldp.errors.NotSupportedError, match="blackjax"):
        bayesldp.fit(_tally(), method="nuts", nuts_sampler="blackjax", draws=5, chains=1)


def test_pymc_nuts_matches_exact_posterior_and_hmc():
    out = nuts.sample(_tally(), ALPHA, draws=1000, chains=2, random_seed=4, tune=500, cores=1)
    assert out.theta.shape == (2, 1000, 3)
    for name in ("diverging", "energy", "tree_depth", "step_size", "lp", "acceptance_rate"):
        assert out.sample_stats[name].shape == (2, 1000)
    assert out.info["nuts_sampler"] == "pymc"
    exact_mean, _ = _exact_grr_moments(REPORTS, ALPHA, MECH)
    mean, mcse, rhat = _summary(out.theta)
    assert np.all(np.abs(mean - exact_mean) < 4 * mcse)
    assert rhat <= 1.01
    ours = hmc.sample(_tally(), ALPHA, draws=1000, chains=2, random_seed=4)
    mean_h, mcse_h, _ = _summary(ours.theta)
    assert np.all(np.abs(mean - mean_h) < 4 * np.hypot(mcse, mcse_h))


@pytest.mark.external  # 5-7 s each where installed; skipped where not
@pytest.mark.parametrize("sampler", ["nutpie", "numpyro", "blackjax"])
def test_external_samplers_match_exact_posterior(sampler):
    packages, _ = nuts.NUTS_SAMPLERS[sampler]
    for package in packages:
        pytest.importorskip(package)
    out = nuts.sample(_tally(), ALPHA, draws=1000, chains=2, random_seed=4, tune=500,
                      nuts_sampler=sampler)  # fmt: skip
    assert out.theta.shape == (2, 1000, 3)
    assert out.sample_stats["tree_depth"].shape == (2, 1000)
    exact_mean, _ = _exact_grr_moments(REPORTS, ALPHA, MECH)
    mean, mcse, rhat = _summary(out.theta)
    assert np.all(np.abs(mean - exact_mean) < 4 * mcse)
    assert rhat <= 1.01
