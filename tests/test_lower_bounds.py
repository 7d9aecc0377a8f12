"""The L2 floor of eps-LDP frequency estimation (``bayesldp.bounds.l2_lower_bound``).

Pan, "Strict Optimality of Frequency and Distribution Estimation Under Local Differential
Privacy" (arXiv 2603.11523, 2026): a linear estimator with a symmetric extremal configuration at
an optimised support size attains the lower bound of the L2 loss.  The loss of that
configuration is derived in ``bayesldp.bounds``; these tests check the derivation against exact
channels and check that the bound sits under every unbiased estimator the package has.
"""

import math
from itertools import combinations, pairwise

import numpy as np
import pytest

import bayesldp
from bayesldp.bounds import (
    cramer_rao,
    extremal_l2_loss,
    l2_lower_bound,
    optimal_support_size,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError

KS = (2, 10, 100)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
MECHANISMS = (
    bayesldp.GRR,
    bayesldp.OUE,
    bayesldp.OLH,
    bayesldp.HadamardResponse,
    bayesldp.SubsetSelection,
)
#: relative slack for float rounding only
TIGHT = 1e-10


def populations(k, rng):
    uniform = np.full(k, 1.0 / k)
    point = np.zeros(k)
    point[0] = 1.0
    return [uniform, point, rng.dirichlet(np.ones(k)), rng.dirichlet(np.full(k, 0.1))]


def linear_loss_by_input(channel, weights):
    """``sum_y P[v, y] ||w(y) - e_v||^2`` for every input ``v``: ``n`` times the summed
    variance of the linear estimate ``(1/n) sum_i w(y_i)`` contributed by a user holding ``v``."""
    k = channel.shape[0]
    out = np.empty(k)
    for v in range(k):
        err = weights - np.eye(k)[v]
        out[v] = channel[v] @ (err * err).sum(axis=1)
    return out


# ---------------------------------------------------------------- the derivation, exactly
@pytest.mark.parametrize("k", [3, 5, 7])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_extremal_loss_matches_the_enumerated_subset_channel(k, eps):
    """Build the symmetric extremal channel over all s-subsets by hand, apply the unbiased
    linear estimator ([x in S] - q) / (p - q), and sum its exact variance: equal to the closed
    form for every input and every support size (so for every dataset)."""
    e = math.exp(eps)
    for s in range(1, k):
        subsets = list(combinations(range(k), s))
        member = np.zeros((k, len(subsets)))
        for j, subset in enumerate(subsets):
            member[list(subset), j] = 1.0
        channel = np.where(member > 0, e, 1.0)
        channel /= channel.sum(axis=1, keepdims=True)
        p = (channel * member).sum(axis=1)[0]
        q = (channel[0] * member[1]).sum()
        weights = (member.T - q) / (p - q)
        np.testing.assert_allclose(channel @ weights, np.eye(k), atol=1e-12)  # unbiased
        losses = linear_loss_by_input(channel, weights)
        np.testing.assert_allclose(losses, extremal_l2_loss(k, eps, s), rtol=1e-10)


@pytest.mark.parametrize(("k", "eps"), [(10, 1.0), (100, 0.5), (100, 4.0)])
def test_extremal_loss_is_subset_selections_summed_oracle_variance(k, eps):
    rng = np.random.default_rng(3)
    for s in sorted({1, 2, optimal_support_size(k, eps), k - 1}):
        mech = bayesldp.SubsetSelection(k, eps, d=s)
        for theta in populations(k, rng):
            total = float(mech.oracle_variance(theta, 1).sum())
            assert total == pytest.approx(extremal_l2_loss(k, eps, s), rel=1e-10)


def test_support_one_is_grr():
    for k in (2, 10, 100):
        for eps in EPSILONS:
            grr = bayesldp.GRR(k, eps).oracle_variance(np.full(k, 1.0 / k), 1).sum()
            assert extremal_l2_loss(k, eps, 1) == pytest.approx(float(grr), rel=1e-12)


# ---------------------------------------------------------------- attained cases
@pytest.mark.parametrize("eps", EPSILONS)
def test_binary_randomised_response_attains_the_bound(eps):
    """K = 2: the only support size is 1, randomised response, whose unbiased estimate has
    the bound as its summed variance for every dataset, and whose MLE's asymptotic variance
    (the Cramér-Rao bound, attained exactly by the oracle for K = 2) is the distribution
    version of the bound."""
    n = 500
    e = math.exp(eps)
    assert optimal_support_size(2, eps) == 1
    closed = 2 * e / (n * (e - 1) ** 2)  # 2 q(1-q)/(p-q)^2 / n, p = e/(e+1), q = 1/(e+1)
    assert l2_lower_bound(2, eps, n) == pytest.approx(closed, rel=1e-12)
    rr = bayesldp.GRR(2, eps)
    for theta in (np.array([0.5, 0.5]), np.array([0.1, 0.9]), np.array([1.0, 0.0])):
        total = float(rr.oracle_variance(theta, n).sum())
        assert total == pytest.approx(l2_lower_bound(2, eps, n), rel=1e-12)
    trace = float(np.trace(cramer_rao(rr.channel, np.array([0.5, 0.5]), n)))
    assert trace == pytest.approx(l2_lower_bound(2, eps, n, distribution=True), rel=1e-10)


def test_optimal_support_size_is_the_argmin_and_near_k_over_e_eps_plus_1():
    """Subset selection's size ``K / (e^eps + 1)`` (Wang et al. 2016; Ye and Barg 2018) is
    where the optimised support size lands for large K: within one of it."""
    for k in (2, 3, 10, 100):
        for eps in EPSILONS:
            s = optimal_support_size(k, eps)
            losses = [extremal_l2_loss(k, eps, t) for t in range(1, k)]
            assert losses[s - 1] == min(losses)
            assert l2_lower_bound(k, eps, 1) == pytest.approx(min(losses), rel=1e-12)
    for k in (1000, 10_000):
        for eps in (0.5, 1.0, 2.0, 3.0):
            assert abs(optimal_support_size(k, eps) - k / (math.exp(eps) + 1)) <= 1.0


# ---------------------------------------------------------------- floors under real estimators
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_bound_is_below_every_unbiased_oracle(k, eps):
    """The unbiased oracles are linear estimators: their exact summed variance
    (``oracle_variance``) must be at or above the bound for every population."""
    rng = np.random.default_rng(k * 10 + int(eps * 2))
    n = 1000
    bound = l2_lower_bound(k, eps, n)
    for cls in MECHANISMS:
        mech = cls(k, eps)
        for theta in populations(k, rng):
            total = float(np.sum(mech.oracle_variance(theta, n)))
            assert total >= bound * (1 - TIGHT), (mech, theta, total / bound)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_bound_is_below_the_mles_asymptotic_loss(k, eps):
    """The MLE's asymptotic summed variance (trace of :func:`cramer_rao`) for users drawn from
    the uniform ``theta``, against the distribution version of the bound.  The locally
    efficient estimator at ``theta``, ``theta + A I^{-1} score``, is linear and unbiased
    everywhere, so the bound applies to it.  Finite channels only (exact information)."""
    n = 1000
    theta = np.full(k, 1.0 / k)
    bound = l2_lower_bound(k, eps, n, distribution=True)
    for cls in (bayesldp.GRR, bayesldp.HadamardResponse, bayesldp.SubsetSelection):
        mech = cls(k, eps)
        if cls is bayesldp.SubsetSelection and math.comb(k, mech.d) > 5000:
            continue
        trace = float(np.trace(cramer_rao(mech.channel, theta, n)))
        assert trace >= bound * (1 - 1e-9), (mech, trace / bound)


def test_the_bound_is_on_the_worst_case_not_on_every_dataset():
    """At a skewed ``theta`` the locally efficient (linear, unbiased) estimator of subset
    selection goes below the bound's value there, ``bound + (1 - sum theta^2) / n``: the bound
    holds for the uniform dataset and hence the worst case, not pointwise.  (Found by the
    pointwise version of the test above; kept so the docstring's scope stays true.)"""
    mech = bayesldp.SubsetSelection(10, 0.5)
    theta = np.random.default_rng(5).dirichlet(np.full(10, 0.3))
    trace = float(np.trace(cramer_rao(mech.channel, theta, 1)))
    pointwise = l2_lower_bound(10, 0.5, 1) + 1.0 - float(theta @ theta)
    assert trace < pointwise * 0.999
    assert trace > pointwise * 0.98  # a little below, not far
    uniform = float(np.trace(cramer_rao(mech.channel, np.full(10, 0.1), 1)))
    assert uniform >= l2_lower_bound(10, 0.5, 1, distribution=True) * (1 - 1e-9)


def random_ldp_channel(rng, k, eps):
    """A random LDP channel: column levels in ``[1, e^eps]`` (0/1 extremal patterns half of the
    time), columns scaled at random, rows normalised.  Normalising the rows changes the
    ratios, so the channel's realised epsilon is returned with it and the bound is taken there."""
    y = int(rng.integers(k, 4 * k + 8))
    e = math.exp(eps)
    if rng.random() < 0.5:
        levels = np.where(rng.random((k, y)) < rng.random(), e, 1.0)
    else:
        levels = rng.uniform(1.0, e, size=(k, y))
    channel = levels * rng.uniform(0.1, 1.0, size=y)
    channel /= channel.sum(axis=1, keepdims=True)
    realised = float(np.log((channel.max(axis=0) / channel.min(axis=0)).max()))
    return channel, realised


def test_bound_is_below_the_best_linear_estimator_of_random_channels():
    """For a channel ``P`` the linear unbiased estimator with the smallest loss averaged over
    the inputs has loss ``tr((P D^{-1} P^T)^{-1}) - 1`` (``D`` the average row): a weighted
    least-norm solution of ``P W = I``.  Its average over inputs is at most its worst case,
    so the bound (at the channel's realised epsilon) must lie below it.  Also the MLE's
    asymptotic loss (Cramér-Rao trace) at uniform ``theta`` against the distribution
    version."""
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(300):
        k = int(rng.choice([2, 3, 4, 6]))
        channel, eps = random_ldp_channel(rng, k, float(rng.choice(EPSILONS)))
        if eps < 1e-3:
            continue
        gram = (channel / channel.mean(axis=0)) @ channel.T
        if np.linalg.matrix_rank(gram) < k:
            continue
        best_average = float(np.trace(np.linalg.inv(gram))) - 1.0
        bound = l2_lower_bound(k, eps, 1)
        assert best_average >= bound * (1 - 1e-9), (k, eps, best_average / bound)
        trace = float(np.trace(cramer_rao(channel, np.full(k, 1.0 / k), 1)))
        assert trace >= l2_lower_bound(k, eps, 1, distribution=True) * (1 - 1e-9)
        checked += 1
    assert checked > 200


# ---------------------------------------------------------------- shape of the bound
def test_bound_decreases_in_eps_and_n_and_grows_with_k():
    eps_grid = np.linspace(0.1, 8.0, 60)
    for k in KS:
        values = [l2_lower_bound(k, float(eps), 100) for eps in eps_grid]
        assert all(a > b for a, b in pairwise(values))
        by_n = [l2_lower_bound(k, 1.0, n) for n in (1, 10, 100, 1000)]
        assert by_n[0] == pytest.approx(10 * by_n[1], rel=1e-12)
        assert all(a > b for a, b in pairwise(by_n))
    for eps in EPSILONS:
        by_k = [l2_lower_bound(k, eps, 100) for k in (2, 3, 10, 100, 1000)]
        assert all(a < b for a, b in pairwise(by_k))


def test_distribution_version_adds_the_uniform_sampling_term():
    base = l2_lower_bound(3, 1.0, 200)
    assert l2_lower_bound(3, 1.0, 200, distribution=True) == pytest.approx(
        base + (1 - 1 / 3) / 200, rel=1e-12
    )


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((10, 0.0, 100), {}, InvalidInputError),
        ((10, -1.0, 100), {}, InvalidInputError),
        ((10, float("nan"), 100), {}, InvalidInputError),
        ((10, "1", 100), {}, InvalidTypeError),
        ((1, 1.0, 100), {}, InvalidInputError),
        ((2.5, 1.0, 100), {}, InvalidTypeError),
        ((True, 1.0, 100), {}, InvalidTypeError),
        ((10, 1.0, 0), {}, InvalidInputError),
        ((10, 1.0, 1.5), {}, InvalidTypeError),
        ((10, 1.0, None), {}, InvalidTypeError),
        ((3, 1.0, 10), {"distribution": "yes"}, InvalidTypeError),
    ],
)
def test_l2_lower_bound_rejects_bad_input(args, kwargs, error):
    with pytest.raises(error):
        l2_lower_bound(*args, **kwargs)


def test_support_functions_reject_bad_input():
    with pytest.raises(InvalidInputError, match="support"):
        extremal_l2_loss(5, 1.0, 5)
    with pytest.raises(InvalidInputError):
        extremal_l2_loss(5, 1.0, 0)
    with pytest.raises(InvalidTypeError):
        extremal_l2_loss(5, 1.0, 2.0)
    with pytest.raises(InvalidInputError):
        optimal_support_size(1, 1.0)
    with pytest.raises(InvalidInputError):
        optimal_support_size(5, 0)
    with pytest.raises(InvalidTypeError):
        optimal_support_size("5", 1.0)


@pytest.mark.parametrize("k", [2, 10, 100])
@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_the_l2_optimal_subset_selection_attains_the_bound_within_its_epsilon(k, eps):
    """Pan's optimal configuration as a mechanism: subset selection at the optimal support size
    has the bound's summed variance at the uniform dataset, and its channel realises exactly
    eps (the largest likelihood ratio of its reports)."""
    mech = bayesldp.SubsetSelection.l2_optimal(k, eps)
    loss = mech.oracle_variance(np.full(k, 1.0 / k), 1000).sum()
    assert loss == pytest.approx(l2_lower_bound(k, eps, 1000), rel=1e-10)
    assert mech.realised_epsilon() == pytest.approx(eps, abs=1e-12)


@pytest.mark.parametrize("k, eps", [(10, 1.0), (100, 0.5)])
def test_recommend_shows_each_mechanism_against_the_floor(k, eps):
    """``recommend --method oracle`` ranks by the exact summed variance, and its "x the L2
    floor" column is that variance over l2_lower_bound: at least 1 for every unbiased oracle."""
    from bayesldp.workflows.recommend import recommend_table

    table = recommend_table(k, eps, 10_000, "oracle")
    floor = l2_lower_bound(k, eps, 10_000)
    col = table.columns.index("x_floor")
    mse = table.columns.index("mse")
    for row in table.rows:
        assert row[col] == pytest.approx(row[mse] / floor) and row[col] >= 1 - 1e-12
    assert [r[col] for r in table.rows] == sorted(r[col] for r in table.rows)
