"""fit's default prior (adaptive) against Dirichlet(1) on the quickstart's five mechanisms.

Population: K = 10, theta ~ Dirichlet(1) (a fresh draw per repeat, seeded), eps = 1,
n in 1e4 and 1e5, ``--repeats`` tallies per cell (8 by default).  Each tally is fitted under
both priors by ``bayesldp.fit`` with its defaults (method "auto", 4 chains x 1000 draws, the
same random_seed): ``prior=None`` (the default: ``AdaptiveDirichlet`` on categories) and
``prior=1.0``.  Per cell and prior: MSE of the posterior mean (averaged over repeats), the
fraction of the K x repeats true frequencies inside the 90% equal-tailed interval, fits with a
divergent draw, all divergent draws, the largest r_hat, the median seconds per fit (each fit
run ``TIMINGS`` times, alternating with the other prior's, the fastest timed), and the median
per-tally ratio of the default's seconds over Dirichlet(1)'s (the default prior's cost target:
at most 1.5x).

Usage::

    python benchmarks/default_prior.py   # writes benchmarks/results/default_prior.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesldp

K, EPSILON, SEED = 10, 1.0, 20261126
NS = (10_000, 100_000)
#: runs of each fit (same seed, same draws), the fastest timed, alternating the two priors' fits
#: (load from other processes then falls on both alike): the per-cell ratios of the same draws
#: moved by up to 0.2 between single-run tables, and by up to 0.16 between tables timing each
#: prior's fit twice in a row (1.47 and 1.63 on Hadamard response at n = 1e5)
TIMINGS = 3
PRIORS = {"default": None, "dir1": 1.0}
OUT = Path(__file__).parent / "results" / "default_prior.md"


def mechanisms() -> dict[str, bayesldp.Mechanism]:
    """The quickstart's five mechanisms (models/quickstart.toml), K = 10, eps = 1."""
    return {
        "GRR": bayesldp.GRR(K, EPSILON),
        "OUE": bayesldp.OUE(K, EPSILON),
        "OLH": bayesldp.OLH(K, EPSILON),
        "HadamardResponse": bayesldp.HadamardResponse(K, EPSILON),
        "RRRR": bayesldp.RRRR(k=K, epsilon=EPSILON, subset=[0, 1, 2], eps1=0.8),
    }


def both_fits(tally: bayesldp.Tally, seed: int, theta: np.ndarray) -> dict[str, dict]:
    """Each prior's fit of ``tally`` with fit's defaults, run ``TIMINGS`` times alternating
    the priors: per prior, seconds (the fastest run), r_hat, divergences, squared error,
    coverage."""
    seconds = dict.fromkeys(PRIORS, math.inf)
    fits = {}
    for _ in range(TIMINGS):
        for label, prior in PRIORS.items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fits[label] = bayesldp.fit(tally, prior=prior, random_seed=seed, progressbar=False)
            seconds[label] = min(seconds[label], time.perf_counter() - start)
    return {label: summary(fits[label], seconds[label], theta) for label in PRIORS}


def summary(idata, seconds: float, theta: np.ndarray) -> dict:
    draws = idata.posterior["theta"].values.reshape(-1, theta.size)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    attrs = idata.posterior.attrs
    return dict(seconds=seconds, r_hat=float(attrs["r_hat_max"]),
                divergences=int(attrs["divergences"]), method=attrs["method"],
                mse=float(np.mean((draws.mean(axis=0) - theta) ** 2)),
                covered=float(np.mean((lo <= theta) & (theta <= hi))))  # fmt: skip


def run(repeats: int) -> pd.DataFrame:
    rows = []
    for name, mech in mechanisms().items():
        for n in NS:
            for rep in range(repeats):
                gen = np.random.default_rng([SEED, n, rep])
                theta = gen.dirichlet(np.ones(K))
                tally = mech.simulate_tally(gen.multinomial(n, theta), rng=gen)
                seed = int(gen.integers(2**62))
                for label, row in both_fits(tally, seed, theta).items():
                    rows.append(dict(mechanism=name, n=n, repeat=rep, prior=label, **row))
            print(f"{name} n={n:,} done", flush=True)
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> str:
    lines = ["| mechanism | n | prior | method | MSE (mean) | 90% coverage | fits with a "
             "divergence | divergent draws | largest r_hat | median s "
             "| median s / Dirichlet(1)'s |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for (name, n), cell in df.groupby(["mechanism", "n"], sort=False):
        base = cell[cell.prior == "dir1"].set_index("repeat")["seconds"]
        for label in ("default", "dir1"):
            sub = cell[cell.prior == label]
            ratio = (sub.set_index("repeat")["seconds"] / base).median()
            shown = "adaptive (default)" if label == "default" else "Dirichlet(1)"
            lines.append(
                f"| {name} | {n:,} | {shown} | {'/'.join(sorted(set(sub.method)))} | "
                f"{sub.mse.mean():.3g} | "
                f"{sub.covered.mean():.3f} | {(sub.divergences > 0).sum()}/{len(sub)} | "
                f"{sub.divergences.sum()} | {sub.r_hat.max():.3f} | {sub.seconds.median():.2f} | "
                f"{ratio:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    load = os.getloadavg()
    start = time.perf_counter()
    df = run(args.repeats)
    minutes = (time.perf_counter() - start) / 60
    header = [
        "# fit's default prior (adaptive) against Dirichlet(1), five mechanisms",
        "",
        f"- Command: `python benchmarks/default_prior.py --repeats {args.repeats}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; {minutes:.1f} min, one fit at "
        "a time",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f}; Python {platform.python_version()}, bayesldp {bayesldp.__version__}",
        f"- K = {K}, eps = {EPSILON:g}, theta ~ Dirichlet(1) per repeat, {args.repeats} repeats "
        "per cell; `bayesldp.fit` defaults (method auto, 4 chains x 1000 draws), the same "
        f"tally and random_seed for both priors; seconds: the fastest of {TIMINGS} runs of a fit, "
        "alternating with the other prior's",
        "",
        "",
    ]
    args.out.write_text("\n".join(header) + table(df) + "\n")
    print(table(df))


if __name__ == "__main__":
    main()
