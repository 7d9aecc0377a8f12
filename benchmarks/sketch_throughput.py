"""Perturb throughput of Apple's count-mean sketches: bayesldp's CMS and HCMS against pure-ldp
1.2.0's ``CMSClient`` (``is_hadamard`` False and True), the only peer that has them.

Setting: epsilon = 1, sketch width m = 1024 and k_hash = 256 hash functions (Apple's m; a
smaller number of rows than Apple's 65,536, which changes neither client's cost per user), for
K in {10, 100, 1000} categories.  Both randomise the same true values (drawn once per K from a
fixed seed; the peer uses a prefix).

- bayesldp: ``perturb`` on ``min(1,000,000, 200,000,000 / report bytes)`` users (CMS: 195,312
  users of 1,024 int8 entries, at most 200 MB of reports; HCMS: 1,000,000), best of 5 calls.
- pure-ldp: ``CMSClient.privatise`` called once per user (its API), best of 3 runs on as many
  users as take about a third of ``--peer-seconds`` each.  pure-ldp's hash functions
  (``pure_ldp.core.generate_hash``: ``xxh64(str(x), seed=j) % m``) are given with the string
  encoded to UTF-8 first, which is what xxhash 3 did inside and what xxhash 4 (installed here)
  no longer does; pure-ldp's ``CMSServer`` does not build under numpy 2 (``np.zeros(None)``), so
  the hash functions are made directly, as its server would.  pure-ldp's
  ``frequency_oracles/__init__`` imports scikit-learn (for RAPPOR); without it the
  ``apple_cms`` subpackage is loaded directly.

Both outputs are checked: the share of reports whose entry at the user's bucket is kept (CMS:
``v[h_j(x)] = +1``; HCMS: ``b = H[l, h_j(x)]``) must be within 6 standard errors of
``1 - 1/(1 + e^{eps/2})`` (CMS) or ``1 - 1/(1 + e^eps)`` (HCMS).

Usage::

    python benchmarks/sketch_throughput.py     # writes benchmarks/results/sketch_throughput.md
    python benchmarks/sketch_throughput.py --quick     # K = 10 only, printed
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import importlib.metadata
import math
import os
import platform
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

import bayesldp
from bayesldp.mechanisms.sketch import CMS, HCMS

KS = (10, 100, 1000)
EPSILON = 1.0
M = 1024
K_HASH = 256
N = 1_000_000
REPORT_BYTES = 200_000_000
OUT = Path(__file__).parent / "results" / "sketch_throughput.md"


def check_rate(kept: np.ndarray, p: float, who: str) -> None:
    se = math.sqrt(p * (1 - p) / kept.size)
    if abs(kept.mean() - p) > 6 * se:
        raise SystemExit(f"{who}: share of kept entries {kept.mean():.4f}, expected {p:.4f}")


def import_cms_client() -> Any:
    """pure-ldp's ``CMSClient`` (see the module docstring for the scikit-learn workaround)."""
    try:
        importlib.import_module("pure_ldp.frequency_oracles")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "sklearn":
            raise
        import pure_ldp

        stub = types.ModuleType("pure_ldp.frequency_oracles")
        stub.__path__ = [str(Path(pure_ldp.__file__).parent / "frequency_oracles")]
        sys.modules["pure_ldp.frequency_oracles"] = stub
    from pure_ldp.frequency_oracles.apple_cms.cms_client import CMSClient

    return CMSClient


def peer_hash_funcs() -> list:
    import xxhash

    return [
        (lambda data, seed=seed: xxhash.xxh64(str(data).encode(), seed=seed).intdigest() % M)
        for seed in range(K_HASH)
    ]


def ours(mech: CMS | HCMS, x: np.ndarray) -> tuple[float, int]:
    per_user = M if isinstance(mech, CMS) else 1
    x = x[: min(x.size, REPORT_BYTES // per_user)]
    mech.perturb(x[:10], rng=0)  # compile (or load the cached kernel)
    best = math.inf
    for rep in range(5):
        start = time.perf_counter()
        reports = mech.perturb(x, rng=rep)
        best = min(best, time.perf_counter() - start)
    bucket = mech.hashes[reports.row, x]
    if isinstance(mech, CMS):
        kept = reports.bits[np.arange(x.size), bucket] == 1
    else:
        parity = (np.bitwise_count(reports.index & bucket) & 1).astype(np.int64)
        kept = reports.bit == 1 - 2 * parity
    check_rate(kept, mech.keep, f"bayesldp {mech.name}")
    return x.size / best, x.size


def peer(hadamard: bool, x: np.ndarray, seconds: float) -> tuple[float, int]:
    client_cls = import_cms_client()
    funcs = peer_hash_funcs()
    client = client_cls(EPSILON, funcs, M, is_hadamard=hadamard)
    pilot = 1000
    start = time.perf_counter()
    for v in x[:pilot]:
        client.privatise(int(v))
    per_user = (time.perf_counter() - start) / pilot
    m = int(min(x.size, max(pilot, seconds / 3 / per_user)))
    elapsed = math.inf
    for _ in range(3):
        start = time.perf_counter()
        reports = [client.privatise(int(v)) for v in x[:m]]
        elapsed = min(elapsed, time.perf_counter() - start)
    # the client hashes str(data): the bucket of x in row j is funcs[j](str(x))
    if hadamard:
        kept = np.array([
            w == (-1) ** bin(index & funcs[j](str(int(v)))).count("1")
            for v, (w, j, index) in zip(x[:m], reports, strict=True)
        ])  # fmt: skip
        p = 1 - 1 / (1 + math.exp(EPSILON))
    else:
        kept = np.array([
            vec[funcs[j](str(int(v)))] == 1 for v, (vec, j) in zip(x[:m], reports, strict=True)
        ])  # fmt: skip
        p = 1 - 1 / (1 + math.exp(EPSILON / 2))
    check_rate(kept, p, f"pure-ldp {'HCMS' if hadamard else 'CMS'}")
    return m / elapsed, m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer-seconds", type=float, default=6.0)
    ap.add_argument("--quick", action="store_true", help="K = 10, 100,000 users, 0.3 s per peer "
                    "run; prints, writes nothing")  # fmt: skip
    args = ap.parse_args()
    ks, n = (KS[:1], 100_000) if args.quick else (KS, N)
    peer_seconds = 0.3 if args.quick else args.peer_seconds
    load = os.getloadavg()
    rows = []
    for k in ks:
        x = np.random.default_rng(k).integers(0, k, n)
        for cls, hadamard in ((CMS, False), (HCMS, True)):
            mech = cls(k, EPSILON, m=M, k_hash=K_HASH)
            ups, n = ours(mech, x)
            peer_ups, m = peer(hadamard, x, peer_seconds)
            rows.append(f"| {cls.name} | {k} | {ups:,.0f} ({n:,} users) | {peer_ups:,.0f} "
                        f"({m:,} users) | **{ups / peer_ups:,.0f}x** |")  # fmt: skip
            print(rows[-1], flush=True)
    load_end = os.getloadavg()
    text = "\n".join([
        "# Count-mean sketches: perturb throughput against pure-ldp",
        "",
        f"epsilon = {EPSILON:g}, m = {M}, k_hash = {K_HASH}; users per second (bayesldp: best of "
        "5 `perturb` calls on the users shown; pure-ldp: one `CMSClient.privatise` call per "
        "user, best of 3 runs on the users shown).",
        "",
        "- Command: `python benchmarks/sketch_throughput.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} at "
        f"the start and {load_end[0]:.2f} at the end (shared with other jobs); Python "
        f"{platform.python_version()}, numpy {np.__version__}, bayesldp "
        f"{bayesldp.__version__}, pure-ldp {importlib.metadata.version('pure-ldp')}, xxhash "
        f"{importlib.metadata.version('xxhash')}",
        "",
        "| mechanism | K | bayesldp users/s | pure-ldp users/s | ratio |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
    ])  # fmt: skip
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
