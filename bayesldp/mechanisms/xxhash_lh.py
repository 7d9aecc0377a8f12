"""Local hashing with the xxhash family of pure-ldp and multi-freq-ldpy: BLHXX and OLHXX.

Wang, Blocki, Li, Jha, USENIX Security 2017, section 4.4 (local hashing), with the hash family
that pure-ldp 1.2.0 (``LHClient`` / ``LHServer``) and multi-freq-ldpy 0.2.5 (``LH_Client`` /
``LH_Aggregator_MI``) use, so that reports those clients collected can be analysed here:

.. math:: h_s(x) = \\mathrm{XXH32}(\\texttt{str}(x), s \\bmod 2^{32}) \\bmod g.

What the peers do (read from their source):

* the hashed bytes are ``str(x)`` (python-xxhash < 4 encodes it as UTF-8: the ASCII decimal
  digits), ``x`` the 0-based category; pure-ldp's default ``index_mapper`` is ``x - 1``, so its
  users' data ``1..K`` are hashed as ``0..K-1``, the categories here;
* the seed is ``random.randint(0, sys.maxsize)`` (pure-ldp: uniform on ``0..2^63-1``) or
  ``np.random.randint(0, sys.maxsize, dtype=np.int64)`` (multi-freq-ldpy: ``0..2^63-2``), so its
  residue mod ``2^32`` is uniform (within ``2^-63``); python-xxhash 3.8.2 keeps only
  ``s mod 2^32`` (observed: ``xxh32("7", seed=2**63 - 1)`` equals ``seed=2**32 - 1``);
* ``y`` is the hash value randomised by GRR over ``g`` values (``Pr[y = h_s(x)] = p``); BLH takes
  ``g = 2``, OLH ``g = int(round(e^eps)) + 1`` (the same in both peers and here);
* the report is the pair ``(y, seed)``.

This module hashes with its own compiled XXH32 (:mod:`bayesldp.mechanisms._xxh32`); the xxhash
package is not needed.  Its perturb draws seeds uniform on ``0..2^32-1``.

pure-ldp's heuristic ``FastLHClient`` draws its seed from a small pool ``0..k_hash-1`` instead:
its reports are read the same way and the likelihood (MLE, EM, posteriors) stays exact, since
each row is conditional on the report's seed, but the oracle's ``q* = 1/g`` assumes uniform
32-bit seeds and is not exact for such a pool.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc
from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_domain_size,
    check_epsilon,
    check_values,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms import _xxh32
from bayesldp.mechanisms.base import (
    Parameter,
    bits,
    check_report_field,
    int_columns,
    realised_epsilon_of_channel,
)
from bayesldp.mechanisms.hashing import HashedGRR, _check_g, optimal_g
from bayesldp.tally import Tally

SEED_RANGE = 2**32
"""XXH32 seeds are 32-bit: a report's seed ``s`` acts as ``s mod 2^32``."""
HASH_RANGE = 2**32
"""XXH32 digests lie in ``0..2^32-1``; ``g`` is capped there."""
MAX_K = 2**31 - 1  # decimal strings of at most 10 bytes: XXH32's short-input path only
_MAX_SEED = 2**63 - 1  # the peers' seeds are below 2^63 (int64 in files)


@dataclass(frozen=True, eq=False)
class SeedReports:
    """xxhash local-hashing reports of ``n`` users: ``(y, seed)`` pairs, as the peers send them.

    Attributes
    ----------
    y : ndarray of int64, shape (n,)
        Reported (perturbed) hash values in ``0..g-1``.
    seed : ndarray of int64, shape (n,)
        Hash seeds in ``0..2^63-1`` (only ``seed mod 2^32`` matters).

    Examples
    --------
    What :meth:`OLHXX.perturb <bayesldp.OLHXX.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.OLHXX(10, 1.0)
    >>> reports = mech.perturb([0, 1, 2, 3], rng=0)
    >>> type(reports).__name__, reports.y.shape, reports.seed.shape
    ('SeedReports', (4,), (4,))
    """

    y: np.ndarray
    seed: np.ndarray

    def __len__(self) -> int:
        return int(np.shape(self.y)[0]) if np.ndim(self.y) else 1


#: the ``k`` and ``epsilon`` entries of these classes' docstrings
_PARAMETERS = categorical_parameters("2 <= k <= 2^31 - 1")


@fill_doc(parameters=_PARAMETERS)
class XXHashLocalHashing(HashedGRR):
    """Local hashing with ``h_s(x) = xxh32(str(x), s) mod g`` (pure-ldp, multi-freq-ldpy).

    Client: draw ``s ~ U{0..2^32-1}``, hash ``v = h_s(x)``, keep ``v`` w.p.
    ``p = e^eps/(e^eps + g - 1)``, else report a uniform one of the other ``g - 1`` values; the
    report is :class:`SeedReports` ``(y, seed)``.

    Aggregator: report ``i`` supports ``{x : h_{s_i}(x) = y_i}``; its exact likelihood row given the
    seed is ``p`` on the support and ``q = 1/(e^eps + g - 1)`` off it (support form, levels
    ``(q, p)``), whatever the distribution of seeds, so the MLE, EM and posteriors are exact.

    Oracle: ``p* = p``, ``q* = c p + (1 - c) q`` with ``c = Pr_s[h_s(x) = h_s(x')]``, ``x != x'``.
    XXH32 is not a universal family, so ``c`` was measured
    (``benchmarks/investigations/xxhash_collisions.py``):

    * for a fixed input, ``s -> XXH32(x, s)`` is a bijection of the 32-bit words (every step of
      the short-input path is an addition of a constant, a multiplication by an odd constant, a
      rotation or ``h ^= h >> r``), so ``h_s(x)`` has the exact marginal of ``U{0..2^32-1} mod g``;
    * exactly, over all ``2^32`` seeds
      (``python benchmarks/investigations/xxhash_collisions.py --exact 0,1,10``, 525 s): for the
      pairs (0, 1), (0, 10), (1, 10) and g in {2, 3, 4, 5, 8, 21}, ``|c - 1/g| <= 1.16e-5`` in all
      18 cells (largest: -1.16e-5 at g = 8, -1.07e-5 at g = 4, +1.00e-5 at g = 3), the size of a
      random function's fluctuation ``sqrt(c(1 - c) / 2^32)`` (3e-6 to 8e-6);
    * all 4,950 pairs of ``0..99`` over 4,194,304 random seeds
      (``python benchmarks/investigations/xxhash_collisions.py``, ``default_rng(0)``):
      ``c_hat - 1/g`` = -7.9e-6, -0.5e-6, -6.5e-6, -0.7e-6, -1.5e-6, +0.3e-6 for g = 2, 3, 4, 5, 8,
      21 (standard errors 3.5e-6 to 1.5e-6), and the 99 adjacent pairs ``(x, x + 1)`` collide at
      homogeneous rates (chi-square p >= 0.049 for each g); a second run (``--seeds 16777216 --rng 1
      --g 2,4``): -3.0e-6 and -2.6e-6 (se 1.7e-6, 1.5e-6).  The average over these pairs may thus
      sit a few 1e-6 below ``1/g`` for g = 2 and 4 (combined: -3.9e-6 +- 1.5e-6 at g = 2).

    So ``c = 1/g`` to within ``1.2e-5``, the value Wang et al. assume, and the oracle uses
    ``q* = 1/g`` (exactly ``p/g + (1 - 1/g) q = 1/g``).  A true ``c = 1/g + d`` biases the oracle
    by ``(1 - f_x) d / (1 - 1/g) <= 2 |d|`` per coordinate, at most ``2.4e-5`` here: about a
    tenth of its standard error (1.9e-4) at ``eps = 1``, ``n = 10^8``.  Exactly eps-LDP: given
    the seed, the channel over ``y`` has entries ``p`` and ``q`` only.

    {parameters}
    g : int
        Hash range (2 <= g <= 2^32).

    Examples
    --------
    OLHXX and BLHXX are xxhash local hashing at their choices of ``g``:

    >>> import bayesldp
    >>> from bayesldp.mechanisms import XXHashLocalHashing
    >>> mech = XXHashLocalHashing(10, 1.0, g=4)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 3] * 25, rng=0))
    >>> tally.n, round(mech.realised_epsilon(), 12)
    (100, 1.0)
    >>> isinstance(bayesldp.OLHXX(10, 1.0), XXHashLocalHashing)
    True
    """

    name = "LHXX"
    RECOMMEND = False  # the same channel and variance as BLH / OLH: for reading peers' reports

    def __init__(self, k: int, epsilon: float, g: int) -> None:
        super().__init__(k, epsilon)
        if self.k > MAX_K:
            raise InvalidInputError(f"k: xxhash local hashing needs k <= 2^31 - 1, got {self.k}")
        self.g = _check_g(g, HASH_RANGE)

    # ------------------------------------------------------------------ probabilities
    @property
    def collision_probability(self) -> float:
        """``c = Pr_s[h_s(x) = h_s(x')] = 1/g`` (measured; see the class docstring)."""
        return 1.0 / self.g

    # ------------------------------------------------------------------ hashing
    def hash_values(self, reports: SeedReports, x: int) -> np.ndarray:
        """``h_{s_i}(x)`` for every report ``i`` (int64, shape (n,))."""
        _, seed = self.check_reports(reports)
        return self._hash(seed, np.full(seed.shape[0], self._check_category(x)))

    def _hash(self, seed: np.ndarray, x: np.ndarray) -> np.ndarray:
        seeds = (seed % SEED_RANGE).astype(np.uint64)
        return (_xxh32.hash_values(seeds, x.astype(np.int64)) % np.uint64(self.g)).astype(np.int64)

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> SeedReports:
        """Hash each value with a fresh uniform 32-bit seed; randomise the hash by GRR over g."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n = x.shape[0]
        seed = gen.integers(0, SEED_RANGE, size=n, dtype=np.int64)
        v = self._hash(seed, x)
        keep = gen.random(n) < self.p
        shift = gen.integers(1, self.g, size=n, dtype=np.int64)
        return SeedReports(np.where(keep, v, (v + shift) % self.g), seed)

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate :class:`SeedReports` and return ``(y, seed)`` as int64."""
        if not isinstance(reports, SeedReports):
            raise InvalidTypeError(
                f"reports: expected SeedReports(y, seed) from {type(self).__name__}.perturb or "
                f"reports_from_frame, got {type(reports).__name__}"
            )
        bounds = {"y": (0, self.g - 1), "seed": (0, _MAX_SEED)}
        arrays = [check_report_field(reports, f, lo, hi) for f, (lo, hi) in bounds.items()]
        if arrays[0].shape[0] != arrays[1].shape[0]:
            raise InvalidInputError(
                f"reports: y and seed need equal lengths, got y={arrays[0].shape[0]}, "
                f"seed={arrays[1].shape[0]}"
            )
        return arrays[0], arrays[1]

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> SeedReports:
        """Columns ``y`` (the reported hash value) and ``seed``: the peers' ``(y, seed)`` tuples."""
        return SeedReports(*int_columns(frame, ["y", "seed"], source))

    def reports_to_frame(self, reports: SeedReports) -> Any:
        import pandas as pd

        y, seed = self.check_reports(reports)
        return pd.DataFrame({"y": y, "seed": seed})

    def report_size(self) -> str:
        return f"{bits(math.ceil(math.log2(max(2, self.g))))} + 32-bit hash seed"

    def tally(self, reports: SeedReports) -> Tally:
        """Support-form tally: ``support[i, x] = (h_{s_i}(x) == y_i)``, levels ``(q, p)``.

        Compiled (:func:`_xxh32.hits_by_category`): the seed-free terms of each category's hash
        are computed once, then every user's hash of that category, over blocks of users so
        temporaries stay ``O(block * k)`` bytes.
        """
        check_domain_size(self.k)  # the tally's K-length arrays (the hashes needed none)
        y, seed = self.check_reports(reports)
        k = self.k
        terms = _xxh32.category_terms(np.arange(k, dtype=np.int64))
        seeds = (seed % SEED_RANGE).astype(np.uint64)
        targets = y.astype(np.uint64)

        def add_hits(start: int, stop: int, stat: np.ndarray) -> np.ndarray:
            hits = np.empty((k, stop - start), dtype=bool)
            _xxh32.hits_by_category(seeds[start:stop], targets[start:stop], np.uint64(self.g),
                                    *terms, hits, stat)  # fmt: skip
            return hits

        return self._block_tally(
            y.shape[0],
            add_hits,
            "tally the reports in batches of fewer users and merge the tallies with +",
        )

    def supports(self, reports: SeedReports, x: int) -> np.ndarray:
        """Report ``i`` supports ``x`` iff ``h_{s_i}(x) == y_i``."""
        y, _ = self.check_reports(reports)
        return self.hash_values(reports, x) == y

    # ------------------------------------------------------------------ privacy
    def channel_given_seed(self, seed: int) -> np.ndarray:
        """The K x g channel of ``y`` given the seed: ``p`` where ``h_s(x) = v``, else ``q``."""
        if self.k * self.g > 50_000_000:
            raise NotSupportedError(
                f"channel_given_seed: a {self.k} x {self.g} matrix is too large to build"
            )
        h = self._seed_hashes(seed)
        return np.where(h[:, None] == np.arange(self.g)[None, :], self.p, self.q)

    def _seed_hashes(self, seed: int) -> np.ndarray:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise InvalidTypeError(f"seed: expected an integer, got {seed!r}")
        if not 0 <= seed <= _MAX_SEED:
            raise InvalidInputError(f"seed: must lie in 0..2^63-1, got {seed}")
        return self._hash(np.full(self.k, seed, dtype=np.int64), np.arange(self.k))

    def channel_extremes(self, seed: int) -> np.ndarray:
        """Each column's maximum and minimum over inputs of the channel given ``seed`` (2 x m).

        Column ``v`` holds ``p`` for the inputs hashing to ``v`` and ``q`` for the others, so its
        maximum is ``p`` if some input hashes to ``v`` (else ``q``) and its minimum ``q`` unless
        every input does.  Columns no input hashes to are alike (``q``); one stands for them all.
        ``O(K)`` memory, where the channel itself takes ``K g``.
        """
        _, counts = np.unique(self._seed_hashes(seed), return_counts=True)
        col_max = np.full(counts.size, self.p)
        col_min = np.where(counts == self.k, self.p, self.q)
        if counts.size < self.g:
            col_max, col_min = np.append(col_max, self.q), np.append(col_min, self.q)
        return np.vstack([col_max, col_min])

    def separating_seed(self) -> int:
        """The smallest seed whose hash separates categories 0 and 1 (exists for every g >= 2)."""
        seeds = np.arange(4096, dtype=np.int64)
        h0 = self._hash(seeds, np.zeros(seeds.size, dtype=np.int64))
        h1 = self._hash(seeds, np.ones(seeds.size, dtype=np.int64))
        return int(np.flatnonzero(h0 != h1)[0])  # 4,096 straight collisions: never (< 2^-4096)

    def realised_epsilon(self) -> float:
        """Epsilon from the exact channel of ``y`` given a seed.

        ``Pr(seed)`` does not depend on ``x``, so the privacy loss is that of the channel given
        the seed, ``max_v log(max_x P[x, v] / min_x P[x, v])``, computed from its column extremes
        (:meth:`channel_extremes`).  Every such channel holds only ``p`` and ``q``: each column's
        ratio is 1 or ``p/q``, and a seed separating two inputs attains ``p/q``
        (:meth:`separating_seed`), so that seed's channel gives the maximum over all seeds.
        """
        return realised_epsilon_of_channel(self.channel_extremes(self.separating_seed()))


@fill_doc(parameters=_PARAMETERS)
class BLHXX(XXHashLocalHashing):
    """Binary local hashing with the xxhash family (pure-ldp ``LHClient(g=2)``, multi-freq-ldpy
    ``LH_Client(optimal=False)``): :class:`XXHashLocalHashing` with ``g = 2``.

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.BLHXX(100, 1.0)
    >>> reports = mech.perturb([0, 1, 2, 3] * 25, rng=0)
    >>> mech.g, mech.tally(reports).n, round(mech.realised_epsilon(), 12)
    (2, 100, 1.0)
    """

    name = "BLHXX"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon, 2)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon}


@fill_doc(parameters=_PARAMETERS)
class OLHXX(XXHashLocalHashing):
    """Optimised local hashing with the xxhash family (pure-ldp ``LHClient(use_olh=True)``,
    multi-freq-ldpy ``LH_Client(optimal=True)``): ``g = round(e^eps) + 1`` by default.

    {parameters}
    g : int, optional
        Hash range (2 <= g <= 2^32); default ``round(e^eps) + 1`` (capped at ``2^32``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.OLHXX(100, 2.0)
    >>> mech.g
    8
    """

    name = "OLHXX"
    PARAMETERS = (Parameter("g", int, "hash range g (default round(e^eps) + 1)"),)

    def __init__(self, k: int, epsilon: float, g: int | None = None) -> None:
        if g is None:
            g = optimal_g(check_epsilon(epsilon), HASH_RANGE)  # the cap: XXH32's 2^32 values
        super().__init__(k, epsilon, g)
