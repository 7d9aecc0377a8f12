"""The default estimator: the uniform answer unless a test rejects uniformity, else Norm-Sub."""

import math

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.estimators import estimate
from bayesldp.estimators.oracle import unbiased
from bayesldp.estimators.postprocess import norm_sub, pretest, pretest_statistic


def _hand_tally():
    # GRR(3, ln 3): p = 3/5, q = 1/5; reports [6, 3, 1] -> f = [1, 0.25, -0.25] and plug-in
    # variances 0.1 + 0.05 clip(f, 0, 1) = [0.15, 0.1125, 0.1]
    return bayesldp.GRR(3, math.log(3)).tally_from_report_counts(np.array([6, 3, 1]))


def test_statistic_by_hand():
    f, sd = unbiased(_hand_tally())
    dist = (1 - 1 / 3) ** 2 + (0.25 - 1 / 3) ** 2 + (-0.25 - 1 / 3) ** 2  # 0.791666...
    assert pretest_statistic(f, sd) == pytest.approx(dist / 0.3625, rel=1e-12)


def test_decision_by_hand():
    # (K - 1) T = 2 * 2.18391 = 4.3678; chi2 with 2 degrees of freedom: quantile -2 ln(alpha)
    tally = _hand_tally()
    assert -2 * math.log(1e-4) > 4.37  # the default level keeps uniformity
    np.testing.assert_array_equal(estimate(tally).frequencies, np.full(3, 1 / 3))
    assert -2 * math.log(0.2) < 4.36  # alpha = 0.2 rejects it: Norm-Sub, by hand [0.875, 0.125, 0]
    est = estimate(tally, "pretest", alpha=0.2)
    np.testing.assert_allclose(est.frequencies, [0.875, 0.125, 0.0], atol=1e-15)
    assert est.method == "pretest" and est.on_simplex and est.std_errors is None


def test_strong_signal_is_norm_sub_exactly():
    mech = bayesldp.GRR(8, 4.0)
    counts = np.array([4000, 2000, 1500, 1000, 800, 400, 200, 100])
    for seed in range(5):
        tally = mech.simulate_tally(counts, rng=seed)
        f, sd = unbiased(tally)
        assert pretest_statistic(f, sd) > 10
        result = estimate(tally)
        np.testing.assert_array_equal(result.frequencies, estimate(tally, "norm_sub").frequencies)
        assert result.details["answer"] == "norm_sub"
        assert result.details["statistic"] == pytest.approx(7 * pretest_statistic(f, sd))
        assert result.details["statistic"] > result.details["threshold"]


def test_no_signal_is_uniform_exactly():
    mech = bayesldp.OUE(64, 0.25)
    tally = mech.simulate_tally(np.full(64, 100), rng=3)
    result = estimate(tally)
    np.testing.assert_array_equal(result.frequencies, np.full(64, 1 / 64))
    assert result.details["answer"] == "uniform"
    assert result.details["threshold"] == pytest.approx(stats.chi2.ppf(1 - 1e-4, 63))
    assert result.details["statistic"] < result.details["threshold"]


@pytest.mark.parametrize(
    "mech",
    [bayesldp.GRR(16, 1.0), bayesldp.OUE(16, 0.5), bayesldp.OLH(16, 2.0),
     bayesldp.HadamardResponse(16, 1.0), bayesldp.SubsetSelection(16, 1.0)],
    ids=repr,
)  # fmt: skip
def test_output_on_the_simplex(mech):
    rng = np.random.default_rng(7)
    for _ in range(5):
        counts = rng.multinomial(2000, rng.dirichlet(np.full(16, 0.3)))
        est = estimate(mech.simulate_tally(counts, rng=rng))
        assert est.on_simplex and np.all(est.frequencies >= 0)
        assert est.frequencies.sum() == pytest.approx(1.0, abs=1e-12)


def test_huge_epsilon_returns_the_users_frequencies():
    counts = np.array([40, 30, 20, 10])
    tally = bayesldp.GRR(4, 700.0).simulate_tally(counts, rng=1)
    np.testing.assert_allclose(estimate(tally).frequencies, counts / 100, atol=1e-15)


def test_vanishing_variance():
    f = np.array([0.5, 0.5, 0.0, 0.0])
    assert pretest_statistic(f, np.zeros(4)) == np.inf
    np.testing.assert_array_equal(pretest(f, np.zeros(4)), norm_sub(f))
    assert pretest_statistic(np.full(4, 0.25), np.zeros(4)) == 0.0
    np.testing.assert_array_equal(pretest(np.full(4, 0.25), np.zeros(4)), np.full(4, 0.25))


def test_rows_are_tested_one_by_one():
    f = np.array([[0.3, 0.2, 0.25, 0.25], [0.9, 0.1, 0.0, 0.0]])
    sd = np.full(4, 0.1)  # trace 0.04: T = 0.005 / 0.04 in row 0, 0.57 / 0.04 in row 1
    np.testing.assert_allclose(pretest_statistic(f, sd), [0.125, 14.25], rtol=1e-12)
    out = pretest(f, sd)  # 3 T against chi2_3(1 - 1e-4) = 21.108
    np.testing.assert_array_equal(out[0], np.full(4, 0.25))
    np.testing.assert_array_equal(out[1], norm_sub(f[1]))


def test_one_category():
    np.testing.assert_array_equal(pretest(np.array([0.7]), np.array([0.1])), [1.0])


def test_bad_input_is_refused_with_names():
    tally = _hand_tally()
    for alpha in (0, 1, -0.1, 1.5, True, "0.01"):
        with pytest.raises(InvalidInputError, match="alpha"):
            estimate(tally, "pretest", alpha=alpha)
    with pytest.raises(InvalidInputError, match="options: method 'pretest' does not take beta"):
        estimate(tally, beta=1)
    with pytest.raises(InvalidInputError, match="sd"):
        pretest(np.array([0.5, 0.5]), None)
    with pytest.raises(InvalidInputError, match="sd"):
        pretest(np.array([0.5, 0.5]), np.array([0.1, -0.1]))
    a = bayesldp.RRRR(5, 1.0, subset=[0])
    b = bayesldp.RRRR(5, 1.0, subset=[1, 2])
    mixed = a.tally(a.perturb(np.arange(50) % 5, rng=0)) + b.tally(
        b.perturb(np.arange(50) % 5, rng=1)
    )
    with pytest.raises(NotSupportedError, match="mle"):
        estimate(mixed)


def test_old_default_still_by_name():
    tally = _hand_tally()
    assert estimate(tally, "norm_sub").method == "norm_sub"
    np.testing.assert_allclose(estimate(tally, "norm_sub").frequencies, [0.875, 0.125, 0.0])


def test_the_command_line_says_when_it_answered_uniform():
    from bayesldp.workflows.estimate_tables import frequentist_estimate

    weak = bayesldp.OUE(64, 0.25).simulate_tally(np.full(64, 100), rng=3)
    _, interval, kind = frequentist_estimate("pretest", weak)
    assert interval is None
    assert kind.startswith("pretest: the uniform distribution (the reports do not reject it")
    strong = bayesldp.GRR(8, 4.0).simulate_tally(np.full(8, 500) * np.arange(1, 9), rng=0)
    assert frequentist_estimate("pretest", strong)[2] == "pretest"
