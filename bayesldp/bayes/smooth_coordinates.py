"""The smoothness prior's coordinates, shared by bayesldp's NUTS and PyMC's model: how much
the data say about each RW2 coefficient (:func:`smooth_information`), the partial
non-centring weights that follow (:func:`smooth_weights`) and the EMS point where the samplers
start (:func:`smooth_pilot`).  See :class:`~bayesldp.bayes.SmoothDensity`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp.bayes.log_weight_priors import LogWeightPrior
from bayesldp.tally import Tally


def smooth_weights(prior: LogWeightPrior, info: Any) -> np.ndarray:
    """The partial non-centring weights ``w_j = 1 / (1 + I_j s0_j^2)``: ``I_j`` the data's
    information about coefficient ``j`` (:func:`smooth_information`), ``s0_j`` its prior sd at
    the prior median of ``lambda``.  Coefficients the data pin down (``w`` near 0) are sampled
    as they are, the others relative to ``lambda``; neither forms a funnel with it."""
    _, _, scale = prior.basis()
    info = np.maximum(np.asarray(info, dtype=float), 0.0)
    return 1.0 / (1.0 + info * (math.exp(prior.log_scale_mean) * scale) ** 2)


def smooth_pilot(tally: Tally) -> np.ndarray:
    """The EMS estimate floored at ``1e-6 / K`` and renormalised: where the smoothness prior's
    samplers measure the data's information (:func:`smooth_information`) and start."""
    from bayesldp.estimators import estimate

    theta = np.maximum(estimate(tally, "ems").frequencies, 1e-6 / tally.k)
    return theta / theta.sum()


def smooth_information(tally: Tally, prior: LogWeightPrior, theta: Any = None) -> np.ndarray:
    """The data's information about each coefficient ``y_j`` of :func:`smooth_theta` at
    ``theta`` (default :func:`smooth_pilot`): ``diag(M^T J F J M)`` with ``M`` the prior's
    modes, ``J = diag(theta) - theta theta^T`` (softmax) and
    ``F = sum_u c_u L_u^T L_u / (L_u . theta)^2`` (observed information in ``theta``)."""
    from bayesldp.likelihood import Likelihood

    theta = smooth_pilot(tally) if theta is None else np.asarray(theta, dtype=float)
    lik = Likelihood(tally)
    _, mu = lik.evaluate(theta)
    fisher = lik.full_gram(lik.counts / (mu * mu))
    _, modes, _ = prior.basis()
    jm = theta[:, None] * (modes - theta @ modes)  # J @ modes
    return np.einsum("ij,ij->j", jm, fisher @ jm)
