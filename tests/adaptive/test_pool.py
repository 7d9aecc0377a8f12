"""The survey's default engine: subsets picked from draws of the calibrated posterior (a pool
refreshed on a geometric schedule), its trajectory, and ``posterior()`` as ``bayesldp.fit``."""

import numpy as np
import pytest

import bayesldp
from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.adaptive import _kernels as kn
from bayesldp.adaptive.pool import REFRESH_STREAM, PosteriorPool, pick_index
from bayesldp.bayes import AdaptiveDirichlet
from bayesldp.errors import InvalidInputError

THETA = np.array([0.45, 0.25, 0.15, 0.1, 0.05])


def _users(n, seed=0):
    return np.random.default_rng(seed).choice(5, size=n, p=THETA)


@pytest.fixture(scope="module")
def survey():
    return AdaptiveSurvey(5, 1.0, utility="tv", batch_size=20, random_seed=4).simulate(_users(800))


def test_refreshes_follow_the_geometric_schedule(survey):
    users = survey.history["posterior_users"].values
    # each refresh at the first batch boundary (20 users) at or past max(K, ceil(1.25 n_last))
    expected, last = [], 0
    for n in range(20, 801, 20):
        if n >= max(5, int(np.ceil(1.25 * last))):
            expected.append(n)
            last = n
    assert users.tolist() == expected
    pool = PosteriorPool(5, 0.25, 100, 200)
    pool.users = 100
    assert pool.next_refresh() == 125 and pool.due(125) and not pool.due(124)


def test_the_pool_is_the_fit_of_the_reports_at_its_last_refresh(survey):
    """The draws subsets are picked from are bayesldp.fit's HMC draws given those reports."""
    hist = survey.history
    n_last = int(hist["posterior_users"].values[-1])
    b_next = n_last // 20  # the batch after the refresh
    seed = int(kn.derive_seed(survey._key0, survey._key1, b_next, REFRESH_STREAM))
    first = AdaptiveSurvey(5, 1.0, utility="tv", batch_size=20, random_seed=4)
    first.simulate(_users(800)[:n_last])
    ref = bayesldp.fit(first.tally(), prior="adaptive", method="hmc", draws=100, chains=1, tune=200,
                       random_seed=seed, compute_convergence_checks=False)  # fmt: skip
    draws = ref.posterior["theta"].values[0]
    np.testing.assert_array_equal(survey._pool.draws, draws)
    stats = hist["posterior_mean"].values[-1], hist["posterior_lower"].values[-1]
    np.testing.assert_allclose(stats[0], draws.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats[1], np.quantile(draws, 0.05, axis=0), rtol=1e-12)
    # each batch selected its subset from the pool draw its own stream picks
    theta = hist["theta"].values
    for b in range(b_next + 1, 40):
        j = pick_index(survey._key0, survey._key1, b, 100)
        np.testing.assert_array_equal(theta[b], draws[j])


@pytest.mark.parametrize("prior", [bayesldp.bayes.Dirichlet([1.0, 2.0, 0.5]), "adaptive"])
def test_a_refresh_draws_what_fit_draws(prior):
    """The pool samples without building fit's InferenceData; its draws are fit's, bit for bit,
    under a Dirichlet prior and the adaptive one."""
    from bayesldp.bayes.prior import as_prior

    mech = bayesldp.GRR(3, 1.0)
    tally = mech.tally(mech.perturb(np.random.default_rng(1).choice(3, 300), rng=2))
    pool = PosteriorPool(3, 0.25, 50, 100)
    pool.refresh(tally, as_prior(prior, 3), 12345)
    ref = bayesldp.fit(tally, 50, tune=100, chains=1, prior=prior, method="hmc",
                       random_seed=12345, compute_convergence_checks=False)  # fmt: skip
    np.testing.assert_array_equal(pool.draws, ref.posterior["theta"].values[0])


def test_trajectory_bands_hold_their_means_and_narrow(survey):
    hist = survey.history
    lo, mean, hi = (hist[f"posterior_{v}"].values for v in ("lower", "mean", "upper"))
    assert np.all(lo <= mean) and np.all(mean <= hi)
    width = (hi - lo).sum(axis=1)
    assert width[-1] < 0.5 * width[0]


def test_posterior_is_fit_of_the_tally_under_the_adaptive_prior(survey):
    short = {"draws": 40, "chains": 1, "tune": 50, "compute_convergence_checks": False}
    idata = survey.posterior(**short)
    seed = int(kn.derive_seed(survey._key0, survey._key1, survey.n_batches, 2))
    ref = bayesldp.fit(survey.tally(), prior=AdaptiveDirichlet(5), random_seed=seed, **short)
    np.testing.assert_array_equal(idata.posterior["theta"].values, ref.posterior["theta"].values)
    assert "a" in idata.posterior  # the adaptive prior's concentration


def test_the_papers_sgld_run_stays_available():
    paper = AdaptiveSurvey(5, 1.0, utility="tv", engine="sgld", random_seed=2)
    idata = paper.simulate(_users(400)).posterior(engine="sgld", draws=30)
    assert idata.posterior["theta"].shape == (1, 30, 5)
    assert "SGLD" in idata.posterior.attrs["backend_info"]
    assert paper.prior == bayesldp.bayes.Dirichlet.symmetric(5, 1.0)  # the paper's prior
    fixed = AdaptiveSurvey(5, 1.0, prior=1.0, batch_size=100, random_seed=2)
    assert fixed.simulate(_users(400)).posterior(engine="sgld", draws=10).posterior[
        "theta"
    ].shape == (1, 10, 5)


def test_bad_engine_and_prior_combinations_are_refused(survey):
    with pytest.raises(ValueError, match="engine: must be 'fit' or 'sgld'"):
        survey.posterior(engine="nuts")
    with pytest.raises(NotImplementedError, match="fixed Dirichlet"):
        survey.posterior(engine="sgld")  # the adaptive prior has no SGLD
    with pytest.raises(ValueError, match="takes none"):
        AdaptiveSurvey(5, 1.0, prior=1.0, random_seed=1).simulate(_users(50)).posterior(
            engine="sgld", tune=10
        )
    with pytest.raises(ValueError, match="SGLD engine needs a fixed Dirichlet"):
        AdaptiveSurvey(5, 1.0, engine="sgld", prior="adaptive")
    with pytest.raises(ValueError, match="prior: the survey takes 'adaptive'"):
        AdaptiveSurvey(5, 1.0, prior="smooth")
    for bad in ({"refresh": 0.0}, {"pool_draws": 0}, {"pool_tune": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            AdaptiveSurvey(5, 1.0, **bad)


# ------------------------------------------------------------------------- lookahead rule
def test_lookahead_picks_a_subset_where_it_beats_grr_and_grr_where_it_does_not():
    """theta = (0.7, 0.3, 0 x 8), eps 1, 5,000 users: the MLE's TV under the top-2 RRRR is
    0.020 (sd 0.014 per tally) against GRR's 0.055 (sd 0.028); the rule picks s >= 1 for 34 of
    40 seeds (the 2-se guard of the simulated gain over 8 draws), so 7 of 12 here fails with
    probability about 0.2% at that rate.  theta = (0.96, 0.01 x 4), 50,000 users: GRR's 0.0117
    beats every subset (0.0155-0.0209); 40 of 40 seeds pick s = 0, and 10 of 12 fails with
    probability under 5% at a false-subset rate of 7% (the guard's purpose: the smallest of K
    noisy scores is not a gain)."""
    from bayesldp.adaptive.lookahead import lookahead_size

    sparse = np.tile([0.7, 0.3] + [0.0] * 8, (100, 1))
    picks = [lookahead_size(sparse, 1.0, 0.8, 5_000, np.random.default_rng(r)) for r in range(12)]
    assert sum(s >= 1 for s in picks) >= 7, picks
    spread = np.tile([0.96, 0.01, 0.01, 0.01, 0.01], (100, 1))
    picks = [lookahead_size(spread, 1.0, 0.8, 50_000, np.random.default_rng(r)) for r in range(12)]
    assert picks.count(0) >= 10, picks


def test_the_split_test_admits_a_subset_where_it_beats_grr_and_waits_for_k_squared_reports():
    """``test="split"``: the size chosen on half of 16 draws and tested once on the other half.
    On the sparse population above it picked s >= 1 for 30 of 40 seeds, so 5 of 12 here fails
    with probability about 0.3% at that rate; on the spread one s = 0 for 40 of 40 (10 of 12
    fails under 5% at a false-subset rate of 7%).  Before K^2 reports it keeps GRR."""
    from bayesldp.adaptive.lookahead import lookahead_size

    sparse = np.tile([0.7, 0.3] + [0.0] * 8, (100, 1))
    picks = [lookahead_size(sparse, 1.0, 0.8, 5_000, np.random.default_rng(r), test="split",
                            users=5_000) for r in range(12)]  # fmt: skip
    assert sum(s >= 1 for s in picks) >= 5, picks
    spread = np.tile([0.96, 0.01, 0.01, 0.01, 0.01], (100, 1))
    picks = [lookahead_size(spread, 1.0, 0.8, 50_000, np.random.default_rng(r), test="split",
                            users=50_000) for r in range(12)]  # fmt: skip
    assert picks.count(0) >= 10, picks
    early = [lookahead_size(sparse, 1.0, 0.8, 5_000, np.random.default_rng(r), test="split",
                            users=99) for r in range(3)]  # fmt: skip
    assert early == [0, 0, 0]


def test_the_lookahead_test_and_score_are_kept_across_a_resume(tmp_path):
    survey = AdaptiveSurvey(4, 1.0, random_seed=0, batch_size=50, lookahead_test="split",
                            lookahead_score="posterior", lookahead_truth="mean",
                            checkpoint=tmp_path / "s.npz")  # fmt: skip
    survey.simulate(np.random.default_rng(0).choice(4, size=100))
    config = AdaptiveSurvey.resume(tmp_path / "s.npz").config
    assert (config.lookahead_test, config.lookahead_score, config.lookahead_truth) == (
        "split", "posterior", "mean")
    with pytest.raises(InvalidInputError, match="lookahead_test"):
        AdaptiveSurvey(4, 1.0, lookahead_test="bonferroni")
    with pytest.raises(InvalidInputError, match="lookahead_score"):
        AdaptiveSurvey(4, 1.0, lookahead_score="map")
    with pytest.raises(InvalidInputError, match="lookahead_truth"):
        AdaptiveSurvey(4, 1.0, lookahead_truth="median")


def test_the_posterior_score_is_the_error_of_fits_mean_after_the_reports():
    """``now=(tally, prior)``: each score is the TV of ``bayesldp.fit``'s posterior mean (the
    package's NUTS, 100 draws after 100 warm-up iterations) given the survey's reports and
    the simulated users still to come, here recomputed from the same random numbers."""
    from bayesldp.adaptive.lookahead import simulated_errors
    from bayesldp.adaptive.selection import candidate_channels
    from bayesldp.tally import Tally

    x = np.random.default_rng(5).choice(3, size=300, p=[0.7, 0.2, 0.1])
    survey = AdaptiveSurvey(3, 1.0, batch_size=50, random_seed=1).simulate(x)
    now, prior = survey.tally(), survey.prior
    draws = np.random.default_rng(6).dirichlet([7.0, 2.0, 1.0], size=10)
    errors = simulated_errors(draws, 1.0, survey.eps1, 600, np.random.default_rng(7), n_draws=2,
                              now=(now, prior))  # fmt: skip
    gen = np.random.default_rng(7)
    thetas = draws[[0, 9]] / draws[[0, 9]].sum(axis=1, keepdims=True)
    channels = candidate_channels(np.argsort(-thetas[1], kind="stable"), 1.0, survey.eps1)
    users = gen.multinomial(300, thetas[0])
    seed = int(gen.integers(2**62))
    for s in range(3):
        reports = gen.multinomial(users, channels[s]).sum(axis=0)
        seen = reports > 0
        coming = Tally(reports[seen], rows=channels[s].T[seen], stat=reports.astype(float),
                       family=now.family)  # fmt: skip
        fitted = bayesldp.fit(now + coming, 100, tune=100, chains=1, prior=prior, method="hmc",
                              random_seed=seed, compute_convergence_checks=False)  # fmt: skip
        mean = fitted.posterior["theta"].values[0].mean(axis=0)
        assert errors[0, s] == pytest.approx(0.5 * np.abs(mean - thetas[0]).sum(), rel=1e-12)


def test_the_mean_as_truth_simulates_the_pools_mean_through_each_draws_order():
    """``truth="mean"``: every simulated population is the pool's mean (its draws clipped at
    0, averaged and normalised) and draw ``j`` orders the categories for ``S``; recomputed
    here from the same random numbers, MLE by MLE."""
    from bayesldp.adaptive.lookahead import simulated_errors
    from bayesldp.adaptive.selection import candidate_channels
    from bayesldp.estimators.mle import mle
    from bayesldp.tally import Tally

    draws = np.random.default_rng(6).dirichlet([7.0, 2.0, 1.0, 0.5], size=10)
    draws[3, 2] = -1e-3  # a pool draw a hair off the simplex, clipped as the survey's are
    errors = simulated_errors(draws, 1.0, 0.8, 600, np.random.default_rng(7), n_draws=2,
                              truth="mean")  # fmt: skip
    mean = np.maximum(draws, 0.0).mean(axis=0)
    mean /= mean.sum()
    gen = np.random.default_rng(7)
    for j, guide in enumerate(draws[[0, 9]] / draws[[0, 9]].sum(axis=1, keepdims=True)):
        channels = candidate_channels(np.argsort(-guide, kind="stable"), 1.0, 0.8)
        users = gen.multinomial(600, mean)
        for s in range(4):
            reports = gen.multinomial(users, channels[s]).sum(axis=0)
            seen = reports > 0
            tally = Tally(reports[seen], rows=channels[s].T[seen], stat=reports.astype(float),
                          family="rrrr")  # fmt: skip
            tv = 0.5 * np.abs(mle(tally, std_errors=False).frequencies - mean).sum()
            assert errors[j, s] == pytest.approx(tv, rel=1e-12)


def test_lookahead_orders_the_subset_by_another_draw_than_the_truth():
    """Draws alternating between (0.9, 0.1, 0 x 8) and (0.1, 0.9, 0 x 8): a top-1 subset taken
    from the truth would do well, but the rule takes S from the next draw -- the wrong category
    -- so its simulated error at s = 1 is above that of draws that agree on the top one."""
    from bayesldp.adaptive.lookahead import simulated_errors

    a = np.array([0.9, 0.1] + [0.0] * 8)
    draws = np.array([a, a[[1, 0, *range(2, 10)]]] * 50)
    errors = simulated_errors(draws, 1.0, 0.8, 5_000, np.random.default_rng(0))
    same = simulated_errors(np.tile(a, (100, 1)), 1.0, 0.8, 5_000, np.random.default_rng(0))
    assert errors[:, 1].mean() > 1.5 * same[:, 1].mean()


def test_lookahead_survey_uses_the_chosen_size_and_resumes_exactly(tmp_path):
    x = np.random.default_rng(1).choice(10, size=2000, p=[0.7, 0.3] + [0.0] * 8)
    path = tmp_path / "look.npz"
    first = AdaptiveSurvey(10, 2.0, batch_size=40, random_seed=3, checkpoint=path)
    assert first.utility == "lookahead"
    first.simulate(x[:1000])
    AdaptiveSurvey.resume(path).simulate(x[1000:])
    whole = AdaptiveSurvey(10, 2.0, batch_size=40, random_seed=3).simulate(x)
    import xarray as xr

    xr.testing.assert_identical(AdaptiveSurvey.resume(path).history, whole.history)
    sizes = whole.history["subset_size"].values
    assert sizes[:5].tolist() == [0] * 5  # GRR until the first choice (no reports yet)
    # two categories hold every user: with theta known, S = the top two errs well below GRR
    # here (lookahead.simulated_errors), and the rule finds a subset
    assert sizes.max() >= 1
    assert len(np.unique(sizes.reshape(-1, 40)[:, 0])) <= 1 + int(np.log2(2000 / 10)) + 1
    with pytest.raises(ValueError, match="lookahead"):
        AdaptiveSurvey(5, 1.0, utility="lookahead", engine="sgld")
    assert AdaptiveSurvey(5, 1.0, engine="sgld").utility == "fisher"


# ------------------------------------------------------------------------------- stopping
def test_stop_at_the_first_refresh_that_meets_the_target():
    x = _users(20_000, 5)
    survey = AdaptiveSurvey(5, 2.0, batch_size=50, random_seed=6)
    survey.simulate(x, stop={"width": 0.08})
    stop = survey.stopped
    assert stop["users"] == survey.n_users < 20_000 and stop["value"] <= 0.08
    hist = survey.history
    widths = (hist["posterior_upper"] - hist["posterior_lower"]).max("category").values
    # the pool's widths are from its draws; every earlier refresh missed the target
    assert np.all(widths[:-1] > 0.08) and widths[-1] <= 0.08 + 1e-12
    tv = AdaptiveSurvey(5, 2.0, batch_size=50, random_seed=6)
    tv.simulate(x, stop={"expected_tv": 0.03})
    assert tv.stopped["measure"] == "expected_tv" and tv.stopped["value"] <= 0.03


def test_a_target_not_met_ends_at_the_last_user_and_says_so():
    survey = AdaptiveSurvey(5, 0.5, batch_size=50, random_seed=6)
    with pytest.warns(bayesldp.errors.StoppingWarning, match="was not met within the 300 users"):
        survey.simulate(_users(300), stop={"width": 1e-4})
    assert survey.n_users == 300 and survey.stopped is None
    for bad, err in [({"width": 0}, ValueError), ({"width": 0.1, "expected_tv": 0.1}, ValueError),
                     ({"mse": 0.1}, ValueError), (0.1, TypeError)]:  # fmt: skip
        with pytest.raises(err, match="stop"):
            survey.simulate(_users(10), stop=bad)
    with pytest.raises(ValueError, match="engine='posterior'"):
        AdaptiveSurvey(5, 1.0, engine="sgld").simulate(_users(10), stop={"width": 0.1})
