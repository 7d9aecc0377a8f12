import math

import numpy as np
import pytest

import bayesldp
from bayesldp import Tally
from bayesldp.bounds import (
    cramer_rao,
    fisher_information,
    observed_information,
    var_star,
    var_star_by_category,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.base import FiniteChannelMechanism


def random_channel(rng, k, y):
    p = rng.uniform(0.2, 1.0, size=(k, y))
    return p / p.sum(axis=1, keepdims=True)


def reduced_loglik(func, theta_head):
    return func(np.append(theta_head, 1.0 - theta_head.sum()))


def numerical_hessian(func, x, h=1e-4):
    n = x.size
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            hess[i, j] = (
                func(x + ei + ej) - func(x + ei - ej) - func(x - ei + ej) + func(x - ei - ej)
            ) / (4 * h * h)
    return hess


# ---------------------------------------------------------------- Var*
@pytest.mark.parametrize(("k", "eps"), [(2, 0.5), (10, 1.0), (100, 2.0)])
def test_var_star_grr_closed_form(k, eps):
    e = math.exp(eps)
    assert var_star(bayesldp.GRR(k, eps)) == pytest.approx((e + k - 2) / (e - 1) ** 2, rel=1e-12)


def test_var_star_other_pure_protocols():
    eps = 1.0
    e = math.exp(eps)
    assert var_star(bayesldp.OUE(16, eps)) == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-12)
    h = math.exp(eps / 2)
    assert var_star(bayesldp.SUE(16, eps)) == pytest.approx(h / (h - 1) ** 2, rel=1e-12)
    assert var_star(bayesldp.SHE(16, eps)) == pytest.approx(8 / eps**2, rel=1e-12)


class ChannelOnly(FiniteChannelMechanism):
    """A GRR channel seen only through the generic channel-inverse oracle."""

    name = "ChannelOnly"

    def __init__(self, k, eps):
        super().__init__(k, eps)
        e = math.exp(eps)
        self._p = np.full((k, k), 1 / (e + k - 1)) + np.eye(k) * (e - 1) / (e + k - 1)

    @property
    def channel(self):
        return self._p

    def perturb(self, x, rng=None):
        raise NotImplementedError


def test_var_star_generic_path_agrees_with_the_pure_formula():
    # worst case over populations without x of the channel-inverse variance (K oracle calls)
    generic = var_star_by_category(ChannelOnly(6, 1.3))
    np.testing.assert_allclose(generic, var_star(bayesldp.GRR(6, 1.3)), rtol=1e-10)


def test_var_star_rejects_non_mechanisms():
    with pytest.raises(InvalidTypeError, match="mechanism"):
        var_star("GRR")


# ---------------------------------------------------------------- Fisher information
def test_fisher_information_is_minus_expected_hessian():
    rng = np.random.default_rng(0)
    p = random_channel(rng, 4, 6)
    theta = rng.dirichlet(np.ones(4))
    py0 = theta @ p

    def expected_loglik(t):
        return py0 @ np.log(t @ p)

    hess = numerical_hessian(lambda h: reduced_loglik(expected_loglik, h), theta[:-1])
    np.testing.assert_allclose(fisher_information(p, theta), -hess, rtol=1e-5)


def test_observed_information_is_minus_loglik_hessian():
    rng = np.random.default_rng(1)
    k = 4
    support = rng.random((60, k)) < 0.4
    tally = Tally(
        rng.integers(1, 5, 60), support=support, levels=(0.3, 0.9), stat=np.zeros(k), family="s"
    )
    theta = rng.dirichlet(np.ones(k))
    hess = numerical_hessian(lambda h: reduced_loglik(tally.loglik, h), theta[:-1])
    np.testing.assert_allclose(observed_information(tally, theta), -hess, rtol=1e-5)


def test_observed_information_expectation():
    # GRR tally with expected report counts: observed information = n * Fisher information
    mech = bayesldp.GRR(5, 1.0)
    theta = np.array([0.3, 0.25, 0.2, 0.15, 0.1])
    n = 10_000
    report_counts = n * (theta @ mech.channel)
    tally = Tally(
        report_counts.round().astype(int), rows=mech.channel.T, stat=np.zeros(5), mechanism=mech
    )
    np.testing.assert_allclose(
        observed_information(tally, theta), n * fisher_information(mech, theta), rtol=1e-3
    )


# ---------------------------------------------------------------- Cramér-Rao
def test_cramer_rao_equals_iid_variance_of_channel_inversion():
    # for a square invertible channel the inverse-channel estimator is a linear function of the
    # multinomial report frequencies: its covariance under i.i.d. sampling from theta is exactly
    # the Cramér-Rao bound (the K = 2 case is Lopuhaä-Zwakenberg et al. 2020, Proposition 4.6: RR
    # attains the bound)
    rng = np.random.default_rng(2)
    for k in (2, 3, 6):
        p = random_channel(rng, k, k)
        theta = rng.dirichlet(np.ones(k))
        n = 1000
        py = theta @ p
        inv = np.linalg.inv(p)
        cov = inv.T @ (np.diag(py) - np.outer(py, py)) @ inv / n
        np.testing.assert_allclose(cramer_rao(p, theta, n), cov, rtol=1e-9, atol=1e-15)


def test_cramer_rao_binary_rr_closed_form():
    eps, n, t = 0.7, 500, 0.3
    mech = bayesldp.GRR(2, eps)
    p = mech.p
    rho = t * p + (1 - t) * (1 - p)  # probability of reporting 0
    var = rho * (1 - rho) / (n * (2 * p - 1) ** 2)
    np.testing.assert_allclose(cramer_rao(mech, [t, 1 - t], n), var * np.array([[1, -1], [-1, 1]]))


def test_fixed_population_oracle_variance_is_below_the_iid_bound():
    mech = bayesldp.GRR(5, 1.0)
    theta = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    bound = np.diag(cramer_rao(mech, theta, 1000))
    assert np.all(mech.oracle_variance(theta, 1000) <= bound * (1 + 1e-12))


def test_cramer_rao_bad_input():
    p = np.array([[0.5, 0.5], [0.5, 0.5]])
    with pytest.raises(InvalidInputError, match="singular"):
        cramer_rao(p, [0.5, 0.5], 10)
    with pytest.raises(InvalidInputError, match="n:"):
        cramer_rao(np.eye(2) * 0.5 + 0.25, [0.5, 0.5], 0)
    with pytest.raises(InvalidInputError, match="sum to 1"):
        fisher_information(np.array([[0.5, 0.6], [0.5, 0.5]]), [0.5, 0.5])
    with pytest.raises(InvalidInputError, match="theta"):
        fisher_information(np.eye(2) * 0.5 + 0.25, [0.7, 0.7])
    with pytest.raises(InvalidInputError, match="infinite"):
        fisher_information(np.array([[1.0, 0.0], [0.5, 0.5]]), [1.0, 0.0])
    tally = bayesldp.GRR(2, 1.0).tally_from_report_counts(np.array([3, 4]))
    with pytest.raises(InvalidTypeError, match="observed_information"):
        fisher_information(tally, [0.5, 0.5])


# ---------------------------------------------------------------- asymptotic MSE of the MLE
@pytest.mark.parametrize("name, k", [("GRR", 10), ("GRR", 60), ("HadamardResponse", 20)])
def test_simulated_information_agrees_with_the_channel(name, k):
    """The simulated information, bias-corrected, gives the exact channel's MSE to 1%."""
    from bayesldp.bounds import asymptotic_mse
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism(name, k, 1.0)
    theta = np.random.default_rng(k).dirichlet(np.full(k, 5.0))
    exact, m_exact = asymptotic_mse(mech, theta, 1000)
    assert m_exact == 0
    assert exact == pytest.approx(np.trace(cramer_rao(mech.channel, theta, 1000)), rel=1e-12)
    simulated, m = asymptotic_mse(mech, theta, 1000, simulate=True, rng=3)
    assert m == 20_000 and simulated == pytest.approx(exact, rel=0.01)


@pytest.mark.parametrize("name", ["SUE", "OUE", "BLH", "OLH", "SHE", "THE"])
def test_asymptotic_mse_is_below_the_oracle_iid_variance(name):
    """The MLE's bound cannot exceed the unbiased oracle's variance under i.i.d. sampling."""
    from bayesldp.bounds import asymptotic_mse
    from bayesldp.mechanisms import make_mechanism

    k, n = 8, 500
    mech = make_mechanism(name, k, 1.0)
    theta = np.full(k, 1 / k)
    mse, m = asymptotic_mse(mech, theta, n)
    oracle_iid = mech.oracle_variance(theta, n).sum() + (1 - theta @ theta) / n
    assert m == 20_000 and 0 < mse <= oracle_iid
    assert asymptotic_mse(mech, theta, 10 * n)[0] == pytest.approx(mse / 10, rel=1e-12)
