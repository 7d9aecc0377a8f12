"""XXH32 of a category's decimal string, compiled with numba (internal).

pure-ldp (``LHClient``) and multi-freq-ldpy (``LH_Client``) hash a user's value ``x`` as
``xxhash.xxh32(str(x), seed=s).intdigest() % g``: the bytes hashed are the ASCII decimal digits of
``x`` (python-xxhash < 4 encodes a ``str`` as UTF-8; digits are ASCII), and python-xxhash keeps
only ``s mod 2^32`` of the seed.  This module computes the same 32-bit digest without the xxhash
package, vectorised over users.

XXH32 (Yann Collet, xxHash specification ``doc/xxhash_spec.md``, version 0.8) of an input of
``L < 16`` bytes with seed ``s``, all arithmetic mod ``2^32``::

    h = s + P5 + L
    for each 4-byte little-endian word w:  h = rotl(h + w * P3, 17) * P4
    for each remaining byte b:             h = rotl(h + b * P5, 11) * P1
    h ^= h >> 15;  h *= P2;  h ^= h >> 13;  h *= P3;  h ^= h >> 16

Categories are below ``2^31``, so their decimal strings have at most 10 bytes and the long-input
path (16 bytes or more) is never needed.  Arithmetic is done in uint64 and masked to 32 bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_P1 = np.uint64(2654435761)
_P2 = np.uint64(2246822519)
_P3 = np.uint64(3266489917)
_P4 = np.uint64(668265263)
_P5 = np.uint64(374761393)
_MASK = np.uint64(0xFFFFFFFF)
_MAX_DIGITS = 10  # categories below 2^31 have at most 10 decimal digits


@njit(cache=True)
def _rotl(h, r):
    return ((h << np.uint64(r)) | (h >> np.uint64(32 - r))) & _MASK


@njit(cache=True)
def xxh32_short(data, length, seed):
    """XXH32 of ``data[:length]`` (uint8, ``length < 16``) with a uint64 ``seed < 2^32``."""
    h = (seed + _P5 + np.uint64(length)) & _MASK
    i = 0
    while i + 4 <= length:
        word = np.uint64(0)
        for j in range(4):
            word |= np.uint64(data[i + j]) << np.uint64(8 * j)
        h = (_rotl((h + word * _P3) & _MASK, 17) * _P4) & _MASK
        i += 4
    while i < length:
        h = (_rotl((h + np.uint64(data[i]) * _P5) & _MASK, 11) * _P1) & _MASK
        i += 1
    h ^= h >> np.uint64(15)
    h = (h * _P2) & _MASK
    h ^= h >> np.uint64(13)
    h = (h * _P3) & _MASK
    h ^= h >> np.uint64(16)
    return h


@njit(cache=True)
def _decimal(x, out):
    """Write the ASCII decimal digits of ``x >= 0`` into ``out``; return their number."""
    n_digits = 1
    rest = x // 10
    while rest > 0:
        n_digits += 1
        rest //= 10
    for j in range(n_digits - 1, -1, -1):
        out[j] = 48 + x % 10
        x //= 10
    return n_digits


@njit(cache=True)
def hash_values(seeds, x):
    """``xxh32(str(x[i]), seed=seeds[i])`` for every ``i`` (uint64 seeds below ``2^32``)."""
    out = np.empty(seeds.shape[0], dtype=np.uint64)
    digits = np.empty(_MAX_DIGITS, dtype=np.uint8)
    for i in range(seeds.shape[0]):
        length = _decimal(x[i], digits)
        out[i] = xxh32_short(digits, length, seeds[i])
    return out


@njit(cache=True)
def support_matrix(seeds, y, g, k, support, stat):
    """``support[i, x] = (xxh32(str(x), seeds[i]) mod g == y[i])``; ``stat[x]`` counts hits.

    ``seeds``, ``y`` and ``g`` are uint64; ``support`` is a (n, k) bool array, ``stat`` (k,)
    int64 (added to).  The digits of every category are written once.
    """
    digits = np.zeros((k, _MAX_DIGITS), dtype=np.uint8)
    lengths = np.empty(k, dtype=np.int64)
    for x in range(k):
        lengths[x] = _decimal(x, digits[x])
    for i in range(seeds.shape[0]):
        seed, target = seeds[i], y[i]
        for x in range(k):
            hit = xxh32_short(digits[x], lengths[x], seed) % g == target
            support[i, x] = hit
            if hit:
                stat[x] += 1
