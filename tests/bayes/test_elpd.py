"""PSIS-LOO per report (bayesldp.loo): brute-force leave-one-out, per-report ArviZ, comparison."""

import json

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import fit, loo, loo_compare
from bayesldp.bayes.fit import import_arviz

az = import_arviz()


@pytest.fixture(scope="module")
def grr_tally():
    mech = bayesldp.GRR(3, 1.0)
    return mech.tally(mech.perturb(np.array([0] * 12 + [1] * 5 + [2] * 3), rng=1))


@pytest.fixture(scope="module")
def grr_fit(grr_tally):
    return fit(grr_tally, prior=0.5, method="exact", draws=1000, chains=4, random_seed=11)


def _exact_loo(tally, prior):
    """log p(y_u | tally minus one report of row u), from exact refits (the predictive of one
    report is linear in theta: L_u . E[theta | tally minus one report])."""
    mech = tally.mechanism
    out = []
    for u in range(tally.n_rows):
        counts = tally.counts.copy()
        counts[u] -= 1
        held_in = bayesldp.Tally(
            counts, support=tally.support, levels=tally.levels, stat=tally.stat, mechanism=mech
        )
        refit = fit(held_in, prior=prior, method="exact", draws=1, chains=1, random_seed=0)
        mean = np.array(json.loads(refit.posterior.attrs["backend_info"])["exact_mean"])
        out.append(np.log(tally.rows[u] @ mean))
    return np.array(out)


def test_matches_brute_force_leave_one_report_out(grr_fit, grr_tally):
    exact = _exact_loo(grr_tally, 0.5)
    result = loo(grr_fit)
    assert result.n_data_points == grr_tally.n == 20 and result.n_samples == 4000
    assert result.loo_i.dims == ("report",) and result.pareto_k.shape == (grr_tally.n,)
    assert result.loo_row.dims == ("row",)
    # Monte Carlo error of elpd_u with 4000 exact draws is about 0.005 (20 seeds)
    np.testing.assert_allclose(result.loo_row.values, exact, atol=0.03)
    np.testing.assert_array_equal(result.loo_i.values, np.repeat(result.loo_row, grr_tally.counts))
    assert result.elpd_loo == pytest.approx(float(grr_tally.counts @ exact), abs=0.1)
    assert np.all(result.pareto_k.values < 0.5) and not result.warning
    assert 0 < result.p_loo < grr_tally.k
    np.testing.assert_array_equal(result.counts, grr_tally.counts)


def test_equals_arviz_loo_on_the_reports_one_by_one(grr_fit, grr_tally):
    """A row with count c_u is c_u identical reports: arviz.loo on the expanded per-report
    log-likelihood gives the same elpd_loo, se and p_loo."""
    theta = grr_fit.posterior["theta"].values
    per_row = np.log(theta @ grr_tally.rows.T)
    per_report = np.repeat(per_row, grr_tally.counts, axis=-1)
    expanded = az.from_dict(
        posterior={"theta": theta}, log_likelihood={"y": per_report}, dims={"theta": ["category"]}
    )
    reference = az.loo(expanded, pointwise=True)
    ours = loo(grr_fit)
    for key in ("elpd_loo", "se", "p_loo"):
        assert ours[key] == pytest.approx(reference[key], rel=1e-10), key
    assert ours.n_data_points == reference.n_data_points
    np.testing.assert_allclose(ours.loo_i.values, reference.loo_i.values, rtol=1e-10)
    np.testing.assert_allclose(ours.pareto_k.values, reference.pareto_k.values, rtol=1e-10)
    np.testing.assert_allclose(ours.se, np.sqrt(grr_tally.n * np.var(ours.loo_i.values)))


# ArviZ 0.23's compare sorts with pandas' deprecated inplace=True (pandas >= 3.1 warns)
@pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")
def test_arviz_loo_waic_and_compare_count_reports():
    """fit's log_likelihood group holds one value per report, so arviz.loo and waic agree with
    bayesldp.loo (about K - 1 effective parameters, not one per report), and arviz.compare of
    two bayesldp.loo results agrees with loo_compare to 1e-6."""
    mech = bayesldp.GRR(7, 1.0)
    tally = mech.simulate_tally(np.array([400, 250, 150, 100, 50, 30, 20]), rng=3)
    kwargs = {"method": "hmc", "chains": 2, "compute_convergence_checks": False}
    idata = fit(tally, 1000, random_seed=1, idata_kwargs={"log_likelihood": True}, **kwargs)
    assert idata.log_likelihood["counts"].dims == ("chain", "draw", "report")
    ours, theirs = loo(idata), az.loo(idata)
    assert theirs.n_data_points == ours.n_data_points == tally.n == 1_000
    assert 1 < ours.p_loo < tally.k  # about K - 1 free frequencies
    for key in ("elpd_loo", "se", "p_loo"):
        assert theirs[key] == pytest.approx(ours[key], rel=1e-9), key
    waic = az.waic(idata)
    assert waic.elpd_waic == pytest.approx(ours.elpd_loo, abs=0.05) and waic.p_waic < tally.k
    other = loo(fit(tally, 1000, prior=50.0, random_seed=2, **kwargs))
    table = az.compare({"adaptive": ours, "dir50": other})
    paired = loo_compare(ours, other)
    worse = table.index[1]
    sign = 1.0 if worse == "dir50" else -1.0
    assert table.loc[worse, "elpd_diff"] == pytest.approx(sign * paired["elpd_diff"], abs=1e-6)
    assert table.loc[worse, "dse"] == pytest.approx(paired["se"], abs=1e-6)


def test_large_log_likelihood_group_warns_once_and_loo_needs_none(grr_tally, monkeypatch):
    """A log_likelihood group above the stated size warns once, in one line, before sampling,
    with its size and the route without it; bayesldp.loo of the same fit without the group
    equals arviz.loo with it."""
    from bayesldp.bayes import inference_data
    from bayesldp.errors import LargeOutputWarning

    kwargs = {"method": "exact", "draws": 400, "chains": 2, "random_seed": 7}
    lean = fit(grr_tally, **kwargs)  # no group, no warning (warnings are errors in the tests)
    nbytes = 2 * 400 * grr_tally.n * 8
    assert nbytes == 128_000
    monkeypatch.setattr(inference_data, "LOG_LIKELIHOOD_WARN_BYTES", nbytes - 1)
    with pytest.warns(LargeOutputWarning) as record:
        full = fit(grr_tally, idata_kwargs={"log_likelihood": True}, **kwargs)
    assert len(record) == 1 and record[0].filename == __file__
    message = str(record[0].message)
    assert "\n" not in message
    assert "2 x 400 draws x 20 reports x 8 bytes = 0.000128 GB" in message
    assert "bayesldp.loo(idata)" in message
    monkeypatch.setattr(inference_data, "LOG_LIKELIHOOD_WARN_BYTES", nbytes)
    fit(grr_tally, idata_kwargs={"log_likelihood": True}, **kwargs)  # at the size: no warning
    assert "log_likelihood" not in lean.groups()
    theirs, ours = az.loo(full), loo(lean)
    assert theirs.n_data_points == ours.n_data_points == grr_tally.n
    for key in ("elpd_loo", "se", "p_loo"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-6), key


def test_rebuilt_tally_dense_rows_and_float32(grr_fit, grr_tally):
    assert loo(grr_fit, grr_tally).elpd_loo == loo(grr_fit).elpd_loo
    rrrr = bayesldp.RRRR(4, 1.0, subset=[1, 3])
    tally = rrrr.simulate_tally(np.array([30, 20, 10, 5]), rng=2)
    assert not tally.is_support_form
    idata = fit(tally, method="exact", draws=300, chains=2, random_seed=2)
    assert loo(idata).elpd_loo == pytest.approx(loo(idata, tally).elpd_loo, rel=1e-12)
    small = fit(
        tally, method="exact", draws=300, chains=2, random_seed=2, idata_kwargs={"dtype": "float32"}
    )
    assert loo(small).elpd_loo == pytest.approx(loo(idata).elpd_loo, rel=1e-5)
    assert bayesldp.loo is loo and bayesldp.loo_compare is loo_compare


def test_rows_whose_smoothing_fails_keep_plain_importance_weights(grr_fit, grr_tally,
                                                                  monkeypatch):  # fmt: skip
    """Where ArviZ's Pareto smoothing returns NaN weights for a row (seen on an adaptive prior's
    fit, K = 30 GRR reports at eps 0.5, n = 1,000: 195 of 2,000 draws put a category within
    1e-12 of its floor probability, so the largest ratios nearly tie), that row keeps the plain
    self-normalised importance weights, ``elpd_u = -log mean_s(1 / p_us)``, and the elpd stays
    finite; the other rows are unchanged."""
    psislw = az.psislw

    def failing(log_ratio, reff):
        log_w, k = psislw(log_ratio, reff)
        log_w[1] = np.nan
        return log_w, k

    before = loo(grr_fit, grr_tally)
    monkeypatch.setattr(az, "psislw", failing)
    after = loo(grr_fit, grr_tally)
    assert np.isfinite(after.elpd_loo)
    log_p = np.log(grr_tally.rows @ grr_fit.posterior["theta"].values.reshape(-1, 3).T)
    plain = -np.log(np.mean(np.exp(-log_p[1])))
    rows = after.loo_row.values
    assert rows[1] == pytest.approx(plain, rel=1e-12)
    np.testing.assert_array_equal(np.delete(rows, 1), np.delete(before.loo_row.values, 1))


def test_compare_priors(grr_tally):
    kwargs = {"method": "exact", "draws": 1000, "chains": 4, "random_seed": 5}
    a = loo(fit(grr_tally, prior=0.5, **kwargs))
    b = loo(fit(grr_tally, prior=50.0, **kwargs))
    diff = loo_compare(a, b)
    assert diff["elpd_diff"] == pytest.approx(a.elpd_loo - b.elpd_loo)
    d = a.loo_i.values - b.loo_i.values
    assert diff["se"] == pytest.approx(np.sqrt(d.size * np.var(d)))
    assert diff["n_data_points"] == grr_tally.n
    exact = grr_tally.counts @ (_exact_loo(grr_tally, 0.5) - _exact_loo(grr_tally, 50.0))
    assert diff["elpd_diff"] == pytest.approx(float(exact), abs=0.1)


def test_errors(grr_fit, grr_tally):
    with pytest.raises(TypeError, match=r"idata: expected the arviz\.InferenceData"):
        loo(grr_fit.posterior)
    other = bayesldp.GRR(3, 1.0).tally(np.array([0, 1, 1, 2]))
    with pytest.raises(ValueError, match="tally: its counts differ"):
        loo(grr_fit, other)
    with pytest.raises(TypeError, match=r"tally: expected a bayesldp\.Tally"):
        loo(grr_fit, tally=np.ones(3))
    with pytest.raises(ValueError, match="reff: must be finite and > 0"):
        loo(grr_fit, reff=0.0)
    bare = az.InferenceData(posterior=grr_fit.posterior)
    with pytest.raises(ValueError, match="no observed_data group"):
        loo(bare)
    assert loo(bare, grr_tally).elpd_loo == loo(grr_fit).elpd_loo
    no_theta = az.from_dict(posterior={"mu": np.zeros((1, 3))})
    with pytest.raises(ValueError, match="no posterior group with 'theta'"):
        loo(no_theta)
    with pytest.raises(TypeError, match=r"first: expected the result of bayesldp\.loo"):
        loo_compare(az.loo(az.load_arviz_data("centered_eight")), loo(grr_fit))
    other_fit = fit(other, method="exact", draws=100, chains=2, random_seed=0)
    with pytest.raises(ValueError, match="not on the same tally"):
        loo_compare(loo(grr_fit), loo(other_fit))
