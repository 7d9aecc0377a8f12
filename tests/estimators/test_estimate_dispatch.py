import math

import numpy as np
import pytest

import bayesldp
from bayesldp import Tally
from bayesldp.errors import (
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.estimators import METHODS, Estimate, estimate
from bayesldp.estimators.oracle import oracle

SIMPLEX_METHODS = {
    "pretest",
    "norm_mul",
    "norm_cut",
    "norm_sub",
    "projection",
    "mle",
    "em",
    "ibu",
    "em_mr",
    "ems_mr",
}


def test_public_names():
    assert bayesldp.estimate is estimate
    assert bayesldp.Estimate is Estimate
    assert METHODS == (
        "oracle", "base_pos", "norm", "norm_mul", "norm_cut", "norm_sub", "base_cut",
        "projection", "pretest", "mle", "em", "ibu", "em_mr", "ems", "ems_mr",
    )  # fmt: skip


# ---------------------------------------------------------------- oracle
def test_oracle_hand_example_grr():
    # GRR(3, ln 3): p = 3/5, q = 1/5; reports [6, 3, 1] -> f = ([.6, .3, .1] - .2) / .4
    tally = bayesldp.GRR(3, math.log(3)).tally_from_report_counts(np.array([6, 3, 1]))
    est = oracle(tally)
    np.testing.assert_allclose(est.frequencies, [1.0, 0.25, -0.25], atol=1e-14)
    assert not est.on_simplex  # negative entry kept: the oracle is never clipped
    # Var = q(1-q)/(n(p-q)^2) + f(1-p-q)/(n(p-q)) at f clipped to [0, 1]: 0.1 + 0.05 f
    np.testing.assert_allclose(est.std_errors, np.sqrt([0.15, 0.1125, 0.1]), rtol=1e-12)


def test_mixed_tally_needs_a_likelihood_method():
    a = bayesldp.RRRR(5, 1.0, subset=[0])
    b = bayesldp.RRRR(5, 1.0, subset=[1, 2])
    tally = a.tally(a.perturb(np.arange(50) % 5, rng=0)) + b.tally(
        b.perturb(np.arange(50) % 5, rng=1)
    )
    assert tally.mechanism is None
    for method in ("oracle", "norm_sub", "base_cut", "projection"):
        with pytest.raises(NotSupportedError, match="mle"):
            estimate(tally, method)
    for method in ("mle", "em", "ibu", "em_mr"):
        est = estimate(tally, method)
        assert est.on_simplex and np.all(np.isfinite(est.frequencies))
    np.testing.assert_allclose(
        estimate(tally, "mle").frequencies,
        estimate(tally, "em", tol=1e-13).frequencies,
        atol=1e-5,
    )


# ---------------------------------------------------------------- dispatcher and bad input
def test_unknown_method_lists_valid_names():
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([1, 2, 3]))
    with pytest.raises(InvalidInputError, match="unknown method 'normsub'") as info:
        estimate(tally, "normsub")
    for name in METHODS:
        assert name in str(info.value)
    with pytest.raises(InvalidTypeError, match="method"):
        estimate(tally, 3)


def test_unknown_option_is_named():
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([1, 2, 3]))
    with pytest.raises(InvalidInputError, match="does not take tolerance; valid options: tol"):
        estimate(tally, "em", tolerance=1e-3)
    with pytest.raises(InvalidInputError, match="valid options: none"):
        estimate(tally, "norm_sub", alpha=0.1)
    assert estimate(tally, "base_cut", alpha=0.2).method == "base_cut"


def test_not_a_tally():
    with pytest.raises(InvalidTypeError, match=r"tally: expected a bayesldp\.Tally"):
        estimate(np.array([1, 2, 3]), "mle")


def test_bad_counts_surface_from_tally():
    rows = np.eye(2) * 0.5 + 0.25
    with pytest.raises(InvalidInputError, match="counts must be >= 0"):
        Tally([3, -1], rows=rows, stat=np.zeros(2), family="x")
    with pytest.raises(InvalidInputError, match="whole numbers"):
        Tally([3, 1.5], rows=rows, stat=np.zeros(2), family="x")
    with pytest.raises(InvalidInputError, match="no reports"):
        Tally([0, 0], rows=rows, stat=np.zeros(2), family="x")
    mech = bayesldp.GRR(3, 1.0)
    with pytest.raises(InvalidInputError, match="report_counts"):
        mech.tally_from_report_counts(np.array([1, -2, 3]))


def test_zero_count_rows_are_dropped_and_nothing_is_nan():
    rows = np.array([[0.7, 0.2, 0.1], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    tally = Tally([0, 5, 0], rows=rows, stat=np.zeros(3), family="x")
    for method in ("mle", "em", "ibu", "em_mr"):
        est = estimate(tally, method)
        assert np.all(np.isfinite(est.frequencies)) and est.on_simplex
        if est.std_errors is not None:
            assert np.all(np.isfinite(est.std_errors))
    # only one report row: the MLE puts all mass where that row is largest
    np.testing.assert_allclose(estimate(tally, "mle").frequencies, [0, 0, 1], atol=1e-12)


@pytest.mark.parametrize("eps", [1e-4, 0.05, 20.0, 50.0])
@pytest.mark.parametrize("method", METHODS)
def test_extreme_epsilon_no_nan(method, eps):
    mech = bayesldp.GRR(6, eps)
    tally = mech.simulate_tally([50, 30, 20, 0, 0, 0], rng=0)
    est = estimate(tally, method)
    assert np.all(np.isfinite(est.frequencies))
    if est.std_errors is not None:
        assert np.all(np.isfinite(est.std_errors))
    if method in SIMPLEX_METHODS:
        assert est.on_simplex


# ---------------------------------------------------------------- every mechanism
MECHANISMS = {
    "GRR": lambda k, e: bayesldp.GRR(k, e),
    "SUE": lambda k, e: bayesldp.SUE(k, e),
    "OUE": lambda k, e: bayesldp.OUE(k, e),
    "BLH": lambda k, e: bayesldp.BLH(k, e),
    "OLH": lambda k, e: bayesldp.OLH(k, e),
    "SHE": lambda k, e: bayesldp.SHE(k, e),
    "THE": lambda k, e: bayesldp.THE(k, e),
    "HadamardResponse": lambda k, e: bayesldp.HadamardResponse(k, e),
    "RRRR": lambda k, e: bayesldp.RRRR(k, e, subset=[0, 1]),
}


def _make(name, k, eps):
    try:
        return MECHANISMS[name](k, eps)
    except (AttributeError, ImportError):  # a mechanism module not written yet
        pytest.skip(f"{name} is not available")


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_every_method_on_every_mechanism(name):
    k, n = 8, 20_000
    mech = _make(name, k, 1.0)
    rng = np.random.default_rng(0)
    x = rng.choice(k, size=n, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05, 0.0, 0.0])
    tally = mech.tally(mech.perturb(x, rng=1))
    results = {method: estimate(tally, method) for method in METHODS}
    for method, est in results.items():
        assert est.method == method and est.k == k
        assert np.all(np.isfinite(est.frequencies))
        if method in SIMPLEX_METHODS:
            assert est.on_simplex, method
    # the oracle is the mechanism's own unbiased estimate
    np.testing.assert_allclose(
        results["oracle"].frequencies, mech.unbiased_frequencies(tally), rtol=1e-12
    )
    # MLE and converged EM agree, and the MLE has the larger likelihood
    mle, em = results["mle"], estimate(tally, "em", tol=1e-13)
    assert mle.converged
    assert tally.loglik(mle.frequencies) >= tally.loglik(em.frequencies) - 1e-9
    np.testing.assert_allclose(mle.frequencies, em.frequencies, atol=2e-4)
    # everything estimates the truth at this n (loose, seeded)
    truth = np.bincount(x, minlength=k) / n
    assert np.abs(results["norm_sub"].frequencies - truth).max() < 0.15
    assert np.abs(mle.frequencies - truth).max() < 0.15


# ---------------------------------------------------------------- Estimate
def test_estimate_to_xarray_and_immutability():
    tally = bayesldp.GRR(4, 1.0).simulate_tally([40, 30, 20, 10], rng=2)
    est = estimate(tally, "em")
    ds = est.to_xarray(labels=["a", "b", "c", "d"])
    assert ds["frequency"].dims == ("category",)
    assert list(ds["category"].values) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(ds["frequency"].values, est.frequencies)
    assert ds["loglik"].dims == ("iteration",)
    assert ds.attrs["method"] == "em" and ds.attrs["on_simplex"] == 1
    assert ds.attrs["iterations"] == est.iterations
    assert "std_error" not in ds
    ds_oracle = estimate(tally, "oracle").to_xarray()
    assert "std_error" in ds_oracle and "iterations" not in ds_oracle.attrs
    with pytest.raises(ValueError, match="read-only"):
        est.frequencies[0] = 1.0
    with pytest.raises(AttributeError):
        est.method = "x"
    with pytest.raises(InvalidInputError, match="labels"):
        est.to_xarray(labels=["a"])
    with pytest.raises(InvalidInputError, match="frequencies: contains NaN"):
        Estimate(np.array([np.nan, 1.0]), None, "x", on_simplex=False)
    assert "Estimate(method='em'" in repr(est)
