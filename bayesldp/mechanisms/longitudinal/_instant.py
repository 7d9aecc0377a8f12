"""The instantaneous step of the unary longitudinal mechanisms, compiled (internal).

Each permanent bit ``b`` is reported 1 with probability ``p2`` if ``b = 1``, else ``q2``, all
bits independent.  One pass over the bits, no mask or scatter: bit ``(r, c)`` (row ``r``,
column ``c``) compares a uniform 16-bit integer ``V`` with ``t = floor(2^16 prob)`` and is 1 iff
``V < t``, or, on the tie ``V = t`` (probability ``2^-16``), iff a 53-bit uniform ``U`` is below
``s = 2^16 prob - t``.  So

.. math:: \\Pr[1] = \\frac{t}{2^{16}} + \\frac{\\lceil s 2^{53} \\rceil}{2^{16} \\cdot 2^{53}},

which is ``prob`` up to less than ``2^-69`` (``2^16 prob`` is exact in float64, and
``Pr[U < s] = ceil(s 2^53) 2^-53``; :func:`~bayesldp.mechanisms._splitmix.bernoulli_threshold`).
The comparison is branch-free (it vectorises); a row with a tie, about one in 650 at k = 100,
is passed over once more.

Both come from SplitMix64 counter streams (:mod:`bayesldp.mechanisms._splitmix`): with
``w = ceil(k / 4)`` outputs per row, the ``V`` of row ``r`` are the 16-bit quarters of outputs
``r w + 1 .. r w + w`` of the stream seeded ``seed`` (little-endian: column ``c`` quarter
``c``), and ``U`` of bit ``(r, c)`` is output ``r k + c + 1`` of the stream seeded
``tie_seed``.  A bit's draws depend only on the two seeds and its position, so the bool and the
packed (memo) layouts of the same permanent bits give the same reports.

A first round (:func:`first_round`) draws the permanent bits the same way, bit ``x`` of a row at
``p1`` and the others at ``q1`` (two more seeds), packs them as a memo stores them and reports
them in the same pass: the reports are those :func:`instant_reports` gives for the packed rows
with the last two seeds, and no ``(n, k)`` array of permanent bits is made.
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
    """``(t, ceil(s 2^53))`` with ``2^16 prob = t + s``, ``t`` an integer, ``0 <= s < 1``."""
    scaled = 65536.0 * prob  # exact: a product by a power of two
    t = math.floor(scaled)
    return t, bernoulli_threshold(scaled - t)


@njit(cache=True, nogil=True)
def _row(ones, row, k, seed, tie_seed, t0, u0, t1, u1, words, out):  # pragma: no cover
    """Row ``row``'s reports into ``out`` from its permanent bits ``ones`` (uint8 0/1, ``k``
    of them, maybe padded).  ``words`` (uint64, ``ceil(k / 4)``) is scratch for the uniforms."""
    width = words.size
    first = np.uint64(row * width + 1)
    for g in range(width):
        words[g] = mix64(seed + (first + np.uint64(g)) * GOLDEN)
    uniform = words.view(np.uint16)
    step = np.uint16(t1 - t0)
    low = np.uint16(t0)
    tie = False
    for col in range(k):  # branch-free: vectorised
        t = np.uint16(low + ones[col] * step)
        out[col] = uniform[col] < t
        tie |= uniform[col] == t
    if tie:  # probability 1 - (1 - 2^-16)^k per row
        for col in range(k):
            t = np.uint16(low + ones[col] * step)
            if uniform[col] == t:
                u = u1 if ones[col] else u0
                i = np.uint64(row * k + col + 1)
                out[col] = (mix64(tie_seed + i * GOLDEN) >> _ELEVEN) < u


@njit(cache=True, nogil=True)
def _first_round(x, k, perm, instant, packed, out):  # pragma: no cover - compiled
    """Row ``r``'s permanent bits (bit ``x[r]`` drawn by ``_row`` at level 1, the others at
    level 0, with ``perm = (seed, tie_seed, t0, u0, t1, u1)`` of ``(q1, p1)``) packed into
    ``packed[r]``, and their reports (``instant``, of ``(q2, p2)``) into ``out[r]``."""
    n, width = packed.shape
    words = np.empty((k + 3) // 4, dtype=np.uint64)
    hot = np.zeros(8 * width, dtype=np.uint8)  # the one-hot row of x: the levels of its bits
    bits = np.zeros(width, dtype=np.uint64)  # the permanent bits, one per byte lane
    ones = bits.view(np.uint8)
    flat = out.view(np.uint8)
    gather = np.uint64(0x0102040810204080)  # lane l's bit to bit 56 + l, no carries
    top = np.uint64(56)
    for row in range(n):
        hot[x[row]] = 1
        _row(hot, row, k, perm[0], perm[1], perm[2], perm[3], perm[4], perm[5], words, ones)
        hot[x[row]] = 0
        for g in range(width):
            packed[row, g] = (bits[g] * gather) >> top
        _row(ones, row, k, *instant, words, flat[row])


@njit(cache=True, nogil=True)
def _from_bool(bits, seed, tie_seed, t0, u0, t1, u1, out):  # pragma: no cover - compiled
    """Reports ``out`` (bool, as ``bits``) of the bool permanent bits ``bits`` (n, k)."""
    n, k = bits.shape
    words = np.empty((k + 3) // 4, dtype=np.uint64)
    ones = bits.view(np.uint8)
    flat = out.view(np.uint8)
    for row in range(n):
        _row(ones[row], row, k, seed, tie_seed, t0, u0, t1, u1, words, flat[row])


@njit(cache=True, nogil=True)
def _from_packed(packed, k, spread, seed, tie_seed, t0, u0, t1, u1, out):  # pragma: no cover
    """Reports ``out`` (bool, (n, k)) of permanent bits packed little-endian, 8 per byte
    (``np.packbits(..., axis=1, bitorder="little")``, as a memo stores them)."""
    n, width = packed.shape
    words = np.empty((k + 3) // 4, dtype=np.uint64)
    lanes = np.empty(width, dtype=np.uint64)
    ones = lanes.view(np.uint8)
    flat = out.view(np.uint8)
    for row in range(n):
        for g in range(width):
            lanes[g] = spread[packed[row, g]]
        _row(ones, row, k, seed, tie_seed, t0, u0, t1, u1, words, flat[row])


def _stream(gen: np.random.Generator, low: float, high: float) -> tuple:
    """Two seeds from ``gen`` and the thresholds of the probabilities ``low < high``."""
    seed, tie_seed = stream_seed(gen), stream_seed(gen)
    return (seed, tie_seed, *_thresholds(low), *_thresholds(high))


def first_round(
    x: np.ndarray, k: int, p1: float, q1: float, p2: float, q2: float, rng: RNGLike = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(packed, reports)``: fresh permanent unary bits of ``x`` (bit ``x`` 1 w.p. ``p1``,
    the others ``q1``), packed as a memo stores them (uint8 ``(n, ceil(k / 8))``), and one
    round's reports of them (bool ``(n, k)``, at ``p2`` / ``q2``).  Four seeds from ``rng``."""
    gen = as_generator(rng)
    perm, instant = _stream(gen, q1, p1), _stream(gen, q2, p2)
    x = np.ascontiguousarray(x, dtype=np.int64)
    packed = np.empty((x.size, (k + 7) // 8), dtype=np.uint8)
    out = np.empty((x.size, k), dtype=bool)
    _first_round(x, k, perm, instant, packed, out)
    return packed, out


def instant_reports(
    permanent: np.ndarray, p2: float, q2: float, rng: RNGLike = None, *, k: int | None = None
) -> np.ndarray:
    """Reports ``(n, k)`` bool: each permanent bit reported 1 w.p. ``p2`` if set, else ``q2``.

    ``permanent`` is a bool ``(n, k)`` array, or with ``k`` given the memo's packed rows (uint8
    ``(n, ceil(k / 8))``, little-endian bit order).  Two 64-bit seeds are drawn from ``rng``.
    """
    seed, tie_seed, t0, u0, t1, u1 = _stream(as_generator(rng), q2, p2)
    if k is None:
        bits = np.ascontiguousarray(permanent, dtype=bool)
        out = np.empty(bits.shape, dtype=bool)
        _from_bool(bits, seed, tie_seed, t0, u0, t1, u1, out)
    else:
        packed = np.ascontiguousarray(permanent, dtype=np.uint8)
        out = np.empty((packed.shape[0], k), dtype=bool)
        _from_packed(packed, k, _SPREAD, seed, tie_seed, t0, u0, t1, u1, out)
    return out
