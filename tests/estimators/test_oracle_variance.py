"""The oracle variance formulas against the exact variance and against a Monte Carlo check with
the power to see a 10 % error (variance checks at rtol 0.1-0.5 could not).

For ``n`` users with fixed true values (``n_v`` of value ``v``) the report counts are a sum of
independent multinomials, ``Cov[c] = sum_v n_v (diag(P_v) - P_v P_v^T)``, and the channel-inverse
estimate ``f = P^{-T} c / n`` (for GRR, the pure protocol's ``(c/n - q) / (p - q)``) has the
exact variance ``diag(P^{-T} Cov[c] P^{-1}) / n^2``, computed here from the channel alone.
"""

import numpy as np
import pytest

import bayesldp
from bayesldp.mechanisms.base import FiniteChannelMechanism, PureProtocol


def exact_variance(channel, counts):
    """``Var[P^{-T} c / n]`` for fixed true counts, from the multinomials' covariance."""
    counts = np.asarray(counts, dtype=float)
    cov = sum(nv * (np.diag(pv) - np.outer(pv, pv)) for nv, pv in zip(counts, channel, strict=True))
    inv = np.linalg.inv(channel)
    return np.diag(inv.T @ cov @ inv) / counts.sum() ** 2


MECHANISMS = [
    bayesldp.GRR(3, 0.5),
    bayesldp.GRR(6, 1.0),
    bayesldp.GRR(10, 3.0),
    bayesldp.RRRR(k=6, epsilon=1.0, subset=[0, 1], eps1=0.7),
]


@pytest.mark.parametrize("mech", MECHANISMS, ids=repr)
def test_oracle_variance_is_the_exact_variance(mech):
    """Every formula the mechanism carries (the pure protocol's closed form for GRR, the channel
    formula of :class:`FiniteChannelMechanism`) equals the exact variance to 1e-10 relative,
    at two fixed populations, one with empty categories."""
    k = mech.k
    for counts in (np.arange(1, k + 1) * 37, np.r_[np.zeros(k - 2), 400, 100]):
        theta, n = counts / counts.sum(), int(counts.sum())
        exact = exact_variance(mech.channel, counts)
        np.testing.assert_allclose(mech.oracle_variance(theta, n), exact, rtol=1e-10)
        np.testing.assert_allclose(FiniteChannelMechanism.oracle_variance(mech, theta, n), exact,
                                   rtol=1e-10)  # fmt: skip
        if isinstance(mech, PureProtocol):
            np.testing.assert_allclose(PureProtocol.oracle_variance(mech, theta, n), exact,
                                       rtol=1e-10)  # fmt: skip


def test_grr_oracle_variance_by_monte_carlo_sees_a_ten_percent_error():
    """GRR (K = 4, eps = 1), a fixed population of n = 400, R = 20,000 simulated surveys.  The
    sample variance of each coordinate has relative standard error ``sqrt(2 / R)`` (times
    ``sqrt(1 + kurtosis / 2)``, about 1 here) = 0.010; the check allows 4.5 of them (4 coordinates,
    family-wise false alarm about 3e-5), so a formula 10 % off (10 standard errors) fails with
    probability above 0.9999 and the smallest relative error it detects with power 0.9 is about
    6 %.  The simulated estimates are the package's own (checked on the first 20 surveys)."""
    mech = bayesldp.GRR(4, 1.0)
    counts = np.array([200, 120, 60, 20])
    n, reps = int(counts.sum()), 20_000
    gen = np.random.default_rng(36)
    report_counts = sum(
        gen.multinomial(nv, pv, size=reps) for nv, pv in zip(counts, mech.channel, strict=True)
    )
    est = (report_counts / n - mech.q) / (mech.p - mech.q)
    for c, f in zip(report_counts[:20], est[:20], strict=True):
        np.testing.assert_allclose(
            mech.unbiased_frequencies(mech.tally_from_report_counts(c)), f, rtol=1e-12
        )
    var = mech.oracle_variance(counts / n, n)
    emp = est.var(axis=0, ddof=1)
    rel_se = np.sqrt(2.0 / (reps - 1))
    z = (emp / var - 1.0) / rel_se
    assert np.all(np.abs(z) < 4.5), z
    theta = counts / n
    assert np.all(np.abs(est.mean(axis=0) - theta) < 4.5 * np.sqrt(var / reps))
