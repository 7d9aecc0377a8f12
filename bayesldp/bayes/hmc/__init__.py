"""bayesldp's default posterior sampler: NUTS on log-ratio coordinates, compiled with numba.

The posterior of a population distribution ``theta`` given a :class:`~bayesldp.Tally` and a
Dirichlet(``alpha``) prior,

.. math:: p(\\theta \\mid \\text{tally}) \\propto \\prod_u (L_u \\cdot \\theta)^{c_u}
          \\prod_x \\theta_x^{\\alpha_x - 1},

is smooth and of dimension ``K - 1``; its log-density and gradient cost one pass over the
distinct rows (``L theta`` and ``L^T w``).  This module samples it with the No-U-Turn sampler
(Hoffman and Gelman, JMLR 2014) in the multinomial form used by Stan and PyMC (Betancourt,
arXiv:1701.02434, appendix A):

* Coordinates: additive log-ratios ``z_x = log(theta_x / theta_{K-1})``, ``x < K - 1``, so
  ``theta = softmax([z, 0])``.  The Jacobian of ``z -> theta`` is ``prod_x theta_x``, hence the
  log-density on ``z`` is

  .. math:: \\log p(z) = \\sum_u c_u \\log(L_u \\cdot \\theta) + \\sum_x \\alpha_x \\log \\theta_x
            + \\log\\Gamma(A) - \\sum_x \\log\\Gamma(\\alpha_x),\\quad A = \\sum_x \\alpha_x,

  with gradient ``theta_x (g_x - n - A) + alpha_x``, ``g = L^T (c / L theta)``, ``n = sum c``.
* Nested log-ratios (``coordinates="auto"``, wherever :func:`_nesting` finds a group G): a
  mechanism can measure a group G of categories almost only through their total (RRRR's
  categories outside its subset S).  On plain log-ratios the posterior then lies near a curved
  surface (the log-sum-exp of the group's coordinates pinned, their split loose), where the
  step size that ``target_accept = 0.8`` adapts to diverges.  :class:`_NestedTarget` samples
  G's total as one log-ratio to a reference outside G and the split as log-ratios inside G; by
  the Dirichlet's aggregation property the log-density is the same function of ``theta``
  (:func:`_logp_grad_nested`), and the adaptive prior's joint scheme takes the same
  coordinates.  RRRR, K = 10, 30 tallies (benchmarks/results/shared_information.md): at
  n = 1e5, nested in 28, Dirichlet(1) at 0.8 no divergent draw in 10.4 leapfrog steps per draw
  (plain log-ratios: 12 divergent draws in 9 fits at 0.8, none at 0.95 in 26.6 steps), median
  smallest bulk ESS 2029 against 1615; the adaptive prior at 0.9 none in 13.9 steps (plain: 30
  in 13 fits at 0.9, 10 in 7 fits at 0.95 in 27.6 steps).  At n = 1e3 each category outside S
  carries less than one effective count and :func:`_shared_information` stays below
  ``SHARED_INFORMATION``, yet G is nested (in 28 fits): the adaptive prior's default then has
  12 divergent draws in 3 fits, 28.9 steps, ESS 979 and r_hat at most 1.023, against 79 in 15,
  48.8 steps, ESS 481 and 1.115 on plain log-ratios.  No group is found on GRR, OUE, OLH,
  Hadamard response, subset selection, SHE, THE, CMS or RAPPOR (K = 10 and 30, n = 1e3-1e5).
* Large K (``coordinates="auto"``: a fixed prior with K >= 200 and every ``alpha_x >= 1``):
  log-gamma coordinates ``x`` in R^K, ``theta = softmax(x)`` with independent log-Gamma(alpha_x)
  priors (:class:`_GammaTarget`), and a diagonal metric, O(K) per leapfrog step.  In ALR
  coordinates every ``z_x`` shares the reference's ``-log theta_{K-1}``, so a weakly measured
  posterior has correlations of about 1/2 between all pairs and needs the dense metric (2 d^2
  per step); in log-gamma coordinates such categories are independent.  GRR, K = 1000,
  n = 1e6: 10.1 s whole process (benchmarks/results/posterior_large_n.md).
* Initialisation: Newton's method finds the posterior mode in ``z``; the inverse of the negative
  Hessian there (the Laplace approximation) is the first dense inverse metric, and each chain
  starts from its own draw of that Gaussian.
* Warm-up as in Stan: step size by dual averaging (Nesterov 2009; Hoffman and Gelman,
  section 3.2.1) towards ``target_accept``, re-initialised by Stan's doubling heuristic after each
  metric update, and a dense inverse metric re-estimated at the end of doubling windows
  (buffers 75 / 50 and windows 25, 50, 100, 200, 500 for ``tune = 1000``) from the window's
  draws, shrunk towards the Laplace covariance with the weight of ``d + 3`` draws.
* Trajectories: doubling with multinomial sampling inside sub-trees, biased progressive sampling
  between them, and the generalised no-U-turn criterion with the extra checks across merged
  sub-trees (Stan >= 2.26, PyMC).  The recursion is run iteratively: completed sub-trees merge on
  a stack like a binary counter, so a sub-tree stops at its first U-turn exactly as the recursive
  version would.  An energy error above 1000 is a divergence.
* Speed: one transition (tree building, leapfrog steps, log-density and gradient) is one call of
  a numba-compiled kernel (``cache=True``: compiled once per installation, a few seconds, with a
  one-line notice, then loaded from disk; only the specialisation a fit needs is compiled: the
  joint scheme's and the adaptive prior's densities only for them); warm-up bookkeeping and the
  step-size heuristic are Python around compiled calls.  Chains run on ``cores`` threads (the
  kernels release the GIL; about three quarters of a chain's time is inside them on GRR,
  K = 20), each with its own child Generator (``Generator.spawn``, drawn before any chain
  starts) and a splitmix64 stream for the uniforms, so the draws do not depend on ``cores``.
  A tqdm bar per chain advances between transitions.

Adaptive prior (:class:`~bayesldp.bayes.AdaptiveDirichlet`, ``theta | a ~ Dirichlet(a 1_K)``).
Two schemes, option ``adaptive_scheme``:

* ``"joint"`` (default): NUTS on ``(u, s)``, ``s = log a`` with a *continuous* normal prior
  ``Normal(log_a_mean, log_a_sd^2)`` (the grid of the other methods is the trapezoidal
  discretisation of this normal within ``+-width`` sd; the two posteriors agree to quadrature
  accuracy unless the posterior of ``a`` reaches past the grid's ends), and
  ``z_x = c_x(a) + R_x(a) u_x - B_x(a) softplus(-u_x)`` (:func:`_logp_grad_joint`): given ``a``,
  ``log theta_x`` is about log-Gamma(a + m_x) distributed (``m_x`` the data's effective count
  of the category), with a width about ``(1 + a + m_x)^{-1/2}`` above its mode, and below it,
  where the data stop constraining a category (the likelihood stays positive as
  ``theta_x -> 0``), the prior's exponential tail of scale ``1/a``; the slopes of ``u -> z``
  follow both sides (the lower one blends the data's scale and the prior's tail with a weight
  ``w_x = 1 / (1 + a0 m_x)`` in the spirit of partial non-centring, Papaspiliopoulos, Roberts
  and Skold 2007), so the geometry in ``u`` no longer depends on ``a`` (the funnel of the
  marginal scheme) nor has the ``1/a`` tails that make NUTS trajectories long at small ``a``
  (a fixed Dirichlet(0.025) prior has them too).  ``m`` and ``a0`` come from a pilot: the
  posterior mode under Dirichlet(0.01) and a rough posterior of ``a`` (the data as effective
  counts in a Dirichlet-multinomial, on the grid).  Before ``R_x`` depended on ``m_x`` the upper
  slope was ``1 - w_x + w_x (1 + a)^{-1/2}``, too wide for categories the data measure a
  little (``m`` about 1-10) and the funnel left in for those they measure well at large ``a``
  (the 192 GRR fits of benchmarks/results/adaptive_convergence.md: r_hat above 1.01 in 40 fits
  before, 23 now, divergent draws in 46 and 23; scratch, same fits: median bulk ESS 574 and
  883).
  The centre ``c_x`` follows ``a``
  (:func:`_centres`): the Dirichlet(a) posterior mode, raised to the upper edge of the mass for
  small ``a + m_x``, at knots one prior sd apart, interpolated in ``log a``; with fixed centres the
  mass of a weakly measured category sat near ``u = 0`` at small ``a`` but about
  ``sqrt(a) (c_x - z_x)`` below it at large ``a`` (a funnel in ``(u, log a)``).  Target
  acceptance 0.9 (see :func:`sample`).  Draws of ``a`` are
  returned (``SamplerOutput.extra["a"]``).  Measured (benchmarks/adaptive_hmc.py, GRR K = 30):
  r_hat, bulk ESS and time much better than "marginal" where the data say little about ``a``;
  a few divergent transitions remain when the posterior of ``a`` reaches far above 10 (weak data,
  prior-dominated large ``a``).
* ``"marginal"``: NUTS on ``z`` under the marginal prior ``log sum_j exp(c_j + a_j S)`` (``a``
  summed out on its grid, exact for the grid; ``fit`` then draws ``a | theta``).  Mixes slowly
  when the data say little about ``a``.

Smoothness prior (:class:`~bayesldp.bayes.SmoothDensity`, ordered bins): NUTS on the RW2
coefficients, the slope and ``log lambda`` (:class:`_SmoothTarget`, :func:`_logp_grad_smooth`;
the coordinates of :func:`bayesldp.bayes.model.smooth_theta`), a diagonal metric after a fixed
linear map of the smoothest coefficient and the slope from the Laplace covariance at the start
(:meth:`_SmoothTarget.decorrelate`; steps per draw in benchmarks/results/smooth_prior.md),
O(K M) per gradient for the basis besides the likelihood.

Draws, sample statistics and their names follow ArviZ ("diverging", "energy", "tree_depth",
"n_steps", "step_size", "lp", "acceptance_rate").  Same ``random_seed`` gives the same draws, bit
for bit, on the same machine.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numba as nb
import numpy as np
from numba.extending import overload
from scipy.linalg import solve_triangular
from scipy.special import gammaln, logsumexp

from bayesldp import likelihood as lk
from bayesldp._validation import as_generator, check_choice, check_int, check_open_unit
from bayesldp.bayes import _feedback
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.prior import AdaptiveDirichlet, SmoothDensity
from bayesldp.errors import InvalidInputError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

__all__ = ["sample"]

_MAX_ENERGY_ERROR = 1000.0
_LOG_08 = math.log(0.8)
_PILOT_ALPHA = 0.01  # the pilot's Dirichlet concentration
_S_LIMIT = 50.0  # |log a| beyond this has prior mass 0 (the grid spans log_a_mean +- 8 sd)
#: the options ``fit(method="hmc", ...)`` passes here (``method="auto"`` reads them too)
OPTIONS = ("tune", "target_accept", "max_treedepth", "metric", "adaptive_scheme", "coordinates")
#: ``coordinates="auto"`` samples a fixed prior on log-gamma coordinates from this K on
_LOG_GAMMA_MIN_K = 200
#: the joint scheme's centre knots in log a, in prior sd from its mean (:func:`_centres`)
_CENTRE_KNOTS = np.arange(-4.0, 4.5, 1.0)
#: the largest change of a coordinate in one Newton step of :func:`_find_mode` (an unbounded
#: step from uniform theta can land at a corner that beats its start, and the search stops there)
_MAX_NEWTON_STEP = 5.0
_BAR_STEP = 20  # iterations between progress-bar updates


# ---------------------------------------------------------------------------- target density
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
                *_NO_JOINT, *_NO_GAMMA, *_NO_SMOOTH, *_NO_NEST)  # fmt: skip

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


class _JointTarget(_CompiledTarget):
    """The adaptive prior's posterior on ``q = (u, s)``, ``s = log a``: ``theta`` and ``a``
    jointly, in the coordinates of :func:`_logp_grad_joint`.

    Its parameters come from a pilot (:func:`_pilot`): the posterior mode of ``theta`` under
    Dirichlet(0.01) and a rough posterior median ``a0`` of ``a``.  The reference category is
    the pilot's largest; category ``x`` gets the effective count ``m_x`` (the data's information
    about ``log theta_x`` at the pilot, about ``N theta_x`` for a multinomial sample of ``N``)
    and the weight ``w_x = 1 / (1 + a0 m_x)`` (``w = 1``: the lower side follows the prior's
    tail, for a category the data say little about; ``w = 0``: the data's scale).  The
    centre ``c_x(a)`` (``u_x = 0``) is interpolated in ``log a`` between the knots of
    :func:`_centres` (``_CENTRE_KNOTS`` prior sd from the prior's mean).  With ``codes``
    (:func:`_nesting`) the log-ratios are nested ones (:class:`_NestedTarget`), the reference
    the larger of the largest category outside the group and the group's total
    (:func:`_nested_order`), ``m`` the information about each nested log-ratio
    (:func:`_nested_information`), and the group's total has the prior concentration
    ``|G| a`` (Dirichlet aggregation), which its ``R``, ``L``, weight and centre use
    (``concentration``).
    """

    def __init__(self, marginal: _Target, z_mode: np.ndarray,
                 codes: np.ndarray | None = None) -> None:  # fmt: skip
        prior = marginal.adaptive
        self.lik, self.n, self.k = marginal.lik, marginal.n, marginal.k
        self.d = self.k
        self.codes = codes
        a0, theta = _pilot(marginal, z_mode)
        if codes is None:
            _, g = self.lik.grad(theta)
            fisher = self.lik.fisher_diag(theta)
            info = np.maximum(theta**2 * (fisher - g) + theta * (1 - theta) * (self.n - g), 0.0)
            ref = int(np.argmax(theta))
            self.idx = np.concatenate([np.delete(np.arange(self.k), ref), [ref]]).astype(np.int64)
            counts = info[self.idx[:-1]]
        else:  # nested log-ratios (_NestedTarget), each with the information about itself
            self.idx = _nested_order(codes, theta)
            counts = np.maximum(_nested_information(self.lik, theta, codes, self.idx), 0.0)
        d = self.k - 1
        self.concentration = np.ones(d)  # of each coordinate's prior, in units of a
        if codes is not None:  # the group's total: Dirichlet(|G| a) by aggregation
            self.concentration[codes[self.idx[:-1]] == 2] = np.count_nonzero(codes)
        tails = np.concatenate([1.0 / (1.0 + a0 * self.concentration * counts), counts])
        if codes is not None:
            tails = np.concatenate([tails, self.concentration])  # the kernel's data[12]
        self.weights, self.effective_counts = tails[:d], tails[d : 2 * d]  # views
        knots = prior.log_a_mean + prior.log_a_sd * _CENTRE_KNOTS
        centres = _centres(marginal, np.exp(knots), self.idx, self.effective_counts, codes,
                           self.concentration)  # fmt: skip
        slopes = np.gradient(centres, knots, axis=0)
        par = np.concatenate([[prior.log_a_mean, prior.log_a_sd, knots[0], knots[1] - knots[0],
                               len(knots)], centres.ravel(), slopes.ravel()])  # fmt: skip
        nest = _NO_NEST if codes is None else ((codes, self.idx),)
        self._data = (*self.lik.arrays, self.lik.counts, np.ones(self.k), float(self.n),
                      self.lik.scale_const, None, None, tails, self.idx,
                      par, *_NO_GAMMA, *_NO_SMOOTH, *nest)  # fmt: skip
        self.start = np.concatenate([np.zeros(self.k - 1), [math.log(a0)]])
        self.knots, self.centres, self.slopes = knots, centres, slopes

    def theta_hyper(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta`` (N, K) and ``a`` (N,) at ``q`` (N, K): the map of :func:`_logp_grad_joint`
        vectorised over draws, without its likelihood pass (the base class calls the kernel once
        per draw: 13 ms of a 0.18 s fit on GRR, K = 10, n = 1e5, 4 x 1000 draws; scratch)."""
        u, s = q[:, :-1], q[:, -1]
        a = np.exp(s)[:, None]
        ca = a * self.concentration
        big_l = np.sqrt(1.0 + ca) / ca
        big_r = 1.0 / np.sqrt(1.0 + ca + self.effective_counts)
        z = (self._centre(s) + big_r * u
             - self.weights * (big_l - big_r) * np.logaddexp(0.0, -u))  # fmt: skip
        if self.codes is not None:
            return _nested_theta(z, self.codes, self.idx)[0], a[:, 0]
        full = np.zeros((q.shape[0], self.k))
        full[:, self.idx[:-1]] = z
        full = np.exp(full - full.max(axis=1, keepdims=True))
        return full / full.sum(axis=1, keepdims=True), a[:, 0]

    def _centre(self, s: np.ndarray) -> np.ndarray:
        """The centres ``c(a)`` (N, K - 1) at ``s = log a`` (N,), as :func:`_hermite`
        interpolates them: cubic Hermite between the knots, linear beyond the end ones."""
        step = self.knots[1] - self.knots[0]
        pos = (s - self.knots[0]) / step
        j = np.clip(np.floor(pos), 0, len(self.knots) - 2).astype(np.int64)
        t = (pos - j)[:, None]
        c0, c1, m0, m1 = self.centres[j], self.centres[j + 1], self.slopes[j], self.slopes[j + 1]
        t2, t3 = t * t, t * t * t
        inside = ((2 * t3 - 3 * t2 + 1) * c0 + (t3 - 2 * t2 + t) * step * m0
                  + (-2 * t3 + 3 * t2) * c1 + (t3 - t2) * step * m1)  # fmt: skip
        below = c0 + t * step * m0  # t < 0: only at the first knot
        above = c1 + (t - 1.0) * step * m1  # t > 1: only at the last knot
        return np.where(t < 0.0, below, np.where(t > 1.0, above, inside))

    def work(self) -> tuple:
        """As the base class's, with ``g`` of length 3K: the kernel keeps per-category values
        between its passes in ``g[K:]`` (:func:`_logp_grad_joint`)."""
        theta, _, *rows = super().work()
        return (theta, np.empty(3 * self.k), *rows)


class _GammaTarget(_CompiledTarget):
    """The fixed Dirichlet prior's posterior on log-gamma coordinates ``x`` in R^K.

    ``g_x = e^{x_x}`` independent Gamma(``alpha_x``, 1) and ``theta = g / sum(g)`` give
    ``theta ~ Dirichlet(alpha)`` and ``sum(g) ~ Gamma(A)`` independent of it; the likelihood
    depends on ``theta`` alone, so the ``theta`` of draws of

    .. math:: \\log p(x) = \\sum_u c_u \\log(L_u \\cdot \\theta) + \\sum_x (\\alpha_x x_x - e^{x_x})
              - \\log\\Gamma(\\alpha_x)

    are exact posterior draws (:func:`_logp_grad_gamma`).  A category the data say little about
    is an independent log-Gamma coordinate here, where in ALR coordinates every ``z_x`` shares
    the reference's ``-log theta_{K-1}`` (correlation about 1/2 between all pairs: a diagonal
    metric cannot follow it, and a dense one costs O(K^2) per leapfrog step).  Sampled with a
    diagonal metric: O(K) per step besides the likelihood.
    """

    def __init__(self, marginal: _Target, z_mode: np.ndarray) -> None:
        self.lik, self.n, self.k = marginal.lik, marginal.n, marginal.k
        self.d = self.k
        self.alpha = marginal.alpha
        self.adaptive = None
        const = self.lik.scale_const - float(gammaln(self.alpha).sum())
        self._data = (*self.lik.arrays, self.lik.counts, self.alpha, float(self.n), const,
                      None, None, *_NO_JOINT, np.empty(0), *_NO_SMOOTH, *_NO_NEST)  # fmt: skip
        theta, log_theta = marginal.theta(z_mode[None, :])
        theta, log_theta = theta[0], log_theta[0]
        self.start = log_theta + math.log(float(self.alpha.sum()))  # sum(g) at its prior mean
        _, g = self.lik.grad(theta)
        info = theta**2 * (self.lik.fisher_diag(theta) - g) + theta * (1 - theta) * (self.n - g)
        self.laplace = (1.0 / (np.exp(self.start) + np.maximum(info, 0.0)))[None, :]

    def theta(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta = softmax(x)`` and ``log theta`` for ``x`` of shape (..., K)."""
        xs = x - x.max(axis=-1, keepdims=True)
        log_theta = xs - np.log(np.exp(xs).sum(axis=-1, keepdims=True))
        return np.exp(log_theta), log_theta


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
        self._data = (*marginal.data()[:17], (codes, self.idx))
        self.start = _nested_coords(log_theta, codes, self.idx)[0]

    def theta(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta`` and ``log theta`` (..., K) at nested coordinates ``q`` (..., K - 1)."""
        shape = q.shape[:-1]
        theta, log_theta = _nested_theta(q.reshape(-1, self.d), self.codes, self.idx)
        return theta.reshape(*shape, self.k), log_theta.reshape(*shape, self.k)


class _SmoothTarget(_CompiledTarget):
    """The smoothness prior's posterior (:class:`~bayesldp.bayes.SmoothDensity`) on
    ``q = (u, b, s)``: ``u`` (M) the RW2 coefficients, partially non-centred as in
    :func:`bayesldp.bayes.model.smooth_theta` (``y_j = (lambda scale_j)^{w_j} u_j``, ``w_j``
    from the data's ``information`` about ``y_j``, default at the EMS estimate;
    :func:`_smooth_target` measures it over a pilot chain's draws), ``b`` the slope and
    ``s = log lambda``
    (:func:`_logp_grad_smooth`).  The start is the posterior mode given ``lambda`` at its
    prior median (L-BFGS from the EMS estimate's projection on the basis); :meth:`laplace`
    gives the first metric there.
    """

    def __init__(self, tally: Tally, prior: SmoothDensity,
                 information: np.ndarray | None = None) -> None:  # fmt: skip
        from scipy.optimize import minimize

        from bayesldp.bayes.model import smooth_information, smooth_pilot, smooth_weights

        self.tally, self.prior = tally, prior
        self.adaptive = None
        self.lik = Likelihood(tally)
        self.n, self.k = self.lik.n, tally.k
        line, modes, scale = prior.basis()
        self.d = scale.shape[0] + 2
        theta0 = smooth_pilot(tally)
        log_scale = np.log(scale)
        s0 = prior.log_scale_mean
        if information is None:
            information = smooth_information(tally, prior, theta0)
        self.weights = smooth_weights(prior, information)
        par = np.array([prior.log_scale_mean, prior.log_scale_sd, prior.slope_sd])
        modes = np.ascontiguousarray(modes)
        self._smooth = (modes, np.ascontiguousarray(modes.T), line.copy(), log_scale,
                        self.weights, par)  # fmt: skip
        self._set_map(np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 0)))
        # start: the EMS estimate's log-weights on the basis, then the posterior mode
        f0 = np.log(theta0)
        u0 = (modes.T @ f0) / np.exp(self.weights * (s0 + log_scale))
        q0 = np.concatenate([u0, [line @ f0 / (line @ line), s0]])

        def neg(q: np.ndarray) -> tuple[float, np.ndarray]:
            lp, grad = self(q[None, :])
            return -float(lp[0]), -grad[0]

        # log lambda held at its prior median: the joint mode over it can sit at a rough
        # solution far from the typical set (log lambda 10.5 on SW at 1024 bins, eps = 2,
        # where the posterior's lies near 4-5)
        bounds = [(None, None)] * (self.d - 1) + [(s0, s0)]
        with np.errstate(all="ignore"):
            best = minimize(neg, q0, jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": 500})  # fmt: skip
        self.start = best.x if np.isfinite(best.fun) and best.fun <= neg(q0)[0] else q0

    def _set_map(self, idx: np.ndarray, centre: np.ndarray, t: np.ndarray) -> None:
        self._data = (*self.lik.arrays, self.lik.counts, np.ones(self.k), float(self.n),
                      self.lik.scale_const, None, None, *_NO_JOINT, *_NO_GAMMA,
                      (*self._smooth, idx, centre, t), *_NO_NEST)  # fmt: skip

    def decorrelate(self, mode: np.ndarray, cov: np.ndarray,
                    n_modes: int = 1) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Sample the smoothest ``n_modes`` coefficients and the slope as ``v`` with ``q = mode
        + T v`` there, ``T`` the Cholesky factor of their block of ``cov`` (the Laplace
        covariance at ``mode``); returns the mode and ``cov`` in the new coordinates.

        Where the density has little mass near an end of the domain, the data fix the
        log-weights only over the rest, and there the smoothest mode and the line are nearly
        the same function (posterior correlation -0.9994 on SW at 64 bins in a scratch run): a
        ridge that a diagonal metric crosses only in small steps.  An adapted dense metric over
        more modes took fewer steps but diverged where a low-mass region's log-weights meet
        the likelihood's exponential wall, so the map is fixed and this block small.
        """
        m = self.d - 2
        idx = np.r_[np.arange(min(n_modes, m)), m].astype(np.int64)
        try:
            t = np.linalg.cholesky(cov[np.ix_(idx, idx)])
        except np.linalg.LinAlgError:  # no usable block: the coordinates stay as they are
            return mode, cov
        self._set_map(idx, mode[idx].copy(), t)
        inv = np.eye(self.d)
        inv[np.ix_(idx, idx)] = np.linalg.inv(t)
        v = mode.copy()
        v[idx] = 0.0
        return v, inv @ cov @ inv.T


def _centres(marginal: _Target, a: np.ndarray, idx: np.ndarray, counts: np.ndarray,
             codes: np.ndarray | None = None,
             concentration: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """The joint scheme's centres (len(a), K - 1) at the knots ``a``: the Dirichlet(a_j)
    posterior mode's log-ratios to the reference ``idx[-1]``, raised by
    ``log(1 + 1/(a_j + m_x))`` (``m`` the categories' effective ``counts``).

    ``log theta_x`` is about log-Gamma(a + m) distributed: its mode sits ``log(1 + 1/(a + m))``
    below the upper edge of its mass (``log(a + m)`` against ``log(1 + a + m)``), far when
    ``a + m`` is small, and at the centre of a near-normal law when ``a + m`` is large; the raise
    moves ``u = 0`` to that edge for small ``a + m`` and leaves the mode for large.  Modes are
    found from the Dirichlet(1) mode outwards, each search starting at its neighbour's mode.
    """

    def mode(j: int, start: np.ndarray) -> np.ndarray:
        return _find_mode(_Target(marginal.tally, np.full(marginal.k, a[j])), start)[0]

    first = int(np.argmin(np.abs(np.log(a))))  # the knot nearest a = 1 (a is increasing)
    modes = np.empty((len(a), marginal.d))
    modes[first] = mode(first, np.zeros(marginal.d))
    for j in range(first + 1, len(a)):
        modes[j] = mode(j, modes[j - 1])
    for j in range(first - 1, -1, -1):
        modes[j] = mode(j, modes[j + 1])
    log_theta = marginal.theta(modes)[1]
    if codes is None:
        ratios = log_theta[:, idx[:-1]] - log_theta[:, idx[-1:]]
    else:  # nested log-ratios (codes: _nesting)
        ratios = _nested_coords(log_theta, codes, idx)
    conc = a[:, None] if concentration is None else a[:, None] * concentration[None, :]
    return ratios + np.log1p(1.0 / (conc + counts[None, :]))


def _pilot(marginal: _Target, z_mode: np.ndarray) -> tuple[float, np.ndarray]:
    """``theta`` at the posterior mode under Dirichlet(0.01) (empty categories near 0) and a
    rough posterior median ``a0`` of ``a``: the reports read as ``m_x`` effective counts of
    category ``x`` (the data's curvature in ``log theta_x`` there, about ``N theta_x`` for a
    multinomial sample of ``N``), scored by the Dirichlet-multinomial likelihood on the grid.

    The mode is searched from ``z_mode`` (the marginal posterior's); if that search ends at a
    corner (all mass on one category), again from the Dirichlet(1) posterior's mode, and the
    higher kept.  The adaptive prior's large-``a`` components put a narrow peak at uniform
    ``theta``; a marginal search from uniform can stop at the local mode it makes, and the
    pilot's search from there at a corner (OUE, K = 30, n = 10,000, eps = 0.5, a Dirichlet(0.05)
    population: ``a0`` the prior's median, every weight 1, the joint sampler's chains apart,
    r_hat 2.2).  Only then: choosing the higher of the two searches every time changed the
    pilot on weak data too (test_hmc_joint_scheme_on_weak_data_matches_the_exact_posterior
    then saw 103 divergent draws of 2,000)."""
    prior = marginal.adaptive
    sharp = _Target(marginal.tally, np.full(marginal.k, _PILOT_ALPHA))
    z_sharp, _ = _find_mode(sharp, z_mode, iters=50)
    theta = marginal.theta(z_sharp[None, :])[0][0]
    if theta.max() > 1.0 - 1e-9:  # a corner: search again from the Dirichlet(1) mode
        z_flat, _ = _find_mode(_Target(marginal.tally, np.ones(marginal.k)), np.zeros(marginal.d))
        other, _ = _find_mode(sharp, z_flat, iters=50)
        if sharp(other[None, :])[0][0] > sharp(z_sharp[None, :])[0][0]:
            theta = marginal.theta(other[None, :])[0][0]
    _, g = marginal.lik.grad(theta)
    m = np.maximum(theta**2 * (marginal.lik.fisher_diag(theta) - g), 0.0)
    a = prior.a[:, None]
    log_ev = (gammaln(marginal.k * prior.a) - gammaln(marginal.k * prior.a + m.sum())
              + (gammaln(a + m) - gammaln(a)).sum(axis=1))  # fmt: skip
    post = prior.log_w + log_ev
    cum = np.cumsum(np.exp(post - post.max()))
    return float(prior.a[np.searchsorted(cum, 0.5 * cum[-1])]), theta


def _shared_information(target: _Target, z: np.ndarray) -> float:
    """How much of the data's information about single categories is shared with others: the
    largest ratio ``m_x / m'_x`` (:func:`_information`) over the categories with ``m_x >= 1``
    at ``z``.  About 1 where each category is measured by itself (at most 1.32 on GRR, OUE,
    OLH, Hadamard response, subset selection, SHE, THE, CMS and RAPPOR, K = 10 and 30), up to
    12.82 on RRRR's reports (K = 10, S = {0, 1, 2}, eps = 1, eps1 = 0.8), whose categories
    outside ``S`` are measured almost only through their total: the likelihood pins the total
    and leaves the split loose (benchmarks/results/shared_information.md).
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
    fits at 0.9, 7 at 0.95 (benchmarks/results/shared_information.md).  Nested log-ratios
    remove the curvature, and ``_run`` passes ``shared = 1`` for them (nested wherever
    :func:`_nesting` finds a group, whatever ``shared``)."""
    if shared > SHARED_INFORMATION:
        return 0.95
    return 0.9 if hierarchical else 0.8


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


# ---------------------------------------------------------------------------- compiled NUTS
# One chain at a time, with no Python in the loop.  ``data`` is the tuple (rows (U, K),
# counts (U,), alpha (K,), n + A, log normalising constant).  Uniform draws come from a
# splitmix64 stream whose state (one uint64) is seeded from the chain's numpy Generator; normal
# draws for the momenta are drawn by numpy and passed in.  Kernels avoid array expressions and
# numba's Generator and LAPACK support to keep compilation short (they are cached on disk).

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


@nb.njit(cache=True)
def _uniform(state):  # pragma: no cover - compiled
    """Next double in [0, 1) of the splitmix64 stream held in ``state[0]``."""
    s = state[0] + _GOLDEN
    state[0] = s
    s = (s ^ (s >> _S30)) * _MIX1
    s = (s ^ (s >> _S27)) * _MIX2
    s = s ^ (s >> _S31)
    return float(s >> _S11) * 1.1102230246251565e-16


@nb.njit(cache=True)
def _copy(dst, src):  # pragma: no cover - compiled
    for i in range(src.shape[0]):
        dst[i] = src[i]


@nb.njit(cache=True)
def _prior_terms(s_total, pa, pc):  # pragma: no cover - compiled
    """``log sum_j exp(pc_j + pa_j S)`` and ``abar = E[a | S]`` (adaptive prior)."""
    top = -math.inf
    for j in range(pa.shape[0]):
        v = pc[j] + pa[j] * s_total
        if v > top:
            top = v
    tot = 0.0
    mean = 0.0
    for j in range(pa.shape[0]):
        e = math.exp(pc[j] + pa[j] * s_total - top)
        tot += e
        mean += pa[j] * e
    return top + math.log(tot), mean / tot


def _marginal_prior(s_total, pa, pc):  # pragma: no cover - replaced by the overload
    """:func:`_prior_terms` for the adaptive prior; never compiled for a fixed prior (``pa``
    None)."""
    raise NotImplementedError


@overload(_marginal_prior)
def _marginal_prior_overload(s_total, pa, pc):
    if isinstance(pa, nb.types.NoneType):
        return lambda s_total, pa, pc: (0.0, 0.0)  # unreachable: pa is None
    return lambda s_total, pa, pc: _prior_terms(s_total, pa, pc)


@nb.njit(cache=True)
def _digamma(x):  # pragma: no cover - compiled
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series."""
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))))
    return acc + math.log(x) - 0.5 / x - series


@nb.njit(cache=True)
def _hermite(s, start, step, n_knots):  # pragma: no cover - compiled
    """The cubic Hermite interpolant at ``s`` on the knots ``start + step * j``: the knot pair
    (j0, j1) and the weights (8,) of (value j0, slope j0, value j1, slope j1) in the value, then
    in its derivative in ``s`` (a tuple: no allocation per gradient).  Beyond the end knots:
    linear, with the end knot's slope."""
    pos = (s - start) / step
    j = min(max(math.floor(pos), 0), n_knots - 2)
    t = pos - j
    if t < 0.0 or t > 1.0:
        j = j if t < 0.0 else j + 1
        t = t if t < 0.0 else t - 1.0
        return j, j, (1.0, t * step, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    t2 = t * t
    return (
        j,
        j + 1,
        (
            2 * t2 * t - 3 * t2 + 1,
            (t2 * t - 2 * t2 + t) * step,
            -2 * t2 * t + 3 * t2,
            (t2 * t - t2) * step,
            (6 * t2 - 6 * t) / step,
            3 * t2 - 4 * t + 1,
            (6 * t - 6 * t2) / step,
            3 * t2 - 2 * t,
        ),
    )


@nb.njit(cache=True)
def _logp_grad_joint(q, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of the adaptive prior's joint posterior of ``theta`` and
    ``s = log a`` on ``q = (u, s)``, ``u`` in R^{K-1}.

    ``z_x = c_x(a) + R_x u_x - B_x softplus(-u_x)`` for the categories ``idx[:K-1]`` and
    ``z = 0`` for the reference ``idx[K-1]``, ``theta = softmax(z)``, with
    ``R_x = (1 + a + m_x)^{-1/2}``, ``B_x = w_x (L - R_x)``, ``L = (1 + a)^{1/2} / a``.  Given
    ``a``, ``log theta_x`` is about log-Gamma(a + m_x) distributed (``m_x`` the data's effective
    count of the category): above its mode a width about ``(1 + a + m_x)^{-1/2}``, the slope
    ``R_x`` of ``dz/du = R_x + B_x sigmoid(-u)`` for ``u >> 0``.  Below it, where the data stop
    constraining the category (a likelihood bounded away from 0 as ``theta_x -> 0``), the
    prior's tail of scale ``1/a``: the slope for ``u << 0`` is ``(1 - w_x) R_x + w_x L``, with
    ``w_x`` near 1 where the data say little.  Both sides get scale about 1 in ``u`` whatever
    ``a``: no funnel in ``(z, a)``, no ``1/a`` tails at small ``a``.  Density: ``loglik +
    lgamma(K a) - K lgamma(a) + a S`` (Dirichlet(a) on the ALR coordinates, Jacobian included;
    ``S = sum_x log theta_x``) ``+ sum_x log dz_x/du_x`` (Jacobian of ``u -> z``)
    ``- (s - mu)^2 / (2 sd^2)`` (the normal prior on ``log a``).  ``data[12:15]`` = (``w``
    then ``m`` (2 (K-1),), category order ``idx`` (K,), parameters (:class:`_JointTarget`)).
    On nested log-ratios (``data[17]``, :func:`_nested_softmax`) ``data[12]`` holds a third
    block, each coordinate's prior concentration in units of ``a`` (``|G|`` for the group's
    total, by aggregation, 1 otherwise), which takes ``a``'s place in ``R_x`` and ``L``.
    ``grad[:K-1]`` holds ``exp(-|u_x|)`` between the two passes and ``g[K:3K-2]`` (the joint
    target's ``g`` has 3K entries, the likelihood's gradient in the first K) ``R_x`` and
    ``softplus(-u_x)``: each computed once per category.
    """
    dense, indptr, indices, delta, complement, offset, counts = data[:7]
    shift, const, tails, nidx, npar = data[8], data[9], data[12], data[13], data[14]
    theta, g, r, lth, w = work
    d = q.shape[0] - 1
    k = d + 1
    s = q[d]
    if not abs(s) <= _S_LIMIT:  # a outside [e^-50, e^50] (also NaN): no density
        for i in range(d + 1):
            grad[i] = 0.0
        return -math.inf
    a = math.exp(s)
    big_l = math.sqrt(1.0 + a) / a
    d_l = big_l * (0.5 * a / (1.0 + a) - 1.0)
    mu, sd = npar[0], npar[1]
    # the centres: cubic Hermite in s between the knots, linear beyond them (_centres)
    n_knots = int(npar[4])
    j0, j1, h = _hermite(s, npar[2], npar[3], n_knots)
    c0, c1 = 5 + j0 * d, 5 + j1 * d  # values at the two knots, then the slopes at them
    m0, m1 = c0 + n_knots * d, c1 + n_knots * d
    ref = nidx[d]
    theta[ref] = 0.0  # holds z until the softmax
    top = 0.0
    nested = _is_nested(data[17])
    for i in range(d):
        u = q[i]
        e = math.exp(-abs(u))
        ca, bl = a, big_l
        if nested:  # the coordinate's concentration: |G| a for the group's total
            ca = a * tails[2 * d + i]
            bl = math.sqrt(1.0 + ca) / ca
        big_r = 1.0 / math.sqrt(1.0 + ca + tails[d + i])
        sp = max(-u, 0.0) + math.log1p(e)  # softplus(-u)
        grad[i], g[k + i], g[2 * k + i] = e, big_r, sp  # kept for the second pass
        ci = h[0] * npar[c0 + i] + h[1] * npar[m0 + i] + h[2] * npar[c1 + i] + h[3] * npar[m1 + i]
        zi = ci + big_r * u - tails[i] * (bl - big_r) * sp
        theta[nidx[i]] = zi
        if zi > top:
            top = zi
    log_g = 0.0
    if nested:
        s_total, _, log_g = _nest_softmax(data[17], theta, data[7])
    else:
        tot = 0.0
        for x in range(k):
            tot += math.exp(theta[x] - top)
        log_norm = top + math.log(tot)
        s_total = 0.0
        for x in range(k):
            log_theta = theta[x] - log_norm
            s_total += log_theta
            theta[x] = math.exp(log_theta)
    lp = const + lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta,
                             0.0, r, lth, w, g[:k])  # fmt: skip
    lp += math.lgamma(k * a) - k * math.lgamma(a) + a * s_total - 0.5 * ((s - mu) / sd) ** 2
    ds = k * a * (_digamma(k * a) - _digamma(a)) + a * s_total - (s - mu) / (sd * sd)
    shift_a = shift + k * a
    if nested:  # g[x] becomes the gradient in the coordinate x carries
        for x in range(k):
            g[x] = theta[x] * g[x] + a
        _nest_gradient(data[17], g[:k], theta, shift_a, log_g)
    for i in range(d):
        x = nidx[i]
        u = q[i]
        e, big_r, sp = grad[i], g[k + i], g[2 * k + i]
        sig = e / (1.0 + e) if u >= 0.0 else 1.0 / (1.0 + e)  # sigmoid(-u)
        wi = tails[i]
        ca, bl, dl = a, big_l, d_l
        if nested:
            ca = a * tails[2 * d + i]
            bl = math.sqrt(1.0 + ca) / ca
            dl = bl * (0.5 * ca / (1.0 + ca) - 1.0)
        big_b = wi * (bl - big_r)
        d_r = -0.5 * ca * big_r**3
        d_b = wi * (dl - d_r)
        slope = big_r + big_b * sig
        gz = g[x] if nested else theta[x] * (g[x] - shift_a) + a
        lp += math.log(slope)
        grad[i] = gz * slope - big_b * sig * (1.0 - sig) / slope
        dc = h[4] * npar[c0 + i] + h[5] * npar[m0 + i] + h[6] * npar[c1 + i] + h[7] * npar[m1 + i]
        ds += gz * (d_r * u - d_b * sp + dc) + (d_r + d_b * sig) / slope
    grad[d] = ds
    return lp


def _where_set(slot, kernel):
    """An overload compiled to ``kernel`` where ``data[slot]`` holds its density's arrays, and to
    a NaN (never called) where that slot is None, so a fit compiles only the density it uses."""

    def choose(z, data, work, grad):
        if isinstance(data.types[slot], nb.types.NoneType):
            return lambda z, data, work, grad: math.nan  # unreachable: data[slot] is None
        return lambda z, data, work, grad: kernel(z, data, work, grad)

    return choose


def _joint_density(z, data, work, grad):  # pragma: no cover - replaced by the overload
    """:func:`_logp_grad_joint` where data[12] holds the joint scheme's arrays."""
    raise NotImplementedError


overload(_joint_density)(_where_set(12, _logp_grad_joint))


@nb.njit(cache=True)
def _nested_softmax(theta, codes, alpha):  # pragma: no cover - compiled
    """``theta`` from nested log-ratios, in place (:func:`_logp_grad_nested`): on entry
    ``theta[x]`` holds the coordinate category ``x`` carries (0 for the reference), on exit
    ``theta_x``.  Codes: 0 a category outside the group G, its log-ratio to the reference; 2
    the group's inner reference, carrying ``log(theta_G / theta_ref)``; 1 the other members,
    ``log(theta_x / theta_gref)``.  Returns ``S = sum_x log theta_x``,
    ``sum_x alpha_x log theta_x`` and ``log theta_G``."""
    k = theta.shape[0]
    top_o = -math.inf
    top_i = 0.0  # the inner reference's own coordinate is 0
    for x in range(k):
        if codes[x] == 1:
            top_i = max(top_i, theta[x])
        else:
            top_o = max(top_o, theta[x])
    tot_o = 0.0
    tot_i = math.exp(-top_i)
    group = 0.0
    for x in range(k):
        if codes[x] == 1:
            tot_i += math.exp(theta[x] - top_i)
        else:
            tot_o += math.exp(theta[x] - top_o)
            if codes[x] == 2:
                group = theta[x]
    norm_o = top_o + math.log(tot_o)
    norm_i = top_i + math.log(tot_i)
    log_g = group - norm_o
    s_total = 0.0
    s_alpha = 0.0
    for x in range(k):
        if codes[x] == 0:
            log_theta = theta[x] - norm_o
        elif codes[x] == 1:
            log_theta = log_g + theta[x] - norm_i
        else:
            log_theta = log_g - norm_i
        s_total += log_theta
        s_alpha += alpha[x] * log_theta
        theta[x] = math.exp(log_theta)
    return s_total, s_alpha, log_g


@nb.njit(cache=True)
def _nested_gradient(f, theta, codes, shift, log_g):  # pragma: no cover - compiled
    """In place: ``f_x = d logp / d log theta_x`` (``theta_x g_x + alpha_x``) on entry, the
    gradient in the coordinate category ``x`` carries on exit (codes of
    :func:`_nested_softmax`; ``shift = sum_x f_x = n + A``): ``f_x - theta_x shift`` outside G,
    ``F_G - theta_G shift`` for the group's coordinate and ``f_x - (theta_x / theta_G) F_G``
    inside it, ``F_G = sum_{x in G} f_x``."""
    f_group = 0.0
    for x in range(f.shape[0]):
        if codes[x] != 0:
            f_group += f[x]
    theta_g = math.exp(log_g)
    inv_g = 1.0 / theta_g if theta_g > 0.0 else 0.0  # theta_G = 0: every member's theta is 0
    for x in range(f.shape[0]):
        if codes[x] == 0:
            f[x] -= theta[x] * shift
        elif codes[x] == 1:
            f[x] -= theta[x] * inv_g * f_group
        else:
            f[x] = f_group - theta_g * shift


def _is_nested(slot):  # pragma: no cover - replaced by the overload
    """True where data[17] holds nested coordinates' codes (compile-time constant)."""
    raise NotImplementedError


@overload(_is_nested)
def _is_nested_overload(slot):
    flag = not isinstance(slot, nb.types.NoneType)
    return lambda slot: flag


def _nest_softmax(slot, theta, alpha):  # pragma: no cover - replaced by the overload
    """:func:`_nested_softmax` with ``slot = data[17]``; never compiled where it is None."""
    raise NotImplementedError


@overload(_nest_softmax)
def _nest_softmax_overload(slot, theta, alpha):
    if isinstance(slot, nb.types.NoneType):
        return lambda slot, theta, alpha: (0.0, 0.0, 0.0)  # unreachable: not nested
    return lambda slot, theta, alpha: _nested_softmax(theta, slot[0], alpha)


def _nest_gradient(slot, f, theta, shift, log_g):  # pragma: no cover - replaced by the overload
    """:func:`_nested_gradient` with ``slot = data[17]``; never compiled where it is None."""
    raise NotImplementedError


@overload(_nest_gradient)
def _nest_gradient_overload(slot, f, theta, shift, log_g):
    if isinstance(slot, nb.types.NoneType):
        return lambda slot, f, theta, shift, log_g: None  # unreachable: not nested
    return lambda slot, f, theta, shift, log_g: _nested_gradient(f, theta, slot[0], shift, log_g)


@nb.njit(cache=True)
def _logp_grad_nested(z, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of a fixed or adaptive (marginal) Dirichlet prior's posterior on
    nested log-ratios (:func:`_nesting`): ``data[17] = (codes, idx)``, coordinate ``i`` carried
    by category ``idx[i]`` (:func:`_nested_softmax`), the reference ``idx[K-1]``.

    By the Dirichlet's aggregation property, ``(theta_outside, theta_G) ~ Dirichlet(alpha_out,
    sum_G alpha)`` and the split ``theta_G^{-1} theta_{x in G} ~ Dirichlet(alpha_G)`` apart;
    with the Jacobians of both log-ratio maps the density on these coordinates is
    ``loglik + sum_x alpha_x log theta_x + const``, the same function of ``theta`` as on plain
    log-ratios (:func:`_logp_grad`); only the chain rule differs (:func:`_nested_gradient`).
    """
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    shift, const, pa, pc = data[8:12]
    idx = data[17][1]
    theta, g, r, lth, w = work
    d = z.shape[0]
    for i in range(d):
        theta[idx[i]] = z[i]
    theta[idx[d]] = 0.0
    s_total, s_alpha, log_g = _nest_softmax(data[17], theta, alpha)
    lp = const + lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta,
                             0.0, r, lth, w, g)  # fmt: skip
    if pa is not None:
        prior_lp, abar = _marginal_prior(s_total, pa, pc)
        lp += prior_lp
        shift += (d + 1) * abar
        for x in range(d + 1):
            g[x] = theta[x] * g[x] + abar
    else:
        lp += s_alpha
        for x in range(d + 1):
            g[x] = theta[x] * g[x] + alpha[x]
    _nest_gradient(data[17], g, theta, shift, log_g)
    for i in range(d):
        grad[i] = g[idx[i]]
    return lp


def _nested_density(z, data, work, grad):  # pragma: no cover - replaced by the overload
    """:func:`_logp_grad_nested` where data[17] holds nested coordinates."""
    raise NotImplementedError


overload(_nested_density)(_where_set(17, _logp_grad_nested))


@nb.njit(cache=True)
def _logp_grad_gamma(x, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient on log-gamma coordinates (:class:`_GammaTarget`):
    ``loglik(softmax(x)) + sum_x (alpha_x x_x - e^{x_x}) + const``, gradient
    ``theta_x (g_x - n) + alpha_x - e^{x_x}`` with ``g = L^T (c / L theta)``."""
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    n, const = data[8], data[9]
    theta, g, r, lth, w = work
    k = x.shape[0]
    top = x[0]
    for i in range(k):
        if x[i] > top:
            top = x[i]
    tot = 0.0
    for i in range(k):
        tot += math.exp(x[i] - top)
    log_norm = top + math.log(tot)
    lp = const
    for i in range(k):
        theta[i] = math.exp(x[i] - log_norm)
        lp += alpha[i] * x[i] - math.exp(x[i])
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    for i in range(k):
        grad[i] = theta[i] * (g[i] - n) + alpha[i] - math.exp(x[i])
    return lp


def _gamma_density(z, data, work, grad):  # pragma: no cover - replaced by the overload
    """:func:`_logp_grad_gamma` where data[15] marks log-gamma coordinates."""
    raise NotImplementedError


overload(_gamma_density)(_where_set(15, _logp_grad_gamma))


@nb.njit(cache=True)
def _logp_grad_smooth(v, data, work, grad):  # pragma: no cover - compiled
    """:func:`_smooth_core` at ``q = v`` except on the block ``idx`` (``data[16][6:9]`` =
    ``idx`` (B,), ``centre`` (B,), lower-triangular ``T`` (B, B)): ``q[idx] = centre + T
    v[idx]``, a fixed linear map (:meth:`_SmoothTarget.decorrelate`), whose gradient is
    ``T^T`` that of ``q``; its constant Jacobian is left out.  No block (B = 0): ``q = v``."""
    idx, centre, t = data[16][6], data[16][7], data[16][8]
    nb_ = idx.shape[0]
    if nb_ == 0:
        return _smooth_core(v, data, work, grad)
    q = v.copy()
    for a in range(nb_):
        acc = centre[a]
        for c in range(a + 1):
            acc += t[a, c] * v[idx[c]]
        q[idx[a]] = acc
    lp = _smooth_core(q, data, work, grad)
    gq = np.empty(nb_)
    for a in range(nb_):
        gq[a] = grad[idx[a]]
    for c in range(nb_):
        acc = 0.0
        for a in range(c, nb_):
            acc += t[a, c] * gq[a]
        grad[idx[c]] = acc
    return lp


@nb.njit(cache=True)
def _smooth_core(q, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of the smoothness prior's posterior (:class:`_SmoothTarget`)
    on ``q = (u_1 .. u_M, b, s)``: with ``sd_j = lambda scale_j``, ``lambda = e^s``,
    ``y_j = sd_j^{w_j} u_j``, ``f = b line + modes @ y``, ``theta = softmax(f)``,

    ``loglik(theta) + sum_j [-u_j^2 / (2 sd_j^{2(1-w_j)}) - (1 - w_j) log sd_j]
    - b^2 / (2 s_b^2) - (s - mu)^2 / (2 sigma^2)`` (constants dropped).  ``data[16]`` =
    (modes (K, M), its transpose (M, K) C-contiguous, line (K,), log scale (M,), weights w (M,),
    (mu, sigma, s_b)): ``f`` is summed column by column from the transpose (contiguous inner
    loops, which the compiler vectorises, unlike a dot product per bin; the same sums in the
    same order, so the same bits).
    """
    dense, indptr, indices, delta, complement, offset, counts = data[:7]
    n, const = data[8], data[9]
    modes, modes_t, line, log_scale, weights, par = data[16][:6]
    theta, g, r, lth, w = work
    k = theta.shape[0]
    m = modes.shape[1]
    b, s = q[m], q[m + 1]
    if not abs(s) <= _S_LIMIT:  # lambda outside [e^-50, e^50] (also NaN): no density
        for i in range(m + 2):
            grad[i] = 0.0
        return -math.inf
    mu, sd, sb = par[0], par[1], par[2]
    y = np.empty(m)
    slope = np.empty(m)  # dy_j / du_j
    lp = const - 0.5 * ((s - mu) / sd) ** 2 - 0.5 * (b / sb) ** 2
    ds = -(s - mu) / (sd * sd)
    for j in range(m):
        log_sd = s + log_scale[j]
        wj = weights[j]
        slope[j] = math.exp(wj * log_sd)
        y[j] = slope[j] * q[j]
        inv = math.exp(-(1.0 - wj) * log_sd)
        z = q[j] * inv
        lp += -0.5 * z * z - (1.0 - wj) * log_sd
        grad[j] = -z * inv
        ds += (1.0 - wj) * (z * z - 1.0)
    for i in range(k):
        theta[i] = b * line[i]
    for j in range(m):
        yj = y[j]
        for i in range(k):
            theta[i] += modes_t[j, i] * yj
    top = -math.inf
    for i in range(k):
        if theta[i] > top:
            top = theta[i]
    tot = 0.0
    for i in range(k):
        theta[i] = math.exp(theta[i] - top)
        tot += theta[i]
    for i in range(k):
        theta[i] /= tot
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    df = np.zeros(m)
    gb = -b / (sb * sb)
    for i in range(k):
        dfi = theta[i] * (g[i] - n)
        gb += line[i] * dfi
        for j in range(m):
            df[j] += modes[i, j] * dfi
    for j in range(m):
        grad[j] += df[j] * slope[j]
        ds += df[j] * weights[j] * y[j]
    grad[m] = gb
    grad[m + 1] = ds
    return lp


def _smooth_density(z, data, work, grad):  # pragma: no cover - replaced by the overload
    """:func:`_logp_grad_smooth` where data[16] holds the smoothness prior's arrays."""
    raise NotImplementedError


overload(_smooth_density)(_where_set(16, _logp_grad_smooth))


@nb.njit(cache=True)
def _logp_grad(z, data, work, grad):  # pragma: no cover - compiled
    """Log-density at ``z`` (returned) and its gradient (into ``grad``), one likelihood pass.

    Fixed prior: ``sum_x alpha_x log theta_x``; adaptive prior (``pa`` non-empty):
    ``log sum_j exp(pc_j + pa_j S)``, ``S = sum_x log theta_x``, whose gradient is the fixed
    prior's with every ``alpha_x`` equal to ``abar = E[a | S]``.
    """
    if data[12] is not None:  # the adaptive prior sampled jointly with s = log a
        return _joint_density(z, data, work, grad)
    if data[15] is not None:  # the fixed prior on log-gamma coordinates
        return _gamma_density(z, data, work, grad)
    if data[16] is not None:  # the smoothness prior on its RW2 coefficients
        return _smooth_density(z, data, work, grad)
    if data[17] is not None:  # nested log-ratios (a group measured mostly through its total)
        return _nested_density(z, data, work, grad)
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    shift, const, pa, pc = data[8:12]
    theta, g, r, lth, w = work
    d = z.shape[0]
    top = 0.0
    for i in range(d):
        if z[i] > top:
            top = z[i]
    s = math.exp(-top)
    for i in range(d):
        s += math.exp(z[i] - top)
    log_norm = top + math.log(s)
    theta[d] = math.exp(-log_norm)
    adaptive = pa is not None
    lp = const
    s_total = -log_norm
    if not adaptive:
        lp -= alpha[d] * log_norm
    for i in range(d):
        log_theta = z[i] - log_norm
        theta[i] = math.exp(log_theta)
        s_total += log_theta
        if not adaptive:
            lp += alpha[i] * log_theta
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    if adaptive:
        prior_lp, abar = _marginal_prior(s_total, pa, pc)
        lp += prior_lp
        shift_a = shift + (d + 1) * abar
        for i in range(d):
            grad[i] = theta[i] * (g[i] - shift_a) + abar
    else:
        for i in range(d):
            grad[i] = theta[i] * (g[i] - shift) + alpha[i]
    return lp


@nb.njit(cache=True)
def _matvec(m, x, out):  # pragma: no cover - compiled
    """``out = m @ x``; a (1, d) ``m`` with ``d > 1`` is a diagonal matrix's diagonal."""
    d = x.shape[0]
    if m.shape[0] == 1 and d > 1:
        for i in range(d):
            out[i] = m[0, i] * x[i]
        return
    for i in range(d):
        acc = 0.0
        for j in range(d):
            acc += m[i, j] * x[j]
        out[i] = acc


@nb.njit(cache=True)
def _dot(a, b):  # pragma: no cover - compiled
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@nb.njit(cache=True)
def _dot_sum(a, b, c):  # pragma: no cover - compiled
    """``(a + b) . c``."""
    acc = 0.0
    for i in range(a.shape[0]):
        acc += (a[i] + b[i]) * c[i]
    return acc


@nb.njit(cache=True)
def _logaddexp(a, b):  # pragma: no cover - compiled
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@nb.njit(cache=True, nogil=True)
def _leapfrog(z, p, v, grad, eps, inv_metric, data, work):  # pragma: no cover - compiled
    half = 0.5 * eps
    d = z.shape[0]
    for i in range(d):
        p[i] += half * grad[i]
    _matvec(inv_metric, p, v)
    for i in range(d):
        z[i] += eps * v[i]
    lp = _logp_grad(z, data, work, grad)
    for i in range(d):
        p[i] += half * grad[i]
    _matvec(inv_metric, p, v)
    return lp


# slots of the per-transition work array ``ws`` (n_slots + 2 * (max_depth + 1) * 7, d)
_LZ, _LP, _LV, _LG, _RZ, _RP, _RV, _RG, _PSUM, _SZ, _SG, _CZ, _CP, _CV, _CG, _NEW = range(16)
_N_SLOTS = 16
# per stack level: psum, begin p, begin v, end p, end v, proposal z, proposal grad
_ST_PSUM, _ST_BP, _ST_BV, _ST_EP, _ST_EV, _ST_Z, _ST_G = range(7)


@nb.njit(cache=True, nogil=True)
def _transition(z, grad, lp, eps, inv_metric, mom_factor, max_depth, noise, rstate, data,
                ws, st_vec, st_sc, st_depth, work):  # pragma: no cover - compiled  # fmt: skip
    """One multinomial NUTS transition; ``z`` and ``grad`` are overwritten with the new state.

    Work arrays: ``ws`` (16, d); the sub-tree stack ``st_vec`` (max_depth + 1, 7, d),
    ``st_sc`` (max_depth + 1, 3) = (proposal logp, proposal energy, log weight), ``st_depth``.
    Returns (logp, energy, tree depth, leapfrog steps, diverged, mean Metropolis acceptance).
    """
    d = z.shape[0]
    lz, lpm, lv, lg = ws[_LZ], ws[_LP], ws[_LV], ws[_LG]
    rz, rpm, rv, rg = ws[_RZ], ws[_RP], ws[_RV], ws[_RG]
    psum, s_z, s_g = ws[_PSUM], ws[_SZ], ws[_SG]
    cz, cp, cv, cg, new_psum = ws[_CZ], ws[_CP], ws[_CV], ws[_CG], ws[_NEW]
    _matvec(mom_factor, noise, lpm)
    _matvec(inv_metric, lpm, lv)
    h0 = 0.5 * _dot(lpm, lv) - lp
    _copy(lz, z)
    _copy(lg, grad)
    _copy(rz, z)
    _copy(rpm, lpm)
    _copy(rv, lv)
    _copy(rg, grad)
    _copy(psum, lpm)
    _copy(s_z, z)
    _copy(s_g, grad)
    s_lp, s_en = lp, h0
    log_size = 0.0
    depth = 0
    n_steps = 0
    metro = 0.0
    diverging = False
    while depth < max_depth:
        forward = _uniform(rstate) < 0.5
        if forward:
            _copy(cz, rz)
            _copy(cp, rpm)
            _copy(cv, rv)
            _copy(cg, rg)
            step = eps
        else:
            _copy(cz, lz)
            _copy(cp, lpm)
            _copy(cv, lv)
            _copy(cg, lg)
            step = -eps
        # ---- a sub-tree of 2**depth steps; completed halves merge on a stack (binary counter)
        sp = 0
        valid = True
        for _ in range(1 << depth):
            clp = _leapfrog(cz, cp, cv, cg, step, inv_metric, data, work)
            energy = 0.5 * _dot(cp, cv) - clp
            delta = energy - h0
            n_steps += 1
            if not delta <= _MAX_ENERGY_ERROR:  # also catches NaN
                diverging = True
                valid = False
                break
            metro += 1.0 if delta <= 0.0 else math.exp(-delta)
            top = st_vec[sp]
            _copy(top[_ST_PSUM], cp)
            _copy(top[_ST_BP], cp)
            _copy(top[_ST_BV], cv)
            _copy(top[_ST_EP], cp)
            _copy(top[_ST_EV], cv)
            _copy(top[_ST_Z], cz)
            _copy(top[_ST_G], cg)
            st_sc[sp, 0] = clp
            st_sc[sp, 1] = energy
            st_sc[sp, 2] = -delta
            st_depth[sp] = 0
            sp += 1
            while sp >= 2 and st_depth[sp - 1] == st_depth[sp - 2]:
                ia, ib = sp - 2, sp - 1
                a, b = st_vec[ia], st_vec[ib]
                for i in range(d):
                    new_psum[i] = a[_ST_PSUM, i] + b[_ST_PSUM, i]
                turning = _dot(new_psum, a[_ST_BV]) <= 0.0 or _dot(new_psum, b[_ST_EV]) <= 0.0
                if st_depth[ia] > 0 and not turning:
                    turning = (
                        _dot_sum(a[_ST_PSUM], b[_ST_BP], a[_ST_BV]) <= 0.0
                        or _dot_sum(a[_ST_PSUM], b[_ST_BP], b[_ST_BV]) <= 0.0
                        or _dot_sum(a[_ST_EP], b[_ST_PSUM], a[_ST_EV]) <= 0.0
                        or _dot_sum(a[_ST_EP], b[_ST_PSUM], b[_ST_EV]) <= 0.0
                    )
                if turning:
                    valid = False
                    break
                merged = _logaddexp(st_sc[ia, 2], st_sc[ib, 2])
                if math.log(_uniform(rstate)) < st_sc[ib, 2] - merged:
                    _copy(a[_ST_Z], b[_ST_Z])
                    _copy(a[_ST_G], b[_ST_G])
                    st_sc[ia, 0] = st_sc[ib, 0]
                    st_sc[ia, 1] = st_sc[ib, 1]
                _copy(a[_ST_PSUM], new_psum)
                _copy(a[_ST_EP], b[_ST_EP])
                _copy(a[_ST_EV], b[_ST_EV])
                st_sc[ia, 2] = merged
                st_depth[ia] += 1
                sp -= 1
            if not valid:
                break
        if not valid:
            break
        depth += 1
        sub = st_vec[0]
        # ---- biased progressive sampling between the old trajectory and the new sub-tree
        if math.log(_uniform(rstate)) < st_sc[0, 2] - log_size:
            _copy(s_z, sub[_ST_Z])
            _copy(s_g, sub[_ST_G])
            s_lp, s_en = st_sc[0, 0], st_sc[0, 1]
        log_size = _logaddexp(log_size, st_sc[0, 2])
        for i in range(d):
            new_psum[i] = psum[i] + sub[_ST_PSUM, i]
        # time order: the left part (lm) then the right part (rm)
        if forward:
            lm_psum, lm_bv, lm_ep, lm_ev = psum, lv, rpm, rv
            rm_psum, rm_bp, rm_bv, rm_ev = sub[_ST_PSUM], sub[_ST_BP], sub[_ST_BV], sub[_ST_EV]
        else:
            lm_psum, lm_bv, lm_ep, lm_ev = sub[_ST_PSUM], sub[_ST_EV], sub[_ST_BP], sub[_ST_BV]
            rm_psum, rm_bp, rm_bv, rm_ev = psum, lpm, lv, rv
        turning = (
            _dot(new_psum, lm_bv) <= 0.0
            or _dot(new_psum, rm_ev) <= 0.0
            or _dot_sum(lm_psum, rm_bp, lm_bv) <= 0.0
            or _dot_sum(lm_psum, rm_bp, rm_bv) <= 0.0
            or _dot_sum(lm_ep, rm_psum, lm_ev) <= 0.0
            or _dot_sum(lm_ep, rm_psum, rm_ev) <= 0.0
        )
        if forward:
            _copy(rz, cz)
            _copy(rpm, cp)
            _copy(rv, cv)
            _copy(rg, cg)
        else:
            _copy(lz, cz)
            _copy(lpm, cp)
            _copy(lv, cv)
            _copy(lg, cg)
        _copy(psum, new_psum)
        if turning:
            break
    _copy(z, s_z)
    _copy(grad, s_g)
    return s_lp, s_en, depth, n_steps, diverging, metro / max(n_steps, 1)


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


# ---------------------------------------------------------------------------- entry point
def sample(
    tally: Tally,
    alpha: np.ndarray,
    *,
    draws: int,
    chains: int,
    random_seed: int | None,
    progressbar: bool = False,
    cores: int = 1,
    **options: Any,
) -> SamplerOutput:
    """Draw from the Dirichlet-prior posterior of ``theta`` given a tally with NUTS.

    Parameters
    ----------
    tally : Tally
        The reports' likelihood rows and counts; the log-likelihood is
        ``sum_u c_u log(L_u . theta)``.
    alpha : array of float, shape (K,), AdaptiveDirichlet or SmoothDensity
        Dirichlet prior concentrations (all > 0), the adaptive prior, or the smoothness prior
        (sampled on its own coordinates, :class:`_SmoothTarget`; ``lambda`` draws in
        ``extra["smoothness"]``).
    draws, chains : int
        Draws kept per chain (after warm-up) and number of chains.
    random_seed : int or None
        Seed of the numpy Generator (``as_generator``) that draws the starting points; each
        chain then runs on its own child Generator (``Generator.spawn``), so the draws are the
        same, bit for bit, whatever ``cores`` is.
    progressbar : bool
        One tqdm bar per chain on standard error (warm-up and draws), advanced between calls
        of the compiled transition.
    cores : int
        Chains run at once, on threads (the compiled transition releases the GIL); 1 runs them
        one after another.  ``fit`` resolves PyMC's ``cores=None`` to ``min(chains, CPUs)``.
        Ctrl-C stops every chain at its next iteration and propagates the KeyboardInterrupt.
    **options
        ``tune`` (int, default 1000): warm-up iterations per chain, discarded.
        ``target_accept`` (float in (0, 1), default 0.8; 0.9 under the smoothness prior and
        the adaptive prior's joint scheme; 0.95 on plain ALR coordinates where the likelihood
        measures some categories mostly jointly, :func:`_shared_information`): dual-averaging
        target of the mean Metropolis acceptance along trajectories.  Under the smoothness
        prior 0.8 let a few trajectories diverge where a low-mass region's log-weights meet
        the likelihood's exponential wall (12 of 1,000 draws on SW at 1024 bins, eps 1,
        scratch); 0.9 took about as many steps.
        Under the joint scheme, on the 192 GRR fits of benchmarks/adaptive_convergence.py
        (scratch): 1,154 divergent draws in 44 fits at 0.8, 137 in 23 at 0.9, for a median
        of 37.7 leapfrog steps per draw against 30.9.
        ``max_treedepth`` (int, default 10): at most ``2**max_treedepth - 1`` leapfrog steps.
        ``metric`` ("dense" or "diag"; default "dense" on ALR coordinates, "diag" on
        log-gamma ones and under the smoothness prior): the adapted inverse metric.  Under the
        smoothness prior a dense metric takes 10x fewer leapfrog steps but makes divergent
        transitions (10-174 of 1,000 draws on SW reports at 64 bins, scratch runs): bins the
        data leave empty let the log-weights fall freely below an exponential wall, and the
        dense metric's larger steps run into it.
        ``coordinates`` ("auto", "alr" or "log_gamma", default "auto"): what NUTS moves in.
        "alr": additive log-ratios (module docstring), always plain; "auto" nests them where
        the likelihood measures a group of categories through its total (nested log-ratios,
        :class:`_NestedTarget`; ``backend_info["coordinates"] == "nested"`` and
        ``"nested_group"``); "log_gamma": ``x`` in R^K with
        ``theta = softmax(x)`` and independent log-Gamma(``alpha_x``) priors
        (:class:`_GammaTarget`), fixed Dirichlet prior only, diagonal metric, O(K) per step
        besides the likelihood.  "auto" takes "log_gamma" for a fixed prior with every
        ``alpha_x >= 1`` from K = 200 on (unless ``metric="dense"``) and "alr" otherwise
        (below 1 the log-Gamma density's steep upper side and long lower tail make the odd
        divergent transition: 1 in 6,000 draws of a prior-only posterior at alpha = 0.5).
        ``adaptive_scheme`` ("joint" or "marginal", default "joint"): how the adaptive prior
        is sampled (module docstring); ignored under a fixed Dirichlet prior.

    Returns
    -------
    SamplerOutput
        ``theta`` of shape (chains, draws, K); sample_stats "diverging", "energy", "tree_depth",
        "n_steps", "step_size", "lp" (log-density on the ALR coordinates, Jacobian included)
        and "acceptance_rate", each (chains, draws); under the adaptive prior with the joint
        scheme, ``extra["a"]`` (chains, draws).
    """
    started = time.perf_counter()  # tally, alpha, draws and chains were checked by fit()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of method 'hmc'; valid: {list(OPTIONS)}"
        )
    tune = check_int(options.get("tune", 1000), "tune", 0)
    max_treedepth = check_int(options.get("max_treedepth", 10), "max_treedepth", 1)
    smooth_prior = isinstance(alpha, SmoothDensity)
    scheme = check_choice(options.get("adaptive_scheme", "joint"), "adaptive_scheme",
                          ("joint", "marginal"))  # fmt: skip
    target_accept = options.get("target_accept")  # None: chosen in _run (_default_accept)
    if target_accept is not None:
        target_accept = check_open_unit(target_accept, "target_accept")
    metric = options.get("metric")
    if metric is not None:
        metric = check_choice(metric, "metric", ("dense", "diag"))
    if smooth_prior:  # its own coordinates (:class:`_SmoothTarget`)
        if options.get("coordinates", "auto") != "auto":
            raise InvalidInputError(
                "coordinates: the smoothness prior is sampled on its own coordinates (RW2 "
                "coefficients, slope, log smoothness); leave coordinates='auto'"
            )
        coordinates = "rw2"
    else:
        coordinates = _coordinates(options.get("coordinates", "auto"), alpha, tally.k, metric)
    metric = metric or ("dense" if coordinates == "alr" else "diag")
    rng = as_generator(random_seed)

    with np.errstate(all="ignore"):
        if coordinates == "rw2":
            target = _smooth_target(tally, alpha, rng, max_treedepth, target_accept, started)
        else:
            target = _Target(tally, alpha)
        return _run(target, rng, draws, chains, tune, max_treedepth, target_accept, metric,
                    started, random_seed, scheme, check_int(cores, "cores"),
                    bool(progressbar), coordinates,
                    options.get("coordinates", "auto") == "auto")  # fmt: skip


#: the smoothness prior's pilot chain: warm-up iterations, kept draws, draws measured, the
#: largest tree depth, and the quantile of the information over its draws that sets the weights
_SMOOTH_PILOT = (150, 100, 50, 6, 0.1)


def _smooth_target(tally: Tally, prior: SmoothDensity, rng: np.random.Generator,
                   max_treedepth: int, target_accept: float | None,
                   started: float) -> _SmoothTarget:  # fmt: skip
    """The smoothness prior's target with its non-centring weights measured where the
    posterior is: a short pilot chain, fully non-centred (every ``w_j = 1``; one chain, 150
    warm-up iterations, 100 draws, trees at most 6 deep), then the data's information about
    each coefficient at 50 of its draws; the weights take its 10 % quantile.

    The weights ``w_j = 1 / (1 + I_j s0_j^2)`` (:func:`bayesldp.bayes.model.smooth_weights`)
    suit a coefficient whose information is ``I_j`` where the draws are; at one point, or on
    average, they can be far off.  Under the default ``SmoothDensity(3)`` the slope's wide
    prior puts much of the posterior near a vertex of the simplex, where the data say little,
    while at the EMS estimate they say most: on 28 GRR reports (12, 9, 7; eps 1) the EMS
    weight was 0.13, 15 % of the transitions diverged and ``E[log lambda]`` was 2.80 against
    3.05 by importance sampling (effective sample size 8 of 20,000 draws).  On 90 reports
    (40, 30, 20) half the posterior has ``w`` 0.03-0.08 and a quarter has 1; weights set by the
    mean information (0.07) left 1-4 % divergent and ``E[log lambda]`` up to 4.7 Monte Carlo
    errors off.  A centred coefficient the data leave free forms a funnel with ``lambda`` that
    NUTS cannot cross, while a non-centred one the data pin down only costs steps, so the
    weights serve the less informed tenth of the posterior.  With this pilot both tallies gave
    0.02-0.16 % divergent transitions and ``E[log lambda]`` within 1.4 errors (three seeds
    each; scratch runs, the check is ``tests/bayes/test_sampler_reference.py``); where the
    data fix the coefficients the pilot finds the same weights as the EMS estimate
    (benchmarks/results/smooth_prior.md).
    """
    from bayesldp.bayes.model import smooth_information

    tune, draws, points, depth, quantile = _SMOOTH_PILOT
    free = _SmoothTarget(tally, prior, np.zeros(prior.n_modes))
    pilot = _run(free, rng.spawn(1)[0], draws, 1, tune, min(max_treedepth, depth),
                 target_accept, "diag", started, None, coordinates="rw2")  # fmt: skip
    theta = pilot.theta[0, :: draws // points]
    information = [smooth_information(tally, prior, t) for t in theta]
    return _SmoothTarget(tally, prior, np.quantile(information, quantile, axis=0))


def _coordinates(value: Any, alpha: Any, k: int, metric: str | None) -> str:
    """The coordinates NUTS moves in (option ``coordinates``, see :func:`sample`)."""
    value = check_choice(value, "coordinates", ("auto", "alr", "log_gamma"))
    fixed = not isinstance(alpha, AdaptiveDirichlet)
    if value == "auto":  # alpha < 1: the log-Gamma(alpha) wall above e^x ~ 1 makes the odd
        # divergence with a long left tail of scale 1/alpha (1 in 6,000 draws at alpha = 0.5)
        big = k >= _LOG_GAMMA_MIN_K and metric != "dense"
        return "log_gamma" if fixed and big and float(np.min(alpha)) >= 1.0 else "alr"
    if value == "log_gamma" and not fixed:
        raise InvalidInputError(
            "coordinates: 'log_gamma' samples a fixed Dirichlet prior only; the adaptive prior "
            "is sampled on ALR coordinates (coordinates='alr' or 'auto')"
        )
    if value == "log_gamma" and metric == "dense":
        raise InvalidInputError(
            "metric: 'dense' is not available with coordinates='log_gamma' (a diagonal metric, "
            "O(K) per step); use metric='diag' or coordinates='alr'"
        )
    return value


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


def _chain(target: _Target, data: tuple, z: np.ndarray, rng: np.random.Generator, tune: int,
           draws: int, target_accept: float, max_depth: int, laplace: np.ndarray,
           diag: bool, bar: Any = None,
           stop: threading.Event | None = None,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:  # fmt: skip
    """Warm-up and sampling of one chain.

    ``bar`` (a tqdm bar or None) advances every ``_BAR_STEP`` iterations, between calls of the
    compiled transition; when ``stop`` is set (another chain failed or the user pressed Ctrl-C)
    the chain returns at the next iteration with :class:`_Stopped`.  Returns the kept draws of ``z``
    (draws, d), float statistics (draws, 4) = (lp, energy, acceptance, step size), integer
    statistics (draws, 3) = (tree depth, steps, diverged), the number of warm-up divergences
    and the final step size.
    """
    d = target.d
    z = np.array(z, dtype=float)
    lp, grad = target(z[None, :])
    lp, grad = float(lp[0]), np.ascontiguousarray(grad[0])
    rstate = rng.integers(0, 2**64 - 1, size=1, dtype=np.uint64, endpoint=True)
    noise = rng.standard_normal((tune + draws, d))
    inv_metric = laplace.copy()
    factor = _try_momentum_factor(inv_metric)
    if factor is None:  # no usable curvature at the start (a posterior piled on a face)
        inv_metric = np.ones_like(laplace) if laplace.shape[0] == 1 else np.eye(d)
        factor = _momentum_factor(inv_metric)
    ws = np.empty((_N_SLOTS, d))
    st_vec = np.empty((max_depth + 1, 7, d))
    st_sc = np.empty((max_depth + 1, 3))
    st_depth = np.empty(max_depth + 1, dtype=np.int64)
    work = target.work()
    eps = _init_step_size(z, grad, lp, 1.0, inv_metric, factor, rng.standard_normal((100, d)),
                          data, ws, work)  # fmt: skip
    adapt = _DualAveraging(eps, target_accept)
    windows = _windows(tune)
    window = 0
    m2_shape = (1, d) if diag else (d, d)  # a diagonal metric is kept as its (1, d) diagonal
    w_count, w_mean, w_m2 = 0, np.zeros(d), np.zeros(m2_shape)
    shrink = 5.0 if diag else d + 3.0  # Stan's diagonal regularisation; dense: d + 3 draws
    divergences = 0
    out_z = np.empty((draws, d))
    out_sc = np.empty((draws, 4))
    out_int = np.empty((draws, 3), dtype=np.int64)
    kept_div = 0
    for it in range(tune + draws):
        if stop is not None and stop.is_set():
            raise _Stopped
        lp, energy, depth, n_steps, div, accept = _transition(
            z, grad, lp, eps, inv_metric, factor, max_depth, noise[it], rstate, data, ws, st_vec,
            st_sc, st_depth, work,
        )  # fmt: skip
        if bar is not None:
            if (it + 1) % _BAR_STEP == 0 or it + 1 == tune or it + 1 == tune + draws:
                bar.update(it + 1 - bar.n)
            if it + 1 == tune:
                bar.set_postfix_str("sampling", refresh=False)
            elif div and it >= tune:
                kept_div += 1
                bar.set_postfix_str(f"sampling, {kept_div} divergences", refresh=False)
        if it >= tune:
            i = it - tune
            out_z[i] = z
            out_sc[i] = lp, energy, accept, eps
            out_int[i] = depth, n_steps, div
            continue
        divergences += div
        eps = adapt.update(accept)
        if window < len(windows) and it >= windows[window][0]:
            w_count += 1
            delta = z - w_mean
            w_mean += delta / w_count
            w_m2 += (delta * (z - w_mean))[None, :] if diag else np.outer(delta, z - w_mean)
            if it + 1 == windows[window][1]:
                # end of a metric window: new metric (shrunk towards the Laplace covariance),
                # new initial step size, dual averaging restarted
                cov = w_m2 / max(w_count - 1, 1)
                new_metric = (w_count * cov + shrink * laplace) / (w_count + shrink)
                if not diag:
                    new_metric = 0.5 * (new_metric + new_metric.T)
                new_factor = _try_momentum_factor(np.ascontiguousarray(new_metric))
                if new_factor is not None:  # else the window's draws collapsed: keep the metric
                    inv_metric, factor = np.ascontiguousarray(new_metric), new_factor
                trials = rng.standard_normal((100, d))
                eps = _init_step_size(z, grad, lp, eps, inv_metric, factor, trials, data, ws,
                                      work)  # fmt: skip
                adapt.restart(eps)
                w_count, w_mean, w_m2 = 0, np.zeros(d), np.zeros(m2_shape)
                window += 1
        if it + 1 == tune:
            eps = adapt.final()
    return out_z, out_sc, out_int, divergences, eps


def _pending_kernels(target: _Target, max_depth: int, joint: bool, gamma: bool = False,
                     nested: bool = False) -> list[tuple[Any, tuple]]:  # fmt: skip
    """The compiled kernels a run calls from Python, each with arguments of the types it will
    be called with (for :func:`bayesldp.bayes._feedback.compile_notice`)."""
    d = target.k if joint or gamma else target.d
    data = target.data()
    if nested:  # the nested coordinates' codes and order (see _NestedTarget)
        data = (*data[:17], (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)))
    if joint:  # the joint scheme's slots hold arrays (see _JointTarget)
        data = (
            *data[:10],
            None,
            None,
            np.empty(0),
            np.empty(0, dtype=np.int64),
            np.empty(0),
            None,
            None,
            *data[17:],
        )
    elif gamma:  # the log-gamma marker (see _GammaTarget)
        data = (*data[:10], None, None, *_NO_JOINT, np.empty(0), *_NO_SMOOTH, *_NO_NEST)
    z, grad, work = np.zeros(d), np.zeros(d), target.work()
    mat, ws = np.eye(d), np.empty((_N_SLOTS, d))
    lik = target.lik
    rows = np.empty(lik.n_rows)
    return [
        (lk.gradient, (*lik.arrays, lik.counts, np.zeros(target.k), 0.0, rows, rows, rows,
                       np.zeros(target.k))),
        (_leapfrog, (z, grad, z, grad, 1.0, mat, data, work)),
        (_matvec, (mat, z, z)),
        (_dot, (z, z)),
        (_transition, (z, grad, 0.0, 1.0, mat, mat, max_depth, np.zeros(d),
                       np.zeros(1, dtype=np.uint64), data, ws,
                       np.empty((max_depth + 1, 7, d)), np.empty((max_depth + 1, 3)),
                       np.empty(max_depth + 1, dtype=np.int64), work)),
    ]  # fmt: skip


class _Stopped(Exception):
    """Raised inside a chain when its ``stop`` event is set."""


def _run_chains(one_chain: Any, chains: int, cores: int, stop: threading.Event) -> None:
    """Run ``one_chain(c)`` for every chain, on ``cores`` threads (the compiled transition
    releases the GIL).

    Ctrl-C (KeyboardInterrupt) or an error in one chain sets ``stop``; every chain returns at its
    next iteration, and the exception propagates: nothing is returned, nothing half-written.
    """
    if cores <= 1 or chains <= 1:
        for c in range(chains):
            one_chain(c)
        return
    pool = ThreadPoolExecutor(max_workers=cores, thread_name_prefix="bayesldp-chain")
    futures = [pool.submit(one_chain, c) for c in range(chains)]
    try:
        pending = set(futures)
        while pending:  # wait with a timeout: Ctrl-C reaches the main thread between waits
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    raise future.exception()
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True)


def _run(target: _Target, rng: np.random.Generator, draws: int, chains: int, tune: int,
         max_treedepth: int, target_accept: float | None, metric: str, started: float,
         random_seed: int | None, scheme: str = "marginal", cores: int = 1,
         progressbar: bool = False, coordinates: str = "alr",
         nest: bool = False) -> SamplerOutput:  # fmt: skip
    joint = scheme == "joint" and target.adaptive is not None
    gamma = coordinates == "log_gamma"
    smooth = coordinates == "rw2"
    shared, codes = 1.0, None
    if smooth:  # the target found its mode; the Laplace covariance there, then the map
        _feedback.compile_notice(_pending_kernels(target, max_treedepth, joint, gamma))
        mode, laplace = target.decorrelate(target.start, target.laplace(target.start))
    else:  # the mode (numpy), then the coordinates, then the compiled kernels they need
        alpha = target.alpha
        mode, laplace = _find_mode(target, np.log(alpha[:-1]) - np.log(alpha[-1]))
        if coordinates == "alr":
            at_mode = target.theta(mode[None, :])[0][0]
            m, m_free = _information(target, at_mode)
            shared = _shared_ratio(m, m_free)
            codes = _nesting(m, m_free, at_mode) if nest else None
        _feedback.compile_notice(_pending_kernels(target, max_treedepth, joint, gamma,
                                                  codes is not None))  # fmt: skip
    if target_accept is None:  # nested log-ratios remove what 0.95 was for (_default_accept)
        target_accept = _default_accept(1.0 if codes is not None else shared, smooth or joint)
    if joint:  # from the marginal mode, a pilot; then (u, log a) jointly
        target = _JointTarget(target, mode, codes)
        mode = target.start
        laplace = target.laplace(mode)
    elif codes is not None:  # nested log-ratios from the ALR mode
        target = _NestedTarget(target, mode, codes)
        mode = target.start
        laplace = target.laplace(mode)
    elif gamma:  # from the ALR mode to log-gamma coordinates, a diagonal start
        target = _GammaTarget(target, mode)
        mode, laplace = target.start, target.laplace
    d = target.d
    if metric == "diag" and laplace.shape[0] == d and d > 1:
        laplace = np.ascontiguousarray(np.diag(laplace)[None, :])
    if metric == "diag" and d > 1:
        z0 = mode + rng.standard_normal((chains, d)) * np.sqrt(laplace[0])
    else:
        z0 = mode + rng.standard_normal((chains, d)) @ np.linalg.cholesky(laplace).T
    logp0, _ = target(z0)
    z0[~np.isfinite(logp0)] = mode  # a start in a zero-likelihood region: use the mode
    data = target.data()
    out_z = np.empty((chains, draws, d))
    sc = np.empty((chains, draws, 4))
    ints = np.empty((chains, draws, 3), dtype=np.int64)
    tune_divergences, step_sizes = [0] * chains, [0.0] * chains
    children = rng.spawn(chains)  # drawn here, in order: the draws do not depend on `cores`
    stop = threading.Event()
    bars = [_feedback.progress_bar(tune + draws, f"chain {c}", progressbar, position=c)
            for c in range(chains)]  # fmt: skip

    def one_chain(c: int) -> None:
        out_z[c], sc[c], ints[c], n_div, eps = _chain(
            target, data, z0[c], children[c], tune, draws, target_accept, max_treedepth,
            laplace, metric == "diag", bars[c] if progressbar else None, stop,
        )  # fmt: skip
        tune_divergences[c] = int(n_div)
        step_sizes[c] = float(eps)

    try:
        _run_chains(one_chain, chains, cores, stop)
    finally:
        for bar in bars:
            bar.close()
    extra = {}
    if joint or smooth:  # theta and the hyperparameter sampled with it
        theta, hyper = target.theta_hyper(out_z.reshape(-1, d))
        theta = theta.reshape(chains, draws, -1)
        extra["a" if joint else "smoothness"] = hyper.reshape(chains, draws)
    else:
        theta, _ = target.theta(out_z)
    stats = {
        "diverging": ints[:, :, 2].astype(bool),
        "energy": sc[:, :, 1].copy(),
        "tree_depth": ints[:, :, 0].copy(),
        "n_steps": ints[:, :, 1].copy(),
        "step_size": sc[:, :, 3].copy(),
        "lp": sc[:, :, 0].copy(),
        "acceptance_rate": sc[:, :, 2].copy(),
    }
    info = {
        "backend": "bayesldp.hmc",
        "sampler": "NUTS (multinomial, generalised no-U-turn) on "
        + {"log_gamma": "log-gamma", "rw2": "RW2-coefficient"}.get(
            coordinates, "ALR" if codes is None else "nested ALR"
        )
        + " coordinates, numba"
        + (", adaptive prior: (u, log a) jointly, tails rescaled by a" if joint else ""),
        "coordinates": "nested" if codes is not None else coordinates,
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "target_accept": target_accept,
        "shared_information": shared,
        "nested_group": None if codes is None else np.flatnonzero(codes).tolist(),
        "max_treedepth": max_treedepth,
        "metric": metric,
        "random_seed": random_seed,
        "cores": cores,
        "tune_divergences": tune_divergences,
        "step_size": step_sizes,
        "wall_time": time.perf_counter() - started,
    }
    if joint:
        info["adaptive_scheme"] = "joint"
        info["pilot_a"] = float(np.exp(target.start[-1]))
        info["tail_weights"] = target.weights.tolist()
        info["effective_counts"] = target.effective_counts.tolist()
    elif target.adaptive is not None:
        info["adaptive_scheme"] = "marginal"
    return SamplerOutput(theta=theta, sample_stats=stats, info=info, extra=extra)
