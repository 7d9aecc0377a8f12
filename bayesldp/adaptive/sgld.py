"""The paper's engine: per-user SGLD of AdOBEst-LDP (Algorithm 2), compiled (internal).

The paper: Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy
With an Adaptive Randomized Response Mechanism", ACM TKDD 2025.

``AdaptiveSurvey(..., engine="sgld")`` refreshes its draw after each batch by
``sgld_steps_per_user`` warm-started SGLD updates per arriving user (the paper: 20), each with a
minibatch of ``minibatch`` reports (50) drawn with replacement from all reports so far, constant
step ``gamma``, on the latent ``phi_i ~ Gamma(rho_i, 1)``, ``theta = phi / sum(phi)``:

.. math:: \\phi \\leftarrow \\Big|\\phi + \\frac{\\gamma}{2}\\Big(\\frac{\\rho - 1}
          {\\max(\\phi, f)} - 1 + \\frac{t}{m}\\sum_{j} \\Big(\\frac{L_{y_j}}
          {L_{y_j}\\cdot\\phi} - \\frac{1}{\\sum_i\\phi_i}\\Big)\\Big)
          + \\sqrt{\\gamma}\\,W\\Big|,

``L_y = P_S[:, y]`` the likelihood row of a report, ``W ~ N(0, I)``, the absolute value the
reflection at 0.  ``f = sqrt(gamma)/2`` floors ``phi`` *inside the prior gradient only*, so a
coordinate near 0 with ``rho < 1`` cannot be thrown far away by one step (the state itself is
never clipped; with ``rho = 1`` the term vanishes).  The default step is the reference code's
``gamma = 0.5 / n`` with ``n`` the planned number of users (``n_expected``; when neither
``step_size`` nor ``n_expected`` is given, the first ``simulate`` call fixes it).  The final run
(``posterior(engine="sgld")``) is ``final_steps = 2000`` updates of which the first
``burn_in = 1000`` are discarded.  Random streams, bit-reproducibility and the argument groups:
:mod:`bayesldp.adaptive._kernels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bayesldp.adaptive import _kernels as kn


# ------------------------------------------------------------------------------------ SGLD
@njit(cache=True)
def sgld_steps(
    phi,
    row_of,
    row_sub,
    row_y,
    meta,
    sub_list,
    sub_size,
    t,
    n_steps,
    minibatch,
    gamma,
    rho,
    floor,
    st,
    sp,
    acc,
    stamp,
    phis,
    coefs,
    touched,
):  # pragma: no cover - compiled
    """``n_steps`` reflected SGLD updates of ``phi`` given the first ``t`` reports (the paper's).

    ``phi <- | phi + (gamma/2) (grad log prior + (t/m) sum_j grad log Pr(y_j | phi))
    + sqrt(gamma) W |`` with ``m`` reports drawn with replacement,
    ``grad log Pr(y | phi) = L_y / (L_y . phi) - 1 / sum(phi)`` and the Gamma(rho, 1) prior
    gradient ``(rho - 1) / max(phi, floor) - 1``.

    A report's row is ``L = base + d_S 1_S + d_y e_y`` (``meta[row_of[i]]``, subset
    ``row_sub``, report ``row_y``), so ``L . phi = base sum(phi) + d_S phi(S) + d_y phi_y`` needs
    ``phi(S)`` once per distinct subset in the minibatch, and ``sum_j L_j / (L_j . phi)`` is
    assembled from a scalar, a per-subset coefficient and per-category spikes: O(m + K x
    (distinct subsets)) per update instead of O(m K) (``sub_list[sid, :sub_size[sid]]`` are the
    members of subset ``sid``).  ``stamp`` (>= the subset capacity, all
    -1), ``phis``, ``coefs`` and ``touched`` (>= m) are work arrays; ``acc`` has K entries.
    """
    k = phi.shape[0]
    half = 0.5 * gamma
    noise = np.sqrt(gamma)
    scale = t / minibatch
    for _ in range(n_steps):
        total = 0.0
        for c in range(k):
            total += phi[c]
            acc[c] = 0.0
        base_sum = 0.0
        nt = 0
        for _j in range(minibatch):
            r = row_of[kn._randint(st, t)]
            sid = row_sub[r]
            if stamp[sid] < 0:
                stamp[sid] = nt
                touched[nt] = sid
                nt += 1
                ps = 0.0
                for j in range(sub_size[sid]):
                    ps += phi[sub_list[sid, j]]
                phis[sid] = ps
                coefs[sid] = 0.0
            y = row_y[r]
            base = meta[r, 0]
            d_s = meta[r, 1]
            d_y = meta[r, 2]
            w = 1.0 / (base * total + d_s * phis[sid] + d_y * phi[y])
            base_sum += base * w
            coefs[sid] += d_s * w
            acc[y] += d_y * w
        for i in range(nt):
            sid = touched[i]
            stamp[sid] = -1
            cf = coefs[sid]
            if cf != 0.0:
                for j in range(sub_size[sid]):
                    acc[sub_list[sid, j]] += cf
        shift = t / total
        for c in range(k):
            v = phi[c]
            g = (rho[c] - 1.0) / max(v, floor) - 1.0 + scale * (base_sum + acc[c]) - shift
            phi[c] = abs(v + half * g + noise * kn._normal(st, sp))


@njit(cache=True)
def _work(k, n_sub_cap, minibatch):  # pragma: no cover - compiled
    st = np.empty(4, np.uint64)
    sp = np.zeros(2)
    acc = np.empty(k)
    stamp = np.full(n_sub_cap, -1, np.int64)
    phis = np.empty(n_sub_cap)
    coefs = np.empty(n_sub_cap)
    touched = np.empty(minibatch, np.int64)
    return st, sp, acc, stamp, phis, coefs, touched


@njit(cache=True)
def _sgld(phi, rows, t, n_steps, sgld, work):  # pragma: no cover - compiled
    """``n_steps`` SGLD updates (:func:`sgld_steps`) from grouped arguments."""
    row_of, row_sub, row_y, meta, sub_list, sub_size = rows
    minibatch, gamma, rho, floor, _, _ = sgld
    st, sp, acc, stamp, phis, coefs, touched = work
    sgld_steps(phi, row_of, row_sub, row_y, meta, sub_list, sub_size, t, n_steps, minibatch,
               gamma, rho, floor, st, sp, acc, stamp, phis, coefs, touched)  # fmt: skip


@njit(cache=True)
def run_simulate(
    x, u0, b0, batch_sizes, selection, phi, store, theta_hist, steps_per_user, sgld
):  # pragma: no cover - compiled
    """Simulate consecutive batches (select, perturb ``x``, store, SGLD), users from ``u0``.

    ``selection = (code, alpha, params, order, rank)``.  Returns the number of batches done: it
    stops early, at a batch boundary, when the subset or row tables might overflow (the caller
    grows them and calls again).
    """
    rows = kn.store_rows(store)
    key0, key1 = sgld[4], sgld[5]
    k = phi.shape[0]
    work = _work(k, store[2].shape[0], sgld[0])
    st, sp = work[0], work[1]
    theta = np.empty(k)
    buf = np.empty(k)
    mask = np.zeros(k, np.bool_)
    u = u0
    i = 0
    for bi in range(batch_sizes.shape[0]):
        size = batch_sizes[bi]
        if not kn.has_room(store, size, k):
            return bi
        b = b0 + bi
        kn.normalise(phi, theta)
        kn.survey_batch(x[i : i + size], u, b, theta, selection, store, key0, key1, st, sp, buf,
                        mask)  # fmt: skip
        i += size
        u += size
        kn.seed_stream(st, sp, key0, key1, b, 1)
        _sgld(phi, rows, u, steps_per_user * size, sgld, work)
        kn.normalise(phi, theta_hist[b + 1])
    return batch_sizes.shape[0]


@njit(cache=True)
def run_sgld_batch(phi, rows, t, n_steps, b, sgld, theta_out):  # pragma: no cover - compiled
    """The SGLD updates after batch ``b`` (stream 1 of the batch) and the new draw."""
    work = _work(phi.shape[0], rows[4].shape[0], sgld[0])
    kn.seed_stream(work[0], work[1], sgld[4], sgld[5], b, 1)
    _sgld(phi, rows, t, n_steps, sgld, work)
    kn.normalise(phi, theta_out)


@njit(cache=True)
def run_final(phi0, rows, t, chains, burn_in, draws, sgld, batch):  # pragma: no cover - compiled
    """The final SGLD run: ``chains`` chains warm-started at ``phi0``; draws after burn-in."""
    k = phi0.shape[0]
    out = np.empty((chains, draws, k))
    work = _work(k, rows[4].shape[0], sgld[0])
    phi = np.empty(k)
    for c in range(chains):
        phi[:] = phi0
        kn.seed_stream(work[0], work[1], sgld[4], sgld[5], batch, 2 + c)
        _sgld(phi, rows, t, burn_in, sgld, work)
        for d in range(draws):
            _sgld(phi, rows, t, 1, sgld, work)
            kn.normalise(phi, out[c, d])
    return out
