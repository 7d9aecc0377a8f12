"""The compiled log-density and gradient of the random walk across rounds
(:func:`bayesldp.fit_rounds`' model; target :class:`bayesldp.bayes.hmc.walk._WalkTarget`).

Coordinates ``q = (v, z_2 .. z_T, s)``: ``v`` and each ``z_t`` in R^{K-1} are the free
coordinates of PyMC's ``ZeroSumNormal`` (the orthonormal basis ``B`` of the vectors summing to 0
that PyMC's zero-sum transform uses, :func:`_to_zero_sum`), ``s = log sigma`` (absent when the
prior fixes the step).  With ``y_t = v + sigma (z_2 + ... + z_t)`` and ``eta_t = B y_t``,
``theta_t = softmax(eta_t)``:

.. math::

    \\log p(q) = \\sum_t \\sum_u c_{tu} \\log(L_{tu} \\cdot \\theta_t)
        - \\frac{|v|^2}{2 s_0^2} - \\sum_{t \\ge 2} \\frac{|z_t|^2}{2}
        - \\frac{\\sigma^2}{2 \\tau^2} + s

(constants dropped; ``+ s`` is the Jacobian of ``sigma = e^s``).  With
``e_t = B^T (\\theta_t \\odot (g_t - \\theta_t \\cdot g_t))``, ``g_t = L_t^T (c_t / L_t
\\theta_t)``: ``d/dv = sum_t e_t - v / s_0^2``, ``d/dz_r = sigma sum_{t >= r} e_t - z_r``,
``d/ds = sigma sum_t e_t . (z_2 + ... + z_t) - sigma^2 / tau^2 + 1``.

The rounds' likelihood is one pass of the package's likelihood operator
(:class:`bayesldp.likelihood.Likelihood`, the kernels every sampler reads) over the block tally
of :func:`bayesldp.bayes.hmc.walk.block_tally`: round ``t``'s rows on the categories
``t K .. t K + K - 1`` of ``T K``, read at ``Theta = (theta_1, ..., theta_T) / T``; so each
round's rows keep their form (one column a row for GRR, packed bits for unary encoding) and a
gradient costs what the rounds' separate gradients cost together, plus O(T K).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from bayesldp import likelihood as lk

_S_LIMIT = 50.0  # |log sigma| beyond this has prior mass 0


@nb.njit(cache=True)
def _to_zero_sum(y, eta):  # pragma: no cover - compiled
    """``eta = B y`` (K,) from ``y`` (K - 1,): PyMC's zero-sum map, ``eta_i = y_i - S / (sqrt K
    + K)`` for ``i < K - 1`` and ``eta_{K-1} = -S / sqrt K``, ``S = sum y`` (orthonormal)."""
    k = eta.shape[0]
    root = math.sqrt(k)
    total = 0.0
    for i in range(k - 1):
        total += y[i]
    norm = total / (root + k)
    for i in range(k - 1):
        eta[i] = y[i] - norm
    eta[k - 1] = -total / root


@nb.njit(cache=True)
def _from_zero_sum(w, out):  # pragma: no cover - compiled
    """``out = B^T w`` (K - 1,) for ``w`` (K,), the adjoint of :func:`_to_zero_sum`."""
    k = w.shape[0]
    root = math.sqrt(k)
    total = 0.0
    for i in range(k - 1):
        total += w[i]
    shift = total / (root + k) + w[k - 1] / root
    for i in range(k - 1):
        out[i] = w[i] - shift


@nb.njit(cache=True)
def _logp_grad_walk(q, data, work, grad):  # pragma: no cover - compiled
    """Log-density at ``q`` (returned) and its gradient (into ``grad``); module docstring.

    ``data[18] = (*arrays, counts, par)``: the block tally's likelihood arrays and counts
    (:class:`bayesldp.likelihood.Likelihood`) and ``par = (s_0, tau, step, T)``, ``step <= 0``
    for a learnt step (then ``q[-1] = log sigma``).  ``work`` is the likelihood's scratch:
    ``Theta`` and ``g`` (T K,), three arrays of the block tally's rows.
    """
    slot = data[18]
    dense, indptr, indices, delta, complement, offset, counts, par = slot
    big_theta, g, r, lth, w = work
    n_rounds = int(par[3])
    k = big_theta.shape[0] // n_rounds
    m = k - 1
    s0, tau, step = par[0], par[1], par[2]
    learnt = step <= 0.0
    lp = 0.0
    if learnt:
        s = q[m * n_rounds]
        if not abs(s) <= _S_LIMIT:  # sigma outside [e^-50, e^50] (also NaN): no density
            for i in range(grad.shape[0]):
                grad[i] = 0.0
            return -math.inf
        sigma = math.exp(s)
        lp += s - 0.5 * (sigma / tau) ** 2
    else:
        sigma = step
    y = np.empty(m)
    walked = np.zeros((n_rounds, m))  # z_2 + ... + z_t
    eta = np.empty(k)
    for i in range(m):
        y[i] = q[i]
        lp -= 0.5 * (q[i] / s0) ** 2
    for t in range(n_rounds):
        if t > 0:
            for i in range(m):
                zi = q[t * m + i]
                walked[t, i] = walked[t - 1, i] + zi
                y[i] += sigma * zi
                lp -= 0.5 * zi * zi
        _to_zero_sum(y, eta)
        top = eta[0]
        for i in range(1, k):
            top = max(top, eta[i])
        norm = 0.0
        for i in range(k):
            big_theta[t * k + i] = math.exp(eta[i] - top)
            norm += big_theta[t * k + i]
        for i in range(k):
            big_theta[t * k + i] /= norm * n_rounds
    ll = lk.gradient(dense, indptr, indices, delta, complement, offset, counts, big_theta, 0.0, r,
                     lth, w, g)  # fmt: skip
    if ll == -math.inf:
        for i in range(grad.shape[0]):
            grad[i] = 0.0
        return -math.inf
    lp += ll
    e = np.empty((n_rounds, m))
    d_sigma = 0.0
    for t in range(n_rounds):  # d ll / d eta_t = theta_t (g_t - theta_t . g_t), theta_t = T Theta_t
        mean = 0.0
        for i in range(k):
            mean += big_theta[t * k + i] * g[t * k + i]
        for i in range(k):
            eta[i] = big_theta[t * k + i] * (g[t * k + i] - n_rounds * mean)
        _from_zero_sum(eta, e[t])
        for i in range(m):
            d_sigma += e[t, i] * walked[t, i]
    acc = np.zeros(m)
    for t in range(n_rounds - 1, 0, -1):
        for i in range(m):
            acc[i] += e[t, i]
            grad[t * m + i] = sigma * acc[i] - q[t * m + i]
    for i in range(m):
        grad[i] = acc[i] + e[0, i] - q[i] / (s0 * s0)
    if learnt:
        grad[m * n_rounds] = sigma * d_sigma - (sigma / tau) ** 2 + 1.0
    return lp
