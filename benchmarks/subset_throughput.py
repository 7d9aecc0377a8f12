"""Perturb throughput of subset selection: bayesldp against multi-freq-ldpy 0.2.5's ``SS_Client``.

For K in {10, 100, 1000} and epsilon = 1, both randomise the same true values (drawn once per K
from a fixed seed; the peer uses a prefix) with the same subset size (multi-freq-ldpy's
``max(1, rint(K / (e^eps + 1)))``, given to bayesldp as ``d``).  bayesldp: ``perturb`` on
``min(1,000,000, 25,000,000 / d)`` users (the int64 reports then take at most 200 MB: at
K = 1000 a million users' reports would take 2.15 GB, and allocating that much fresh memory
per call measures the machine's page faults more than the mechanism), best of 5 calls.
multi-freq-ldpy: its numba-compiled ``SS_Client`` called once per user in a Python loop (its
API; compiled before timing), best of 3 runs on as many users as take about a third of
``--peer-seconds`` each.  Best-of on both sides, since the machine is shared and its load moves
during a run.  Both outputs are checked: the share of reports holding the true value must be
within 6 standard errors of ``p* = d e^eps / (d e^eps + K - d)``.

Usage::

    python benchmarks/subset_throughput.py     # writes benchmarks/results/subset_throughput.md
    python benchmarks/subset_throughput.py --quick     # K = 10 only, printed
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

import bayesldp
from bayesldp.mechanisms.subset import SubsetSelection

KS = (10, 100, 1000)
EPSILON = 1.0
N = 1_000_000
OUT = Path(__file__).parent / "results" / "subset_throughput.md"


def check_rate(has_true: np.ndarray, p: float, who: str) -> None:
    se = math.sqrt(p * (1 - p) / has_true.size)
    if abs(has_true.mean() - p) > 6 * se:
        raise SystemExit(f"{who}: share with the true value {has_true.mean():.4f}, p* = {p:.4f}")


def ours(k: int, x: np.ndarray, d: int) -> tuple[float, int]:
    mech = SubsetSelection(k, EPSILON, d=d)
    x = x[: min(x.size, 25_000_000 // d)]
    mech.perturb(x[:10], rng=0)  # compile (or load the cached kernel)
    best = math.inf
    for rep in range(5):
        start = time.perf_counter()
        reports = mech.perturb(x, rng=rep)
        best = min(best, time.perf_counter() - start)
    check_rate((reports == x[:, None]).any(axis=1), mech.p_star, "bayesldp")
    return x.size / best, x.size


def peer(k: int, x: np.ndarray, d: int, seconds: float) -> tuple[float, int]:
    from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Client

    SS_Client(0, k, EPSILON)  # compile
    pilot = 2000
    start = time.perf_counter()
    for v in x[:pilot]:
        SS_Client(int(v), k, EPSILON)
    per_user = (time.perf_counter() - start) / pilot
    m = int(min(x.size, max(pilot, seconds / 3 / per_user)))
    elapsed = math.inf
    for _ in range(3):
        start = time.perf_counter()
        reports = [SS_Client(int(v), k, EPSILON) for v in x[:m]]
        elapsed = min(elapsed, time.perf_counter() - start)
    p = d * math.exp(EPSILON) / (d * math.exp(EPSILON) + k - d)
    check_rate(np.array([v in r for v, r in zip(x[:m], reports, strict=True)]), p, "peer")
    return m / elapsed, m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer-seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="K = 10, 100,000 users, 0.3 s per peer "
                    "run; prints, writes nothing")  # fmt: skip
    args = ap.parse_args()
    ks, n = (KS[:1], 100_000) if args.quick else (KS, N)
    peer_seconds = 0.3 if args.quick else args.peer_seconds
    load = os.getloadavg()
    rows = []
    for k in ks:
        x = np.random.default_rng(k).integers(0, k, n)
        d = int(max(1, np.rint(k / (math.exp(EPSILON) + 1))))
        ups, n = ours(k, x, d)
        peer_ups, m = peer(k, x, d, peer_seconds)
        rows.append(f"| {k} | {d} | {ups:,.0f} ({n:,} users) | {peer_ups:,.0f} ({m:,} users) | "
                    f"**{ups / peer_ups:,.0f}x** |")  # fmt: skip
    load_end = os.getloadavg()
    text = "\n".join([
        "# Subset selection: perturb throughput against multi-freq-ldpy",
        "",
        f"epsilon = {EPSILON:g}; subset size d = max(1, rint(K / (e^eps + 1))) for both; "
        "users per second (bayesldp: best of 5 `perturb` calls on the users shown; "
        "multi-freq-ldpy: one `SS_Client` call per user, compiled before timing, best of 3 runs "
        "on the users shown).",
        "",
        "- Command: `python benchmarks/subset_throughput.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} at "
        f"the start and {load_end[0]:.2f} at the end (shared with other jobs); Python "
        f"{platform.python_version()}, numpy {np.__version__}, bayesldp "
        f"{bayesldp.__version__}, multi-freq-ldpy {importlib.metadata.version('multi-freq-ldpy')}",
        "",
        "| K | d | bayesldp users/s | multi-freq-ldpy users/s | ratio |",
        "|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])  # fmt: skip
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
