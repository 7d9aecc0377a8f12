"""Count-mean-sketch reports packed one bit per entry (internal kernels and checks).

A CMS report's ``m`` entries are each -1 or +1 (:class:`~bayesldp.mechanisms.sketch.CMS`), so
one bit holds one: entry ``u`` of report ``i`` is bit ``u & 7`` (least significant first) of
byte ``u >> 3`` of row ``i``, 1 for +1 and 0 for -1, ``ceil(m / 8)`` bytes a report: exactly
``np.packbits(bits > 0, axis=1, bitorder="little")``, the order the package's other packed
arrays use (``likelihood_packed``, RAPPOR's memo).  The ``8 ceil(m/8) - m`` padding bits of
the last byte are 0, so a byte's bits can be read without masking.

Why: at Apple's ``m = 1024`` an int8 report is 1 KB and SFP at a million users writes 800 MB
(``benchmarks/investigations/sfp_client_memory.py``: first touch of that memory 1.80 s in its int8
run, the results file as committed at 4074867; 0.19 s for the packed reports in the current file);
packed it is 128 bytes a report.  The client writes the packed bytes directly from the same
SplitMix64 stream as the int8 client (:func:`cms_packed`), and the readers take one bit per look-up,
so nothing builds the ``n x m`` entries.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms._splitmix import GOLDEN, mix64


def packed_width(m: int) -> int:
    """Bytes of one packed report of ``m`` entries, ``ceil(m / 8)``."""
    return (int(m) + 7) // 8


def pack_signs(bits: np.ndarray) -> np.ndarray:
    """``(n, m)`` entries of -1/+1 as ``(n, ceil(m/8))`` uint8, bit ``u & 7`` of byte ``u >> 3``
    set where entry ``u`` is +1."""
    return np.packbits(np.asarray(bits) > 0, axis=1, bitorder="little")


def unpack_signs(packed: np.ndarray, m: int) -> np.ndarray:
    """The ``(n, m)`` int8 entries (-1 or +1) of packed reports (:func:`pack_signs` inverted)."""
    out = np.unpackbits(np.asarray(packed), axis=1, count=int(m), bitorder="little").view(np.int8)
    out <<= 1
    out -= 1  # 0 -> -1, 1 -> +1, in place (no second n x m array)
    return out


def check_packed(packed: object, n: int, m: int, own_m: int) -> np.ndarray:
    """Packed reports of ``n`` users of a width-``m`` sketch: uint8 of shape ``(n, ceil(m/8))``
    made for ``m`` entries (``own_m``), padding bits 0; one-line errors otherwise."""
    if own_m != m:
        raise InvalidInputError(
            f"reports.m: the packed reports hold m = {own_m} entries each, this sketch has m = {m}"
        )
    arr = np.asarray(packed)
    if arr.dtype != np.uint8:
        raise InvalidTypeError(
            f"reports.packed: expected uint8 (8 entries a byte, np.packbits), got {arr.dtype}"
        )
    width = packed_width(m)
    if arr.shape != (n, width):
        raise InvalidInputError(
            f"reports.packed: expected shape ({n}, {width}) (ceil(m/8) bytes for m = {m} "
            f"entries per report), got {arr.shape}"
        )
    if m % 8 and n:
        pad = np.uint8((0xFF << (m % 8)) & 0xFF)
        bad = np.flatnonzero(arr[:, -1] & pad)
        if bad.size:
            i = int(bad[0])
            raise InvalidInputError(
                f"reports.packed: report {i} sets padding bits (last byte {arr[i, -1]:#04x}; "
                f"its bits {m % 8}..7, past entry m - 1 = {m - 1}, must be 0)"
            )
    return arr


@njit(cache=True)
def _cms_packed(x, rows, hashes, m, seed, threshold, out):  # pragma: no cover - compiled
    """The packed form of ``sketch._cms_bits``: entry ``u`` of user ``i`` is +1 (bit set) when
    its SplitMix64 draw ``(u >> 11) < threshold`` (a flipped -1), the ``(i m + u + 1)``-th
    state of the stream as there; then the bit of ``hashes[rows[i], x[i]]`` is flipped (the
    one-hot +1).  A user's draws go to an ``m``-byte buffer first (in cache; the loop
    vectorises as the int8 one does), then eight at a time into a byte."""
    n, width = out.shape
    buf = np.zeros(8 * width, np.uint8)  # entries past m stay 0: the padding bits
    step = np.uint64(m) * GOLDEN
    for i in range(n):
        state = seed + np.uint64(i) * step
        for u in range(m):
            state += GOLDEN
            buf[u] = (mix64(state) >> np.uint64(11)) < threshold
        for c in range(width):
            byte = 0
            for t in range(8):
                byte |= buf[8 * c + t] << t
            out[i, c] = byte
        h = hashes[rows[i], x[i]]
        out[i, h >> 3] ^= np.uint8(1 << (h & 7))


def cms_packed(
    x: np.ndarray, rows: np.ndarray, hashes: np.ndarray, m: int, seed: int, threshold: int
) -> np.ndarray:
    """CMS entries of users ``x`` (hash rows ``rows``), packed: ``(n, ceil(m/8))`` uint8 equal
    to :func:`pack_signs` of ``sketch._cms_bits`` on the same arguments, bit for bit."""
    out = np.empty((x.shape[0], packed_width(m)), dtype=np.uint8)
    _cms_packed(x, rows, hashes, np.int64(m), seed, threshold, out)
    return out


@njit(cache=True)
def cms_support_packed(rows, packed, hashes, out):  # pragma: no cover - compiled
    """``out[i, x] = [v_i[h_{rows_i}(x)] = +1]``: bit ``h & 7`` of byte ``h >> 3``."""
    n, k = out.shape
    for i in range(n):
        r = rows[i]
        for x in range(k):
            h = hashes[r, x]
            out[i, x] = (packed[i, h >> 3] >> (h & 7)) & 1
