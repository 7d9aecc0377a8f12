"""Stopping a survey when its answer is good enough: coverage at the stop, users saved.

For each ``K`` of ``--k``, eps of ``--epsilon`` and rule of ``--rule``: ``--surveys`` default
surveys (``AdaptiveSurvey(K, eps)``, engine "posterior", lookahead rule) per population family,
theta ~ Dirichlet(rho) fresh for each, users drawn from it up to ``--n-max``.  The ``width``
rule (``simulate(x, stop={"width": w})``) stops at the first refresh of the posterior pool where
every category's 90% interval is at most ``w`` wide; at the stop the survey's default
``posterior()`` (bayesldp.fit, 4 chains x 1000 draws) gives the 90% intervals whose coverage of
the true frequencies is pooled over categories and surveys.  The ``cs_width`` rule stops where
every anytime-valid 90% confidence sequence (``AdaptiveSurvey.confidence_sequences``) is at most
``w`` wide instead; the table gives the sequences' coverage at the stop beside the posterior's.

Users saved: a fixed-size survey must be sized before it starts, for the population that needs
the most users.  GRR's exact oracle variance of a frequency, ``(q (1 - q) + theta_x (p - q)
(1 - p - q)) / (n (p - q)^2)``, grows with ``theta_x``, so the worst case is a category holding
every user, whose 90% interval is ``2 z sd``.  ``n_fixed`` is the smallest n where
that width is at most ``w``; the table gives the stopped surveys' users against it.

Usage::

    # K = 10 and 20, eps 0.5 and 1, both rules: writes results/survey_stopping.md
    python benchmarks/survey_stopping.py --workers 2
    python benchmarks/survey_stopping.py --surveys 2 --k 10 --epsilon 1 --out /tmp/s.md

Each finished survey is a line of ``results/survey_stopping.jsonl`` (the ``--out`` path with
``.jsonl``); a rerun with the same settings takes those and runs only the rest.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import math
import os
import platform
import subprocess
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
Z90 = 1.6448536269514722


def one_survey(rho: float, rep: int, k: int, eps: float, width: float, n_max: int,
               rule: str = "width") -> dict:  # fmt: skip
    warnings.simplefilter("ignore")
    from bayesldp.adaptive import AdaptiveSurvey

    gen = np.random.default_rng([int(rho * 100), rep, k])
    theta = gen.dirichlet(np.full(k, rho))
    x = gen.choice(k, size=n_max, p=theta)
    survey = AdaptiveSurvey(k, eps, random_seed=rep).simulate(x, stop={rule: width})
    draws = survey.posterior(progressbar=False, compute_convergence_checks=False)
    draws = draws.posterior["theta"].values.reshape(-1, k)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    cs_lo, cs_hi = survey.confidence_sequences(target_width=width if rule == "cs_width" else None)
    return {
        "cs_covered": ((cs_lo <= theta) & (theta <= cs_hi)).mean(),
        "users": survey.n_users,
        "stopped": survey.stopped is not None,
        "covered": ((lo <= theta) & (theta <= hi)).mean(),
        "width": float((hi - lo).max()),
    }


def fixed_size(k: int, eps: float, width: float) -> int:
    """The smallest n where GRR's 90% interval is <= width for every population (the worst
    case: a category holding every user)."""
    from bayesldp import GRR

    var1 = float(np.max(GRR(k, eps).oracle_variance(np.eye(k)[0], 1)))
    return math.ceil(var1 * (2 * Z90 / width) ** 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surveys", type=int, default=50, help="per population family and cell")
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--width", type=float, default=0.1)
    parser.add_argument("--n-max", type=int, default=200_000)
    parser.add_argument("--rule", choices=RULES, nargs="+", default=list(RULES),
                        help="stop on the posterior's intervals, on the confidence sequences")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/survey_stopping.md")
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    cells = list(itertools.product(args.k, args.epsilon, args.rule))
    jobs = [(rho, rep, k, eps, args.width, args.n_max, rule)
            for k, eps, rule in cells for rep in range(args.surveys) for rho in RHOS]  # fmt: skip
    cache = args.out.with_suffix(".jsonl")  # one line per finished survey: a rerun resumes
    done = _cached(cache, args)
    results: dict[tuple, list[dict]] = {(*cell, rho): [] for cell in cells for rho in RHOS}
    for job in jobs:
        if job in done:
            results[(*job[2:4], job[6], job[0])].append(done[job])
    todo = [job for job in jobs if job not in done]
    with ProcessPoolExecutor(args.workers) as pool, cache.open("a") as log:
        for i, result in enumerate(pool.map(one_survey, *zip(*todo, strict=True)), 1):
            rho, rep, k, eps, width, n_max, rule = todo[i - 1]
            results[(k, eps, rule, rho)].append(result)
            key = {"rho": rho, "rep": rep, "k": k, "epsilon": eps, "target_width": width,
                   "n_max": n_max, "rule": rule}  # fmt: skip
            log.write(json.dumps({**key, **result}) + "\n")
            log.flush()
            if i % 20 == 0:  # the table is rewritten every 20 surveys
                _write(args, results, load[0], time.perf_counter() - started)
    _write(args, results, load[0], time.perf_counter() - started)


RHOS = (0.1, 1.0)
RULES = ("width", "cs_width")
KEYS = ("users", "stopped", "covered", "width", "cs_covered")


def _cached(cache: Path, args: argparse.Namespace) -> dict[tuple, dict]:
    """Surveys already run with these settings, by their job, from the results' JSON lines."""
    done = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            if row["target_width"] == args.width and row["n_max"] == args.n_max:
                job = (row["rho"], row["rep"], row["k"], row["epsilon"], row["target_width"],
                       row["n_max"], row["rule"])  # fmt: skip
                done[job] = {key: row[key] for key in KEYS}
    return done


def _row(cell: tuple, res: list[dict], n_fixed: int) -> str:
    k, eps, rule, rho = cell
    users = np.array([r["users"] for r in res])
    covered = np.array([r["covered"] for r in res])
    cs = np.array([r["cs_covered"] for r in res])
    return (
        f"| {k} | {eps:g} | {rule} | {rho} | {len(res)} | {sum(r['stopped'] for r in res)} | "
        f"{covered.mean():.3f} | {covered.std(ddof=1) / np.sqrt(len(res)):.3f} | "
        f"{cs.mean():.3f} | {cs.std(ddof=1) / np.sqrt(len(res)):.3f} | "
        f"{np.mean([r['width'] for r in res]):.4f} | {np.median(users):,.0f} | "
        f"{np.quantile(users, 0.9):,.0f} | {n_fixed:,} | {users.mean() / n_fixed:.3f} |"
    )


def _write(args, results: dict[tuple, list[dict]], load: float, secs: float) -> None:
    """The results file with the surveys done so far: a row per cell, rule and rho, and one
    for both rhos."""
    rows = []
    for k, eps, rule in itertools.product(args.k, args.epsilon, args.rule):
        n_fixed = fixed_size(k, eps, args.width)
        every = [r for rho in RHOS for r in results[(k, eps, rule, rho)]]
        rows += [_row((k, eps, rule, rho), results[(k, eps, rule, rho)], n_fixed)
                 for rho in RHOS if len(results[(k, eps, rule, rho)]) > 1]  # fmt: skip
        if len(every) > 1:
            rows.append(_row((k, eps, rule, "both"), every, n_fixed))
    done = sum(len(res) for res in results.values())
    total = args.surveys * len(results)
    so_far = "" if done == total else f" (so far: {done} of {total} surveys)"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    listed = lambda values: " ".join(f"{v:g}" for v in values)  # noqa: E731
    text = "\n".join([
        "# Stopping a survey at a target width: coverage and users saved, two rules",
        "",
        f"`python benchmarks/survey_stopping.py --surveys {args.surveys} --k {listed(args.k)} "
        f"--epsilon {listed(args.epsilon)} --width {args.width} --n-max {args.n_max} --rule "
        f"{' '.join(args.rule)} --workers {args.workers}`; {_dt.date.today()}, commit {commit}; "
        f"{platform.machine()}, {os.cpu_count()} cores, load average at the start {load:.2f}; "
        f"{secs:.0f} s{so_far}.",
        "",
        f"The default survey `AdaptiveSurvey(K, eps)`, {args.surveys} populations theta ~ "
        f"Dirichlet(rho) per rho, at most {args.n_max:,} users.  Rule `width`: `stop={{'width': "
        f"{args.width}}}`, every 90% posterior interval at most that wide; rule `cs_width`: "
        f"`stop={{'cs_width': {args.width}}}`, every anytime-valid 90% confidence sequence "
        "(`AdaptiveSurvey.confidence_sequences`) at most that wide.  Coverage: share of the true "
        "frequencies inside the 90% intervals of the default `posterior()` at the stop, pooled "
        "over categories and surveys, with its standard error over the surveys; CS coverage: the "
        "same for the confidence sequences at the stop (each category's sequence is valid at "
        "level 0.9 at any stopping time, so its coverage should be at least 0.9).  Width: the "
        "largest 90% interval of `posterior()`.  Users: where the surveys stopped; n_fixed, the "
        "users a fixed-size GRR survey needs for a 90% interval of that width whatever the "
        "population (GRR's exact oracle variance at its worst case, a category holding every "
        "user), against which the last column sets the mean users of the stopped surveys.",
        "",
        "| K | eps | rule | rho | surveys | stopped | coverage | se | CS coverage | se | "
        "mean width | median users | 90% quantile users | n_fixed | mean users / n_fixed |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    args.out.write_text(text)


if __name__ == "__main__":
    main()
