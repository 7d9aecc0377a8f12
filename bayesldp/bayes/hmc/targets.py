"""The posterior as NUTS sees it: the compiled-target base (:class:`_CompiledTarget`), the
ALR target (:class:`_Target`: fixed Dirichlet prior, or the adaptive prior's marginal scheme)
and the posterior mode (:func:`_find_mode`).  The other coordinates' targets subclass the base:
:mod:`bayesldp.bayes.hmc.nested`, :mod:`bayesldp.bayes.hmc.gamma`,
:mod:`bayesldp.bayes.hmc.joint`, :mod:`bayesldp.bayes.hmc.smooth`; their compiled densities
are in :mod:`bayesldp.bayes.hmc.densities`.

Initialisation: Newton's method finds the posterior mode in ``z``; the inverse of the negative
Hessian there (the Laplace approximation) is the first dense inverse metric, and each chain
starts from its own draw of that Gaussian.
"""

from __future__ import annotations

import math

import numpy as np

from bayesldp.bayes.hmc.densities import _logp_grad
from bayesldp.bayes.prior import AdaptiveDirichlet
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

#: the largest change of a coordinate in one Newton step of :func:`_find_mode` (an unbounded
#: step from uniform theta can land at a corner that beats its start, and the search stops there)
_MAX_NEWTON_STEP = 5.0


class _CompiledTarget:
    """A posterior whose log-density and gradient are the compiled kernel :func:`_logp_grad` on
    the data tuple ``data()`` (subclasses set ``lik``, ``k`` and ``_data`` or ``data``)."""

    lik: Likelihood
    k: int
    _data: tuple

    def data(self) -> tuple:
        return self._data

    def work(self) -> tuple:
        """Scratch arrays of the compiled log-density: theta, g (K,) and three of length U."""
        rows = self.lik.n_rows
        return (np.empty(self.k), np.empty(self.k), np.empty(rows), np.empty(rows),
                np.empty(rows))  # fmt: skip

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log-density (C,) and gradient (C, K) at ``q`` of shape (C, K)."""
        work = self.work()
        lp = np.empty(q.shape[0])
        grad = np.empty(q.shape)
        for c in range(q.shape[0]):
            lp[c] = _logp_grad(np.ascontiguousarray(q[c], dtype=float), self.data(), work, grad[c])
        return lp, grad

    def theta_hyper(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta`` (N, K) (the kernel's softmax) and ``e^{q[-1]}`` (N,) at ``q`` (N, d): the
        hyperparameter sampled jointly as the last coordinate (the adaptive prior's ``a``, the
        smoothness prior's ``lambda``)."""
        work = self.work()
        grad = np.empty(self.d)
        theta = np.empty((q.shape[0], self.k))
        for i in range(q.shape[0]):
            _logp_grad(np.ascontiguousarray(q[i], dtype=float), self.data(), work, grad)
            theta[i] = work[0]
        return theta / theta.sum(axis=-1, keepdims=True), np.exp(q[:, -1])

    def laplace(self, q: np.ndarray) -> np.ndarray:
        """A covariance from the finite-difference Hessian at ``q``, eigenvalues clipped."""
        h = 1e-5
        hess = np.empty((self.d, self.d))
        for i in range(self.d):
            dq = np.zeros(self.d)
            dq[i] = h
            _, gp = self(q[None, :] + dq)
            _, gm = self(q[None, :] - dq)
            hess[:, i] = (gp[0] - gm[0]) / (2 * h)
        prec, vec = np.linalg.eigh(-0.5 * (hess + hess.T))
        if not np.all(np.isfinite(prec)):
            return np.eye(self.d)
        prec = np.clip(prec, 1e-2, None)
        return (vec / prec) @ vec.T


class _Target(_CompiledTarget):
    """Log-density of the ALR coordinates ``z`` and its gradient, batched over chains.

    Every product with the tally's rows is one of :class:`bayesldp.likelihood.Likelihood`, so a
    gradient costs O(U K) for dense rows, O(nnz) in support form and O(U + K) for GRR.
    """

    def __init__(self, tally: Tally, prior: np.ndarray | AdaptiveDirichlet) -> None:
        self.tally = tally
        self.lik = Likelihood(tally)
        self.n = self.lik.n
        self.k = tally.k
        self.d = self.k - 1
        if isinstance(prior, AdaptiveDirichlet):
            self.adaptive = prior
            self.alpha = np.ones(self.k)  # the start of the mode search only
            self.prior_a, self.prior_c = prior.a, prior.c
            self.shift = self.n
            self.const = 0.0
        else:
            self.adaptive = None
            self.alpha = prior
            self.prior_a = self.prior_c = None  # numba then compiles no adaptive-prior code
            self.shift = self.n + float(prior.sum())
            self.const = math.lgamma(float(prior.sum())) - sum(math.lgamma(a) for a in prior)

    def data(self) -> tuple:
        """What the compiled kernels read: the likelihood's arrays, counts and the prior."""
        return (*self.lik.arrays, self.lik.counts, self.alpha, self.shift,
                self.const + self.lik.scale_const, self.prior_a, self.prior_c,
                *_NO_JOINT, *_NO_GAMMA, *_NO_SMOOTH, *_NO_NEST, *_NO_WALK)  # fmt: skip

    def theta(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta = softmax([z, 0])`` and ``log theta`` for ``z`` of shape (..., d)."""
        zf = np.concatenate([z, np.zeros((*z.shape[:-1], 1))], axis=-1)
        zf -= zf.max(axis=-1, keepdims=True)
        e = np.exp(zf)
        s = e.sum(axis=-1, keepdims=True)
        return e / s, zf - np.log(s)

    def _prior(self, log_theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Prior log-density on z (C,), the concentration in its gradient (C, K) and, for the
        adaptive prior, ``Var[a | theta]`` (C,)."""
        if self.adaptive is None:
            lp = log_theta @ self.alpha + self.const
            return lp, np.broadcast_to(self.alpha, log_theta.shape), np.zeros(len(lp))
        s_total = log_theta.sum(axis=-1)
        logp = self.adaptive.conditional_log_probs(s_total)
        probs = np.exp(logp)
        abar = probs @ self.prior_a
        var = probs @ (self.prior_a**2) - abar**2
        terms = self.prior_c + self.prior_a * s_total[:, None]
        lp = terms.max(axis=-1) + np.log(np.exp(terms - terms.max(axis=-1, keepdims=True)).sum(-1))
        return lp, np.repeat(abar[:, None], self.k, axis=1), np.maximum(var, 0.0)

    def __call__(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log-density (C,) and gradient (C, d) at ``z`` of shape (C, d)."""
        theta, log_theta = self.theta(z)
        logp, conc, _ = self._prior(log_theta)
        g = np.empty_like(theta)
        for c in range(theta.shape[0]):
            ll, g[c] = self.lik.grad(theta[c])
            logp[c] += ll
        d = self.d
        shift = self.n + conc.sum(axis=-1, keepdims=True)
        grad = theta[:, :d] * (g[:, :d] - shift) + conc[:, :d]
        return logp, grad

    def hessian(self, z: np.ndarray) -> np.ndarray:
        """Hessian (d, d) of the log-density at one point ``z`` (d,).

        ``diag(theta*g) - D L^T diag(c/mu^2) L D - (n + A)(diag theta - theta theta^T)`` with
        ``D = diag(theta)``, restricted to the first ``d`` coordinates; for the adaptive prior
        ``A = K abar`` plus ``Var[a | theta] (1 - K theta)(1 - K theta)^T``.
        """
        theta, log_theta = self.theta(z[None, :])
        _, conc, var = self._prior(log_theta)
        theta = theta[0]
        _, mu = self.lik.evaluate(theta)
        _, g = self.lik.grad(theta)
        gram = self.lik.full_gram(self.lik.counts / (mu * mu))
        hess = np.diag(theta * g) - theta[:, None] * gram * theta[None, :]
        hess -= (self.n + conc[0].sum()) * (np.diag(theta) - np.outer(theta, theta))
        if self.adaptive is not None:  # d S / d z = 1 - K theta; the a-mixture's curvature
            ds = 1.0 - self.k * theta
            hess += var[0] * np.outer(ds, ds)
        return hess[: self.d, : self.d]


#: the joint-sampling slots of the kernels' data tuple (weights, categories, parameters) when
#: not sampling jointly: None, so numba compiles the joint density only for the joint scheme
#: (:func:`_joint_density`), about 2 s less compilation on a first fit
_NO_JOINT = (None, None, None)
#: the log-gamma slot of the kernels' data tuple (data[15]) when not sampling log-gamma
#: coordinates: None, so numba compiles that density only where it is used
_NO_GAMMA = (None,)
#: the smoothness prior's slot (data[16]) when not sampling it: None, compiled only where used
_NO_SMOOTH = (None,)
#: the nested coordinates' slot (data[17]: category codes and order, :func:`_nesting`) when the
#: coordinates are plain log-ratios: None, so numba compiles the nested density only where used
_NO_NEST = (None,)
#: the random walk's slot (data[18], :mod:`bayesldp.bayes.hmc.walk`) for every other target
_NO_WALK = (None,)


def _find_mode(target: _Target, z0: np.ndarray, iters: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Damped Newton ascent, at most ``_MAX_NEWTON_STEP`` per coordinate and step; returns the
    mode and a positive definite covariance there."""
    z = z0.copy()
    logp, grad = target(z[None, :])
    logp, grad = float(logp[0]), grad[0]
    damping = 0.0
    for _ in range(iters):
        neg_h = -target.hessian(z)
        scale = np.sqrt(np.abs(np.diag(neg_h))) + 1e-300
        step = None
        for _ in range(60):
            try:
                chol = np.linalg.cholesky(neg_h + damping * np.diag(scale**2))
            except np.linalg.LinAlgError:
                damping = max(1e-8, 10 * damping)
                continue
            step = np.linalg.solve(chol.T, np.linalg.solve(chol, grad))
            break
        if step is None:
            break
        step *= min(1.0, _MAX_NEWTON_STEP / max(float(np.abs(step).max()), 1e-300))
        t = 1.0
        improved = False
        for _ in range(40):
            cand = z + t * step
            lp_c, g_c = target(cand[None, :])
            if np.isfinite(lp_c[0]) and lp_c[0] >= logp - 1e-12 * abs(logp):
                improved = True
                break
            t *= 0.5
        if not improved:
            break
        decrement = float(grad @ step)
        z, logp, grad = cand, float(lp_c[0]), g_c[0]
        damping = damping / 10 if damping > 1e-8 else 0.0
        if decrement < 1e-10 and t == 1.0:
            break
    neg_h = -target.hessian(z)
    try:
        chol = np.linalg.cholesky(neg_h)
        inv_chol = np.linalg.solve(chol, np.eye(target.d))
        cov = inv_chol.T @ inv_chol
    except np.linalg.LinAlgError:
        cov = np.eye(target.d)
    if not np.all(np.isfinite(cov)):
        cov = np.eye(target.d)
    return z, cov
