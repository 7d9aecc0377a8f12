"""Stopping a survey when its answer is good enough: coverage at the stop, users saved.

``--surveys`` default surveys (``AdaptiveSurvey(K, eps)``, engine "posterior", lookahead rule)
per population family, theta ~ Dirichlet(rho) fresh for each, users drawn from it up to
``--n-max``, run with ``simulate(x, stop={"width": w})``: stop at the first refresh of the
posterior pool where every category's 90% interval is at most ``w`` wide.  At the stop the
survey's default ``posterior()`` (bayesldp.fit, 4 chains x 1000 draws) gives the 90% intervals
whose coverage of the true frequencies is pooled over categories and surveys.  With ``--rule
cs_width`` the surveys stop where every anytime-valid 90% confidence sequence
(``AdaptiveSurvey.confidence_sequences``) is at most ``w`` wide instead, and the table gives
the sequences' coverage at the stop beside the posterior's.

Users saved: a fixed-size survey must be sized before it starts, for the population that needs
the most users.  GRR's exact oracle variance of a frequency, ``(q (1 - q) + theta_x (p - q)
(1 - p - q)) / (n (p - q)^2)``, grows with ``theta_x``, so the worst case is a category holding
every user, whose 90% interval is ``2 z sd``.  ``n_fixed`` is the smallest n where
that width is at most ``w``; the table gives the stopped surveys' users against it.

Usage::

    python benchmarks/survey_stopping.py                  # writes results/survey_stopping.md
    python benchmarks/survey_stopping.py --surveys 4 --out /tmp/s.md

Each finished survey is a line of ``results/survey_stopping.jsonl`` (the ``--out`` path with
``.jsonl``); a rerun with the same settings takes those and runs only the rest.
"""

from __future__ import annotations

import argparse
import datetime as _dt
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
    plo, phi = np.quantile(survey._pool.draws, [0.05, 0.95], axis=0)
    cs_lo, cs_hi = survey.confidence_sequences(target_width=width if rule == "cs_width" else None)
    return {
        "cs_covered": ((cs_lo <= theta) & (theta <= cs_hi)).mean(),
        "users": survey.n_users,
        "stopped": survey.stopped is not None,
        "covered": ((lo <= theta) & (theta <= hi)).mean(),
        "pool_covered": ((plo <= theta) & (theta <= phi)).mean(),
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
    parser.add_argument("--surveys", type=int, default=100, help="per population family")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--width", type=float, default=0.1)
    parser.add_argument("--n-max", type=int, default=50_000)
    parser.add_argument("--rule", choices=("width", "cs_width"), default="width",
                        help="stop on the posterior's intervals or on the confidence sequences")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/survey_stopping.md")
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    rhos = (0.1, 1.0)
    jobs = [(rho, rep, args.k, args.epsilon, args.width, args.n_max, args.rule)
            for rep in range(args.surveys) for rho in rhos]  # fmt: skip
    n_fixed = fixed_size(args.k, args.epsilon, args.width)
    cache = args.out.with_suffix(".jsonl")  # one line per finished survey: a rerun resumes
    done = _cached(cache, args)
    results: dict[float, list[dict]] = {rho: [] for rho in rhos}
    for job in jobs:
        if job[:2] in done:
            results[job[0]].append(done[job[:2]])
    todo = [job for job in jobs if job[:2] not in done]
    with ProcessPoolExecutor(args.workers) as pool, cache.open("a") as log:
        for i, result in enumerate(pool.map(one_survey, *zip(*todo, strict=True)), 1):
            results[todo[i - 1][0]].append(result)
            key = {"rho": todo[i - 1][0], "rep": todo[i - 1][1], **_settings(args)}
            log.write(json.dumps({**key, **result}) + "\n")
            log.flush()
            if i % 20 == 0:  # the table is rewritten every 20 surveys
                _write(args, results, n_fixed, load[0], time.perf_counter() - started)
    _write(args, results, n_fixed, load[0], time.perf_counter() - started)


def _settings(args: argparse.Namespace) -> dict:
    return {"k": args.k, "epsilon": args.epsilon, "target_width": args.width, "n_max": args.n_max,
            "rule": args.rule}  # fmt: skip


def _cached(cache: Path, args: argparse.Namespace) -> dict[tuple, dict]:
    """Surveys already run with these settings, by (rho, rep), from the results' JSON lines."""
    done = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            row.setdefault("rule", "width")  # the lines written before the rule was a choice
            if all(row[key] == value for key, value in _settings(args).items()):
                keys = ("users", "stopped", "covered", "pool_covered", "width", "cs_covered")
                result = {key: row[key] for key in keys if key in row}
                done[(row["rho"], row["rep"])] = result
    return done


def _row(rho: float | str, res: list[dict], n_fixed: int) -> str:
    users = np.array([r["users"] for r in res])
    covered = np.array([r["covered"] for r in res])
    return (
        f"| {rho} | {len(res)} | {sum(r['stopped'] for r in res)} | {covered.mean():.3f} | "
        f"{covered.std(ddof=1) / np.sqrt(len(res)):.3f} | "
        f"{np.mean([r['pool_covered'] for r in res]):.3f} | "
        f"{np.mean([r['width'] for r in res]):.4f} | {np.median(users):,.0f} | "
        f"{np.quantile(users, 0.9):,.0f} | {users.mean() / n_fixed:.3f} | {_cs_coverage(res)} |"
    )


def _cs_coverage(res: list[dict]) -> str:
    """The confidence sequences' coverage at the stop ("n/a" for surveys run before they
    were measured)."""
    if not all("cs_covered" in r for r in res):
        return "n/a"
    return f"{np.mean([r['cs_covered'] for r in res]):.3f}"


def _write(args, results: dict[float, list[dict]], n_fixed: int, load: float, secs: float):
    """The results file with the surveys done so far."""
    every = [r for res in results.values() for r in res]
    rows = [_row(rho, res, n_fixed) for rho, res in results.items() if len(res) > 1]
    rows.append(_row("both", every, n_fixed))
    done = len(every)
    total = args.surveys * len(results)
    so_far = "" if done == total else f" (so far: {done} of {total} surveys)"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    text = "\n".join([
        "# Stopping a survey at a target width: coverage and users saved"
        + (" (the confidence sequences' rule)" if args.rule == "cs_width" else ""),
        "",
        f"`python benchmarks/survey_stopping.py --surveys {args.surveys} --k {args.k} "
        f"--epsilon {args.epsilon} --width {args.width} --n-max {args.n_max} --workers "
        f"{args.workers}" + (" --rule cs_width" if args.rule == "cs_width" else "") + "`;"
        f" {_dt.date.today()}, commit {commit}; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average at the start {load:.2f}; "
        f"{secs:.0f} s{so_far}.",
        "",
        f"K = {args.k}, eps = {args.epsilon}, the default survey with `stop={{'{args.rule}': "
        f"{args.width}}}`, at most {args.n_max:,} users.  Coverage: share of the true "
        "frequencies inside the 90% intervals at the stop, pooled over categories and surveys "
        "(the default `posterior()`), with its standard error over the surveys; pool: the "
        "in-loop pool's draws that met the target).  "
        "Width: the largest 90% interval of `posterior()`.  Users: where the surveys stopped; "
        f"n_fixed = {n_fixed:,}, the users a fixed-size GRR survey needs for that width "
        "whatever the population (GRR's exact oracle variance at its worst case, a category "
        "holding every user), against which the last column sets the mean users of the "
        "stopped surveys.  CS coverage: the same share for the anytime-valid 90% confidence "
        "sequences at the stop (`AdaptiveSurvey.confidence_sequences`).",
        "",
        "| rho | surveys | stopped | coverage | se | pool coverage | mean width | median users | "
        "90% quantile users | mean users / n_fixed | CS coverage |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    args.out.write_text(text)


if __name__ == "__main__":
    main()
