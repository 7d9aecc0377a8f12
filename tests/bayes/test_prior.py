import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.bayes import Dirichlet, as_dirichlet


def test_constructors_and_properties():
    prior = Dirichlet([1, 2.5, 0.5])
    np.testing.assert_array_equal(prior.alpha, [1.0, 2.5, 0.5])
    assert prior.k == 3 and prior.concentration == 4.0
    np.testing.assert_allclose(prior.mean, [0.25, 0.625, 0.125])
    assert not prior.alpha.flags.writeable
    np.testing.assert_array_equal(Dirichlet.symmetric(4).alpha, np.ones(4))
    np.testing.assert_array_equal(Dirichlet.symmetric(3, 2.0).alpha, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(Dirichlet.jeffreys(5).alpha, np.full(5, 0.5))
    assert Dirichlet.jeffreys(5) == Dirichlet.symmetric(5, 0.5)
    assert Dirichlet([1, 2]) != Dirichlet([2, 1])
    assert bayesldp.Dirichlet is Dirichlet


def test_repr_and_json_round_trip():
    assert repr(Dirichlet.jeffreys(3)) == "Dirichlet.symmetric(k=3, a=0.5)"
    assert repr(Dirichlet([1, 2.5])) == "Dirichlet(alpha=[1, 2.5])"
    for prior in (Dirichlet([0.1, 2.0, 7.25]), Dirichlet.symmetric(6, 1 / 3)):
        text = prior.to_json()
        assert Dirichlet.from_json(text) == prior
        assert Dirichlet.from_dict(prior.to_dict()) == prior
    with pytest.raises(ValueError, match="not a JSON-serialised Dirichlet"):
        Dirichlet.from_json("{oops")
    with pytest.raises(ValueError, match="not a serialised Dirichlet"):
        Dirichlet.from_json('{"distribution": "Normal"}')


@pytest.mark.parametrize(
    "alpha, error, match",
    [
        ([1.0, 0.0, 1.0], ValueError, r"alpha\[1\] = 0.0"),
        ([1.0, -2.0], ValueError, "must be > 0"),
        ([1.0, np.nan], ValueError, "finite"),
        ([1.0, np.inf], ValueError, "finite"),
        ([1.0], ValueError, "K >= 2"),
        ([[1.0, 1.0]], ValueError, "1-d"),
        ([True, True], TypeError, "dtype bool"),
        (["a", "b"], TypeError, "dtype"),
    ],
)
def test_bad_alpha(alpha, error, match):
    with pytest.raises(error, match=match):
        Dirichlet(alpha)


def test_bad_symmetric_arguments():
    with pytest.raises(ValueError, match="a: the concentration must be finite and > 0"):
        Dirichlet.symmetric(3, 0.0)
    with pytest.raises(TypeError, match="a: expected a positive finite number"):
        Dirichlet.symmetric(3, "1")
    with pytest.raises(ValueError, match="at least 2 categories"):
        Dirichlet.symmetric(1)


def test_as_dirichlet_accepts_each_form():
    np.testing.assert_array_equal(as_dirichlet(None, 3).alpha, np.ones(3))
    np.testing.assert_array_equal(as_dirichlet(0.5, 4).alpha, np.full(4, 0.5))
    np.testing.assert_array_equal(as_dirichlet(2, 2).alpha, [2.0, 2.0])
    np.testing.assert_array_equal(as_dirichlet(np.float64(3.0), 2).alpha, [3.0, 3.0])
    np.testing.assert_array_equal(as_dirichlet([1, 2, 3], 3).alpha, [1.0, 2.0, 3.0])
    prior = Dirichlet([1.0, 2.0])
    assert as_dirichlet(prior, 2) is prior


@pytest.mark.parametrize(
    "prior, error, match",
    [
        ([1.0, 1.0], ValueError, "prior: has 2 concentrations but the tally has K = 3"),
        (Dirichlet([1.0, 1.0]), ValueError, "K = 3"),
        (0.0, ValueError, "prior: a symmetric concentration must be finite and > 0"),
        (-1, ValueError, "> 0"),
        (float("nan"), ValueError, "finite"),
        ([1.0, -1.0, 1.0], ValueError, "prior: alpha: entries must be > 0"),
        (True, TypeError, "prior: expected"),
        ("flat", TypeError, "prior: expected"),
        ({"alpha": 1}, TypeError, "prior: expected"),
    ],
)
def test_as_dirichlet_errors(prior, error, match):
    with pytest.raises(error, match=match):
        as_dirichlet(prior, 3)


def test_logpdf_matches_scipy():
    prior = Dirichlet([0.5, 1.0, 3.0])
    theta = np.array([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])
    for row, value in zip(theta, prior.logpdf(theta), strict=True):
        assert value == pytest.approx(stats.dirichlet.logpdf(row, prior.alpha), rel=1e-12)
    assert Dirichlet([2.0, 3.0]).log_beta() == pytest.approx(np.log(1 / 12), rel=1e-13)
    assert Dirichlet.symmetric(3).logpdf([0.1, 0.6, 0.3]) == pytest.approx(np.log(2.0), rel=1e-13)
    with pytest.raises(ValueError, match="last dimension 3"):
        prior.logpdf([0.5, 0.5])


def test_sample_moments_marginals_and_reproducibility():
    prior = Dirichlet([0.3, 1.0, 2.7])
    n = 50_000
    draws = prior.sample(n, rng=4)
    assert draws.shape == (n, 3)
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, atol=1e-12)
    a0 = prior.concentration
    var = prior.mean * (1 - prior.mean) / (a0 + 1)
    assert np.all(np.abs(draws.mean(axis=0) - prior.mean) <= 4 * np.sqrt(var / n))
    # theta_0 ~ Beta(alpha_0, A - alpha_0)
    result = stats.kstest(draws[:, 0], stats.beta(0.3, a0 - 0.3).cdf)
    assert result.pvalue > 1e-3
    np.testing.assert_array_equal(draws, prior.sample(n, rng=4))
    assert prior.sample((2, 5), rng=0).shape == (2, 5, 3)


def test_tiny_concentrations_never_give_empty_rows():
    prior = Dirichlet.symmetric(3, 0.005)
    draws = prior.sample(20_000, rng=1)
    assert np.all(np.isfinite(draws))
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, atol=1e-12)
    # each draw puts almost all mass on one category, chosen uniformly
    winners = np.bincount(draws.argmax(axis=1), minlength=3)
    assert stats.chisquare(winners).pvalue > 1e-3
