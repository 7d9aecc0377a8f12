"""Subset selection (Aydın and Yıldırım 2025): the numpy reference against brute force, and the
compiled kernels
of the survey loop against the numpy reference."""

import numpy as np
import pytest

import bayesldp
from bayesldp.adaptive import _kernels as kn
from bayesldp.adaptive import utilities as U
from bayesldp.adaptive.selection import (
    candidate_channels,
    candidate_params,
    non_adaptive_subset,
    select_subset,
    semi_adaptive_subset,
    sorted_order,
)
from bayesldp.mechanisms.rrrr import rrrr_channel, rrrr_eps2

UTILS = list(U.UTILITIES)


def _thetas(k, n, seed, conc=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(k, conc), size=n)


@pytest.mark.parametrize("k", [2, 3, 7, 20])
@pytest.mark.parametrize("frac", [0.5, 0.8, 1.0])
def test_candidate_stack_equals_rrrr_channel_bit_for_bit(k, frac):
    eps = 1.3
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(k)
        stack = candidate_channels(order, eps, frac * eps)
        assert stack.shape == (k, k, k)
        for s in range(k):
            ref = rrrr_channel(k, order[:s], frac * eps, rrrr_eps2(eps, frac * eps, s, k))
            assert np.array_equal(stack[s], ref)
            mech = bayesldp.RRRR(k, eps, order[:s].tolist(), eps1=frac * eps)
            assert np.array_equal(stack[s], mech.channel)


@pytest.mark.parametrize("utility", UTILS)
@pytest.mark.parametrize("k,eps,frac", [(5, 0.5, 0.8), (10, 1.0, 0.9), (20, 5.0, 0.8)])
def test_select_subset_equals_brute_force(utility, k, eps, frac):
    fn = U.get_utility(utility)
    for theta in _thetas(k, 5, seed=k):
        subset, size, scores = select_subset(theta, eps, utility, frac)
        order = np.argsort(-theta, kind="stable")
        brute = np.array(
            [
                fn(theta, bayesldp.RRRR(k, eps, order[:s].tolist(), eps1=frac * eps).channel)
                for s in range(k)
            ]
        )
        np.testing.assert_array_equal(scores, brute)
        assert size == int(np.argmax(brute))
        assert subset == tuple(order[:size].tolist())
        assert len(subset) == size


def test_ties_go_to_the_smallest_subset():
    # K = 2 and eps1 = eps: S = {top} (m = 1) is GRR(2, eps1) = GRR(2, eps), the same channel as
    # S = {} -- every utility ties exactly, and both implementations must return |S| = 0
    theta = np.array([0.7, 0.3])
    params = candidate_params(2, 1.0, 1.0)
    for utility in UTILS:
        _, size, scores = select_subset(theta, 1.0, utility, eps1_fraction=1.0)
        assert scores[0] == scores[1] and size == 0
        sizes, _ = kn.choose_many(theta[None], kn.RULE_CODES[utility], 1.0, params)
        assert sizes[0] == 0


def test_sorted_order_is_stable():
    theta = np.array([0.2, 0.3, 0.2, 0.3])
    np.testing.assert_array_equal(sorted_order(theta), [1, 3, 0, 2])
    order = np.arange(4)
    rank = np.empty(4, dtype=np.int64)
    kn.sort_desc(theta, order, rank)
    np.testing.assert_array_equal(order, [1, 3, 0, 2])
    order = np.array([2, 0, 3, 1])  # warm start from another permutation: same result
    kn.sort_desc(theta, order, rank)
    np.testing.assert_array_equal(order, [1, 3, 0, 2])
    np.testing.assert_array_equal(rank[order], np.arange(4))


def test_semi_and_non_adaptive_rules_by_hand():
    theta = np.array([0.2, 0.5, 0.3])
    assert semi_adaptive_subset(theta, 0.5) == (1,)
    assert semi_adaptive_subset(theta, 0.51) == (1, 2)
    assert semi_adaptive_subset(theta, 0.8) == (1, 2)
    assert semi_adaptive_subset(theta, 0.81) == ()  # only the whole domain holds 0.81
    assert semi_adaptive_subset(theta, 1.0) == ()  # alpha = 1: plain SRR
    assert semi_adaptive_subset(theta, 0.2) == (1,)
    assert non_adaptive_subset(theta) == ()


@pytest.mark.parametrize("utility", UTILS)
@pytest.mark.parametrize(
    "k,eps,frac", [(3, 0.5, 0.8), (10, 0.5, 0.9), (20, 1.0, 0.8), (20, 5.0, 1.0)]
)
def test_kernel_selections_equal_numpy(utility, k, eps, frac):
    thetas = np.vstack([_thetas(k, 60, seed=1, conc=0.2), _thetas(k, 60, seed=2, conc=2.0)])
    params = candidate_params(k, eps, frac * eps)
    sizes, orders = kn.choose_many(thetas, kn.RULE_CODES[utility], 1.0, params)
    got = kn.scores_many(thetas, kn.RULE_CODES[utility], params)
    for i, theta in enumerate(thetas):
        subset, size, scores = select_subset(theta, eps, utility, frac)
        assert sizes[i] == size
        assert tuple(orders[i, :size].tolist()) == subset
        finite = np.isfinite(scores)
        np.testing.assert_array_equal(np.isfinite(got[i]), finite)
        np.testing.assert_allclose(got[i][finite], scores[finite], rtol=1e-9, atol=1e-12)


def test_kernel_semi_adaptive_equals_numpy():
    k = 10
    params = candidate_params(k, 1.0, 1.0)
    thetas = _thetas(k, 200, seed=3, conc=0.3)
    for alpha in [0.2, 0.6, 0.8, 0.9, 0.95, 1.0]:
        sizes, orders = kn.choose_many(thetas, kn.SEMI_ADAPTIVE, alpha, params)
        for i, theta in enumerate(thetas):
            assert tuple(orders[i, : sizes[i]].tolist()) == semi_adaptive_subset(theta, alpha)
    sizes, _ = kn.choose_many(thetas, kn.NON_ADAPTIVE, 1.0, params)
    assert not sizes.any()


def test_fisher_kernel_handles_singular_channels():
    # eps1 = eps makes eps2 = 0 for 1 <= |S| <= K - 2: singular channels score -inf in both
    k = 6
    theta = _thetas(k, 1, seed=4)[0]
    _, _, ref = select_subset(theta, 1.0, "fisher", eps1_fraction=1.0)
    order = np.arange(k)
    rank = np.empty(k, dtype=np.int64)
    kn.sort_desc(theta, order, rank)
    out = np.empty(k)
    kn.scores(theta, order, rank, kn.FISHER, candidate_params(k, 1.0, 1.0), out)
    assert np.isneginf(ref[1 : k - 1]).all() and np.isneginf(out[1 : k - 1]).all()
    np.testing.assert_allclose(out[[0, k - 1]], ref[[0, k - 1]], rtol=1e-10)


def test_input_errors():
    theta = np.array([0.5, 0.3, 0.2])
    with pytest.raises(ValueError, match="utility"):
        select_subset(theta, 1.0, "nope")
    with pytest.raises(ValueError, match="eps1_fraction"):
        select_subset(theta, 1.0, "tv", eps1_fraction=0.0)
    with pytest.raises(ValueError, match="eps1_fraction"):
        select_subset(theta, 1.0, "tv", eps1_fraction=1.5)
    with pytest.raises(ValueError, match="alpha"):
        semi_adaptive_subset(theta, 0.0)
    with pytest.raises(ValueError, match="alpha"):
        semi_adaptive_subset(theta, 1.01)
    with pytest.raises(ValueError, match="sum to 1"):
        select_subset(np.array([0.5, 0.6]), 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        select_subset(theta, -1.0)
    with pytest.raises(TypeError, match="theta"):
        select_subset(np.array([True, False]), 1.0)
