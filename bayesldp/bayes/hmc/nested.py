"""Nested log-ratios: a group of categories the likelihood measures mostly through their
total, how it is found (the data's information, :func:`_information`, :func:`_nesting`), the
nested coordinates and their target (:class:`_NestedTarget`; compiled density
:func:`bayesldp.bayes.hmc.densities._logp_grad_nested`).

Nested log-ratios (``coordinates="auto"``, wherever :func:`_nesting` finds a group G): a
mechanism can measure a group G of categories almost only through their total (RRRR's
categories outside its subset S).  On plain log-ratios the posterior then lies near a curved
surface (the log-sum-exp of the group's coordinates pinned, their split loose), where the
step size that ``target_accept = 0.8`` adapts to diverges.  :class:`_NestedTarget` samples
G's total as one log-ratio to a reference outside G and the split as log-ratios inside G; by
the Dirichlet's aggregation property the log-density is the same function of ``theta``
(:func:`_logp_grad_nested`), and the adaptive prior's joint scheme takes the same
coordinates.  RRRR, K = 10, 30 tallies (benchmarks/investigations/results/shared_information.md): at
n = 1e5, nested in 28, Dirichlet(1) at 0.8 no divergent draw in 10.4 leapfrog steps per draw
(plain log-ratios: 12 divergent draws in 9 fits at 0.8, none at 0.95 in 26.6 steps), median
smallest bulk ESS 2029 against 1615; the adaptive prior at 0.9 none in 13.9 steps (plain: 30
in 13 fits at 0.9, 10 in 7 fits at 0.95 in 27.6 steps).  At n = 1e3 each category outside S
carries less than one effective count and :func:`_shared_information` stays below
``SHARED_INFORMATION``, yet G is nested (in 28 fits): the adaptive prior's default then has
12 divergent draws in 3 fits, 28.9 steps, ESS 979 and r_hat at most 1.023, against 79 in 15,
48.8 steps, ESS 481 and 1.115 on plain log-ratios.  No group is found on GRR, OUE, OLH,
Hadamard response, subset selection, SHE, THE, CMS or RAPPOR (K = 10 and 30, n = 1e3-1e5).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import logsumexp

from bayesldp.bayes.hmc.targets import _CompiledTarget, _Target
from bayesldp.likelihood import Likelihood


def _shared_information(target: _Target, z: np.ndarray) -> float:
    """How much of the data's information about single categories is shared with others: the
    largest ratio ``m_x / m'_x`` (:func:`_information`) over the categories with ``m_x >= 1``
    at ``z``.  About 1 where each category is measured by itself (at most 1.32 on GRR, OUE,
    OLH, Hadamard response, subset selection, SHE, THE, CMS and RAPPOR, K = 10 and 30), up to
    12.82 on RRRR's reports (K = 10, S = {0, 1, 2}, eps = 1, eps1 = 0.8), whose categories
    outside ``S`` are measured almost only through their total: the likelihood pins the total
    and leaves the split loose (benchmarks/investigations/results/shared_information.md).
    """
    return _shared_ratio(*_information(target, target.theta(z[None, :])[0][0]))


def _shared_ratio(m: np.ndarray, m_free: np.ndarray) -> float:
    """:func:`_shared_information` from the information :func:`_information` gives."""
    kept = (m >= 1.0) & (m_free > 0.0)
    return float(np.max(m[kept] / m_free[kept])) if kept.any() else 1.0


def _information(target: _Target, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The data's information about each ``log theta_x`` at ``theta``, in effective counts:
    on the likelihood's diagonal, ``m_x = theta_x^2 (F_xx - g_x)`` (about ``N theta_x`` for a
    multinomial sample of ``N``), and once the other categories are free,
    ``m'_x = (1 - theta_x)^2 / Var(log theta_x)``, ``Var`` from the inverse of the likelihood's
    information in ALR coordinates ``J^T L^T diag(c / mu^2) L J``, ``J = d theta / d z`` (the
    observed information in ``theta`` carried over; the Hessian in ``z`` would add
    first-derivative terms that vanish only at the maximum of the likelihood).
    """
    lik, k, d = target.lik, target.k, target.d
    _, g = lik.grad(theta)
    m = np.maximum(theta**2 * (lik.fisher_diag(theta) - g), 0.0)
    _, mu = lik.evaluate(theta)
    dtheta = (np.diag(theta) - np.outer(theta, theta))[:, :d]  # d theta / d z
    info = dtheta.T @ lik.full_gram(lik.counts / (mu * mu)) @ dtheta
    dlog = np.eye(k)[:, :d] - theta[None, :d]  # d log theta / d z
    try:  # Var = diag(G I^-1 G^T) = column sums of squares of C^-1 G^T, I = C C^T
        var = np.sum(solve_triangular(np.linalg.cholesky(info), dlog.T, lower=True) ** 2, axis=0)
    except np.linalg.LinAlgError:  # a direction the likelihood leaves flat
        var = np.einsum("xi,ij,xj->x", dlog, np.linalg.pinv(info), dlog)
    with np.errstate(divide="ignore"):
        return m, np.where(var > 0.0, (1.0 - theta) ** 2 / var, 0.0)


#: with nested coordinates, the categories whose ratio ``m_x / m'_x`` (:func:`_information`)
#: exceeds this form the group measured through its total (:func:`_nesting`)
NESTED_GROUP = 2.0
#: nor is a group nested whose total at the mode is below this (:func:`_nesting`)
NESTED_TOTAL = 0.1


def _nesting(m: np.ndarray, m_free: np.ndarray, theta: np.ndarray) -> np.ndarray | None:
    """Codes (K,) of nested log-ratios (:func:`_nested_softmax`) for the group of categories
    the likelihood measures mostly through their total (``m_x / m'_x > NESTED_GROUP``, the
    information of :func:`_information` at ``theta``, every category with no information of
    its own included), the group's largest category its inner reference; None when fewer than
    two categories, or all of them, qualify, or when the group's total at ``theta`` is below
    ``NESTED_TOTAL``.  A group that small is the posterior's small corner, not its bulk:
    under the adaptive prior, in the SBC of the default fit on RRRR's reports (K = 10,
    S = {0, 1, 2}, eps = 1, eps1 = 0.8, n = 20,000; scratch ``s19_sbc_rrrr.py``), nesting
    every group found left 11 of 200 replications below 99 effective draws, 6 of them with
    totals of 0.008-0.026; without those below 0.1, 4 (same script; the slow test
    test_default_hmc_on_rrrr_is_calibrated_under_the_adaptive_prior allows 6)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        group = np.where(m_free > 0.0, m / m_free, np.inf) > NESTED_GROUP
    if group.sum() < 2 or group.all() or theta[group].sum() < NESTED_TOTAL:
        return None
    return _group_codes(group, theta)


def _group_codes(group: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Codes (:func:`_nested_softmax`) of the group ``group`` (K,) of bool, its largest
    category at ``theta`` the inner reference: log-ratios to a small category are loose."""
    codes = group.astype(np.int64)
    members = np.flatnonzero(group)
    codes[members[np.argmax(theta[members])]] = 2
    return codes


def _nested_order(codes: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The categories in coordinate order: every category but the reference, then the
    reference: the largest of the categories outside the group and the group's total (the
    group's inner reference stands for its total, whose coordinate is then 0)."""
    outer = np.flatnonzero(codes != 1)
    size = np.where(codes[outer] == 2, theta[codes != 0].sum(), theta[outer])
    ref = int(outer[np.argmax(size)])
    return np.concatenate([np.delete(np.arange(len(codes)), ref), [ref]]).astype(np.int64)


def _nested_coords(log_theta: np.ndarray, codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Nested log-ratios (N, K - 1) of ``log theta`` (N, K) (:func:`_nested_softmax`)."""
    group = codes != 0
    gref = int(np.flatnonzero(codes == 2)[0])
    outer = log_theta.copy()  # the outer level's log-weights: the group's total at gref
    outer[:, gref] = logsumexp(log_theta[:, group], axis=1)
    full = outer - outer[:, idx[-1:]]
    members = codes == 1
    full[:, members] = log_theta[:, members] - log_theta[:, [gref]]
    return full[:, idx[:-1]]


def _nested_theta(q: np.ndarray, codes: np.ndarray,
                  idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``theta`` and ``log theta`` (N, K) at nested log-ratios ``q`` (N, K - 1), as
    :func:`_nested_softmax` computes them."""
    full = np.zeros((q.shape[0], len(codes)))
    full[:, idx[:-1]] = q
    outer, group = codes != 1, codes != 0
    gref = int(np.flatnonzero(codes == 2)[0])
    log_theta = full - logsumexp(full[:, outer], axis=1, keepdims=True)
    inner = full[:, group]
    inner[:, np.flatnonzero(group) == gref] = 0.0
    log_theta[:, group] = log_theta[:, [gref]] + inner - logsumexp(inner, axis=1, keepdims=True)
    return np.exp(log_theta), log_theta


def _nested_information(lik: Likelihood, theta: np.ndarray, codes: np.ndarray,
                        idx: np.ndarray) -> np.ndarray:  # fmt: skip
    """The data's information about each nested log-ratio (K - 1,), the others held: the
    diagonal of ``J^T L^T diag(c / mu^2) L J``, ``J = d theta / d q`` (on plain log-ratios
    and direct counts, ``N theta_x (1 - theta_x)``, the joint scheme's effective count)."""
    k = len(codes)
    group = codes != 0
    theta_g = theta[group].sum()
    jac = np.empty((k, k - 1))
    for i, x in enumerate(idx[:-1]):
        if codes[x] == 0:
            jac[:, i] = theta * ((np.arange(k) == x) - theta[x])
        elif codes[x] == 2:
            jac[:, i] = theta * (group - theta_g)
        else:
            jac[:, i] = np.where(group, theta * ((np.arange(k) == x) - theta[x] / theta_g), 0.0)
    _, mu = lik.evaluate(theta)
    gram = lik.full_gram(lik.counts / (mu * mu))
    return np.einsum("xi,xy,yi->i", jac, gram, jac)


class _NestedTarget(_CompiledTarget):
    """A fixed (or, under the marginal scheme, adaptive) Dirichlet prior's posterior on nested
    log-ratios (:func:`_logp_grad_nested`): the categories outside a group G and G's total as
    log-ratios to a reference (the largest of them, :func:`_nested_order`), then the split
    inside G as log-ratios to the group's largest category.  Where the likelihood pins G's
    total and leaves its split loose (RRRR's categories outside S, :func:`_nesting`), plain
    log-ratios to one reference put the posterior near a curved surface (the log-sum-exp of
    the group's coordinates pinned); these coordinates make it a flat direction."""

    def __init__(self, marginal: _Target, z_mode: np.ndarray, codes: np.ndarray) -> None:
        self.lik, self.n, self.k, self.d = marginal.lik, marginal.n, marginal.k, marginal.d
        self.adaptive, self.alpha = marginal.adaptive, marginal.alpha
        theta, log_theta = marginal.theta(z_mode[None, :])
        self.codes, self.idx = codes, _nested_order(codes, theta[0])
        self._data = (*marginal.data()[:17], (codes, self.idx), *marginal.data()[18:])
        self.start = _nested_coords(log_theta, codes, self.idx)[0]

    def theta(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta`` and ``log theta`` (..., K) at nested coordinates ``q`` (..., K - 1)."""
        shape = q.shape[:-1]
        theta, log_theta = _nested_theta(q.reshape(-1, self.d), self.codes, self.idx)
        return theta.reshape(*shape, self.k), log_theta.reshape(*shape, self.k)
