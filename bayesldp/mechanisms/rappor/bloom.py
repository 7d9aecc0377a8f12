"""RAPPOR's Bloom filters: google/rappor's hash family and the Bloom set of an outside string.

:func:`bloom_bits` is the client's encoding (``client/python/rappor.py``, ``get_bloom_bits``);
:func:`_other_log_factor` is the law, under the random-oracle view of the hash family, of the
Bloom set of a string outside the candidates (the "other" category of
:class:`~bayesldp.mechanisms.rappor.mechanism.RAPPOR`; see that module's docstring).
"""

from __future__ import annotations

import hashlib
import numbers
import struct
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError


def bloom_bits(word: str, cohort: int, num_hashes: int, num_bits: int) -> list[int]:
    """The Bloom positions of ``word`` in ``cohort``: google/rappor's hash family.

    ``digest = MD5(cohort as 4 big-endian bytes + UTF-8 bytes of word)``; hash ``i`` is
    ``digest[i] mod num_bits`` for ``i < num_hashes`` (``client/python/rappor.py``,
    ``get_bloom_bits``), so reports collected by google/rappor's client decode here.
    """
    digest = hashlib.md5(struct.pack(">L", cohort) + word.encode("utf-8")).digest()
    return [digest[i] % num_bits for i in range(num_hashes)]


def _other_log_factor(num_bits: int, num_hashes: int, a: float, b: float) -> np.ndarray:
    """``log E[exp(a d_1 + b d_0)]`` for ``n_1 = 0..num_bits`` 1 bits among ``num_bits``.

    ``h`` positions are thrown uniformly; ``d_1`` (``d_0``) counts the distinct positions that
    land on 1 (0) bits.  The joint law of ``(d_1, d_0)`` is propagated throw by throw: a throw
    hits a new 1 bit with probability ``(n_1 - d_1)/k``, a new 0 bit with ``(k - n_1 - d_0)/k``,
    and an already-hit position otherwise.
    """
    k, h = num_bits, num_hashes
    n1 = np.arange(k + 1, dtype=float)[:, None, None]
    d1 = np.arange(h + 1, dtype=float)[None, :, None]
    d0 = np.arange(h + 1, dtype=float)[None, None, :]
    prob = np.zeros((k + 1, h + 1, h + 1))
    prob[:, 0, 0] = 1.0
    for _ in range(h):
        new1 = np.clip(n1 - d1, 0, None) / k
        new0 = np.clip(k - n1 - d0, 0, None) / k
        stay = 1.0 - new1 - new0
        nxt = prob * stay
        nxt[:, 1:, :] += (prob * new1)[:, :-1, :]
        nxt[:, :, 1:] += (prob * new0)[:, :, :-1]
        prob = nxt
    log_w = a * d1 + b * d0  # (1, h+1, h+1)
    top = log_w.max()
    with np.errstate(divide="ignore"):
        return top + np.log((prob * np.exp(log_w - top)).sum(axis=(1, 2)))


def check_candidates(candidates: Any, k: int, other: bool) -> tuple[str, ...]:
    """RAPPOR's candidate strings: ``k`` (``k - 1`` with ``other``) distinct strings or
    integers (as their decimal text); default ``"0"``, ``"1"``, ...."""
    n_cand = k - 1 if other else k
    if other and n_cand < 1:
        raise InvalidInputError(f"k: with other=True, K = {k} leaves no candidate")
    if candidates is None:
        return tuple(str(i) for i in range(n_cand))
    if isinstance(candidates, str) or not hasattr(candidates, "__len__"):
        raise InvalidTypeError(
            f"candidates: expected a list of strings or integers, got {candidates!r}"
        )
    words = []
    for value in list(candidates):
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_):
            words.append(str(int(value)))
        else:
            raise InvalidTypeError(
                f"candidates: expected strings or integers, got {value!r} ({type(value).__name__})"
            )
    if len(words) != n_cand:
        extra = " plus 'other'" if other else ""
        raise InvalidInputError(
            f"candidates: K = {k} categories need {n_cand} candidates{extra}, got {len(words)}"
        )
    seen: dict[str, int] = {}
    for i, word in enumerate(words):
        if word in seen:
            raise InvalidInputError(
                f"candidates: {word!r} appears twice (positions {seen[word]} and {i}); "
                "candidates must be distinct (integers count as their decimal text)"
            )
        seen[word] = i
    return tuple(words)
