"""Independence Metropolis-Hastings with the prior as proposal (bayesldp.bayes.prior_mh) and
the rule by which fit's method="auto" takes it; its exactness is checked against exact
posteriors in test_sampler_reference.py."""

import importlib
import json
import math
import warnings

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import prior_mh
from bayesldp.errors import ConvergenceWarning, InvalidInputError

fit_module = importlib.import_module("bayesldp.bayes.fit")  # the name `fit` is the function

#: the vertex case: GRR reports (60, 20, 10) at eps = 1, K = 3, under SmoothDensity(3)
VERTEX = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([60, 20, 10]))


def data_dominated_tally():
    """GRR, K = 10, eps = 1, n = 5,000: the likelihood is far narrower than any prior."""
    mech = bayesldp.GRR(10, 1.0)
    x = np.random.default_rng(5).choice(10, size=5000, p=np.arange(1, 11) / 55)
    return mech.tally(mech.perturb(x, rng=6))


@pytest.mark.parametrize("prior", ["adaptive", "dirichlet", "smooth"])
def test_rule_rejects_where_the_data_dominate(prior):
    """n = 5,000: the first 250 prior draws have efficiency below 0.02 (measured: 0.004, Pareto
    k 3.8-5.4), so the rule stops there, in a few milliseconds."""
    tally = data_dominated_tally()
    obj = {"adaptive": bayesldp.bayes.AdaptiveDirichlet(10), "dirichlet": np.ones(10),
           "smooth": bayesldp.bayes.SmoothDensity(10)}[prior]  # fmt: skip
    rule = prior_mh.check(tally, obj, np.random.default_rng(0))
    assert not rule.ok
    assert rule.draws == prior_mh.FIRST_STAGE
    assert rule.efficiency < prior_mh.FIRST_STAGE_FLOOR
    assert "NUTS" in rule.reason and "Pareto k" in rule.reason


def test_fit_keeps_nuts_where_the_data_dominate():
    """fit's default on the data-dominated tally is NUTS, its reason naming the rule's numbers
    (its draws are the same, bit for bit, as before the rule existed: the rule draws from its
    own Generator)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a short run
        idata = bayesldp.fit(data_dominated_tally(), 100, tune=100, chains=2, random_seed=1)
    attrs = idata.posterior.attrs
    assert attrs["method"] == "hmc"
    assert "Pareto k" in attrs["auto_reason"] and attrs["auto_reason"].endswith("NUTS")
    assert "tree_depth" in idata.sample_stats


def test_rule_accepts_the_vertex_case():
    """(60, 20, 10) under SmoothDensity(3): 15 % of the prior's draws sit on the vertex
    theta = (1, 0, 0), where the likelihood is flat at its maximum, so PSIS's tail is one tied
    value (k read as -inf) and the efficiency is 0.42-0.44 (seeds 1-3 and 36)."""
    rule = prior_mh.check(VERTEX, bayesldp.bayes.SmoothDensity(3), np.random.default_rng(1))
    assert rule.ok and rule.draws == prior_mh.RULE_DRAWS
    assert rule.pareto_k == -math.inf
    assert 0.35 < rule.efficiency < 0.5
    assert rule.thin == math.ceil(prior_mh.THIN_PER_EFFICIENCY / rule.efficiency)


def test_fit_auto_samples_the_vertex_case_without_divergences():
    """fit's default under the smoothness prior: independence MH from the prior (NUTS diverged
    on about 3 % of its transitions here), the posterior laid out as NUTS's (theta, smoothness),
    no divergences, no convergence warning, the choice and its reason in the attrs."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        idata = bayesldp.fit(VERTEX, 1000, chains=4, prior="smooth", random_seed=3)
    post = idata.posterior
    assert post.attrs["method"] == "prior_mh" and post.attrs["requested_method"] == "auto"
    assert "Pareto k -inf" in post.attrs["auto_reason"]
    assert "independence MH from the prior" in post.attrs["auto_reason"]
    assert post["theta"].dims == ("chain", "draw", "category")
    assert post["theta"].shape == (4, 1000, 3)
    assert post["smoothness"].shape == (4, 1000) and np.all(post["smoothness"].values > 0)
    assert not idata.sample_stats["diverging"].values.any()
    assert post.attrs["divergences"] == 0
    info = json.loads(post.attrs["backend_info"])
    assert 0.3 < info["acceptance"] < 0.55 and info["thin"] >= 1
    assert post.attrs["ess_bulk_min"] > 2000  # 4,000 draws, thinned to about one ESS each
    again = bayesldp.fit(VERTEX, 1000, chains=4, prior="smooth", random_seed=3)
    np.testing.assert_array_equal(again.posterior["theta"].values, post["theta"].values)


def test_method_hmc_and_nuts_options_keep_nuts():
    """method="hmc" is NUTS whatever the rule says; so is "auto" given an option of NUTS."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short runs
        forced = bayesldp.fit(VERTEX, 100, tune=100, chains=1, prior="smooth", method="hmc",
                              random_seed=0)  # fmt: skip
        tuned = bayesldp.fit(VERTEX, 100, tune=100, chains=1, prior="smooth",
                             target_accept=0.95, random_seed=0)  # fmt: skip
    assert forced.posterior.attrs["method"] == "hmc"
    assert tuned.posterior.attrs["method"] == "hmc"
    assert "tree_depth" in tuned.sample_stats


def test_method_prior_mh_takes_every_prior_and_its_options():
    """method="prior_mh" forces it (fixed Dirichlet, adaptive prior with its ``a``), ``thin``
    and ``tune`` are its options, an option of NUTS is refused."""
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([12, 5, 9]))
    fixed = bayesldp.fit(tally, 200, chains=2, prior=1.0, method="prior_mh", thin=3, tune=5,
                         random_seed=0)  # fmt: skip
    info = json.loads(fixed.posterior.attrs["backend_info"])
    assert info["thin"] == 3 and info["tune"] == 5
    assert fixed.posterior.attrs["method"] == "prior_mh"
    adaptive = bayesldp.fit(tally, 200, chains=2, prior="adaptive", method="prior_mh",
                            random_seed=0)  # fmt: skip
    a = adaptive.posterior["a"].values
    assert a.shape == (2, 200) and np.all(np.isin(a, bayesldp.bayes.AdaptiveDirichlet(3).a))
    with pytest.raises(InvalidInputError, match="target_accept"):
        bayesldp.fit(tally, 10, method="prior_mh", target_accept=0.9, random_seed=0)


@pytest.mark.parametrize("prior", ["dirichlet", "adaptive", "smooth"])
def test_prior_draws_follow_the_prior(prior):
    """Draws on the simplex with the prior's moments: Dirichlet(1, 2, 3)'s mean (1, 2, 3) / 6
    within 0.01; the adaptive prior's ``a`` on its grid with the grid's weights (E log a within
    0.05); the smoothness prior's ``log lambda`` with mean log 30 and sd 2.5 (within 0.05)."""
    rng = np.random.default_rng(0)
    obj = {"dirichlet": np.array([1.0, 2.0, 3.0]), "adaptive": bayesldp.bayes.AdaptiveDirichlet(3),
           "smooth": bayesldp.bayes.SmoothDensity(3)}[prior]  # fmt: skip
    theta, extra = prior_mh.prior_draws(obj, 20_000, rng)
    assert theta.shape == (20_000, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    if prior == "dirichlet":
        assert extra == {}
        np.testing.assert_allclose(theta.mean(axis=0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    elif prior == "adaptive":
        want = float(np.exp(obj.log_w) @ obj.log_a)
        assert abs(np.log(extra["a"]).mean() - want) < 0.05
    else:
        log_lam = np.log(extra["smoothness"])
        assert abs(log_lam.mean() - math.log(30.0)) < 0.05 and abs(log_lam.std() - 2.5) < 0.05


def test_accept_kernel_follows_the_metropolis_hastings_rule():
    """The compiled acceptance loop on five proposals by hand: accept when ``log u < loglik' -
    loglik``; the state's index (0: the one carried in) after each."""
    loglik = np.array([-1.0, -3.0, -0.5, -np.inf, -0.6])
    log_u = np.log(np.array([0.5, 0.2, 0.9, 0.1, 0.9]))
    state = np.empty(5, dtype=np.int64)
    accepted = np.empty(5, dtype=np.bool_)
    end = prior_mh._accept(loglik, log_u, -2.0, state, accepted)
    # -1 - -2 = 1 > log 0.5: accept; -3 - -1 = -2 < log 0.2 = -1.6: reject; -0.5 - -1 = 0.5:
    # accept; -inf: reject; -0.6 - -0.5 = -0.1 > log 0.9 = -0.105: accept
    np.testing.assert_array_equal(accepted, [True, False, True, False, True])
    np.testing.assert_array_equal(state, [1, 1, 3, 3, 5])
    assert end == -0.6


def test_rule_rejects_ties_that_never_reach_the_posterior():
    """Dirichlet(1e-5) puts its draws exactly on the vertices, a third on the best one: Pareto k
    -inf and efficiency 0.32 as on the vertex case, but the posterior of 1,000 reports
    (400, 300, 300) is near the centre, 62.5 log-likelihood units above the best draw; the
    third condition (within 6.91 of the maximum: half chi-square(2)'s 0.999 quantile) refuses."""
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([400, 300, 300]))
    rule = prior_mh.check(tally, np.full(3, 1e-5), np.random.default_rng(0))
    assert rule.pareto_k == -math.inf and rule.efficiency > prior_mh.EFFICIENCY_MIN
    assert rule.reach > prior_mh.reach_limit(3) > 6.9
    assert not rule.ok and "below the maximum" in rule.reason
