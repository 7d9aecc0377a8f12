"""RAPPOR's permanent randomised response, memoised per (user, value).

Erlingsson, Pihur and Korolova 2014, section 3: a client keeps its cohort for life and draws the
permanent randomised response (PRR) ``B'`` of each value once, then reports a fresh
instantaneous one (IRR) ``S`` of ``B'`` every round.  :class:`RapporMemo` gives
:class:`~bayesldp.mechanisms.rappor.mechanism.RAPPOR` that path,
``perturb(x, rng, users=ids, memo=memo)``, with the longitudinal mechanisms' memo
(:class:`~bayesldp.mechanisms.longitudinal.memo.Memo` in memory,
:class:`~bayesldp.mechanisms.longitudinal.memo.MemoStore` in a file): an entry per
(user, value) holds the user's cohort (4 bytes, little-endian) and the PRR bits (packed, little
bit order).  A user's first entry fixes its cohort; later values reuse it.  Per bit the PRR keeps
``B_j = 1`` as 1 w.p. ``1 - f/2`` and turns ``B_j = 0`` into 1 w.p. ``f/2``; the IRR reports 1
w.p. ``q_irr`` if ``B'_j = 1`` and ``p_irr`` if not, so one report still has the one-report
channel ``r_1 = q_irr (1 - f/2) + p_irr f/2``, ``r_0 = p_irr (1 - f/2) + q_irr f/2`` (module
docstring of :mod:`~bayesldp.mechanisms.rappor.mechanism`), and any number of reports of one
value leak at most the PRR's budget (:meth:`RAPPOR.realised_longitudinal_epsilon`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bayesldp.mechanisms.longitudinal.memo import Memo, MemoStore, checked_memo, memo_keys

#: users per block when drawing bits (bounds the memory of the uniforms)
_BLOCK_USERS = 1 << 16


def draw_bits(set_bits: np.ndarray, p_set: float, p_unset: float, gen: Any) -> np.ndarray:
    """Bits that are 1 w.p. ``p_set`` where ``set_bits`` and ``p_unset`` elsewhere (blocks)."""
    out = np.empty(set_bits.shape, dtype=bool)
    for start in range(0, set_bits.shape[0], _BLOCK_USERS):
        block = set_bits[start : start + _BLOCK_USERS]
        out[start : start + _BLOCK_USERS] = gen.random(block.shape) < np.where(
            block, p_set, p_unset
        )
    return out


class RapporMemo:
    """The memo interface of RAPPOR (mixed into :class:`RAPPOR`; see the module docstring)."""

    k: int
    cohorts: int
    num_bits: int
    num_hashes: int
    candidates: tuple[str, ...]
    bloom: np.ndarray
    f: float
    p_irr: float
    q_irr: float

    # ------------------------------------------------------------------ memo layout
    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        """An entry: uint8, the cohort's 4 little-endian bytes then the packed PRR bits."""
        return np.dtype(np.uint8), (4 + (self.num_bits + 7) // 8,)

    def _encode(self, cohort: np.ndarray, prr: np.ndarray) -> np.ndarray:
        head = cohort.astype("<u4").view(np.uint8).reshape(-1, 4)
        return np.concatenate([head, np.packbits(prr, axis=1, bitorder="little")], axis=1)

    def _cohorts_of(self, stored: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(stored[:, :4]).view("<u4").reshape(-1).astype(np.int64)

    def decode_permanent(self, stored: np.ndarray) -> np.ndarray:
        """The PRR bits of stored entries, bool ``(n, num_bits)``."""
        bits = np.unpackbits(stored[:, 4:], axis=1, count=self.num_bits, bitorder="little")
        return bits.view(bool)

    def memo_entry(self, stored: np.ndarray) -> tuple[int, np.ndarray]:
        """One entry as ``(cohort, PRR bits)`` (``memo[(user, value)]``)."""
        return int(self._cohorts_of(stored[None])[0]), self.decode_permanent(stored[None])[0]

    def valid_permanent(self, stored: np.ndarray) -> bool:
        if stored.size == 0:
            return True
        spare = 8 * (stored.shape[1] - 4) - self.num_bits  # padding bits must be 0
        if spare and np.any(stored[:, -1] >> (8 - spare)):
            return False
        return bool(self._cohorts_of(stored).max() < self.cohorts)

    def memo(self) -> Memo:
        """An empty in-memory memo of cohorts and permanent responses for this mechanism."""
        return Memo(self)

    def memo_store(self, path: str | os.PathLike[str], *, wait: float = 0.0) -> MemoStore:
        """The memo in the file ``path`` (created if missing), locked for this writer."""
        return MemoStore(path, self, wait=wait)

    # ------------------------------------------------------------------ the memoised client
    def _bloom_of(self, x: np.ndarray, cohort: np.ndarray, gen: Any) -> np.ndarray:
        """Bloom bits of values ``x`` in cohorts ``cohort``; "other": ``h`` uniform positions."""
        n_cand = len(self.candidates)
        bloom = self.bloom[cohort, np.minimum(x, n_cand - 1)]
        rows = np.flatnonzero(x >= n_cand)
        if rows.size:
            pos = gen.integers(0, self.num_bits, size=(rows.size, self.num_hashes))
            fresh = np.zeros((rows.size, self.num_bits), dtype=bool)
            np.put_along_axis(fresh, pos, True, axis=1)
            bloom[rows] = fresh
        return bloom

    def _memoised_perturb(
        self, x: np.ndarray, gen: Any, users: Any, memo: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(cohort, bits)`` of one round through the memo (module docstring)."""
        checked_memo(memo, users, self)
        keys = memo_keys(users, x, memo.width)
        stored, missing = memo.lookup(keys, self.memo_layout())
        if missing.size:
            has, first = memo.user_entries(keys[missing] // memo.width)
            cohort = gen.integers(0, self.cohorts, size=missing.size, dtype=np.int64)
            cohort[has] = self._cohorts_of(memo.responses[first[has]])  # a user's cohort kept
            bloom = self._bloom_of(x[missing], cohort, gen)
            prr = draw_bits(bloom, 1.0 - self.f / 2, self.f / 2, gen)
            fresh = self._encode(cohort, prr)
            stored[missing] = fresh
            memo.insert(keys[missing], fresh)
        prr = self.decode_permanent(stored)
        bits = draw_bits(prr, self.q_irr, self.p_irr, gen)
        return self._cohorts_of(stored), bits
