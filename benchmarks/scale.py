"""Tallying report stores at scale on Dask: GRR rows against a peer's loop, workers, memory.

Three measurements, on report files this script writes once into ``--data`` (reused when present):

1. **GRR, ``--grr-rows`` reports (default 1e8) in ``--files`` Parquet files** (K = 100,
   epsilon = 1, one ``report`` column, uint8).  bayesldp tallies the directory with
   :func:`bayesldp.workflows.dask_tally.tally_reports` on a ``dask.distributed`` LocalCluster of
   one single-threaded worker process and of two (both started and warmed before the clock, runs
   alternating between them; median of ``--repeats`` runs, each tally checked to hold every
   report).
   The peer is multi-freq-ldpy 0.2.5's aggregator, ``GRR_Aggregator_MI``, whose count is a
   Python loop over the reports: it is timed on the first ``--peer-sample`` reports of the first
   file (read by pandas, as the file's reading is timed too) and extrapolated linearly to all
   rows: ``read seconds per row x rows + loop seconds per report x rows``.  pure-ldp's
   ``DEServer.aggregate`` (one call per report) is timed the same way when pure-ldp is installed.
2. **OUE, K = 100, ``--oue-reports`` reports (default 1e7)** in Parquet files of 100 bit
   columns: the client's peak resident memory while it tallies them on a two-worker LocalCluster,
   measured in a child process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``: the client only,
   not the workers), beside the size of the tally it ends with.

A floor for the worker scaling: the same per-file work (read, tally) in plain processes of a
``concurrent.futures`` pool, one process for every file and then two with half each.
3. The incremental store's guarantees (same file twice, SIGKILL during an append) are tests,
   not timings: ``tests/test_tally_store.py``.

Usage::

    python benchmarks/scale.py --data /tmp/bayesldp-scale     # writes benchmarks/results/scale.md
    python benchmarks/scale.py --quick --data /tmp/s --out -   # small smoke run, printed only

Needs multi-freq-ldpy (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

K = 100
EPSILON = 1.0
SEED = 20261123
RESULTS = Path(__file__).resolve().parent / "results" / "scale.md"
#: peers that could not be imported, with the reason (printed under the table)
MISSING_PEERS: list[str] = []


# ----------------------------------------------------------------------------- data
def write_grr(directory: Path, rows: int, files: int) -> Path:
    """``rows`` GRR reports of a Zipf-like population in ``files`` Parquet files (once)."""
    import pandas as pd

    import bayesldp

    out = directory / f"grr_k{K}_{rows}_{files}"
    if (out / "DONE").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    mech = bayesldp.GRR(K, EPSILON)
    theta = 1.0 / np.arange(1, K + 1) ** 1.1
    theta /= theta.sum()
    streams = np.random.SeedSequence(SEED).spawn(files)
    for i, (stream, size) in enumerate(zip(streams, _split(rows, files), strict=True)):
        rng = np.random.default_rng(stream)
        reports = mech.perturb(rng.choice(K, size=size, p=theta), rng=rng)
        frame = pd.DataFrame({"report": reports.astype(np.uint8)})
        frame.to_parquet(out / f"part-{i:04d}.parquet", index=False)
    (out / "DONE").write_text(str(rows))
    return out


def write_oue(directory: Path, reports: int, files: int) -> Path:
    """``reports`` OUE reports (K bit columns) in ``files`` Parquet files (once)."""
    import pandas as pd

    import bayesldp

    out = directory / f"oue_k{K}_{reports}_{files}"
    if (out / "DONE").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    mech = bayesldp.OUE(K, EPSILON)
    streams = np.random.SeedSequence(SEED + 1).spawn(files)
    for i, (stream, size) in enumerate(zip(streams, _split(reports, files), strict=True)):
        rng = np.random.default_rng(stream)
        frame = mech.reports_to_frame(mech.perturb(rng.integers(0, K, size), rng=rng))
        pd.DataFrame(frame).to_parquet(out / f"part-{i:04d}.parquet", index=False)
    (out / "DONE").write_text(str(reports))
    return out


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


# ----------------------------------------------------------------------------- bayesldp
def time_bayesldp(directory: Path, rows: int, repeats: int) -> dict[int, list[float]]:
    """Seconds per tally of the directory on LocalClusters of one and of two worker processes,
    both started (and warmed) before the clock, runs alternating between them so that a change
    in the machine's load falls on both alike."""
    from distributed import LocalCluster

    import bayesldp
    from bayesldp.workflows.dask_tally import report_files, tally_reports

    mech = bayesldp.GRR(K, EPSILON)
    options = {"threads_per_worker": 1, "processes": True, "dashboard_address": None}
    times: dict[int, list[float]] = {1: [], 2: []}
    with (
        LocalCluster(n_workers=1, **options) as one,
        LocalCluster(n_workers=2, **options) as two,
    ):
        addresses = {1: one.scheduler_address, 2: two.scheduler_address}
        for workers, address in addresses.items():  # warm-up: imports and kernels
            tally_reports(report_files(directory)[:workers], mech, scheduler=address)
        for _ in range(repeats):
            for workers, address in addresses.items():
                start = time.perf_counter()
                tally = tally_reports(directory, mech, scheduler=address)
                times[workers].append(time.perf_counter() - start)
                if tally.n != rows:
                    raise RuntimeError(f"tally holds {tally.n} reports, expected {rows}")
    return times


# ----------------------------------------------------------------------------- floor
def _tally_files(paths: list[Path]) -> int:
    """One process's share of the floor: tally its files one after another (no Dask)."""
    import bayesldp
    from bayesldp.workflows.report_files import tally_file

    mech = bayesldp.GRR(K, EPSILON)
    return sum(tally_file(mech, path, threads=False).n for path in paths)


def time_floor(directory: Path, rows: int, repeats: int) -> dict[int, list[float]]:
    """The same per-file work in plain processes (``concurrent.futures``, no scheduler): one
    process for every file, then two processes with half each; what two cores give here."""
    from concurrent.futures import ProcessPoolExecutor

    files = sorted(directory.glob("*.parquet"))
    times: dict[int, list[float]] = {1: [], 2: []}
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_tally_files, [files[:1], files[1:2]]))  # warm both processes
        for _ in range(repeats):
            for workers in (1, 2):
                start = time.perf_counter()
                total = sum(pool.map(_tally_files, [files[i::workers] for i in range(workers)]))
                times[workers].append(time.perf_counter() - start)
                if total != rows:
                    raise RuntimeError(f"floor tallied {total} reports, expected {rows}")
    return times


# ----------------------------------------------------------------------------- peers
def time_peers(directory: Path, rows: int, sample: int) -> dict[str, dict[str, float]]:
    """Seconds per row of reading one file with pandas, and per report of each peer's loop."""
    import pandas as pd

    first = sorted(directory.glob("*.parquet"))[0]
    start = time.perf_counter()
    reports = pd.read_parquet(first)["report"].to_numpy()
    read_per_row = (time.perf_counter() - start) / len(reports)
    sample_reports = reports[:sample].astype(np.int64).tolist()
    out = {}
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI

    start = time.perf_counter()
    GRR_Aggregator_MI(sample_reports, K, EPSILON)
    out["multi-freq-ldpy 0.2.5 GRR_Aggregator_MI"] = (time.perf_counter() - start) / sample
    try:
        from pure_ldp.frequency_oracles.direct_encoding import DEServer
    except ImportError as exc:  # its package imports scikit-learn and statsmodels too
        MISSING_PEERS.append(f"pure-ldp not timed: {exc}")
    else:
        server = DEServer(epsilon=EPSILON, d=K, index_mapper=lambda x: x)
        start = time.perf_counter()
        for report in sample_reports:
            server.aggregate(report)
        server.estimate_all(range(K))
        out["pure-ldp 1.2.0 DEServer.aggregate"] = (time.perf_counter() - start) / sample
    return {
        name: {"read": read_per_row, "loop": loop, "total": (read_per_row + loop) * rows}
        for name, loop in out.items()
    }


# ----------------------------------------------------------------------------- memory
def oue_client_memory(directory: Path, reports: int) -> dict[str, float]:
    """Peak resident memory of a child process that tallies ``directory`` (OUE) on Dask."""
    code = f"""
import json, resource, sys, time
import bayesldp
from distributed import LocalCluster
from bayesldp.workflows.dask_tally import tally_reports
mech = bayesldp.OUE({K}, {EPSILON})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                  dashboard_address=None) as cluster:
    start = time.perf_counter()
    tally = tally_reports(sys.argv[1], mech, scheduler=cluster.scheduler_address)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert tally.n == {reports}, tally.n
    print(json.dumps({{"before_kib": before, "peak_kib": peak, "seconds": seconds,
                       "rows": tally.n_rows, "tally_bytes": tally.support.nbytes
                       + tally.counts.nbytes}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(directory)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- report
def render(args, info, grr, floor, peers, memory, seconds) -> str:
    one, two = statistics.median(grr[1]), statistics.median(grr[2])
    best_peer = min(peers.values(), key=lambda p: p["total"])
    lines = [
        "# Tallying report stores at scale on Dask",
        "",
        f"- Command: `python benchmarks/scale.py {' '.join(sys.argv[1:])}`",
        f"- Date: {info['date']}; whole run {seconds:.0f} s",
        f"- Machine: {info['machine']}",
        "",
        f"## GRR: {args.grr_rows:,} reports (K = {K}, eps = {EPSILON:g}) in {args.files} "
        "Parquet files",
        "",
        f"bayesldp: `tally_reports(directory, GRR)` on a LocalCluster, median of {args.repeats} "
        "runs (both clusters started and warmed before the clock, runs alternating). Peers: "
        f"their aggregation loop timed on {args.peer_sample:,} reports of the first file and "
        "pandas' read of that file, extrapolated to every row.",
        "",
        "| tally of all rows | seconds | reports/s | vs 1 worker | faster peer / this |",
        "|---|---:|---:|---:|---:|",
    ]
    for workers, times in sorted(grr.items()):
        med = statistics.median(times)
        lines.append(
            f"| bayesldp, {workers} worker{'s' if workers > 1 else ''} | {med:.2f} | "
            f"{args.grr_rows / med:,.0f} | {one / med:.2f}x | **{best_peer['total'] / med:.0f}x** |"
        )
    for name, peer in peers.items():
        lines.append(
            f"| {name} (extrapolated: read {peer['read'] * 1e9:.1f} ns/row, loop "
            f"{peer['loop'] * 1e9:.0f} ns/report) | {peer['total']:.0f} | "
            f"{args.grr_rows / peer['total']:,.0f} | | |"
        )
    floor_ratio = statistics.median(floor[1]) / statistics.median(floor[2])
    lines += [f"\n{note}" for note in MISSING_PEERS]
    lines += [
        "",
        f"Two workers against one: **{one / two:.2f}x** (target 1.6x). The floor, the same "
        f"per-file work in plain processes without Dask (one process for all files, then two "
        f"with half each; median of {args.repeats}): {statistics.median(floor[1]):.2f} s and "
        f"{statistics.median(floor[2]):.2f} s, **{floor_ratio:.2f}x**: what two cores of this "
        "machine give this work. Each run's times: "
        + "; ".join(
            f"{w} worker(s): {', '.join(f'{t:.2f}' for t in ts)} s" for w, ts in sorted(grr.items())
        ),
        "",
        f"## OUE: {args.oue_reports:,} reports (K = {K}, eps = {EPSILON:g}), client memory",
        "",
        "| client peak RSS | client RSS before the cluster | tally rows | tally in memory | "
        "seconds |",
        "|---:|---:|---:|---:|---:|",
        f"| **{memory['peak_kib'] / 2**20:.2f} GiB** | {memory['before_kib'] / 2**20:.2f} GiB | "
        f"{memory['rows']:,} | {memory['tally_bytes'] / 2**30:.2f} GiB | "
        f"{memory['seconds']:.1f} |",
        "",
        "Target: client peak below 2 GB. The tally keeps one support row (K booleans) per distinct "
        "report, so its own size bounds the client's memory from below.",
        "",
    ]
    return "\n".join(lines)


def machine_info() -> dict[str, str]:
    import dask
    import pandas as pd

    load = os.getloadavg()
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f}; Python {platform.python_version()}, numpy {np.__version__}, pandas "
        f"{pd.__version__}, dask {dask.__version__}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="directory for report files")
    parser.add_argument("--grr-rows", type=int, default=100_000_000)
    parser.add_argument("--oue-reports", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--peer-sample", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="1e6 GRR rows, 1e5 OUE reports")
    parser.add_argument("--out", default=str(RESULTS), help="results file, or - to print only")
    args = parser.parse_args(argv)
    if args.quick:
        args.grr_rows, args.oue_reports, args.peer_sample = 1_000_000, 100_000, 100_000
        args.files, args.repeats = 4, 1
    info = machine_info()
    start = time.perf_counter()
    grr_dir = write_grr(args.data, args.grr_rows, args.files)
    oue_dir = write_oue(args.data, args.oue_reports, args.files)
    grr = time_bayesldp(grr_dir, args.grr_rows, args.repeats)
    floor = time_floor(grr_dir, args.grr_rows, args.repeats)
    peers = time_peers(grr_dir, args.grr_rows, args.peer_sample)
    memory = oue_client_memory(oue_dir, args.oue_reports)
    text = render(args, info, grr, floor, peers, memory, time.perf_counter() - start)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
