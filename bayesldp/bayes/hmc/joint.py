"""The adaptive prior's joint scheme: ``theta`` and ``log a`` sampled together
(:class:`_JointTarget`; compiled density
:func:`bayesldp.bayes.hmc.densities._logp_grad_joint`), with its pilot (:func:`_pilot`) and
centres (:func:`_centres`).  The marginal scheme is the ALR target under the adaptive prior
(:class:`bayesldp.bayes.hmc.targets._Target`).

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
  (the 192 GRR fits of benchmarks/investigations/results/adaptive_convergence.md: r_hat above 1.01
  in 40 fits before, 23 now, divergent draws in 46 and 23; scratch, same fits: median bulk ESS 574
  and 883). The centre ``c_x`` follows ``a`` (:func:`_centres`): the Dirichlet(a) posterior mode,
  raised to the upper edge of the mass for small ``a + m_x``, at knots one prior sd apart,
  interpolated in ``log a``; with fixed centres the mass of a weakly measured category sat near ``u
  = 0`` at small ``a`` but about ``sqrt(a) (c_x - z_x)`` below it at large ``a`` (a funnel in ``(u,
  log a)``).  Target acceptance 0.9 (see :func:`bayesldp.bayes.hmc.sample`).  Draws of ``a`` are
  returned (``SamplerOutput.extra["a"]``).  Measured against "marginal" (GRR K = 30; the two schemes
  on 96 GRR tallies: benchmarks/investigations/adaptive_cost.py): r_hat, bulk ESS and time much
  better than "marginal" where the data say little about ``a``; a few divergent transitions remain
  when the posterior of ``a`` reaches far above 10 (weak data, prior-dominated large ``a``).
* ``"marginal"``: NUTS on ``z`` under the marginal prior ``log sum_j exp(c_j + a_j S)`` (``a``
  summed out on its grid, exact for the grid; ``fit`` then draws ``a | theta``).  Mixes slowly
  when the data say little about ``a``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from bayesldp.bayes.hmc.nested import (
    _nested_coords,
    _nested_information,
    _nested_order,
    _nested_theta,
)
from bayesldp.bayes.hmc.targets import (
    _NO_GAMMA,
    _NO_NEST,
    _NO_SMOOTH,
    _NO_WALK,
    _CompiledTarget,
    _find_mode,
    _Target,
)

_PILOT_ALPHA = 0.01  # the pilot's Dirichlet concentration


#: the joint scheme's centre knots in log a, in prior sd from its mean (:func:`_centres`)
_CENTRE_KNOTS = np.arange(-4.0, 4.5, 1.0)


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
                      par, *_NO_GAMMA, *_NO_SMOOTH, *nest, *_NO_WALK)  # fmt: skip
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
