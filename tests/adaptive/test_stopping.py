"""``simulate(stop=...)`` keeps its word: where the survey says it stopped on target, the
posterior it returns (``posterior()``) meets the target as the rule measures it."""

import numpy as np
import pytest

import bayesldp
from bayesldp.adaptive import AdaptiveSurvey

THETA = np.array([0.5, 0.2, 0.15, 0.1, 0.05])


def _users(n, seed=0):
    return np.random.default_rng(seed).choice(THETA.shape[0], size=n, p=THETA)


def _theta(idata):
    """The returned posterior's draws, all chains stacked: shape (draws, K)."""
    theta = idata.posterior["theta"].values
    return theta.reshape(-1, theta.shape[-1])


def _width(idata):
    lo, hi = np.quantile(_theta(idata), [0.05, 0.95], axis=0)
    return float((hi - lo).max())


def _expected_tv(idata):
    draws = _theta(idata)
    return float(0.5 * np.abs(draws - draws.mean(axis=0)).sum(axis=1).mean())


# checking the in-loop pool's 100 draws instead, seeds 1 and 2 stopped where the returned
# posterior's 4,000 draws missed the width (0.0836 and 0.0815 against 0.08), and seed 5 reported
# the pool's 0.0689 for a returned posterior of 0.0736
@pytest.mark.parametrize("seed", [1, *(pytest.param(s, marks=pytest.mark.slow) for s in (2, 5))])
def test_a_width_stop_holds_for_the_returned_posterior(seed):
    survey = AdaptiveSurvey(5, 2.0, batch_size=50, random_seed=seed)
    survey.simulate(_users(20_000), stop={"width": 0.08})
    stop = survey.stopped
    assert stop is not None and stop["users"] == survey.n_users < 20_000
    width = _width(survey.posterior(progressbar=False))
    assert width <= 0.08
    assert width == pytest.approx(stop["value"], rel=1e-12, abs=0.0)


# these seeds stopped where the pool met the expected TV but the returned posterior did not
# (0.0402 and 0.0429 against 0.04)
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_an_expected_tv_stop_holds_for_the_returned_posterior(seed):
    survey = AdaptiveSurvey(5, 2.0, batch_size=50, random_seed=seed, refresh=0.1)
    survey.simulate(_users(20_000), stop={"expected_tv": 0.04})
    stop = survey.stopped
    assert stop is not None and stop["users"] == survey.n_users < 20_000
    assert stop["measure"] == "expected_tv"
    tv = _expected_tv(survey.posterior(progressbar=False))
    assert tv <= 0.04
    assert tv == pytest.approx(stop["value"], rel=1e-12, abs=0.0)


def test_a_missed_target_reports_the_returned_posteriors_miss():
    survey = AdaptiveSurvey(5, 0.5, batch_size=50, random_seed=6)
    with pytest.warns(bayesldp.errors.StoppingWarning, match="was not met") as caught:
        survey.simulate(_users(300), stop={"width": 0.05})
    assert survey.n_users == 300 and survey.stopped is None
    width = _width(survey.posterior(progressbar=False))
    assert width > 0.05
    message = str(caught[0].message)
    assert f"{width:.4g} for posterior()" in message
    assert f"{width - 0.05:.4g} over the target" in message


def test_a_resumed_survey_that_had_stopped_returns_the_same_posterior(tmp_path):
    path = tmp_path / "survey.npz"
    x = _users(4_000)
    survey = AdaptiveSurvey(5, 2.0, batch_size=200, random_seed=2, checkpoint=path)
    survey.simulate(x, stop={"width": 0.08})
    stop = survey.stopped
    assert stop is not None and stop["users"] < 4_000
    resumed = AdaptiveSurvey.resume(path)
    resumed.simulate(x[stop["users"] :], stop={"width": 0.08})
    assert resumed.n_users == stop["users"] and resumed.stopped == stop
    theta = _theta(resumed.posterior(progressbar=False))
    assert np.array_equal(theta, _theta(survey.posterior(progressbar=False)))
    returned = resumed.posterior(progressbar=False)
    assert _width(returned) == stop["value"] <= 0.08
    returned.posterior["theta"].values[:] = 0.0  # each call hands back its own copy
    assert _width(resumed.posterior(compute_convergence_checks=False)) == stop["value"]
