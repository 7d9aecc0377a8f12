"""fit_rounds: the random walk across rounds (bayesldp.bayes.dynamic).

Correctness against an independent computation (importance sampling from the prior, written
here in numpy from the model's formula), the pooling limit (sigma fixed near 0 is the pooled
tally's posterior), the likelihood's stacking, and bad input.  Tolerances are z-scores from
Monte Carlo errors: NUTS's ESS-based MCSE (arviz) and the importance sampler's delta-method
standard error.
"""

from __future__ import annotations

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes.dynamic import (
    RandomWalkPrior,
    build_rounds_model,
    check_rounds,
    fit_rounds,
    stacked_rows,
    summarize_rounds,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError

az = pytest.importorskip("arviz")
pytest.importorskip("pymc")

#: |z| above this fails (about 6e-5 two-sided per quantity; a dozen quantities per test)
Z_MAX = 4.0


def _rounds(mech, thetas, n, seed):
    rng = np.random.default_rng(seed)
    k = mech.k
    return [mech.tally(mech.perturb(np.repeat(np.arange(k), rng.multinomial(n, th)), rng))
            for th in thetas]  # fmt: skip


def _importance(tallies, prior, draws, seed):
    """Self-normalised importance sampling from the prior: weighted means of theta_t, theta_t^2
    and sigma, with delta-method standard errors."""
    rng = np.random.default_rng(seed)
    k, n_rounds = tallies[0].k, len(tallies)

    def zero_sum(scale, shape):
        x = rng.normal(0.0, scale, size=(*shape, k))
        return x - x.mean(axis=-1, keepdims=True)

    sigma = np.abs(rng.normal(0.0, prior.step_scale, size=draws))
    eta = [zero_sum(prior.initial_sd, (draws,))]
    for _ in range(1, n_rounds):
        eta.append(eta[-1] + sigma[:, None] * zero_sum(1.0, (draws,)))
    theta = [np.exp(e) / np.exp(e).sum(axis=-1, keepdims=True) for e in eta]
    logw = sum(tally.loglik(th) for tally, th in zip(tallies, theta, strict=True))
    w = np.exp(logw - logw.max())
    w /= w.sum()
    out = {}
    for name, values in [("sigma", sigma[:, None]),
                         *[(f"theta{t}", theta[t]) for t in range(n_rounds)],
                         *[(f"theta{t}_sq", theta[t] ** 2) for t in range(n_rounds)]]:  # fmt: skip
        mean = w @ values
        se = np.sqrt(w**2 @ (values - mean) ** 2)
        out[name] = (mean, se)
    ess = 1.0 / np.sum(w**2)
    return out, ess


def _mcse(values):
    """ESS-based Monte Carlo standard error of the mean of a (chain, draw, ...) DataArray."""
    return az.mcse(values.to_dataset(name="x"))["x"].values


def _nuts_moments(idata, n_rounds):
    post = idata.posterior
    out = {"sigma": (post["sigma"].values.mean()[None],
                     np.atleast_1d(_mcse(post["sigma"])))}  # fmt: skip
    for t in range(n_rounds):
        theta = post["theta"].isel(round=t)
        out[f"theta{t}"] = (theta.mean(("chain", "draw")).values, _mcse(theta))
        sq = theta**2
        out[f"theta{t}_sq"] = (sq.mean(("chain", "draw")).values, _mcse(sq))
    return out


@pytest.mark.parametrize("method", ["hmc", "nuts"])
def test_tiny_case_matches_importance_sampling(method):
    """K = 3, T = 2, GRR eps = 1, 40 reports per round: NUTS's posterior means and second
    moments of theta_t and sigma against importance sampling from the prior (2e5 draws), for
    the package's sampler and PyMC's."""
    mech = bayesldp.GRR(3, 1.0)
    tallies = _rounds(mech, [[0.6, 0.3, 0.1], [0.3, 0.3, 0.4]], 40, seed=3)
    prior = RandomWalkPrior()
    reference, ess = _importance(tallies, prior, 200_000, seed=4)
    assert ess > 5_000  # the importance sampler itself is trustworthy here
    idata = fit_rounds(tallies, 1000, tune=1000, chains=2, random_seed=5, progressbar=False,
                       cores=1, method=method)  # fmt: skip
    assert idata.posterior.attrs["method"] == method
    assert idata.posterior.attrs["divergences"] == 0
    nuts = _nuts_moments(idata, 2)
    z = np.concatenate([(nuts[key][0] - reference[key][0])
                        / np.sqrt(nuts[key][1] ** 2 + reference[key][1] ** 2)
                        for key in reference])  # fmt: skip
    assert z.size == 13
    assert np.max(np.abs(z)) < Z_MAX, z


def _pymc_point(q, k, n_rounds, learnt):
    """The package's coordinates ``q`` as PyMC's value variables (the same zero-sum basis)."""
    m = k - 1
    point = {"eta_init_zerosum__": q[:m]}
    if n_rounds > 1:
        point["innovation_zerosum__"] = q[m : m * n_rounds].reshape(n_rounds - 1, m)
    if learnt:
        point["sigma_log__"] = q[-1]
    return point


@pytest.mark.parametrize(
    ("mech", "n_rounds", "prior"),
    [
        (bayesldp.GRR(4, 1.0), 3, RandomWalkPrior()),
        (bayesldp.OUE(5, 0.5), 2, RandomWalkPrior(step_scale=0.2, initial_sd=1.0)),
        (bayesldp.GRR(3, 2.0), 3, RandomWalkPrior(step=0.3)),
        (bayesldp.OUE(4, 1.0), 1, RandomWalkPrior()),
    ],
)  # fmt: skip
def test_compiled_density_is_pymcs_up_to_a_constant(mech, n_rounds, prior):
    """The package's compiled log-density (method="hmc") against PyMC's for the same model
    (method="nuts", :func:`build_rounds_model`) at 6 random points: the log-densities differ by
    one constant (1e-9) and the gradients agree (1e-9 relative), short rounds padded."""
    from bayesldp.bayes.hmc.walk import _WalkTarget

    rng = np.random.default_rng(7)
    tallies = _rounds(mech, rng.dirichlet(np.ones(mech.k), size=n_rounds), 150, seed=8)
    if n_rounds > 1:
        tallies[1] = tallies[1] + _rounds(mech, [np.ones(mech.k) / mech.k], 30, seed=9)[0]
    target = _WalkTarget(tallies, prior)
    model = build_rounds_model(tallies, prior)
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    names = [v.name for v in model.value_vars]
    q = rng.normal(0.0, 1.0, size=(6, target.d))
    ours, grad = target(q)
    points = [_pymc_point(point, mech.k, n_rounds, prior.step is None) for point in q]
    theirs = np.array([logp(point) for point in points])
    np.testing.assert_allclose(ours - theirs, (ours - theirs)[0], rtol=0, atol=1e-9)
    for point, ours_grad in zip(points, grad, strict=True):
        sizes = {name: np.size(point[name]) for name in names}
        parts = np.split(dlogp(point), np.cumsum([sizes[name] for name in names])[:-1])
        pymc_grad = dict(zip(names, parts, strict=True))
        order = [n for n in ("eta_init_zerosum__", "innovation_zerosum__", "sigma_log__")
                 if n in pymc_grad]  # fmt: skip
        expected = np.concatenate([pymc_grad[name] for name in order])
        np.testing.assert_allclose(ours_grad, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("form", ["onehot", "support", "complement", "dense"])
def test_block_tally_is_the_rounds_likelihoods(form):
    """The block tally's log-likelihood at Theta = (theta_1, ..., theta_T) / T minus the rounds'
    own at theta_t is one constant over 8 random draws: GRR (one column a row), OUE (support),
    a support form whose level off the support is the higher one, and RRRR (dense rows)."""
    from bayesldp.bayes.hmc.walk import block_tally
    from bayesldp.tally import Tally

    rng = np.random.default_rng(4)
    if form == "complement":
        support = rng.random((5, 4)) < 0.5
        support[:, 0] = True
        tallies = [Tally(rng.integers(1, 9, 5), support=support[rng.permutation(5)],
                         levels=(0.8, 0.2), stat=np.zeros(4), family="x")
                   for _ in range(3)]  # fmt: skip
    else:
        mech = {"onehot": bayesldp.GRR(4, 1.0), "support": bayesldp.OUE(4, 1.0),
                "dense": bayesldp.RRRR(4, 1.0, subset=(0, 1))}[form]  # fmt: skip
        tallies = _rounds(mech, rng.dirichlet(np.ones(4), size=3), 80, seed=5)
    block = block_tally(tallies)
    assert block.k == 12 and block.is_support_form == (form != "dense")
    gaps = []
    for thetas in rng.dirichlet(np.ones(4), size=(8, 3)):
        own = sum(tally.loglik(theta) for tally, theta in zip(tallies, thetas, strict=True))
        gaps.append(block.loglik(thetas.ravel() / 3) - own)
    np.testing.assert_allclose(gaps, gaps[0], rtol=0, atol=1e-9)


def test_own_sampler_agrees_with_pymcs():
    """K = 6, T = 4, OUE eps = 1, 500 reports a round (the third 300): the posterior means and
    sds of theta_t and sigma of the package's sampler against PyMC's, each with its ESS-based
    Monte Carlo error (z-scores; sd errors by the delta method on the second moment)."""
    mech = bayesldp.OUE(6, 1.0)
    rng = np.random.default_rng(21)
    base = rng.dirichlet(np.ones(6))
    thetas = [base, base, np.roll(base, 1), np.roll(base, 1)]
    tallies = _rounds(mech, thetas, 500, seed=22)
    tallies[2] = _rounds(mech, [thetas[2]], 300, seed=23)[0]
    fits = {method: fit_rounds(tallies, 1000, tune=1000, chains=2, random_seed=6,
                               progressbar=False, cores=1, method=method)
            for method in ("hmc", "nuts")}  # fmt: skip
    z = []
    for name in ("theta", "sigma"):
        moments = []
        for idata in fits.values():
            draws = idata.posterior[name]
            mean, se = draws.mean(("chain", "draw")).values, _mcse(draws)
            sq = draws**2
            moments.append((mean, se, sq.mean(("chain", "draw")).values, _mcse(sq)))
        (m1, s1, q1, e1), (m2, s2, q2, e2) = moments
        z.append(np.ravel((m1 - m2) / np.sqrt(s1**2 + s2**2)))
        z.append(np.ravel((q1 - q2) / np.sqrt(e1**2 + e2**2)))
    z = np.concatenate(z)
    assert z.size == 2 * (4 * 6 + 1)
    assert np.max(np.abs(z)) < Z_MAX, z


def test_pymcs_route_is_quiet_without_a_progress_bar(capfd):
    """method="nuts" with progressbar=False prints nothing (PyMC's "Initializing NUTS" and
    "Sequential sampling" lines are log records at INFO)."""
    mech = bayesldp.GRR(3, 1.0)
    tallies = _rounds(mech, [[0.5, 0.3, 0.2]] * 2, 50, seed=1)
    fit_rounds(tallies, 20, tune=20, chains=1, random_seed=0, progressbar=False, cores=1,
               method="nuts", compute_convergence_checks=False)  # fmt: skip
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)


def test_step_near_zero_pools_the_rounds():
    """sigma fixed at 1e-4: every round's posterior is the pooled tally's (one round, same
    prior on eta_1), although the rounds' populations differ."""
    mech = bayesldp.GRR(4, 1.0)
    thetas = [[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]]
    tallies = _rounds(mech, thetas, 300, seed=11)
    fixed = RandomWalkPrior(step=1e-4)
    rounds = fit_rounds(tallies, 1000, chains=2, prior=fixed, random_seed=1, progressbar=False,
                        cores=1)  # fmt: skip
    pooled = fit_rounds([sum(tallies)], 1000, chains=2, prior=fixed, random_seed=2,
                        progressbar=False, cores=1)  # fmt: skip
    ref = pooled.posterior["theta"].isel(round=0)
    ref_mean, ref_se = ref.mean(("chain", "draw")).values, _mcse(ref)
    separate = [bayesldp.estimate(t, "mle").frequencies for t in tallies]
    for t in range(3):
        theta = rounds.posterior["theta"].isel(round=t)
        mean, se = theta.mean(("chain", "draw")).values, _mcse(theta)
        z = (mean - ref_mean) / np.sqrt(se**2 + ref_se**2)
        assert np.max(np.abs(z)) < Z_MAX, (t, z)
        # the rounds' own estimates are far from the pooled one: the test can tell
        assert np.max(np.abs(separate[t] - ref_mean)) > 0.15
    sd = ref.std(("chain", "draw")).values
    round_sd = rounds.posterior["theta"].std(("chain", "draw")).values
    np.testing.assert_allclose(round_sd, np.broadcast_to(sd, round_sd.shape), rtol=0.15)


def test_stacked_rows_are_each_rounds_likelihood():
    """sum(counts log(rows @ theta_t)) differs from tally.loglik(theta_t) by a constant."""
    mech = bayesldp.OUE(5, 1.0)
    tallies = _rounds(mech, [[0.2] * 5, [0.5, 0.2, 0.1, 0.1, 0.1]], 60, seed=0)
    rows, counts = stacked_rows(tallies)
    assert rows.shape[:2] == counts.shape == (2, max(t.n_rows for t in tallies))
    rng = np.random.default_rng(1)
    for t, tally in enumerate(tallies):
        gaps = []
        for theta in rng.dirichlet(np.ones(5), size=4):
            stacked = counts[t] @ np.log(rows[t] @ theta)
            gaps.append(stacked - tally.loglik(theta))
        np.testing.assert_allclose(gaps, gaps[0], rtol=0, atol=1e-9)
    assert counts[0].sum() == tallies[0].n and counts[1].sum() == tallies[1].n


def test_output_layout_summaries_and_plot():
    mech = bayesldp.LGRR(3, 1.0)
    tallies = _rounds(mech, [[0.5, 0.3, 0.2]] * 3, 100, seed=2)
    tallies[1] = tallies[1] + _rounds(mech, [[0.5, 0.3, 0.2]], 50, seed=9)[0]  # n differs
    idata = fit_rounds(tallies, 50, tune=50, chains=2, random_seed=0, progressbar=False,
                       cores=1, labels=["a", "b", "c"], round_labels=["mon", "tue", "wed"],
                       compute_convergence_checks=False)  # fmt: skip
    post = idata.posterior
    assert post["theta"].dims == ("chain", "draw", "round", "category")
    assert list(post["round"].values) == ["mon", "tue", "wed"]
    assert list(post["category"].values) == ["a", "b", "c"]
    assert post["sigma"].dims == ("chain", "draw")
    np.testing.assert_allclose(post["theta"].sum("category"), 1.0, atol=1e-12)
    assert list(idata.constant_data["n_reports"].values) == [100, 150, 100]
    for key in ("r_hat_max", "ess_bulk_min", "divergences", "seconds", "prior"):
        assert key in post.attrs
    summary = summarize_rounds(idata)
    assert summary["mean"].dims == ("round", "category")
    assert np.all(summary["lower"] <= summary["mean"]) and np.all(
        summary["mean"] <= summary["upper"]
    )
    assert az.summary(idata, var_names=["theta"]).shape[0] == 9
    from bayesldp.plotting import plot_rounds

    truth = np.tile([0.5, 0.3, 0.2], (3, 1))
    axes = plot_rounds(idata, truth=truth, estimates={"MLE": truth})
    assert axes.size == 3


def test_model_variables():
    mech = bayesldp.GRR(3, 1.0)
    one = build_rounds_model([mech.tally_from_report_counts([3, 2, 1])])
    assert "innovation" not in one.named_vars and "sigma" in one.named_vars
    fixed = build_rounds_model([mech.tally_from_report_counts([3, 2, 1])] * 2,
                               RandomWalkPrior(step=0.1))  # fmt: skip
    assert "sigma" not in fixed.named_vars and "innovation" in fixed.named_vars


# ------------------------------------------------------------------------------- bad input
def _grr(k=3, eps=1.0, counts=(3, 2, 1, 0, 0)):
    return bayesldp.GRR(k, eps).tally_from_report_counts(list(counts)[:k])


@pytest.mark.parametrize(
    ("tallies", "error", "match"),
    [
        ([], InvalidInputError, r"tallies: an empty sequence"),
        ([_grr(), None], InvalidInputError, r"tallies\[1\]: None"),
        ([_grr(), _grr(k=4)], InvalidInputError, r"tallies\[1\]: K = 4 categories, round 0"),
        ([_grr(), _grr(eps=2.0)], InvalidInputError,
         r"tallies\[1\]: mechanism .*same mechanism"),
        ([_grr(), bayesldp.OUE(3, 1.0).tally(np.eye(3, dtype=bool))], InvalidInputError,
         r"tallies\[1\]: mechanism OUE"),
        (_grr(), InvalidTypeError, r"a single Tally"),
        ([_grr(), "x"], InvalidTypeError, r"tallies\[1\]: expected a bayesldp.Tally"),
    ],
)  # fmt: skip
def test_bad_rounds_are_one_line_value_errors(tallies, error, match):
    with pytest.raises(error, match=match) as info:
        check_rounds(tallies)
    assert "\n" not in str(info.value)
    if error is InvalidInputError:
        assert isinstance(info.value, ValueError)
    with pytest.raises(error, match=match):
        fit_rounds(tallies, 10)


def test_bad_method_and_options():
    tallies = [_grr(), _grr()]
    with pytest.raises(InvalidInputError, match=r"method: .*'hmc', 'nuts'"):
        fit_rounds(tallies, 10, method="mcmc")
    with pytest.raises(InvalidInputError, match=r"'nuts_sampler' is not an option of "
                       r"fit_rounds' method 'hmc'.*method='nuts'"):  # fmt: skip
        fit_rounds(tallies, 10, nuts_sampler="nutpie")
    with pytest.raises(InvalidInputError, match="metric"):
        fit_rounds(tallies, 10, metric="full")


def test_bad_prior_and_labels():
    with pytest.raises(InvalidInputError, match="step_scale"):
        RandomWalkPrior(step_scale=0.0)
    with pytest.raises(InvalidTypeError, match="prior: expected a RandomWalkPrior"):
        fit_rounds([_grr()], 10, prior=1.0)
    with pytest.raises(InvalidInputError, match="round_labels: expected 2 distinct"):
        build_rounds_model([_grr(), _grr()], round_labels=["a"])
    assert RandomWalkPrior(0.2) == RandomWalkPrior(step_scale=0.2)


def test_panel_of_users_is_a_panel_warning():
    """Rounds that share users (a panel): fit_rounds' random walk assumes independent users
    per round and its intervals under-cover there (0.765 measured), so given the rounds' user
    ids it warns, once, saying so and what to do instead; new users each round do not warn
    (the test suite turns any warning into an error)."""
    from bayesldp.bayes.dynamic import panel_message, repeated_users
    from bayesldp.errors import PanelWarning

    mech = bayesldp.LGRR(3, 1.0)
    tallies = _rounds(mech, [[0.5, 0.3, 0.2]] * 2, 40, seed=3)
    options = {"draws": 10, "tune": 10, "chains": 1, "random_seed": 0, "progressbar": False,
               "cores": 1, "compute_convergence_checks": False}  # fmt: skip
    panel = [np.arange(40), np.arange(40)]
    with pytest.warns(PanelWarning) as caught:
        fit_rounds(tallies, users=panel, **options)
    panels = [w for w in caught if w.category is PanelWarning]
    assert len(panels) == 1, [str(w.message) for w in caught]
    text = str(panels[0].message)
    assert text.startswith("fit_rounds: 40 of 40 users report in more than one round (a panel)")
    assert "assumes independent users per round" in text and "0.765" in text
    assert "each round's own fit" in text and "\n" not in text
    fit_rounds(tallies, users=[np.arange(40), np.arange(40, 80)], **options)  # new users
    assert repeated_users([[1, 2, 2], [3, 2], [4]]) == (1, 4)
    assert panel_message(1, 4).startswith("1 of 4 users")
    with pytest.raises(InvalidInputError, match=r"^users: expected one array of user ids per "
                       r"round \(2\), got 1$"):  # fmt: skip
        fit_rounds(tallies, users=[np.arange(40)], **options)
