"""Compiled reading of OLH and count-mean-sketch reports against candidate values (internal).

A report ``(a, b, y)`` supports the candidate ``v`` iff ``h_{a,b}(v) = ((a v + b) mod P) mod g
= y`` (:class:`bayesldp.heavy_hitters.CandidateOLH`, ``P = 2^31 - 1``).  The numpy reading
evaluates that hash for every (candidate, user) pair in several passes over temporaries; these
kernels make one pass per candidate over a block of users held in cache (the count) or one pass
per user over the candidates (the support matrix, written row by row), with no temporaries, and
give the same hash values exactly:

* ``x mod P`` of ``t = a v + b < 2^62 + 2^31`` by two folds ``t = (t & P) + (t >> 31)`` (as
  ``2^31 = 1 mod P``) and one conditional subtraction;
* ``x mod g`` for ``x < 2^31`` by the reciprocal ``M = ceil(2^(31+l) / g)``, ``l =
  ceil(log2 g)``: ``floor(x / g) = (x M) >> (31 + l)`` (Granlund and Montgomery, PLDI 1994,
  theorem 4.2: ``M g - 2^(31+l) < g <= 2^l``), then one conditional correction.

:func:`bucket_counts` is the count-mean sketch's side (SFP's fragments,
:class:`~bayesldp.heavy_hitters.CandidateCMS`): the +1 entries of every (group, hash row,
bucket) in one pass over the ``n x m`` report entries, from which each group's support counts
are ``k_hash x K`` look-ups; :func:`packed_bucket_counts` the same from reports packed one bit
per entry.

Callers check the reports first (``1 <= a < P``, ``0 <= b < P``, ``0 <= y < g``, candidate
values in ``0..P-1``, ``2 <= g <= P``): the loops do not.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_P = np.int64((1 << 31) - 1)
_USER_BLOCK = 2048  # users per block of the count: their a, b, y (48 KB) stay in cache


def reciprocal(g: int) -> tuple[int, int]:
    """``(M, s)`` with ``floor(x / g) = (x M) >> s`` for every ``0 <= x < 2^31`` (``g >= 1``)."""
    ell = max(0, (int(g) - 1).bit_length())  # ceil(log2 g)
    s = 31 + ell
    return -(-(1 << s) // int(g)), s


@njit(cache=True, nogil=True, error_model="numpy")
def _mod_p(t):  # pragma: no cover - compiled
    """``t mod (2^31 - 1)`` for ``0 <= t < 2^63``."""
    t = (t & _P) + (t >> 31)
    t = (t & _P) + (t >> 31)
    return t - _P if t >= _P else t


@njit(cache=True, nogil=True, error_model="numpy")
def _mod_g(x, g, mult, shift):  # pragma: no cover - compiled
    """``x mod g`` for ``0 <= x < 2^31`` through the reciprocal ``(mult, shift)``."""
    r = x - ((x * mult) >> shift) * g
    return r - g if r >= g else r


@njit(cache=True, nogil=True, error_model="numpy")
def _hash(a, b, v, g, mult, shift):  # pragma: no cover - compiled
    """``((a v + b) mod P) mod g``."""
    return _mod_g(_mod_p(a * v + b), g, mult, shift)


@njit(cache=True, nogil=True, error_model="numpy")
def _hits(a, b, y, v, g, mult, shift):  # pragma: no cover - compiled
    """How many of these users' reports support the candidate ``v`` (vectorised over them)."""
    hit = 0
    for i in range(y.shape[0]):
        hit += _hash(a[i], b[i], v, g, mult, shift) == y[i]
    return hit


@njit(cache=True, nogil=True, error_model="numpy")
def _counts(a, b, y, values, g, mult, shift):  # pragma: no cover - compiled
    """Hits per candidate, over blocks of users (a candidate's pass reads the block from cache)."""
    m, n = values.shape[0], y.shape[0]
    counts = np.zeros(m, np.int64)
    for start in range(0, n, _USER_BLOCK):
        stop = min(n, start + _USER_BLOCK)
        ab, bb, yb = a[start:stop], b[start:stop], y[start:stop]
        for j in range(m):
            counts[j] += _hits(ab, bb, yb, values[j], g, mult, shift)
    return counts


@njit(cache=True, nogil=True, error_model="numpy")
def _matrix(a, b, y, values, g, mult, shift, support):  # pragma: no cover - compiled
    """``support[i, j]``, one row (user) at a time, vectorised over the candidates."""
    m = values.shape[0]
    counts = np.zeros(m, np.int64)
    for i in range(y.shape[0]):
        ai, bi, yi = a[i], b[i], y[i]
        for j in range(m):
            hit = _hash(ai, bi, values[j], g, mult, shift) == yi
            support[i, j] = hit
            counts[j] += hit
    return counts


def _args(a, b, y, values, g):  # type: ignore[no-untyped-def]
    mult, shift = reciprocal(g)
    arrays = (np.ascontiguousarray(arr, dtype=np.int64) for arr in (a, b, y, values))
    return (*arrays, np.int64(g), np.int64(mult), np.int64(shift))


def support_counts(
    a: np.ndarray, b: np.ndarray, y: np.ndarray, values: np.ndarray, g: int
) -> np.ndarray:
    """``counts[j] = #{i : ((a_i values[j] + b_i) mod P) mod g = y_i}`` (int64)."""
    return _counts(*_args(a, b, y, values, g))


def support_matrix(
    a: np.ndarray, b: np.ndarray, y: np.ndarray, values: np.ndarray, g: int, out: np.ndarray
) -> np.ndarray:
    """Fill the ``(n, m)`` bools ``out[i, j] = (h_i(values[j]) = y_i)`` (C-contiguous) and
    return their column sums (int64)."""
    return _matrix(*_args(a, b, y, values, g), out)


@njit(cache=True, nogil=True)
def _buckets(group, rows, bits, n_groups, k_hash):  # pragma: no cover - compiled
    n, m = bits.shape
    out = np.zeros((n_groups, k_hash, m), np.int64)
    for i in range(n):
        acc = out[group[i], rows[i]]
        for u in range(m):
            acc[u] += bits[i, u] > 0
    return out


def bucket_counts(
    group: np.ndarray, rows: np.ndarray, bits: np.ndarray, n_groups: int, k_hash: int
) -> np.ndarray:
    """Count-mean-sketch reports ``(rows[i], bits[i])`` of users in groups ``group[i]``:
    ``out[c, j, u] = #{i : group_i = c, rows_i = j, bits[i, u] = +1}``, int64 of shape
    ``(n_groups, k_hash, m)``, in one pass over the ``(n, m)`` entries."""
    group = np.ascontiguousarray(group, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return _buckets(group, rows, np.ascontiguousarray(bits), int(n_groups), int(k_hash))


@njit(cache=True, nogil=True)
def _packed_buckets(group, rows, packed, n_groups, k_hash):  # pragma: no cover - compiled
    """Each user's bytes unpacked into an ``8 ceil(m/8)``-byte buffer (in cache), then added to
    its (group, row) counts in one vectorised loop, as :func:`_buckets` adds int8 entries."""
    n, width = packed.shape
    out = np.zeros((n_groups, k_hash, 8 * width), np.int64)
    buf = np.empty(8 * width, np.uint8)
    for i in range(n):
        acc = out[group[i], rows[i]]
        for c in range(width):
            byte = packed[i, c]
            for t in range(8):
                buf[8 * c + t] = (byte >> t) & 1
        for u in range(8 * width):
            acc[u] += buf[u]
    return out


def packed_bucket_counts(
    group: np.ndarray, rows: np.ndarray, packed: np.ndarray, m: int, n_groups: int, k_hash: int
) -> np.ndarray:
    """:func:`bucket_counts` of packed reports (``packed[i]``: ``ceil(m/8)`` uint8, entry ``u``
    the bit ``u & 7`` of byte ``u >> 3``, padding bits 0, as
    :class:`~bayesldp.mechanisms.sketch.CMSReports` holds them): the same counts, read one bit
    at a time from the ``n ceil(m/8)`` bytes (an eighth of the int8 entries' memory), never
    unpacked."""
    group = np.ascontiguousarray(group, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = _packed_buckets(group, rows, np.ascontiguousarray(packed, dtype=np.uint8),
                          int(n_groups), int(k_hash))  # fmt: skip
    return out[:, :, : int(m)]
