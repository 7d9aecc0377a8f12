"""Where the adaptive prior's extra seconds over Dirichlet(1) come from: steps or cost per step.

The target: the adaptive prior at most 1.5x Dirichlet(1)'s seconds (measurement only).  Tallies: one
repeat (repeat 0) of every cell of ``benchmarks/prior_accuracy.py``'s GRR grid (its 8 populations x
eps 0.5, 1, 2, 4 x n 1e3, 1e4, 1e5: 96 tallies, the same seeds, so the same tallies, and its
``adaptive`` column's fit seed) and the 8 RRRR tallies at n = 1e5 of ``benchmarks/default_prior.py``
(K = 10, eps = 1, subset {0, 1, 2}, eps1 = 0.8; its seeds).  Each tally is fitted by
``bayesldp.fit`` three times, one after the other in one worker process, with the same seed, 2
chains x 1000 draws after 1000 warm-up iterations, ``cores=1`` (chains in turn: two worker processes
on two cores): ``prior=1.0`` (Dirichlet(1)), ``prior="adaptive"`` (the default "joint" scheme) and
``prior="adaptive", adaptive_scheme="marginal"``.

Per fit: the sampler's seconds (``backend_info["wall_time"]``), split into the chains' seconds
(the time inside ``bayesldp.bayes.hmc.run._run_chains``, wrapped by this script with a timer)
and the set-up before them (mode, pilot, Laplace metric); leapfrog steps per draw (mean of
``sample_stats.n_steps``); microseconds per step (chains' seconds / (steps per draw x
(tune + draws) x chains): the warm-up's steps per iteration taken as the draws'); min bulk ESS
over theta; ESS per sampler second; divergences.

Per scheme, the ratio of each fit's sampler seconds to Dirichlet(1)'s on the same tally is the
product of three per-fit factors: (steps per draw ratio) x (microseconds per step ratio) x
(set-up factor ratio, set-up factor = sampler seconds / chains' seconds).  The tables give the
median and 90th percentile of each, and the share of the mean log time ratio each factor
carries (which dominates).

Usage::

    # writes benchmarks/investigations/results/adaptive_cost.md
    python benchmarks/investigations/adaptive_cost.py
    # 4 GRR + 1 RRRR tallies, writes nothing
    python benchmarks/investigations/adaptive_cost.py --quick
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesldp
from bayesldp.bayes.fit import import_arviz
from bayesldp.bayes.hmc import run as hmc_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
import default_prior as dp  # the RRRR tallies (mechanism, seeds)
import prior_accuracy as pa  # the GRR populations, cells and seeds

SEED = 20261123  # prior_accuracy.py's default
DRAWS, TUNE, CHAINS = 1000, 1000, 2
RRRR_N, RRRR_REPEATS = 100_000, 8
SCHEMES = {  # label -> fit options
    "dir1": dict(prior=1.0),
    "joint": dict(prior="adaptive"),
    "marginal": dict(prior="adaptive", adaptive_scheme="marginal"),
}
OUT = Path(__file__).parent / "results" / "adaptive_cost.md"

_CHAIN_SECONDS: list[float] = []


def _timed_run_chains(*args, _inner=hmc_run._run_chains, **kwargs):
    start = time.perf_counter()
    try:
        return _inner(*args, **kwargs)
    finally:
        _CHAIN_SECONDS.append(time.perf_counter() - start)


def _init_worker() -> None:
    """Wrap the chains' runner with a timer, then compile every kernel outside the timings."""
    hmc_run._run_chains = _timed_run_chains
    warm = [bayesldp.GRR(10, 1.0).simulate_tally(np.full(10, 30), rng=0), rrrr_tally(0)[0]]
    for tally in warm:  # RRRR's nested coordinates compile kernels of their own
        for options in SCHEMES.values():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bayesldp.fit(tally, draws=20, tune=20, chains=2, cores=1, random_seed=0,
                             progressbar=False, **options)  # fmt: skip


def grr_tally(pop: str, eps: float, n: int) -> tuple[bayesldp.Tally, int]:
    """prior_accuracy's tally of a cell (repeat 0) and its ``adaptive`` column's fit seed."""
    rng, _, tally = pa.simulate(pop, eps, n, 0, SEED)
    seed = [int(rng.integers(2**62)) for _ in range(list(pa.PRIORS).index("adaptive") + 1)][-1]
    return tally, seed


def rrrr_tally(rep: int) -> tuple[bayesldp.Tally, int]:
    """default_prior.py's RRRR tally at n = 1e5 (repeat ``rep``) and its fit seed."""
    gen = np.random.default_rng([dp.SEED, RRRR_N, rep])
    theta = gen.dirichlet(np.ones(dp.K))
    tally = dp.mechanisms()["RRRR"].simulate_tally(gen.multinomial(RRRR_N, theta), rng=gen)
    return tally, int(gen.integers(2**62))


def one_fit(tally: bayesldp.Tally, seed: int, options: dict) -> dict:
    az = import_arviz()
    _CHAIN_SECONDS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, draws=DRAWS, tune=TUNE, chains=CHAINS, cores=1,
                             random_seed=seed, progressbar=False, **options)  # fmt: skip
    attrs = idata.posterior.attrs
    info = json.loads(attrs["backend_info"])
    seconds, chains_s = float(info["wall_time"]), float(sum(_CHAIN_SECONDS))
    steps = float(idata.sample_stats["n_steps"].mean())
    ess = float(np.nanmin(az.ess(idata.posterior, var_names=["theta"], method="bulk")["theta"]))
    return dict(method=attrs["method"], seconds=seconds, chains_s=chains_s, steps=steps,
                us_step=1e6 * chains_s / (steps * (info["tune"] + DRAWS) * CHAINS),
                setup=seconds / chains_s, ess=ess, ess_s=ess / seconds,
                divergences=int(attrs["divergences"]), r_hat=float(attrs["r_hat_max"]),
                pilot_a=info.get("pilot_a", np.nan))  # fmt: skip


def one_tally(group: str, key: tuple) -> list[dict]:
    tally, seed = grr_tally(*key) if group == "GRR" else rrrr_tally(*key)
    return [dict(group=group, tally=" ".join(map(str, key)), scheme=label,
                 **one_fit(tally, seed, options))
            for label, options in SCHEMES.items()]  # fmt: skip


def q(x: pd.Series, p: float) -> float:
    return float(np.quantile(x, p))


def tables(df: pd.DataFrame) -> str:
    values = ["seconds", "steps", "us_step", "setup", "ess", "ess_s"]
    wide = df.pivot_table(index=["group", "tally"], columns="scheme", values=values)
    lines = ["## Per scheme: medians per fit", "",
             "| tallies | scheme | fits | sampler s | chains' s | steps per draw | us per step | "
             "set-up factor | min bulk ESS (theta) | ESS/s | fits with divergences | "
             "divergent draws | r_hat > 1.01 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for group, g in df.groupby("group", sort=False):
        for label in SCHEMES:
            s = g[g.scheme == label]
            lines.append(f"| {group} | {label} | {len(s)} | {s.seconds.median():.3f} | "
                         f"{s.chains_s.median():.3f} | {s.steps.median():.1f} | "
                         f"{s.us_step.median():.2f} | {s.setup.median():.3f} | "
                         f"{s.ess.median():.0f} | {s.ess_s.median():.0f} | "
                         f"{(s.divergences > 0).sum()} | {s.divergences.sum()} | "
                         f"{(s.r_hat > 1.01).sum()} |")  # fmt: skip
    lines += ["", "## Ratio to Dirichlet(1) on the same tally, and its factors", "",
              "Per fit: time ratio = steps ratio x per-step ratio x set-up ratio (exactly).  "
              "Median / 90th percentile of each over the tallies; ESS ratio: median / 10th "
              "percentile.  Share: each factor's part of the mean log time ratio.", "",
              "| tallies | scheme | time ratio | steps per draw ratio | us per step ratio | "
              "set-up factor ratio | share: steps / per step / set-up | min-ESS ratio | "
              "ESS/s ratio |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for group in df.group.unique():
        w = wide.xs(group, level="group")
        for label in ("joint", "marginal"):
            r = {v: w[(v, label)] / w[(v, "dir1")] for v in
                 ("seconds", "steps", "us_step", "setup", "ess", "ess_s")}  # fmt: skip
            logs = {v: float(np.log(r[v]).mean()) for v in ("seconds", "steps", "us_step", "setup")}
            share = " / ".join(f"{logs[v] / logs['seconds']:.0%}"
                               for v in ("steps", "us_step", "setup"))  # fmt: skip
            lines.append(f"| {group} | {label} | " + " | ".join(
                f"{r[v].median():.2f} / {q(r[v], 0.9):.2f}"
                for v in ("seconds", "steps", "us_step", "setup")) + f" | {share} | "
                f"{r['ess'].median():.2f} / {q(r['ess'], 0.1):.2f} | "
                f"{r['ess_s'].median():.2f} / {q(r['ess_s'], 0.1):.2f} |")  # fmt: skip
    lines += ["", "## GRR by population: median ratios to Dirichlet(1) (time = steps x per step "
              "x set-up)", "",
              "| population | tallies | joint: time / steps / per step / set-up | "
              "marginal: time / steps / per step / set-up |",
              "|---|---:|---|---|"]  # fmt: skip
    grr = wide.xs("GRR", level="group")
    pops = grr.index.str.split(" ").str[0]
    for pop in pa.POPULATIONS:
        w = grr[pops == pop]
        if len(w) == 0:
            continue
        cells = [" / ".join(f"{(w[(v, label)] / w[(v, 'dir1')]).median():.2f}"
                            for v in ("seconds", "steps", "us_step", "setup"))
                 for label in ("joint", "marginal")]  # fmt: skip
        lines.append(f"| {pop} | {len(w)} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def tally_jobs(quick: bool) -> list[tuple[str, tuple]]:
    """The tallies' keys: every GRR cell and the RRRR repeats, or a few of each (``--quick``)."""
    grr = [(p, e, n) for p in pa.POPULATIONS for e in pa.EPSILONS for n in pa.NS]
    rrrr = [(r,) for r in range(RRRR_REPEATS)]
    if quick:
        grr = [("zipf1.5", 1.0, 1000), ("dirichlet0.05", 0.5, 10_000),
               ("dirichlet10", 2.0, 1000), ("anes96_income", 4.0, 100_000)]  # fmt: skip
        rrrr = rrrr[:1]
    return [("GRR", k) for k in grr] + [("RRRR", k) for k in rrrr]


def run_jobs(jobs: list, per_tally, init) -> tuple[pd.DataFrame, list[str]]:
    """Each tally's rows from ``per_tally(group, key)`` on 2 worker processes (``init`` compiles
    first); the rows and the results file's header lines after its title (command excluded)."""
    load = os.getloadavg()
    start = time.perf_counter()
    with cf.ProcessPoolExecutor(2, initializer=init) as pool:
        df = pd.DataFrame([row for rows in pool.map(per_tally, *zip(*jobs, strict=True))
                           for row in rows])  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
    return df, [
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; 2 worker processes; commit {commit}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; Python {platform.python_version()}, "
        f"numpy {np.__version__}, bayesldp {bayesldp.__version__}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 GRR + 1 RRRR tallies, writes nothing")
    args = ap.parse_args()
    jobs = tally_jobs(args.quick)
    df, run_lines = run_jobs(jobs, one_tally, _init_worker)
    n_grr = sum(group == "GRR" for group, _ in jobs)
    header = "\n".join([
        "# The adaptive prior's cost over Dirichlet(1): steps per draw or cost per step", "",
        "- Command: `python benchmarks/investigations/adaptive_cost.py"
        f"{' --quick' if args.quick else ''}`",
        *run_lines,
        f"- {n_grr} GRR tallies (prior_accuracy.py, repeat 0 of "
        f"{'some cells' if args.quick else 'every population x eps x n'}) "
        f"and {len(jobs) - n_grr} RRRR tallies (default_prior.py, n = 1e5); each fitted under "
        f"Dirichlet(1), adaptive joint and adaptive marginal, {CHAINS} chains x {DRAWS} draws "
        f"after {TUNE} warm-up, cores=1, same seed; methods: "
        + ", ".join(sorted(set(df["method"]))), "",
    ])  # fmt: skip
    text = header + "\n" + tables(df) + "\n"
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
