"""Variance benchmarks and lower bounds for frequency estimation under LDP.

* :func:`var_star`, :func:`var_star_by_category`: ``n Var*``, the variance of a mechanism's
  unbiased oracle for a category nobody holds (Wang et al., USENIX Security 2017).
* :func:`fisher_information`, :func:`observed_information`, :func:`cramer_rao`: the Fisher
  information of one report of a finite channel at ``theta`` (parametrised by its first ``K - 1``
  coordinates, ``theta_K = 1 - sum``), the observed information of a tally, and the Cramér-Rao bound
  ``(n I(theta))^{-1}`` on the covariance of unbiased estimators of ``theta``.  The MLE of
  :func:`bayesldp.estimate` attains it asymptotically; for ``K = 2`` randomised response the
  unbiased oracle attains it exactly for every ``n`` (the tightness case of Lopuhaä-Zwakenberg, Li,
  Škorić and Li, "Improving Frequency Estimation under Local Differential Privacy", WPES 2020,
  section 4.4, Proposition 4.6), which the tests check.
* :func:`l2_lower_bound`, :func:`optimal_support_size`, :func:`extremal_l2_loss`: the smallest
  worst-case expected L2 loss ``sum_x E(f_hat_x - f_x)^2`` of an unbiased linear frequency
  estimator under eps-LDP.  Pan, "Strict Optimality of Frequency and Distribution Estimation
  Under Local Differential Privacy" (arXiv 2603.11523, 2026) proves that a linear estimator with
  a symmetric extremal configuration and a support size set to its optimum attains the lower
  bound of this loss; the loss of that configuration at each support size is derived here (the
  paper's own statement of it was not available) and checked numerically: against the exact
  channel of :class:`~bayesldp.SubsetSelection`, and as a floor under the exact variance of GRR,
  OUE, OLH, Hadamard response and subset selection, under the smallest loss of any linear
  unbiased estimator of random eps-LDP channels, and under the MLE's asymptotic loss at uniform
  ``theta`` (at a skewed dataset an estimator tuned to it can go a little below: the bound is on
  the worst case).

Not implemented: the lower bounds of Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency
Estimation under Local Differential Privacy" (WPES 2020, arXiv 1911.10499) -- the
information-theoretic bound of Theorem 4.1, the linear-algebra constants of Theorem 4.2 /
Corollary 4.3 and the epsilon-only bounds of Theorems 4.4 and 4.5.  The stored copies of that
paper reachable when this module was written hold its abstract and the start of its
introduction only, not section 4, so its formulas could not be checked and are not reconstructed
from memory.  Its tightness case (``K = 2`` randomised response, Proposition 4.6) is covered
above through :func:`cramer_rao`, and by :func:`l2_lower_bound`, which ``K = 2`` randomised
response attains.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import (
    check_bool,
    check_epsilon,
    check_instance,
    check_int,
    check_k,
    check_memory,
    check_theta,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

if TYPE_CHECKING:
    from bayesldp.mechanisms.base import Mechanism


def _check_mechanism(mechanism: object) -> Mechanism:
    from bayesldp.mechanisms.base import Mechanism

    return check_instance(mechanism, Mechanism, "mechanism", "a bayesldp Mechanism")


def var_star_by_category(mechanism: Mechanism) -> np.ndarray:
    """``n Var*_x`` for every category ``x``, from the mechanism's own oracle variance.

    ``Var*_x`` is the largest variance of the unbiased estimate of ``f_x`` over populations in
    which nobody holds ``x``.  The variance is linear in the population frequencies, so this is
    ``max_{j != x} n Var_x(e_j)`` (everyone holding ``j``).  For a pure protocol the variance of
    coordinate ``x`` depends on the population only through ``f_x``, so every entry equals the
    closed form ``q*(1 - q*) / (p* - q*)^2``.

    Cost: one call of ``oracle_variance`` for pure protocols, ``K`` calls otherwise (or the
    mechanism's own ``point_mass_variances()`` table, where it has one).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.bounds import var_star_by_category
    >>> var_star_by_category(bayesldp.GRR(3, 1.0)).round(4)
    array([1.2594, 1.2594, 1.2594])
    """
    from bayesldp.mechanisms.base import PureProtocol

    mech = _check_mechanism(mechanism)
    k = mech.k
    if isinstance(mech, PureProtocol):
        values = np.asarray(mech.oracle_variance(np.zeros(k), 1), dtype=float)
    elif hasattr(mech, "var_star"):  # the mechanism knows its own (SHE: the same for every x)
        values = np.full(k, float(mech.var_star()))
    else:
        check_memory(8.0 * k * k, f"var_star of {mech!r}", "use fewer categories")
        if hasattr(mech, "point_mass_variances"):  # all K points at once (numerical mechanisms)
            table = np.array(mech.point_mass_variances(), dtype=float)
        else:
            table = np.empty((k, k))
            for j in range(k):
                point = np.zeros(k)
                point[j] = 1.0
                table[j] = np.asarray(mech.oracle_variance(point, 1), dtype=float)
        np.fill_diagonal(table, -np.inf)
        values = table.max(axis=0)
    if values.shape != (k,) or not np.all(np.isfinite(values)):
        raise NotSupportedError(f"{mech!r}: its oracle variance is not finite")
    return np.maximum(values, 0.0)


def var_star(mechanism: Mechanism) -> float:
    """``n Var*``: ``n`` times the oracle variance of a frequency that is 0.

    The maximum over categories of :func:`var_star_by_category`; for the pure protocols of
    Wang et al. (2017), ``q*(1 - q*) / (p* - q*)^2`` (GRR: ``(e^eps + K - 2)/(e^eps - 1)^2``,
    OUE: ``4 e^eps / (e^eps - 1)^2``, ...).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.bounds import var_star
    >>> round(var_star(bayesldp.GRR(3, 1.0)), 4)
    1.2594
    """
    return float(var_star_by_category(mechanism).max())


def _as_channel(source: Any) -> np.ndarray:
    from bayesldp.mechanisms.base import Mechanism

    if isinstance(source, Mechanism):
        channel = np.asarray(source.channel, dtype=float)
    else:
        channel = np.asarray(source, dtype=float)
    if channel.ndim != 2 or channel.shape[0] < 2:
        raise InvalidInputError(
            f"channel: expected a K x Y matrix with K >= 2, got {channel.shape}"
        )
    if not np.all(np.isfinite(channel)) or channel.min() < 0:
        raise InvalidInputError("channel: entries must be finite and >= 0")
    sums = channel.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > 1e-9):
        raise InvalidInputError(
            f"channel: each row P[x, :] must sum to 1 (rows are inputs), got sums {sums}"
        )
    return channel


def fisher_information(channel: Any, theta: Any) -> np.ndarray:
    """Fisher information of one report about ``theta`` for a finite channel.

    With ``p_y = sum_x theta_x P[x, y]`` and the parametrisation by the first ``K - 1``
    coordinates (``theta_K = 1 - sum``), ``dp_y / dtheta_j = P[j, y] - P[K, y]`` and

    .. math:: I(\\theta)_{ij} = \\sum_y \\frac{(P[i,y] - P[K,y])(P[j,y] - P[K,y])}{p_y}.

    Parameters
    ----------
    channel : array (K, Y) or Mechanism
        ``P[x, y] = Pr(Y = y | X = x)`` (rows sum to 1), or a mechanism with a finite channel.
        For a :class:`~bayesldp.Tally` use :func:`observed_information`.
    theta : array (K,)
        A point of the simplex.

    Returns
    -------
    ndarray, shape (K - 1, K - 1)

    Examples
    --------
    Per report, in the ``K - 1`` free coordinates:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import fisher_information
    >>> fisher_information(bayesldp.GRR(3, 1.0).channel, np.array([0.5, 0.3, 0.2])).round(3)
    array([[0.802, 0.466],
           [0.466, 0.879]])
    """
    if isinstance(channel, Tally):
        raise InvalidTypeError("channel: got a Tally; use observed_information(tally, theta)")
    p = _as_channel(channel)
    theta = check_theta(theta, p.shape[0])
    py = theta @ p
    diff = p[:-1] - p[-1]
    dead = py <= 0
    if np.any(dead):
        if np.any(diff[:, dead] != 0):
            raise InvalidInputError(
                "theta: gives probability 0 to a report whose probability depends on theta; "
                "the Fisher information is infinite there"
            )
        diff, py = diff[:, ~dead], py[~dead]
    return (diff / py) @ diff.T


def observed_information(tally: Tally, theta: Any, *, lik: Likelihood | None = None) -> np.ndarray:
    """Observed information of a tally at ``theta`` (minus the Hessian of the log-likelihood).

    In the first ``K - 1`` coordinates: ``J = sum_u c_u d_u d_u^T / (L_u . theta)^2`` with
    ``d_u = L_u[:K-1] - L_u[K]``.  Its expectation is ``n`` times :func:`fisher_information`.
    Cost O(U K^2) (built in row blocks; support-form tallies are never densified whole).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import observed_information
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 1, 2] * 25, rng=0))
    >>> observed_information(tally, np.array([0.5, 0.3, 0.2])).round(2)
    array([[87.28, 53.97],
           [53.97, 89.96]])
    """
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    theta = check_theta(theta, tally.k)
    lik = Likelihood(tally) if lik is None else lik
    _, lth = lik.evaluate(theta)
    if np.any(lth <= 0):
        raise InvalidInputError("theta: gives probability 0 to an observed report")
    a = lik.gram(lik.counts / (lth * lth), np.arange(tally.k))
    return a[:-1, :-1] - a[:-1, -1:] - a[-1:, :-1] + a[-1, -1]


def cramer_rao(channel: Any, theta: Any, n: int) -> np.ndarray:
    """Cramér-Rao bound on the covariance of unbiased estimators of ``theta`` from ``n`` reports.

    ``Cov(theta_hat) >= A (n I(theta))^{-1} A^T`` in the Loewner order, ``I`` the
    :func:`fisher_information` of one report and ``A = [I_{K-1}; -1^T]`` mapping the first
    ``K - 1`` coordinates to all ``K``.  The diagonal bounds each coordinate's variance (MSE of
    an unbiased estimator), the trace bounds the summed MSE.

    Returns
    -------
    ndarray, shape (K, K)

    Raises
    ------
    InvalidInputError
        When the information is singular (``theta`` not identifiable from the channel).

    Examples
    --------
    The covariance bound of ``n = 1000`` reports, over all ``K`` categories:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import cramer_rao
    >>> bound = cramer_rao(bayesldp.GRR(3, 1.0).channel, np.array([0.5, 0.3, 0.2]), 1000)
    >>> np.diag(bound).round(5)
    array([0.0018 , 0.00164, 0.00154])
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InvalidInputError(f"n: expected a positive integer number of reports, got {n!r}")
    info = fisher_information(channel, theta)
    evals = np.linalg.eigvalsh(info)
    if evals.min() <= 1e-12 * max(evals.max(), np.finfo(float).tiny):
        raise InvalidInputError(
            "channel: its Fisher information is singular at theta (theta is not identifiable); "
            "the Cramér-Rao bound is infinite"
        )
    return full_covariance(np.linalg.inv(info) / n)


def full_covariance(cov_reduced: np.ndarray) -> np.ndarray:
    """Covariance of all ``K`` coordinates from that of the first ``K - 1``.

    ``A C A^T`` with ``A = [I_{K-1}; -1^T]`` (``theta_K = 1 - sum`` of the others).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.bounds import full_covariance
    >>> full_covariance(np.array([[2.0, -1.0], [-1.0, 2.0]]))
    array([[ 2., -1., -1.],
           [-1.,  2., -1.],
           [-1., -1.,  2.]])
    """
    k1 = cov_reduced.shape[0]
    lift = np.vstack([np.eye(k1), -np.ones((1, k1))])
    return lift @ cov_reduced @ lift.T


#: simulated reports per category (at least) when the information has no exact form
INFORMATION_REPORTS_PER_CATEGORY = 100
INFORMATION_REPORTS_MIN = 20_000


def expected_information(
    mechanism: Mechanism, theta: Any, *, simulate: bool | None = None, rng: Any = 0
) -> tuple[Any, int]:
    """Fisher information of one report of ``mechanism`` at ``theta``, ``(K - 1) x (K - 1)``.

    Exact (:func:`fisher_information` of the channel) for a mechanism with a finite channel;
    returned with 0 simulated reports.  Otherwise (unary encoding, local hashing, histogram
    encoding: reports too many to enumerate) estimated: the :func:`observed_information` at
    ``theta`` of the simulated reports of a fixed population with frequencies ``theta``, divided
    by their number ``m = max(20,000, 100 K)``.  Its expectation is exactly ``I(theta)`` (the
    population's mixture of report laws is the law of one report at ``theta``); the number of
    reports is returned with it.  ``simulate=True`` estimates it for a finite channel too (the
    tests compare the two).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import expected_information
    >>> info, simulated = expected_information(bayesldp.GRR(3, 1.0), np.array([0.5, 0.3, 0.2]))
    >>> np.asarray(info).round(3), simulated
    (array([[0.802, 0.466],
           [0.466, 0.879]]), 0)
    """
    from bayesldp.mechanisms.base import FiniteChannelMechanism

    mech = _check_mechanism(mechanism)
    theta = check_theta(theta, mech.k)
    if simulate is None:
        simulate = not isinstance(mech, FiniteChannelMechanism)
    if not simulate:
        return fisher_information(mech, theta), 0
    m = max(INFORMATION_REPORTS_MIN, INFORMATION_REPORTS_PER_CATEGORY * mech.k)
    counts = np.floor(theta * m).astype(np.int64)
    counts[np.argmax(theta)] += m - counts.sum()
    tally = mech.simulate_tally(counts, rng=rng)
    return observed_information(tally, theta) / m, m


def asymptotic_mse(
    mechanism: Mechanism, theta: Any, n: int, *, simulate: bool | None = None, rng: Any = 0
) -> tuple[float, int]:
    """Expected summed squared error of the MLE of all ``K`` frequencies from ``n`` reports.

    The trace of the Cramér-Rao bound ``A (n I(theta))^{-1} A^T`` (:func:`cramer_rao`), which
    the MLE and, by the Bernstein-von Mises theorem, the posterior mean attain as ``n`` grows
    (``theta`` inside the simplex); it scales as ``1 / n``.  ``I`` comes from
    :func:`expected_information`; when it is estimated from ``m`` simulated reports, the trace is
    multiplied by ``(m - K) / m``: inverting a mean of ``m`` outer products of ``K - 1``
    dimensional scores overestimates by about ``m / (m - K)`` (exactly so for Gaussian scores,
    a Wishart matrix), which the tests check against the exact channel information.  Returns
    the value and ``m`` (0 when exact).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import asymptotic_mse
    >>> mse, simulated = asymptotic_mse(bayesldp.GRR(3, 1.0), np.array([0.5, 0.3, 0.2]), 1000)
    >>> round(mse, 5), simulated
    (0.00498, 0)
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InvalidInputError(f"n: expected a positive integer number of reports, got {n!r}")
    info, m = expected_information(mechanism, theta, simulate=simulate, rng=rng)
    evals = np.linalg.eigvalsh(info)
    if evals.min() <= 1e-12 * max(evals.max(), np.finfo(float).tiny):
        raise NotSupportedError(f"{mechanism!r}: its Fisher information is singular at theta")
    trace = float(np.trace(full_covariance(np.linalg.inv(info)))) / n
    return (trace * (m - mechanism.k) / m if m else trace), m


# ------------------------------------------------------------------ the L2 floor of eps-LDP
def _extremal_losses(k: int, epsilon: float, support: np.ndarray) -> np.ndarray:
    """``n`` times the L2 loss of the symmetric extremal configuration, one per support size."""
    s = support.astype(float)
    e = math.exp(epsilon)
    denom = s * e + (k - s)
    p = s * e / denom
    q = s * ((s - 1.0) * e + (k - s)) / ((k - 1) * denom)
    gap = s * (k - s) * math.expm1(epsilon) / ((k - 1) * denom)  # p - q, without cancellation
    return (s - p * p - (k - 1) * q * q) / (gap * gap)


def extremal_l2_loss(k: int, epsilon: float, support: int) -> float:
    """``n`` times the L2 loss of the symmetric extremal configuration with support size ``s``.

    Each report favours a set of ``s`` of the ``K`` categories: its probability is ``e^eps``
    times larger for a user holding one of them than for a user holding any other (the extremal
    ratio), and the sets are balanced over the categories and over their pairs (the symmetric
    configuration; :class:`~bayesldp.SubsetSelection` with ``d = s`` is one, reporting the set
    itself).  A user holding ``v`` then reports a set containing ``v`` with probability ``p``
    and one containing any given ``x != v`` with probability ``q``:

    .. math::

        p = \\frac{s e^\\varepsilon}{s e^\\varepsilon + K - s}, \\qquad
        q = \\frac{s\\,((s - 1) e^\\varepsilon + K - s)}{(K - 1)(s e^\\varepsilon + K - s)}.

    The unbiased linear estimator ``f_hat_x = (1/n) sum_i ([x in S_i] - q) / (p - q)`` has, for
    every dataset, since the indicators of one report sum to ``s``,

    .. math::

        n \\sum_x \\operatorname{E}(\\hat f_x - f_x)^2
          = \\frac{(K - 1)\\,q(1 - q) + p(1 - p)}{(p - q)^2}
          = \\frac{s - p^2 - (K - 1) q^2}{(p - q)^2}.

    This closed form is derived here from the configuration (the text of Pan, "Strict
    Optimality of Frequency and Distribution Estimation Under Local Differential Privacy",
    arXiv 2603.11523, 2026, was not available beyond its abstract); the tests check it against
    the exact channel of :class:`~bayesldp.SubsetSelection`.  ``s = 1`` is GRR.

    Parameters
    ----------
    k : int
        Domain size ``K >= 2``.
    epsilon : float
        Privacy budget, ``> 0``.
    support : int
        Support size ``s`` in ``1..K-1``.

    Returns
    -------
    float
        ``n`` times the expected summed squared error of the shares ``f_x`` (for counts,
        multiply by ``n``).

    Examples
    --------
    At ``s = 1`` it is GRR's summed oracle variance:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import extremal_l2_loss
    >>> round(extremal_l2_loss(10, 1.0, 1), 4)
    40.9583
    >>> round(float(bayesldp.GRR(10, 1.0).oracle_variance(np.full(10, 0.1), 1).sum()), 4)
    40.9583
    """
    k = check_k(k)
    epsilon = check_epsilon(epsilon)
    support = check_int(support, "support", 1)
    if support >= k:
        raise InvalidInputError(f"support: must be in 1..{k - 1} (K = {k}), got {support}")
    return float(_extremal_losses(k, epsilon, np.array([support]))[0])


def optimal_support_size(k: int, epsilon: float) -> int:
    """The support size ``s`` in ``1..K-1`` minimising :func:`extremal_l2_loss`.

    The optimised support size of Pan's symmetric extremal configuration ("Strict Optimality of
    Frequency and Distribution Estimation Under Local Differential Privacy", arXiv 2603.11523,
    2026): an exact search over all ``K - 1`` sizes (ties go to the smaller), cost O(K).  It is
    close to ``K / (e^eps + 1)`` for large ``K`` (Wang et al. 2016 and Ye and Barg 2018 give that
    size for subset selection) and is 1, GRR, for ``K = 2`` or large ``eps``.  It can differ from
    :func:`bayesldp.mechanisms.subset.optimal_subset_size`, which minimises the variance of a
    category nobody holds (``Var*``) rather than the summed loss.

    Examples
    --------
    >>> from bayesldp.bounds import optimal_support_size
    >>> optimal_support_size(100, 1.0), optimal_support_size(100, 4.0), optimal_support_size(2, 0.5)
    (27, 2, 1)
    """
    k = check_k(k)
    epsilon = check_epsilon(epsilon)
    check_memory(8.0 * 8 * k, f"optimal_support_size(K={k})", "use fewer categories")
    losses = _extremal_losses(k, epsilon, np.arange(1, k))
    return int(np.argmin(losses)) + 1


def l2_lower_bound(k: int, epsilon: float, n: int, *, distribution: bool = False) -> float:
    """Lower bound on the worst-case L2 loss of unbiased linear frequency estimators under eps-LDP.

    Pan, "Strict Optimality of Frequency and Distribution Estimation Under Local Differential
    Privacy" (arXiv 2603.11523, 2026), proves that a linear estimator with a symmetric extremal
    configuration and a support size equal to an optimised value attains the theoretical lower
    bound of the L2 loss of frequency estimation under eps-LDP.  This returns that attained
    value, :func:`extremal_l2_loss` at :func:`optimal_support_size`, over ``n``:

    .. math::

        \\min_{1 \\le s \\le K - 1} \\frac{s - p_s^2 - (K - 1) q_s^2}{n\\,(p_s - q_s)^2}
        \\;\\le\\; \\max_f \\sum_x \\operatorname{E}(\\hat f_x - f_x)^2,

    ``f`` the shares of the ``n`` users' own values.  The formula is derived here for that
    configuration (see :func:`extremal_l2_loss`; the paper's statement was not available beyond
    its abstract).  What it bounds, as the tests find: the loss at the uniform dataset (each
    category held by ``n / K`` users), hence the worst case over datasets, of every unbiased
    linear estimator -- the exact summed variance of the unbiased estimators of GRR, OUE, OLH,
    Hadamard response and subset selection (the same for every dataset), the smallest
    input-averaged loss of any linear unbiased estimator of random eps-LDP channels, and the
    MLE's asymptotic loss at uniform ``theta``.  It is not a bound at every dataset: at a
    skewed one, an unbiased linear estimator tuned to it (the locally efficient one of subset
    selection) goes a little below.  Nor does it bind biased estimators (projected onto the
    simplex, a posterior mean with a strong prior).

    Parameters
    ----------
    k : int
        Domain size ``K >= 2``.
    epsilon : float
        Privacy budget, ``> 0``.
    n : int
        Number of users (reports), ``>= 1``.
    distribution : bool, default False
        Distribution estimation instead: the users' values drawn i.i.d. from ``theta`` and the
        target ``theta``.  Adds ``(1 - 1/K) / n``, the summed multinomial variance of the
        shares at uniform ``theta`` (for a linear unbiased estimator the distribution loss at
        ``theta`` is the frequency loss at the dataset ``f = theta`` plus
        ``(1 - sum_x theta_x^2) / n``; derived here), so it bounds the worst case over
        ``theta``, which the configuration attains at uniform ``theta``.

    Returns
    -------
    float
        The bound on the expected summed squared error of the ``K`` shares (for counts,
        multiply by ``n^2``).

    Examples
    --------
    ``K = 2`` randomised response attains it:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bounds import l2_lower_bound
    >>> round(l2_lower_bound(2, 1.0, 1000), 7)
    0.0018413
    >>> round(float(bayesldp.GRR(2, 1.0).oracle_variance(np.array([0.3, 0.7]), 1000).sum()), 7)
    0.0018413

    For ``K = 100`` OUE comes within 3% of it:

    >>> mech = bayesldp.OUE(100, 1.0)
    >>> float(mech.oracle_variance(np.full(100, 0.01), 1).sum()) / l2_lower_bound(100, 1.0, 1)
    ... # doctest: +ELLIPSIS
    1.025...
    """
    k = check_k(k)
    epsilon = check_epsilon(epsilon)
    n = check_int(n, "n", 1)
    value = extremal_l2_loss(k, epsilon, optimal_support_size(k, epsilon)) / n
    if check_bool(distribution, "distribution"):
        value += (1.0 - 1.0 / k) / n
    return value
