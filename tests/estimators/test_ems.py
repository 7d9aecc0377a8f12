"""EMS (EM + smoothing, the seed 001 authors' numerical estimator) against a dense transcription."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.ems import ems, smooth


def _dense_ems(channel, hist, kernel, smooth_gain, tol, max_iter):
    """The rule written out with the full channel T[y, x] and a dense smoothing matrix."""
    t = channel.T
    k = t.shape[1]
    s = np.zeros((k, k))
    h = len(kernel) // 2
    for i in range(k):
        for d in range(-h, h + 1):
            if 0 <= i + d < k:
                s[i, i + d] = kernel[h + d]
    s /= s.sum(axis=1, keepdims=True)
    theta, old, old_ll, gain, r = np.full(k, 1 / k), np.zeros(k), 0.0, math.inf, 0
    while np.abs(old - theta).sum() > 1 / hist.sum() and r < max_iter:
        old = theta
        p = (t.T / (t @ theta)) @ hist * theta
        theta = p / p.sum()
        if smooth_gain is None or gain > smooth_gain:
            theta = s @ theta
            theta /= theta.sum()
        ll = hist @ np.log(t @ theta)
        gain = ll - old_ll
        if r > 1 and abs(gain) < tol:
            r += 1
            break
        old_ll = ll
        r += 1
    return theta, r


def test_smooth_matches_the_row_normalised_matrix():
    theta = np.random.default_rng(0).dirichlet(np.ones(7))
    out = smooth(theta, np.array([1.0, 2.0, 1.0]))
    s = np.diag([2.0] * 7) + np.diag([1.0] * 6, 1) + np.diag([1.0] * 6, -1)
    s /= s.sum(axis=1, keepdims=True)
    want = s @ theta
    np.testing.assert_allclose(out, want / want.sum(), rtol=0, atol=1e-15)


@pytest.mark.parametrize(("kernel", "gain"), [((1, 2, 1), None), ((1, 4, 1), 0.003)])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_ems_equals_the_dense_rule(kernel, gain, eps):
    mech = bayesldp.SquareWave(32, eps, lo=-1.0, hi=1.0)
    x = np.clip(np.random.default_rng(1).normal(0.3, 0.2, 3000), -1, 1)
    reports = mech.perturb(x, rng=2)
    hist = np.bincount(mech.output_bin(reports), minlength=mech.n_outputs).astype(float)
    tol = 1e-3 * math.exp(eps)
    want, steps = _dense_ems(mech.channel, hist, kernel, gain, tol, 10_000)
    est = ems(mech.tally(reports), kernel=kernel, smooth_gain=gain)
    assert est.iterations == steps
    assert est.details["tol"] == pytest.approx(tol, rel=1e-15)
    np.testing.assert_allclose(est.frequencies, want, rtol=0, atol=1e-12)


def test_ems_rejects_a_bad_kernel():
    mech = bayesldp.SquareWave(8, 1.0)
    tally = mech.tally(mech.perturb(np.full(50, 0.5), rng=0))
    with pytest.raises(InvalidInputError, match="kernel"):
        ems(tally, kernel=(1, 2))
    with pytest.raises(InvalidInputError, match="kernel"):
        ems(tally, kernel=(1, 2, 3))


@pytest.mark.parametrize("name", ["sw", "pm"])
@pytest.mark.parametrize("eps", [0.75, 2.0])
def test_sparse_band_products_equal_the_dense_ones(name, eps, monkeypatch):
    """SW / PM rows stored as a band (zeros dropped) give the dense run's steps and weights."""
    import bayesldp.estimators.ems as ems_mod

    if name == "sw":
        mech = bayesldp.SquareWave(256, eps, lo=-1.0, hi=1.0)
        rule = {"kernel": (1, 4, 1), "smooth_gain": 0.003}
    else:
        mech = bayesldp.Piecewise(256, eps, lo=-1.0, hi=1.0)
        rule = {"kernel": (1, 2, 1)}
    x = np.clip(np.random.default_rng(3).normal(0.2, 0.3, 5000), -1, 1)
    tally = mech.tally(mech.perturb(x, rng=4))
    lik = ems_mod.Likelihood(tally)
    assert ems_mod._band_form(lik.dense) is not None
    fast = ems(tally, **rule)
    monkeypatch.setattr(ems_mod, "_band_form", lambda dense: None)  # force the dense products
    slow = ems(tally, **rule)
    assert fast.iterations == slow.iterations
    np.testing.assert_allclose(fast.frequencies, slow.frequencies, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.loglik_trace, slow.loglik_trace, rtol=1e-12)
