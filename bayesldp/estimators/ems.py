"""EM with a smoothing step (EMS) as Ye et al. run it on numerical mechanisms.

EMS is EM over ordered bins with a binomial smoothing of the weights after each EM map (Li et al.,
SIGMOD 2020, section 5, for the square wave; for SW and PM, the code ``SW.py`` and ``PM_EM.py`` of
yyt20080808/LDP-EM-MR by Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally
Differentially Private Protocols").  It regularises the 1024-bin estimates towards smooth densities,
and its stopping rule stops far earlier than EM to the MLE.

:func:`ems` runs compiled (:func:`_ems_loop`): each step is one ``L^T w``, one ``L theta`` (the
next step reuses it), the smoothing and the log-likelihood, with the products of
:class:`~bayesldp.likelihood.Likelihood`: O(U + K) for the band rows of SW and PM, O(U K) for
the dense rows of Laplace and Gaussian.  Against the authors' EMS at the same rule:
``benchmarks/numerical_speed.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from bayesldp import likelihood as lk
from bayesldp._validation import check_int, check_memory, check_positive
from bayesldp.errors import InvalidInputError
from bayesldp.estimators.result import Estimate
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally


def smooth(theta: np.ndarray, kernel: np.ndarray, bins: int | None = None) -> np.ndarray:
    """``S theta`` renormalised, ``S`` the row-normalised banded matrix of a symmetric kernel.

    Row ``i`` of ``S`` is the kernel centred on ``i``, cut at the ends and divided by its sum
    there (the authors' ``smoothing_matrix``: with ``[1, 2, 1]`` the first row is
    ``[2, 1] / 3``).  Only the first ``bins`` entries (default all) are smoothed, with the
    windows cut at ``bins``; the rest are kept (PCKV-PM's absence), then all renormalised.
    """
    theta = np.ascontiguousarray(theta, dtype=float)
    kern = np.ascontiguousarray(kernel, dtype=float)
    out = np.empty_like(theta)
    bins = theta.shape[0] if bins is None else bins
    _smooth_into(theta, kern, _inv_window_sums(kern, bins), out)
    return out


_REASSOC = lk._REASSOC  # sums may be reassociated (vectorised): results move by rounding only


@njit(cache=True)
def _inv_window_sums(kern, k):
    """``1 / sum`` of the kernel over each bin's window, cut at the domain's ends."""
    h = kern.shape[0] // 2
    out = np.empty(k)
    for i in range(k):
        out[i] = 1.0 / kern[h + max(-h, -i) : h + min(h, k - 1 - i) + 1].sum()
    return out


@njit(cache=True, fastmath=_REASSOC)
def _smooth_into(theta, kern, inv_den, out):
    """``out = S theta / |S theta|`` (:func:`smooth`; ``inv_den`` the reciprocals of the
    kernel's sums cut at the ends, one per smoothed bin: the first ``inv_den.shape[0]``).

    One pass per kernel tap over slices, indexed from 0: numba then needs no negative-index
    wraparound and LLVM vectorises the pass (this matters here, in the EMS loop)."""
    k, m, h = theta.shape[0], inv_den.shape[0], kern.shape[0] // 2
    out[:m] = 0.0
    for d in range(kern.shape[0]):
        a, b = max(0, h - d), min(m, m + h - d)
        src, dst, tap = theta[a - h + d : b - h + d], out[a:b], kern[d]
        for i in range(b - a):
            dst[i] += tap * src[i]
    total = 0.0
    for i in range(m):
        out[i] *= inv_den[i]
        total += out[i]
    for i in range(m, k):
        out[i] = theta[i]
        total += out[i]
    _scale(out, 1.0 / total)


@njit(cache=True, fastmath=_REASSOC)
def _scale(x, factor):
    for i in range(x.shape[0]):
        x[i] *= factor


@njit(cache=True, fastmath=_REASSOC)
def _log_ratio_sum(counts, new, inv_prev, ratio):
    """``sum_u c_u log(new_u / prev_u)``, or NaN when some ratio is 1e-3 or more from 1.

    Near 1 the logarithm is its series ``log1p(x) = x - x^2/2 + ... + x^7/7`` (|x| < 1e-3:
    truncation below 1e-21 relative), a polynomial that vectorises where ``log`` does not.
    """
    far = 0
    for u in range(counts.shape[0]):
        ratio[u] = new[u] * inv_prev[u] - 1.0
        far += abs(ratio[u]) >= 1e-3
    if far:
        return np.nan
    s = 0.0
    for u in range(counts.shape[0]):
        x = ratio[u]
        s += counts[u] * x * (1 - x * (1 / 2 - x * (1 / 3 - x * (1 / 4 - x * (
            1 / 5 - x * (1 / 6 - x / 7))))))  # fmt: skip
    return s


# The loop itself is compiled without reassociation: with it, LLVM's vectorised sums here gave
# results that depended on where the arrays lay in memory (on a GRR tally at K = 9, 47 of
# 2,000 calls in one process differed from the first in the last bits), and EMS starts the
# smoothness and logistic-normal priors' samplers, whose chains amplify such bits into
# different draws for the same seed (tests/estimators/test_ems.py).  The kernels above keep it.
@njit(cache=True, fastmath={"contract"})
def _ems_loop(rows, counts, const, kern, n_smooth, gain_min, tol, min_steps, change_tol,
              max_iter, theta, trace):  # fmt: skip
    """The steps of :func:`ems` from ``theta`` (updated in place), compiled.

    ``rows`` is ``Likelihood.arrays`` (every count positive, as in a Tally).  Returns ``(steps,
    smoothed, converged)``; ``trace[t]`` receives step ``t``'s log-likelihood ``const +
    sum_u c_u log(L_u . theta)``, from step 1 on as the last one plus the gain
    ``sum_u c_u log(L_u . theta_t / L_u . theta_{t-1})`` when :func:`_log_ratio_sum` has it.
    A step is smoothed (its first ``n_smooth`` weights) when the previous gain exceeds
    ``gain_min`` (``-inf``: every step); the gain rule applies after ``min_steps`` steps.
    Divisions are by reciprocals (one vector of them per step): equal to rounding.
    """
    offset = rows[5]
    k, n_rows = theta.shape[0], counts.shape[0]
    old, g = np.zeros(k), np.empty(k)
    r, lth, w, inv, inv_prev = (np.empty(n_rows), np.empty(n_rows), np.empty(n_rows),
                                np.empty(n_rows), np.empty(n_rows))  # fmt: skip
    inv_den = _inv_window_sums(kern, n_smooth)
    lk.evaluate_rows(rows, theta, r, lth)
    for u in range(n_rows):
        inv[u] = 1.0 / lth[u]
    old_ll, gain = 0.0, np.inf
    steps = smoothed = 0
    while steps < max_iter:
        change = 0.0
        for x in range(k):
            change += abs(old[x] - theta[x])
        if change <= change_tol:
            return steps, smoothed, True
        old[:] = theta
        base = 0.0
        for u in range(n_rows):
            w[u] = counts[u] * inv[u]
            base += offset[u] * w[u]
        lk.rmatvec_rows(rows, w, g)  # C^T w; L^T w adds a . w
        total = 0.0
        for x in range(k):
            theta[x] *= g[x] + base
            total += theta[x]
        _scale(theta, 1.0 / total)
        if gain > gain_min:
            _smooth_into(theta, kern, inv_den, g)
            theta[:] = g
            smoothed += 1
        inv, inv_prev = inv_prev, inv
        lk.evaluate_rows(rows, theta, r, lth)
        for u in range(n_rows):
            inv[u] = 1.0 / lth[u]
        ll = old_ll + _log_ratio_sum(counts, lth, inv_prev, w) if steps > 0 else np.nan
        if np.isnan(ll):
            ll = const + np.sum(counts * np.log(lth))
        trace[steps] = ll
        gain = ll - old_ll
        steps += 1
        if steps > min_steps and abs(gain) < tol:
            return steps, smoothed, True
        old_ll = ll
    return steps, smoothed, False


def ems(
    tally: Tally,
    *,
    kernel: Any = (1.0, 2.0, 1.0),
    smooth_gain: float | None = None,
    tol: Any = None,
    max_iter: int = 10_000,
    min_steps: int = 2,
    change_tol: float | None = None,
    smoothed_bins: int | None = None,
    theta0: Any = None,
) -> Estimate:
    """EM with a smoothing step over ordered bins, with the LDP-EM-MR authors' stopping rule.

    From the uniform start (or ``theta0``), each step is the EM map
    ``theta_x <- theta_x sum_u c_u L[u, x] / (N L_u . theta)`` followed by the smoothing
    ``theta <- S theta / |S theta|`` (:func:`smooth`), then the log-likelihood
    ``l = sum_u c_u log(L_u . theta)`` of the smoothed weights.  Stop (as the authors'
    ``EMS`` of ``SW.py`` and ``PM_EM.py``, Ye et al.):

    * when the L1 change of one step is at most ``change_tol`` (default ``1 / N``);
    * after ``min_steps`` steps (default 2: from the third step on), when ``|l_t - l_{t-1}| <
      tol`` (default ``1e-3 e^eps``, the authors' ``loglikelihood_threshold``; ``l_{-1} =
      0``);
    * after ``max_iter`` steps (their 10,000 for SW, 5,000 for PM).

    The authors' PCKV-PM EM (``myEM_one`` in ``PCKV_EM.py``) is this with ``kernel=(1, 2,
    1)``, ``smooth_gain=0.0003``, ``tol=1e-4 e^eps``, ``min_steps=2000``, ``change_tol=1 /
    (100 N)``, the value bins alone smoothed and their start as ``theta0`` (their nudge of
    the absence after 5,000 steps aside).

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
    min_steps : int
        Steps before the log-likelihood rule may stop.
    change_tol : float, optional
        The L1-change rule's threshold (default ``1 / N``).
    smoothed_bins : int, optional
        Smooth only the first this many categories, the ordered bins (default: the
        mechanism's ``ordered_bins`` if it has one, e.g. :class:`~bayesldp.PCKVPM`'s value
        bins, else all).
    theta0 : array_like, optional
        Starting frequencies (default uniform; non-negative, summing to 1).

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
    check_int(min_steps, "min_steps", low=0)
    if tol is None:
        eps = getattr(tally.mechanism, "epsilon", None)
        if eps is None:
            raise InvalidInputError("tol: the tally's mechanism has no epsilon; give tol")
        tol = 1e-3 * math.exp(float(eps))
    tol = check_positive(tol, "tol")
    change_tol = 1.0 / tally.n if change_tol is None else check_positive(change_tol, "change_tol")
    if smoothed_bins is None:
        smoothed_bins = getattr(tally.mechanism, "ordered_bins", tally.k)
    smoothed_bins = check_int(smoothed_bins, "smoothed_bins")
    if smoothed_bins > tally.k:
        raise InvalidInputError(f"smoothed_bins: at most k = {tally.k}, got {smoothed_bins}")
    lik = Likelihood(tally)
    theta = lik.check_start(theta0).copy()
    trace = np.empty(max_iter)
    gain_min = -math.inf if smooth_gain is None else float(smooth_gain)
    steps, smoothed, converged = _ems_loop(
        lik.arrays, lik.counts, lik.scale_const, kern, smoothed_bins, gain_min, tol,
        min_steps, change_tol, max_iter, theta, trace,
    )  # fmt: skip
    return Estimate(
        theta,
        None,
        "ems",
        on_simplex=True,
        iterations=steps,
        loglik_trace=trace[:steps],
        converged=converged,
        details={
            "kernel": kern.tolist(),
            "tol": float(tol),
            "smoothed": smoothed,
            "smoothed_bins": smoothed_bins,
        },
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


class _MergedRows:
    """The tally's rows ``L`` with some columns replaced (EM-MR's merged windows), as products.

    ``L theta`` and ``L^T w`` come from :class:`~bayesldp.likelihood.Likelihood`'s compiled
    kernels (O(U + K) for SW's and PM's band rows, ``L = diag(s) (a 1^T + C)``) plus one O(U)
    correction per replaced column; the dense rows are read only for the windows' means.
    """

    def __init__(self, tally: Tally) -> None:
        self.lik = Likelihood(tally)
        self.base = tally.rows
        self.columns: dict[int, np.ndarray] = {}  # column index -> the column now in its place
        self._r, self._lth = np.empty(self.lik.n_rows), np.empty(self.lik.n_rows)
        self._g = np.empty(self.lik.k)

    def probs(self, theta: np.ndarray) -> np.ndarray:
        """``L theta``."""
        lk.evaluate(*self.lik.arrays, np.ascontiguousarray(theta), self._r, self._lth)
        out = self.lik.row_scale * self._lth
        for j, col in self.columns.items():
            out += (col - self.base[:, j]) * theta[j]
        return out

    def pull_back(self, w: np.ndarray) -> np.ndarray:
        """``L^T w``."""
        ws = np.ascontiguousarray(self.lik.row_scale * w)
        lk.rmatvec(*self.lik.arrays[:5], ws, self._g)
        out = self._g + float(self.lik.offset @ ws)
        for j, col in self.columns.items():
            out[j] = col @ w
        return out

    def window_mean(self, start: int, length: int) -> np.ndarray:
        """The mean of columns ``start .. start + length - 1`` as they stand."""
        block = self.base[:, start : start + length].sum(axis=1)
        for j, col in self.columns.items():
            if start <= j < start + length:
                block += col - self.base[:, j]
        return block / length

    def replace(self, j: int, column: np.ndarray) -> None:
        self.columns[j] = column


def ems_mr(
    tally: Tally,
    *,
    threshold: float | None = None,
    tol: Any = None,
    max_iter: int | None = None,
    remained: float = 0.25,
) -> Estimate:
    """EMS with mixture reduction over ordered bins, as Ye et al. run it (EM-MR).

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
        dense likelihood rows are read for the merged windows' mean columns, the EM steps use
        the compiled products of :class:`_MergedRows`.
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
    rows = _MergedRows(tally)  # the tally's rows, merged windows' mean columns replacing some
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
        probs = rows.probs(theta)  # L theta, reused by the next step
        while np.abs(old - theta).sum() > 1.0 / n and steps < cap and k * remained < active:
            old = theta
            theta = old * rows.pull_back(counts / probs)
            theta = smooth(theta / theta.sum(), kern)
            probs = rows.probs(theta)
            ll = float(counts @ np.log(probs))
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
            column = rows.window_mean(start, length)
            merges.append((start, length))
            length //= 2
            rows.replace(start + length, column)
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
