"""SurveyConfig: validated once, frozen, stored in the checkpoint."""

import dataclasses

import numpy as np
import pytest

from bayesldp.adaptive import AdaptiveSurvey, SurveyConfig
from bayesldp.errors import InvalidInputError, InvalidTypeError


def _config(**changes):
    settings = dict(k=5, epsilon=1.0, utility="U4", alpha=None, eps1_fraction=0.8, prior=1.0,
                    engine="sgld", batch_size=10, sgld_steps_per_user=20, minibatch=50,
                    step_size=None, n_expected=1000, final_steps=2000, burn_in=1000,
                    fit_method="auto", random_seed=3)  # fmt: skip
    return SurveyConfig.create(**(settings | changes))


def test_config_is_frozen_canonical_and_round_trips():
    config = _config()
    assert config.utility == "tv" and config.prior == (1.0,) * 5 and config.gamma == 0.5 / 1000
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.k = 6
    assert SurveyConfig.from_dict(config.to_dict()) == config
    other = _config(epsilon=2.0, random_seed=4)
    assert config.differences(other) == ["epsilon", "entropy"]
    assert config.with_n_expected(10).gamma == 0.05


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"batch_size": 0}, InvalidInputError, "batch_size: must be >= 1"),
        ({"minibatch": 2.5}, InvalidTypeError, "minibatch"),
        ({"utility": "semi_adaptive"}, InvalidInputError, "alpha: utility='semi_adaptive' needs"),
        ({"alpha": 0.5}, InvalidInputError, "alpha: only used with utility='semi_adaptive'"),
        ({"burn_in": 2000}, InvalidInputError, "burn_in: must be smaller than final_steps"),
        ({"engine": "mcmc"}, InvalidInputError, "engine: must be one of posterior, sgld, fit"),
        ({"step_size": -1.0}, InvalidInputError, "step_size: must be finite and > 0"),
    ],
)
def test_bad_settings_are_refused_once(change, error, match):
    with pytest.raises(error, match=match):
        _config(**change)


@pytest.mark.parametrize("engine", ["posterior", "sgld"])
def test_checkpoint_stores_the_config(tmp_path, engine):
    path = tmp_path / "s.ckpt"
    x = np.random.default_rng(0).choice(4, size=200)
    survey = AdaptiveSurvey(
        4, 1.0, utility="tv", batch_size=50, random_seed=2, checkpoint=path, engine=engine
    )
    survey.simulate(x)
    resumed = AdaptiveSurvey.resume(path)
    assert resumed.config == survey.config
    # the SGLD's step is planned from the users of the first simulate; the posterior plans none
    assert resumed.config.n_expected == (200 if engine == "sgld" else None)
