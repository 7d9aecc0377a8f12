"""What Apple's count-mean sketches (CMS and HCMS, :mod:`bayesldp.mechanisms.sketch`) share:
the hash family, the support-form tally, the oracles and Apple's sketch estimate.

Notation.  ``K`` (the package's ``k``) is the number of categories; Apple's ``k`` hash functions
are ``k_hash`` here and the sketch width is ``m``.  Hash family (fixed, seeded, documented):

.. math:: h_j(x) = ((a_j x + b_j) \\bmod P) \\bmod m, \\qquad P = 2^{31} - 1,

with ``a_j = 1 + s_{2j+1} mod (P - 1)`` and ``b_j = s_{2j+2} mod P``, ``s_t`` the ``t``-th output
of SplitMix64 seeded with ``hash_seed`` (:func:`bayesldp.mechanisms._splitmix.splitmix64`), for
rows ``j = 0..k_hash-1``.  The family is part of the mechanism (``hash_seed``, ``m``,
``k_hash``), so the channel is known exactly.  A family under which two categories share a
bucket in every row is refused (no report could tell them apart).

Oracles.  The statistic is the support count ``s(x) = #{i : x in S_i}``;
``E[s/n] = M^T theta`` with ``M[x', x] = Pr[x in S | X = x'] = q0 + (p0 - q0) C[x', x]``,
``C[x', x]`` the share of rows ``j`` with ``h_j(x') = h_j(x)``, ``p0 = 1 - flip`` and
``q0 = flip`` (CMS) or ``1/2`` (HCMS).  :meth:`unbiased_frequencies` is the channel inverse
``M^{-T} s / n``: exactly unbiased for this fixed family.  Apple's debiased sketch estimate
(:meth:`sketch_frequencies`),

.. math:: \\hat f(x) = \\frac{m}{m-1}\\Big(\\frac{1}{k_{hash}} \\sum_j M_{j, h_j(x)} / n
          - \\frac1m\\Big),

is unbiased only on average over randomly drawn hash functions; for one fixed family its
expectation is ``m/(m-1) (C theta - 1/m)`` (:meth:`sketch_expectation`): every category collects
the mass of the categories it collides with, less the average ``1/m``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bayesldp._validation import check_int, check_memory
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.mechanisms._splitmix import splitmix64
from bayesldp.mechanisms.base import Mechanism, Parameter, realised_epsilon_of_channel
from bayesldp.mechanisms.unary import support_tally
from bayesldp.tally import Tally

_PRIME = 2**31 - 1
#: the full channel is built (and used for the realised epsilon) up to this many entries
MAX_CHANNEL_ENTRIES = 4_000_000
#: the K x K oracle matrices are built up to this many categories
MAX_ORACLE_K = 5_000


def sketch_hashes(k: int, m: int, k_hash: int, hash_seed: int, values: Any = None) -> np.ndarray:
    """The hash table ``H[j, x] = h_j(x)``, int64 ``(k_hash, k)`` (see the module docstring).

    With ``values`` (integers in ``0..P-1``), the table ``H[j, i] = h_j(values[i])`` instead
    (the hashes of arbitrary inputs: :class:`bayesldp.heavy_hitters.CandidateCMS`'s candidates).
    """
    a = np.array([1 + splitmix64(hash_seed, 2 * j + 1) % (_PRIME - 1) for j in range(k_hash)])
    b = np.array([splitmix64(hash_seed, 2 * j + 2) % _PRIME for j in range(k_hash)])
    x = np.arange(k, dtype=np.int64) if values is None else np.asarray(values, dtype=np.int64)
    # a < 2^31 and x < 2^31: a x + b < 2^62 + 2^31, exact in int64
    return (a.astype(np.int64)[:, None] * x[None, :] + b.astype(np.int64)[:, None]) % _PRIME % m


def _default_width(k: int) -> int:
    return max(4, 1 << math.ceil(math.log2(2 * k)))


class _CountMeanSketch(Mechanism):
    """What CMS and HCMS share: the hash family, the support-form tally and the oracles."""

    PARAMETERS = (
        Parameter("m", int, "sketch width, buckets per hash row (default: power of two >= 2K)"),
        Parameter("k_hash", int, "number of hash functions, Apple's k (default 16)"),
        Parameter("hash_seed", int, "seed of the SplitMix64 hash family (default 0)"),
    )
    RECOMMEND = False

    def __init__(
        self,
        k: int,
        epsilon: float,
        m: int | None = None,
        k_hash: int | None = None,
        hash_seed: int | None = None,
    ) -> None:
        m = self._check_width(m)
        super().__init__(k, epsilon)
        if self.k >= _PRIME:
            raise InvalidInputError(f"k: the sketch hashes need k < 2^31 - 1, got {self.k}")
        self.m = check_int(_default_width(self.k) if m is None else m, "m", 2)
        self.k_hash = check_int(16 if k_hash is None else k_hash, "k_hash", 1)
        self.hash_seed = check_int(0 if hash_seed is None else hash_seed, "hash_seed", 0)
        if self.hash_seed >= 2**64:
            raise InvalidInputError(f"hash_seed: must be below 2^64, got {self.hash_seed}")
        if self.k_hash > 1 << 20:
            raise InvalidInputError(f"k_hash: at most 2^20 hash functions, got {self.k_hash}")
        check_memory(8.0 * self.k_hash * self.k, f"{type(self).__name__} hash table",
                     "use fewer hash functions")  # fmt: skip
        self.hashes = sketch_hashes(self.k, self.m, self.k_hash, self.hash_seed,
                                    self._hash_inputs())  # fmt: skip
        self._check_separates()
        # per-entry flip probability and its complement, without cancellation
        t = math.exp(-self._entry_epsilon)
        self.flip = t / (1.0 + t)
        self.keep = 1.0 / (1.0 + t)
        self._matrices: tuple[np.ndarray, np.ndarray] | None = None

    _entry_epsilon: float  # budget of one randomised entry

    def _hash_inputs(self) -> Any:
        """The values hashed for categories ``0..K-1``: None for the categories themselves."""
        return None

    def _check_separates(self) -> None:
        """Refuse a family under which two categories share a bucket in every row."""
        order = np.lexsort(self.hashes)  # categories sorted by their column of bucket indices
        columns = self.hashes[:, order]
        same = np.flatnonzero((columns[:, 1:] == columns[:, :-1]).all(axis=0))
        if same.size:
            a, b = sorted((int(order[same[0]]), int(order[same[0] + 1])))
            raise InvalidInputError(
                f"m, k_hash: with m = {self.m}, k_hash = {self.k_hash} and hash_seed = "
                f"{self.hash_seed} categories {a} and {b} share a bucket in every hash row, so no "
                "report can tell them apart; increase m or k_hash, or change hash_seed"
            )

    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "m": self.m,
            "k_hash": self.k_hash,
            "hash_seed": self.hash_seed,
        }

    @staticmethod
    def _check_width(m: Any) -> Any:
        """The ``m`` argument, refused (before anything else is checked) where this sketch
        cannot take it; any width by default, HCMS a power of two."""
        return m

    @property
    def levels(self) -> tuple[float, float]:
        """Likelihood row values off / on a report's support, up to a common factor."""
        raise NotImplementedError

    # ------------------------------------------------------------------ oracle matrices
    @property
    def _q0(self) -> float:
        """``Pr[x in S | X = x']`` when ``h_j(x) != h_j(x')``."""
        raise NotImplementedError

    def collision_matrix(self) -> np.ndarray:
        """``C[x, x']``: the share of hash rows ``j`` with ``h_j(x) = h_j(x')``, ``(K, K)``."""
        return self._oracle_matrices()[0]

    def support_matrix(self) -> np.ndarray:
        """``M[x', x] = Pr[x in S(Y) | X = x'] = q0 + (p0 - q0) C[x', x]``, ``(K, K)``."""
        return self._oracle_matrices()[1]

    def _oracle_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        if self._matrices is None:
            if self.k > MAX_ORACLE_K:
                raise NotSupportedError(
                    f"{type(self).__name__}: the oracle's K x K matrices are built for K <= "
                    f"{MAX_ORACLE_K}, got K = {self.k}; use estimate(..., 'mle') or 'em'"
                )
            coll = np.zeros((self.k, self.k))
            for row in self.hashes:
                coll += row[:, None] == row[None, :]
            coll /= self.k_hash
            self._matrices = (coll, self._q0 + (self.keep - self._q0) * coll)
        return self._matrices

    def _support_cov(self, theta: Any) -> np.ndarray:
        """Per-user covariance of the support indicators ``1[x in S]`` over the population
        ``theta``: ``W - M^T diag(theta) M`` with ``W[x, x''] = sum_x' theta_x'
        Pr[x, x'' in S | X = x']`` (closed form per hash row, see the tests' brute force)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.k,) or not np.all(np.isfinite(theta)) or theta.min() < 0:
            raise InvalidInputError(
                f"theta: expected {self.k} non-negative finite frequencies, got shape {theta.shape}"
            )
        _, big_m = self._oracle_matrices()
        total = float(theta.sum())
        w = np.zeros((self.k, self.k))
        for row in self.hashes:
            same = row[:, None] == row[None, :]
            t = np.bincount(row, weights=theta, minlength=self.m)[row]  # mass sharing x's bucket
            w += self._pair_probabilities(same, t, total)
        w /= self.k_hash
        return w - big_m.T @ (theta[:, None] * big_m)

    def _pair_probabilities(self, same: np.ndarray, t: np.ndarray, total: float) -> np.ndarray:
        raise NotImplementedError

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """The channel-inverse estimate ``M^{-T} s / n`` (exactly unbiased for this family)."""
        self.check_tally(tally)
        return np.linalg.solve(self._checked_m().T, tally.stat / tally.n)

    def _checked_m(self) -> np.ndarray:
        big_m = self.support_matrix()
        if np.linalg.cond(big_m) > 1e12:
            raise NotSupportedError(
                f"{self!r}: the support matrix M is singular (the hash rows do not identify every "
                "category); use more hash functions or a wider sketch"
            )
        return big_m

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """``diag(M^{-T} Sigma M^{-1}) / n``, ``Sigma`` the support indicators' covariance."""
        inv = np.linalg.inv(self._checked_m())
        cov = self._support_cov(theta)
        return np.einsum("ij,jk,ki->i", inv.T, cov, inv) / n

    # ------------------------------------------------------------------ Apple's estimate
    @property
    def _sketch_scale(self) -> float:
        """``a`` in Apple's estimate ``m/(m-1) (a (2 s/n - 1) + b - 1/m)``."""
        raise NotImplementedError

    @property
    def _sketch_offset(self) -> float:
        raise NotImplementedError

    def sketch_frequencies(self, tally: Tally) -> np.ndarray:
        """Apple's debiased sketch estimate of the frequencies (A_server, divided by ``n``).

        ``f(x) = m/(m-1) ((1/k_hash) sum_j M[j, h_j(x)] / n - 1/m)``, computed from the support
        counts (the sketch entry a category reads is an affine function of them).  Unbiased
        over random hash functions, biased by collisions for this fixed family: its
        expectation is :meth:`sketch_expectation`.
        """
        self.check_tally(tally)
        return self._sketch_from_stat(tally.stat, tally.n)

    def _sketch_from_stat(self, stat: np.ndarray, n: int) -> np.ndarray:
        """Apple's sketch estimate from the support counts ``stat`` of ``n`` reports."""
        phi = 2.0 * np.asarray(stat, dtype=float) / n - 1.0
        c = 1.0 / (self.keep - self.flip)
        return self.m / (self.m - 1) * (self._sketch_scale * c * phi + self._sketch_offset
                                        - 1.0 / self.m)  # fmt: skip

    def sketch_expectation(self, theta: Any) -> np.ndarray:
        """``E[sketch_frequencies] = m/(m-1) (C theta - sum(theta)/m)`` for this hash family."""
        theta = np.asarray(theta, dtype=float)
        coll = self.collision_matrix()
        return self.m / (self.m - 1) * (coll @ theta - theta.sum() / self.m)

    def sketch_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance of :meth:`sketch_frequencies` for a fixed population ``theta``."""
        cov = np.diag(self._support_cov(theta))
        c = 1.0 / (self.keep - self.flip)
        return (self.m / (self.m - 1) * self._sketch_scale * c * 2.0) ** 2 * cov / n

    # ------------------------------------------------------------------ privacy
    def realised_epsilon(self) -> float:
        """Exact epsilon from the channel.

        From the full channel when it has at most ``MAX_CHANNEL_ENTRIES`` entries; otherwise
        from its factorisation (see the subclasses), which gives the same value.
        """
        if self._channel_entries() <= MAX_CHANNEL_ENTRIES:
            return realised_epsilon_of_channel(self.channel)
        entry = realised_epsilon_of_channel(np.array([[self.keep, self.flip],
                                                      [self.flip, self.keep]]))  # fmt: skip
        spread = any(np.unique(row).size > 1 for row in self.hashes)
        return self._entries_per_pair * entry if spread else 0.0

    _entries_per_pair: int

    def _channel_entries(self) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------ aggregator
    def membership(self, reports: Any) -> np.ndarray:
        """Bool ``(n, K)``: category ``x`` is in report ``i``'s support."""
        raise NotImplementedError

    def tally(self, reports: Any) -> Tally:
        """Support-form tally with levels ``(1, e^eps)``; ``stat`` the support counts."""
        return support_tally(self.membership(reports), self)

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """Boolean per report: is ``x`` in the report's support?"""
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < self.k:
            raise InvalidInputError(f"x: expected a category in 0..{self.k - 1}, got {x!r}")
        return self.membership(reports)[:, int(x)]

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """The report supports ``x0`` and not ``x1``."""
        support = self.membership(reports)
        return support[:, x0] & ~support[:, x1]
