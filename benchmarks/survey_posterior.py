"""Is the adaptive survey's posterior calibrated?

Simulated surveys on sparse (theta ~ Dirichlet(0.1)) and Dirichlet(1) populations, K = 10 and 20,
epsilon 0.5 and 1, n = 500 K users (the reference code's size), ``--repeats`` surveys per cell
(a fresh population each).  Each survey runs twice on the same users and seed:

* the default engine (``engine="posterior"``: subsets picked from draws of the calibrated
  posterior, refreshed as the reports grow by 25%), then its default :meth:`posterior`
  (``bayesldp.fit`` of the survey's tally under the adaptive prior, 4 chains x 1000 draws);
* the paper's engine (``engine="sgld"``, ``prior=1.0``: per-user SGLD), then its final SGLD run
  (``posterior(engine="sgld")``, Aydın and Yıldırım 2025's estimator).

Per cell: the 90% intervals' coverage of the true frequencies pooled over categories and surveys
(the default posterior's, the in-loop pool's at every refresh, the paper's SGLD's), the mean TV of
each posterior mean and of the MLE of the same reports, the mean |S|, and the seconds.

Usage::

    python benchmarks/survey_posterior.py                  # writes results/survey_posterior.md
    python benchmarks/survey_posterior.py --repeats 2 --out /tmp/sp.md      # a quick run
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

ROOT = Path(__file__).resolve().parents[1]
CELLS = list(itertools.product((0.1, 1.0), (10, 20), (0.5, 1.0)))  # (rho, K, epsilon)


def _coverage(draws: np.ndarray, theta: np.ndarray) -> np.ndarray:
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    return (lo <= theta) & (theta <= hi)


def one_survey(rho: float, k: int, eps: float, rep: int, utility: str) -> dict[str, float]:
    """Both engines on one population; the metrics of one survey."""
    warnings.simplefilter("ignore")
    from bayesldp import estimate
    from bayesldp.adaptive import AdaptiveSurvey

    gen = np.random.default_rng([int(rho * 100), k, int(eps * 10), rep])
    theta = gen.dirichlet(np.full(k, rho))
    x = gen.choice(k, size=500 * k, p=theta)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    survey = AdaptiveSurvey(k, eps, utility=utility, random_seed=rep).simulate(x)
    t1 = time.perf_counter()
    draws = survey.posterior().posterior["theta"].values.reshape(-1, k)
    t2 = time.perf_counter()
    hist = survey.history
    lo, hi = hist["posterior_lower"].values, hist["posterior_upper"].values
    out |= {
        "sim_s": t1 - t0,
        "post_s": t2 - t1,
        "cover": _coverage(draws, theta).mean(),
        "tv": 0.5 * np.abs(draws.mean(0) - theta).sum(),
        "pool_cover": ((lo <= theta) & (theta <= hi)).mean(),
        "refreshes": lo.shape[0],
        "size": float(hist["subset_size"].mean()),
        "mle_tv": 0.5 * np.abs(estimate(survey.tally(), "mle").frequencies - theta).sum(),
    }
    t3 = time.perf_counter()
    paper = AdaptiveSurvey(k, eps, utility=utility, engine="sgld", prior=1.0, random_seed=rep)
    sgld = paper.simulate(x).posterior(engine="sgld").posterior["theta"].values.reshape(-1, k)
    out |= {
        "sgld_s": time.perf_counter() - t3,
        "sgld_cover": _coverage(sgld, theta).mean(),
        "sgld_tv": 0.5 * np.abs(sgld.mean(0) - theta).sum(),
        "sgld_size": float(paper.history["subset_size"].mean()),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--utility", default="tv")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/survey_posterior.md")
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    jobs = [(*cell, rep, args.utility) for cell in CELLS for rep in range(args.repeats)]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one_survey, *zip(*jobs, strict=True)))
    rows = []
    for i, (rho, k, eps) in enumerate(CELLS):
        res = results[i * args.repeats : (i + 1) * args.repeats]
        m = {key: float(np.mean([r[key] for r in res])) for key in res[0]}
        se = (
            float(np.std([r["tv"] for r in res], ddof=1) / np.sqrt(len(res))) if len(res) > 1 else 0
        )
        rows.append(
            f"| {rho} | {k} | {eps} | {m['cover']:.3f} | {m['pool_cover']:.3f} | "
            f"{m['sgld_cover']:.3f} | {m['tv']:.4f} ({se:.4f}) | {m['mle_tv']:.4f} | "
            f"{m['sgld_tv']:.4f} | {m['size']:.2f} | {m['sgld_size']:.2f} | {m['refreshes']:.0f} | "
            f"{m['sim_s']:.2f} | {m['post_s']:.2f} | {m['sgld_s']:.2f} |"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    text = "\n".join(
        [
            "# The adaptive survey's posterior: coverage and accuracy",
            "",
            f"`python benchmarks/survey_posterior.py --repeats {args.repeats} --utility "
            f"{args.utility} --workers {args.workers}`; {_dt.date.today()}, commit {commit}; "
            f"{platform.machine()}, {os.cpu_count()} cores, load average at the start "
            f"{load[0]:.2f}; {time.perf_counter() - started:.0f} s in all.",
            "",
            f"n = 500 K users per survey, {args.repeats} surveys per cell (a fresh population "
            "theta ~ Dirichlet(rho) each), utility "
            f"`{args.utility}`.  Coverage: the share of the true frequencies inside the 90% "
            "intervals, pooled over categories and surveys (pool: the in-loop pool's intervals at "
            "every refresh, pooled over refreshes too).  TV: mean over surveys (its standard error "
            "in brackets).  Default: `engine='posterior'` and its `posterior()` "
            "(bayesldp.fit under the adaptive prior); SGLD: `engine='sgld', prior=1.0` and "
            "`posterior(engine='sgld')`, the paper's.  Seconds: simulate, default posterior, "
            "the whole SGLD survey.",
            "",
            "| rho | K | eps | coverage | pool coverage | SGLD coverage | TV (se) | MLE TV | "
            "SGLD TV | mean S | SGLD mean S | refreshes | simulate s | posterior s | SGLD s |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
