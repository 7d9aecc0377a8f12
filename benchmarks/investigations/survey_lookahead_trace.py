"""The lookahead rule's choices on one sparse population, under each simulated truth.

Why did the rule that simulated each posterior draw as the population (``lookahead_truth=
"draws"``, the default until 2026-11-30) stay at GRR on sparse populations where a subset of 2
gains (``results/survey_fixed_size.md``)?  This runs one population of
``benchmarks/survey_adaptive_gain.py`` (the same seeds: ``--k``, ``--rho``, ``--eps``,
``--rep``) through ``AdaptiveSurvey(K, eps, random_seed=rep, lookahead_truth=...)`` for both
truths and records each choice of the rule: the reports so far, the users it governs (the
horizon), the pool's mean (its three largest shares, and the largest share it gives a category
that no user holds), the simulated MLE errors of GRR and of the top 1-3 subsets (means over the
rule's draws), the z-score of each subset's gain over GRR (admitted above 2) and the size chosen.
The rule's functions are wrapped, not changed (``bayesldp.adaptive.lookahead.simulated_errors``
and ``bayesldp.adaptive.survey.lookahead_size``).

Usage::

    # results/survey_lookahead_trace.md
    python benchmarks/investigations/survey_lookahead_trace.py
    python benchmarks/investigations/survey_lookahead_trace.py --rep 4 --out /tmp/t.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from survey_adaptive_gain import population  # noqa: E402


def trace(k: int, rho: float, eps: float, rep: int, truth: str) -> tuple[np.ndarray, list]:
    """The population and the rule's choices (one dict each) under ``truth``."""
    import bayesldp.adaptive.lookahead as lookahead
    import bayesldp.adaptive.survey as survey_module
    from bayesldp.adaptive import AdaptiveSurvey

    _, theta, x = population(k, rho, eps, rep)  # survey_adaptive_gain.py's
    held = np.bincount(x, minlength=k) > 0
    choices: list[dict] = []
    simulate, choose = lookahead.simulated_errors, survey_module.lookahead_size

    def recorded_errors(draws, epsilon, eps1, horizon, rng, **options):
        errors = simulate(draws, epsilon, eps1, horizon, rng, **options)
        gain = errors[:, :1] - errors
        se = gain.std(axis=0, ddof=1) / np.sqrt(gain.shape[0])
        mean = np.maximum(draws, 0.0).mean(axis=0)
        mean /= mean.sum()
        choices.append({"horizon": horizon, "top": np.sort(mean)[::-1][:3],
                        "empty": mean[~held].max() if (~held).any() else 0.0,
                        "errors": errors.mean(axis=0)[:4],
                        "z": gain.mean(axis=0)[1:4] / np.maximum(se[1:4], 1e-300)})  # fmt: skip
        return errors

    def recorded_choice(*args, users=None, **options):
        size = choose(*args, users=users, **options)
        choices[-1].update(users=users, size=size)
        return size

    lookahead.simulated_errors = recorded_errors
    survey_module.lookahead_size = recorded_choice
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            AdaptiveSurvey(k, eps, random_seed=rep, lookahead_truth=truth).simulate(x)
    finally:
        lookahead.simulated_errors, survey_module.lookahead_size = simulate, choose
    return theta, choices


def listed(values, spec: str) -> str:
    """``values`` formatted with ``spec``, comma-separated."""
    return ", ".join(format(v, spec) for v in values)


def _table(choices: list[dict]) -> list[str]:
    lines = ["| reports | horizon | pool mean: top 3 | largest on an empty category | "
             "MLE TV: GRR, s = 1, 2, 3 | z of gain: s = 1, 2, 3 | chosen |",
             "|---:|---:|---|---:|---|---|---:|"]  # fmt: skip
    for c in choices:
        lines.append(f"| {c['users']:,} | {c['horizon']:,} | {listed(c['top'], '.3f')} | "
                     f"{c['empty']:.3f} | {listed(c['errors'], '.4f')} | {listed(c['z'], '.1f')} "
                     f"| {c['size']} |")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rho", type=float, default=0.01)
    parser.add_argument("--eps", type=float, default=0.5)
    parser.add_argument("--rep", type=int, default=1)
    default_out = ROOT / "benchmarks/investigations/results/survey_lookahead_trace.md"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    command = "python benchmarks/investigations/survey_lookahead_trace.py"
    if (args.k, args.rho, args.eps, args.rep) != (10, 0.01, 0.5, 1):
        command += f" --k {args.k} --rho {args.rho} --eps {args.eps} --rep {args.rep}"
    text = [
        "# The lookahead rule's choices on one sparse population, under each simulated truth",
        "",
        f"`{command}`; {_dt.date.today()}, commit {commit}; {platform.machine()}, "
        f"{os.cpu_count()} cores.",
        "",
    ]
    for truth in ("draws", "mean"):
        theta, choices = trace(args.k, args.rho, args.eps, args.rep, truth)
        if truth == "draws":
            shares = ", ".join(f"{t:.3f}" for t in np.sort(theta)[::-1][:3])
            text += [
                f"Population {args.rep} of the cell K = {args.k}, rho = {args.rho}, eps = "
                f"{args.eps} of `benchmarks/survey_adaptive_gain.py` ({500 * args.k:,} users): "
                f"its three largest shares {shares}.",
                "MLE TV: the simulated MLE errors, means over the rule's draws; z: each "
                "subset's mean gain over GRR in standard errors (admitted above 2).",
                "",
            ]
        text += [f"## lookahead_truth = \"{truth}\"", "", *_table(choices), ""]
    args.out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
