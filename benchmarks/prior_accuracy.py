"""Posterior means under several priors against the frequentist estimators, on users' populations.

The default prior's accuracy benchmark, one mechanism per run (GRR by default; ``--mechanism OUE``
or ``OLH``).  Populations: Zipf(s) for s in 1.1, 1.5, 2 and K = 30 (long-tailed), Dirichlet(0.05)
(sparse, redrawn per repeat) and Dirichlet(10) (flat, redrawn per repeat) with K = 30, and three
shipped data sets with their own K (``anes96_income`` K = 24, ``us_airports_by_state`` K = 56,
``occupational_status`` K = 64).  For each population, epsilon in 0.5, 1, 2, 4, n in 1e3, 1e4, 1e5
and each repeat: draw the users' values (multinomial n, theta), simulate the mechanism's tally
(seeded), and estimate theta by

* the frequentist estimators ``mle``, ``norm_sub``, ``ibu`` and ``em_mr`` (``bayesldp.estimate``);
* the posterior mean of ``bayesldp.fit`` (default sampler, 2 chains x 1000 draws, 1000 tuning
  steps) under ``Dirichlet(1)``, ``Dirichlet(1/2)``, the adaptive prior with its default
  ``log a ~ N(log 1/2, 2^2)`` (``"adaptive"``), with ``log a ~ N(log 1/2, 1)``
  (``adaptive_sd1``) and under the exchangeable logistic-normal prior with a learnt spread
  (``logistic_normal``, ``bayesldp.LogisticNormal``; only when ``--priors`` names it), with the
  coverage of their 90% equal-tailed intervals and the largest r_hat of each fit.

Table 1: per cell, each posterior's MSE (mean over repeats) divided by the best frequentist
estimator's.  Table 2: per prior, the share of cells at or below 1.0x and the largest ratio;
coverage pooled per population family; median fit seconds.  Table 3: each frequentist estimator
against the best of the other three, for scale.  Table 4: each posterior against each
frequentist estimator alone (fixed in advance).  Table 5: the total variation of each posterior
mean against the smaller of the MLE's and Norm-Sub's, per cell.  OUE and OLH tallies keep one row
per distinct report (up to n), so their fits at n >= 1e4 take from seconds to minutes (``fit``'s
"auto" may choose the Laplace method there); their runs use fewer priors and repeats, and
``--ns`` runs a part of the n grid.

Usage::

    python benchmarks/prior_accuracy.py            # writes benchmarks/results/prior_accuracy.md
    python benchmarks/prior_accuracy.py --mechanism OUE --priors dir1,adaptive --repeats 1 --ns 1000
                                                   # writes benchmarks/results/prior_accuracy_oue.md
    python benchmarks/prior_accuracy.py --mechanism OUE --priors dir1,adaptive --repeats 1 \
        --ns 10000 --out benchmarks/results/prior_accuracy_oue_1e4.md
    python benchmarks/prior_accuracy.py --mechanism OLH --priors dir1,adaptive --repeats 1 \
        --ns 10000 --out benchmarks/results/prior_accuracy_olh_1e4.md
    python benchmarks/prior_accuracy.py --mechanism OUE --priors dir1,adaptive --repeats 1 \
        --ns 100000 --out benchmarks/results/prior_accuracy_oue_1e5.md   # OLH likewise: _olh_1e5
    python benchmarks/prior_accuracy.py --priors adaptive,logistic_normal \
        --out benchmarks/results/prior_accuracy_logistic_normal.md --repeats 2
    python benchmarks/prior_accuracy.py --quick    # 1 repeat, n = 1e3 only, writes nothing
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import bayesldp
from bayesldp.bayes import AdaptiveDirichlet
from bayesldp.datasets import load_dataset

K = 30
EPSILONS = (0.5, 1.0, 2.0, 4.0)
NS = (1_000, 10_000, 100_000)
FREQUENTIST = ("mle", "norm_sub", "ibu", "em_mr")
PRIORS = {  # name -> prior given K
    "dir1": lambda k: 1.0,
    "dir05": lambda k: 0.5,
    "adaptive": lambda k: "adaptive",  # log a ~ N(log 1/2, 2^2), the AdaptiveDirichlet default
    "adaptive_sd1": lambda k: AdaptiveDirichlet(k, log_a_sd=1.0),
    "logistic_normal": lambda k: "logistic_normal",  # LogisticNormal(k): log lambda ~ N(0, 1)
    "dir005": lambda k: 0.05,  # the sparse family's own prior: there, the Bayes posterior mean
}
#: rules choosing between two fits of the run (no fit of their own): name -> (first, second,
#: z): the second where its PSIS-LOO elpd (bayesldp.loo) exceeds the first's by more than z
#: standard errors of the difference, else the first; "loo_choice" takes the larger elpd,
#: "loo_choice_2se" keeps the adaptive prior unless the reports favour the other clearly
CHOICES = {"loo_choice": ("adaptive", "logistic_normal", 0.0),
           "loo_choice_2se": ("adaptive", "logistic_normal", 2.0)}  # fmt: skip
DATASETS = ("anes96_income", "us_airports_by_state", "occupational_status")
POPULATIONS = ("zipf1.1", "zipf1.5", "zipf2", "dirichlet0.05", "dirichlet10", *DATASETS)
FAMILY = {"zipf1.1": "long-tailed", "zipf1.5": "long-tailed", "zipf2": "long-tailed",
          "dirichlet0.05": "sparse", "dirichlet10": "flat",
          **{d: "data sets" for d in DATASETS}}  # fmt: skip
OUT = Path(__file__).parent / "results" / "prior_accuracy.md"


def population(name: str, rng: np.random.Generator) -> np.ndarray:
    """theta of a population (the Dirichlet ones are drawn with ``rng``)."""
    if name.startswith("zipf"):
        w = 1.0 / np.arange(1, K + 1) ** float(name[4:])
    elif name.startswith("dirichlet"):
        w = rng.dirichlet(np.full(K, float(name[9:])))
    else:
        w = load_dataset(name).counts.astype(float)
    return w / w.sum()


def simulate(
    pop: str, eps: float, n: int, rep: int, seed: int, mechanism: str = "GRR"
) -> tuple[np.random.Generator, np.ndarray, bayesldp.Tally]:
    """The cell's Generator, theta and tally; the Generator then gives each prior's fit seed in
    turn (``PRIORS`` order)."""
    rng = np.random.default_rng([seed, POPULATIONS.index(pop), int(eps * 10), n, rep])
    theta = population(pop, rng)
    counts = rng.multinomial(n, theta)
    return rng, theta, getattr(bayesldp, mechanism)(theta.size, eps).simulate_tally(counts, rng=rng)


def one_tally(
    pop: str, eps: float, n: int, rep: int, seed: int, mechanism: str, priors: tuple[str, ...]
) -> list[dict]:
    """Every estimator on one simulated tally."""
    rng, theta, tally = simulate(pop, eps, n, rep, seed, mechanism)
    k = theta.size
    rows = []
    for method in FREQUENTIST:
        f = bayesldp.estimate(tally, method).frequencies
        rows.append(dict(estimator=method, mse=float(np.mean((f - theta) ** 2)),
                         tv=0.5 * float(np.abs(f - theta).sum())))  # fmt: skip
    fits = {}
    for name in priors:
        if name in CHOICES:
            continue
        prior = PRIORS[name]
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = bayesldp.fit(tally, prior=prior(k), draws=1000, chains=2,
                                 random_seed=int(rng.integers(2**62)))  # fmt: skip
        secs = time.perf_counter() - start
        fits[name] = idata, secs
        rows.append(posterior_row(name, idata, theta, secs))
    for name in priors:
        if name in CHOICES:
            rows.append(loo_choice(name, fits, theta))
    for row in rows:
        row.update(population=pop, epsilon=eps, n=n, repeat=rep, k=k)
    return rows


def loo_choice(name: str, fits: dict, theta: np.ndarray) -> dict:
    """The row of ``CHOICES[name]``: of its two fits, the one its rule chooses (its seconds:
    both fits' and the two LOO computations'), and the share of reports whose Pareto k exceeds
    0.7 in either LOO (where its estimate is unreliable)."""
    first, second, z = CHOICES[name]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # counted below: the reports with Pareto k > 0.7
        loos = [bayesldp.loo(fits[p][0]) for p in (first, second)]
    diff = bayesldp.loo_compare(*loos)
    # an undefined se (a report's LOO density not finite) is no clear evidence for the second
    threshold = z * diff["se"] if z else 0.0
    chosen = second if -diff["elpd_diff"] > threshold else first
    secs = fits[first][1] + fits[second][1] + time.perf_counter() - start
    bad = np.maximum(*(np.asarray(x.pareto_k) for x in loos)) > 0.7  # per report, or per row
    weight = np.ones(bad.size) if bad.size == tally_n(loos[0]) else np.asarray(loos[0].counts)
    return dict(posterior_row(name, fits[chosen][0], theta, secs), chosen=chosen,
                elpd_diff=diff["elpd_diff"], elpd_se=diff["se"],
                high_k=float(weight @ bad / weight.sum()))  # fmt: skip


def tally_n(loo: Any) -> int:
    """The number of reports a LOO result covers."""
    return int(np.asarray(loo.counts).sum())


def posterior_row(name: str, idata: Any, theta: np.ndarray, secs: float) -> dict:
    """A fit's row: its posterior mean's MSE and TV, its 90 % intervals' coverage, seconds and
    largest r_hat."""
    k = theta.size
    draws = idata.posterior["theta"].values.reshape(-1, k)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    return dict(
        estimator=name,
        mse=float(np.mean((draws.mean(axis=0) - theta) ** 2)),
        tv=0.5 * float(np.abs(draws.mean(axis=0) - theta).sum()),
        covered=float(np.mean((theta >= lo) & (theta <= hi))),
        seconds=secs,
        r_hat=float(idata.posterior.attrs.get("r_hat_max", np.nan)),
    )


def run(
    repeats: int,
    ns: tuple[int, ...],
    seed: int,
    workers: int,
    mechanism: str,
    priors: tuple[str, ...],
    populations: tuple[str, ...] = POPULATIONS,
) -> pd.DataFrame:
    jobs = [(p, e, n, r, seed, mechanism, priors) for p in populations for e in EPSILONS
            for n in ns for r in range(repeats)]  # fmt: skip
    rows: list[dict] = []
    with cf.ProcessPoolExecutor(workers) as pool:
        for i, out in enumerate(pool.map(one_tally, *zip(*jobs, strict=True)), 1):
            rows.extend(out)
            if i % 20 == 0:
                print(f"{i}/{len(jobs)} tallies", file=sys.stderr)
    return pd.DataFrame(rows)


def tables(df: pd.DataFrame, priors: tuple[str, ...]) -> str:
    cells = ["population", "epsilon", "n"]
    mse = df.pivot_table(index=cells, columns="estimator", values="mse", aggfunc="mean")
    best = mse[list(FREQUENTIST)].min(axis=1)
    ratio = mse[list(priors)].div(best, axis=0)
    lines = ["## MSE of each posterior mean over the best frequentist estimator, per cell", "",
             "| population | eps | n | best frequentist | " + " | ".join(priors) + " |",
             "|---|---:|---:|---|" + "---:|" * len(priors)]  # fmt: skip
    best_name = mse[list(FREQUENTIST)].idxmin(axis=1)
    for (pop, eps, n), row in ratio.iterrows():
        vals = " | ".join(f"{row[p]:.2f}" for p in priors)
        lines.append(f"| {pop} | {eps:g} | {n:,} | {best_name[(pop, eps, n)]} | {vals} |")
    families = list(dict.fromkeys(FAMILY[p] for p in POPULATIONS if p in set(df["population"])))
    lines += ["", "## Summary per prior", "",
              "| prior | cells <= 1.0x | cells <= 1.1x | largest ratio | median fit s | "
              "largest r_hat | " + " | ".join(f"coverage {f}" for f in families) + " |",
              "|---|---:|---:|---:|---:|---:|" + "---:|" * len(families)]  # fmt: skip
    post = df[df["estimator"].isin(list(priors))].copy()
    post["family"] = post["population"].map(FAMILY)
    for p in priors:
        r = ratio[p]
        sub = post[post["estimator"] == p]
        cov = sub.groupby("family")["covered"].mean()
        covs = " | ".join(f"{cov[f]:.3f}" for f in families)
        lines.append(f"| {p} | {(r <= 1.0).mean():.1%} ({int((r <= 1.0).sum())}/{len(r)}) | "
                     f"{(r <= 1.1).mean():.1%} | {r.max():.2f} | {sub['seconds'].median():.2f} | "
                     f"{sub['r_hat'].max():.3f} | {covs} |")  # fmt: skip
    lines += ["", "## Each frequentist estimator against the best of the other three", "",
              "How demanding the posterior's target is: a frequentist estimator at most 1.0x the "
              "best of the others is the best of the four in that cell.", "",
              "| estimator | cells <= 1.0x | cells <= 1.1x | largest ratio |",
              "|---|---:|---:|---:|"]  # fmt: skip
    for name in FREQUENTIST:
        others = mse[[f for f in FREQUENTIST if f != name]].min(axis=1)
        r = mse[name] / others
        lines.append(f"| {name} | {(r <= 1.0).mean():.1%} ({int((r <= 1.0).sum())}/{len(r)}) | "
                     f"{(r <= 1.1).mean():.1%} | {r.max():.2f} |")  # fmt: skip
    lines += ["", "## Each posterior against each frequentist estimator alone", "",
              "The target's comparison is with the best of the four in each cell, picked with the "
              "truth known; here each estimator is fixed in advance.", "",
              "| prior | estimator | cells <= 1.0x | cells <= 1.1x | largest ratio | "
              "geometric mean ratio |",
              "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for p in priors:
        for name in FREQUENTIST:
            r = mse[p] / mse[name]
            lines.append(f"| {p} | {name} | {(r <= 1.0).mean():.1%} ({int((r <= 1.0).sum())}/"
                         f"{len(r)}) | {(r <= 1.1).mean():.1%} | {r.max():.2f} | "
                         f"{np.exp(np.log(r).mean()):.2f} |")  # fmt: skip
    return "\n".join(lines + tv_target(df, priors))


def tv_target(df: pd.DataFrame, priors: tuple[str, ...]) -> list[str]:
    """Per prior: the cells where its posterior mean's TV (mean over repeats) is at or below
    both the MLE's and Norm-Sub's, its largest TV over the smaller of those two and over the
    best frequentist estimator's (and that cell), and its 90 % coverage over all cells; then
    the same for the best of the priors
    in each cell, chosen with the truth known (a bound on choosing among them, not an
    estimator)."""
    if "tv" not in df:
        return []
    tv = df.pivot_table(index=["population", "epsilon", "n"], columns="estimator", values="tv",
                        aggfunc="mean")  # fmt: skip
    floor = tv[["mle", "norm_sub"]].min(axis=1)
    best = tv[list(FREQUENTIST)].min(axis=1)
    lines = ["", "## Total variation: at or below both the MLE and Norm-Sub", "",
             "Per cell the TV of the posterior mean (mean over repeats) against the smaller of "
             "the MLE's and Norm-Sub's, and against the best of the four frequentist "
             "estimators; coverage of the 90% intervals over every cell.", "",
             "| prior | cells <= min(MLE, Norm-Sub) | largest TV / min(MLE, Norm-Sub) | that cell "
             "| largest TV / best frequentist | that cell | coverage |",
             "|---|---:|---:|---|---:|---|---:|"]  # fmt: skip
    oracle = tv[list(priors)].min(axis=1)
    for p, values in [*((p, tv[p]) for p in priors), ("best of the priors (oracle)", oracle)]:
        at_or_below = values <= floor
        worst = [(r.max(), ", ".join(str(v) for v in r.idxmax()))
                 for r in (values / floor, values / best)]  # fmt: skip
        covered = (f"{df.loc[df['estimator'] == p, 'covered'].mean():.3f}" if p in priors
                   else "-")  # fmt: skip
        lines.append(f"| {p} | {at_or_below.mean():.1%} ({int(at_or_below.sum())}/"
                     f"{len(tv)}) | {worst[0][0]:.2f} | {worst[0][1]} | {worst[1][0]:.2f} | "
                     f"{worst[1][1]} | {covered} |")  # fmt: skip
    return lines + choice_table(df)


def choice_table(df: pd.DataFrame) -> list[str]:
    """Per population family: how often each LOO choice took its second prior, and its 90%
    coverage there."""
    lines = []
    for name, (first, second, z) in CHOICES.items():
        sub = df[df["estimator"] == name].copy()
        if sub.empty:
            continue
        sub["family"] = sub["population"].map(FAMILY)
        lines += ["", f"## {name}: which fit PSIS-LOO chose", "",
                  f"Per population family: the share of tallies where {second}'s elpd exceeded "
                  f"{first}'s by more than {z:g} standard errors of the difference (then "
                  f"chosen, else {first}), the chosen fit's 90% coverage, and the share of "
                  "reports whose Pareto k exceeded 0.7 in either fit's LOO (its estimate "
                  "unreliable there; Vehtari, Gelman and Gabry 2017).", "",
                  f"| family | tallies | chose {second} | coverage | reports with k > 0.7 |",
                  "|---|---:|---:|---:|---:|"]  # fmt: skip
        for fam, g in sub.groupby("family", sort=False):
            lines.append(f"| {fam} | {len(g)} | {(g['chosen'] == second).mean():.1%} | "
                         f"{g['covered'].mean():.3f} | {g['high_k'].mean():.1%} |")  # fmt: skip
    return lines


def title(priors: tuple[str, ...]) -> str:
    """The priors of a run, in words (the adaptive prior's two settings as one)."""
    words = {"dir1": "Dirichlet(1)", "dir05": "Dirichlet(1/2)", "adaptive": "the adaptive prior",
             "adaptive_sd1": "the adaptive prior",
             "logistic_normal": "the logistic-normal prior",
             "dir005": "Dirichlet(0.05)",
             "loo_choice": "the better of the two by LOO",
             "loo_choice_2se": "the better of the two by LOO"}  # fmt: skip
    names = list(dict.fromkeys(words[p] for p in priors))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mechanism", choices=("GRR", "OUE", "OLH"), default="GRR")
    ap.add_argument("--priors", default=",".join(PRIORS), help=f"comma list of {list(PRIORS)}")
    ap.add_argument("--ns", default=",".join(map(str, NS)), help="comma list of n")
    ap.add_argument("--populations", default=",".join(POPULATIONS),
                    help=f"comma list of {list(POPULATIONS)}")  # fmt: skip
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, help="results file (default: by mechanism, below)")
    args = ap.parse_args()
    priors = tuple(p.strip() for p in args.priors.split(","))
    if unknown := set(priors) - set(PRIORS) - set(CHOICES):
        ap.error(f"--priors: unknown {sorted(unknown)}; valid: {[*PRIORS, *CHOICES]}")
    for name in set(priors) & set(CHOICES):
        if missing := set(CHOICES[name][:2]) - set(priors):
            ap.error(f"--priors: {name} chooses between fits of {sorted(missing)}: name them")
    ns = tuple(int(n) for n in args.ns.split(","))
    populations = tuple(p.strip() for p in args.populations.split(","))
    if unknown := set(populations) - set(POPULATIONS):
        ap.error(f"--populations: unknown {sorted(unknown)}; valid: {list(POPULATIONS)}")
    repeats, ns = (1, (1_000,)) if args.quick else (args.repeats, ns)
    start = time.perf_counter()
    load = os.getloadavg()
    df = run(repeats, ns, args.seed, args.workers, args.mechanism, priors, populations)
    options = "".join(
        [
            f" --mechanism {args.mechanism}" if args.mechanism != "GRR" else "",
            f" --priors {args.priors}" if priors != tuple(PRIORS) else "",
            f" --ns {args.ns}" if ns != NS and not args.quick else "",
            f" --populations {args.populations}" if populations != POPULATIONS else "",
            f" --out {args.out}" if args.out else "",
        ]
    )
    header = "\n".join([
        f"# Posterior means under {title(priors)} ({args.mechanism})",
        "",
        f"- Command: `python benchmarks/prior_accuracy.py{options} --repeats {repeats}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; {args.workers} worker processes",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"bayesldp {bayesldp.__version__}",
        f"- {repeats} repeat{'s' if repeats != 1 else ''} per cell; populations "
        f"{', '.join(populations)}; eps "
        f"{list(EPSILONS)}; n {list(ns)}; posteriors: 2 chains x 1000 draws",
        "",
    ])  # fmt: skip
    text = header + "\n" + tables(df, priors) + "\n"
    print(text)
    if not args.quick:
        out = args.out or (
            OUT
            if args.mechanism == "GRR"
            else OUT.with_name(f"prior_accuracy_{args.mechanism.lower()}.md")
        )
        out.write_text(text)


if __name__ == "__main__":
    main()
