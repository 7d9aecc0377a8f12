"""Numerical mechanisms (SW, PM, Laplace, Gaussian): privacy from the density, exact channels,
perturbation against the density, estimation end to end, bad input."""

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

import bayesldp
from bayesldp.errors import (
    ClippingWarning,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms.numerical.gaussian import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
)
from bayesldp.mechanisms.numerical.square_wave import square_wave_b
from tests.stats_helpers import assert_matches_distribution

NAMES = ["SquareWave", "Piecewise", "LaplaceNumeric", "Gaussian"]
PURE = ["SquareWave", "Piecewise", "LaplaceNumeric"]
EPSILONS = [0.05, 0.5, 1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", PURE)
def test_realised_epsilon_from_the_density_is_the_budget(name, epsilon):
    mech = make_mechanism(name, 16, epsilon, lo=-3.0, hi=5.0)
    assert mech.realised_epsilon() == pytest.approx(epsilon, rel=1e-9, abs=0)
    # the discretised channel never leaks more than the density
    assert mech.channel_epsilon() <= epsilon * (1 + 1e-9)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_gaussian_delta_from_the_density_matches_the_analytic_one(epsilon):
    """Analytic Gaussian (Balle & Wang 2018): delta integrated from the density within 1e-9 of
    the closed form, which equals the requested delta; the realised epsilon is the budget."""
    mech = bayesldp.Gaussian(8, epsilon, lo=0.0, hi=2.0, delta=1e-6)
    analytic = analytic_gaussian_delta(mech.sigma, epsilon, 2.0)
    assert analytic == pytest.approx(1e-6, rel=1e-9)
    assert abs(mech.realised_delta() - analytic) < 1e-9
    assert abs(mech.realised_delta() - analytic) < 1e-12  # measured: about 1e-19
    assert mech.realised_epsilon() == pytest.approx(epsilon, rel=1e-9)
    classic = math.sqrt(2 * math.log(1.25 / 1e-6)) * 2.0 / epsilon
    if epsilon < 1:  # the classic calibration is valid (and looser) there
        assert mech.sigma < classic
        assert analytic_gaussian_delta(classic, epsilon, 2.0) < 1e-6


def test_gaussian_sigma_solves_the_profile():
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert analytic_gaussian_delta(sigma, 1.0, 1.0) == pytest.approx(1e-5, rel=1e-10)
    assert analytic_gaussian_delta(sigma * 0.999, 1.0, 1.0) > 1e-5


def test_square_wave_constants():
    """Li et al. 2020: b at eps = 1, p / q = e^eps, and the density integrates to 1."""
    e = math.e
    assert square_wave_b(1.0) == pytest.approx((e - e + 1) / (2 * e * (e - 2)), rel=1e-14)
    for eps in (1e-3, 0.01, 3.0, 30.0):  # the closed form loses digits below
        ee = math.exp(eps)
        closed = (eps * ee - ee + 1) / (2 * ee * (ee - 1 - eps))
        assert square_wave_b(eps) == pytest.approx(closed, rel=1e-8)
    for eps in (1e-8, 1e-6, 9.9e-5):  # the series 1/2 - eps/3 + eps^2/9 takes over
        assert square_wave_b(eps) == pytest.approx(0.5 - eps / 3, rel=1e-8)
    mech = bayesldp.SquareWave(4, 1.0, lo=2.0, hi=4.0)
    assert mech.p / mech.q == pytest.approx(e, rel=1e-14)
    assert mech.output_range == pytest.approx((2 - 2 * mech.b, 4 + 2 * mech.b))
    total, _ = integrate.quad(lambda y: mech.density(y, 2.7), *mech.output_range,
                              points=[2.7 - 2 * mech.b, 2.7 + 2 * mech.b])  # fmt: skip
    assert total == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_channel_rows_sum_to_one_and_match_a_brute_force_integral(name, epsilon):
    mech = make_mechanism(name, 6, epsilon, lo=-1.0, hi=1.0, output_bins=9)
    channel = mech.channel
    assert channel.shape == (6, 9)
    assert np.all(channel > 0)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    edges, out = mech.bin_edges, mech.output_edges
    for i, j in [(0, 0), (0, 4), (2, 3), (5, 8), (3, 1)]:
        cut = 60.0 * getattr(mech, "scale", 1.0)
        lo_y, hi_y = max(out[j], -cut), min(out[j + 1], cut)

        def inner(v, lo_y=lo_y, hi_y=hi_y):
            val, _ = integrate.quad(lambda y: float(mech.density(y, v)), lo_y, hi_y,
                                    points=_breaks(mech, v, lo_y, hi_y), limit=200)  # fmt: skip
            return val

        if hasattr(mech, "window"):  # v where a window edge crosses an output edge
            kinks = [(c - d - mech._alpha) / mech._slope for c in out[j : j + 2]
                     for d in (0.0, mech._w)]  # fmt: skip
        else:
            kinks = [c for c in out[j : j + 2] if np.isfinite(c)]
        kinks = [k for k in kinks if edges[i] < k < edges[i + 1]] or None
        brute, _ = integrate.quad(inner, edges[i], edges[i + 1], points=kinks, limit=200)
        brute /= edges[i + 1] - edges[i]
        assert channel[i, j] == pytest.approx(brute, rel=1e-7, abs=1e-12), (i, j)


def _breaks(mech, v, lo_y, hi_y):
    if hasattr(mech, "window"):
        left, right = mech.window(v)
        pts = [float(left), float(right)]
    else:
        pts = [float(v)]
    return [p for p in pts if lo_y < p < hi_y] or None


@pytest.mark.parametrize("name", NAMES)
def test_perturb_follows_the_density(name):
    """200,000 reports of v = 0.3 binned: chi-square against the density's bin masses."""
    mech = make_mechanism(name, 10, 1.0, lo=0.0, hi=1.0, output_bins=25)
    reports = mech.perturb(np.full(200_000, 0.3), rng=7)
    edges = mech.output_edges
    probs = []
    for j in range(edges.size - 1):
        lo_y, hi_y = max(edges[j], -80.0), min(edges[j + 1], 80.0)
        val, _ = integrate.quad(lambda y: float(mech.density(y, 0.3)), lo_y, hi_y,
                                points=_breaks(mech, 0.3, lo_y, hi_y), limit=200)  # fmt: skip
        probs.append(val)
    probs = np.array(probs)
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    counts = np.bincount(mech.output_bin(reports), minlength=edges.size - 1)
    assert_matches_distribution(counts, probs / probs.sum(), p_min=1e-4)
    if name in ("LaplaceNumeric", "Gaussian"):  # and a KS test of the raw reports
        noise = (stats.laplace(0, mech.scale) if name == "LaplaceNumeric"
                 else stats.norm(0, mech.scale))  # fmt: skip
        assert stats.kstest(reports - 0.3, noise.cdf).pvalue > 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_reports_of_values_uniform_in_a_bin_follow_the_channel_row(name):
    mech = make_mechanism(name, 8, 2.0, lo=10.0, hi=20.0)
    x = np.full(100_000, 2)
    reports = mech.perturb(mech.category_values(x, rng=3), rng=4)
    counts = np.bincount(mech.output_bin(reports), minlength=mech.n_outputs)
    assert_matches_distribution(counts, mech.channel[2], p_min=1e-4)


def test_em_on_square_wave_recovers_a_known_distribution():
    theta = np.array([0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05, 0.0])
    mech = bayesldp.SquareWave(8, 2.0, lo=0.0, hi=100.0)
    counts = (theta * 400_000).astype(int)
    x = np.repeat(np.arange(8), counts)
    tally = mech.tally(mech.perturb(mech.category_values(x, rng=1), rng=2))
    for method in ("em", "mle", "ibu", "em_mr"):
        est = bayesldp.estimate(tally, method).frequencies
        assert 0.5 * np.abs(est - theta).sum() < 0.03, (method, est)
    assert tally.n == counts.sum() and tally.k == 8


@pytest.mark.parametrize("name", NAMES)
def test_oracle_inverts_the_channel(name):
    """``M P^T = I``: the channel-inverse (least-squares) oracle is unbiased; its variance is
    the empirical one of simulated tallies."""
    mech = make_mechanism(name, 4, 2.0)
    np.testing.assert_allclose(mech._oracle_matrix() @ mech.channel.T, np.eye(4), atol=1e-8)
    theta = np.array([0.4, 0.3, 0.2, 0.1])
    rng = np.random.default_rng(0)
    est = np.array([mech.unbiased_frequencies(mech.simulate_tally(
        (theta * 2000).astype(int), rng)) for _ in range(400)])  # fmt: skip
    var = mech.oracle_variance(theta, 2000)
    assert np.all(np.abs(est.mean(axis=0) - theta) < 5 * np.sqrt(var / 400))
    np.testing.assert_allclose(est.var(axis=0, ddof=1) / var, 1.0, atol=0.25)


def test_piecewise_unbiased_mean_and_its_variance():
    mech = bayesldp.Piecewise(4, 1.0, lo=-2.0, hi=6.0)
    values = np.random.default_rng(0).uniform(-2, 6, 500)
    exact_var = mech.report_variance(values).sum() / values.size**2
    rng = np.random.default_rng(1)
    means, var_hats = [], []
    for _ in range(2000):
        m, v = mech.unbiased_mean(mech.perturb(values, rng))
        means.append(m)
        var_hats.append(v)
    means = np.array(means)
    se = math.sqrt(exact_var / means.size)
    assert abs(means.mean() - values.mean()) < 4 * se
    assert means.var(ddof=1) / exact_var == pytest.approx(1.0, abs=0.1)
    assert np.mean(var_hats) / exact_var == pytest.approx(1.0, abs=0.02)  # unbiased estimate
    # one report's variance against the density's second moment
    for v in (-2.0, 1.5, 6.0):
        left, right = mech.window(v)
        m2, _ = integrate.quad(lambda y, v=v: (y - v) ** 2 * float(mech.density(y, v)),
                               *mech.output_range, points=[float(left), float(right)])  # fmt: skip
        assert mech.report_variance([v])[0] == pytest.approx(m2, rel=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_report_mean_line_from_the_density(name):
    mech = make_mechanism(name, 4, 1.5, lo=1.0, hi=3.0)
    a, b = mech.report_mean_line()
    for v in (1.0, 2.2, 3.0):
        lo_y = max(mech.output_range[0], v - 80.0)
        hi_y = min(mech.output_range[1], v + 80.0)
        m1, _ = integrate.quad(lambda y, v=v: y * float(mech.density(y, v)), lo_y, hi_y,
                               points=_breaks(mech, v, lo_y, hi_y), limit=200)  # fmt: skip
        assert a + b * v == pytest.approx(m1, rel=1e-8)


def test_bad_values_are_refused_or_clipped_by_name():
    mech = bayesldp.SquareWave(4, 1.0, lo=0.0, hi=10.0)
    with pytest.raises(InvalidInputError, match=r"2 of 4 values lie outside the domain \[0, 10\]"):
        mech.perturb([1.0, -1.0, 11.0, 5.0], rng=0)
    with pytest.warns(ClippingWarning, match="clipped 2 of 4 values"):
        reports = mech.perturb([1.0, -1.0, 11.0, 5.0], rng=0, clip=True)
    assert reports.shape == (4,)
    with pytest.raises(InvalidInputError, match=r"3 of 5 values are not finite \(2 NaN, 1 inf"):
        mech.perturb([1.0, np.nan, np.inf, np.nan, 2.0], clip=True)
    with pytest.raises(InvalidTypeError, match="expected real numbers"):
        mech.perturb(np.array([True, False]))
    with pytest.raises(InvalidTypeError, match="clip"):
        mech.perturb([1.0], clip="yes")
    with pytest.raises(InvalidInputError, match="1 of 2 reports lie outside the range"):
        mech.tally([1.0, 40.0])
    with pytest.raises(InvalidInputError, match="1 of 2 reports are NaN"):
        mech.tally([1.0, np.nan])
    with pytest.raises(InvalidInputError, match="need lo < hi"):
        bayesldp.SquareWave(4, 1.0, lo=1.0, hi=1.0)
    with pytest.raises(InvalidInputError, match="output_bins: must be >= 3"):
        bayesldp.LaplaceNumeric(4, 1.0, output_bins=2)
    with pytest.raises(InvalidInputError, match="delta"):
        bayesldp.Gaussian(4, 1.0, delta=1.5)


def test_clip_keeps_every_value_and_reports_the_count():
    mech = bayesldp.LaplaceNumeric(4, 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mech.perturb(np.array([0.5, 2.0, 3.0]), rng=0, clip=True)
    assert [str(w.message) for w in caught] == ["x: clipped 2 of 3 values to the domain [0, 1]"]


@pytest.mark.parametrize("name", NAMES)
def test_frames_round_trip_with_aggregated_counts(name):
    import pandas as pd

    mech = make_mechanism(name, 5, 1.0)
    reports = mech.perturb(np.linspace(0, 1, 50), rng=0)
    frame = mech.reports_to_frame(reports)
    assert list(frame.columns) == ["report"]
    assert mech.tally_frame(frame) == mech.tally(reports)
    agg = pd.DataFrame({"report": reports[:3], "count": [2, 0, 5]})
    assert mech.tally_frame(agg) == mech.tally(np.repeat(reports[:3], [2, 0, 5]))


def test_audit_finds_no_violation_and_square_wave_is_tight():
    from bayesldp.audit import audit

    for name in NAMES:
        result = audit(make_mechanism(name, 4, 1.0), 0, 3, trials=20_000, rng=0)
        assert result.passed, result
    tight = audit(bayesldp.SquareWave(4, 1.0), 0, 3, trials=200_000, rng=1)
    assert tight.epsilon_lower_bound > 0.85


def test_parameters_equality_and_names():
    mech = make_mechanism("sw", 8, 1.0, lo=-1.0, hi=1.0)
    assert mech == bayesldp.SquareWave(8, 1.0, lo=-1.0, hi=1.0, output_bins=8)
    assert mech != bayesldp.SquareWave(8, 1.0, lo=-1.0, hi=2.0)
    assert make_mechanism("PM", 8, 1.0).name == "Piecewise"
    assert make_mechanism("laplace", 8, 1.0).name == "LaplaceNumeric"
    assert bayesldp.Gaussian(8, 1.0).params()["delta"] == 1e-5
    np.testing.assert_allclose(mech.bin_centres, np.linspace(-1, 1, 17)[1::2])
    assert mech.bins == 8 and mech.output_edges.size == 9
    lap = bayesldp.LaplaceNumeric(8, 1.0)
    assert lap.output_edges[0] == -np.inf and lap.output_edges[-1] == np.inf


@pytest.mark.parametrize("name", ["SquareWave", "Piecewise", "LaplaceNumeric", "Gaussian"])
def test_point_mass_variances_equal_the_oracle_variance_at_each_point(name):
    """The all-at-once table that Var* (and so em_mr's threshold) reads equals ``k`` calls of
    ``oracle_variance`` at the point masses, to 1e-10 relative."""
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism(name, 12, 1.5)
    table = mech.point_mass_variances()
    for j in range(mech.k):
        expected = mech.oracle_variance(np.eye(mech.k)[j], 1)
        np.testing.assert_allclose(table[j], expected, rtol=1e-10, atol=1e-12 * expected.max())


def test_fewer_output_bins_than_inputs_tally_but_refuse_the_oracle():
    """The EM estimators read such tallies; the channel inverse is not identified."""
    mech = bayesldp.Piecewise(8, 1.0, output_bins=4)
    tally = mech.tally(mech.perturb(np.linspace(0, 1, 500), rng=0))
    assert bayesldp.estimate(tally, "em").frequencies.shape == (8,)
    with pytest.raises(NotSupportedError, match="at least k = 8 output bins"):
        mech.unbiased_frequencies(tally)
