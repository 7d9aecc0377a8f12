"""Group equal byte strings held back to back in one buffer, compiled (internal).

:func:`factorize_packed` is pandas' ``factorize`` for messages laid back to back in a ``uint8``
buffer (:func:`bayesldp.heavy_hitters._blake2b.pack`): each message's label, distinct messages
numbered in the order of their first occurrence, through one open-addressing hash table (FNV-1a
of the bytes, linear probing, equal length and equal bytes to match).  On a packed buffer it
costs a pass over the bytes and one table probe per message, with no Python object touched;
:class:`~bayesldp.heavy_hitters.ItemEncoder` uses it to hash each distinct item once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, nogil=True)
def _factorize(buf, offsets, mask):  # pragma: no cover - compiled
    n = offsets.shape[0] - 1
    table = np.zeros(mask + 1, np.int32)  # label + 1 of the message in the slot, 0: empty
    labels = np.empty(n, np.int64)
    first = np.empty(n, np.int64)  # first[u]: the first message of distinct u
    n_distinct = 0
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        h = _FNV_OFFSET
        for j in range(lo, hi):
            h = (h ^ np.uint64(buf[j])) * _FNV_PRIME
        slot = np.int64(h & np.uint64(mask))
        while True:
            held = table[slot]
            if held == 0:
                table[slot] = n_distinct + 1
                first[n_distinct] = i
                labels[i] = n_distinct
                n_distinct += 1
                break
            other = first[held - 1]
            o_lo = offsets[other]
            if offsets[other + 1] - o_lo == hi - lo:
                same = True
                for j in range(hi - lo):
                    if buf[o_lo + j] != buf[lo + j]:
                        same = False
                        break
                if same:
                    labels[i] = held - 1
                    break
            slot = (slot + 1) & mask
    return labels, first[:n_distinct].copy()


@njit(cache=True, nogil=True)
def _gather(buf, offsets, first, total):  # pragma: no cover - compiled
    out = np.empty(total, np.uint8)
    pos = 0
    for u in range(first.shape[0]):
        for j in range(offsets[first[u]], offsets[first[u] + 1]):
            out[pos] = buf[j]
            pos += 1
    return out


def factorize_packed(
    flat: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(labels, first, distinct_flat, distinct_lengths)`` of the messages held back to back in
    ``flat`` with ``lengths``: each message's distinct message (numbered by first occurrence),
    the first message of each distinct one, and the distinct messages back to back."""
    n = lengths.size
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buf = flat if flat.size else np.zeros(1, dtype=np.uint8)
    mask = (1 << max(int(2 * n - 1).bit_length(), 4)) - 1  # at most half full
    labels, first = _factorize(buf, offsets, mask)
    distinct_lengths = lengths[first]
    distinct_flat = _gather(buf, offsets, first, int(distinct_lengths.sum()))
    return labels, first, distinct_flat, distinct_lengths
