"""Band rows: the ``"band"`` row form of :class:`bayesldp.likelihood.Likelihood`.

Dense rows that are one level on a contiguous range of bins plus a few partial-bin corrections
at its ends (the discretised square wave and piecewise mechanisms): :func:`band_form` reads
them, and the compiled products ``C theta`` and ``C^T w`` take O(U + K) from prefix sums.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_MAX_CORRECTIONS = 8  # band rows: at most this many entries off the level per row
# Band sums may be reassociated (vectorised): results move by rounding only.
_REASSOC = {"reassoc", "contract"}


# ============================================================================ band rows
@njit(cache=True, fastmath=_REASSOC)
def _prefix_sums(values, out):
    """``out[0] = 0``, ``out[i + 1] = values[0] + ... + values[i]``, as four running sums over
    the four quarters (independent additions: about four times the throughput of one chain),
    each quarter then shifted by the totals before it.  Equal to the sequential sums to
    rounding."""
    n = values.shape[0]
    q = n // 4
    out[0] = 0.0
    a0 = a1 = a2 = a3 = 0.0
    for i in range(q):
        a0 += values[i]
        a1 += values[q + i]
        a2 += values[2 * q + i]
        a3 += values[3 * q + i]
        out[i + 1] = a0
        out[q + i + 1] = a1
        out[2 * q + i + 1] = a2
        out[3 * q + i + 1] = a3
    for i in range(4 * q, n):  # the remainder joins the last quarter
        a3 += values[i]
        out[i + 1] = a3
    for i in range(q + 1, 2 * q + 1):
        out[i] += a0
    a01 = a0 + a1
    for i in range(2 * q + 1, 3 * q + 1):
        out[i] += a01
    a012 = a01 + a2
    for i in range(3 * q + 1, n + 1):
        out[i] += a012


@njit(cache=True, fastmath=_REASSOC)
def _band_matvec(band, theta, out):
    """``out = C theta`` for band rows: ``v_u sum_{lo_u <= x < hi_u} theta_x`` (prefix sums)
    plus the row's corrections (a fixed number per row, zero-padded) and the trailing
    columns: O(U + K)."""
    lo, hi, level, ridx, rval = band[:5]
    tail = band[9]
    m = theta.shape[0] - tail.shape[1]
    prefix = np.empty(m + 1)
    _prefix_sums(theta[:m], prefix)
    for u in range(out.shape[0]):
        s = level[u] * (prefix[hi[u]] - prefix[lo[u]])
        for j in range(ridx.shape[1]):
            s += rval[u, j] * theta[ridx[u, j]]
        for j in range(tail.shape[1]):
            s += tail[u, j] * theta[m + j]
        out[u] = s


@njit(cache=True, fastmath=_REASSOC)
def _band_rmatvec(band, w, out):
    """``out = C^T w`` for band rows, O(U + K): the levels' part from the prefix sums ``S`` of
    ``v_u w_u`` over rows when ``lo`` and ``hi`` ascend with ``u`` (the rows covering ``x``
    are then ``n_hi[x] <= u < n_lo[x]``), else from a difference array; the corrections by
    column (a fixed number per column, zero-padded: gathers, not scatters); the trailing
    columns dense."""
    lo, hi, level = band[0], band[1], band[2]
    cidx, cval, n_lo, n_hi, tail = band[5], band[6], band[7], band[8], band[9]
    n_rows = w.shape[0]
    k = out.shape[0] - tail.shape[1]
    ordered = n_lo.shape[0] > 0
    if ordered:
        wv = np.empty(n_rows)
        for u in range(n_rows):
            wv[u] = w[u] * level[u]
        buf = np.empty(n_rows + 1)
        _prefix_sums(wv, buf)
    else:
        buf = np.zeros(k + 1)
        for u in range(n_rows):
            wv = w[u] * level[u]
            buf[lo[u]] += wv
            buf[hi[u]] -= wv
    run = 0.0
    for x in range(k):
        if ordered:
            s = buf[n_lo[x]] - buf[n_hi[x]]
        else:
            run += buf[x]
            s = run
        for j in range(cidx.shape[1]):
            s += cval[x, j] * w[cidx[x, j]]
        out[x] = s
    for j in range(tail.shape[1]):
        s = 0.0
        for u in range(n_rows):
            s += tail[u, j] * w[u]
        out[k + j] = s


@njit(cache=True)
def _padded(owner, at, val, n, width):
    """Entries ``(at[i], val[i])`` grouped by ``owner[i]`` into ``n x width`` arrays, padded
    with ``(0, 0.0)``."""
    idx, out = np.zeros((n, width), np.int64), np.zeros((n, width))
    fill = np.zeros(n, np.int64)
    for i in range(owner.shape[0]):
        o = owner[i]
        idx[o, fill[o]], out[o, fill[o]] = at[i], val[i]
        fill[o] += 1
    return idx, out


@njit(cache=True, fastmath=_REASSOC)
def _deviations(row, v, first, last, tol):
    """How many entries of ``row[first:last + 1]`` lie more than ``tol`` from ``v``."""
    count = 0
    for x in range(first, last + 1):
        count += abs(row[x] - v) > tol
    return count


@njit(cache=True)
def band_form(dense, ordered, tol):
    """The centred rows ``C`` (scaled to a maximum of 1 over ``L``) as band rows, if they are.

    Row ``u`` of a discretised SW or PM channel is one level on a contiguous range of bins plus
    a few partial-bin corrections near the range's ends.  Over the first ``ordered`` columns
    (the ordered bins; further columns, such as PCKV-PM's absence, are kept dense as ``tail``)
    ``C[u]`` is read as the level ``v_u`` (its maximum there) on ``[lo_u, hi_u)`` (its first
    to last entry above ``tol``) plus the entries more than ``tol`` from that level, stored as
    ``C[u, x] - v_u`` (at most ``_MAX_CORRECTIONS`` per row); entries within ``tol`` of the level,
    or of 0 off the band, are the channel's quadrature rounding.
    Returns ``(ok, band)``, ``band = (lo, hi, level, ridx, rval, cidx, cval, n_lo, n_hi,
    tail)``: the corrections by row and by column, each zero-padded to the most any row or
    column has; when ``lo`` and ``hi`` ascend with ``u``, the rows with ``lo_u <= x`` and with
    ``hi_u <= x`` (else empty).  ``ok`` is False when some row has more corrections (Laplace,
    Gaussian, unary encodings).
    """
    n_rows, k = dense.shape[0], ordered
    tail = np.ascontiguousarray(dense[:, ordered:])
    level = np.zeros(n_rows)
    lo, hi = np.zeros(n_rows, np.int64), np.zeros(n_rows, np.int64)
    none, pad = np.zeros(0, np.int64), np.zeros((0, 0), np.int64)
    band = (lo, hi, level, pad, np.zeros((0, 0)), pad, np.zeros((0, 0)), none, none, tail)
    n_dev = np.zeros(n_rows, np.int64)
    for u in range(n_rows):
        row = dense[u, :k]
        first, last = 0, k - 1
        while first < k and row[first] <= tol:
            first += 1
        if first == k:
            continue
        while row[last] <= tol:
            last -= 1
        v = row[first : last + 1].max()
        lo[u], hi[u], level[u] = first, last + 1, v
        n_dev[u] = _deviations(row, v, first, last, tol)
        if n_dev[u] > _MAX_CORRECTIONS:
            return False, band
    total = n_dev.sum()
    owner, at, val = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total)
    i = 0
    for u in range(n_rows):  # from both ends inward (corrections sit near the ends)
        row, v, found = dense[u], level[u], 0
        a, b = lo[u], hi[u] - 1
        while found < n_dev[u]:
            for side in range(2 if a < b else 1):
                x = b if side else a
                if abs(row[x] - v) > tol:
                    owner[i], at[i], val[i] = u, x, row[x] - v
                    i += 1
                    found += 1
            a, b = a + 1, b - 1
    ridx, rval = _padded(owner, at, val, n_rows, max(n_dev.max(), 1) if n_rows else 1)
    by_col = np.bincount(at, minlength=k) if total else np.zeros(k, np.int64)
    cidx, cval = _padded(at, owner, val, k, max(by_col.max(), 1) if k else 1)
    n_lo, n_hi = none, none
    if np.all(lo[1:] >= lo[:-1]) and np.all(hi[1:] >= hi[:-1]):  # rows in band order
        x = np.arange(k)
        n_lo, n_hi = np.searchsorted(lo, x, side="right"), np.searchsorted(hi, x, side="right")
    return True, (lo, hi, level, ridx, rval, cidx, cval, n_lo, n_hi, tail)
