import math

import numpy as np
import pytest

import bayesldp
import bayesldp.likelihood as likelihood
from bayesldp import Tally
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.estimators.em import em, em_map, em_mr, ibu, run_em, tie_pools
from bayesldp.estimators.mle import grr_mle
from bayesldp.likelihood import Likelihood


def grr_tally(k, eps, true_counts, seed):
    return bayesldp.GRR(k, eps).simulate_tally(np.asarray(true_counts), rng=seed)


def support_tally(seed, k=15, n_rows=400):
    rng = np.random.default_rng(seed)
    support = rng.random((n_rows, k)) < 0.3
    return Tally(
        rng.integers(1, 4, n_rows),
        support=support,
        levels=(0.25, 0.75),
        stat=np.zeros(k),
        family="s",
    )


def tallies():
    rng = np.random.default_rng(0)
    yield grr_tally(30, 1.0, rng.multinomial(3000, rng.dirichlet(np.ones(30) * 0.3)), 1)
    yield grr_tally(8, 0.2, [500, 300, 100, 50, 30, 20, 0, 0], 2)
    yield support_tally(3)
    rows = rng.uniform(0.05, 1.0, size=(40, 6))
    yield Tally(rng.integers(0, 20, 40), rows=rows, stat=np.zeros(6), family="d")


@pytest.mark.parametrize("accelerate", [False, True])
def test_em_loglik_never_decreases(accelerate):
    for tally in tallies():
        est = em(tally, accelerate=accelerate, max_iter=3000, tol=1e-12)
        trace = est.loglik_trace
        # non-decreasing up to the rounding of a sum of n log terms
        slack = 1e-12 * np.abs(trace).max()
        assert np.all(np.diff(trace) >= -slack), np.diff(trace).min()
        assert trace[-1] > trace[0]
        assert trace[-1] == pytest.approx(tally.loglik(est.frequencies), rel=1e-12)


def test_one_plain_em_step_matches_the_formula():
    rows = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.5, 0.5, 0.1]])
    counts = np.array([5, 3, 2])
    tally = Tally(counts, rows=rows, stat=np.zeros(3), family="x")
    theta0 = np.array([0.5, 0.3, 0.2])
    est = em(tally, theta0=theta0, max_iter=1, accelerate=False)
    gamma = theta0 * rows / (rows @ theta0)[:, None]  # E-step per distinct row
    expected = counts @ gamma / counts.sum()  # M-step
    np.testing.assert_allclose(est.frequencies, expected, rtol=1e-14)
    assert est.iterations == 1 and est.converged is False


def test_em_reaches_the_mle():
    rng = np.random.default_rng(4)
    theta = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
    tally = grr_tally(6, 2.0, rng.multinomial(20_000, theta), 5)
    mle = grr_mle(tally)
    assert mle.min() > 0  # interior: EM converges linearly
    for accelerate in (True, False):
        est = em(tally, accelerate=accelerate, tol=1e-13)
        assert est.converged
        np.testing.assert_allclose(est.frequencies, mle, atol=1e-9)


def test_squarem_same_fixed_point_fewer_maps():
    tally = grr_tally(20, 2.0, np.arange(20) * 10 + 5, 6)
    fast = em(tally, accelerate=True, tol=1e-10)
    slow = em(tally, accelerate=False, tol=1e-10, max_iter=50_000)
    assert fast.converged and slow.converged
    assert fast.iterations < slow.iterations / 10
    np.testing.assert_allclose(fast.frequencies, slow.frequencies, atol=1e-7)


def test_em_respects_max_iter_and_reports_residual():
    tally = grr_tally(10, 0.5, np.arange(10) * 30, 7)
    est = em(tally, max_iter=5, accelerate=False)
    assert est.iterations == 5 and not est.converged
    assert est.details["residual"] > 0
    assert est.loglik_trace.shape == (6,)


def test_em_theta0_zeros_stay_zero():
    tally = grr_tally(4, 1.0, [100, 100, 100, 100], 8)
    est = em(tally, theta0=[0.5, 0.5, 0.0, 0.0])
    assert est.frequencies[2] == 0 and est.frequencies[3] == 0
    np.testing.assert_allclose(est.frequencies.sum(), 1.0)


# ---------------------------------------------------------------- IBU
def plain_em_by_loglik(h, k, e, tol, cap):
    """The IBU of the LDP-EM-MR authors' GRR code, in numpy: plain EM on the report histogram
    from the uniform start, stopped at the first step (from the second) whose log-likelihood
    gain is below tol."""
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    m = np.full((k, k), q) + (p - q) * np.eye(k)
    w, ll_old = np.full(k, 1 / k), -np.inf
    for step in range(1, cap + 1):
        w = w * (m.T @ (h / (m @ w)))
        w /= w.sum()
        ll = h @ np.log(m @ w)
        if ll - ll_old < tol:
            return w, step
        ll_old = ll
    return w, cap


@pytest.mark.parametrize("eps, tol, cap", [(0.75, 1e-6, 1400), (2.0, 1e-6, 1400), (1.0, 1e-2, 50)])
def test_ibu_is_the_authors_plain_em(eps, tol, cap):
    k = 12
    rng = np.random.default_rng(31)
    tally = grr_tally(k, eps, rng.multinomial(5000, rng.dirichlet(np.full(k, 0.5))), 32)
    h = np.bincount(tally.support.argmax(1), weights=tally.counts, minlength=k)
    want, steps = plain_em_by_loglik(h, k, math.exp(eps), tol, cap)
    est = ibu(tally, tol=tol, max_iter=cap)
    assert est.iterations == steps
    np.testing.assert_allclose(est.frequencies, want, rtol=1e-9, atol=1e-13)
    assert est.details["rule"] == "loglik" and est.converged == (steps < cap)


def test_ibu_change_rule_is_plain_em_with_multi_freq_ldpy_defaults():
    tally = grr_tally(10, 1.0, np.arange(1, 11) * 30, 33)
    a = ibu(tally, rule="change")
    b = em(tally, accelerate=False, tol=1e-12, max_iter=10_000)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    assert a.iterations == b.iterations and a.details["max_iter"] == 10_000


def test_ibu_bad_options():
    tally = grr_tally(3, 1.0, [5, 5, 5], 13)
    with pytest.raises(InvalidInputError, match="rule"):
        ibu(tally, rule="kl")
    with pytest.raises(InvalidInputError, match="tol"):
        ibu(tally, tol=0.0)
    with pytest.raises(InvalidInputError, match="max_iter"):
        ibu(tally, max_iter=0)


# ---------------------------------------------------------------- EM with mixture reduction
def pooled_output_em(h, k, e, pools, w0, steps):
    """EM on the reduced GRR mixture with the pooled categories' *reports* pooled too (the
    authors' construction), in numpy; returns the weights split equally over pool members."""
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    groups = [[x] for x in range(k) if not any(x in g for g in pools)] + [list(g) for g in pools]
    m = np.array([[sum(p if y == x else q for y in out for x in [inp[0]]) if len(inp) == 1
                   else np.mean([sum(p if y == x else q for y in out) for x in inp])
                   for inp in groups] for out in groups])  # fmt: skip
    hc = np.array([h[g].sum() for g in groups])
    w = np.array([w0[g].sum() for g in groups])
    for _ in range(steps):
        w = w * (m.T @ (hc / (m @ w)))
        w /= w.sum()
    out = np.empty(k)
    for g, wg in zip(groups, w, strict=True):
        out[g] = wg / len(g)
    return out


def test_pooled_em_equals_em_with_pooled_reports_for_grr():
    k, e = 9, math.exp(1.2)
    tally = grr_tally(k, 1.2, [900, 600, 400, 200, 40, 20, 10, 5, 0], 34)
    h = np.bincount(tally.support.argmax(1), weights=tally.counts, minlength=k)
    pools = [np.array([6, 7, 8]), np.array([4, 5])]
    pool_of = np.full(k, -1)
    for j, g in enumerate(pools):
        pool_of[g] = j
    w0 = tie_pools(np.full(k, 1 / k), pool_of, 2)
    lik = Likelihood(tally)
    run = run_em(lik, w0, tol=0.0, max_iter=25, accelerate=False, pool_of=pool_of, n_pools=2)
    want = pooled_output_em(h, k, e, pools, w0, 25)
    np.testing.assert_allclose(run.theta, want, rtol=1e-10)


def test_em_mr_pools_the_absent_categories_on_the_authors_schedule():
    # 20 categories, only the first 5 present: two rounds of at most int(20 / 4) = 5 merges
    true_counts = np.zeros(20, dtype=int)
    true_counts[:5] = [40_000, 30_000, 20_000, 6000, 4000]
    tally = grr_tally(20, 1.0, true_counts, 9)
    est = em_mr(tally, protect=3)
    pools = est.details["pools"]
    assert len(pools) == 2 and all(1 <= len(g) <= 5 for g in pools)
    pooled = np.concatenate(pools)
    assert np.all(pooled >= 5)
    assert len(est.details["stages"]) == 3 and len(est.details["bic"]) == 3
    # the default threshold is the authors' 1 * sqrt((K - 2 + e^eps) / n) / (e^eps - 1)
    e = math.exp(1.0)
    np.testing.assert_allclose(est.details["threshold"], math.sqrt((18 + e) / 100_000) / (e - 1))
    for members in pools:  # the pooled weight is split equally over its members
        assert np.ptp(est.frequencies[members]) < 1e-15
    assert est.on_simplex
    np.testing.assert_allclose(est.frequencies.sum(), 1.0, atol=1e-12)


def test_em_mr_protected_categories_count_toward_the_limit():
    tally = grr_tally(8, 0.5, [300, 200, 100, 50, 30, 20, 10, 0], 35)
    base = em_mr(tally, rounds=1, protect=0, threshold=1.0, merge_fraction=0.5)
    merged = base.details["pools"][0]
    assert merged.size == 4  # int(0.5 * 8), all below the threshold 1
    kept = em_mr(tally, rounds=1, protect=list(merged[:2]), threshold=1.0, merge_fraction=0.5)
    np.testing.assert_array_equal(kept.details["pools"][0], np.sort(merged[2:]))


def test_em_mr_with_zero_threshold_is_ibu_at_its_tolerance():
    tally = grr_tally(10, 1.0, np.arange(10) * 20, 10)
    a = em_mr(tally, threshold=0.0)
    b = ibu(tally, tol=1e-3 * math.exp(1.0), max_iter=1000 + 10 * 10)
    assert a.details["pools"] == []
    np.testing.assert_array_equal(a.frequencies, b.frequencies)


def test_em_mr_on_a_mixed_tally_reads_the_budget_from_the_rows():
    rng = np.random.default_rng(12)
    mech_a = bayesldp.RRRR(8, 1.0, subset=[0, 1])
    mech_b = bayesldp.RRRR(8, 1.0, subset=[2, 3, 4])
    x = rng.choice(8, size=4000, p=[0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0])
    tally = mech_a.tally(mech_a.perturb(x[:2000], rng=1)) + mech_b.tally(
        mech_b.perturb(x[2000:], rng=2)
    )
    assert tally.mechanism is None
    est = em_mr(tally)
    assert np.all(np.isfinite(est.details["threshold"]))
    assert est.on_simplex


def test_em_bad_options():
    tally = grr_tally(3, 1.0, [5, 5, 5], 13)
    with pytest.raises(InvalidTypeError, match="accelerate"):  # a type error, as everywhere
        em(tally, accelerate="yes")
    with pytest.raises(InvalidInputError, match="threshold"):
        em_mr(tally, threshold=-1.0)
    with pytest.raises(InvalidInputError, match="threshold_sd"):
        em_mr(tally, threshold_sd=0)
    with pytest.raises(InvalidInputError, match="rounds"):
        em_mr(tally, rounds=-1)
    with pytest.raises(InvalidInputError, match="protect"):
        em_mr(tally, protect=[5])
    with pytest.raises(InvalidInputError, match="merge_fraction"):
        em_mr(tally, merge_fraction=1.5)


# ---------------------------------------------------------------- compiled kernels
def reference_step(rows, counts, theta):
    """The generic EM map on dense rows, in numpy: theta_x g_x / (theta . g)."""
    g = rows.T @ (counts / (rows @ theta))
    new = theta * g
    return new / new.sum()


def dense_twin(tally):
    return Tally(tally.counts, rows=tally.rows, stat=tally.stat, family="twin", dedupe=False)


def test_onehot_step_is_the_order_k_formula_and_equals_the_generic_step():
    rng = np.random.default_rng(20)
    k = 200
    mech = bayesldp.GRR(k, 1.0)
    tally = mech.simulate_tally(rng.multinomial(500, rng.dirichlet(np.ones(k))), rng=21)
    assert tally.is_support_form and tally.n_rows < k  # some reports never observed
    lo, hi = tally.levels
    # repeated rows (dedupe=False) and reversed levels (a "one-cold" row) take the same path
    repeated = Tally(
        np.concatenate([tally.counts, [7, 3]]),
        support=np.vstack([tally.support, tally.support[[0, 0]]]),
        levels=(lo, hi),
        stat=np.zeros(k),
        family="r",
        dedupe=False,
    )
    reversed_levels = Tally(
        tally.counts, support=tally.support, levels=(hi, lo), stat=np.zeros(k), family="c"
    )
    for t in (tally, repeated, reversed_levels):
        rows = Likelihood(t)
        assert rows.kind == "onehot"
        generic = Likelihood(dense_twin(t))
        assert generic.kind in ("dense", "band")  # GRR rows are bands of width 1
        counts = t.counts.astype(float)
        lo_t, hi_t = t.levels
        cols = np.argmax(t.support, axis=1)
        for theta in (np.full(k, 1.0 / k), rng.dirichlet(np.ones(k))):
            # theta_x <- theta_x (lo sum_u c_u / d_u + (hi - lo) h_x) / n,
            # d_u = lo S + (hi - lo) theta_{x_u}, h_x = sum_{u: x_u = x} c_u / d_u
            d = lo_t * theta.sum() + (hi_t - lo_t) * theta[cols]
            h = np.bincount(cols, weights=counts / d, minlength=k)
            formula = theta * (lo_t * (counts / d).sum() + (hi_t - lo_t) * h) / counts.sum()
            step = em_map(rows, theta)
            assert np.abs(step - formula).max() <= 1e-14
            assert np.abs(step - em_map(generic, theta)).max() <= 1e-14
            assert np.abs(step - reference_step(t.rows, counts, theta)).max() <= 1e-14
            assert rows.loglik_rel(*rows.evaluate(theta)) + rows.const == pytest.approx(
                t.loglik(theta), rel=1e-13
            )


@pytest.mark.parametrize("density", [0.3, 0.8])
@pytest.mark.parametrize("levels", [(0.25, 0.75), (0.75, 0.25), (0.0, 1.0)])
@pytest.mark.parametrize("packed", [False, True])
def test_sparse_step_equals_the_generic_step(density, levels, packed, monkeypatch):
    """The EM map from support rows, compressed (of M or of 1 - M) or packed (the rule
    replaced: tests/test_likelihood_packed.py tests the rule), equals the dense rows' map."""
    monkeypatch.setattr(likelihood, "_packed_is_cheaper", lambda *args: packed)
    rng = np.random.default_rng(22)
    k, n_rows = 12, 300
    support = rng.random((n_rows, k)) < density
    support[np.arange(n_rows), rng.integers(0, k, n_rows)] = True  # a positive entry per row
    support[:, 0] = support[:, 0] & (density < 0.5)  # an all-off column at density 0.8
    tally = Tally(
        rng.integers(1, 5, n_rows), support=support, levels=levels, stat=np.zeros(k), family="s"
    )
    rows = Likelihood(tally)
    assert rows.kind == ("packed" if packed else "sparse")
    assert packed or rows.complement == ((density > 0.5) != (levels[1] < levels[0]))
    counts = tally.counts.astype(float)
    for theta in (np.full(k, 1.0 / k), rng.dirichlet(np.ones(k))):
        expected = reference_step(tally.rows, counts, theta)
        assert np.abs(em_map(rows, theta) - expected).max() <= 1e-14
        assert np.abs(em_map(Likelihood(dense_twin(tally)), theta) - expected).max() <= 1e-14
        assert rows.loglik_rel(*rows.evaluate(theta)) + rows.const == pytest.approx(
            tally.loglik(theta), rel=1e-13
        )


def reference_em(rows, counts, theta, n_maps, pool_of=None):
    """Plain EM in numpy on dense rows (pools tied to their mean after every map)."""
    trace = [counts @ np.log(rows @ theta)]
    for _ in range(n_maps):
        theta = reference_step(rows, counts, theta)
        if pool_of is not None:
            for pool in range(pool_of.max() + 1):
                theta[pool_of == pool] = theta[pool_of == pool].mean()
        trace.append(counts @ np.log(rows @ theta))
    return theta, np.asarray(trace)


def test_compiled_em_is_the_numpy_em():
    """Plain EM takes the numpy EM's iterates; SQUAREM reaches the same fixed point."""
    for tally in tallies():
        lik = Likelihood(tally)
        start = np.full(tally.k, 1.0 / tally.k)
        b = run_em(lik, start, tol=1e-300, max_iter=500, accelerate=False)
        theta, trace = reference_em(tally.rows, tally.counts.astype(float), start, 500)
        assert b.maps == 500
        np.testing.assert_allclose(b.theta, theta, rtol=0, atol=1e-13)
        np.testing.assert_allclose(b.trace + lik.const, trace, rtol=1e-12)
        fast = run_em(lik, start, tol=1e-12, max_iter=20_000, accelerate=True)
        assert fast.converged
        assert np.all(np.diff(fast.trace) >= -1e-12 * np.abs(fast.trace).max())
        best = bayesldp.estimate(tally, "mle").frequencies  # the fixed point EM converges to
        np.testing.assert_allclose(fast.theta, best, rtol=0, atol=1e-5)


def test_pooled_em_is_the_numpy_pooled_em():
    tally = grr_tally(12, 1.0, [900, 700, 500, 300, 100, 50, 20, 10, 0, 0, 0, 0], 23)
    pool_of = np.array([-1, -1, -1, -1, -1, -1, 0, 0, 1, 1, 1, 0])
    start = tie_pools(np.full(12, 1.0 / 12), pool_of, 2)
    b = run_em(Likelihood(tally), start, tol=1e-300, max_iter=300, accelerate=False,
               pool_of=pool_of, n_pools=2)  # fmt: skip
    theta, _ = reference_em(tally.rows, tally.counts.astype(float), start, 300, pool_of)
    assert b.maps == 300
    np.testing.assert_allclose(b.theta, theta, rtol=0, atol=1e-13)
    fast = run_em(Likelihood(tally), start, tol=1e-14, max_iter=9, accelerate=True,
                  pool_of=pool_of, n_pools=2)  # fmt: skip
    for run in (b, fast):
        for pool in (0, 1):
            assert np.ptp(run.theta[pool_of == pool]) == 0


def test_em_same_on_support_form_and_dense_rows():
    tally = grr_tally(25, 0.7, np.arange(25) * 40 + 10, 24)
    a = em(tally, accelerate=False, max_iter=400)
    b = em(dense_twin(tally), accelerate=False, max_iter=400)
    np.testing.assert_allclose(a.frequencies, b.frequencies, rtol=0, atol=1e-13)
    np.testing.assert_allclose(a.loglik_trace, b.loglik_trace, rtol=1e-13)


def test_em_long_trace_and_zero_offset_rows():
    # lo = 0: rows are 0/1, the log-likelihood reads log(C theta) directly
    rng = np.random.default_rng(25)
    support = rng.random((60, 8)) < 0.4
    support[np.arange(60), rng.integers(0, 8, 60)] = True
    tally = Tally(
        rng.integers(1, 9, 60), support=support, levels=(0.0, 1.0), stat=np.zeros(8), family="z"
    )
    est = em(tally, accelerate=False, max_iter=3000, tol=1e-300)
    assert est.iterations == 3000 and est.loglik_trace.shape == (3001,)
    assert np.all(np.diff(est.loglik_trace) >= -1e-12 * np.abs(est.loglik_trace).max())
    assert est.loglik_trace[-1] == pytest.approx(tally.loglik(est.frequencies), rel=1e-12)


def test_em_mr_bic_counts_each_stage_components():
    true_counts = np.zeros(20, dtype=int)
    true_counts[:5] = [40_000, 30_000, 20_000, 6000, 4000]
    tally = grr_tally(20, 1.0, true_counts, 9)
    est = em_mr(tally, protect=3)
    sizes = [20]
    merged = 0
    for t, members in enumerate(est.details["pools"], 1):
        merged += members.size
        sizes.append(20 - merged + t)
    traces = np.split(est.loglik_trace, np.cumsum([m + 1 for m in est.details["stages"]])[:-1])
    want = [-2 * tr[-1] + size * math.log(tally.n) for tr, size in zip(traces, sizes, strict=True)]
    np.testing.assert_allclose(est.details["bic"], want, rtol=1e-12)


def test_em_mr_with_explicit_settings_needs_no_budget():
    # a row that is 0 for some category has no finite budget; explicit settings do not need one
    rows = np.array([[1.0, 0.0, 0.5], [0.2, 1.0, 0.0], [0.3, 0.3, 1.0]])
    tally = Tally(np.array([30, 20, 10]), rows=rows, stat=np.zeros(3), family="d")
    with pytest.raises(InvalidInputError, match="no finite budget"):
        em_mr(tally)
    est = em_mr(tally, threshold_sd=1.0, tol=1e-6)
    assert est.on_simplex
