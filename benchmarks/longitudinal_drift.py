"""A posterior across rounds (``bayesldp.fit_rounds``) on a drifting population.

Population: K = 10, starting distribution Zipf(1) (``theta_1 ∝ 1/(x + 1)``: 0.341 down to
0.034); the last category (the rarest, 0.034) grows by 0.01 of the population per round
(``theta_t[9] = 0.034 + 0.01 (t - 1)``, t = 1..T, 0.224 at T = 20), the others shrink in
proportion (their ratios stay fixed).  Each round ``n`` users report once through L-GRR
(eps = 1, ``eps_perm = 2``; one round's channel is GRR(10, 1)).  Two scenarios:

* ``fresh``: each round's users are a new sample from ``theta_t`` (values multinomial); the
  truth is ``theta_t``.  The model's assumptions hold.
* ``panel``: one panel of ``n`` users for every round (values drawn from ``theta_1`` once; each
  round 1% of the population, ``n / 100`` users outside the growing category, move to it), each
  user's permanent response memoised (``mechanism.perturb(..., users=, memo=)``), the intended
  use of the longitudinal mechanisms; the truth is the panel's own distribution in that round.
  Reports of a user who keeps a value share its permanent response across rounds: rounds are
  not independent given ``theta_t``, which every estimator here (and the model) assumes.

Estimators of ``theta_t`` from the same reports: the posterior mean of ``fit_rounds`` (default
``RandomWalkPrior``, 4 chains x 1000 draws after 1000 tuning); per round ``estimate(tally,
"mle")``; per round ``bayesldp.fit(tally)`` (default prior and method); multi-freq-ldpy 0.2.5's
longitudinal L-GRR estimators on the same reports (``MI_long``: matrix inversion, clipped and
normalised; ``IBU``: the iterative Bayesian update; what ``L_GRR_Aggregator_MI`` / ``_IBU``
call), given the reports' true channel parameters: multi-freq-ldpy's own L-GRR ``p2`` realises
epsilon 0.699 per round at eps_1 = 1 (``mfl_parameter_gap``), so its aggregators would decode
bayesldp's reports with a channel they were not drawn from.  multi-freq-ldpy has no estimator
across rounds: its longitudinal estimators are per round.  Metrics: TV per round, averaged
over rounds and repeats (standard error over repeats), the paired difference to the dynamic
posterior's TV, and the 90% equal-tailed intervals' coverage of the K x T true frequencies
(pooled over repeats; binomial standard error, which ignores the correlation between a
repeat's cells).

Usage::

    python benchmarks/longitudinal_drift.py --repeats 20 --scenarios fresh,panel
    python benchmarks/longitudinal_drift.py --quick --out /tmp/drift.md
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

import bayesldp
from bayesldp.bayes.dynamic import summarize_rounds

K, EPSILON, EPS_PERM, SEED = 10, 1.0, 2.0, 20261201
GROWING, STEP = K - 1, 0.01
OUT = Path(__file__).parent / "results" / "longitudinal_drift.md"
NAMES = {
    "dynamic": "fit_rounds posterior mean (random walk)",
    "mle": "per-round MLE",
    "fit": "per-round fit (default prior)",
    "mfl_mi": "multi-freq-ldpy L-GRR MI",
    "mfl_ibu": "multi-freq-ldpy L-GRR IBU",
}


def trajectory(rounds: int) -> np.ndarray:
    """(T, K): Zipf(1) start, the last category + STEP per round, the others in proportion."""
    start = 1.0 / np.arange(1, K + 1)
    start /= start.sum()
    out = np.empty((rounds, K))
    for t in range(rounds):
        grown = start[GROWING] + STEP * t
        out[t] = start * (1.0 - grown) / (1.0 - start[GROWING])
        out[t, GROWING] = grown
    return out


def fresh_rounds(mech, thetas, n, rng):
    """Each round a new sample of n users from theta_t; truth theta_t."""
    reports = [mech.perturb(np.repeat(np.arange(K), rng.multinomial(n, th)), rng) for th in thetas]
    return reports, thetas


def panel_rounds(mech, thetas, n, rng):
    """One panel, memoised permanent responses; n / 100 users move to the growing category per
    round; truth the panel's distribution."""
    values = np.repeat(np.arange(K), rng.multinomial(n, thetas[0]))
    users = np.arange(n)
    memo = mech.memo()
    reports, truth = [], []
    for t in range(len(thetas)):
        if t:
            movers = rng.choice(np.flatnonzero(values != GROWING), int(STEP * n), replace=False)
            values[movers] = GROWING
        truth.append(np.bincount(values, minlength=K) / n)
        reports.append(mech.perturb(values, rng, users=users, memo=memo))
    return reports, np.array(truth)


def mfl_estimates(reports, mech) -> dict[str, np.ndarray]:
    """multi-freq-ldpy's two longitudinal estimators (``MI_long`` and ``IBU``, what its
    ``L_GRR_Aggregator_MI`` / ``_IBU`` call) on the same reports, with the channel's true
    parameters: its aggregators' own ``p2`` gives a channel of epsilon 0.699, not eps_1 = 1
    (:func:`mfl_parameter_gap`), so they would decode these reports with the wrong channel."""
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU, MI_long

    p1, q1 = mech.permanent.p, mech.permanent.q
    p2, q2 = mech.instant.p, mech.instant.q
    channel = np.full((K, K), mech.q)
    np.fill_diagonal(channel, mech.p)
    mi, ibu = [], []
    for r in reports:
        counts = np.bincount(r, minlength=K).astype(float)
        mi.append(MI_long(counts, len(r), p1, q1, p2, q2))
        ibu.append(IBU(K, channel, counts / len(r), 10000, 1e-12, "max_abs"))
    return {"mfl_mi": np.array(mi), "mfl_ibu": np.array(ibu)}


def mfl_parameter_gap(mech) -> tuple[float, float, float]:
    """multi-freq-ldpy 0.2.5's L-GRR ``p2`` (its closed form in ``L_GRR_Client`` and the
    aggregators), bayesldp's, and the one-round epsilon multi-freq-ldpy's realises."""
    p1 = np.exp(EPS_PERM) / (np.exp(EPS_PERM) + K - 1)
    q1 = (1 - p1) / (K - 1)
    e1 = np.exp(EPSILON)
    p2 = (q1 - e1 * p1) / (-p1 * e1 + K * q1 * e1 - q1 * e1 - p1 * (K - 1) + q1)
    q2 = (1 - p2) / (K - 1)
    realised = np.log((p1 * p2 + (1 - p1) * q2) / (q1 * p2 + (1 - q1) * q2))
    return float(p2), float(mech.instant.p), float(realised)


def one_repeat(scenario: str, rep: int, args) -> dict:
    rng = np.random.default_rng([SEED, rep, 0 if scenario == "fresh" else 1])
    mech = bayesldp.LGRR(K, EPSILON, eps_perm=EPS_PERM)
    thetas = trajectory(args.rounds)
    make = fresh_rounds if scenario == "fresh" else panel_rounds
    reports, truth = make(mech, thetas, args.n, rng)
    tallies = [mech.tally(r) for r in reports]
    est: dict[str, np.ndarray] = {}
    cover: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit_rounds(tallies, args.draws, tune=args.draws, chains=args.chains,
                                    random_seed=[SEED, rep], progressbar=False)  # fmt: skip
    seconds["dynamic"] = time.perf_counter() - start
    summary = summarize_rounds(idata, 0.9)
    est["dynamic"] = summary["mean"].values
    cover["dynamic"] = (summary["lower"].values <= truth) & (truth <= summary["upper"].values)
    attrs = idata.posterior.attrs
    diag = {k: float(attrs[k]) for k in ("r_hat_max", "ess_bulk_min", "divergences")}
    diag["sigma"] = float(idata.posterior["sigma"].mean())
    start = time.perf_counter()
    est["mle"] = np.array([bayesldp.estimate(t, "mle").frequencies for t in tallies])
    seconds["mle"] = time.perf_counter() - start
    start = time.perf_counter()
    means, covered = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for t, tally in enumerate(tallies):
            fit = bayesldp.fit(tally, args.draws, chains=args.chains, random_seed=[SEED, rep, t],
                               progressbar=False)  # fmt: skip
            draws = fit.posterior["theta"].values.reshape(-1, K)
            lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
            means.append(draws.mean(axis=0))
            covered.append((lo <= truth[t]) & (truth[t] <= hi))
    seconds["fit"] = time.perf_counter() - start
    est["fit"], cover["fit"] = np.array(means), np.array(covered)
    if not args.no_mfl:
        start = time.perf_counter()
        est.update(mfl_estimates(reports, mech))
        seconds["mfl"] = time.perf_counter() - start
    tv = {name: 0.5 * np.abs(value - truth).sum(axis=1) for name, value in est.items()}
    return {"tv": tv, "cover": cover, "seconds": seconds, "diag": diag, "truth": truth}


def mean_se(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else float("nan")
    return float(values.mean()), float(se)


def table(scenario: str, results: list[dict], args) -> list[str]:
    names = [name for name in NAMES if name in results[0]["tv"]]
    lines = [f"### Scenario `{scenario}` ({len(results)} repeats)", "",
             "| estimator | TV (mean over rounds and repeats) | se | TV - dynamic's (paired) | se "
             "| 90% coverage | se | coverage of the growing category |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    dyn = np.array([r["tv"]["dynamic"].mean() for r in results])
    for name in names:
        per_rep = np.array([r["tv"][name].mean() for r in results])
        tv, se = mean_se(per_rep)
        diff, dse = mean_se(per_rep - dyn) if name != "dynamic" else (0.0, 0.0)
        paired = ["", ""] if name == "dynamic" else [f"{diff:+.4f}", f"{dse:.4f}"]
        row = [NAMES[name], f"{tv:.4f}", f"{se:.4f}", *paired]
        if name in results[0]["cover"]:
            cells = np.concatenate([r["cover"][name].ravel() for r in results])
            p = cells.mean()
            grow = np.concatenate([r["cover"][name][:, GROWING] for r in results]).mean()
            row += [f"{p:.3f}", f"{np.sqrt(p * (1 - p) / cells.size):.3f}", f"{grow:.3f}"]
        else:
            row += ["", "", ""]
        lines.append("| " + " | ".join(row) + " |")
    by_round = np.mean([r["tv"]["dynamic"] for r in results], axis=0)
    mle_round = np.mean([r["tv"]["mle"] for r in results], axis=0)
    diags = [r["diag"] for r in results]
    secs = {key: np.median([r["seconds"][key] for r in results]) for key in results[0]["seconds"]}
    lines += [
        "",
        f"- Dynamic fits: largest r_hat {max(d['r_hat_max'] for d in diags):.3f}, smallest bulk "
        f"ESS {min(d['ess_bulk_min'] for d in diags):.0f}, divergent transitions "
        f"{int(sum(d['divergences'] for d in diags))} in all "
        f"({sum(d['divergences'] > 0 for d in diags)}/{len(diags)} fits with any); "
        "posterior mean of sigma (median over repeats) "
        f"{np.median([d['sigma'] for d in diags]):.3f}",
        f"- Seconds (median over repeats): fit_rounds {secs['dynamic']:.1f} per fit (whole "
        f"process of one fit, compilation included); {args.rounds} per-round `fit` calls "
        f"{secs['fit']:.1f} in all; {args.rounds} MLEs {secs['mle']:.2f}"
        + (f"; multi-freq-ldpy MI + IBU {secs['mfl']:.2f}" if "mfl" in secs else ""),
        "- Dynamic TV by round (mean over repeats): " + ", ".join(f"{v:.3f}" for v in by_round),
        "- MLE TV by round: " + ", ".join(f"{v:.3f}" for v in mle_round),
        "",
    ]
    return lines


def header(args, argv, minutes: float, load: float) -> list[str]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    gap = mfl_parameter_gap(bayesldp.LGRR(K, EPSILON, eps_perm=EPS_PERM))
    return [
        "# A posterior across rounds (fit_rounds) on a drifting population, L-GRR",
        "",
        f"- Command: `python benchmarks/longitudinal_drift.py {' '.join(argv)}`",
        f"- Date: {now}; {minutes:.1f} min; commit {commit}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load:.2f}; Python {platform.python_version()}, bayesldp {bayesldp.__version__}",
        f"- K = {K}, eps = {EPSILON:g} (eps_perm = {EPS_PERM:g}), n = {args.n:,} users per "
        f"round, T = {args.rounds} rounds; start Zipf(1), category {GROWING} grows from 0.034 by "
        f"{STEP:g} of the population per round, the others shrink in proportion; "
        f"fit_rounds and fit: {args.chains} chains x {args.draws} draws "
        f"(fit_rounds: {args.draws} tuning)",
        f"- multi-freq-ldpy 0.2.5's L-GRR closed form gives p2 = {gap[0]:.4f} where bayesldp's "
        f"is {gap[1]:.4f}: one round of its L_GRR_Client at eps_1 = {EPSILON:g} realises "
        f"epsilon {gap[2]:.3f}; so its estimators (MI_long, IBU) are run here on bayesldp's "
        "reports with the reports' true channel",
        "- Scenarios and estimators: see the script's docstring (fresh: a new sample per round, "
        "the model's assumptions; panel: one memoised panel, rounds share permanent responses)",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--scenarios", default="fresh,panel")
    parser.add_argument("--no-mfl", action="store_true", help="leave multi-freq-ldpy out")
    parser.add_argument("--quick", action="store_true",
                        help="1 repeat, 5 rounds, 300 draws, 2 chains; needs --out")  # fmt: skip
    parser.add_argument("--out", default=str(OUT), help="results file ('-': print only)")
    args = parser.parse_args(argv)
    shown = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.repeats, args.rounds, args.draws, args.chains = 1, 5, 300, 2
        if Path(args.out).resolve() == OUT.resolve():
            parser.error("--quick writes nothing into benchmarks/results: give --out")
    load = os.getloadavg()[0]
    start = time.perf_counter()
    lines: list[str] = []
    for scenario in args.scenarios.split(","):
        results = []
        for rep in range(args.repeats):
            results.append(one_repeat(scenario, rep, args))
            tvs = ", ".join(f"{k} {v.mean():.4f}" for k, v in results[-1]["tv"].items())
            print(f"{scenario} repeat {rep}: TV {tvs}", flush=True)
        lines += table(scenario, results, args)
    text = "\n".join(header(args, shown, (time.perf_counter() - start) / 60, load) + lines)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
