"""EM with a smoothing step (EMS) as the seed 001 authors run it on numerical mechanisms.

EMS is EM over ordered bins with a binomial smoothing of the weights after each EM map (Li et
al., SIGMOD 2020, section 5, for the square wave; the seed 001 authors' code ``SW.py`` and
``PM_EM.py`` of yyt20080808/LDP-EM-MR for SW and PM).  It regularises the 1024-bin estimates
towards smooth densities, and its stopping rule stops far earlier than EM to the MLE.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from bayesldp._validation import check_int, check_memory, check_positive
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally


def smooth(theta: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """``S theta`` renormalised, ``S`` the row-normalised banded matrix of a symmetric kernel.

    Row ``i`` of ``S`` is the kernel centred on ``i``, cut at the ends and divided by its sum
    there (the authors' ``smoothing_matrix``: with ``[1, 2, 1]`` the first row is
    ``[2, 1] / 3``).
    """
    num = np.convolve(theta, kernel, mode="same")
    den = np.convolve(np.ones_like(theta), kernel, mode="same")
    out = num / den
    return out / out.sum()


_MAX_EDGES_PER_ROW = 8  # band rows: at most this many entries off the band's level per row
# The discretised channels carry quadrature rounding of ~1e-14 (rows scaled to a maximum of 1);
# entries within this of the band's level (or of 0 off the band) are read as that level.
_LEVEL_TOL = 1e-12


@njit(cache=True)
def _band_matvec(lo, hi, level, eptr, eidx, eval_, offset, theta, prefix, out):
    """``out = L theta`` for band rows: ``a_u sum(theta) + v_u sum_{lo_u <= x < hi_u} theta_x``
    plus the corrections ``sum_j e_j theta_{x_j}`` of row ``u`` (prefix sums, O(U + K + E))."""
    k = theta.shape[0]
    prefix[0] = 0.0
    for x in range(k):
        prefix[x + 1] = prefix[x] + theta[x]
    total = prefix[k]
    for u in range(out.shape[0]):
        s = level[u] * (prefix[hi[u]] - prefix[lo[u]])
        for j in range(eptr[u], eptr[u + 1]):
            s += eval_[j] * theta[eidx[j]]
        out[u] = offset[u] * total + s


@njit(cache=True)
def _band_rmatvec(lo, hi, level, eptr, eidx, eval_, offset, w, diff, out):
    """``out = L^T w`` for band rows (a difference array, O(U + K + E))."""
    k = out.shape[0]
    for x in range(k + 1):
        diff[x] = 0.0
    base = 0.0
    for u in range(w.shape[0]):
        wv = w[u] * level[u]
        diff[lo[u]] += wv
        diff[hi[u]] -= wv
        base += offset[u] * w[u]
    run = 0.0
    for x in range(k):
        run += diff[x]
        out[x] = base + run
    for u in range(w.shape[0]):
        for j in range(eptr[u], eptr[u + 1]):
            out[eidx[j]] += eval_[j] * w[u]


def _band_form(dense: np.ndarray) -> tuple | None:
    """The centred rows ``C`` as (lo, hi, level, eptr, eidx, corrections), or None.

    Row ``u`` is read as ``level_u`` on ``[lo_u, hi_u)`` (its first to last entry above
    ``_LEVEL_TOL``, the level its maximum) plus the entries more than ``_LEVEL_TOL`` from that
    level (partial-bin edges), stored as ``C[u, x] - level_u``; entries within ``_LEVEL_TOL``
    of the level, or of 0 off the band, are the channel's quadrature rounding (rows are scaled
    to a maximum of 1) and are read as the level or 0.  None when some row has more than
    ``_MAX_EDGES_PER_ROW`` corrections (Laplace, Gaussian, finite channels).
    """
    n_rows = dense.shape[0]
    lo = np.zeros(n_rows, dtype=np.int64)
    hi = np.zeros(n_rows, dtype=np.int64)
    level = np.zeros(n_rows)
    eptr = np.zeros(n_rows + 1, dtype=np.int64)
    idx: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for u in range(n_rows):  # once per tally, U rows
        row = dense[u]
        nz = np.flatnonzero(row > _LEVEL_TOL)
        if nz.size == 0:
            eptr[u + 1] = eptr[u]
            continue
        a, b = int(nz[0]), int(nz[-1]) + 1
        seg = row[a:b]
        v = float(seg.max())
        off = np.flatnonzero(np.abs(seg - v) > _LEVEL_TOL)
        if off.size > _MAX_EDGES_PER_ROW:
            return None
        lo[u], hi[u], level[u] = a, b, v
        idx.append(off + a)
        vals.append(seg[off] - v)
        eptr[u + 1] = eptr[u] + off.size
    eidx = np.concatenate(idx).astype(np.int64) if idx else np.zeros(0, dtype=np.int64)
    evals = np.concatenate(vals) if vals else np.zeros(0)
    return lo, hi, level, eptr, eidx, evals


def centred_products(lik: Likelihood):
    """``(theta -> L theta, w -> L^T w)`` for the EM step, exact and as cheap as the rows allow.

    A discretised SW or PM channel is its low level ``q`` everywhere plus ``p - q`` on a band
    around the input bin (with partial-bin edges), so each centred row ``C_u = L_u - a_u`` of
    :class:`~bayesldp.likelihood.Likelihood` is one level ``v_u`` on a contiguous range plus a
    few edge entries.  Those rows are read once from the dense rows (:func:`_band_form`, the
    same numbers) and the products become

    ``L theta = a sum(theta) + v (P[hi] - P[lo]) + edges``, ``P`` the prefix sums of theta,
    ``L^T w = a . w + cumsum(difference array of v w) + edges``,

    O(U + K) per product instead of O(U K); they differ from the dense product only in
    rounding.  Other rows (Laplace, Gaussian, finite channels) keep the dense form.
    """
    offset = np.ascontiguousarray(
        np.broadcast_to(np.asarray(lik.offset, dtype=float), lik.counts.shape)
    )
    band = _band_form(lik.dense) if lik.dense is not None else None
    if band is not None:
        prefix = np.empty(lik.k + 1)
        lth = np.empty(lik.n_rows)
        g = np.empty(lik.k)

        def lmat(theta: np.ndarray) -> np.ndarray:
            _band_matvec(*band, offset, np.ascontiguousarray(theta), prefix, lth)
            return lth.copy()

        def lrmat(w: np.ndarray) -> np.ndarray:
            _band_rmatvec(*band, offset, np.ascontiguousarray(w), prefix, g)
            return g.copy()

        return lmat, lrmat

    def lmat_dense(theta: np.ndarray) -> np.ndarray:
        return lik.evaluate(theta)[1]

    def lrmat_dense(w: np.ndarray) -> np.ndarray:
        return lik.rmatvec(w) + offset @ w

    return lmat_dense, lrmat_dense


def ems(
    tally: Tally,
    *,
    kernel: Any = (1.0, 2.0, 1.0),
    smooth_gain: float | None = None,
    tol: Any = None,
    max_iter: int = 10_000,
) -> Estimate:
    """EM with a smoothing step over ordered bins, with the LDP-EM-MR authors' stopping rule.

    From the uniform start, each step is the EM map
    ``theta_x <- theta_x sum_u c_u L[u, x] / (N L_u . theta)`` followed by the smoothing
    ``theta <- S theta / |S theta|`` (:func:`smooth`), then the log-likelihood
    ``l = sum_u c_u log(L_u . theta)`` of the smoothed weights.  Stop (as the authors'
    ``EMS`` of ``SW.py`` and ``PM_EM.py``, seed 001):

    * when the L1 change of one step is at most ``1 / N``;
    * from the third step on, when ``|l_t - l_{t-1}| < tol`` (default ``1e-3 e^eps``, the
      authors' ``loglikelihood_threshold``; ``l_{-1} = 0``);
    * after ``max_iter`` steps (their 10,000 for SW, 5,000 for PM).

    Parameters
    ----------
    tally : Tally
        Reports of a mechanism whose categories are ordered bins (e.g. ``SquareWave``).
    kernel : sequence of float
        Symmetric smoothing kernel of odd length: ``(1, 2, 1)`` is PM's ``EMS`` and the
        authors' EM-MR, ``(1, 4, 1)`` is SW's ``EMS``.
    smooth_gain : float, optional
        Smooth a step only when the previous step's log-likelihood gain exceeded this
        (SW's ``EMS``: 0.003, with the gain before the first step taken as +inf and the first
        step's gain ``l_0 - 0`` negative, so the second step is never smoothed).  ``None``
        (default): smooth every step (PM's ``EMS``).
    tol : float, optional
        Log-likelihood tolerance (default ``1e-3 e^eps`` from the tally's mechanism).
    max_iter : int

    Returns
    -------
    Estimate
        ``iterations``: steps; ``converged``: a rule other than the cap stopped it;
        ``details``: ``kernel``, ``tol``, ``smoothed`` (steps smoothed).
    """
    tally = check_tally(tally)
    kern = np.asarray(kernel, dtype=float)
    symmetric = kern.ndim == 1 and kern.size % 2 == 1 and np.allclose(kern, kern[::-1])
    if not symmetric or np.any(kern < 0):
        raise InvalidInputError(
            f"kernel: expected a symmetric non-negative sequence of odd length, got {kernel!r}"
        )
    check_int(max_iter, "max_iter")
    if tol is None:
        eps = getattr(tally.mechanism, "epsilon", None)
        if eps is None:
            raise InvalidInputError("tol: the tally's mechanism has no epsilon; give tol")
        tol = 1e-3 * math.exp(float(eps))
    tol = check_positive(tol, "tol")
    lik = Likelihood(tally)
    counts = np.asarray(lik.counts, dtype=float)
    n = counts.sum()
    lmat, lrmat = centred_products(lik)
    theta = np.full(lik.k, 1.0 / lik.k)
    old_theta = np.zeros(lik.k)
    old_ll, gain = 0.0, math.inf
    steps = smoothed = 0
    converged = False
    trace = []
    while steps < max_iter:
        if np.abs(old_theta - theta).sum() <= 1.0 / n:
            converged = True
            break
        old_theta = theta
        lth = lmat(theta)
        w = counts / lth
        theta = theta * lrmat(w)
        theta = theta / theta.sum()
        if smooth_gain is None or gain > smooth_gain:
            theta = smooth(theta, kern)
            smoothed += 1
        lth = lmat(theta)
        ll = float(counts @ np.log(lth)) + lik.scale_const  # sum_u c_u log(L_u . theta)
        trace.append(ll)
        gain = ll - old_ll
        if steps > 1 and abs(gain) < tol:
            steps += 1
            converged = True
            break
        old_ll = ll
        steps += 1
    return Estimate(
        theta,
        None,
        "ems",
        on_simplex=True,
        iterations=steps,
        loglik_trace=np.asarray(trace),
        converged=converged,
        details={"kernel": kern.tolist(), "tol": float(tol), "smoothed": smoothed},
    )


def _ems_mr_defaults(tally: Tally) -> tuple[float, float, int]:
    """The authors' threshold, tolerance and step cap for SW (``sw_reduct``) or PM (``PM_E``)."""
    from bayesldp.mechanisms.numerical.piecewise import Piecewise

    mech = tally.mechanism
    eps = getattr(mech, "epsilon", None)
    if eps is None:
        raise InvalidInputError(
            "threshold, tol: the tally's mechanism has no epsilon; give threshold and tol"
        )
    e, n = math.exp(float(eps)), tally.n
    if n < 3:
        raise InvalidInputError(
            f"threshold: the authors' default 0.4 e^(-eps/2) / (ln N - 1) needs N >= 3 reports, "
            f"the tally has {n}; give threshold"
        )
    threshold = 0.4 / math.sqrt(e) / (math.log(n) - 1.0)
    if not isinstance(mech, Piecewise):  # SW's rule, also used for Laplace and Gaussian
        return threshold, 1e-3 * e, 10_000
    if eps <= 0.5 and n < 100_000:
        threshold /= e - 1.0
    elif eps >= 1 and n > 100_000:
        threshold /= math.sqrt(e)
    if eps < 0.2 and n > 100_000:
        threshold *= 2.0
    return threshold, (1e-3 if n < 100_000 else 1e-4) * e, 5_000


def _window_sums(
    theta: np.ndarray, removed: np.ndarray, length: int
) -> tuple[np.ndarray, int, int]:
    """Masses of the windows ``[i, i + length)`` that hold no merged bin and start within
    ``length + 150`` bins of either end (others: 1); the first and last such start."""
    k = theta.size
    starts = np.arange(k - length)
    csum = np.concatenate([[0.0], np.cumsum(theta)])
    cremoved = np.concatenate([[0], np.cumsum(removed)])
    free = cremoved[starts + length] == cremoved[starts]
    near_end = (starts < length + 150) | (starts > k - length - 150)
    ok = free & near_end
    value = np.where(ok, csum[starts + length] - csum[starts], 1.0)
    valid = np.flatnonzero(ok)
    first, last = (int(valid[0]), int(valid[-1])) if valid.size else (0, 0)
    return value, first, last


def ems_mr(
    tally: Tally,
    *,
    threshold: float | None = None,
    tol: Any = None,
    max_iter: int | None = None,
    remained: float = 0.25,
) -> Estimate:
    """EMS with mixture reduction over ordered bins, as the seed 001 authors run it (EM-MR).

    The authors' ``EMS_reduct`` (yyt20080808/LDP-EM-MR, ``PM_EM_reduction.py``, called by
    ``sw_reduct`` and ``PM_E(ifReduct=True, remained=1/4)``): rounds of EMS (EM map, ``[1, 2, 1]``
    smoothing at every step, their stopping rule with tolerance ``tol``), between which a
    window of ``length`` contiguous bins near either end of the domain (starting within
    ``length + 150`` bins of it; ``length = k / 2`` at first) whose mass is below
    ``threshold / 2^r`` (``r`` the merges so far) is merged: its bins after the first are set to
    0, the bin ``length / 2 + 1`` past its start gets the window's mass divided by 1.1 (more than
    100,000 reports) or 3, the channel's column ``length / 2`` past its start becomes the
    window's mean column, and ``length`` halves; a round without a merge shortens ``length`` by
    64.  Each round doubles ``tol`` and halves the step cap; the rounds stop after
    ``floor(remained^{-1/2}) + 2`` counted rounds (a round without a merge counts 0 before the
    first merge and 1/2 after), when ``length < 64``, and EM stops running once the bins left
    unmerged are at most ``remained k``.  Each merged window's weights are replaced by their
    mean at the end, and the result renormalised (the authors' is not, after a last merge).
    When the smallest window's mass is within ``superF / 2^{round - 1}`` of the last valid
    window's (and the first valid one holds more than twice the last's) the last is merged,
    else when within it of the first valid window's, the first; ``superF`` is 0.03, or
    ``threshold / 2`` above 100,000 reports.

    Parameters
    ----------
    tally : Tally
        Reports of a mechanism whose categories are ordered bins (a numerical mechanism); its
        likelihood rows are materialised densely (the merges replace columns).
    threshold, tol, max_iter : optional
        Merge threshold, log-likelihood tolerance and EMS step cap.  Defaults, as the authors:
        ``0.4 e^{-eps/2} / (ln N - 1)``, ``1e-3 e^eps`` and 10,000 (``SquareWave``, also used for
        Laplace and Gaussian); for ``Piecewise`` ``PM_E``'s adjustments of the threshold,
        ``1e-4 e^eps`` from 100,000 reports and 5,000 steps.
    remained : float in (0, 1]
        Stop EM once at most ``remained k`` bins are unmerged (theirs: 1/4).

    Returns
    -------
    Estimate
        ``details``: ``merged`` (start, length) of each merged window, ``steps`` per round,
        ``threshold``, ``tol``.
    """
    tally = check_tally(tally)
    check_memory(8.0 * tally.n_rows * tally.k, f"ems_mr's dense rows ({tally.n_rows:,} x "
                 f"{tally.k})", "use em_mr, which reads the rows in place")  # fmt: skip
    given = (threshold, tol, max_iter)
    d_threshold, d_tol, d_cap = _ems_mr_defaults(tally) if None in given else (None, None, None)
    threshold = check_positive(d_threshold if threshold is None else threshold, "threshold")
    tol = tol0 = check_positive(d_tol if tol is None else tol, "tol")
    cap = float(check_int(d_cap if max_iter is None else max_iter, "max_iter"))
    if not 0.0 < remained <= 1.0:
        raise InvalidInputError(f"remained: must lie in (0, 1], got {remained!r}")
    rows = np.array(tally.rows, dtype=float)  # modified: merged windows' mean columns
    counts = np.asarray(tally.counts, dtype=float)
    n, k = counts.sum(), tally.k
    kern = np.array([1.0, 2.0, 1.0])
    theta, old = np.full(k, 1.0 / k), np.zeros(k)
    removed = np.zeros(k, dtype=bool)
    active, merges, length, rnd = k, [], k // 2, 0.0
    super_f = threshold / 2 if n > 100_000 else 0.03
    steps_per_round = []
    while True:
        rnd += 1
        steps, old_ll = 0, 0.0
        while np.abs(old - theta).sum() > 1.0 / n and steps < cap and k * remained < active:
            old = theta
            theta = old * (rows.T @ (counts / (rows @ old)))
            theta = smooth(theta / theta.sum(), kern)
            ll = float(counts @ np.log(rows @ theta))
            if steps > 1 and abs(ll - old_ll) < tol:
                break
            old_ll = ll
            steps += 1
        steps_per_round.append(steps)
        if rnd >= int(math.sqrt(1.0 / remained)) + 2 or length < 64:
            break
        tol, cap = 2.0 * tol, cap / 2.0
        value, first, last = _window_sums(theta, removed, length)
        start = int(np.argmin(value))
        slack = super_f / 2 ** (rnd - 1)
        if abs(value[start] - value[last]) < slack and value[first] > 2 * value[last]:
            start = last
        elif abs(value[start] - value[first]) < slack:
            start = first
        if value[start] < threshold / 2 ** len(merges):
            mass = value[start]
            theta = theta.copy()
            theta[start + 1 : start + 1 + length] = 0.0
            removed[start + 1 : start + 1 + length] = True
            active -= length
            theta[start + length // 2 + 1] = mass / (1.1 if n > 100_000 else 3.0)
            column = rows[:, start : start + length].mean(axis=1)
            merges.append((start, length))
            length //= 2
            rows[:, start + length] = column
        else:
            length -= 64
            rnd -= 1.0 if not removed.any() else 0.5
    for start, width in merges:
        theta[start : start + width] = theta[start : start + width].mean()
    return Estimate(
        theta / theta.sum(),
        None,
        "ems_mr",
        on_simplex=True,
        iterations=int(sum(steps_per_round)),
        details={
            "merged": merges,
            "steps": steps_per_round,
            "threshold": float(threshold),
            "tol": tol0,
        },
    )
