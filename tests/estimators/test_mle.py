import importlib
import math

import numpy as np
import pytest
from scipy import optimize

import bayesldp
from bayesldp import Tally
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.estimators.mle import grr_mle, mle
from bayesldp.likelihood import Likelihood

# the module (the package re-exports the function ``mle`` under the same name)
mle_module = importlib.import_module("bayesldp.estimators.mle")


def grr_tally_from_report_counts(k, eps, report_counts):
    return bayesldp.GRR(k, eps).tally_from_report_counts(np.asarray(report_counts))


def random_dense_tally(rng, k, n_rows, n):
    rows = rng.uniform(0.1, 1.0, size=(n_rows, k))
    counts = rng.multinomial(n, rng.dirichlet(np.ones(n_rows)))
    return Tally(counts, rows=rows, stat=np.zeros(k), family="hand")


def kkt_gradient(tally, theta):
    """g_x = sum_u c_u L[u, x] / (L_u . theta), from the dense rows (independent check)."""
    rows = tally.rows
    return (tally.counts / (rows @ theta)) @ rows


# ---------------------------------------------------------------- GRR closed form
def test_grr_closed_form_hand_example():
    # GRR(3, ln 3): p = 3/5, q = 1/5; reports [6, 3, 1]. Inverse-channel estimate (1, 0.25,
    # -0.25) leaves the simplex; the closed form drops category 2 (phi = 0.1):
    # q s = 0.2 > (1 - 0) * 0.1, then s = 0.9, k = 1: q s = 0.18 < 0.8 * 0.3 -> stop;
    # theta_x = (0.8 phi_x - 0.18) / (0.9 * 0.4): theta_0 = 0.3 / 0.36, theta_1 = 0.06 / 0.36
    tally = grr_tally_from_report_counts(3, math.log(3), [6, 3, 1])
    np.testing.assert_allclose(grr_mle(tally), [0.3 / 0.36, 0.06 / 0.36, 0.0], atol=1e-15)


def test_grr_closed_form_satisfies_kkt():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 30))
        eps = float(rng.choice([0.1, 0.5, 1.0, 3.0]))
        tally = bayesldp.GRR(k, eps).simulate_tally(
            rng.multinomial(200, rng.dirichlet(np.ones(k) * 0.3)), rng=rng
        )
        theta = grr_mle(tally)
        g = kkt_gradient(tally, theta)
        n = tally.n
        assert np.all(np.abs(g[theta > 0] - n) <= 1e-9 * n)
        assert np.all(g[theta == 0] <= n * (1 + 1e-9))


@pytest.mark.parametrize("hessian", ["dense", "cg"])
def test_grr_closed_form_equals_general_solver(hessian):
    rng = np.random.default_rng(1)
    n_zero_cases = 0
    for case in range(40):
        k = int(rng.integers(2, 40))
        eps = float(rng.choice([0.05, 0.5, 1.0, 2.0, 6.0]))
        n = int(rng.choice([20, 300, 5000]))
        theta = rng.dirichlet(np.ones(k) * rng.choice([0.1, 1.0]))
        tally = bayesldp.GRR(k, eps).simulate_tally(rng.multinomial(n, theta), rng=rng)
        closed = grr_mle(tally)
        general = mle(tally, solver="newton", hessian=hessian)
        assert general.converged, (case, general.details)
        np.testing.assert_allclose(general.frequencies, closed, atol=1e-8, err_msg=str(case))
        n_zero_cases += bool((closed == 0).any())
        # the solver puts exact zeros where the closed form does
        np.testing.assert_array_equal(general.frequencies == 0, closed == 0)
    assert n_zero_cases >= 10  # boundary optima were exercised


def test_grr_closed_form_with_unobserved_reports_and_extreme_eps():
    for eps in (1e-4, 0.01, 20.0, 50.0):
        tally = grr_tally_from_report_counts(6, eps, [50, 0, 3, 0, 0, 1])
        closed = grr_mle(tally)
        general = mle(tally, solver="newton")
        assert np.all(np.isfinite(general.frequencies))
        np.testing.assert_allclose(general.frequencies, closed, atol=1e-8)
        assert closed[1] == closed[3] == closed[4] == 0.0


def test_grr_mle_auto_uses_closed_form_and_rejects_other_tallies():
    tally = grr_tally_from_report_counts(4, 1.0, [10, 5, 3, 0])
    est = mle(tally)
    assert est.details["solver"] == "closed_form"
    np.testing.assert_array_equal(est.frequencies, grr_mle(tally))
    oue_like = Tally([3, 4], rows=[[0.2, 0.8], [0.8, 0.2]], stat=np.zeros(2), family="x")
    with pytest.raises(NotSupportedError, match="GRR tally"):
        grr_mle(oue_like)
    with pytest.raises(NotSupportedError):
        mle(oue_like, solver="closed_form")


# ---------------------------------------------------------------- independent optimisers
def test_two_categories_match_brute_force_grid():
    rng = np.random.default_rng(2)
    for _ in range(20):
        tally = random_dense_tally(rng, 2, int(rng.integers(2, 6)), 50)
        grid = np.linspace(0, 1, 100_001)
        ll = tally.loglik(np.stack([grid, 1 - grid], axis=1))
        best = int(np.argmax(ll))
        # refine the grid optimum by golden section on the bracket around it
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
        res = optimize.minimize_scalar(
            lambda t, tally=tally: -tally.loglik(np.array([t, 1 - t])),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12},
        )
        est = mle(tally)
        assert est.converged
        assert abs(est.frequencies[0] - res.x) < 1e-6
        assert est.loglik_trace[-1] >= -res.fun - 1e-9


def test_small_cases_match_slsqp():
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(3, 6))
        tally = random_dense_tally(rng, k, int(rng.integers(k, 3 * k)), 200)

        def negll(t, tally=tally):
            return -tally.loglik(np.maximum(t, 1e-300)) / tally.n

        res = optimize.minimize(
            negll,
            np.full(k, 1 / k),
            method="SLSQP",
            bounds=[(0, 1)] * k,
            constraints=[{"type": "eq", "fun": lambda t: t.sum() - 1}],
            options={"ftol": 1e-16, "maxiter": 1000},
        )
        est = mle(tally)
        assert est.converged
        # ours is at least as good as SLSQP and within 1e-6 of its point
        assert est.loglik_trace[-1] >= tally.loglik(np.clip(res.x, 0, None)) - 1e-9
        np.testing.assert_allclose(est.frequencies, np.clip(res.x, 0, None), atol=1e-6)


# ---------------------------------------------------------------- support form
def _support_and_dense(rng, k, n_rows, lo, hi, density):
    support = rng.random((n_rows, k)) < density
    support[np.arange(n_rows), rng.integers(0, k, n_rows)] = True
    counts = rng.integers(0, 5, n_rows)
    counts[0] = max(counts[0], 1)
    sup = Tally(counts, support=support, levels=(lo, hi), stat=np.zeros(k), family="s")
    dense = Tally(counts, rows=lo + (hi - lo) * support, stat=np.zeros(k), family="s")
    return sup, dense


@pytest.mark.parametrize(
    ("lo", "hi", "density"),
    [(0.2, 0.6, 0.25), (0.2, 0.6, 0.8), (0.6, 0.2, 0.3), (0.0, 1.0, 0.4)],
)
def test_support_form_equals_dense_form(lo, hi, density):
    rng = np.random.default_rng(4)
    sup, dense = _support_and_dense(rng, 12, 300, lo, hi, density)
    a = mle(sup, hessian="dense")
    b = mle(dense, hessian="cg")
    assert a.converged and b.converged
    np.testing.assert_allclose(a.frequencies, b.frequencies, atol=1e-9)
    np.testing.assert_allclose(a.loglik_trace[-1], dense.loglik(b.frequencies), rtol=1e-12)


def test_row_likelihood_products_match_dense_rows():
    rng = np.random.default_rng(5)
    for lo, hi, density in [(0.1, 0.9, 0.2), (0.1, 0.9, 0.9), (0.7, 0.3, 0.5)]:
        sup, dense = _support_and_dense(rng, 9, 50, lo, hi, density)
        for tally in (sup, dense):
            lik = Likelihood(tally)
            theta = rng.dirichlet(np.ones(9))
            w = rng.random(tally.n_rows)
            rows = tally.rows / lik.row_scale[:, None]  # rows are scaled to a maximum of 1
            # L = offset + C with C >= 0 (support form: offset = min(lo, hi) on every row)
            centred = rows - lik.offset[:, None]
            assert centred.min() >= 0
            np.testing.assert_allclose(lik.offset + lik.matvec(theta), rows @ theta, rtol=1e-12)
            np.testing.assert_allclose(lik.rmatvec(w), w @ centred, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(lik.sq_rmatvec(w), w @ centred**2, rtol=1e-12, atol=1e-14)
            idx = np.array([0, 3, 8])
            np.testing.assert_allclose(
                lik.gram(w, idx), (centred[:, idx] * w[:, None]).T @ centred[:, idx], rtol=1e-12
            )


# ---------------------------------------------------------------- convergence and output
def test_boundary_optimum_with_zero_rows_and_kkt():
    # rows with zero entries (offset 0) and an optimum on a face of the simplex
    rows = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.5, 0.5, 0.0], [1.0, 1.0, 0.2]])
    tally = Tally([10, 10, 0, 5], rows=rows, stat=np.zeros(3), family="z")
    est = mle(tally)
    assert est.converged
    assert est.details["kkt_violation"] <= 1e-12
    theta = est.frequencies
    g = kkt_gradient(tally, theta)
    assert np.all(np.abs(g[theta > 0] - tally.n) <= 1e-9 * tally.n)
    assert np.all(g[theta == 0] <= tally.n * (1 + 1e-9))
    assert (theta == 0).any()


def test_trace_is_the_tally_loglik_and_increases():
    rng = np.random.default_rng(6)
    tally = random_dense_tally(rng, 6, 20, 500)
    est = mle(tally)
    assert est.loglik_trace[-1] == pytest.approx(tally.loglik(est.frequencies), rel=1e-12)
    assert np.all(np.diff(est.loglik_trace) >= -1e-12 * abs(est.loglik_trace[-1]))
    assert est.iterations == est.details["em_maps"] + est.details["newton_steps"]


def test_tiny_epsilon_stays_accurate():
    # all rows nearly constant: the centred formulation keeps the KKT check meaningful
    rng = np.random.default_rng(7)
    mech = bayesldp.GRR(5, 1e-3)
    tally = mech.simulate_tally(rng.multinomial(100_000, [0.4, 0.3, 0.2, 0.1, 0.0]), rng=rng)
    general = mle(tally, solver="newton")
    assert general.converged
    np.testing.assert_allclose(general.frequencies, grr_mle(tally), atol=1e-8)


def test_std_errors_interior_grr_equal_cramer_rao():
    from bayesldp.bounds import cramer_rao

    mech = bayesldp.GRR(4, 2.0)
    tally = mech.tally_from_report_counts(np.array([400, 300, 200, 100]))
    est = mle(tally)
    assert est.details["std_error_kind"] == "expected"
    expected = np.sqrt(np.diag(cramer_rao(mech.channel, est.frequencies, tally.n)))
    np.testing.assert_allclose(est.std_errors, expected, rtol=1e-12)


def test_observed_std_errors_for_channel_free_tally():
    rng = np.random.default_rng(8)
    tally = random_dense_tally(rng, 4, 30, 2000)
    est = mle(tally)
    assert est.details["std_error_kind"] == "observed"
    assert np.all(np.isfinite(est.std_errors)) and np.all(est.std_errors > 0)
    # not identifiable: two equal columns -> no standard errors, but an estimate
    same = Tally([5, 7], rows=[[0.2, 0.2, 0.9], [0.8, 0.8, 0.1]], stat=np.zeros(3), family="x")
    est = mle(same)
    assert est.std_errors is None and "not available" in est.details["std_error_kind"]
    assert np.all(np.isfinite(est.frequencies))


def test_bad_options():
    tally = grr_tally_from_report_counts(3, 1.0, [1, 2, 3])
    with pytest.raises(InvalidInputError, match="solver"):
        mle(tally, solver="lbfgs")
    with pytest.raises(InvalidInputError, match="tol"):
        mle(tally, tol=-1.0)
    with pytest.raises(InvalidTypeError, match="max_iter"):  # a type error, as everywhere
        mle(tally, max_iter=2.5)
    with pytest.raises(InvalidInputError, match="theta0"):
        mle(tally, solver="newton", theta0=[0.5, 0.5])
    zero_rows = Tally([1, 1], rows=[[1.0, 0.0], [0.0, 1.0]], stat=np.zeros(2), family="x")
    with pytest.raises(InvalidInputError, match="theta0: gives probability 0"):
        mle(zero_rows, theta0=[1.0, 0.0])
