"""Where the adaptive prior's default sampler converges and where it does not.

The tallies of ``benchmarks/prior_accuracy.py`` (GRR; its populations, eps in 0.5, 1, 2, 4,
n in 1e3, 1e4, 1e5, 2 repeats: the same seeds, so the same tallies and the same fit seed as its
``adaptive`` column), each fitted with ``bayesldp.fit(tally, prior="adaptive")`` (2 chains x
1000 draws, the default "joint" scheme).  Per fit: r_hat_max and divergences (the fit's
``posterior.attrs``), mean leapfrog steps per draw, wall seconds, and the 5% / 50% / 95%
quantiles of the posterior of the concentration ``a``.

Table 1 groups the fits by the width of a's 90% interval (``log10(q95 / q05)``): how many have
r_hat above 1.01 (PyMC's and ``fit``'s warning threshold) and how many diverge.  Table 2 puts
each fit's cost beside two fixed-prior fits of the same tally (same seed and draws):
Dirichlet(a) at a's posterior median (the cost of the posterior's shape without learning a)
and Dirichlet(1) (the cost reference).  Table 3 groups
them by how far the joint sampler's pilot ``a0`` (its start in ``log a`` and the source of the
tail weights, ``backend_info["pilot_a"]``) is from a's posterior median, in decades.  Table 4
lists the fits with r_hat above 1.01 or a divergence.

Usage::

    # writes benchmarks/investigations/results/adaptive_convergence.md
    python benchmarks/investigations/adaptive_convergence.py
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesldp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
import prior_accuracy as pa  # the populations and seeds of the accuracy benchmark

SEED = 20261123  # prior_accuracy.py's default
OUT = Path(__file__).parent / "results" / "adaptive_convergence.md"


def one_fit(pop: str, eps: float, n: int, rep: int) -> dict:
    """prior_accuracy.one_tally's tally and its ``adaptive`` fit seed (the third prior's)."""
    rng, _, tally = pa.simulate(pop, eps, n, rep, SEED)
    seed = [int(rng.integers(2**62)) for _ in range(list(pa.PRIORS).index("adaptive") + 1)][-1]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, prior="adaptive", draws=1000, chains=2, random_seed=seed)
    seconds = time.perf_counter() - start
    q05, q50, q95 = np.quantile(idata.posterior["a"].values, [0.05, 0.5, 0.95])
    attrs = idata.posterior.attrs
    pilot = json.loads(attrs["backend_info"]).get("pilot_a", np.nan)  # the joint scheme's a0
    fixed = {"median": fixed_fit(tally, q50, seed), "dir1": fixed_fit(tally, 1.0, seed)}
    return dict(population=pop, eps=eps, n=n, repeat=rep, seconds=seconds,
                r_hat=float(attrs["r_hat_max"]), divergences=int(attrs["divergences"]),
                steps=float(idata.sample_stats["n_steps"].mean()), method=attrs["method"],
                a05=q05, a50=q50, a95=q95, pilot=pilot,
                **{f"{key}_{name}": value for name, costs in fixed.items()
                   for key, value in costs.items()})  # fmt: skip


def fixed_fit(tally: bayesldp.Tally, alpha: float, seed: int) -> dict:
    """Seconds and mean leapfrog steps per draw of a fixed symmetric Dirichlet(alpha) fit of the
    same tally with the same seed and draws, on the package's NUTS (``method="hmc"``: ``fit``'s
    default for a fixed prior became ``prior_mh`` after this study, which takes no leapfrog
    steps)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, prior=alpha, draws=1000, chains=2, random_seed=seed,
                             method="hmc")  # fmt: skip
    return dict(seconds=time.perf_counter() - start,
                steps=float(idata.sample_stats["n_steps"].mean()))  # fmt: skip


def tables(df: pd.DataFrame) -> str:
    df = df.assign(width=np.log10(df["a95"] / df["a05"]))
    groups = pd.cut(df["width"], [0, 0.5, 1, 2, np.inf], right=False,
                    labels=["< 0.5", "0.5-1", "1-2", ">= 2"])  # fmt: skip
    lines = ["## By the width of a's 90% interval (log10 q95/q05)", "",
             "| width | fits | r_hat > 1.01 | r_hat > 1.05 | with divergences | largest r_hat | "
             "median steps | median s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label, g in df.groupby(groups, observed=False):
        if len(g) == 0:
            continue
        lines.append(f"| {label} | {len(g)} | {(g['r_hat'] > 1.01).sum()} | "
                     f"{(g['r_hat'] > 1.05).sum()} | {(g['divergences'] > 0).sum()} | "
                     f"{g['r_hat'].max():.3f} | {g['steps'].median():.1f} | "
                     f"{g['seconds'].median():.2f} |")  # fmt: skip
    lines.append(f"| all | {len(df)} | {(df['r_hat'] > 1.01).sum()} | {(df['r_hat'] > 1.05).sum()}"
                 f" | {(df['divergences'] > 0).sum()} | {df['r_hat'].max():.3f} | "
                 f"{df['steps'].median():.1f} | {df['seconds'].median():.2f} |")  # fmt: skip
    lines += ["", "## Cost against fixed Dirichlet priors (same tally, seed and draws)", "",
              "A fixed Dirichlet(a) at a's posterior median is the cost of the posterior's "
              "shape alone (no a to learn); Dirichlet(1) is the cost reference.", "",
              "| width | fits | median steps: adaptive / Dirichlet(median a) / Dirichlet(1) | "
              "median s: adaptive / Dirichlet(median a) / Dirichlet(1) | median ratio of s: "
              "adaptive over Dirichlet(median a) / over Dirichlet(1) |",
              "|---|---:|---|---|---|"]  # fmt: skip
    for label, g in [*df.groupby(groups, observed=False), ("all", df)]:
        if len(g):
            lines.append(f"| {label} | {len(g)} | {g['steps'].median():.1f} / "
                         f"{g['steps_median'].median():.1f} / {g['steps_dir1'].median():.1f} | "
                         f"{g['seconds'].median():.2f} / {g['seconds_median'].median():.2f} / "
                         f"{g['seconds_dir1'].median():.2f} | "
                         f"{(g['seconds'] / g['seconds_median']).median():.2f} / "
                         f"{(g['seconds'] / g['seconds_dir1']).median():.2f} |")  # fmt: skip
    off = np.abs(np.log10(df["pilot"] / df["a50"]))
    pilot_groups = pd.cut(off, [0, 0.5, 1, np.inf], right=False,
                          labels=["< 0.5", "0.5-1", ">= 1"])  # fmt: skip
    lines += ["", "## By the pilot's distance from a's posterior median (decades, "
              "|log10(a0 / median)|)", "",
              "| decades | fits | r_hat > 1.01 | with divergences | largest r_hat | median steps |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label, g in df.groupby(pilot_groups, observed=False):
        if len(g):
            lines.append(f"| {label} | {len(g)} | {(g['r_hat'] > 1.01).sum()} | "
                         f"{(g['divergences'] > 0).sum()} | {g['r_hat'].max():.3f} | "
                         f"{g['steps'].median():.1f} |")  # fmt: skip
    bad = df[(df["r_hat"] > 1.01) | (df["divergences"] > 0)].sort_values("r_hat", ascending=False)
    lines += ["", "## Fits with r_hat > 1.01 or a divergence", "",
              "| population | eps | n | repeat | r_hat | divergences | steps | s "
              "| a: 5% / 50% / 95% | pilot a0 |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]  # fmt: skip
    for r in bad.itertuples():
        lines.append(f"| {r.population} | {r.eps:g} | {r.n:,} | {r.repeat} | {r.r_hat:.3f} | "
                     f"{r.divergences} | {r.steps:.1f} | {r.seconds:.2f} | "
                     f"{r.a05:.3g} / {r.a50:.3g} / {r.a95:.3g} | {r.pilot:.3g} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help; no options
    jobs = [(p, e, n, r) for p in pa.POPULATIONS for e in pa.EPSILONS for n in pa.NS
            for r in range(2)]  # fmt: skip
    load = os.getloadavg()
    start = time.perf_counter()
    with cf.ProcessPoolExecutor(2) as pool:
        df = pd.DataFrame(list(pool.map(one_fit, *zip(*jobs, strict=True))))
    header = "\n".join([
        "# Convergence of the default sampler under the adaptive prior (GRR)", "",
        "- Command: `python benchmarks/investigations/adaptive_convergence.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; 2 worker processes",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f}; Python {platform.python_version()}, bayesldp {bayesldp.__version__}",
        f"- The tallies and fit seeds of prior_accuracy.py's `adaptive` column; {len(df)} fits, "
        "2 chains x 1000 draws, methods: " + ", ".join(sorted(set(df["method"]))), "",
    ])  # fmt: skip
    text = header + "\n" + tables(df) + "\n"
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
