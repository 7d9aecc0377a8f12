"""Posterior sampling benchmark: bayesldp's default sampler against PyMC's NUTS backends.

Problem (the package's reference sampling problem): GRR, K = 20, n = 100,000, eps = 1, theta drawn
from Dirichlet(1) with a fixed seed, Dirichlet(1) prior, 4 chains x 1000 draws after 1000 tuning
steps.

Each sampler runs in a fresh Python subprocess, so imports and compilation count in its
whole-process time (on-disk compilation caches -- PyTensor's, numba's -- are as a previous run
left them; ``--cold`` adds a run of bayesldp's sampler with an empty numba cache).  The parent
reads the draws back and reports min ESS_bulk over the K categories (ArviZ), divergences after
warm-up, ESS per second of whole-process time, and ratios against PyMC's default NUTS.

Usage::

    python benchmarks/posterior.py                   # all samplers, print the table
    python benchmarks/posterior.py --cold --write benchmarks/results/posterior.md
    python benchmarks/posterior.py --samplers hmc pymc --repeats 5

``--repeats N`` runs the samplers N times, interleaved (one round of every sampler, then the
next), and reports the median whole-process seconds and each run's seconds.  A second table
times bare imports in fresh processes, also interleaved: the floor under any call that returns
ArviZ InferenceData.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

K, N, EPSILON, SEED = 20, 100_000, 1.0, 20240601
DRAWS, TUNE, CHAINS, SAMPLE_SEED = 1000, 1000, 4, 1
SAMPLERS = {
    "pymc": "PyMC default NUTS (bayesldp.bayes.nuts, nuts_sampler='pymc')",
    "nutpie": "nutpie via PyMC (nuts_sampler='nutpie')",
    "numpyro": "numpyro via PyMC (nuts_sampler='numpyro')",
    "hmc": "bayesldp default: bayesldp.fit(tally) (method 'hmc', InferenceData)",
    "hmc-backend": "bayesldp hmc backend alone (bayesldp.bayes.hmc.sample, no ArviZ import)",
}


def make_tally():
    """The benchmark tally (same for every sampler)."""
    import bayesldp

    gen = np.random.default_rng(SEED)
    theta = gen.dirichlet(np.ones(K))
    true_counts = gen.multinomial(N, theta)
    return bayesldp.GRR(K, EPSILON).simulate_tally(true_counts, rng=gen), theta


def worker(name: str, out: str) -> None:
    """Run one sampler (inside the timed subprocess) and save its draws."""
    tally, _ = make_tally()
    if name == "hmc":
        import bayesldp

        idata = bayesldp.fit(tally, prior=1.0, draws=DRAWS, chains=CHAINS, random_seed=SAMPLE_SEED)
        theta = idata.posterior["theta"].values
        diverging = idata.sample_stats["diverging"].values
    elif name == "hmc-backend":
        from bayesldp.bayes import hmc

        res = hmc.sample(tally, np.ones(K), draws=DRAWS, chains=CHAINS, random_seed=SAMPLE_SEED)
        theta, diverging = res.theta, res.sample_stats["diverging"]
    else:
        from bayesldp.bayes import nuts

        res = nuts.sample(tally, np.ones(K), draws=DRAWS, chains=CHAINS, random_seed=SAMPLE_SEED,
                          nuts_sampler=name, tune=TUNE)  # fmt: skip
        theta, diverging = res.theta, res.sample_stats["diverging"]
    np.savez(out, theta=theta, diverging=diverging)


def run(name: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Time one sampler in a fresh subprocess and summarise its draws."""
    import arviz as az

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "draws.npz")
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", name, "--out", out],
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            return {"name": name, "error": proc.stderr.strip().splitlines()[-1:]}
        data = np.load(out)
        theta, diverging = data["theta"], data["diverging"]
    ds = az.convert_to_dataset({"theta": theta})
    ess = float(az.ess(ds, method="bulk")["theta"].min())
    rhat = float(az.rhat(ds)["theta"].max())
    return {
        "name": name,
        "seconds": seconds,
        "ess_bulk_min": ess,
        "rhat_max": rhat,
        "divergences": int(np.sum(diverging)),
        "ess_per_s": ess / seconds,
        "posterior_mean": theta.mean(axis=(0, 1)).tolist(),
    }


IMPORTS = {
    "python -c pass": "pass",
    "import numpy, numba": "import numpy, numba",
    "import numpy, numba, arviz": "import numpy, numba, arviz",
}


def time_imports(repeats: int) -> dict[str, list[float]]:
    """Whole-process seconds of bare imports, ``repeats`` interleaved rounds."""
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(repeats):
        for name, code in IMPORTS.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times[name].append(time.perf_counter() - started)
    return times


def median(values: list[float]) -> float:
    return float(np.median(values))


def merge_runs(runs: list[dict[str, object]]) -> dict[str, object]:
    """One row from repeated runs: the median seconds, the draw statistics of the median run."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    seconds = [r["seconds"] for r in ok]
    mid = sorted(ok, key=lambda r: r["seconds"])[(len(ok) - 1) // 2]
    row = dict(mid)
    row["seconds"] = median(seconds)
    row["each"] = seconds
    row["ess_per_s"] = row["ess_bulk_min"] / row["seconds"]
    return row


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"arch": platform.machine(), "cpu": model, "cores": str(os.cpu_count())}


def table(results: list[dict[str, object]]) -> str:
    base = next((r for r in results if r["name"] == "pymc" and "error" not in r), None)
    lines = [
        "| sampler | whole process (s) | min ESS_bulk | max r_hat | divergences | ESS/s "
        "| speed-up vs PyMC | ESS/s vs PyMC | each run (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        label = r.get("label", r["name"])
        if "error" in r:
            lines.append(f"| {label} | failed: {r['error']} | | | | | | | |")
            continue
        speed = f"{base['seconds'] / r['seconds']:.1f}x" if base else "-"
        eff = f"{r['ess_per_s'] / base['ess_per_s']:.1f}x" if base else "-"
        lines.append(
            f"| {label} | {r['seconds']:.1f} | {r['ess_bulk_min']:.0f} | {r['rhat_max']:.3f} "
            f"| {r['divergences']} | {r['ess_per_s']:.0f} | {speed} | {eff} "
            f"| {', '.join(f'{x:.2f}' for x in r.get('each', [r['seconds']]))} |"
        )
    return "\n".join(lines)


def import_table(times: dict[str, list[float]], pymc_seconds: float | None) -> str:
    lines = [
        "| process | whole process (s, median) | PyMC default NUTS / this | each run (s) |",
        "|---|---:|---:|---|",
    ]
    for name, each in times.items():
        ratio = f"{pymc_seconds / median(each):.1f}x" if pymc_seconds else "-"
        runs = ", ".join(f"{x:.2f}" for x in each)
        lines.append(f'| `python -c "{IMPORTS[name]}"` | {median(each):.2f} | {ratio} | {runs} |')
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=list(SAMPLERS))
    parser.add_argument(
        "--cold", action="store_true", help="also run hmc with an empty numba cache"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="interleaved rounds of every sampler (default 1)"
    )
    parser.add_argument("--write", help="write the markdown report to this path")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.out)
        return

    runs: dict[str, list[dict[str, object]]] = {name: [] for name in args.samplers}
    for _ in range(args.repeats):
        for name in args.samplers:
            res = run(name)
            runs[name].append(res)
            print(json.dumps({k: v for k, v in res.items() if k != "posterior_mean"}), flush=True)
    results = []
    for name in args.samplers:
        res = merge_runs(runs[name])
        res["label"] = SAMPLERS[name]
        results.append(res)
    imports = time_imports(args.repeats)
    if args.cold and "hmc" in args.samplers:
        with tempfile.TemporaryDirectory() as cache:
            res = run("hmc", env={"NUMBA_CACHE_DIR": cache})
        res["label"] = SAMPLERS["hmc"] + ", empty numba cache (first use)"
        results.append(res)
        print(json.dumps({k: v for k, v in res.items() if k != "posterior_mean"}), flush=True)
    pymc = next((r for r in results if r["name"] == "pymc" and "error" not in r), None)
    text = table(results)
    text_imports = import_table(imports, pymc["seconds"] if pymc else None)
    print(text)
    print(text_imports)
    if args.write:
        info = machine()
        load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
        cmd = "python " + " ".join(["benchmarks/posterior.py", *sys.argv[1:]])
        report = f"""# Posterior sampling benchmark

GRR, K = {K}, n = {N:,}, eps = {EPSILON:g}, theta ~ Dirichlet(1) (seed {SEED}), Dirichlet(1) prior;
{CHAINS} chains x {DRAWS} draws after {TUNE} tuning steps; every sampler in a fresh subprocess
(imports and compilation included; on-disk compilation caches as a previous run left them,
except the "empty numba cache" row).  min ESS_bulk over the {K} categories (ArviZ), divergences
after warm-up.  {args.repeats} interleaved round(s) of every sampler: median whole-process
seconds (the other columns from the median run).

- machine: {info["arch"]}, {info["cpu"]}, {info["cores"]} cores
- date: {datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
- command: `{cmd}`
- load average when the run ended: {", ".join(f"{x:.2f}" for x in load)}.  The machine was
  shared with other jobs during this run, so times are noisy, and so are the ratios when the
  load changes between rows (re-run on an idle machine for the record).
- reference anchors (measured earlier on the same kind of machine): PyMC default
  about 97 s (9 divergences), nutpie about 39 s, numpyro about 18 s, ESS about 1000 each.

{text}

Bare imports in fresh processes ({args.repeats} interleaved rounds): the floor under any call
that returns ArviZ InferenceData, whatever its sampler costs.

{text_imports}
"""
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(report)


if __name__ == "__main__":
    main()
