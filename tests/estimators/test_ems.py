"""EMS (EM + smoothing, Ye et al.'s numerical estimator) against a dense transcription."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.ems import ems, smooth


def _dense_ems(channel, hist, kernel, smooth_gain, tol, max_iter, min_steps=2, change_tol=None,
               bins=None):  # fmt: skip
    """The rule written out with the full channel T[y, x] and a dense smoothing matrix over
    the first ``bins`` weights."""
    t = channel.T
    k = bins or t.shape[1]
    change_tol = change_tol or 1 / hist.sum()
    s = np.zeros((k, k))
    h = len(kernel) // 2
    for i in range(k):
        for d in range(-h, h + 1):
            if 0 <= i + d < k:
                s[i, i + d] = kernel[h + d]
    s /= s.sum(axis=1, keepdims=True)
    theta, old, old_ll, gain, r = np.full(t.shape[1], 1 / t.shape[1]), 0, 0.0, math.inf, 0
    while np.abs(old - theta).sum() > change_tol and r < max_iter:
        old = theta
        p = (t.T / (t @ theta)) @ hist * theta
        theta = p / p.sum()
        if smooth_gain is None or gain > smooth_gain:
            theta = np.concatenate([s @ theta[:k], theta[k:]])
            theta /= theta.sum()
        ll = hist @ np.log(t @ theta)
        gain = ll - old_ll
        if r + 1 > min_steps and abs(gain) < tol:
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


def test_ems_on_pckv_pm_smooths_the_value_bins_alone():
    """The authors' PCKV-PM rule (``myEM_one``): [1, 2, 1] while the gain exceeds 0.0003, tol
    1e-4 e^eps, at least 2000 steps, L1 rule 1 / (100 N); the absence is not smoothed."""
    mech = bayesldp.PCKVPM(24, 1.3)
    rng = np.random.default_rng(3)
    holds = rng.random(4000) < 0.2
    reports = mech.perturb_pairs(np.clip(rng.normal(0.5, 0.2, 4000), -1, 1), holds, rng=4)
    hist = np.bincount(mech.values.output_bin(reports), minlength=mech.n_outputs).astype(float)
    rule = dict(kernel=(1, 2, 1), smooth_gain=0.0003, tol=1e-4 * math.exp(1.3),
                min_steps=2000, change_tol=1 / (100 * hist.sum()))  # fmt: skip
    want, steps = _dense_ems(mech.channel, hist, rule["kernel"], rule["smooth_gain"],
                             rule["tol"], 10_000, rule["min_steps"], rule["change_tol"],
                             bins=24)  # fmt: skip
    est = ems(mech.tally(reports), **rule)
    assert est.details["smoothed_bins"] == 24 and steps > 2000
    assert est.iterations == steps
    np.testing.assert_allclose(est.frequencies, want, rtol=0, atol=1e-12)
    with pytest.raises(InvalidInputError, match="at most k = 25"):
        ems(mech.tally(reports), smoothed_bins=26)


def test_ems_from_a_start():
    """``theta0`` replaces the uniform start: the same as the written-out rule from it."""
    mech = bayesldp.Piecewise(16, 1.0, lo=-1.0, hi=1.0)
    reports = mech.perturb(np.clip(np.random.default_rng(1).normal(0.3, 0.2, 3000), -1, 1), rng=2)
    start = np.linspace(1, 2, 16) / np.linspace(1, 2, 16).sum()
    est = ems(mech.tally(reports), theta0=start, max_iter=1)
    hist = np.bincount(mech.output_bin(reports), minlength=16)
    t = mech.channel.T
    p = (t.T / (t @ start)) @ hist * start
    np.testing.assert_allclose(est.frequencies, smooth(p / p.sum(), (1, 2, 1)), atol=1e-13)
    with pytest.raises(InvalidInputError, match="theta0"):
        ems(mech.tally(reports), theta0=np.ones(16))


def test_ems_rejects_a_bad_kernel():
    mech = bayesldp.SquareWave(8, 1.0)
    tally = mech.tally(mech.perturb(np.full(50, 0.5), rng=0))
    with pytest.raises(InvalidInputError, match="kernel"):
        ems(tally, kernel=(1, 2))
    with pytest.raises(InvalidInputError, match="kernel"):
        ems(tally, kernel=(1, 2, 3))


# ---------------------------------------------------------------------------- EM-MR (ems_mr)
def _dense_ems_mr(channel, hist, threshold, tol, cap, remained=0.25):
    """The authors' EMS_reduct rule written out with loops over windows and the full channel
    (zero-count outputs included), as a check of ems_mr's vectorised windows and tally rows."""
    t = channel.T.copy()
    k = t.shape[1]
    n = hist.sum()
    s = np.zeros((k, k))
    for i in range(k):
        for d in (-1, 0, 1):
            if 0 <= i + d < k:
                s[i, i + d] = 2.0 if d == 0 else 1.0
    s /= s.sum(axis=1, keepdims=True)
    theta, old = np.full(k, 1 / k), np.zeros(k)
    removed = [0] * k
    active, length, rnd, count, merges = k, k // 2, 0.0, 0, []
    super_f = threshold / 2 if n > 100_000 else 0.03
    while True:
        rnd += 1
        r, old_ll = 0, 0.0
        while np.abs(old - theta).sum() > 1 / n and r < cap and k * remained < active:
            old = theta.copy()
            p = (t.T / (t @ old)) @ hist * old
            theta = s @ (p / p.sum())
            theta = theta / theta.sum()
            ll = hist @ np.log(t @ theta)
            if r > 1 and abs(ll - old_ll) < tol:
                break
            old_ll = ll
            r += 1
        if rnd >= int(math.sqrt(1 / remained)) + 2 or length < 64:
            break
        tol, cap = 2 * tol, cap / 2
        value, first, last, seen = [1.0] * (k - length), 0, 0, False
        for i in range(k - length):
            clash = any(removed[j + i] for j in range(length))
            if not clash and (i < length + 150 or i > k - length - 150):
                value[i] = sum(theta[i : i + length])
                last = i
                if not seen:
                    seen, first = True, i
        start = value.index(min(value))
        if (
            abs(value[start] - value[last]) < super_f / 2 ** (rnd - 1)
            and value[first] > 2 * value[last]
        ):
            start = last
        elif abs(value[start] - value[first]) < super_f / 2 ** (rnd - 1):
            start = first
        if value[start] < threshold / 2**count:
            count += 1
            for i in range(length):
                theta[i + start + 1] = 0
                removed[i + start + 1] = 1
            active -= length
            theta[start + length // 2 + 1] = value[start] / (1.1 if n > 100_000 else 3)
            column = t[:, start : start + length].sum(axis=1) / length
            merges.append((start, length))
            length //= 2
            t[:, start + length] = column
        else:
            length -= 64
            rnd -= 1 if sum(removed) == 0 else 0.5
    for start, width in merges:
        theta[start : start + width] = sum(theta[start : start + width]) / width
    return theta / theta.sum(), merges


@pytest.mark.parametrize(("cls", "eps"), [("SquareWave", 1.0), ("Piecewise", 2.0)])
def test_ems_mr_equals_the_written_out_rule(cls, eps):
    """A population on the lower third of [-1, 1] (the upper end empty, so windows merge)."""
    mech = getattr(bayesldp, cls)(256, eps, lo=-1.0, hi=1.0)
    x = np.clip(np.random.default_rng(3).normal(-0.6, 0.15, 4000), -1, 1)
    reports = mech.perturb(x, rng=4)
    hist = np.bincount(mech.output_bin(reports), minlength=mech.n_outputs).astype(float)
    est = bayesldp.estimate(mech.tally(reports), "ems_mr")
    d = est.details
    want, merges = _dense_ems_mr(mech.channel, hist, d["threshold"], d["tol"],
                                 10_000 if cls == "SquareWave" else 5_000)  # fmt: skip
    assert merges and est.details["merged"] == merges
    np.testing.assert_allclose(est.frequencies, want, rtol=0, atol=1e-10)
    assert est.frequencies.sum() == pytest.approx(1.0, abs=1e-12)
    for start, width in merges:  # each merged window is flat
        assert np.ptp(est.frequencies[start : start + width]) == 0


def test_ems_mr_defaults_are_the_authors_thresholds():
    x = np.random.default_rng(0).uniform(-1, 1, 5000)
    sw = bayesldp.SquareWave(64, 1.0, lo=-1.0, hi=1.0)
    d = bayesldp.estimate(sw.tally(sw.perturb(x, rng=1)), "ems_mr").details
    assert d["threshold"] == pytest.approx(0.4 / math.exp(0.5) / (math.log(5000) - 1))
    assert d["tol"] == pytest.approx(1e-3 * math.e)
    pm = bayesldp.Piecewise(64, 0.5, lo=-1.0, hi=1.0)  # eps <= 0.5, n < 1e5: / (e^eps - 1)
    d = bayesldp.estimate(pm.tally(pm.perturb(x, rng=1)), "ems_mr").details
    want = 0.4 / math.exp(0.25) / (math.log(5000) - 1) / (math.exp(0.5) - 1)
    assert d["threshold"] == pytest.approx(want)


def test_ems_mr_bad_input():
    mech = bayesldp.SquareWave(16, 1.0)
    tally = mech.tally(mech.perturb(np.full(100, 0.5), rng=0))
    with pytest.raises(InvalidInputError, match="remained"):
        bayesldp.estimate(tally, "ems_mr", remained=0.0)
    with pytest.raises(InvalidInputError, match="threshold"):
        bayesldp.estimate(tally, "ems_mr", threshold=-1.0)
    tiny = mech.tally(mech.perturb(np.full(2, 0.5), rng=0))
    with pytest.raises(InvalidInputError, match="N >= 3"):
        bayesldp.estimate(tiny, "ems_mr")


@pytest.mark.parametrize("name", ["sw", "pm"])
@pytest.mark.parametrize("eps", [0.75, 2.0])
def test_sparse_band_products_equal_the_dense_ones(name, eps, monkeypatch):
    """SW / PM rows stored as a band (zeros dropped) give the dense run's steps and weights."""

    if name == "sw":
        mech = bayesldp.SquareWave(256, eps, lo=-1.0, hi=1.0)
        rule = {"kernel": (1, 4, 1), "smooth_gain": 0.003}
    else:
        mech = bayesldp.Piecewise(256, eps, lo=-1.0, hi=1.0)
        rule = {"kernel": (1, 2, 1)}
    x = np.clip(np.random.default_rng(3).normal(0.2, 0.3, 5000), -1, 1)
    tally = mech.tally(mech.perturb(x, rng=4))
    import bayesldp.likelihood as lk

    assert lk.Likelihood(tally).kind == "band"
    fast = ems(tally, **rule)
    band_form = lk.band_form
    monkeypatch.setattr(lk, "band_form", lambda *args: (False, band_form(*args)[1]))
    assert lk.Likelihood(tally).kind == "dense"  # the dense products
    slow = ems(tally, **rule)
    assert fast.iterations == slow.iterations
    np.testing.assert_allclose(fast.frequencies, slow.frequencies, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.loglik_trace, slow.loglik_trace, rtol=1e-12)


@pytest.mark.parametrize("name", ["laplace", "gaussian", "oue"])
def test_ems_runs_the_dense_rows_that_are_no_band(name):
    """Laplace, Gaussian and unary-encoding rows stay dense; the steps are the dense rule's."""
    import bayesldp.estimators.ems as ems_mod

    if name == "oue":
        mech = bayesldp.OUE(12, 1.0)
        tally = mech.simulate_tally(np.arange(1, 13) * 50, rng=6)
        channel = tally.rows.T
        hist = tally.counts.astype(float)
    else:
        cls = bayesldp.LaplaceNumeric if name == "laplace" else bayesldp.Gaussian
        kwargs = {"delta": 1e-6} if name == "gaussian" else {}
        mech = cls(24, 1.0, lo=-1.0, hi=1.0, **kwargs)
        reports = mech.perturb(np.clip(np.random.default_rng(6).normal(0, 0.4, 4000), -1, 1), rng=7)
        tally = mech.tally(reports)
        channel = mech.channel
        hist = np.bincount(mech.output_bin(reports), minlength=mech.n_outputs).astype(float)
    assert ems_mod.Likelihood(tally).kind != "band"
    want, steps = _dense_ems(channel, hist, (1, 2, 1), None, 1e-3 * math.e, 10_000)
    est = ems(tally)
    assert est.iterations == steps
    np.testing.assert_allclose(est.frequencies, want, rtol=0, atol=1e-12)


def test_ems_gives_the_same_bits_wherever_its_arrays_lie():
    """EMS starts the smoothness and logistic-normal priors' samplers, whose chains turn a
    difference in the last bit into different draws for the same seed, so it must not depend
    on where its arrays lie in memory (it did, with its loop's sums reassociated: 47 of 2,000
    calls on this tally differed from the first).  2,000 calls with the heap shifted between
    them: at that rate (2.4 %) all of them agree with probability about e^-48."""
    k = 9
    theta = np.arange(1.0, k + 1) ** -1.5
    rng = np.random.default_rng(0)
    tally = bayesldp.GRR(k, 1.0).simulate_tally(rng.multinomial(3000, theta / theta.sum()), rng=1)
    first = ems(tally).frequencies
    held = []
    for size in rng.integers(1, 64, 2000):
        held.append(np.empty(size))  # moves where the next call's arrays are allocated
        np.testing.assert_array_equal(ems(tally).frequencies, first)
