"""The smoothness prior's target (:class:`_SmoothTarget`; compiled density
:func:`bayesldp.bayes.hmc.densities._logp_grad_smooth`) and its pilot chain
(:func:`_smooth_target`).

Smoothness prior (:class:`~bayesldp.bayes.SmoothDensity`, ordered bins): NUTS on the RW2
coefficients, the slope and ``log lambda`` (:class:`_SmoothTarget`, :func:`_logp_grad_smooth`;
the coordinates of :func:`bayesldp.bayes.model.smooth_theta`), a diagonal metric after a fixed
linear map of the smoothest coefficient and the slope from the Laplace covariance at the start
(:meth:`_SmoothTarget.decorrelate`; steps per draw in benchmarks/results/smooth_prior.md),
O(K M) per gradient for the basis besides the likelihood.  The exchangeable logistic-normal
prior (:class:`~bayesldp.bayes.LogisticNormal`) has the same coordinates (its basis the
Helmert vectors, its line zero) and is sampled by the same target.
"""

from __future__ import annotations

import time

import numpy as np

from bayesldp.bayes.hmc.run import _run
from bayesldp.bayes.hmc.targets import (
    _NO_GAMMA,
    _NO_JOINT,
    _NO_NEST,
    _NO_WALK,
    _CompiledTarget,
)
from bayesldp.bayes.prior import LogWeightPrior
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally


class _SmoothTarget(_CompiledTarget):
    """The smoothness prior's posterior (:class:`~bayesldp.bayes.SmoothDensity`; also the
    logistic-normal prior's, :class:`~bayesldp.bayes.LogisticNormal`, on its basis) on
    ``q = (u, b, s)``: ``u`` (M) the RW2 coefficients, partially non-centred as in
    :func:`bayesldp.bayes.model.smooth_theta` (``y_j = (lambda scale_j)^{w_j} u_j``, ``w_j``
    from the data's ``information`` about ``y_j``, default at the EMS estimate;
    :func:`_smooth_target` measures it over a pilot chain's draws), ``b`` the slope and
    ``s = log lambda``
    (:func:`_logp_grad_smooth`).  The start is the posterior mode given ``lambda`` at its
    prior median (L-BFGS from the EMS estimate's projection on the basis); :meth:`laplace`
    gives the first metric there.
    """

    def __init__(self, tally: Tally, prior: LogWeightPrior,
                 information: np.ndarray | None = None) -> None:  # fmt: skip
        from scipy.optimize import minimize

        from bayesldp.bayes.smooth_coordinates import (
            smooth_information,
            smooth_pilot,
            smooth_weights,
        )

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
        b0 = line @ f0 / (line @ line) if np.any(line) else 0.0  # no line: a free slope
        q0 = np.concatenate([u0, [b0, s0]])

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
                      (*self._smooth, idx, centre, t), *_NO_NEST, *_NO_WALK)  # fmt: skip

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


#: the smoothness prior's pilot chain: warm-up iterations, kept draws, draws measured, the
#: largest tree depth, and the quantile of the information over its draws that sets the weights
_SMOOTH_PILOT = (150, 100, 50, 6, 0.1)


def _smooth_target(tally: Tally, prior: LogWeightPrior, rng: np.random.Generator,
                   max_treedepth: int, target_accept: float | None,
                   started: float) -> _SmoothTarget:  # fmt: skip
    """The smoothness prior's target with its non-centring weights from
    :func:`pilot_information`."""
    information = pilot_information(tally, prior, rng, max_treedepth, target_accept, started)
    return _SmoothTarget(tally, prior, information)


def pilot_information(tally: Tally, prior: LogWeightPrior, rng: np.random.Generator,
                      max_treedepth: int = 10, target_accept: float | None = None,
                      started: float | None = None) -> np.ndarray:  # fmt: skip
    """The data's information about each RW2 coefficient where the posterior is, for the
    non-centring weights of :class:`_SmoothTarget` and of PyMC's model
    (:func:`bayesldp.bayes.model.build_model`): a short pilot chain, fully non-centred (every
    ``w_j = 1``; one chain, 150 warm-up iterations, 100 draws, trees at most 6 deep), then the
    information (:func:`bayesldp.bayes.smooth_coordinates.smooth_information`) at 50 of its
    draws; its 10 % quantile per coefficient.

    The weights ``w_j = 1 / (1 + I_j s0_j^2)``
    (:func:`bayesldp.bayes.smooth_coordinates.smooth_weights`) suit a coefficient whose
    information is ``I_j`` where the draws are; at one point, or on average, they can be far
    off.  Under the default ``SmoothDensity(3)`` the slope's wide prior puts much of the
    posterior near a vertex of the simplex, where the data say little, while at the EMS estimate
    they say most: on 28 GRR reports (12, 9, 7; eps 1) the EMS weight was 0.13, 15 % of the
    transitions diverged and ``E[log lambda]`` was 2.80 against 3.05 by importance sampling
    (effective sample size 8 of 20,000 draws).  On 90 reports (40, 30, 20) half the posterior
    has ``w`` 0.03-0.08 and a quarter has 1; with a pilot on the EMS weights, weights from the
    mean information left 1.6 % divergent and ``E[log lambda]`` 3.20 against 2.84 (one seed),
    and weights averaged over the draws 1.2-3.6 % divergent and one of three seeds 4.7 Monte
    Carlo errors off.  A centred coefficient the data leave free forms a funnel with ``lambda``
    that NUTS cannot cross, while a non-centred one the data pin down only costs steps, so the
    weights serve the less informed tenth of the posterior. With this pilot both tallies gave
    0.02-0.16 % divergent transitions and ``E[log lambda]`` within 1.4 errors (three seeds each;
    scratch runs, the check is ``tests/bayes/test_sampler_reference.py``); where the data fix
    the coefficients the pilot changes little (a scratch run of benchmarks/smooth_prior.py at
    16-256 bins: costs of the order of its committed table's).  PyMC's NUTS
    (``fit(method="nuts")``, 2 chains x 2,000 draws) on the EMS weights: 3 % divergent and an
    ESS of 44-50 for ``log lambda`` on both tallies; on the pilot's: 0.03 % and 0.08 %
    divergent, ESS 1,029 (28 reports) and 66 (90 reports; its diagonal metric lacks
    :meth:`_SmoothTarget.decorrelate`'s map), scratch.
    """
    from bayesldp.bayes.smooth_coordinates import smooth_information

    tune, draws, points, depth, quantile = _SMOOTH_PILOT
    free = _SmoothTarget(tally, prior, np.zeros(prior.n_modes))
    started = time.perf_counter() if started is None else started
    with np.errstate(all="ignore"):
        pilot = _run(free, rng.spawn(1)[0], draws, 1, tune, min(max_treedepth, depth),
                     target_accept, "diag", started, None, coordinates="rw2")  # fmt: skip
    theta = pilot.theta[0, :: draws // points]
    information = [smooth_information(tally, prior, t) for t in theta]
    return np.quantile(information, quantile, axis=0)
