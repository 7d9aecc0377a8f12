import numpy as np
import pytest
from scipy import stats

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.estimators.postprocess import (
    POSTPROCESSORS,
    base_cut,
    base_pos,
    norm,
    norm_cut,
    norm_mul,
    norm_sub,
    projection,
)

SIMPLEX_METHODS = ["norm_mul", "norm_cut", "norm_sub", "projection"]


def literal_norm_sub(f):
    """The iteration as written by Wang et al. (and their reference code), for comparison."""
    est = np.array(f, dtype=float)
    for _ in range(10 * est.size + 10):
        if not ((est < 0).any() or abs(est.sum() - 1) > 1e-13):
            break
        est[est < 0] = 0
        mask = est > 0
        est[mask] += (1 - est.sum()) / mask.sum()
    return est


def bisection_projection(f):
    """Projection onto the simplex by bisection on the threshold tau (independent method)."""
    lo, hi = f.min() - 1.0, f.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(f - mid, 0).sum() > 1:
            lo = mid
        else:
            hi = mid
    return np.maximum(f - 0.5 * (lo + hi), 0)


# ---------------------------------------------------------------- hand-worked examples
F = np.array([0.5, 0.4, 0.3, 0.1, -0.2])  # sums to 1.1


def test_base_pos_hand_example():
    np.testing.assert_allclose(base_pos(F), [0.5, 0.4, 0.3, 0.1, 0.0])


def test_norm_hand_example():
    np.testing.assert_allclose(norm(F), F - 0.02, atol=1e-15)
    assert norm(F).sum() == pytest.approx(1.0, abs=1e-15)


def test_norm_mul_hand_example():
    np.testing.assert_allclose(norm_mul(F), np.array([5, 4, 3, 1, 0]) / 13, atol=1e-15)


def test_norm_cut_hand_example():
    # running sums 0.5, 0.9, 1.2: the third entry crosses 1 and is kept, the rest is zeroed
    np.testing.assert_allclose(norm_cut(F), np.array([5, 4, 3, 0, 0]) / 12, atol=1e-15)


def test_norm_cut_positives_below_one_keeps_all_positives():
    f = np.array([0.3, -0.1, 0.2, 0.1])
    np.testing.assert_allclose(norm_cut(f), np.array([3, 0, 2, 1]) / 6, atol=1e-15)


def test_norm_sub_hand_example_single_downward_shift():
    # zero -0.2; positives sum to 1.3; subtract 0.3 / 4 = 0.075 from each: all stay positive
    np.testing.assert_allclose(norm_sub(F), [0.425, 0.325, 0.225, 0.025, 0.0], atol=1e-15)


def test_norm_sub_hand_example_two_rounds():
    # round 1: [0.6, 0.5, 0.04] - 0.14/3 -> 0.04 goes negative; round 2: [0.6, 0.5] - 0.05
    f = np.array([0.6, 0.5, 0.04, -0.1])
    np.testing.assert_allclose(norm_sub(f), [0.55, 0.45, 0.0, 0.0], atol=1e-15)


def test_norm_sub_hand_example_upward_shift_differs_from_projection():
    f = np.array([0.3, 0.2, -0.1, 0.1])
    # Norm-Sub: positives sum to 0.6, each gets + 0.4 / 3; the negative entry stays 0
    np.testing.assert_allclose(norm_sub(f), [0.3 + 0.4 / 3, 0.2 + 0.4 / 3, 0, 0.1 + 0.4 / 3])
    # the Euclidean projection adds 0.125 to every entry instead (tau = -0.125)
    np.testing.assert_allclose(projection(f), [0.425, 0.325, 0.025, 0.225], atol=1e-15)


def test_base_cut_hand_example():
    f = np.array([0.5, 0.02, 0.3, 0.1, 0.08])
    threshold = stats.norm.ppf(1 - 0.05 / 5) * 0.03  # 0.0698
    assert 0.02 < threshold < 0.08
    np.testing.assert_allclose(base_cut(f, 0.03), [0.5, 0.0, 0.3, 0.1, 0.08])
    # a larger alpha lowers the threshold below 0.02
    np.testing.assert_allclose(base_cut(f, 0.01, alpha=0.5), f)


# ---------------------------------------------------------------- properties
def test_norm_sub_closed_form_matches_the_paper_iteration():
    rng = np.random.default_rng(0)
    for _ in range(500):
        k = int(rng.integers(2, 30))
        f = rng.normal(1 / k, rng.choice([0.01, 0.1, 0.5]), size=k)
        np.testing.assert_allclose(norm_sub(f), literal_norm_sub(f), atol=1e-12)


def test_projection_matches_bisection_and_is_optimal():
    rng = np.random.default_rng(1)
    for _ in range(300):
        k = int(rng.integers(2, 40))
        f = rng.normal(1 / k, 0.3, size=k)
        p = projection(f)
        np.testing.assert_allclose(p, bisection_projection(f), atol=1e-12)
        # KKT: f - p is constant (= tau) on the support and f <= tau off it
        tau = (f - p)[p > 0]
        assert np.ptp(tau) < 1e-12
        assert np.all(f[p == 0] <= tau[0] + 1e-12)


@pytest.mark.parametrize("method", SIMPLEX_METHODS)
def test_simplex_methods_land_on_the_simplex(method):
    rng = np.random.default_rng(2)
    f = rng.normal(0.05, 0.2, size=(200, 20))
    out = POSTPROCESSORS[method](f, None)
    assert np.all(out >= 0)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("method", list(POSTPROCESSORS))
def test_vectorised_over_leading_axes(method):
    rng = np.random.default_rng(3)
    f = rng.normal(0.1, 0.3, size=(3, 4, 10))
    sd = rng.uniform(0.01, 0.1, size=10)
    batch = POSTPROCESSORS[method](f, sd)
    assert batch.shape == f.shape
    for i in range(3):
        for j in range(4):
            np.testing.assert_array_equal(batch[i, j], POSTPROCESSORS[method](f[i, j], sd))


@pytest.mark.parametrize("method", ["norm_mul", "norm_cut", "norm_sub"])
def test_no_positive_entry_gives_uniform(method):
    out = POSTPROCESSORS[method](np.array([-0.1, -0.2, 0.0, -0.3]), None)
    np.testing.assert_array_equal(out, np.full(4, 0.25))


@pytest.mark.parametrize("method", list(POSTPROCESSORS))
def test_never_nan_on_extreme_input(method):
    for f in (np.zeros(5), np.full(5, -1e6), np.array([1e6, -1e6, 0, 0, 0]), np.full(5, 0.2)):
        out = POSTPROCESSORS[method](f, np.full(5, 1e3))
        assert np.all(np.isfinite(out))


def test_already_consistent_input_is_left_alone():
    f = np.array([0.5, 0.3, 0.2, 0.0])
    for method in SIMPLEX_METHODS:
        np.testing.assert_allclose(POSTPROCESSORS[method](f, None), f, atol=1e-15)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("method", list(POSTPROCESSORS))
def test_nan_input_rejected(method):
    with pytest.raises(InvalidInputError, match="f: contains NaN"):
        POSTPROCESSORS[method](np.array([0.5, np.nan]), np.ones(2))


def test_bad_types_and_sd():
    with pytest.raises(InvalidTypeError, match="f:"):
        norm_sub(np.array([True, False]))
    with pytest.raises(InvalidInputError, match="sd: this method needs"):
        base_cut(np.array([0.5, 0.5]), None)
    with pytest.raises(InvalidInputError, match="sd: standard deviations"):
        base_cut(np.array([0.5, 0.5]), np.array([0.1, -0.1]))
    with pytest.raises(InvalidInputError, match="sd: shape"):
        base_cut(np.array([0.5, 0.5]), np.ones(3))
    with pytest.raises(InvalidInputError, match="alpha"):
        base_cut(np.array([0.5, 0.5]), 0.1, alpha=1.5)
