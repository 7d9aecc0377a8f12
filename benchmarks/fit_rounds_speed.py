"""``fit_rounds`` on the package's NUTS against PyMC's, and against the rounds' separate fits.

Model: K = 12 categories, T = 4 rounds of 20,000 reports each (new users every round), the
population drifting (each round's log-frequencies the last's plus N(0, 0.1^2) noise, the first
Dirichlet(1)); mechanisms GRR and OUE at eps = 1.  For each mechanism, in one process:

* ``fit_rounds``: ``bayesldp.fit_rounds(tallies)``, the default (``method="hmc"``: the
  package's NUTS, the density compiled), 4 chains x 1,000 draws after 1,000 warm-up iterations;
* ``separate``: the sum of ``bayesldp.fit(tally)`` over the 4 rounds (each at its defaults: the
  goal is ``fit_rounds`` within 5x of it);
* ``pymc``: ``bayesldp.fit_rounds(tallies, method="nuts")``, PyMC's NUTS on the same model and
  draws (the anchor).

Each is called once before it is timed (compilation, caches; the first call's seconds are shown
apart), then timed on the machine's cores.  Columns: seconds, the smallest bulk ESS of ``theta``
over rounds and categories (ArviZ), its rate per second, divergences, and the largest |z| of the
difference of the two samplers' posterior means (each mean's Monte Carlo error from its ESS).

Usage::

    python benchmarks/fit_rounds_speed.py --out benchmarks/results/fit_rounds_speed.md
    python benchmarks/fit_rounds_speed.py --mechanisms GRR --samplers fit_rounds separate
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

K, ROUNDS, N, EPS, DRIFT, SEED = 12, 4, 20_000, 1.0, 0.1, 20261129
SAMPLERS = ("fit_rounds", "separate", "pymc")
GOAL_SECONDS, GOAL_RATIO = 30.0, 5.0


def make_rounds(name: str, n: int) -> list:
    """The rounds' tallies (seeded: the same for every sampler)."""
    import bayesldp

    rng = np.random.default_rng([SEED, ("GRR", "OUE").index(name)])
    mech = getattr(bayesldp, name)(K, EPS)
    log_theta = np.log(rng.dirichlet(np.ones(K)))
    tallies = []
    for _ in range(ROUNDS):
        theta = np.exp(log_theta - log_theta.max())
        x = rng.choice(K, size=n, p=theta / theta.sum())
        tallies.append(mech.tally(mech.perturb(x, rng=rng)))
        log_theta = log_theta + rng.normal(0.0, DRIFT, K)
    return tallies


def run(sampler: str, tallies: list, draws: int) -> tuple[float, object]:
    """Seconds of one call and what it returned (an InferenceData, or None for ``separate``)."""
    import bayesldp

    options = {"draws": draws, "tune": draws, "chains": 4, "random_seed": 1,
               "progressbar": False, "compute_convergence_checks": False}  # fmt: skip
    start = time.perf_counter()
    if sampler == "separate":
        for tally in tallies:
            bayesldp.fit(tally, draws=draws, random_seed=1, progressbar=False)
        return time.perf_counter() - start, None
    method = "nuts" if sampler == "pymc" else "hmc"
    idata = bayesldp.fit_rounds(tallies, method=method, **options)
    return time.perf_counter() - start, idata


def measure(name: str, samplers: list[str], draws: int, n: int) -> dict[str, dict]:
    import arviz as az

    tallies = make_rounds(name, n)
    out: dict[str, dict] = {}
    for sampler in samplers:
        with warnings.catch_warnings():  # 50 draws: too few for the convergence checks
            warnings.simplefilter("ignore")
            first, _ = run(sampler, tallies, 50)
        seconds, idata = run(sampler, tallies, draws)
        row = {"first": first, "seconds": seconds}
        if idata is not None:
            theta = idata.posterior["theta"]
            ess = az.ess(theta.to_dataset(name="theta"), method="bulk")["theta"].values
            row.update(ess=float(ess.min()), divergences=int(idata.posterior.attrs["divergences"]),
                       mean=theta.mean(("chain", "draw")).values,
                       mcse=theta.std(("chain", "draw")).values / np.sqrt(ess))  # fmt: skip
        out[sampler] = row
        print(f"{name} {sampler}: {seconds:.1f} s (first call {first:.1f} s)", flush=True)
    return out


def table(results: dict[str, dict[str, dict]]) -> list[str]:
    lines = ["| mechanism | sampler | first call (s) | seconds | min bulk ESS | ESS/s | "
             "divergences | vs fit_rounds (seconds) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, rows in results.items():
        own = rows.get("fit_rounds", {}).get("seconds")
        for sampler, row in rows.items():
            ess = row.get("ess")
            ratio = f"{row['seconds'] / own:.2f}x" if own else "-"
            lines.append(
                f"| {name} | {sampler} | {row['first']:.1f} | {row['seconds']:.1f} | "
                + (f"{ess:.0f} | {ess / row['seconds']:.1f} | {row['divergences']} | "
                   if ess is not None else "- | - | - | ")
                + f"{ratio} |"
            )  # fmt: skip
    return lines


def verdicts(results: dict[str, dict[str, dict]]) -> list[str]:
    lines = []
    for name, rows in results.items():
        own, separate, pymc = (rows.get(s) for s in SAMPLERS)
        if own is not None:
            lines.append(f"- {name}: fit_rounds {own['seconds']:.1f} s (goal under "
                         f"{GOAL_SECONDS:.0f} s on a quiet machine)")  # fmt: skip
        if own is not None and separate is not None:
            ratio = own["seconds"] / separate["seconds"]
            lines.append(f"- {name}: fit_rounds / the rounds' separate fits = {ratio:.2f}x "
                         f"(goal at most {GOAL_RATIO:.0f}x)")  # fmt: skip
        if own is not None and pymc is not None:
            z = (own["mean"] - pymc["mean"]) / np.hypot(own["mcse"], pymc["mcse"])
            lines.append(
                f"- {name}: PyMC's route / fit_rounds = {pymc['seconds'] / own['seconds']:.1f}x "
                f"in seconds, {own['ess'] / own['seconds'] / (pymc['ess'] / pymc['seconds']):.1f}x"
                f" in min-ESS/s; posterior means agree: max |z| {np.abs(z).max():.2f} over "
                f"{z.size} (round, category) pairs"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanisms", nargs="+", default=["GRR", "OUE"],
                        choices=["GRR", "OUE"])  # fmt: skip
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--draws", type=int, default=1000, help="draws and warm-up per chain")
    parser.add_argument("--n", type=int, default=N, help="reports per round")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), os.getloadavg()
    results = {name: measure(name, args.samplers, args.draws, args.n) for name in args.mechanisms}
    end_load = os.getloadavg()
    import bayesldp

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    shown = " ".join(sys.argv[1:] if argv is None else argv)
    text = "\n".join([
        "# fit_rounds: the package's NUTS against PyMC's and against the rounds' separate fits",
        "",
        f"- Command: `python benchmarks/fit_rounds_speed.py {shown}`",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{(time.perf_counter() - started) / 60:.1f} min; commit {commit}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in end_load)}; Python {platform.python_version()}, "
        f"bayesldp {bayesldp.__version__}",
        f"- K = {K}, T = {ROUNDS} rounds of {args.n:,} reports, eps = {EPS:g}, the population "
        f"drifting by N(0, {DRIFT:g}^2) per round in log-frequency; 4 chains x {args.draws} "
        f"draws after {args.draws} warm-up iterations; every sampler called once before it is "
        "timed (its first call's seconds apart); the machine is shared: compare ratios",
        "",
        *table(results),
        "",
        *verdicts(results),
        "",
    ])  # fmt: skip
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
