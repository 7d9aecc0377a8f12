"""Keyed BLAKE2b-64 of many short byte strings, compiled (internal).

RFC 7693 (Saarinen and Aumasson, 2015), the hash ``hashlib.blake2b(data, key=key,
digest_size=8)`` computes, bit for bit, for a batch of messages held back to back in one
``uint8`` buffer: the parameter block (digest length 8, key length ``kk``, fan-out and depth 1)
is folded into the IV; a non-empty key, zero-padded to 128 bytes, is the first block, so its
compression is the same for every message and is done once; each message then costs
``ceil(len / 128)`` compressions (one for the short items of
:class:`~bayesldp.heavy_hitters.ItemEncoder`), the last one flagged final with the byte counter
``t = 128 [kk > 0] + len``.  An empty message with a key is the key block alone, final.

:func:`keyed_codes` returns, per message, the top ``bits`` bits of the 8-byte digest read
big-endian (the digest is ``h_0`` written little-endian, so its big-endian value is
``bswap(h_0)``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_IV = np.array(
    [0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
     0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179],
    dtype=np.uint64,
)  # fmt: skip
_DIGEST = 8
_BLOCK = 128


@njit(cache=True, nogil=True)
def _rotr(x, n):  # pragma: no cover - compiled
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@njit(cache=True, nogil=True, inline="always")
def _mix(a, b, c, d, x, y):  # pragma: no cover - compiled
    """RFC 7693's G, on values (the state stays in registers)."""
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@njit(cache=True, nogil=True, inline="always")
def _round(  # pragma: no cover - compiled
    v, m, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15
):
    """One of RFC 7693's rounds on the working vector ``v`` (16-tuple), the message words taken
    in the order ``s`` (a row of its SIGMA).  Inlined with literal ``s``: every index into
    ``m`` is a constant and the words stay in registers (a loop over SIGMA's rows, reading
    ``m`` through an index array, took 1.4x as long)."""
    v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15 = v
    v0, v4, v8, v12 = _mix(v0, v4, v8, v12, m[s0], m[s1])
    v1, v5, v9, v13 = _mix(v1, v5, v9, v13, m[s2], m[s3])
    v2, v6, v10, v14 = _mix(v2, v6, v10, v14, m[s4], m[s5])
    v3, v7, v11, v15 = _mix(v3, v7, v11, v15, m[s6], m[s7])
    v0, v5, v10, v15 = _mix(v0, v5, v10, v15, m[s8], m[s9])
    v1, v6, v11, v12 = _mix(v1, v6, v11, v12, m[s10], m[s11])
    v2, v7, v8, v13 = _mix(v2, v7, v8, v13, m[s12], m[s13])
    v3, v4, v9, v14 = _mix(v3, v4, v9, v14, m[s14], m[s15])
    return v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15


@njit(cache=True, nogil=True)
def _compress(h, m, t, last):  # pragma: no cover - compiled
    """RFC 7693's F on the state ``h`` (8 uint64), block words ``m`` (16 uint64), counter
    ``t < 2^64``: 12 rounds with SIGMA's rows 0..9, 0, 1 spelled out."""
    v = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], _IV[0], _IV[1], _IV[2], _IV[3],
         _IV[4] ^ np.uint64(t), _IV[5], ~_IV[6] if last else _IV[6], _IV[7])  # fmt: skip
    v = _round(v, m, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    v = _round(v, m, 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3)
    v = _round(v, m, 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4)
    v = _round(v, m, 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8)
    v = _round(v, m, 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13)
    v = _round(v, m, 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9)
    v = _round(v, m, 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11)
    v = _round(v, m, 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10)
    v = _round(v, m, 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5)
    v = _round(v, m, 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0)
    v = _round(v, m, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    v = _round(v, m, 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3)
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(cache=True, nogil=True)
def _bswap(x):  # pragma: no cover - compiled
    out = np.uint64(0)
    for _ in range(8):
        out = (out << np.uint64(8)) | (x & np.uint64(0xFF))
        x >>= np.uint64(8)
    return out


@njit(cache=True, nogil=True)
def _codes(buf, offsets, key_block, key_length, bits):  # pragma: no cover - compiled
    n = offsets.shape[0] - 1
    out = np.empty(n, np.int64)
    block = np.zeros(_BLOCK, np.uint8)
    words = block.view(np.uint64)  # little-endian words (x86, aarch64)
    key_words = key_block.view(np.uint64)
    start = _IV.copy()
    start[0] ^= np.uint64(0x01010000 | (key_length << 8) | _DIGEST)  # int64 arithmetic
    keyed = start.copy()
    if key_length > 0:
        _compress(keyed, key_words, _BLOCK, False)
    h = np.empty(8, np.uint64)
    shift = np.uint64(64 - bits)  # int64 arithmetic, then one cast
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        length = hi - lo
        if key_length > 0 and length == 0:
            h[:] = start
            _compress(h, key_words, _BLOCK, True)
        else:
            h[:] = keyed if key_length > 0 else start
            t = _BLOCK if key_length > 0 else 0
            pos = lo
            while True:  # at least one block (an empty message without a key: one of zeros)
                take = min(_BLOCK, hi - pos)
                for j in range(take):
                    block[j] = buf[pos + j]
                pos += take
                t += take
                _compress(h, words, t, pos == hi)
                for j in range(take):  # zero again: the next block's tail must be zeros
                    block[j] = 0
                if pos == hi:
                    break
        out[i] = np.int64(_bswap(h[0]) >> shift)
    return out


def pack(data: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The messages back to back (``uint8``) and their lengths (int64)."""
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
    return np.frombuffer(b"".join(data), dtype=np.uint8), lengths


def keyed_codes(data: list[bytes], key: bytes, bits: int) -> np.ndarray:
    """``int.from_bytes(blake2b(d, key=key, digest_size=8).digest(), "big") >> (64 - bits)``
    for each ``d`` in ``data`` (int64; ``key`` at most 64 bytes, ``1 <= bits <= 64``)."""
    return packed_codes(*pack(data), key, bits)


def packed_codes(flat: np.ndarray, lengths: np.ndarray, key: bytes, bits: int) -> np.ndarray:
    """:func:`keyed_codes` of the messages held back to back in ``flat`` (:func:`pack`)."""
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buf = flat if flat.size else np.zeros(1, dtype=np.uint8)
    key_block = np.zeros(_BLOCK, dtype=np.uint8)
    key_block[: len(key)] = np.frombuffer(key, dtype=np.uint8)
    return _codes(buf, offsets, key_block, len(key), int(bits))
