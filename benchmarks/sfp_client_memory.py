"""What SFP's time at n = 1e6 is made of: the same call, repeated in one process (issue 40).

``benchmarks/results/heavy_hitters_1e6.md`` has ours' SFP near pure-ldp's 20x line only in the
k = 10 cells, the first SFP run of ours after pure-ldp's.  Its client wrote one count-mean
sketch row of ``m = 1024`` signed bytes per fragment user (80 % of them): an 800 MB array at
n = 10^6, which the operating system hands over page by page on first touch; since the packed
``CMSReports`` it writes ``m / 8`` bytes a user (100 MB).  This repeats
``heavy_hitters.ours_sfp`` (Zipf(1) over 2^32 items, eps = 4, k = 10, the same users and seed
each time) ``--repeats`` times in one process, and before each run times the first touch of an
array of the reports' size (``np.ones`` of ``n_fragment`` x the bytes of one report, int8 or
packed as this SFP writes them); then, after allocating and freeing 200,000 small numpy arrays
(the pattern of a per-user Python client such as pure-ldp's), the same twice more.  If the
client's seconds move with the first-touch seconds, memory, not computation, sets the spread.

Usage::

    python benchmarks/sfp_client_memory.py --out benchmarks/results/sfp_client_memory.md

The int8 reports' run is the results file as committed at 4074867 (script at 90be75a).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import heavy_hitters as hh  # noqa: E402

EPS, K, POPULATION = 4.0, 10, "zipf32"
#: share of SFP's users who report a fragment (the rest report the word through OLH)
FRAGMENT_SHARE = 0.8


def report_width(pop: hh.Population) -> int:
    """Bytes of one fragment user's sketch report as this SFP writes it: ``m`` int8 entries, or
    ``m / 8`` bytes where SFP packs them (``CMSReports.is_packed``)."""
    from bayesldp.heavy_hitters import SFP

    sfp = SFP(EPS, K, max_length=pop.length, fragment_length=1, hash_bits=8,
              alphabet=pop.alphabet, m=hh.CMS_M, k_hash=hh.CMS_K)  # fmt: skip
    fragments = sfp.perturb(pop.items, rng=0).fragments
    return fragments.packed.shape[1] if getattr(fragments, "is_packed", False) else hh.CMS_M


def first_touch_seconds(n: int, width: int) -> float:
    """Seconds to allocate and fill an array of the fragment reports' size (``width`` bytes a
    fragment user)."""
    start = time.perf_counter()
    block = np.ones((int(FRAGMENT_SHARE * n), width), dtype=np.uint8)
    seconds = time.perf_counter() - start
    del block
    return seconds


def churn() -> None:
    """Allocate and free 200,000 arrays of 1,024 float64, as a per-user Python client does."""
    junk = [np.ones(1024) * i for i in range(200_000)]
    del junk


def measure(n: int, repeats: int, width: int) -> list[tuple[str, float, float, float]]:
    """(label, first-touch s, client s, server s) per run."""
    pop = hh.population(POPULATION, n, 0)
    # numba compiles every kernel (the warm-up's items are heavy enough to be found)
    hh.ours_sfp(hh.warm_up_population(POPULATION), hh.WARM_EPS, K, 0)
    rows = []
    labels = [f"run {i + 1}" for i in range(repeats)] + ["after churn", "after churn, again"]
    for i, label in enumerate(labels):
        if i == repeats:
            churn()
        touch = first_touch_seconds(n, width)
        run = hh.ours_sfp(pop, EPS, K, 0)
        rows.append((label, touch, run.client, run.server))
        print(f"{label}: first touch {touch:.2f} s, client {run.client:.2f} s, server "
              f"{run.server:.2f} s", file=sys.stderr, flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), os.getloadavg()
    width = report_width(hh.population(POPULATION, hh.WARM_N, 0))
    rows = measure(args.n, args.repeats, width)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    clients = [r[2] for r in rows]
    corr = float(np.corrcoef([r[1] for r in rows], clients)[0, 1])
    lines = [
        "# SFP at n = 1e6: the same call repeated in one process",
        "",
        "- Command: `python benchmarks/sfp_client_memory.py"
        + (f" --n {args.n}" if args.n != 1_000_000 else "")
        + (f" --repeats {args.repeats}" if args.repeats != 4 else "")
        + ("" if args.out == "-" else f" --out {args.out}")
        + "`",
        f"- Date: {now}; commit {commit}; {time.perf_counter() - started:.0f} s; load average "
        f"at the start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, numpy {np.__version__}",
        f"- `SFP(eps={EPS:g}, k={K}, ...)` as in `heavy_hitters.py`, {POPULATION}, n = "
        f"{args.n:,}, the same users and seed each run; first touch: `np.ones` of "
        f"{int(FRAGMENT_SHARE * args.n):,} x {width} bytes (this SFP's fragment reports: "
        f"{'packed, 1 bit an entry' if width < hh.CMS_M else 'int8, 1 byte an entry'}), timed "
        "just before each run",
        "",
        "| run | first touch s | client s | server s | users/s (client + server) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, touch, client, server in rows:
        lines.append(f"| {label} | {touch:.2f} | {client:.2f} | {server:.2f} | "
                     f"{args.n / (client + server):,.0f} |")  # fmt: skip
    lines += [
        "",
        f"Client seconds {min(clients):.2f} to {max(clients):.2f} "
        f"({max(clients) / min(clients):.1f}x apart) for the same work; correlation of the "
        f"client's seconds with the first touch's: {corr:.2f}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
