"""What SFP's time at n = 1e6 is made of: the same call, repeated in one process.

``benchmarks/results/heavy_hitters_1e6.md`` (as committed at 4074867) had ours' SFP near
pure-ldp's 20x line only in the k = 10 cells, each the first SFP run of ours after pure-ldp's
(about 85 s of per-user Python loops).  This repeats ``heavy_hitters.ours_sfp`` (Zipf(1) over
2^32 items, eps = 4, k = 10, the same users and seed each time) ``--repeats`` times back to
back in one process, timing before each run the first touch of an array of the fragment
reports' size (``np.ones`` of ``n_fragment`` x the bytes of one report, int8 or packed as this
SFP writes them); then twice after allocating and freeing 200,000 small numpy arrays (the
pattern of a per-user Python client such as pure-ldp's); then twice after ``--idle`` seconds
of sleep, the run first and the touch after another idle spell (so neither warms the other's
pages).

The machine's answer (the file's idle rows, and the header's line on the balloon device): on a
virtual machine whose balloon device reports free pages (``VIRTIO_BALLOON_F_REPORTING``),
memory a process frees goes back to the host within seconds, and touching it again costs a
host page fault per page; back to back, the freed pages are reused at guest speed.  A run
after an idle spell (or after pure-ldp's loop, which allocates only small objects) pays that
for every page it allocates: the int8 reports' 800 MB cost 1.80 s at 4074867.

Usage::

    python benchmarks/investigations/sfp_client_memory.py \
        --out benchmarks/investigations/results/sfp_client_memory.md

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

ROOT = Path(__file__).resolve().parents[2]
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
              alphabet=pop.alphabet, m=hh.CMS_M, k_hash=hh.CMS_K, holdout=0.0)  # fmt: skip
    fragments = sfp.perturb(pop.items, rng=0).fragments
    return fragments.packed.shape[1] if getattr(fragments, "is_packed", False) else hh.CMS_M


def page_reporting() -> str:
    """Whether a virtio balloon device here reports free pages to the host (feature bit 5,
    ``VIRTIO_BALLOON_F_REPORTING``), read from sysfs."""
    found = []
    for path in Path("/sys/bus/virtio/drivers/virtio_balloon").glob("virtio*/features"):
        bits = path.read_text().strip()
        found.append(len(bits) > 5 and bits[5] == "1")
    if not found:
        return "no virtio balloon device found"
    return "on" if any(found) else "off"


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


def measure(n: int, repeats: int, width: int, idle: float) -> list[tuple[str, float, float, float]]:
    """(label, first-touch s, client s, server s) per run: ``repeats`` runs back to back (the
    touch just before each), two after churn, then two after ``idle`` seconds of sleep (the run
    first, then, after another ``idle`` seconds, the touch, so neither warms the other's pages).
    """
    pop = hh.population(POPULATION, n, 0)
    # numba compiles every kernel (the warm-up's items are heavy enough to be found)
    hh.ours_sfp(hh.warm_up_population(POPULATION), hh.WARM_EPS, K, 0)
    rows = []
    labels = [f"run {i + 1}" for i in range(repeats)] + ["after churn", "after churn, again"]
    for i, label in enumerate(labels):
        if i == repeats:
            churn()
        touch = first_touch_seconds(n, width)
        rows.append((label, touch, *_timed(pop)))
        _say(rows[-1])
    for again in ("", ", again"):
        time.sleep(idle)
        run = _timed(pop)
        time.sleep(idle)
        rows.append((f"after {idle:g} s idle{again}", first_touch_seconds(n, width), *run))
        _say(rows[-1])
    return rows


def _timed(pop: hh.Population) -> tuple[float, float]:
    run = hh.ours_sfp(pop, EPS, K, 0)
    return run.client, run.server


def _say(row: tuple[str, float, float, float]) -> None:
    label, touch, client, server = row
    print(f"{label}: first touch {touch:.2f} s, client {client:.2f} s, server {server:.2f} s",
          file=sys.stderr, flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of sleep (last rows)")
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), os.getloadavg()
    width = report_width(hh.population(POPULATION, hh.WARM_N, 0))
    rows = measure(args.n, args.repeats, width, args.idle)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    clients = [r[2] for r in rows]
    corr = float(np.corrcoef([r[1] for r in rows], clients)[0, 1])
    lines = [
        "# SFP at n = 1e6: the same call repeated in one process",
        "",
        "- Command: `python benchmarks/investigations/sfp_client_memory.py"
        + (f" --n {args.n}" if args.n != 1_000_000 else "")
        + (f" --repeats {args.repeats}" if args.repeats != 4 else "")
        + (f" --idle {args.idle:g}" if args.idle != 30 else "")
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
        "just before each run (the idle rows: after the run and another idle spell)",
        f"- Free page reporting of a virtio balloon device: {page_reporting()}",
        "",
        "| run | first touch s | client s | server s | users/s (client + server) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, touch, client, server in rows:
        lines.append(f"| {label} | {touch:.2f} | {client:.2f} | {server:.2f} | "
                     f"{args.n / (client + server):,.0f} |")  # fmt: skip
    total = [c + s for _, _, c, s in rows]
    # rows: runs 1..R, two after churn, two after idle; "back to back" leaves out run 1
    busy, rested = total[1 : args.repeats + 2], total[args.repeats + 2 :]
    lines += [
        "",
        f"Client seconds {min(clients):.2f} to {max(clients):.2f} "
        f"({max(clients) / min(clients):.1f}x apart) for the same work; correlation of the "
        f"client's seconds with the first touch's: {corr:.2f}. Client + server: "
        f"{min(busy):.2f} to {max(busy):.2f} s back to back (runs 2 on, and after churn), "
        f"{min(rested):.2f} to {max(rested):.2f} s after {args.idle:g} s idle.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
