"""Could any RRRR subset bring the *posterior mean* to 0.8x GRR's TV?  An oracle bound.

The target was the default survey's posterior mean (``bayesldp.fit`` under the adaptive
prior) to reach at most 0.8x the TV of the non-adaptive GRR survey's posterior mean on sparse
populations (rho = 0.01).  ``survey_oracle.py`` bounds what a subset can do for the MLE; this
script asks the same of the posterior mean.  For each population theta ~ Dirichlet(rho) of a cell
(``--repeats`` per cell, n = 500 K users, the exact budget, eps1 = 0.8 eps as the survey's
default):

* an oracle that knows theta tries ``S = the top s categories of the true theta`` for
  ``s = 0..--max-s`` (``s = 0`` is GRR at the full budget) on ``--inner`` simulated tallies each
  (``RRRR.simulate_tally``) and keeps the s whose posterior mean (``fit``, 2 chains x 500 draws)
  has the smallest mean TV;
* that s and GRR are then scored on fresh tallies with ``fit``'s defaults (4 chains x 1000
  draws), so the oracle's TV is not biased low by its choice.

A ratio above 0.8 means no top-s subset, even one chosen knowing theta, gets the posterior mean
there; a survey that learns theta from its own reports cannot do better with one subset per
population.  The candidates stop at ``--max-s`` (the survey's own choices are at most 4 on the
grid's sparse cells, ``survey_adaptive_gain.md``).

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
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
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
    seeds = iter(gen.integers(2**31, size=len(mechs) * inner + 2))
    quick = {"draws": 500, "chains": 2}
    scores = [
        np.mean([_posterior_tv(m, counts, theta, int(next(seeds)), **quick) for _ in range(inner)])
        for m in mechs
    ]
    best = int(np.argmin(scores))
    return {
        "oracle": _posterior_tv(mechs[best], counts, theta, int(next(seeds))),
        "grr": _posterior_tv(mechs[0], counts, theta, int(next(seeds))),
        "s": best,
    }


def _row(cell: tuple, res: list[dict], repeats: int) -> str:
    k, rho, eps = cell
    g = np.array([r["grr"] for r in res])
    o = np.array([r["oracle"] for r in res])
    s = np.array([r["s"] for r in res])
    ratio = o.mean() / g.mean()
    se = float(np.std(o / g.mean(), ddof=1) / np.sqrt(len(res))) if len(res) > 1 else 0.0
    return (
        f"| {k} | {rho} | {eps} | {g.mean():.4f} | {o.mean():.4f} | {ratio:.3f} ({se:.3f}) | "
        f"{s.mean():.2f} | {np.count_nonzero(s)}/{repeats} |"
    )


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
    rows, res = [], []
    with ProcessPoolExecutor(args.workers) as pool:  # the file is rewritten as each cell ends
        for result in pool.map(one_population, *zip(*jobs, strict=True)):
            res.append(result)
            if len(res) == args.repeats:
                rows.append(_row(cells[len(rows)], res, args.repeats))
                print(rows[-1], flush=True)
                res = []
                _write(args, rows, len(cells), load, time.perf_counter() - started)


def _write(args: argparse.Namespace, rows: list[str], n_cells: int, load: float, secs: float):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    done = "" if len(rows) == n_cells else f" (so far: {len(rows)} of {n_cells} cells)"
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
        "the populations, each on a fresh tally; the oracle uses, per population, the top-s "
        f"subset of the true theta, s = 0..{args.max_s}, with the smallest posterior-mean TV "
        f"over {args.inner} simulated tallies (2 chains x 500 draws).  Ratio: oracle / GRR "
        "(standard error).  s: mean |S| chosen, and in how many populations it is not GRR.",
        "",
        "| K | rho | eps | GRR posterior TV | oracle posterior TV | ratio (se) | oracle s | "
        "oracle s > 0 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    args.out.write_text(text)


if __name__ == "__main__":
    main()
