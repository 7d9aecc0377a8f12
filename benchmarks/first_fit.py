"""First-run cost of ``bayesldp.fit``: a cold process with an empty numba cache, and a warm one.

Problem: GRR, K = 20, n = 100,000, eps = 1, theta drawn from Dirichlet(1) with a fixed seed, the
default ``fit(tally)`` (method "hmc", 4 chains x 1000 draws after 1000 tuning steps).

Each run is a fresh Python process (imports included) timed from outside:

* cold: ``NUMBA_CACHE_DIR`` points at a new empty directory, so every numba kernel bayesldp
  (and ArviZ) uses is compiled, as on the first call after an install;
* warm: the same directory again, now filled by the cold run: kernels are loaded from disk.

Reported: whole-process wall seconds and CPU seconds (user + sys of the child, less sensitive to
a busy machine than wall time), the medians over ``--repeats`` cold/warm pairs, the seconds
inside ``fit`` alone, and whether the compile notice was printed to standard error (it must be
in every cold run and in no warm run).

Usage::

    python benchmarks/first_fit.py --repeats 3 --baseline ../main \
        --write benchmarks/results/first_fit.md

``--baseline`` runs another checkout (the code before a change) interleaved with this one, so
that both meet the same load; the compile notice is new, so a baseline shows it 0 times.

``--fresh-venv`` adds, per repeat, a new virtual environment with this checkout ``pip install``-ed
into it (not imported from the source tree), then its cold and warm runs: the first ``fit`` a new
user meets after installing (the install itself is not timed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
K, N, EPSILON, SEED = 20, 100_000, 1.0, 20240601

CHILD = f"""
import time
t0 = time.perf_counter()
import numpy as np
import bayesldp
gen = np.random.default_rng({SEED})
theta = gen.dirichlet(np.ones({K}))
tally = bayesldp.GRR({K}, {EPSILON}).simulate_tally(gen.multinomial({N}, theta), rng=gen)
t1 = time.perf_counter()
idata = bayesldp.fit(tally, random_seed=1)
t2 = time.perf_counter()
print("RESULT", t1 - t0, t2 - t1, idata.posterior.attrs["ess_bulk_min"])
"""


def run_child(
    cache_dir: str, root: Path | None = ROOT, python: str = sys.executable
) -> dict[str, float | bool]:
    """One whole-process fit with the given numba cache directory.

    ``root`` is the source tree to import bayesldp from; ``None`` imports the package installed
    in ``python``'s environment (the child then runs in the cache directory, away from any tree).
    """
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    env.pop("PYTHONPATH", None)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [python, "-c", CHILD],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=cache_dir if root is None else root,  # with -c, the cwd comes first on sys.path
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    _, setup, fit, ess = line.split()
    from bayesldp.bayes._feedback import COMPILE_MESSAGE

    return {
        "wall": wall,
        "cpu": cpu,
        "setup": float(setup),
        "fit": float(fit),
        "ess": float(ess),
        "message": COMPILE_MESSAGE in proc.stderr,
    }


def fresh_venv(where: str) -> str:
    """A new virtual environment with this checkout pip-installed; returns its python."""
    venv = Path(where) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", str(ROOT)], check=True, cwd=where)
    return python


def median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="cold/warm pairs (default 3)")
    parser.add_argument("--write", type=Path, help="write the markdown table to this file")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of bayesldp (e.g. the main branch) run the same way, interleaved",
    )
    parser.add_argument(
        "--fresh-venv",
        action="store_true",
        help="also time cold and warm runs in a new venv with this checkout installed, per repeat",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    load_before = os.getloadavg()
    trees = {"": ROOT}
    if args.baseline is not None:
        trees[f"baseline ({args.baseline})"] = args.baseline.resolve()
    runs: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for label, root in trees.items():
            cache = tempfile.mkdtemp(prefix="bayesldp-numba-")
            try:
                for kind in ("cold", "warm"):
                    name = f"{kind} {label}".strip()
                    runs.setdefault(name, []).append(run_child(cache, root))
                    print(name, json.dumps(runs[name][-1]), flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
        if args.fresh_venv:
            where = tempfile.mkdtemp(prefix="bayesldp-venv-")
            try:
                python = fresh_venv(where)
                cache = tempfile.mkdtemp(dir=where, prefix="numba-")
                for kind in ("cold", "warm"):
                    name = f"{kind}, fresh venv"
                    runs.setdefault(name, []).append(run_child(cache, None, python))
                    print(name, json.dumps(runs[name][-1]), flush=True)
            finally:
                shutil.rmtree(where, ignore_errors=True)
    load_after = os.getloadavg()
    lines = [
        "# First fit: cold (empty numba cache) and warm, whole process",
        "",
        f"Written by `benchmarks/first_fit.py --repeats {args.repeats}"
        + (" --baseline ..." if args.baseline else "")
        + (" --fresh-venv`" if args.fresh_venv else "`")
        + " on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()}; load average (1, 5, 15 min) before "
        f"{tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in load_after)} (the machine is shared: wall times "
        "include waiting for a CPU, CPU seconds do not).",
        "",
        f"Problem: GRR, K = {K}, n = {N:,}, eps = {EPSILON}, default `bayesldp.fit(tally)` "
        "(hmc, 4 chains x 1000 draws, 1000 tuning steps). Cold: `NUMBA_CACHE_DIR` a new empty "
        "directory; warm: the same directory after the cold run. Fresh venv: a new virtual "
        "environment with this checkout pip-installed (install not timed), then the same pair.",
        "",
        "| run | wall s (median) | CPU s (median) | in fit s (median) | wall s, each run "
        "| compile notice shown |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, rows in runs.items():
        each = ", ".join(f"{r['wall']:.2f}" for r in rows)
        shown = f"{sum(r['message'] for r in rows)}/{len(rows)}"
        lines.append(
            f"| {name} | {median([r['wall'] for r in rows]):.2f} "
            f"| {median([r['cpu'] for r in rows]):.2f} | {median([r['fit'] for r in rows]):.2f} "
            f"| {each} | {shown} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
