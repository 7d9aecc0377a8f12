"""Could any RRRR subset bring the *posterior mean* below GRR's TV?  An oracle bound.

The question: on sparse populations (rho = 0.01), can a survey that uses one RRRR subset per
population bring the posterior mean's TV (``bayesldp.fit`` under the adaptive prior) well below
that of plain GRR at the same budget?  An oracle that knows theta answers it from above.  For
each population theta ~ Dirichlet(rho) of a cell (``--repeats`` per cell, n = 500 K users, the
exact budget, eps1 = 0.8 eps as the survey's default):

* the oracle tries ``S = the top s categories of the true theta`` for ``s = 0..--max-s``
  (``s = 0`` is GRR at the full budget, so GRR is among its candidates) on ``--inner``
  simulated tallies each (``RRRR.simulate_tally``) and keeps the s whose posterior mean
  (``fit``, 2 chains x 500 draws) has the smallest mean TV;
* that s and GRR are then scored on a fresh tally each with ``fit``'s defaults (4 chains x 1000
  draws), data independent of the choice, so the oracle's TV is not biased low by it.  The two
  scoring tallies share their random numbers: where the oracle keeps GRR the two are the same
  tally and the population's ratio is exactly 1, so a ratio above 1 is the choice's noise, not
  a second draw's.

Per cell: the ratio oracle / GRR with its paired delta-method standard error
(``benchmarks/paired_ratios.py``), pooled over the cells and over those at eps <= 1 (the
inverse-variance mean of the log ratios with its 95% interval).  Beside it, a floor no private
survey reaches: the TV of the users' own empirical distribution (no noise at all), as a ratio to
GRR's.  A pooled oracle ratio above a target means no top-s subset, even one chosen knowing
theta, gets the posterior mean there; a survey that learns theta from its own reports cannot do
better with one subset per population.  The candidates stop at ``--max-s`` (the survey's own
choices are at most 4 on the grid's sparse cells, ``survey_adaptive_gain.md``).

Usage::

    # results/survey_oracle_posterior.md
    python benchmarks/investigations/survey_oracle_posterior.py --workers 2
    python benchmarks/investigations/survey_oracle_posterior.py \
        --repeats 2 --inner 1 --cells 0 --out /tmp/o.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import os
import platform
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from paired_ratios import paired_ratio, pooled_ratio, pooled_section  # noqa: E402

GRID = list(itertools.product((10, 20), (0.01,), (0.5, 1.0, 5.0)))
EPS1_FRACTION = 0.8


def _posterior_tv(mech, counts: np.ndarray, theta: np.ndarray, seed: int, **fit_options) -> float:
    from bayesldp import fit

    tally = mech.simulate_tally(counts, rng=np.random.default_rng(seed))
    post = fit(tally, random_seed=seed, progressbar=False, compute_convergence_checks=False,
               **fit_options)  # fmt: skip
    mean = post.posterior["theta"].mean(("chain", "draw")).values
    return float(0.5 * np.abs(mean - theta).sum())


def one_population(k: int, rho: float, eps: float, rep: int, inner: int, max_s: int) -> dict:
    from bayesldp import RRRR

    warnings.simplefilter("ignore")
    gen = np.random.default_rng([k, int(rho * 100), int(eps * 10), rep])
    theta = gen.dirichlet(np.full(k, rho))
    counts = gen.multinomial(500 * k, theta)
    order = np.argsort(-theta, kind="stable")
    mechs = [RRRR(k, eps, order[:s].tolist(), eps1=EPS1_FRACTION * eps) for s in range(max_s + 1)]
    seeds = iter(gen.integers(2**31, size=len(mechs) * inner + 1))
    quick = {"draws": 500, "chains": 2}
    scores = [
        np.mean([_posterior_tv(m, counts, theta, int(next(seeds)), **quick) for _ in range(inner)])
        for m in mechs
    ]
    best, scoring = int(np.argmin(scores)), int(next(seeds))  # one seed: shared numbers
    grr = _posterior_tv(mechs[0], counts, theta, scoring)
    return {
        "oracle": grr if best == 0 else _posterior_tv(mechs[best], counts, theta, scoring),
        "grr": grr,
        "empirical": float(0.5 * np.abs(counts / counts.sum() - theta).sum()),
        "s": best,
    }


def _cell(cell: tuple, res: list[dict]) -> dict:
    """One cell's numbers: the oracle's and the floor's ratios to GRR, with standard errors."""
    col = {key: np.array([r[key] for r in res]) for key in res[0]}
    return {"cell": cell, "col": col, "oracle": paired_ratio(col["oracle"], col["grr"]),
            "floor": paired_ratio(col["empirical"], col["grr"])}  # fmt: skip


def _row(c: dict, repeats: int) -> str:
    (k, rho, eps), col = c["cell"], c["col"]
    (ratio, se), (floor, floor_se) = c["oracle"], c["floor"]
    return (
        f"| {k} | {rho} | {eps} | {col['grr'].mean():.4f} | {col['oracle'].mean():.4f} | "
        f"{ratio:.3f} ({se:.3f}) | {col['s'].mean():.2f} | {np.count_nonzero(col['s'])}/"
        f"{repeats} | {col['empirical'].mean():.4f} | {floor:.3f} ({floor_se:.3f}) |"
    )


def _summary(cells: list[dict]) -> list[str]:
    groups = {"all cells": cells, "eps <= 1": [c for c in cells if c["cell"][2] <= 1]}
    lines = ["| pooled over | cells | oracle / GRR | empirical floor / GRR |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for name, group in groups.items():
        if group:
            oracle, floor = (pooled_ratio([c[key] for c in group]) for key in ("oracle", "floor"))
            lines.append(f"| {name} | {len(group)} | {oracle} | {floor} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--inner", type=int, default=2)
    parser.add_argument("--max-s", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cells", default="all", help="indices of the rho = 0.01 cells, or all")
    default_out = ROOT / "benchmarks/investigations/results/survey_oracle_posterior.md"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    cells = GRID if args.cells == "all" else [GRID[int(i)] for i in args.cells.split(",")]
    jobs = [(*c, rep, args.inner, args.max_s) for c in cells for rep in range(args.repeats)]
    done, res = [], []
    with ProcessPoolExecutor(args.workers) as pool:  # the file is rewritten as each cell ends
        for result in pool.map(one_population, *zip(*jobs, strict=True)):
            res.append(result)
            if len(res) == args.repeats:
                done.append(_cell(cells[len(done)], res))
                print(_row(done[-1], args.repeats), flush=True)
                res = []
                _write(args, done, len(cells), load, time.perf_counter() - started)


def _write(args: argparse.Namespace, cells: list[dict], n_cells: int, load: float, secs: float):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    done = "" if len(cells) == n_cells else f" (so far: {len(cells)} of {n_cells} cells)"
    text = "\n".join([
        "# An oracle bound on what RRRR subsets can do for the posterior mean",
        "",
        "`python benchmarks/investigations/survey_oracle_posterior.py "
        f"--repeats {args.repeats} --inner "
        f"{args.inner} --max-s {args.max_s} --workers {args.workers} --cells {args.cells}`; "
        f"{_dt.date.today()}, commit {commit}; {platform.machine()}, {os.cpu_count()} cores, "
        f"load average at the start {load:.2f}; {secs:.0f} s{done}.",
        "",
        "n = 500 K users, the exact budget (eps2 from Aydın and Yıldırım 2025's formula), "
        "eps1 = 0.8 eps.  TV: "
        "the posterior mean's (bayesldp.fit, adaptive prior, 4 chains x 1000 draws) mean over "
        "the populations; the oracle uses, per population, the top-s subset of the true "
        f"theta, s = 0..{args.max_s} (s = 0 is GRR), with the smallest posterior-mean TV over "
        f"{args.inner} simulated tallies (2 chains x 500 draws), and is scored with GRR on one "
        "fresh tally each drawn from the same random numbers (the same tally where it keeps "
        "GRR).  Ratio: oracle / GRR (paired delta-method standard error).  s: mean |S| chosen, "
        "and in how many populations it is not GRR.  Empirical floor: the TV of the users' own "
        "empirical distribution (no privacy), and its ratio to GRR's posterior TV.",
        "",
        "| K | rho | eps | GRR posterior TV | oracle posterior TV | ratio (se) | oracle s | "
        "oracle s > 0 | empirical TV | floor ratio (se) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(_row(c, args.repeats) for c in cells),
        *pooled_section(_summary(cells)),
    ])
    args.out.write_text(text)


if __name__ == "__main__":
    main()
