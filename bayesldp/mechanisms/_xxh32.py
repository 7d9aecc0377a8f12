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
def category_terms(xs):
    """Per category ``xs[j]`` (int64 in ``0..2^31-1``), the seed-free terms of its XXH32.

    Returns ``n_words``, ``n_tail`` (int64, (k,)), ``start = P5 + L`` (uint64, (k,)), the word
    terms ``w * P3`` (uint64, (k, 2)) and the tail terms ``b * P5`` (uint64, (k, 3)), all mod 2^32
    (see the module docstring), ``k = len(xs)``.
    """
    k = xs.shape[0]
    n_words = np.zeros(k, dtype=np.int64)
    n_tail = np.zeros(k, dtype=np.int64)
    start = np.zeros(k, dtype=np.uint64)
    word_terms = np.zeros((k, 2), dtype=np.uint64)
    tail_terms = np.zeros((k, 3), dtype=np.uint64)
    digits = np.zeros(_MAX_DIGITS, dtype=np.uint8)
    for x in range(k):
        length = _decimal(xs[x], digits)
        start[x] = (_P5 + np.uint64(length)) & _MASK
        n_words[x], n_tail[x] = length // 4, length % 4
        for w in range(length // 4):
            word = np.uint64(0)
            for j in range(4):
                word |= np.uint64(digits[4 * w + j]) << np.uint64(8 * j)
            word_terms[x, w] = (word * _P3) & _MASK
        for t in range(length % 4):
            tail_terms[x, t] = (np.uint64(digits[4 * (length // 4) + t]) * _P5) & _MASK
    return n_words, n_tail, start, word_terms, tail_terms


@njit(cache=True)
def hits_by_category(seeds, y, g, n_words, n_tail, start, word_terms, tail_terms, hits, stat):
    """``hits[j, i] = (xxh32(str(xs[j]), seeds[i]) mod g == y[i])``; ``stat[j]`` adds the hits.

    ``seeds``, ``y`` and ``g`` are uint64, the terms from :func:`category_terms` of the
    categories ``xs``, ``hits`` a (k, n) bool array.  Categories outside, users inside: the inner
    loop is straight-line arithmetic on one category's constants (the branches on its length are
    loop-invariant).
    """
    mask_g = g - np.uint64(1)
    power_of_two = (g & mask_g) == 0
    for x in range(n_words.shape[0]):
        a, w0, w1 = start[x], word_terms[x, 0], word_terms[x, 1]
        t0, t1, t2 = tail_terms[x, 0], tail_terms[x, 1], tail_terms[x, 2]
        nw, nt = n_words[x], n_tail[x]
        count = 0
        for i in range(seeds.shape[0]):
            h = (seeds[i] + a) & _MASK
            if nw > 0:
                h = (_rotl((h + w0) & _MASK, 17) * _P4) & _MASK
            if nw > 1:
                h = (_rotl((h + w1) & _MASK, 17) * _P4) & _MASK
            if nt > 0:
                h = (_rotl((h + t0) & _MASK, 11) * _P1) & _MASK
            if nt > 1:
                h = (_rotl((h + t1) & _MASK, 11) * _P1) & _MASK
            if nt > 2:
                h = (_rotl((h + t2) & _MASK, 11) * _P1) & _MASK
            h ^= h >> np.uint64(15)
            h = (h * _P2) & _MASK
            h ^= h >> np.uint64(13)
            h = (h * _P3) & _MASK
            h ^= h >> np.uint64(16)
            hit = ((h & mask_g) if power_of_two else (h % g)) == y[i]
            hits[x, i] = hit
            count += hit
        stat[x] += count
