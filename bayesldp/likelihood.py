"""The likelihood of a tally: the one operator every estimator, sampler and bound reads.

A :class:`~bayesldp.Tally` holds distinct likelihood rows ``L[u, x]`` (proportional to
``Pr(report u | X = x)``) and their counts ``c[u]``; the log-likelihood of ``theta`` is

.. math:: \\ell(\\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta)

(seed 000, eq. 22; REFERENCE.md section 3).  Everything the package computes from a tally is a
product with these rows: ``L theta`` (the report probabilities), ``L^T w`` (gradients, the EM map
``theta_x <- theta_x g_x / n`` with ``g = L^T (c / L theta)``), ``L^T diag(w) L`` (Hessians and
Fisher information).  :class:`Likelihood` computes them once, for every row form, with the
numba kernels of this module; the MLE, EM, EM-MR, the HMC and SGLD samplers and
:mod:`bayesldp.bounds` all read it.

Rows are *scaled* to a maximum of 1 (the likelihood is invariant to a row's scale, up to the
constant ``sum_u c_u log s_u`` kept in ``const``), so tiny or huge rows neither underflow nor
overflow, and *centred*: ``L[u] = a_u + C[u]`` with ``C[u] >= 0`` (``a_u = min_x L[u, x]`` for
dense rows, ``min(lo, hi)`` in support form).  On the simplex ``L_u . theta = a_u + C_u . theta``,
so log-likelihood differences are computed as ``log1p(C_u . theta / a_u)`` without the cancellation
that ruins them when ``epsilon`` is tiny (every row then nearly constant).  ``C`` is stored in one
of four forms, chosen from the tally:

* ``"dense"``: the matrix ``C`` and its transpose (dense tallies, finite channels): O(U K) per
  product, each read from the copy whose inner loop is contiguous and independent;
* ``"band"``: dense rows that are one level on a contiguous range of bins plus a few partial-bin
  corrections at its ends (the discretised square wave and piecewise mechanisms,
  :func:`band_form`): O(U + K) per product from prefix sums; ``dense`` keeps ``C`` for the
  products computed in numpy;
* ``"sparse"``: ``C = |hi - lo| M`` with the 0/1 matrix ``M`` (the support, or its complement when
  ``hi < lo``) stored as compressed rows of ``M`` or of ``1 - M``, whichever is sparser
  (``complement``): O(nnz + K) per product (unary encoding, local hashing, Hadamard response);
* ``"onehot"``: support rows with exactly one True (GRR): one column index per row, O(U + K).

The compiled kernels take the row form as separate arguments, ``dense``, ``indptr`` and ``indices``
(one of them None selects the form: numba prunes a branch on ``x is None`` when ``x`` is None at
compile time, so each form gets its own specialisation, compiled once and cached on disk); the
``dense`` slot holds the pair ``(C, C^T)`` or the band tuple, told apart by type at compile
time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numba.extending import overload

from bayesldp._validation import check_memory
from bayesldp.errors import InvalidInputError

__all__ = ["Likelihood"]

_CHUNK_ELEMENTS = 1 << 21  # float64 temporaries of at most 16 MB when densifying row blocks
_MAX_CORRECTIONS = 8  # band rows: at most this many entries off the level per row
# Discretised channels carry quadrature rounding of ~1e-14 (rows scaled to a maximum of 1);
# entries within this of a band's level (or of 0 off it) are read as that level.
_LEVEL_TOL = 1e-12
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


@njit(cache=True)
def _dense_matvec(rows, theta, out):
    """``out = C theta`` for dense rows ``(C, C^T)``, read from ``C^T``: each pass adds
    ``theta_x C[:, x]`` (contiguous, vectorised across rows), so ``out[u]`` is summed over ``x``
    in order, the same additions as a dot product per row (same result; a row-wise dot product
    is one dependent chain of additions: 170.1 against 26.9 us at 210 x 1024, scratch)."""
    ct = rows[1]
    out[:] = 0.0
    for x in range(ct.shape[0]):
        tx = theta[x]
        for u in range(out.shape[0]):
            out[u] += ct[x, u] * tx


@njit(cache=True)
def _dense_rmatvec(rows, w, out):
    """``out = C^T w`` for dense rows ``(C, C^T)``, read from ``C`` row by row."""
    c = rows[0]
    out[:] = 0.0
    for u in range(w.shape[0]):
        wu = w[u]
        for x in range(out.shape[0]):
            out[x] += wu * c[u, x]


def _by_row_form(dense_impl, band_impl):
    """An overload that takes ``dense_impl`` for dense rows (the pair ``(C, C^T)``) and
    ``band_impl`` for band rows (:func:`band_form`'s tuple), chosen when numba compiles the
    caller."""

    def choose(rows, vec, out):
        impl = dense_impl if len(rows.types) == 2 else band_impl
        return lambda rows, vec, out: impl(rows, vec, out)

    return choose


def _rows_matvec(rows, theta, out):  # pragma: no cover - replaced by the overload
    """``out = C theta`` for dense or band rows."""
    raise NotImplementedError


def _rows_rmatvec(rows, w, out):  # pragma: no cover - replaced by the overload
    """``out = C^T w`` for dense or band rows."""
    raise NotImplementedError


overload(_rows_matvec)(_by_row_form(_dense_matvec, _band_matvec))
overload(_rows_rmatvec)(_by_row_form(_dense_rmatvec, _band_rmatvec))


# ============================================================================ compiled kernels
@njit(cache=True)
def matvec(dense, indptr, indices, delta, complement, theta, out):
    """``out = C @ theta`` (U,)."""
    n_rows = out.shape[0]
    k = theta.shape[0]
    if dense is not None:  # dense or band rows
        _rows_matvec(dense, theta, out)
    if indices is not None:
        total = 0.0
        if complement:
            for x in range(k):
                total += theta[x]
        if indptr is None:  # one-hot rows: C[u] = delta e_{indices[u]}
            for u in range(n_rows):
                s = theta[indices[u]]
                out[u] = delta * (total - s) if complement else delta * s
        else:
            for u in range(n_rows):
                s = 0.0
                for j in range(indptr[u], indptr[u + 1]):
                    s += theta[indices[j]]
                out[u] = delta * (total - s) if complement else delta * s


@njit(cache=True)
def rmatvec(dense, indptr, indices, delta, complement, w, out):
    """``out = C.T @ w`` (K,)."""
    n_rows = w.shape[0]
    k = out.shape[0]
    if dense is not None:  # dense or band rows
        _rows_rmatvec(dense, w, out)
    if indices is not None:
        for x in range(k):
            out[x] = 0.0
        total = 0.0
        if indptr is None:
            for u in range(n_rows):
                total += w[u]
                out[indices[u]] += w[u]
        else:
            for u in range(n_rows):
                wu = w[u]
                total += wu
                for j in range(indptr[u], indptr[u + 1]):
                    out[indices[j]] += wu
        for x in range(k):
            out[x] = delta * (total - out[x]) if complement else delta * out[x]


@njit(cache=True)
def evaluate(dense, indptr, indices, delta, complement, offset, theta, r, lth):
    """``r = C theta`` and ``lth = L theta = a sum(theta) + r``."""
    matvec(dense, indptr, indices, delta, complement, theta, r)
    s = 0.0
    for x in range(theta.shape[0]):
        s += theta[x]
    for u in range(r.shape[0]):
        lth[u] = offset[u] * s + r[u]


@njit(cache=True)
def evaluate_rows(rows, theta, r, lth):
    """:func:`evaluate` with the row form as one tuple (``Likelihood.arrays``)."""
    dense, indptr, indices, delta, complement, offset = rows
    evaluate(dense, indptr, indices, delta, complement, offset, theta, r, lth)


@njit(cache=True)
def rmatvec_rows(rows, w, out):
    """:func:`rmatvec` with the row form as one tuple (``Likelihood.arrays``)."""
    dense, indptr, indices, delta, complement, _ = rows
    rmatvec(dense, indptr, indices, delta, complement, w, out)


@njit(cache=True)
def gradient(dense, indptr, indices, delta, complement, offset, counts, theta, floor, r, lth, w,
             g):  # fmt: skip
    """``g = L^T (c / max(L theta, floor))``; returns ``sum_u c_u log(L_u . theta)``.

    Work arrays ``r``, ``lth``, ``w`` of length U are overwritten (``lth = L theta``, ``w = c /
    max(lth, floor)``).  The log-likelihood is ``-inf`` when an observed report has probability 0.
    """
    evaluate(dense, indptr, indices, delta, complement, offset, theta, r, lth)
    ll = 0.0
    ws = 0.0
    for u in range(lth.shape[0]):
        mu = lth[u]
        ll += counts[u] * math.log(mu) if mu > 0.0 else -math.inf
        wu = counts[u] / max(mu, floor)
        w[u] = wu
        ws += wu * offset[u]
    rmatvec(dense, indptr, indices, delta, complement, w, g)
    for x in range(g.shape[0]):
        g[x] += ws
    return ll


@njit(cache=True)
def loglik_rel(r, lth, counts, inv_offset, positive):
    """``(ell(theta) - const, sum_u c_u |t_u|)`` in one pass over the rows, theta on the simplex.

    ``t_u = log1p(r_u / a_u)`` (``log r_u`` when ``a_u = 0``); the first value is ``-inf`` if an
    observed report gets probability 0; the second is the magnitude that sets the rounding
    error of the first.
    """
    total = 0.0
    scale = 0.0
    zero = False
    for u in range(r.shape[0]):
        if lth[u] <= 0.0:
            zero = True
        t = math.log1p(r[u] * inv_offset[u]) if positive[u] else math.log(r[u])
        total += counts[u] * t
        scale += counts[u] * abs(t)
    return (-math.inf if zero else total), scale


@njit(cache=True)
def _loglik_batch(dense, indptr, indices, delta, complement, offset, counts, thetas, out):
    """``out[d] = sum_u c_u log(L_u . theta_d)`` for any non-negative ``thetas`` (D, K)."""
    n_rows = counts.shape[0]
    r = np.empty(n_rows)
    lth = np.empty(n_rows)
    for d in range(thetas.shape[0]):
        evaluate(dense, indptr, indices, delta, complement, offset, thetas[d], r, lth)
        ll = 0.0
        for u in range(n_rows):
            ll += counts[u] * math.log(lth[u]) if lth[u] > 0.0 else -math.inf
        out[d] = ll


@njit(cache=True)
def _pattern_gram(indptr, indices, w, k):
    """``M^T diag(w) M`` (K, K) for the 0/1 matrix ``M`` stored as compressed rows:
    ``sum_u w_u sum_{i, j in row u} e_i e_j^T``, O(sum_u nnz_u^2)."""
    out = np.zeros((k, k))
    for u in range(w.shape[0]):  # pairs a <= b only, then symmetrised
        wu = w[u]
        start, stop = indptr[u], indptr[u + 1]
        for a in range(start, stop):
            i = indices[a]
            for b in range(a, stop):
                out[i, indices[b]] += wu
    for i in range(k):
        for j in range(i + 1, k):
            s = out[i, j] + out[j, i]
            out[i, j] = s
            out[j, i] = s
    return out


@njit(cache=True)
def _row_pattern(support):
    """Number of True per row of a boolean matrix and the column of each row's first True."""
    n_rows, k = support.shape
    nnz = np.empty(n_rows, dtype=np.int64)
    first = np.empty(n_rows, dtype=np.int32)
    for u in range(n_rows):
        first[u] = -1
        count = 0
        for x in range(k):
            if support[u, x]:
                if count == 0:
                    first[u] = x
                count += 1
        nnz[u] = count
    return nnz, first


@njit(cache=True)
def _scaled_centred(raw):
    """``(C, scale, offset)``: each row divided by its maximum (> 0 in a Tally), less its
    minimum after that (``min(row / s) = min(row) / s`` exactly: division by ``s > 0`` is
    monotone and correctly rounded)."""
    n_rows, k = raw.shape
    out, scale, offset = np.empty((n_rows, k)), np.empty(n_rows), np.empty(n_rows)
    for u in range(n_rows):
        top, low = raw[u, 0], raw[u, 0]
        for x in range(1, k):
            top = max(top, raw[u, x])
            low = min(low, raw[u, x])
        scale[u], offset[u] = top, low / top
        for x in range(k):
            out[u, x] = raw[u, x] / top - offset[u]
    return out, scale, offset


# ============================================================================ the operator
class Likelihood:
    """The centred likelihood rows of a tally and every product the package needs.

    ``L[u, x] = offset[u] + C[u, x]`` with ``C >= 0``, stored as ``kind`` "dense", "band",
    "sparse" or "onehot" (module docstring).  ``arrays`` is the tuple ``(dense, indptr, indices,
    delta, complement, offset)`` the compiled kernels of this module take (``dense``: ``(C, C^T)``
    for dense rows, the band tuple for band rows).

    Parameters
    ----------
    tally : Tally
        Any tally (dense or support form, deduplicated or not, one mechanism or mixed).

    Attributes
    ----------
    k, n_rows : int
        Categories and distinct rows.
    counts : ndarray (U,)
        Row counts as floats; ``n`` is their sum.
    const : float
        ``sum_u c_u log a_u`` over rows with ``a_u > 0``: ``ell(theta) = const + loglik_rel``.
    rowmax : ndarray (U,)
        ``max_x C[u, x]``.
    """

    def __init__(self, tally: Any) -> None:
        self.k = tally.k
        self.counts = tally.counts.astype(float)
        self.n = float(self.counts.sum())
        self.n_rows = int(self.counts.shape[0])
        self.dense: np.ndarray | None = None
        self.band: tuple | None = None
        self.indptr: np.ndarray | None = None
        self.indices: np.ndarray | None = None
        self.delta = 0.0
        self.complement = False
        self._support: np.ndarray | None = None
        rows_form = None  # the kernels' first slot: band rows, (C, C^T) or None
        if tally.is_support_form:
            self._init_support(tally)
        else:
            what = f"the likelihood's rows ({self.n_rows:,} x {self.k:,})"
            check_memory(8.0 * self.n_rows * self.k, what, "use fewer bins or categories")
            rows, self.row_scale, self.offset = _scaled_centred(tally.rows)
            self.dense = rows
            self.rowmax = 1.0 - self.offset  # each scaled row's maximum is 1
            ordered = getattr(tally.mechanism, "ordered_bins", tally.k)
            is_band, band = band_form(rows, ordered, _LEVEL_TOL)
            self.band = band if is_band else None
            if not is_band:
                check_memory(16.0 * self.n_rows * self.k, what + " and their transpose",
                             "use fewer bins or categories")  # fmt: skip
            rows_form = band if is_band else (rows, np.ascontiguousarray(rows.T))
            self.kind = "band" if is_band else "dense"
        self.positive = self.offset > 0
        safe = np.where(self.positive, self.offset, 1.0)
        self.inv_offset = np.where(self.positive, 1.0 / safe, 0.0)
        self.scale_const = float(self.counts @ np.log(self.row_scale))
        self.const = float(self.counts[self.positive] @ np.log(safe[self.positive]))
        self.const += self.scale_const
        self.arrays = (
            rows_form,
            self.indptr,
            self.indices,
            self.delta,
            self.complement,
            self.offset,
        )

    def _init_support(self, tally: Any) -> None:
        top = max(tally.levels)
        lo, hi = tally.levels[0] / top, tally.levels[1] / top
        self.row_scale = np.full(self.n_rows, top)
        support = np.ascontiguousarray(tally.support)
        self._support = support
        self._invert = bool(hi < lo)  # then C = |hi - lo| (1 - support)
        self.delta = abs(hi - lo)
        self.offset = np.full(self.n_rows, min(lo, hi))
        row_nnz, first = _row_pattern(support)
        mask_nnz = self.k - row_nnz if self._invert else row_nnz
        self.rowmax = self.delta * (mask_nnz > 0)
        if row_nnz.min() == 1 and row_nnz.max() == 1:  # GRR: one True per row
            self.kind = "onehot"
            self.indices = first
            self.complement = self._invert
            return
        self.kind = "sparse"
        mask = ~support if self._invert else support
        self.complement = bool(mask_nnz.sum() > 0.5 * support.size)
        stored = ~mask if self.complement else mask
        stored_nnz = self.k - mask_nnz if self.complement else mask_nnz
        self.indptr = np.zeros(self.n_rows + 1, dtype=np.int64)
        np.cumsum(stored_nnz, out=self.indptr[1:])
        self.indices = np.nonzero(stored)[1].astype(np.int32)

    # ---------------------------------------------------------------- products
    def evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(C theta, L theta)`` for one theta (K,)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        r = np.empty(self.n_rows)
        lth = np.empty(self.n_rows)
        if self.dense is not None:  # BLAS
            np.matmul(self.dense, theta, out=r)
            lth = self.offset * theta.sum() + r
        else:
            evaluate(*self.arrays, theta, r, lth)
        return r, lth

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``C @ v`` for v of shape (K,)."""
        if self.dense is not None:
            return self.dense @ v
        out = np.empty(self.n_rows)
        matvec(*self.arrays[:5], np.ascontiguousarray(v, dtype=float), out)
        return out

    def rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``C.T @ w`` for w of shape (U,)."""
        if self.dense is not None:
            return w @ self.dense
        out = np.empty(self.k)
        rmatvec(*self.arrays[:5], np.ascontiguousarray(w, dtype=float), out)
        return out

    def sq_rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``(C * C).T @ w``."""
        if self.dense is None:  # C is delta times a 0/1 matrix
            return self.delta * self.rmatvec(w)
        out = np.zeros(self.k)
        for sl in self._row_blocks(self.k):
            block = self.dense[sl]
            out += (block * block).T @ w[sl]
        return out

    def gram(self, w: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """``C[:, idx].T @ diag(w) @ C[:, idx]`` (all columns when idx is None), O(U |idx|^2)."""
        if idx is None and self.kind == "sparse":  # O(nnz^2 / U) per row, not O(K^2)
            return self._sparse_gram(np.ascontiguousarray(w, dtype=float))
        idx = np.arange(self.k) if idx is None else idx
        m = idx.shape[0]
        out = np.zeros((m, m))
        for sl in self._row_blocks(m):
            block = self._centred_block(sl)[:, idx]
            out += (block * w[sl, None]).T @ block
        return out

    def _sparse_gram(self, w: np.ndarray) -> np.ndarray:
        """``C^T W C`` from the stored pattern: ``C = delta M`` or ``delta (1 - M)``
        (``complement``), ``(1 - M)^T W (1 - M) = W_tot 1 1^T - 1 m^T - m 1^T + M^T W M``
        with ``m = M^T w``."""
        pattern = _pattern_gram(self.indptr, self.indices, w, self.k)
        if self.complement:
            m = np.diag(pattern).copy()
            pattern = float(w.sum()) - m[:, None] - m[None, :] + pattern
        return self.delta**2 * pattern

    def full_gram(self, w: np.ndarray) -> np.ndarray:
        """``L.T @ diag(w) @ L`` (K, K), from the centred rows.

        ``sum_u w_u (a_u + C_u)(a_u + C_u)^T = C^T W C + v 1^T + 1 v^T + (sum_u w_u a_u^2) 1 1^T``
        with ``v = C^T (w a)``.
        """
        v = self.rmatvec(w * self.offset)
        return self.gram(w) + v[:, None] + v[None, :] + float(w @ self.offset**2)

    def _centred_block(self, sl: slice) -> np.ndarray:
        if self.dense is not None:
            return self.dense[sl]
        sub = self._support[sl]
        return self.delta * (~sub if self._invert else sub).astype(float)

    def _row_blocks(self, width: int):
        step = max(1, _CHUNK_ELEMENTS // max(width, 1))
        for start in range(0, self.n_rows, step):
            yield slice(start, min(start + step, self.n_rows))

    def rows_at(self, idx: np.ndarray) -> np.ndarray:
        """The rows ``L[idx]`` as floats, shape ``idx.shape + (K,)`` (only these are built)."""
        scale = self.row_scale[idx][..., None]
        if self.dense is not None:
            return scale * (self.offset[idx][..., None] + self.dense[idx])
        sub = self._support[idx]
        return scale * (self.offset[0] + self.delta * (~sub if self._invert else sub))

    # ---------------------------------------------------------------- likelihood
    def loglik(self, theta: Any) -> np.ndarray | float:
        """``sum_u c_u log(L_u . theta)`` for theta of shape (K,) or (..., K), any scale."""
        theta = np.asarray(theta, dtype=float)
        flat = np.ascontiguousarray(theta.reshape(-1, self.k))
        out = np.empty(flat.shape[0])
        _loglik_batch(*self.arrays, self.counts, flat, out)
        out += self.scale_const
        return float(out[0]) if theta.ndim == 1 else out.reshape(theta.shape[:-1])

    def row_dot(self, theta: Any) -> np.ndarray:
        """``L @ theta`` for theta of shape (..., K): returns shape (..., U)."""
        theta = np.asarray(theta, dtype=float)
        flat = theta.reshape(-1, self.k)
        out = np.empty((flat.shape[0], self.n_rows))
        for d in range(flat.shape[0]):
            out[d] = self.evaluate(flat[d])[1]
        out *= self.row_scale
        return out.reshape((*theta.shape[:-1], self.n_rows))

    def loglik_rel(self, r: np.ndarray, lth: np.ndarray) -> float:
        """``ell(theta) - const`` from ``evaluate``'s output, theta on the simplex."""
        return float(loglik_rel(r, lth, self.counts, self.inv_offset, self.positive)[0])

    def loglik_scale(self, r: np.ndarray, lth: np.ndarray) -> float:
        """``sum_u c_u |t_u|``: the magnitude that sets the rounding error of ``loglik_rel``."""
        return float(loglik_rel(r, lth, self.counts, self.inv_offset, self.positive)[1])

    def grad(self, theta: np.ndarray, floor: float = 0.0) -> tuple[float, np.ndarray]:
        """``(ell(theta), g)`` with ``g = L^T (c / max(L theta, floor))`` for one theta (K,)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        work = np.empty((3, self.n_rows))
        g = np.empty(self.k)
        ll = gradient(*self.arrays, self.counts, theta, float(floor), *work, g)
        return float(ll) + self.scale_const, g

    def score(self, thetas: np.ndarray, floor: float = 0.0) -> np.ndarray:
        """``h(theta) = L^T (c / max(L theta, floor)) - n`` for thetas (C, K) -> (C, K)."""
        return np.stack([self.grad(theta, floor)[1] for theta in thetas]) - self.n

    def fisher_diag(self, theta: np.ndarray, floor: float = 0.0) -> np.ndarray:
        """``sum_u c_u L_ux^2 / max(L_u . theta, floor)^2`` for every x, at one theta (K,)."""
        _, lth = self.evaluate(theta)
        w2 = self.counts / np.maximum(lth, floor) ** 2
        a = self.offset
        return float(w2 @ a**2) + 2.0 * self.rmatvec(w2 * a) + self.sq_rmatvec(w2)

    def kkt(self, theta: np.ndarray, lth: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Scaled KKT violation of the MLE, the centred gradient ``C.T (c / L theta)`` and
        ``g - lambda``.

        The violation is ``max(max_{theta_x>0} |g_x - n|, max_{theta_x=0} (g_x - n)^+)``
        divided by ``n * s`` with ``s = mean_i max_x C[u_i, x] / (L_{u_i} . theta)`` the typical
        slope of one report's log-likelihood, so the tolerance does not depend on epsilon.
        """
        w = self.counts / lth
        gt = self.rmatvec(w)
        dev = gt - theta @ gt
        slope = float(w @ self.rowmax)
        scale = slope if slope > 0 else 1.0
        free = theta > 0
        v_free = float(np.abs(dev[free]).max()) if free.any() else 0.0
        v_off = float(max(dev[~free].max(), 0.0)) if (~free).any() else 0.0
        return max(v_free, v_off) / scale, gt, dev

    def check_start(self, theta0: Any) -> np.ndarray:
        """Validate a starting point of an iterative estimator (default uniform)."""
        if theta0 is None:
            return np.full(self.k, 1.0 / self.k)
        arr = np.asarray(theta0, dtype=float)
        if arr.shape != (self.k,) or not np.all(np.isfinite(arr)) or arr.min() < 0:
            raise InvalidInputError(f"theta0: expected {self.k} finite non-negative frequencies")
        if abs(arr.sum() - 1.0) > 1e-8:
            raise InvalidInputError(f"theta0: must sum to 1, sums to {arr.sum()!r}")
        if np.any(self.evaluate(arr)[1] <= 0):
            raise InvalidInputError(
                "theta0: gives probability 0 to some observed report; start from a point with "
                "theta0 > 0 on every category"
            )
        return arr / arr.sum()
