"""Warm-up: the step size (dual averaging, Stan's initial step-size heuristic), the metric
windows, the momentum factor of a metric, and the default ``target_accept``.

Warm-up as in Stan: step size by dual averaging (Nesterov 2009; Hoffman and Gelman,
section 3.2.1) towards ``target_accept``, re-initialised by Stan's doubling heuristic after each
metric update, and a dense inverse metric re-estimated at the end of doubling windows
(buffers 75 / 50 and windows 25, 50, 100, 200, 500 for ``tune = 1000``) from the window's
draws, shrunk towards the Laplace covariance with the weight of ``d + 3`` draws.
"""

from __future__ import annotations

import math

import numpy as np

from bayesldp.bayes.hmc.tree import _CG, _CP, _CV, _CZ, _dot, _leapfrog, _matvec

_LOG_08 = math.log(0.8)


#: ``_shared_information`` above this: the likelihood measures some categories mostly jointly
SHARED_INFORMATION = 3.0


def _default_accept(shared: float, hierarchical: bool) -> float:
    """The default ``target_accept``: 0.8, 0.9 under a hierarchical prior (smoothness, the
    adaptive prior's joint scheme), 0.95 where the likelihood measures some categories mostly
    jointly (``shared > SHARED_INFORMATION``) and the coordinates are plain log-ratios
    (``coordinates="alr"``, or no group for nested ones, :func:`_nesting`).  There the posterior
    of their split is loose and skewed (a category near its lower quantiles while the others
    take up the total), and the step size that 0.8 adapts to diverges: RRRR, K = 10,
    S = {0, 1, 2}, eps = 1, eps1 = 0.8, n = 1e5, 30 Dirichlet(1) populations, Dirichlet(1)
    prior, 4 chains x 1000 draws on plain log-ratios: divergent draws in 9 fits at 0.8, 5 at
    0.9, none at 0.95, for 19.6, 23.1 and 26.6 leapfrog steps per draw; the adaptive prior: 13
    fits at 0.9, 7 at 0.95 (benchmarks/investigations/results/shared_information.md).  Nested
    log-ratios remove the curvature, and ``_run`` passes ``shared = 1`` for them (nested wherever
    :func:`_nesting` finds a group, whatever ``shared``)."""
    if shared > SHARED_INFORMATION:
        return 0.95
    return 0.9 if hierarchical else 0.8


def _init_step_size(z, grad, lp, eps, inv_metric, mom_factor, noise, data, ws, work):
    """Stan's heuristic: double or halve ``eps`` until one step's acceptance crosses 0.8.

    ``noise`` (m, d) standard normals bound the number of trials.  Python around the compiled
    leapfrog step (a few calls per metric window; compiling this loop too cost about 2 s more on
    a first fit).
    """
    cz, cp, cv, cg = ws[_CZ], ws[_CP], ws[_CV], ws[_CG]
    direction = 0
    for t in range(noise.shape[0]):
        _matvec(mom_factor, noise[t], cp)
        _matvec(inv_metric, cp, cv)
        h0 = 0.5 * _dot(cp, cv) - lp
        cz[:] = z
        cg[:] = grad
        new_lp = _leapfrog(cz, cp, cv, cg, eps, inv_metric, data, work)
        log_accept = h0 - (0.5 * _dot(cp, cv) - new_lp)
        if log_accept != log_accept:
            log_accept = -math.inf
        if direction == 0:
            direction = 1 if log_accept > _LOG_08 else -1
        elif direction == 1 and not log_accept > _LOG_08:
            break
        elif direction == -1 and not log_accept < _LOG_08:
            break
        eps = eps * 2.0 if direction == 1 else eps * 0.5
        if eps > 1e7 or eps < 1e-10:
            break
    return eps


def _windows(tune: int) -> list[tuple[int, int]]:
    """Stan's metric adaptation windows ``[start, end)`` for ``tune`` warm-up iterations.

    An initial buffer of 75 iterations (step size only), windows of 25, 50, 100, ... iterations
    (the last one stretched to fill), and a terminal buffer of 50; for short warm-ups the buffers
    are 15% and 10% of ``tune``.  Fewer than 20 warm-up iterations adapt the step size only.
    """
    if tune < 20:
        return []
    init, term, base = 75, 50, 25
    if init + term + base > tune:
        init, term = int(0.15 * tune), int(0.1 * tune)
        base = tune - init - term
    out = []
    start, size = init, base
    last = tune - term
    while start < last:
        end = start + size
        if end + 2 * size > last:  # the next window would not fit: stretch this one
            end = last
        out.append((start, end))
        start, size = end, 2 * size
    return out


def _momentum_factor(inv_metric: np.ndarray) -> np.ndarray:
    """``F = chol(inv_metric)^{-T}``: ``F @ N(0, I)`` has covariance ``inv_metric^{-1}``
    (a diagonal metric, given as its (1, d) diagonal: ``F = inv_metric^{-1/2}``, same shape)."""
    if inv_metric.shape[0] == 1 and inv_metric.shape[1] > 1:
        return np.ascontiguousarray(1.0 / np.sqrt(inv_metric))
    chol = np.linalg.cholesky(inv_metric)
    return np.ascontiguousarray(np.linalg.inv(chol).T)


def _try_momentum_factor(inv_metric: np.ndarray) -> np.ndarray | None:
    """:func:`_momentum_factor`, or None when the metric is not finite and positive definite
    (warm-up draws collapsed onto a face of the simplex, as under a concentration of 1e-20)."""
    if not np.all(np.isfinite(inv_metric)):
        return None
    if inv_metric.shape[0] == 1 and inv_metric.shape[1] > 1 and not np.all(inv_metric > 0):
        return None
    try:
        factor = _momentum_factor(inv_metric)
    except np.linalg.LinAlgError:
        return None
    return factor if np.all(np.isfinite(factor)) else None


class _DualAveraging:
    """Nesterov dual averaging of ``log eps`` (Hoffman and Gelman 2014, section 3.2.1).

    ``gamma = 0.05``, ``t0 = 10``, ``kappa = 0.75``, ``mu = log(10 eps0)`` as in Stan.
    """

    def __init__(self, eps: float, target_accept: float) -> None:
        self.target_accept = target_accept
        self.restart(eps)

    def restart(self, eps: float) -> None:
        self.mu = math.log(10.0 * eps)
        self.count = 0
        self.s_bar = 0.0
        self.x_bar = 0.0

    def update(self, accept: float) -> float:
        self.count += 1
        eta = 1.0 / (self.count + 10.0)
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.target_accept - accept)
        x = self.mu - math.sqrt(self.count) / 0.05 * self.s_bar
        weight = self.count**-0.75
        self.x_bar = weight * x + (1.0 - weight) * self.x_bar
        return math.exp(x)

    def final(self) -> float:
        return math.exp(self.x_bar)
