"""The instantaneous step of the unary longitudinal mechanisms, compiled (internal).

Each permanent bit ``b`` is reported 1 with probability ``p2`` if ``b = 1``, else ``q2``, all
bits independent.  One pass over the bits, no mask or scatter: bit ``i`` (row-major index
``row * k + column``) compares a uniform byte ``B_i`` with ``t = floor(256 prob)`` and is 1 iff
``B_i < t``, or, on the tie ``B_i = t`` (probability 1/256), iff a 53-bit uniform ``U_i`` is
below ``r = 256 prob - t``.  So

.. math:: \\Pr[1] = \\frac{t}{256} + \\frac{1}{256}\\,\\frac{\\lceil r 2^{53} \\rceil}{2^{53}},

which is ``prob`` up to less than ``2^-61`` (``256 prob`` is exact in float64, and
``Pr[U < r] = ceil(r 2^53) 2^-53``; :func:`~bayesldp.mechanisms._splitmix.bernoulli_threshold`).

Both come from SplitMix64 counter streams (:mod:`bayesldp.mechanisms._splitmix`): ``B_i`` is byte
``i mod 8`` of output ``i // 8 + 1`` of the stream seeded ``seed``, ``U_i`` output ``i + 1`` of
the stream seeded ``tie_seed``.  A bit's draws depend only on the two seeds and its index, so the
result does not depend on how the rows are split, and the bool and the packed (memo) layouts of
the same permanent bits give the same reports.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from bayesldp._validation import RNGLike, as_generator
from bayesldp.mechanisms._splitmix import GOLDEN, bernoulli_threshold, mix64, stream_seed

_ELEVEN = np.uint64(11)
#: byte ``b`` -> the uint64 whose byte lane ``l`` is bit ``l`` of ``b`` (0 or 1)
_SPREAD = np.array([sum(((b >> lane) & 1) << (8 * lane) for lane in range(8)) for b in range(256)],
                   dtype=np.uint64)  # fmt: skip


def _thresholds(prob: float) -> tuple[int, np.uint64]:
    """``(t, ceil(r 2^53))`` with ``256 prob = t + r``, ``t`` an integer, ``0 <= r < 1``."""
    scaled = 256.0 * prob  # exact: a product by a power of two
    t = math.floor(scaled)
    return t, bernoulli_threshold(scaled - t)


@njit(cache=True, nogil=True)
def _row(ones, row, k, seed, tie_seed, t0, u0, t1, u1, words, out):  # pragma: no cover
    """Row ``row``'s reports into ``out`` from its permanent bits ``ones`` (uint8 0/1, ``k``
    of them, maybe padded).  ``words`` (uint64, ``ceil(k / 8)``) is scratch for the bytes."""
    width = words.size
    first = np.uint64(row * width + 1)
    for g in range(width):
        words[g] = mix64(seed + (first + np.uint64(g)) * GOLDEN)
    uniform = words.view(np.uint8)
    step = np.uint8(t1 - t0)
    low = np.uint8(t0)
    tie = False
    for col in range(k):  # branch-free: vectorised
        t = low + ones[col] * step
        out[col] = uniform[col] < t
        tie |= uniform[col] == t
    if tie:  # probability 1 - (255/256)^k per row
        for col in range(k):
            t = low + ones[col] * step
            if uniform[col] == t:
                u = u1 if ones[col] else u0
                i = np.uint64(row * k + col + 1)
                out[col] = (mix64(tie_seed + i * GOLDEN) >> _ELEVEN) < u


@njit(cache=True, nogil=True)
def _from_bool(bits, seed, tie_seed, t0, u0, t1, u1, out):  # pragma: no cover - compiled
    """Reports ``out`` (bool, as ``bits``) of the bool permanent bits ``bits`` (n, k)."""
    n, k = bits.shape
    words = np.empty((k + 7) // 8, dtype=np.uint64)
    ones = bits.view(np.uint8)
    flat = out.view(np.uint8)
    for row in range(n):
        _row(ones[row], row, k, seed, tie_seed, t0, u0, t1, u1, words, flat[row])


@njit(cache=True, nogil=True)
def _from_packed(packed, k, spread, seed, tie_seed, t0, u0, t1, u1, out):  # pragma: no cover
    """Reports ``out`` (bool, (n, k)) of permanent bits packed little-endian, 8 per byte
    (``np.packbits(..., axis=1, bitorder="little")``, as a memo stores them)."""
    n, width = packed.shape
    words = np.empty(width, dtype=np.uint64)
    lanes = np.empty(width, dtype=np.uint64)
    ones = lanes.view(np.uint8)
    flat = out.view(np.uint8)
    for row in range(n):
        for g in range(width):
            lanes[g] = spread[packed[row, g]]
        _row(ones, row, k, seed, tie_seed, t0, u0, t1, u1, words, flat[row])


def instant_reports(
    permanent: np.ndarray, p2: float, q2: float, rng: RNGLike = None, *, k: int | None = None
) -> np.ndarray:
    """Reports ``(n, k)`` bool: each permanent bit reported 1 w.p. ``p2`` if set, else ``q2``.

    ``permanent`` is a bool ``(n, k)`` array, or with ``k`` given the memo's packed rows (uint8
    ``(n, ceil(k / 8))``, little-endian bit order).  Two 64-bit seeds are drawn from ``rng``.
    """
    gen = as_generator(rng)
    seed, tie_seed = stream_seed(gen), stream_seed(gen)
    t0, u0 = _thresholds(q2)
    t1, u1 = _thresholds(p2)
    if k is None:
        bits = np.ascontiguousarray(permanent, dtype=bool)
        out = np.empty(bits.shape, dtype=bool)
        _from_bool(bits, seed, tie_seed, t0, u0, t1, u1, out)
    else:
        packed = np.ascontiguousarray(permanent, dtype=np.uint8)
        out = np.empty((packed.shape[0], k), dtype=bool)
        _from_packed(packed, k, _SPREAD, seed, tie_seed, t0, u0, t1, u1, out)
    return out
