"""A calibrated check of the mechanism and epsilon a tally is analysed under, free of ``theta``.

A posterior predictive p-value of the tally's own statistic (:func:`~bayesldp.bayes.ppc.
sample_posterior_predictive`) is not a calibrated test: the posterior was fitted to the same
data, so under a correct model its p-values pile up away from 0 and 1, and on a saturated
channel (GRR: ``K`` report counts, ``K - 1`` free frequencies plus ``n``) a wrong epsilon is
another ``theta`` of the right one whenever that ``theta`` lies in the simplex, so no statistic
of the report counts can flag it.  What can be tested is a statistic whose law under the
claimed mechanism does not depend on ``theta``.  For a pure protocol (Wang, Blocki, Li and Jha,
"Locally Differentially Private Protocols for Frequency Estimation", 2017) a report ``y`` of a
user holding ``v`` supports ``v`` with probability ``p*`` and each other category with
probability ``q*``, so the size of its support ``|S(y)|`` has the mean

.. math::

    \\mu = p^* + (K - 1)\\, q^*

whatever ``v`` is: the total support count ``T = sum_x h(x) = sum_i |S(y_i)|`` has mean
``n mu`` under every ``theta``, and a wrong epsilon moves it by ``n (p*_1 - p*_2) + n (K - 1)
(q*_1 - q*_2)``, thousands of standard deviations at ``n = 10^4``.  :func:`check_mechanism`
tests it:

* unary encoding (SUE, OUE) and THE: the ``K`` support indicators of a report are independent,
  so ``T ~ Binomial(n, p*) + Binomial(n (K - 1), q*)`` exactly; the p-value is
  ``min(1, 2 min(Pr[T <= t], Pr[T >= t]))`` under that law;
* local hashing (OLH, BLH, their xxhash variants): the indicators of one hash are not
  independent (a linear hash modulo a prime is only pairwise independent: the sd of ``T`` is
  1.1-1.25 times the binomial one), so the check is the one-sample t-test of the per-report
  support sizes (observed in the tally's support form) against ``mu``;
Mechanisms without such a statistic raise :class:`~bayesldp.NotSupportedError` saying why: GRR
and RRRR (saturated), Hadamard response and subset selection (every report supports the same
number of categories: ``T`` is a constant), SHE (the sum of its noisy vectors has mean ``n`` at
every epsilon; tally its reports with THE, post-processing of the same reports, and check
that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.tally import Tally, check_tally

#: tail mass of Binomial(n, p*) left out of the exact convolution (each side)
_TAIL = 1e-17


@dataclass(frozen=True)
class MechanismCheck:
    """Outcome of :func:`check_mechanism`.

    Attributes
    ----------
    mechanism : str
        The mechanism checked (its repr).
    statistic : str
        What was compared: ``"support size"``, per report.
    observed, expected : float
        The statistic's mean per report in the tally, and under the mechanism (any ``theta``).
    sd : float
        Standard deviation of the per-report mean under the mechanism (estimated from the
        tally for local hashing).
    z : float
        ``(observed - expected) / sd``: positive when the reports support more categories
        than the mechanism predicts.  For unary encoding and THE that says they were made at
        a smaller epsilon than the one analysed (``q*`` falls with epsilon); for local hashing
        with the same ``g``, at a larger one (``p*`` rises with it).
    p_value : float
        Two-sided p-value of the statistic under the mechanism; uniform (up to discreteness)
        when the tally came from this mechanism, whatever ``theta`` is.
    law : str
        The law the p-value comes from.
    n : int
        Number of reports.

    Examples
    --------
    What :func:`check_mechanism` returns, for SUE reports of 2,000 users:

    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.SUE(4, 1.0)
    >>> result = bayesldp.check_mechanism(mech.tally(mech.perturb(np.arange(2000) % 4, rng=0)))
    >>> round(result.expected, 4), result.statistic, result.n
    (1.7551, 'support size', 2000)
    """

    mechanism: str
    statistic: str
    observed: float
    expected: float
    sd: float
    z: float
    p_value: float
    law: str
    n: int

    def __str__(self) -> str:
        return (
            f"{self.mechanism}: {self.statistic} per report {self.observed:.4f}, expected "
            f"{self.expected:.4f} (sd {self.sd:.2g}), z = {self.z:.2f}, p = {self.p_value:.3g} "
            f"({self.law}, n = {self.n:,})"
        )


def check_mechanism(tally: Tally) -> MechanismCheck:
    """Test that a tally's reports came from its mechanism at its epsilon, whatever ``theta``.

    The statistic is the mean support size of a report, ``T / n`` with
    ``T = sum_x h(x)`` the total support count, whose mean under the mechanism,

    .. math::

        E[T / n] = p^* + (K - 1)\\, q^*,

    does not depend on the population (see the module docstring).  Its exact law for unary
    encoding and THE is ``T ~ Binomial(n, p*) + Binomial(n (K - 1), q*)`` and the p-value is
    ``min(1, 2 min(Pr[T <= t], Pr[T >= t]))``; for local hashing the p-value is a one-sample
    t-test of the per-report support sizes against ``p* + (K - 1) q*``.

    Unlike a posterior predictive p-value it needs no fit, and it is calibrated: under the
    claimed mechanism its p-value is uniform for every ``theta``.  It tests only this one
    statistic: a mechanism with the same ``p* + (K - 1) q*`` (another ``g`` of local hashing
    with the same mean, say) passes.

    Parameters
    ----------
    tally : Tally
        A tally of one mechanism (``tally.mechanism``): SUE, OUE, THE, or a local hashing
        (OLH, BLH, LocalHashing, OLHXX, BLHXX).  To check the tally against another epsilon,
        tally the same reports with that mechanism (``OUE(k, 1.0).tally(reports)``).

    Returns
    -------
    MechanismCheck
        The observed and expected statistic, its sd, ``z`` and the p-value.

    Raises
    ------
    NotSupportedError
        For mechanisms with no statistic whose law is free of ``theta``: GRR and RRRR (their
        report counts are saturated: a wrong epsilon is another population of the right one
        unless that population leaves the simplex, which
        :func:`~bayesldp.sample_posterior_predictive` can then show), Hadamard response and
        subset selection (every report supports the same number of categories), SHE (tally
        its reports with THE instead), the heavy hitters' ``CandidateOLH`` (users may hold
        values outside the candidates), tallies that mix mechanisms, and the others (CMS,
        RAPPOR, wrappers).

    Examples
    --------
    Reports made at epsilon 2, analysed at epsilon 2 and at epsilon 1:

    >>> import numpy as np, bayesldp
    >>> x = np.random.default_rng(0).choice(10, size=10_000, p=np.full(10, 0.1))
    >>> reports = bayesldp.OUE(10, 2.0).perturb(x, rng=1)
    >>> right = bayesldp.check_mechanism(bayesldp.OUE(10, 2.0).tally(reports))
    >>> wrong = bayesldp.check_mechanism(bayesldp.OUE(10, 1.0).tally(reports))
    >>> bool(right.p_value > 0.01), wrong.p_value < 1e-100, round(wrong.z)
    (True, True, -95)
    """
    tally = check_tally(tally)
    mech = tally.mechanism
    _check_applies(mech)
    from bayesldp.mechanisms.hashing import HashedGRR

    if isinstance(mech, HashedGRR):
        return _check_hashing(tally, mech)
    return _check_independent(tally, mech)


def _check_applies(mech: Any) -> None:
    """Raise NotSupportedError, saying why and what to use instead, where no check applies."""
    from bayesldp.mechanisms.base import FiniteChannelMechanism
    from bayesldp.mechanisms.hadamard import HadamardResponse
    from bayesldp.mechanisms.hashing import HashedGRR
    from bayesldp.mechanisms.histogram import SHE, THE
    from bayesldp.mechanisms.subset import SubsetSelection
    from bayesldp.mechanisms.unary import UnaryEncoding

    if mech is None:
        raise NotSupportedError(
            "tally: it mixes members of a mechanism family (no tally.mechanism); check the "
            "tally of each mechanism separately"
        )
    name = type(mech).__name__
    fixed = "every report supports the same number of categories, so the total support count " \
        "is a constant whatever the epsilon"  # fmt: skip
    if isinstance(mech, HadamardResponse | SubsetSelection):
        raise NotSupportedError(
            f"check_mechanism: {name}: {fixed}; no statistic of its reports has a law free of "
            "theta. Check the epsilon where the reports are made (bayesldp.audit.audit on the "
            "client's mechanism), or collect them with OUE, SUE, OLH or THE, which this "
            "check covers"
        )
    if isinstance(mech, FiniteChannelMechanism):
        raise NotSupportedError(
            f"check_mechanism: {name}'s report counts are saturated ({mech.n_outputs} outputs, "
            f"K - 1 = {mech.k - 1} free frequencies plus n): a wrong epsilon gives the law of "
            "another theta under this one, so no statistic of the counts has a law free of "
            "theta and none can flag it unless that theta leaves the simplex (then "
            "bayesldp.sample_posterior_predictive's p-value is near 0 or 1). Check the epsilon "
            "where the reports are made (bayesldp.audit.audit on the client's mechanism), or "
            "collect them with OUE, SUE, OLH or THE, which this check covers"
        )
    if type(mech).__name__ == "CandidateOLH":
        raise NotSupportedError(
            "check_mechanism: a CandidateOLH tally reads OLH reports against candidate values; "
            "users holding other values support no candidate with probability p*, so the mean "
            "support size depends on how many there are. Check the OLH reports' tally over the "
            "whole domain instead, where that fits in memory"
        )
    if isinstance(mech, SHE):
        raise NotSupportedError(
            "check_mechanism: SHE's statistic, the sum of the noisy vectors, has mean n at "
            "every epsilon (only its spread depends on it, and the tally keeps the sum): tally "
            "the same reports with THE (bayesldp.THE(k, epsilon).tally(reports), thresholding "
            "is post-processing) and check that tally"
        )
    if not isinstance(mech, UnaryEncoding | THE | HashedGRR):
        raise NotSupportedError(
            f"check_mechanism: no theta-free statistic is known for {name}; the check covers "
            "SUE, OUE, THE and local hashing (OLH, BLH, LocalHashing, OLHXX, BLHXX)"
        )


def _result(tally: Tally, mech: Any, what: str, observed: float, expected: float, sd: float,
            p_value: float, law: str) -> MechanismCheck:  # fmt: skip
    z = (observed - expected) / sd if sd > 0 else math.copysign(math.inf, observed - expected)
    return MechanismCheck(
        mechanism=repr(mech), statistic=what, observed=float(observed), expected=float(expected),
        sd=float(sd), z=float(z), p_value=float(min(1.0, max(0.0, p_value))), law=law,
        n=int(tally.n),
    )  # fmt: skip


def binomial_sum_tails(t: float, n: int, p: float, m: int, q: float) -> tuple[float, float]:
    """``(Pr[T <= t], Pr[T >= t])`` for ``T = Binomial(n, p) + Binomial(m, q)``, exactly.

    ``Pr[T <= t] = sum_a Pr[A = a] Pr[B <= t - a]`` over the values ``a`` of ``A ~
    Binomial(n, p)`` outside its ``1e-17`` tails (the error is below ``2e-17``).
    """
    from scipy import stats

    lo = int(stats.binom.ppf(_TAIL, n, p))
    hi = int(stats.binom.isf(_TAIL, n, p))
    a = np.arange(lo, hi + 1)
    weight = stats.binom.pmf(a, n, p)
    below = float(np.sum(weight * stats.binom.cdf(t - a, m, q)))
    above = float(np.sum(weight * stats.binom.sf(t - a - 1, m, q)))
    return min(1.0, below), min(1.0, above)


def _check_independent(tally: Tally, mech: Any) -> MechanismCheck:
    """Unary encoding and THE: ``T ~ Binomial(n, p*) + Binomial(n (K - 1), q*)``."""
    n, k = int(tally.n), int(mech.k)
    p, q = float(mech.p_star), float(mech.q_star)
    total = float(np.sum(tally.stat))
    if total != round(total) or total < 0:
        raise InvalidInputError(f"tally: its support counts sum to {total}, not a count")
    below, above = binomial_sum_tails(total, n, p, n * (k - 1), q)
    var = n * p * (1 - p) + n * (k - 1) * q * (1 - q)
    return _result(tally, mech, "support size", total / n, p + (k - 1) * q,
                   math.sqrt(var) / n, 2 * min(below, above),
                   "exact: Binomial(n, p*) + Binomial(n (K - 1), q*)")  # fmt: skip


def _check_hashing(tally: Tally, mech: Any) -> MechanismCheck:
    """Local hashing: the one-sample t-test of the support sizes against ``p* + (K - 1) q*``."""
    from scipy import stats

    if not tally.is_support_form:
        raise NotSupportedError(
            f"check_mechanism: this {type(mech).__name__} tally has no support form, so the "
            "support size of each report is not known"
        )
    n, k = int(tally.n), int(mech.k)
    if n < 2:
        raise InvalidInputError(f"tally: the t-test needs at least 2 reports, got {n}")
    sizes = tally.support.sum(axis=1).astype(float)
    counts = tally.counts.astype(float)
    mean = float(np.dot(counts, sizes) / n)
    var = float(np.dot(counts, (sizes - mean) ** 2) / (n - 1))
    expected = float(mech.p_star) + (k - 1) * float(mech.q_star)
    sd = math.sqrt(var / n)
    if sd > 0:
        p_value = 2 * float(stats.t.sf(abs(mean - expected) / sd, n - 1))
    else:  # every report supports as many categories
        p_value = 1.0 if mean == expected else 0.0
    return _result(tally, mech, "support size", mean, expected, sd, p_value,
                   "one-sample t-test of the support sizes")  # fmt: skip


__all__ = ["MechanismCheck", "binomial_sum_tails", "check_mechanism"]
