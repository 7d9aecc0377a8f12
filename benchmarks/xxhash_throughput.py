"""Throughput of OLHXX (xxhash local hashing) against OLH (Carter-Wegman) in bayesldp.

For K in ``--k`` (eps = 1, so g = 4) and n = ``--n`` users with uniform true values, times
``perturb``, ``tally`` and ``unbiased_frequencies`` separately (best of ``--repeats``,
``time.perf_counter``, after one warm-up call so numba compilation is excluded) and prints users
per second.  For reference it also times python-xxhash called once per (value, seed) pair in a
Python loop, the way the peers hash (``xxh32_intdigest(str(x).encode(), seed)``), if installed.

Usage::

    python benchmarks/xxhash_throughput.py            # K = 10, 100, 1000; n = 100,000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayesldp import OLH, OLHXX


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _row(cls, k: int, n: int, repeats: int) -> str:
    mech = cls(k, 1.0)
    x = np.random.default_rng(0).integers(0, k, size=n)
    reports = mech.perturb(x, rng=1)
    tally = mech.tally(reports)  # warm-up: compile
    t_perturb = _best(lambda: mech.perturb(x, rng=1), repeats)
    t_tally = _best(lambda: mech.tally(reports), repeats)
    t_oracle = _best(lambda: mech.unbiased_frequencies(tally), repeats)
    total = t_perturb + t_tally + t_oracle
    return (f"| {cls.__name__} | {k} | {n:,} | {n / t_perturb:,.0f} | {n / t_tally:,.0f} | "
            f"{n / total:,.0f} |")  # fmt: skip


def _python_xxhash_rate(n: int) -> str:
    try:
        import xxhash
    except ImportError:
        return "python-xxhash not installed"
    seeds = np.random.default_rng(2).integers(0, 2**32, size=n).tolist()
    start = time.perf_counter()
    for i, seed in enumerate(seeds):
        xxhash.xxh32_intdigest(str(i % 100).encode(), seed)
    rate = n / (time.perf_counter() - start)
    return f"python-xxhash {xxhash.VERSION}, one call per pair in a Python loop: {rate:,.0f} hash/s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="10,100,1000")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print("| mechanism | K | n | perturb users/s | tally users/s | perturb+tally+oracle users/s |")
    print("|---|---|---|---|---|---|")
    for k in (int(v) for v in args.k.split(",")):
        for cls in (OLH, OLHXX):
            print(_row(cls, k, args.n, args.repeats))
    print()
    print(_python_xxhash_rate(args.n * 10))


if __name__ == "__main__":
    main()
