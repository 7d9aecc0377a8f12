"""Packed rows: the ``"packed"`` row form of :class:`bayesldp.likelihood.Likelihood`.

Support-form rows ``C = delta M`` (``M`` a 0/1 matrix, U x K: unary encodings, local hashing,
Hadamard response, subset selection) stored as bits, ``B = ceil(K / 8)`` bytes per row
(:func:`pack_rows`: bit ``j`` of byte ``b`` is ``M[u, 8 b + j]``), and multiplied through byte
tables (the "method of four Russians" for 0/1 matrices, bytes for quarters):

* ``C theta``: per product a table ``T[b, v] = sum_{j: bit j of v} theta[8 b + j]`` for every
  byte position ``b`` and byte value ``v`` (built incrementally, ``T[b, v] = T[b, v - 2^j] +
  theta[8 b + j]`` for ``2^j <= v < 2^(j + 1)``: 255 additions per byte position), then
  ``(C theta)_u = delta sum_b T[b, packed[u, b]]``;
* ``C^T w``: ``W[b, v] = sum_{u: packed[u, b] = v} w_u`` (one pass over the rows into a B x 256
  table, in cache), then ``(C^T w)_{8 b + j} = delta sum_{v: bit j of v} W[b, v]`` (by halving:
  the entries with the top bit set are summed, then folded onto those without it).

Each product is ``U B`` table reads plus ``O(256 B)`` for the tables, whatever the density of
``M`` (the compressed rows read ``nnz``).  The kernels take the tuple ``(packed, delta)`` in the
compiled kernels' first ("dense") slot (:mod:`bayesldp.likelihood_kernels`), told from the dense
pair and the band tuple by its ``uint8`` first element when numba compiles the caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Table rows 264 entries apart, not 256: a precaution (not measured on its own) against rows a
# power-of-two distance apart aliasing in the store buffer ("4K aliasing"), which would
# serialise the scatters of C^T w into W[b, 0] when most bytes are 0.
_STRIDE = 264


def pack_rows(mask: np.ndarray) -> np.ndarray:
    """The 0/1 matrix ``mask`` (U, K) as bytes (U, ceil(K / 8)), bit ``j`` of byte ``b`` holding
    column ``8 b + j`` (little bit order; the last byte's bits past K are 0)."""
    return np.ascontiguousarray(np.packbits(mask, axis=1, bitorder="little"))


@njit(cache=True)
def _packed_matvec(packed, theta, out):
    """``out = delta M theta`` from the byte tables ``T`` (module docstring).  Within a byte the
    columns are added in ascending order, as the compressed rows add them; across bytes the
    row's sum is the bytes' partial sums added in order (equal to the compressed rows' sum to
    rounding)."""
    bits, delta = packed
    n_rows, n_bytes = bits.shape
    k = theta.shape[0]
    table = np.empty((n_bytes, _STRIDE))
    for b in range(n_bytes):
        table[b, 0] = 0.0
        for j in range(8):
            x = 8 * b + j
            t = theta[x] if x < k else 0.0
            low = 1 << j
            for v in range(low, 2 * low):
                table[b, v] = table[b, v - low] + t
    for u in range(n_rows):
        s = 0.0
        for b in range(n_bytes):
            s += table[b, bits[u, b]]
        out[u] = delta * s


@njit(cache=True)
def _packed_rmatvec(packed, w, out):
    """``out = delta M^T w`` from the table ``W`` of the weights summed by byte value (module
    docstring): bit ``j`` of byte ``b`` sums ``W[b, v]`` over the 128 values ``v`` with that bit,
    by halving (sum the upper half, fold it onto the lower: 510 additions per byte)."""
    bits, delta = packed
    n_rows, n_bytes = bits.shape
    k = out.shape[0]
    table = np.zeros((n_bytes, _STRIDE))
    for u in range(n_rows):
        wu = w[u]
        for b in range(n_bytes):
            table[b, bits[u, b]] += wu
    for b in range(n_bytes):
        size = 256
        for j in range(7, -1, -1):
            half = size >> 1
            s = 0.0
            for v in range(half, size):
                s += table[b, v]
                table[b, v - half] += table[b, v]
            x = 8 * b + j
            if x < k:
                out[x] = delta * s
            size = half
