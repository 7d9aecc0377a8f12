"""Every frequentist estimator against the better of clip-and-renormalise and the uniform answer.

The benchmark behind the default of :func:`bayesldp.estimate`.  Grid: mechanisms GRR, OUE, SUE,
OLH, Hadamard response and subset selection; eps in 0.25, 0.5, 1, 2, 4; K in 8, 64, 256;
populations ``flat`` (theta uniform), ``dirichlet0.1`` (theta ~ Dirichlet(0.1), redrawn per
repeat) and ``zipf1.1`` (theta_x proportional to (x + 1)^-1.1); n in 1,000, 10,000, 100,000.
Per repeat: draw the users' values (multinomial n, theta), simulate the mechanism's tally
(``mechanism.simulate_tally``: one multinomial per true category for finite channels, the
vectorised client otherwise), and estimate the users' frequencies (``counts / n``, the quantity
the unbiased oracle is unbiased for) by

* ``uniform``: the answer ``1/K`` everywhere, ignoring the reports;
* the post-processings of the unbiased oracle (Wang et al., "Locally Differentially Private
  Frequency Estimation with Consistency", NDSS 2020): ``base_pos``, ``norm``, ``norm_mul``
  (clip-and-renormalise, "CR", multi-freq-ldpy's output), ``norm_cut``, ``norm_sub``,
  ``base_cut``, ``projection``;
* the likelihood estimators ``mle``, ``em`` and ``ibu``, where the tally has at most
  ``--likelihood-limit`` entries (distinct reports x K; they are skipped above it, see the
  results file for which cells);
* candidate rules computed here from the unbiased estimate ``f`` and the trace of its plug-in
  covariance ``t = sum_x Var[f_x]`` (``mechanism.oracle_variance`` at ``clip(f, 0, 1)``): the
  positive-part James-Stein shrinkage toward uniform ``u + c (f - u)``, ``c = max(0, 1 - a t /
  ||f - u||^2)``, followed by Norm-Sub (``js_ns`` with a = 1, ``js2_ns`` with a = 2) or
  projection (``js_proj``); Norm-Sub then shrunk (``ns_js``, on the simplex); and the switch
  ``pick`` (clip-and-renormalise when ``||f - u||^2 < 2 t``, Norm-Sub otherwise);
* ``default``: ``bayesldp.estimate(tally)`` as the checkout defines it.

Per cell: each estimator's MSE (mean over categories, mean over repeats) divided by
``min(MSE of norm_mul, MSE of uniform)``; summary: per estimator the share of cells at or
below 1.0x and 1.1x and the worst ratio; paired differences (over repeats, with their standard
errors) of the default against CR and against the uniform answer.

Usage::

    python benchmarks/estimator_default.py    # writes benchmarks/results/estimator_default.md
    python benchmarks/estimator_default.py --seed 1 --out /tmp/tune.md   # the tuning seed set
    python benchmarks/estimator_default.py --quick      # 2 repeats of a small grid, writes nothing
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import math
import pickle
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import chi2

import bayesldp
from bayesldp.bounds import var_star_by_category
from bayesldp.estimators.postprocess import (
    POSTPROCESSORS,
    norm_mul,
    norm_sub,
    pretest,
    pretest_statistic,
)
from bayesldp.mechanisms import make_mechanism

sys.path.insert(0, str(Path(__file__).parent))
throughput = importlib.import_module("throughput")

OUT = Path(__file__).parent / "results" / "estimator_default.md"
MECHANISMS = ("GRR", "OUE", "SUE", "OLH", "HadamardResponse", "SubsetSelection")
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
KS = (8, 64, 256)
POPULATIONS = ("flat", "dirichlet0.1", "zipf1.1")
NS = (1_000, 10_000, 100_000)
SEED = 2  # the reported repeats; the rule was chosen on --seed 1
LIKELIHOOD = ("mle", "em", "ibu")
LIKELIHOOD_LIMIT = 300_000  # distinct reports x K above which mle, em, ibu are skipped
CANDIDATES = ("js_ns", "ns_js", "ns_shrink", "pretest_1e-2", "pretest_1e-6", "pretest_cr")
POST = ("base_pos", "norm", "norm_mul", "norm_cut", "norm_sub", "base_cut", "projection")


def population(name: str, k: int, rng: np.random.Generator) -> np.ndarray:
    if name == "flat":
        return np.full(k, 1.0 / k)
    if name.startswith("dirichlet"):
        return rng.dirichlet(np.full(k, float(name[9:])))
    w = 1.0 / np.arange(1, k + 1) ** float(name[4:])
    return w / w.sum()


def candidates(f: np.ndarray, sd: np.ndarray) -> dict[str, np.ndarray]:
    """The rules tried beside the default, from ``f`` and its plug-in standard deviations."""
    k = f.size
    u = 1.0 / k
    ns = norm_sub(f)
    stat = float(pretest_statistic(f, sd))
    c1 = max(0.0, 1.0 - 1.0 / stat) if stat > 0 else 0.0
    c2 = max(0.0, 1.0 - chi2.ppf(0.99, k - 1) / (k - 1) / stat) if stat > 0 else 0.0
    threshold = chi2.ppf(1 - 1e-4, k - 1) / (k - 1)
    return {
        "js_ns": norm_sub(u + c1 * (f - u)),
        "ns_js": u + c1 * (ns - u),
        "ns_shrink": u + c2 * (ns - u),
        "pretest_1e-2": pretest(f, sd, alpha=1e-2),
        "pretest_1e-6": pretest(f, sd, alpha=1e-6),
        "pretest_cr": np.full(k, u) if stat < threshold else norm_mul(f) if stat < 2 else ns,
    }


def one_cell(mech_name: str, eps: float, k: int, pop: str, n: int, repeats: int, seed: int,
             limit: int, dump: list | None = None) -> list[dict]:  # fmt: skip
    mech = make_mechanism(mech_name, k, eps)
    sd0 = np.sqrt(var_star_by_category(mech) / n)
    rows = []
    for rep in range(repeats):
        rng = np.random.default_rng(
            [seed, MECHANISMS.index(mech_name), int(eps * 100), k, POPULATIONS.index(pop), n, rep]
        )
        theta = population(pop, k, rng)
        counts = rng.multinomial(n, theta)
        truth = counts / n
        tally = mech.simulate_tally(counts, rng=rng)
        f = mech.unbiased_frequencies(tally)
        sd = np.sqrt(np.maximum(mech.oracle_variance(np.clip(f, 0.0, 1.0), n), 0.0))
        if dump is not None:
            dump.append(((mech_name, eps, k, pop, n, rep), f, float(np.sum(sd**2)), truth))
        out = {"uniform": np.full(k, 1.0 / k)}
        for name in POST:
            out[name] = POSTPROCESSORS[name](f, sd0) if name == "base_cut" else (
                POSTPROCESSORS[name](f))  # fmt: skip
        out.update(candidates(f, sd))
        out["default"] = bayesldp.estimate(tally).frequencies
        size = tally.rows.shape[0] * k if tally.rows is not None else math.inf
        if size <= limit:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for name in LIKELIHOOD:
                    out[name] = bayesldp.estimate(tally, name).frequencies
        base = dict(mechanism=mech_name, epsilon=eps, k=k, population=pop, n=n, repeat=rep)
        for name, est in out.items():
            rows.append({**base, "estimator": name, "mse": float(np.mean((est - truth) ** 2))})
        rows.append({**base, "estimator": "T", "mse": float(pretest_statistic(f, sd))})
    return rows


def run(args: argparse.Namespace) -> pd.DataFrame:
    grid = [(m, e, k, p, n) for m in args.mechanisms for e in args.epsilons for k in args.ks
            for p in POPULATIONS for n in args.ns]  # fmt: skip
    rows: list[dict] = []
    dump: list | None = [] if args.dump else None
    start = time.perf_counter()
    for i, cell in enumerate(grid):
        rows += one_cell(*cell, args.repeats, args.seed, args.likelihood_limit, dump)
        if (i + 1) % 45 == 0:
            print(f"{i + 1}/{len(grid)} cells, {time.perf_counter() - start:.0f} s", flush=True)
    if args.dump:
        with open(args.dump, "wb") as fh:
            pickle.dump(dump, fh)
    return pd.DataFrame(rows)


CELL = ["mechanism", "epsilon", "k", "population", "n"]


def paired(df: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per cell: mean and standard error over repeats of ``mse(a) - mse(b)``."""
    wide = df.pivot_table(index=[*CELL, "repeat"], columns="estimator", values="mse")
    d = (wide[a] - wide[b]).groupby(level=CELL)
    return pd.DataFrame({"diff": d.mean(), "se": d.std(ddof=1) / np.sqrt(d.count())})


def fmt_ratio(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


#: "at most 1.0x" up to rounding: a rule that returns the reference's own answer in a cell (the
#: same MSEs averaged in another order) counts as at most 1.0x there
ONE = 1.0 + 1e-9
#: thresholds on T tried by :func:`threshold_rules`
TAUS = (1.02, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4, 1.5, 1.7, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def threshold_rules(df: pd.DataFrame, ref: pd.Series) -> list[str]:
    """The best rule "uniform if T < t1, else CR if T < t2, else Norm-Sub", per K, chosen on
    these very repeats: an in-sample upper bound of what a choice among the three by T reaches."""
    wide = df.pivot_table(index=[*CELL, "repeat"], columns="estimator", values="mse")
    lines = []
    for k in sorted(wide.index.get_level_values("k").unique()):
        w = wide.xs(k, level="k", drop_level=False)
        rk = ref.xs(k, level="k", drop_level=False)
        best = None
        for t1 in TAUS:
            for t2 in [t for t in TAUS if t >= t1] + [np.inf]:
                pick = np.where(w["T"] < t1, w["uniform"],
                                np.where(w["T"] < t2, w["norm_mul"], w["norm_sub"]))  # fmt: skip
                r = pd.Series(pick, index=w.index).groupby(level=CELL).mean() / rk
                score = ((r <= ONE).mean(), -r.max())
                if best is None or score > best[0]:
                    best = (score, t1, t2, (r <= 1.1 * ONE).mean())
        (share, worst), t1, t2, share11 = best
        lines.append(f"- K = {k}: t1 = {t1:g}, t2 = {t2:g}: at most 1.0x in {share:.1%} of "
                     f"its {len(rk)} cells, at most 1.1x in {share11:.1%}, worst "
                     f"{-worst:.2f}")  # fmt: skip
    return lines


def tables(df: pd.DataFrame) -> tuple[str, dict]:
    mse = df[df.estimator != "T"].pivot_table(index=CELL, columns="estimator", values="mse")
    ref = np.minimum(mse["norm_mul"], mse["uniform"])
    ratio = mse.div(ref, axis=0)
    order = ["default", "norm_sub", "norm_mul", "uniform", *CANDIDATES, "projection", "norm_cut",
             "norm", "base_pos", "base_cut", *[m for m in LIKELIHOOD if m in ratio]]  # fmt: skip
    lines = ["## Summary: MSE / min(MSE of clip-and-renormalise, MSE of the uniform answer)", ""]
    lines += ["| estimator | cells | at most 1.0x | at most 1.1x | median | worst | worst cell |",
              "|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    summary = {}
    for name in order:
        r = ratio[name].dropna()
        worst = r.idxmax()
        summary[name] = (float((r <= ONE).mean()), float(r.max()), worst)
        lines.append(
            f"| {name} | {r.size} | {(r <= ONE).mean():.1%} | {(r <= 1.1 * ONE).mean():.1%} | "
            f"{r.median():.2f} | {r.max():.2f} | {', '.join(str(v) for v in worst)} |"
        )
    skipped = ratio[[m for m in LIKELIHOOD if m in ratio]].isna().any(axis=1)
    lines += ["", f"mle, em and ibu were skipped in {int(skipped.sum())} of {len(ratio)} "
              "cells (tallies with more than the limit of distinct reports x K; the cells "
              "with '-')."]  # fmt: skip
    lines += ["", "## What a choice among uniform, CR and Norm-Sub by T can reach", "",
              "The best thresholds of the rule 'uniform if T < t1, else clip-and-renormalise if "
              "T < t2, else Norm-Sub' (T = ||f - 1/K||^2 / tr Cov(f), the default's statistic), "
              "chosen per K on the repeats of this table (in sample: an upper bound for rules "
              "of this form; t1 and t2 from "
              f"{', '.join(f'{t:g}' for t in TAUS)}, inf; ranked by the share at most 1.0x, "
              "then the worst ratio):", "", *threshold_rules(df, ref)]  # fmt: skip
    # paired comparisons of the default
    lines += ["", "## The default against clip-and-renormalise and the uniform answer, paired", ""]
    for other in ("norm_mul", "uniform", "norm_sub"):
        p = paired(df, "default", other)
        better = (p["diff"] + 2 * p["se"] < 0).sum()
        worse = (p["diff"] - 2 * p["se"] > 0).sum()
        lines.append(
            f"- default vs {other}: lower MSE by more than 2 standard errors (paired over "
            f"repeats) in {better} of {len(p)} cells, higher by more than 2 in {worse}."
        )
    by = ratio["default"]
    share, worst = float((by <= ONE).mean()), float(by.max())
    lines += ["", "Target (the default at most 1.0x in at least 95% of cells and never above "
              f"1.1x): at most 1.0x in {share:.1%} of {by.size} cells "
              f"({'met' if share >= 0.95 else 'not met'}); worst {worst:.2f} "
              f"({'met' if worst <= 1.1 * ONE else 'not met'}); above 1.1x in "
              f"{int((by > 1.1 * ONE).sum())} cells."]  # fmt: skip
    lines += ["", "Default, by factor: share of cells at most 1.0x, cells above 1.1x, worst:", ""]
    for col in ("mechanism", "epsilon", "k", "population", "n"):
        g = (by <= ONE).groupby(level=col).mean()
        a = (by > 1.1 * ONE).groupby(level=col).sum()
        w = by.groupby(level=col).max()
        lines.append(f"- {col}: " + "; ".join(
            f"{key}: {v:.0%}, {a[key]} above 1.1x (worst {w[key]:.2f})"
            for key, v in g.items()))  # fmt: skip
    # per-cell table
    pv = paired(df, "default", "norm_mul")
    pv[["diff_u", "se_u"]] = paired(df, "default", "uniform")
    cols = ["default", "norm_sub", "norm_mul", "uniform", *CANDIDATES, "projection",
            *[m for m in LIKELIHOOD if m in ratio]]  # fmt: skip
    lines += ["", "## Per cell", "",
              "ref: min(MSE of norm_mul, MSE of uniform), mean over repeats; the other columns "
              "are ratios to it. d_CR, d_U: the default's MSE minus CR's / the uniform answer's, "
              "mean over repeats in units of ref, with its standard error.", "",
              "| mechanism | eps | K | population | n | ref | " + " | ".join(cols)
              + " | d_CR (se) | d_U (se) |",
              "|---|---:|---:|---|---:|---:|" + "---:|" * len(cols) + "---:|---:|"]  # fmt: skip
    for idx in ratio.index:
        r = ratio.loc[idx]
        q = pv.loc[idx]
        lines.append(
            "| " + " | ".join(str(v) for v in idx) + f" | {ref[idx]:.3g} | "
            + " | ".join(fmt_ratio(r[c]) for c in cols)
            + f" | {q['diff'] / ref[idx]:+.2f} ({q['se'] / ref[idx]:.2f})"
            + f" | {q['diff_u'] / ref[idx]:+.2f} ({q['se_u'] / ref[idx]:.2f}) |"
        )  # fmt: skip
    return "\n".join(lines), summary


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--mechanisms", type=lambda s: tuple(s.split(",")), default=MECHANISMS)
    ap.add_argument("--epsilons", type=floats, default=EPSILONS)
    ap.add_argument("--ks", type=ints, default=KS)
    ap.add_argument("--ns", type=ints, default=NS)
    ap.add_argument("--likelihood-limit", type=int, default=LIKELIHOOD_LIMIT)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--dump", type=Path, help="pickle each repeat's (cell, f, trace, truth) here")
    ap.add_argument("--quick", action="store_true", help="2 repeats, K 8, n 1000; writes nothing")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.ks, args.ns = 2, (8,), (1_000,)
    info = throughput.machine_info()
    start = time.perf_counter()
    df = run(args)
    minutes = (time.perf_counter() - start) / 60
    text, _ = tables(df)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        "# The default estimator against clip-and-renormalise and the uniform answer",
        "",
        f"- Command: `python benchmarks/estimator_default.py{''.join(' ' + a for a in argv)}`",
        f"- Date: {date}; {minutes:.1f} min, one process; commit {commit}",
        f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load average at "
        f"start {info['load']}; Python {info['python']}, numpy {info['numpy']}",
        f"- Grid: mechanisms {', '.join(args.mechanisms)}; eps {list(args.epsilons)}; K "
        f"{list(args.ks)}; populations {', '.join(POPULATIONS)} (flat: theta = 1/K; "
        "dirichlet0.1 redrawn per repeat; zipf1.1: theta_x proportional to (x+1)^-1.1); n "
        f"{list(args.ns)}; {args.repeats} repeats per cell, seed {args.seed}.  Truth: the users' "
        "own frequencies counts/n; MSE: mean over categories, then over repeats.",
        f"- mle, em, ibu only on tallies with at most {args.likelihood_limit:,} entries "
        "(distinct reports x K): OUE, SUE, OLH and subset selection keep one row per distinct "
        "report, so their large-K, large-n tallies take seconds each to fit (ibu about 8 s at "
        "K = 256, n = 100,000), beyond this run's budget.",
        "- The default's rule was chosen on the repeats of `--seed 1`, not on the repeats "
        "reported here.",
        "",
    ]
    text = "\n".join(header) + "\n" + text + "\n"
    if not args.quick:
        args.out.write_text(text)
    print(text[: text.index("## Per cell")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
