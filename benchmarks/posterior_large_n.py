"""Large-n posterior benchmark: the default ``fit`` (method "auto") where the tally keeps one row
per report, the Laplace method's calibration, and what "auto" chooses.

Parts (``--parts``, all by default):

* ``speed`` -- OUE, OLH and SHE at K = 100, n = 1,000,000, eps = 1, theta ~ Dirichlet(1) (seeded),
  and GRR at K = 1000, n = 1,000,000: one fresh subprocess per case times the whole process
  (imports, the simulated tally, ``bayesldp.fit(tally)`` with its defaults: 4 chains x 1000
  draws) and, in a second subprocess on the same tally, ``estimate(tally, "mle")``.  Targets:
  fit within 20x the MLE and within 60 s whole-process (OUE, OLH, SHE); GRR within 30 s.  A case
  still running after ``--timeout`` seconds is stopped and reported as such.
* ``agree`` -- OUE, K = 10, n = 100,000 (1,011 distinct rows, so the HMC on the exact likelihood
  is cheap): ``method="laplace"`` against ``method="hmc"`` (4 x 1000 draws each), per category
  ``|mean_L - mean_H| / sd_H`` (target < 0.1) and ``sd_L / sd_H - 1`` (target within 10 %).
* ``sbc`` -- simulation-based calibration of ``method="laplace"`` at n = 10,000: OUE, K = 10,
  eps = 1, Dirichlet(1), ``--reps`` replications (200 by default), 2 chains x 1000 draws thinned
  by ESS to 99, ranks in 10 bins; the criteria of benchmarks/calibration.py (every coordinate's
  chi-square p > 0.001, pooled 90 % interval coverage in [0.85, 0.95]).
* ``auto`` -- the method "auto" picks in each regime, with the predicted seconds
  (:func:`bayesldp.bayes.cost.choose_method`; nothing is sampled).

Usage::

    python benchmarks/posterior_large_n.py --write benchmarks/results/posterior_large_n.md
    python benchmarks/posterior_large_n.py --parts auto agree
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SEED, EPSILON = 20240611, 1.0
SPEED_CASES = [("OUE", 100), ("OLH", 100), ("SHE", 100), ("GRR", 1000)]
SPEED_N = 1_000_000
AUTO_CASES = [
    ("GRR", 3, 20),
    ("GRR", 20, 100_000),
    ("GRR", 252, 300_000),
    ("GRR", 1000, 1_000_000),
    ("OUE", 10, 100_000),
    ("OUE", 20, 10_000),
    ("OUE", 20, 200_000),
    ("OUE", 100, 10_000),
    ("OUE", 100, 1_000_000),
    ("OLH", 100, 1_000_000),
    ("SHE", 100, 1_000_000),
]


def make_tally(name: str, k: int, n: int, seed: int = SEED):
    import bayesldp

    gen = np.random.default_rng([seed, k, n])
    counts = gen.multinomial(n, gen.dirichlet(np.ones(k)))
    return getattr(bayesldp, name)(k, EPSILON).simulate_tally(counts, rng=gen)


# ------------------------------------------------------------------------------ speed
def worker(task: str, name: str, k: int, out: str) -> None:
    """Inside the timed subprocess: the tally, then the default fit or the MLE."""
    started = time.perf_counter()
    import bayesldp

    tally = make_tally(name, k, SPEED_N)
    made = time.perf_counter()
    result: dict[str, object] = {"tally_seconds": made - started, "rows": tally.n_rows}
    if task == "mle":
        bayesldp.estimate(tally, "mle")
        result["mle_seconds"] = time.perf_counter() - made
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = bayesldp.fit(tally, prior=1.0, random_seed=1)
        attrs = idata.posterior.attrs
        info = json.loads(attrs["backend_info"])
        result.update(
            fit_seconds=time.perf_counter() - made,
            method=attrs["method"],
            auto_reason=attrs.get("auto_reason", ""),
            ess_bulk_min=attrs.get("ess_bulk_min"),
            r_hat_max=attrs.get("r_hat_max"),
            divergences=attrs.get("divergences"),
            pareto_k=info.get("pareto_k"),
            is_shift_sd=info.get("is_shift_sd"),
            stages=[info.get(f"{stage}_seconds") for stage in ("mode", "sampling", "importance")],
            warnings=[str(w.message)[:160] for w in caught],
        )
    Path(out).write_text(json.dumps(result))


def run_case(task: str, name: str, k: int, timeout: float) -> dict[str, object]:
    out = f"/tmp/posterior_large_n_{os.getpid()}_{task}_{name}_{k}.json"
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", task, name, str(k), out],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    result = json.loads(Path(out).read_text())
    Path(out).unlink()
    result["process_seconds"] = seconds
    return result


def speed(timeout: float) -> str:
    lines = [
        "| case | rows | method (auto) | MLE (s) | fit (s) | fit / MLE | whole process (s) "
        "| target | min ESS_bulk | max r_hat | Pareto k | IS mean shift (sd) "
        "| laplace: mode / sampling / check (s) |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, k in SPEED_CASES:
        fitted = run_case("fit", name, k, timeout)
        print(name, k, json.dumps(fitted), flush=True)
        label = f"{name}, K = {k}, n = {SPEED_N:,}"
        if "timeout" in fitted or "error" in fitted:
            what = f"stopped after {timeout:g} s" if "timeout" in fitted else fitted["error"]
            lines.append(f"| {label} | | | | {what} | | | | | | | | |")
            continue
        target = "<= 30 s" if name == "GRR" else "<= 20x MLE, <= 60 s"
        mle = run_case("mle", name, k, timeout) if name != "GRR" else {}
        print(name, k, "mle", json.dumps(mle), flush=True)
        mle_s = mle.get("mle_seconds")
        ratio = f"{fitted['fit_seconds'] / mle_s:.1f}x" if mle_s else "-"
        k_hat = fitted.get("pareto_k")
        shift = fitted.get("is_shift_sd")
        cells = [
            label,
            f"{fitted['rows']:,}",
            str(fitted["method"]),
            f"{mle_s:.1f}" if mle_s else "-",
            f"{fitted['fit_seconds']:.1f}",
            ratio,
            f"{fitted['process_seconds']:.1f}",
            target,
            f"{fitted['ess_bulk_min']:.0f}",
            f"{fitted['r_hat_max']:.3f}",
            "-" if k_hat is None else f"{k_hat:.2f}",
            "-" if shift is None else f"{shift:.3f}",
            " / ".join("-" if v is None else f"{v:.1f}" for v in fitted["stages"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ agreement
def agree() -> str:
    import bayesldp

    tally = make_tally("OUE", 10, 100_000)
    started = time.perf_counter()
    lap = bayesldp.fit(tally, prior=1.0, method="laplace", random_seed=1)
    lap_s = time.perf_counter() - started
    started = time.perf_counter()
    ref = bayesldp.fit(tally, prior=1.0, method="hmc", random_seed=2)
    hmc_s = time.perf_counter() - started
    a = lap.posterior["theta"].values.reshape(-1, tally.k)
    b = ref.posterior["theta"].values.reshape(-1, tally.k)
    sd = b.std(axis=0)
    shift = (a.mean(axis=0) - b.mean(axis=0)) / sd
    ratio = a.std(axis=0) / sd - 1.0
    info = json.loads(lap.posterior.attrs["backend_info"])
    rows = "\n".join(
        f"| {x} | {b.mean(axis=0)[x]:.5f} | {sd[x]:.5f} | {shift[x]:+.3f} | {ratio[x]:+.3f} |"
        for x in range(tally.k)
    )
    verdict = "PASS" if np.abs(shift).max() < 0.1 and np.abs(ratio).max() < 0.1 else "FAIL"
    return f"""OUE, K = 10, n = 100,000 ({tally.n_rows:,} distinct rows): laplace {lap_s:.1f} s
(Pareto k {info["pareto_k"]:.3f}, IS ESS {info["is_ess"]:.0f} of 4000, weighted-mean shift
{info["is_shift_sd"]:.3f} sd, min ESS_bulk {lap.posterior.attrs["ess_bulk_min"]:.0f}), hmc
{hmc_s:.1f} s (min ESS_bulk {ref.posterior.attrs["ess_bulk_min"]:.0f}).  Largest |mean shift|
{np.abs(shift).max():.3f} sd (target < 0.1), largest |sd ratio - 1| {np.abs(ratio).max():.3f}
(target < 0.1): **{verdict}**.

| category | HMC mean | HMC sd | (mean_L - mean_H) / sd_H | sd_L / sd_H - 1 |
|---:|---:|---:|---:|---:|
{rows}"""


# ------------------------------------------------------------------------------ SBC
def sbc(reps: int) -> str:
    import bayesldp
    from bayesldp.bayes.calibration import BackendSampler, run_sbc

    lines = [
        "| method | seconds | smallest chi-square p (> 0.001) | pooled 90 % coverage "
        "([0.85, 0.95]) | per-coordinate coverage | p per coordinate | verdict |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for method in ("laplace", "hmc"):  # the same data sets (same rng) for both
        sampler = BackendSampler(method, draws=1000, chains=2)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary, _ = run_sbc(bayesldp.OUE(10, EPSILON), np.ones(10), 10_000, sampler, reps,
                                 rng=SEED)  # fmt: skip
        seconds = time.perf_counter() - started
        ok = bool(np.all(summary.pvalues > 1e-3)) and 0.85 <= summary.coverage.mean() <= 0.95
        lines.append(
            f"| {method} | {seconds:.0f} | {summary.pvalues.min():.3g} "
            f"| {summary.coverage.mean():.3f} | {np.round(summary.coverage, 3).tolist()} "
            f"| {np.round(summary.pvalues, 4).tolist()} | {'PASS' if ok else 'FAIL'} |"
        )
        print(lines[-1], flush=True)
    return (
        f"OUE, K = 10, eps = 1, n = 10,000, Dirichlet(1); {reps} replications, 2 chains x 1000 "
        "draws thinned by ESS to 99, ranks in 10 bins; the HMC on the same data sets as a "
        "reference (a low p shared by both comes from the data sets, not the method).\n\n"
        + "\n".join(lines)
    )


# ------------------------------------------------------------------------------ auto
def auto() -> str:
    from bayesldp.bayes import cost

    lines = [
        "| mechanism | K | n | distinct rows | auto chooses | predicted exact / hmc / laplace s |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, k, n in AUTO_CASES:
        tally = make_tally(name, k, n)
        method, _, predicted = cost.choose_method(tally)
        pred = " / ".join(f"{predicted[m]:.3g}" for m in ("exact", "hmc", "laplace"))
        lines.append(f"| {name} | {k} | {n:,} | {tally.n_rows:,} | {method} | {pred} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["auto", "speed", "agree", "sbc"],
                        choices=["auto", "speed", "agree", "sbc"])  # fmt: skip
    parser.add_argument("--reps", type=int, default=200, help="SBC replications")
    parser.add_argument("--timeout", type=float, default=300.0, help="per speed case (s)")
    parser.add_argument("--write", help="write the markdown report to this path")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        task, name, k, out = args.worker
        worker(task, name, int(k), out)
        return
    sections = []
    titles = {"auto": "What auto chooses", "speed": "Speed (target: within 20x of the MLE)",
              "agree": "Agreement with the HMC at n = 100,000",
              "sbc": "Simulation-based calibration at n = 10,000"}  # fmt: skip
    for part in args.parts:
        body = {"auto": auto, "agree": agree}.get(part)
        if part == "speed":
            text = speed(args.timeout)
        elif part == "sbc":
            text = sbc(args.reps)
        else:
            text = body()
        print(text, flush=True)
        sections.append(f"## {titles[part]}\n\n{text}\n")
    if args.write:
        load = os.getloadavg()
        cmd = "python " + " ".join(["benchmarks/posterior_large_n.py", *sys.argv[1:]])
        report = f"""# Large-n posterior benchmark

theta ~ Dirichlet(1) (seeded), eps = {EPSILON:g}, Dirichlet(1) prior; `bayesldp.fit` defaults
(4 chains x 1000 draws) unless stated.

- date: {datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
- command: `{cmd}`
- machine: {os.cpu_count()} cores, shared with other jobs; load average when the run ended:
  {", ".join(f"{x:.2f}" for x in load)} (times are inflated by the load; ratios measured in the
  same run)

{chr(10).join(sections)}"""
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(report)


if __name__ == "__main__":
    main()
