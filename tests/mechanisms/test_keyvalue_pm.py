"""PCKV-PM (Ye et al.'s key-value row): exact epsilon from the densities, the channel against
simulation and brute-force integrals, the key's frequency and mean from EM and the posterior."""

import math
import warnings

import numpy as np
import pytest
from scipy import integrate

import bayesldp
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.mechanisms.keyvalue import PCKVPM, svepm_half_width


def test_authors_half_width():
    """PCKV_EM.py: B = (e^{eps/2} + 9) / (10 e^{eps/2} - 10); their k and C follow."""
    for eps in (0.1, 1.3, 5.0):
        s = math.exp(eps / 2)
        b = (s + 9) / (10 * s - 10)
        assert svepm_half_width(eps) == pytest.approx(b, rel=1e-13)
        mech = PCKVPM(8, eps)
        k = b * math.exp(eps) / (b * math.exp(eps) - 1 - b)
        assert mech.values.slope_pm == pytest.approx(k, rel=1e-12)
        assert mech.values.C == pytest.approx(k + b, rel=1e-12)


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.3, 4.0, 8.0])
def test_realised_epsilon_is_the_budget(eps):
    mech = PCKVPM(16, eps, lo=-3.0, hi=5.0, output_bins=40)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9, abs=0)
    assert bayesldp.mechanisms.base.realised_epsilon_of_channel(mech.channel) <= eps * (1 + 1e-9)
    # the uniform density lies between PM's q and p: the absent row never sets the epsilon alone
    u = -math.log(mech.values.output_range[1] - mech.values.output_range[0])
    assert mech.values._log_q <= u <= mech.values._log_p


def test_channel_rows_against_the_densities():
    """Rows sum to 1; each equals the density's mass over the output bin (exact within the bin:
    ``q h + (p - q) |window(v) & C_j|``), averaged over the value bin by quad."""
    mech = PCKVPM(3, 1.0, lo=0.0, hi=2.0, output_bins=7)
    p = mech.channel
    assert p.shape == (4, 7)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-14)
    edges = mech.values.output_edges
    np.testing.assert_allclose(p[-1], np.diff(edges) / (edges[-1] - edges[0]), rtol=1e-14)
    vals = mech.values

    def mass(v, j):
        left, right = (float(t) for t in vals.window(v))
        overlap = max(0.0, min(right, edges[j + 1]) - max(left, edges[j]))
        return vals.q * (edges[j + 1] - edges[j]) + (vals.p - vals.q) * overlap

    for i in range(3):
        a, b = vals.bin_edges[i], vals.bin_edges[i + 1]
        for j in range(7):
            # the overlap bends where a window end crosses an output edge
            bends = [(e - vals._alpha - s) / vals._slope for e in edges for s in (0, vals._w)]
            pts = [t for t in bends if a < t < b]
            got, _ = integrate.quad(mass, a, b, args=(j,), points=pts or None, epsabs=1e-14)
            assert p[i, j] == pytest.approx(got / (b - a), abs=1e-12)


@pytest.mark.parametrize("x", [0, 2, 3])
def test_perturb_follows_the_channel(x):
    """Output-bin frequencies of 400,000 reports of one category within 5 standard errors."""
    mech = PCKVPM(3, 1.0, output_bins=7)
    n = 400_000
    reports = mech.perturb(np.full(n, x), rng=x)
    freq = np.bincount(mech.values.output_bin(reports), minlength=7) / n
    row = mech.channel[x]
    assert np.all(np.abs(freq - row) < 5 * np.sqrt(row * (1 - row) / n))


def test_piecewise_with_a_half_width_is_unbiased():
    """E[y | v] = v for a half-width other than Wang et al.'s (integrated), and the report
    variance from the density."""
    pm = bayesldp.Piecewise(4, 1.3, lo=-1.0, hi=1.0, half_width=svepm_half_width(1.3))
    for v in (-1.0, 0.3, 1.0):
        left, right = pm.window(v)
        pts = [float(left), float(right)]
        m1, _ = integrate.quad(lambda y, v=v: y * float(pm.density(y, v)), *pm.output_range,
                               points=pts)  # fmt: skip
        m2, _ = integrate.quad(lambda y, v=v: (y - v) ** 2 * float(pm.density(y, v)),
                               *pm.output_range, points=pts)  # fmt: skip
        assert m1 == pytest.approx(v, abs=1e-9)
        assert pm.report_variance([v])[0] == pytest.approx(m2, rel=1e-9)
    assert pm.realised_epsilon() == pytest.approx(1.3, rel=1e-12)


def _population(rng, n, share):
    holds = rng.random(n) < share
    values = np.clip(rng.normal(0.4, 0.3, n), -1.0, 1.0)
    return values, holds


def test_em_and_the_posterior_recover_the_key():
    """One tally of 200,000 users, 30% holding the key, eps = 2, 16 value bins: EM (to the
    MLE) gives the frequency within 0.02 and the mean within 0.03.  The posterior under the
    default Dirichlet(1) gets looser bounds (0.05, 0.06): spreading mass evenly over the value
    bins looks almost like the key's absence (a uniform report), so along that direction the
    likelihood is flat and the prior moves the frequency up and the mean toward the centre."""
    rng = np.random.default_rng(1)
    values, holds = _population(rng, 200_000, 0.3)
    mech = PCKVPM(16, 2.0)
    tally = mech.tally(mech.perturb_pairs(values, holds, rng=101))
    f_true, m_true = holds.mean(), values[holds].mean()
    f_em, m_em = mech.key_value(bayesldp.estimate(tally, "em").frequencies)
    assert abs(f_em - f_true) < 0.02 and abs(m_em - m_true) < 0.03
    with pytest.warns(UserWarning, match="pseudo-counts on PCKV-PM's values"):
        idata = bayesldp.fit(tally, draws=2000, tune=2000, chains=2, random_seed=5,
                             target_accept=0.95, progressbar=False)  # fmt: skip
    f_post, m_post = mech.key_value(idata.posterior["theta"].values)
    assert f_post.shape == (2, 2000)
    assert abs(f_post.mean() - f_true) < 0.05 and abs(m_post.mean() - m_true) < 0.06
    assert f_post.std() < 0.03


def test_tally_frame_and_oracle():
    mech = PCKVPM(4, 1.0)
    reports = mech.perturb(np.array([0, 1, 4, 4, 2] * 200), rng=0)
    import pandas as pd

    by_row = mech.tally_frame(pd.DataFrame({"report": reports}))
    np.testing.assert_array_equal(by_row.counts, mech.tally(reports).counts)
    est = mech.unbiased_frequencies(by_row)  # 5 outputs for 5 categories: identified
    assert est.shape == (5,) and est.sum() == pytest.approx(1.0)
    few = PCKVPM(4, 1.0, output_bins=4)
    with pytest.raises(NotSupportedError, match="at least k = 5 output bins"):
        few.unbiased_frequencies(few.tally(few.perturb(np.zeros(50, int), rng=1)))


def test_bad_input():
    mech = PCKVPM(4, 1.0)
    with pytest.raises(InvalidInputError, match="outside the domain"):
        mech.perturb_pairs([0.5, 1.5], np.array([True, True]))
    mech.perturb_pairs([0.5, 1.5], np.array([True, False]), rng=0)  # unheld values unread
    with pytest.raises(InvalidInputError, match="1 NaN"):
        mech.perturb_pairs([np.nan, 0.1], np.array([True, True]))
    with pytest.raises(InvalidInputError, match="booleans"):
        mech.perturb_pairs([0.5, 0.1], [1, 0])
    with pytest.raises(InvalidInputError, match="one entry per user"):
        mech.perturb_pairs([0.5], np.array([True, False]))
    with pytest.raises(InvalidInputError, match="outside the range"):
        mech.tally([0.0, 99.0])
    with pytest.raises(InvalidInputError, match="half_width: must exceed"):
        PCKVPM(4, 1.0, half_width=0.1)
    with pytest.raises(InvalidInputError, match="last axis of 5"):
        mech.key_value(np.ones(4) / 4)
    with pytest.warns(RuntimeWarning, match="no mass"):
        f, m = mech.key_value(np.array([0, 0, 0, 0, 1.0]))
    assert f == 0 and np.isnan(m)


def test_prior_is_uniform_on_the_frequency():
    """Dirichlet(c/B, ..., c/B, c): the absence's marginal is Beta(c, c), by sampling; ``fit``
    given a prior does not warn of the default one."""
    mech = PCKVPM(8, 1.0)
    alpha = mech.prior(2.0).alpha
    np.testing.assert_allclose(alpha, np.r_[np.full(8, 0.25), 2.0])
    absent = np.random.default_rng(0).dirichlet(mech.prior().alpha, 20_000)[:, -1]
    counts = np.histogram(absent, bins=10, range=(0, 1))[0]
    assert np.all(np.abs(counts - 2000) < 5 * math.sqrt(2000 * 0.9))
    tally = mech.tally(mech.perturb(np.arange(9).repeat(50), rng=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        bayesldp.fit(
            tally,
            prior=1.0,
            method="laplace",
            draws=50,
            progressbar=False,
            compute_convergence_checks=False,
        )


def test_svepm_rule_is_the_authors_start_and_rule():
    mech = PCKVPM(1024, 1.3)
    rule = mech.svepm_rule(100_000)
    start = np.full(1025, 1 / 1024 / 8)
    start[:250], start[1024] = 1e-7, 7 / 8
    np.testing.assert_allclose(rule["theta0"], start / start.sum(), rtol=1e-15)
    assert rule["tol"] == pytest.approx(1e-4 * math.exp(1.3))
    assert rule["change_tol"] == pytest.approx(1e-7) and rule["min_steps"] == 2000


def test_audit_lower_bound_stays_below_epsilon():
    """Empirical epsilon (200,000 reports per input, the lowest and highest value bins): near
    the budget and never above it."""
    from bayesldp.audit import audit

    result = audit(PCKVPM(8, 1.0), 0, 7, trials=200_000, rng=0)
    assert 0.9 < result.epsilon_lower_bound <= 1.0
