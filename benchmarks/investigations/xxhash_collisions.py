"""Collision probability of the xxhash local-hashing family used by pure-ldp and multi-freq-ldpy.

``h_s(x) = xxh32(str(x), seed=s) mod g`` with the seed uniform on ``0..2^32-1`` (python-xxhash
keeps ``s mod 2^32``; both peers draw ``s`` uniform on ``0..2^63-1``, whose residue mod ``2^32``
is uniform or within ``2^-63`` of it).  The OLH oracle needs
``c = Pr_s[h_s(x) = h_s(x')]`` for ``x != x'``; this script measures it.

* pooled (default): ``--seeds`` seeds drawn uniformly (numpy, seed ``--rng``), the categories
  ``0..K-1`` (``--k``), every pair of them, for each g in ``--g``.  The seeds are i.i.d., so the
  per-seed fraction of colliding pairs is i.i.d. and its sample mean ``c_hat`` has the standard
  error ``sd / sqrt(seeds)``; the table prints ``c_hat``, ``1/g``, the difference in standard
  errors, and a chi-square test that the per-pair rates of the pairs ``(x, x + 1)`` are equal.
* ``--exact X1,X2,...``: every one of the ``2^32`` seeds for each pair of the listed categories
  (at most 6 values of g): the exact ``c`` of those pairs (minutes: ``2^32 * len(X)`` hashes).

Usage::

    python benchmarks/investigations/xxhash_collisions.py  # K = 100, 2^22 seeds
    python benchmarks/investigations/xxhash_collisions.py --exact 0,1,2,10      # exact c of 6 pairs
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
from numba import njit, prange
from scipy import stats

from bayesldp.mechanisms._xxh32 import _decimal, xxh32_short


@njit(cache=True)
def _digit_table(xs):
    digits = np.zeros((xs.shape[0], 10), dtype=np.uint8)
    lengths = np.empty(xs.shape[0], dtype=np.int64)
    for j in range(xs.shape[0]):
        lengths[j] = _decimal(xs[j], digits[j])
    return digits, lengths


@njit(cache=True)
def _pooled(seeds, k, gs):
    """Per g (small: one bucket per hash value): sum and sum of squares over seeds of the number
    of colliding pairs, and the collision counts of the adjacent pairs (x, x + 1)."""
    digits, lengths = _digit_table(np.arange(k))
    total = np.zeros(gs.shape[0])
    total_sq = np.zeros(gs.shape[0])
    adjacent = np.zeros((gs.shape[0], k - 1), dtype=np.int64)
    h = np.empty(k, dtype=np.uint64)
    buckets = np.zeros(int(gs.max()), dtype=np.int64)
    for i in range(seeds.shape[0]):
        for x in range(k):
            h[x] = xxh32_short(digits[x], lengths[x], seeds[i])
        for j in range(gs.shape[0]):
            g = gs[j]
            buckets[:] = 0
            pairs = 0
            for x in range(k):
                v = h[x] % g
                pairs += buckets[v]
                buckets[v] += 1
                if x > 0 and v == h[x - 1] % g:
                    adjacent[j, x - 1] += 1
            total[j] += pairs
            total_sq[j] += pairs * pairs
    return total, total_sq, adjacent


def _exact_kernel(g0, g1, g2, g3, g4, g5):
    """A kernel counting collisions over all 2^32 seeds for six hash ranges, compiled with the
    ranges as constants (so ``h % g`` is a multiply-shift, not a division)."""

    @njit(parallel=True)
    def run(digits, lengths):
        m = lengths.shape[0]
        blocks = 1 << 12
        per_block = (1 << 32) // blocks
        counts = np.zeros((blocks, 6, m, m), dtype=np.int64)
        for blk in prange(blocks):
            h = np.empty(m, dtype=np.int64)
            for s in range(blk * per_block, (blk + 1) * per_block):
                for a in range(m):
                    h[a] = xxh32_short(digits[a], lengths[a], np.uint64(s))
                for a in range(m):
                    for b in range(a + 1, m):
                        ha, hb = h[a], h[b]
                        counts[blk, 0, a, b] += ha % g0 == hb % g0
                        counts[blk, 1, a, b] += ha % g1 == hb % g1
                        counts[blk, 2, a, b] += ha % g2 == hb % g2
                        counts[blk, 3, a, b] += ha % g3 == hb % g3
                        counts[blk, 4, a, b] += ha % g4 == hb % g4
                        counts[blk, 5, a, b] += ha % g5 == hb % g5
        return counts.sum(axis=0)

    return run


def _exact(xs: np.ndarray, gs: list[int]) -> np.ndarray:
    """Collisions of every pair of ``xs`` for every g (at most 6) over all 2^32 seeds."""
    padded = (list(gs) + [gs[-1]] * 6)[:6]
    digits, lengths = _digit_table(xs)
    return _exact_kernel(*padded)(digits, lengths)[: len(gs)]


def pooled_table(k: int, n_seeds: int, gs: list[int], rng: int) -> str:
    seeds = np.random.default_rng(rng).integers(0, 2**32, size=n_seeds, dtype=np.int64)
    start = time.perf_counter()
    total, total_sq, adjacent = _pooled(seeds.astype(np.uint64), k, np.array(gs, dtype=np.uint64))
    seconds = time.perf_counter() - start
    n_pairs = k * (k - 1) // 2
    lines = [
        f"pooled: K = {k} (all {n_pairs} pairs), {n_seeds:,} seeds (numpy default_rng({rng})), "
        f"{seconds:.1f} s",
        "",
        "| g | c_hat | 1/g | se | (c_hat - 1/g)/se | adjacent pairs: chi2 p-value |",
        "|---|---|---|---|---|---|",
    ]
    for j, g in enumerate(gs):
        mean = total[j] / n_seeds
        var = total_sq[j] / n_seeds - mean**2
        c_hat = mean / n_pairs
        se = math.sqrt(var / n_seeds) / n_pairs
        hits = adjacent[j]
        table = np.vstack([hits, n_seeds - hits])
        p_value = stats.chi2_contingency(table)[1]
        lines.append(f"| {g} | {c_hat:.7f} | {1 / g:.7f} | {se:.1e} | "
                     f"{(c_hat - 1 / g) / se:+.2f} | {p_value:.3f} |")  # fmt: skip
    return "\n".join(lines)


def exact_table(xs: list[int], gs: list[int]) -> str:
    start = time.perf_counter()
    if len(gs) > 6:
        raise SystemExit("--exact takes at most 6 hash ranges (--g)")
    counts = _exact(np.array(xs, dtype=np.int64), gs)
    seconds = time.perf_counter() - start
    lines = [
        f"exact: all 2^32 seeds, pairs of {xs}, {seconds:.0f} s",
        "",
        "| g | pair | c | c - 1/g | (c - 1/g) * 2^16 |",
        "|---|---|---|---|---|",
    ]
    for j, g in enumerate(gs):
        for a, b in itertools.combinations(range(len(xs)), 2):
            c = counts[j, a, b] / 2**32
            lines.append(f"| {g} | ({xs[a]}, {xs[b]}) | {c:.9f} | {c - 1 / g:+.2e} | "
                         f"{(c - 1 / g) * 2**16:+.3f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=1 << 22)
    parser.add_argument("--g", default="2,3,4,5,8,21")
    parser.add_argument("--rng", type=int, default=0)
    parser.add_argument("--exact", default=None, help="categories, e.g. 0,1,2,10")
    args = parser.parse_args(argv)
    gs = [int(v) for v in args.g.split(",")]
    if args.exact:
        print(exact_table([int(v) for v in args.exact.split(",")], gs))
    else:
        print(pooled_table(args.k, args.seeds, gs, args.rng))


if __name__ == "__main__":
    main()
