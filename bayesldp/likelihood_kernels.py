"""The compiled products of a tally's likelihood rows, for every row form.

The kernels :class:`bayesldp.likelihood.Likelihood` (whose docstring describes the row forms)
and the compiled estimators and samplers call: ``C theta``, ``C^T w``, ``L theta``, the
gradient and the log-likelihood.

The compiled kernels take the row form as separate arguments, ``dense``, ``indptr`` and ``indices``
(one of them None selects the form: numba prunes a branch on ``x is None`` when ``x`` is None at
compile time, so each form gets its own specialisation, compiled once and cached on disk); the
``dense`` slot holds the pair ``(C, C^T)``, the band tuple (:mod:`bayesldp.likelihood_band`) or
the packed rows ``(packed, delta)`` (:mod:`bayesldp.likelihood_packed`), told apart by type at
compile time.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from bayesldp.likelihood_band import _band_matvec, _band_rmatvec
from bayesldp.likelihood_packed import _packed_matvec, _packed_rmatvec


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


def _by_row_form(dense_impl, band_impl, packed_impl):
    """An overload that takes ``dense_impl`` for dense rows (the pair ``(C, C^T)``),
    ``band_impl`` for band rows (:func:`band_form`'s tuple) and ``packed_impl`` for packed rows
    (``(packed, delta)``, a ``uint8`` matrix first), chosen when numba compiles the caller."""

    def choose(rows, vec, out):
        first = rows.types[0]
        if isinstance(first, types.Array) and first.dtype == types.uint8:
            impl = packed_impl
        else:
            impl = dense_impl if len(rows.types) == 2 else band_impl
        return lambda rows, vec, out: impl(rows, vec, out)

    return choose


def _rows_matvec(rows, theta, out):  # pragma: no cover - replaced by the overload
    """``out = C theta`` for dense, band or packed rows."""
    raise NotImplementedError


def _rows_rmatvec(rows, w, out):  # pragma: no cover - replaced by the overload
    """``out = C^T w`` for dense, band or packed rows."""
    raise NotImplementedError


overload(_rows_matvec)(_by_row_form(_dense_matvec, _band_matvec, _packed_matvec))
overload(_rows_rmatvec)(_by_row_form(_dense_rmatvec, _band_rmatvec, _packed_rmatvec))


# ============================================================================ compiled kernels
@njit(cache=True)
def matvec(dense, indptr, indices, delta, complement, theta, out):
    """``out = C @ theta`` (U,)."""
    n_rows = out.shape[0]
    k = theta.shape[0]
    if dense is not None:  # dense, band or packed rows
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
    if dense is not None:  # dense, band or packed rows
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
