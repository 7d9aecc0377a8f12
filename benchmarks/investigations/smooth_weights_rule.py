"""The smoothness prior's non-centring weights on K = 3 tallies: the pilot's 10 % quantile of the
information (what ships) against its mean (the mutation table's ``smooth-mean-information``).

:func:`bayesldp.bayes.hmc.smooth.pilot_information` sets the weights ``w_j`` of the
partial non-centring ``y_j = (lambda scale_j)^{w_j} u_j`` from the data's information about
each RW2 coefficient over a pilot chain's draws.  Any weights give the same target (the map's
Jacobian is in the density); they change only how NUTS moves, so a bad rule shows as divergent
transitions and, through them, as bias.  For each tally (GRR reports at eps = 1, the default
``SmoothDensity(3)``), each rule and each seed: the share of divergent transitions (4 chains x
10,000 draws), the ESS of ``log lambda``, and the z-scores of E[log lambda] and of theta's
means, variances and 5 % tail masses against self-normalised importance sampling from the prior
(2,000,000 draws; the reference test's machinery,
``tests/bayes/test_sampler_reference.py``), on the combined standard error of the two.

Usage::

    python benchmarks/investigations/smooth_weights_rule.py --seeds 1,2 \
        --out benchmarks/investigations/results/smooth_weights_rule.md
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import bayesldp  # noqa: E402
import bayesldp.bayes.hmc.smooth as smooth  # noqa: E402
from bayesldp.bayes import hmc  # noqa: E402
from bayesldp.bayes.fit import import_arviz  # noqa: E402
from tests.bayes.test_sampler_reference import (  # noqa: E402
    MECH,
    ImportanceReference,
    smooth_prior_draws,
    z_scores,
)

TALLIES = [(12, 9, 7), (40, 30, 20), (25, 25, 40), (60, 20, 10), (150, 100, 50)]
#: numpy's own quantile (``smooth.np`` is numpy itself: the patch below is global, undone after)
QUANTILE = np.quantile


def _mean_information(information, quantile, axis=0):
    return np.mean(information, axis=axis)


def one_run(rule: str, tally, prior, seed: int, ref, log_lam) -> dict:
    """One hmc fit under ``rule`` ("q10" as shipped, "mean"): divergences, ESS and z-scores."""
    if rule == "mean":
        smooth.np.quantile = _mean_information  # the mutant's rule, restored below
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = hmc.sample(tally, prior, draws=10_000, chains=4, random_seed=seed)
    finally:
        smooth.np.quantile = QUANTILE
    return score(out.theta, out.extra["smoothness"], out.sample_stats["diverging"], ref, log_lam)


def score(theta, lam, diverging, ref, log_lam) -> dict:
    """Draws (chains, draws, ...) against the importance reference: the divergent share, the
    ESS of ``log lambda``, the z-score of E[log lambda] and the largest |z| over theta's 12
    checks (:func:`z_scores`), each on the combined standard error of the two estimates."""
    az = import_arviz()
    z = z_scores(np.asarray(theta), ref)
    g = np.log(np.asarray(lam))
    want, se = ref.expect(log_lam)
    ess = float(az.ess(g, method="mean"))
    z_lam = (g.mean() - want) / math.hypot(g.std() / math.sqrt(ess), se)
    return {"divergent": float(np.mean(diverging)), "ess": ess,
            "z_lam": z_lam, "z_theta": max(abs(v[0]) for v in z.values())}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    started, load = time.perf_counter(), os.getloadavg()[0]
    rows = []
    for reports in TALLIES:
        tally = MECH.tally_from_report_counts(np.array(reports))
        prior = bayesldp.bayes.SmoothDensity(3)
        theta, log_lam = smooth_prior_draws(3, prior, 2_000_000, np.random.default_rng(36))
        ref = ImportanceReference(theta, tally.loglik(theta))
        for seed in seeds:
            for rule in ("q10", "mean"):
                r = one_run(rule, tally, prior, seed, ref, log_lam)
                row = (f"| {reports} | {ref.ess:,.0f} | {rule} | {seed} | "
                       f"{100 * r['divergent']:.2f} | {r['ess']:,.0f} | {r['z_lam']:+.2f} | "
                       f"{r['z_theta']:.2f} |")  # fmt: skip
                print(row, flush=True)
                rows.append(row)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The smoothness prior's non-centring weights: 10 % quantile against mean (K = 3)",
        "",
        f"- Command: `python benchmarks/investigations/smooth_weights_rule.py --seeds {args.seeds}"
        + ("" if args.out == "-" else f" --out {args.out}") + "`",
        f"- Date: {now}; commit {commit}; {time.perf_counter() - started:.0f} s; load average "
        f"at the start {load:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}",
        "- GRR reports at eps = 1, default `SmoothDensity(3)`; hmc 4 chains x 10,000 draws; "
        "reference: importance sampling from 2,000,000 prior draws (its ESS in the table); "
        "z on the combined standard error; the reference test's bound is 3.97 (13 checks, "
        "family-wise 1e-3) and 0.2 % divergent",
        "",
        "| reports | reference ESS | weights | seed | divergent % | ESS log lambda "
        "| z E[log lambda] | max abs z theta |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
        *rows,
    ]
    if args.out != "-":
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
