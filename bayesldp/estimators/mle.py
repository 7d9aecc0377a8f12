"""Maximum likelihood estimation of the frequencies from any tally.

Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local Differential
Privacy", WPES 2020, eq. (22): the MLE maximises the concave log-likelihood

.. math:: \\ell(\\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta)

over the probability simplex; its cost does not depend on ``n`` once the reports are tallied.
At the optimum the gradient ``g_x = sum_u c_u L[u, x] / (L_u . theta)`` satisfies the KKT
conditions ``g_x = n`` where ``theta_x > 0`` and ``g_x <= n`` where ``theta_x = 0``
(``theta . g = n`` everywhere, by Euler's identity: each ``L_u . theta`` is linear in theta).
For GRR the optimum has a closed form (Lopuhaä-Zwakenberg et al. 2020, Appendix B): :func:`grr_mle`.

Solver: accelerated EM (SQUAREM, Varadhan and Roland 2008) from the uniform distribution to get
close, then an active-set Newton method on the face of the simplex
where ``theta > 0``: a Newton step in the ``sum = 0`` tangent space of the free coordinates,
a backtracking line search in which a coordinate that the step would take below 0 is set to 0,
and release of the zero coordinate that violates the KKT conditions most.  The warm start is the
package's one EM engine (:func:`bayesldp.estimators.em.run_em`); every product with the
likelihood rows is one of :class:`bayesldp.likelihood.Likelihood` (O(U K) for dense rows, O(nnz)
in support form, the dense rows never built); the Newton system uses either the explicit
reduced Hessian (O(U |F|^2), when cheap) or conjugate gradients with Hessian-vector products
(O(U K) each).  EM alone converges slowly, sometimes sublinearly, where the optimum has zero
coordinates whose KKT multiplier is nearly 0 (measured on GRR, K = 100, n = 1e5, eps = 1: EM
needs 300 to 1,700 accelerated maps to reach a change of 1e-12 and ends 1e-7 from the optimum;
the Newton finish reaches the KKT point to 1e-16 in 3 to 6 steps).
Gradients, Hessians and log-likelihood differences are computed from the centred rows
``L[u] = a_u + C[u]`` (see :mod:`bayesldp.likelihood`), without the cancellation that ruins them
when ``epsilon`` is tiny.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import linalg

from bayesldp._blas import single_thread_blas
from bayesldp._validation import check_choice, check_int, check_positive
from bayesldp.bounds import cramer_rao, full_covariance, observed_information
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.estimators.em import run_em
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally

_TINY = np.finfo(float).tiny
_DENSE_BUDGET = 500_000_000  # U * |F|^2 above which Newton systems use conjugate gradients
_SE_BUDGET = 1_000_000_000  # U * K^2 up to which "auto" computes observed-information SEs
_MAX_CHANNEL_OUTPUTS = 1 << 14  # finite channels up to this many reports give expected-info SEs


# ============================================================================ Newton polish
def _reduced_newton(
    lik: Likelihood,
    theta: np.ndarray,
    free: np.ndarray,
    gt: np.ndarray,
    lth: np.ndarray,
    hessian: str,
) -> tuple[np.ndarray, float]:
    """Newton direction on the free face (``sum d = 0``, ``d = 0`` off ``free``).

    Returns the direction ``d`` and the predicted increase ``gr . s``.
    """
    idx = np.flatnonzero(free)
    d = np.zeros(lik.k)
    if idx.shape[0] < 2:
        return d, 0.0
    jpos = int(np.argmax(theta[idx]))
    j = idx[jpos]
    others = np.delete(idx, jpos)
    gr = gt[others] - gt[j]
    w2 = lik.counts / (lth * lth)
    m = idx.shape[0]
    use_dense = hessian == "dense" or (hessian == "auto" and lik.n_rows * m * m <= _DENSE_BUDGET)
    if use_dense:
        a = lik.gram(w2, idx)
        o = np.delete(np.arange(m), jpos)
        h = a[np.ix_(o, o)] - a[o, jpos][:, None] - a[jpos, o][None, :] + a[jpos, jpos]
        s = _solve_psd(h, gr)
    else:
        s = _solve_cg(lik, w2, others, j, gr)
    d[others] = s
    d[j] = -s.sum()
    return d, float(gr @ s)


def _solve_psd(h: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve ``h s = rhs`` for a positive semi-definite ``h``.

    Cholesky first; its answer is kept only if its residual is small, since on a numerically
    singular ``h`` (categories with no report and theta near 0) Cholesky can succeed and return
    garbage.  Otherwise an eigendecomposition with eigenvalues floored at 1e-12 of the largest.
    """
    try:
        factor = linalg.cho_factor(h, check_finite=False)
        s = linalg.cho_solve(factor, rhs, check_finite=False)
        residual = np.linalg.norm(h @ s - rhs)
        if np.all(np.isfinite(s)) and residual <= 1e-8 * max(np.linalg.norm(rhs), _TINY):
            return s
    except linalg.LinAlgError:
        pass
    evals, evecs = np.linalg.eigh(h)
    floor = max(float(evals.max()), _TINY) * 1e-12
    return evecs @ ((evecs.T @ rhs) / np.maximum(evals, floor))


def _solve_cg(
    lik: Likelihood, w2: np.ndarray, others: np.ndarray, j: int, gr: np.ndarray
) -> np.ndarray:
    """Preconditioned conjugate gradients on the reduced Hessian, O(U K) per product."""
    k = lik.k

    def hv(v: np.ndarray) -> np.ndarray:
        d = np.zeros(k)
        d[others] = v
        d[j] = -v.sum()
        ad = lik.rmatvec(w2 * lik.matvec(d))
        return ad[others] - ad[j]

    ej = np.zeros(k)
    ej[j] = 1.0
    col_j = lik.rmatvec(w2 * lik.matvec(ej))
    diag = lik.sq_rmatvec(w2)[others] - 2.0 * col_j[others] + col_j[j]
    diag = np.maximum(diag, max(float(diag.max(initial=0.0)), _TINY) * 1e-12)
    x = np.zeros_like(gr)
    res = gr.copy()
    z = res / diag
    p = z.copy()
    rz = float(res @ z)
    target = 1e-10 * float(np.linalg.norm(gr))
    for _ in range(min(2 * gr.shape[0] + 10, 1000)):
        hp = hv(p)
        curv = float(p @ hp)
        if curv <= 0:
            break
        step = rz / curv
        x += step * p
        res -= step * hp
        if float(np.linalg.norm(res)) <= target:
            break
        z = res / diag
        rz_new = float(res @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    if not np.any(x):
        x = gr / diag
    return x


def _line_search(
    lik: Likelihood,
    theta: np.ndarray,
    direction: np.ndarray,
    gt: np.ndarray,
    ll: float,
    ll_scale: float,
    *,
    clip: bool,
) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Backtracking (Armijo) along ``theta + a d``; coordinates pushed below 0 are set to 0."""
    floor = 1e-13 * ll_scale
    alpha = 1.0
    for _ in range(60):
        cand = theta + alpha * direction
        if cand.min() < 0:
            if not clip:
                alpha *= 0.5
                continue
            cand = np.maximum(cand, 0.0)
        cand /= cand.sum()
        r, lth = lik.evaluate(cand)
        llc = lik.loglik_rel(r, lth)
        predicted = float(gt @ (cand - theta))
        if llc >= ll + 1e-4 * predicted or (predicted <= floor and llc >= ll - floor):
            return cand, lth, llc, lik.loglik_scale(r, lth)
        alpha *= 0.5
    return None


def newton_polish(
    lik: Likelihood,
    theta: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    hessian: str,
) -> tuple[np.ndarray, int, list[float], float, bool]:
    """Active-set Newton iterations to the KKT point (internal, see module docstring)."""
    r, lth = lik.evaluate(theta)
    ll, ll_scale = lik.loglik_rel(r, lth), lik.loglik_scale(r, lth)
    trace: list[float] = []
    kkt = math.inf
    for it in range(max_iter + 1):
        kkt, gt, dev = lik.kkt(theta, lth)
        if kkt <= tol or it == max_iter:
            return theta, it, trace, kkt, kkt <= tol
        free = theta > 0
        off = ~free
        released = -1
        if off.any():
            v_off = float(dev[off].max())
            v_free = float(np.abs(dev[free]).max())
            if v_off > 0 and v_off >= v_free:
                released = int(np.flatnonzero(off)[np.argmax(dev[off])])
                free = free.copy()
                free[released] = True
        direction, predicted = _reduced_newton(lik, theta, free, gt, lth, hessian)
        step = None
        if released >= 0 and direction[released] <= 0:
            # the quadratic model disagrees with the first-order violation: move toward the
            # violating vertex instead (a Frank-Wolfe step, always an ascent direction)
            fw = -theta.copy()
            fw[released] += 1.0
            step = _line_search(lik, theta, fw, gt, ll, ll_scale, clip=False)
        elif predicted > 0:
            step = _line_search(lik, theta, direction, gt, ll, ll_scale, clip=True)
        if step is None:
            return theta, it, trace, kkt, kkt <= tol
        theta, lth, ll, ll_scale = step
        trace.append(ll)
    return theta, max_iter, trace, kkt, kkt <= tol


# ============================================================================ GRR closed form
def _grr_params(tally: Tally) -> tuple[float, float, np.ndarray] | None:
    from bayesldp.mechanisms.grr import GRR

    mech = tally.mechanism
    if not isinstance(mech, GRR):
        return None
    e = math.exp(mech.epsilon)
    q = 1.0 / (e + mech.k - 1)
    p_minus_q = math.expm1(mech.epsilon) / (e + mech.k - 1)
    return q, p_minus_q, np.asarray(tally.stat, dtype=float)


def grr_mle(tally: Tally) -> np.ndarray:
    """Closed-form MLE for a GRR tally (Lopuhaä-Zwakenberg et al. 2020, Appendix B, Algorithm 1).

    With ``phi`` the observed report frequencies sorted ascending: start from ``s = 1``,
    ``k = 0``; while ``q s > (1 - k q) phi_(k+1)`` drop that category (its estimate is 0),
    ``s -= phi_(k+1)``, ``k += 1``; the remaining categories get
    ``theta_x = ((1 - k q) phi_x - s q) / (s (p - q))``.  O(K log K).

    Raises
    ------
    NotSupportedError
        If the tally does not come from a :class:`~bayesldp.GRR` mechanism.
    """
    params = _grr_params(check_tally(tally))
    if params is None:
        raise NotSupportedError(
            f"grr_mle: the closed form needs a GRR tally, got one from {tally.mechanism!r}; "
            "use mle(tally) for any mechanism"
        )
    q, p_minus_q, counts = params
    k = counts.shape[0]
    phi = counts / counts.sum()
    order = np.argsort(phi, kind="stable")
    s = 1.0
    dropped = 0
    while dropped < k - 1 and q * s > (1.0 - dropped * q) * phi[order[dropped]]:
        s -= phi[order[dropped]]
        dropped += 1
    keep = order[dropped:]
    s = float(phi[keep].sum())
    theta = np.zeros(k)
    theta[keep] = ((1.0 - dropped * q) * phi[keep] - s * q) / (s * p_minus_q)
    theta = np.maximum(theta, 0.0)
    return theta / theta.sum()


# ============================================================================ public MLE
def _finite_channel(tally: Tally) -> np.ndarray | None:
    from bayesldp.mechanisms.base import FiniteChannelMechanism

    mech = tally.mechanism
    if isinstance(mech, FiniteChannelMechanism) and mech.n_outputs <= _MAX_CHANNEL_OUTPUTS:
        return np.asarray(mech.channel, dtype=float)
    return None


def wald_std_errors(
    tally: Tally, theta: np.ndarray, lik: Likelihood | None = None
) -> tuple[np.ndarray | None, str]:
    """Standard errors of the MLE from the Fisher information (internal).

    Uses the expected information of the mechanism's finite channel when it has one (defined
    even on the boundary of the simplex), else the observed information of the tally; both in
    the ``K - 1`` free coordinates, mapped back to all ``K`` (``theta_K = 1 - sum``).  Returns
    ``(None, reason)`` when the information is singular (theta not identifiable).
    """
    channel = _finite_channel(tally)
    try:
        if channel is not None:
            cov = cramer_rao(channel, theta, tally.n)
            kind = "expected"
        else:
            info = observed_information(tally, theta, lik=lik)
            cov = full_covariance(np.linalg.inv(_checked_info(info)))
            kind = "observed"
    except InvalidInputError as err:
        return None, f"not available: {err}"
    var = np.maximum(np.diag(cov), 0.0)
    if not np.all(np.isfinite(var)):
        return None, "not available: non-finite variances"
    return np.sqrt(var), kind


def _checked_info(info: np.ndarray) -> np.ndarray:
    evals = np.linalg.eigvalsh(info)
    if evals.min() <= 1e-12 * max(evals.max(), _TINY):
        raise InvalidInputError("the Fisher information is singular (theta is not identifiable)")
    return info


@single_thread_blas
def mle(
    tally: Tally,
    *,
    solver: str = "auto",
    tol: float = 1e-12,
    max_iter: int = 200,
    hessian: str = "auto",
    theta0: Any = None,
    std_errors: bool | str = "auto",
) -> Estimate:
    """Maximum likelihood estimate of the frequencies, for any tally.

    The maximiser of the log-likelihood of Lopuhaä-Zwakenberg et al. 2020, eq. 22.

    Parameters
    ----------
    tally : Tally
        Reports of any mechanism (also mixed-family tallies).
    solver : {"auto", "closed_form", "newton"}
        ``"closed_form"``: :func:`grr_mle` (GRR tallies only); ``"newton"``: accelerated EM then
        active-set Newton (any tally); ``"auto"`` picks the closed form for GRR.
    tol : float
        KKT tolerance: converged when ``|g_x - n| <= tol * n * s`` on the support and
        ``g_x - n <= tol * n * s`` off it, ``s`` the mean slope of one report's log-likelihood
        (see :meth:`bayesldp.likelihood.Likelihood.kkt`); about ``tol / s`` in units of theta.
    max_iter : int
        Maximum number of Newton iterations (the EM warm start uses at most 50 EM maps).
    hessian : {"auto", "dense", "cg"}
        Newton systems by the explicit reduced Hessian or by conjugate gradients.
    theta0 : array, optional
        Starting point of the EM warm start (default uniform).
    std_errors : bool or "auto"
        Compute Wald standard errors: from the expected Fisher information of the channel when
        the mechanism is a finite-channel one (GRR, RRRR, Hadamard response), else from the
        observed information of the tally (O(U K^2)); ``"auto"`` skips the latter when
        ``U K^2 > 1e9``.  None when the information is singular.

    Returns
    -------
    Estimate
        ``iterations`` counts EM maps plus Newton steps; ``details`` holds ``kkt_violation``,
        ``em_maps``, ``newton_steps``, ``solver`` and ``std_error_kind``.
    """
    tally = check_tally(tally)
    check_choice(solver, "solver", ("auto", "closed_form", "newton"))
    check_choice(hessian, "hessian", ("auto", "dense", "cg"))
    check_choice(std_errors, "std_errors", (True, False, "auto"))
    check_positive(tol, "tol")
    check_int(max_iter, "max_iter")
    lik = Likelihood(tally)
    if solver == "auto":
        solver = "closed_form" if _grr_params(tally) is not None else "newton"
    details: dict[str, Any] = {"solver": solver}
    if solver == "closed_form":
        theta = grr_mle(tally)
        r, lth = lik.evaluate(theta)
        trace = [lik.loglik_rel(r, lth)]
        iterations, converged = None, True
        details["kkt_violation"] = lik.kkt(theta, lth)[0]
    else:
        start = lik.check_start(theta0)
        # a short accelerated-EM warm start (measured: 1e-9 / 500 maps cost up to 8x the time
        # of this setting for the same Newton step count)
        warm = run_em(lik, start, tol=1e-5, max_iter=50, accelerate=True)
        theta, steps, newton_trace, kkt, converged = newton_polish(
            lik, warm.theta, tol=tol, max_iter=max_iter, hessian=hessian
        )
        trace = [*warm.trace, *newton_trace]
        iterations = warm.maps + steps
        details.update(kkt_violation=kkt, em_maps=warm.maps, newton_steps=steps)
    se = None
    want_se = std_errors is True or (
        std_errors == "auto"
        and (_finite_channel(tally) is not None or lik.n_rows * lik.k * lik.k <= _SE_BUDGET)
    )
    if want_se:
        se, details["std_error_kind"] = wald_std_errors(tally, theta, lik)
    elif std_errors is False:
        details["std_error_kind"] = "not requested"
    else:
        details["std_error_kind"] = "skipped (observed information costs U K^2; std_errors=True)"
    return Estimate(
        theta,
        se,
        "mle",
        on_simplex=True,
        iterations=iterations,
        loglik_trace=np.asarray(trace) + lik.const,
        converged=converged,
        details=details,
    )
