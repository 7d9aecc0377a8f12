"""Which subset sizes does the lookahead rule choose, when, and on what evidence?

For ``--repeats`` populations of one cell of the paper's grid (the populations of
``survey_adaptive_gain.py``), runs the default survey (with ``--truth``'s simulated population:
``draws``, the default's until 2026-11-30, unless ``--truth mean``) and records every choice of the
``lookahead`` rule (:mod:`bayesldp.adaptive.lookahead`): the reports so far, the horizon, the size
chosen, and for that size the simulated gain over GRR (mean over the pool draws) and its standard
error, with the largest gain among the sizes it did not choose.  The MLE's TV of the survey and
of plain GRR on the same users close each population's rows.

Usage::

    python benchmarks/investigations/survey_lookahead_choices.py \
        --k 20 --rho 0.1 --epsilon 0.5 --repeats 3
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from survey_adaptive_gain import population  # noqa: E402


def run_population(k: int, rho: float, eps: float, rep: int, truth: str) -> list[str]:
    import bayesldp.adaptive.survey as survey_module
    from bayesldp import GRR, estimate
    from bayesldp.adaptive import AdaptiveSurvey, lookahead

    warnings.simplefilter("ignore")
    rows: list[str] = []
    survey: list = []

    def recording(draws, epsilon, eps1, horizon, rng, **options):  # the rule, its evidence logged
        state = rng.bit_generator.state
        errors = lookahead.simulated_errors(draws, epsilon, eps1, horizon, rng,
                                            now=options["now"], truth=options["truth"])  # fmt: skip
        rng.bit_generator.state = state  # the rule then draws exactly what it would have
        size = lookahead.lookahead_size(draws, epsilon, eps1, horizon, rng, **options)
        gain = errors[:, :1] - errors
        mean, se = gain.mean(axis=0), gain.std(axis=0, ddof=1) / np.sqrt(gain.shape[0])
        others = np.delete(mean, [0, size] if size else [0])
        users = survey[0].n_users if survey else 0
        rows.append(f"| {rep} | {users:,} | {horizon:,} | {size} | {mean[size]:+.4f} | "
                    f"{se[size]:.4f} | {others.max():+.4f} |")  # fmt: skip
        return size

    gen, theta, x = population(k, rho, eps, rep)  # survey_adaptive_gain.py's
    original = survey_module.lookahead_size
    survey_module.lookahead_size = recording
    try:
        survey.append(AdaptiveSurvey(k, eps, random_seed=rep, lookahead_truth=truth))
        survey[0].simulate(x)
    finally:
        survey_module.lookahead_size = original
    mle = estimate(survey[0].tally(), "mle", std_errors=False).frequencies
    grr = GRR(k, eps).simulate_tally(np.bincount(x, minlength=k), rng=gen)
    mle_grr = estimate(grr, "mle", std_errors=False).frequencies
    tv, tv_grr = 0.5 * np.abs(mle - theta).sum(), 0.5 * np.abs(mle_grr - theta).sum()
    rows.append(f"| {rep} | end: MLE TV {tv:.4f}, GRR's {tv_grr:.4f} | | | | | |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--rho", type=float, default=0.1)
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--truth", choices=("draws", "mean"), default="draws",
                        help="the rule's simulated population (AdaptiveSurvey's lookahead_truth; "
                        "draws: the rule of the committed table, the default until 2026-11-30)")
    default_out = ROOT / "benchmarks/investigations/results/survey_lookahead_choices.md"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    rows = [r for rep in range(args.repeats)
            for r in run_population(args.k, args.rho, args.epsilon, rep, args.truth)]  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    args.out.write_text("\n".join([
        "# The lookahead rule's choices and their evidence",
        "",
        "`python benchmarks/investigations/survey_lookahead_choices.py "
        f"--k {args.k} --rho {args.rho} "
        f"--epsilon {args.epsilon} --repeats {args.repeats}"
        f"{'' if args.truth == 'draws' else ' --truth ' + args.truth}`; {_dt.date.today()}, commit "
        f"{commit}; {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load:.2f}; {time.perf_counter() - started:.0f} s.",
        "",
        f"K = {args.k}, theta ~ Dirichlet({args.rho}), eps = {args.epsilon}, n = 500 K users (the "
        "populations of survey_adaptive_gain.py).  Each row is one choice: the reports so far, "
        "the horizon it simulates, the size chosen (0 = GRR), the simulated gain of that size "
        "over GRR in TV (mean over the draws; positive = better than GRR) and its standard "
        "error, and the largest mean gain among the other sizes.",
        "",
        "| population | users | horizon | size | gain | se | best other gain |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]))


if __name__ == "__main__":
    main()
