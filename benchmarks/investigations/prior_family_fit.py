"""Which exchangeable prior family fits the accuracy benchmark's true populations: symmetric
Dirichlet(a) or logistic-normal(sd), each at its best parameter.

For every true ``theta`` of ``benchmarks/prior_accuracy.py`` (its populations; the Dirichlet
ones are drawn per cell, so each of their 24 cells, eps x n x repeat, gives its own ``theta``;
a data set's empty category counts as half a user, occupational_status has 2 of 64; a draw
with a frequency that underflowed to 0 is left out, its log-density being undefined), the
log-density of
``theta`` on the simplex (Lebesgue measure on the first K - 1 coordinates) at the parameter that
maximises it:

* Dirichlet(a 1_K): ``lgamma(K a) - K lgamma(a) + (a - 1) sum_x log theta_x``, maximised over
  ``log a`` in [-10, 8] (bounded scalar search);
* logistic-normal: ``theta = softmax(y)``, ``y_x`` i.i.d. Normal(mu, sd^2); integrating out the
  common shift, ``-(K - 1)/2 log(2 pi sd^2) - 1/2 log K - sum_x (l_x - lbar)^2 / (2 sd^2)
  - sum_x l_x`` with ``l = log theta`` (``mu`` drops out), maximised at
  ``sd^2 = sum_x (l_x - lbar)^2 / (K - 1)``.

Under Dirichlet(a) with small ``a`` the log-frequencies are log-Gamma(a): a long tail of scale
``1/a`` *below* a sharp upper edge (a few large categories, many near 0); a Zipf profile's
log-frequencies ``-s log(rank)`` pile up at the bottom with a thin tail *above* (a few head
categories): the opposite skew.  The first table says how many nats each family is from the
other at its best, per population.

The second puts the logistic-normal to work on a few of prior_accuracy.py's tallies (its cells'
seeds; repeat 0), the four Zipf cells at n = 100,000 where the adaptive prior was furthest above
the best frequentist estimator (1.19-1.43x in benchmarks/results/prior_accuracy.md), a sparse and a
data-set cell: a PyMC model (``bayesldp.tally_likelihood``) with ``theta = softmax(sd v)``, ``v
~ Normal(0, 1)^K``, ``sd ~ HalfNormal(3)``, PyMC's NUTS (2 chains x 1000 draws after 1000 tuning
steps, target acceptance 0.9, seed 1), against ``bayesldp.fit(tally, prior="adaptive")`` (2 x
1000, seed 1): the posterior mean's MSE over the best of MLE / Norm-Sub / IBU / EM-MR, 90%
interval coverage, r_hat of ``sd``.  One repeat per cell: a probe of whether a learnt-skew prior
is worth building, not a verdict.

Usage::

    # writes benchmarks/investigations/results/prior_family_fit.md
    python benchmarks/investigations/prior_family_fit.py
    # every GRR cell, repeat 0: prior_family_grid.md
    python benchmarks/investigations/prior_family_fit.py --grid
"""

from __future__ import annotations

import argparse
import datetime as _dt
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

from bayesldp.datasets import load_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
import prior_accuracy as pa  # the populations and seeds of the accuracy benchmark

SEED = 20261123  # prior_accuracy.py's default
OUT = Path(__file__).parent / "results" / "prior_family_fit.md"
GRID_OUT = Path(__file__).parent / "results" / "prior_family_grid.md"


def dirichlet_best(theta: np.ndarray) -> tuple[float, float]:
    """Largest log Dirichlet(a 1_K) density of ``theta`` over a, and that a."""
    k, s = theta.size, float(np.log(theta).sum())

    def neg(log_a: float) -> float:
        a = np.exp(log_a)
        return -(gammaln(k * a) - k * gammaln(a) + (a - 1.0) * s)

    res = minimize_scalar(neg, bounds=(-10.0, 8.0), method="bounded")
    return -float(res.fun), float(np.exp(res.x))


def logistic_normal_best(theta: np.ndarray) -> tuple[float, float]:
    """Largest exchangeable logistic-normal log-density of ``theta`` over sd, and that sd."""
    k, logs = theta.size, np.log(theta)
    ss = float(((logs - logs.mean()) ** 2).sum())
    var = ss / (k - 1)
    value = -0.5 * (k - 1) * np.log(2 * np.pi * var) - 0.5 * np.log(k) - ss / (2 * var)
    return float(value - logs.sum()), float(np.sqrt(var))


def thetas(pop: str) -> list[np.ndarray]:
    """The distinct true theta of a population in the accuracy benchmark's cells."""
    if pop in pa.DATASETS:
        counts = load_dataset(pop).counts.astype(float)
        theta = np.where(counts > 0, counts, 0.5)
        return [theta / theta.sum()]
    if pop.startswith("zipf"):  # the same theta in every cell
        return [pa.population(pop, np.random.default_rng())]
    drawn = [pa.simulate(pop, eps, n, rep, SEED)[1]
             for eps in pa.EPSILONS for n in pa.NS for rep in range(2)]  # fmt: skip
    return [theta for theta in drawn if theta.min() > 0]  # numpy's Dirichlet(0.05) can underflow


PROBE = [("zipf1.5", 1.0, 100_000), ("zipf2", 4.0, 100_000), ("zipf1.1", 0.5, 100_000),
         ("zipf1.5", 2.0, 100_000), ("dirichlet0.05", 1.0, 10_000),
         ("occupational_status", 1.0, 10_000)]  # fmt: skip


def compare(pop: str, eps: float, n: int, rep: int = 0) -> dict:
    """One tally of prior_accuracy.py: the logistic-normal prior (PyMC) and the adaptive prior,
    each posterior mean's MSE over the best frequentist estimator and its 90% interval hits."""
    import arviz as az
    import pymc as pm
    import pytensor.tensor as pt

    import bayesldp

    _, theta, tally = pa.simulate(pop, eps, n, rep, SEED)
    best = min(float(np.mean((bayesldp.estimate(tally, m).frequencies - theta) ** 2))
               for m in pa.FREQUENTIST)  # fmt: skip

    def score(draws: np.ndarray) -> tuple[float, int]:
        draws = draws.reshape(-1, theta.size)
        lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
        mse = float(np.mean((draws.mean(axis=0) - theta) ** 2))
        return mse / best, int(np.sum((theta >= lo) & (theta <= hi)))

    with pm.Model():
        sd = pm.HalfNormal("sd", 3.0)
        v = pm.Normal("v", 0.0, 1.0, shape=theta.size)
        bayesldp.tally_likelihood(tally, pm.Deterministic("theta", pt.special.softmax(sd * v)))
        idata = pm.sample(1000, tune=1000, chains=2, cores=2, random_seed=1, progressbar=False,
                          target_accept=0.9)  # fmt: skip
    ln_ratio, ln_hits = score(idata.posterior["theta"].values)
    ad = bayesldp.fit(tally, prior="adaptive", draws=1000, chains=2, random_seed=1)
    ad_ratio, ad_hits = score(ad.posterior["theta"].values)
    return dict(population=pop, eps=eps, n=n, k=theta.size, ln_ratio=ln_ratio, ln_hits=ln_hits,
                sd=float(idata.posterior["sd"].median()),
                r_hat=float(az.rhat(idata, var_names=["sd"])["sd"]),
                ad_ratio=ad_ratio, ad_hits=ad_hits)  # fmt: skip


def probe_row(pop: str, eps: float, n: int) -> str:
    """One cell of the second table: logistic-normal (PyMC) against the adaptive prior."""
    c = compare(pop, eps, n)
    return (f"| {pop} | {eps:g} | {n:,} | {c['ln_ratio']:.2f} | {c['ln_hits'] / c['k']:.2f} | "
            f"{c['sd']:.2f} | {c['r_hat']:.3f} | {c['ad_ratio']:.2f} | "
            f"{c['ad_hits'] / c['k']:.2f} |")  # fmt: skip


def grid() -> None:
    """``--grid``: every cell of prior_accuracy.py (repeat 0), both priors, a summary per prior
    as prior_accuracy.md's; writes results/prior_family_grid.md."""
    import pandas as pd

    start = time.perf_counter()
    df = pd.DataFrame([compare(p, e, n) for p in pa.POPULATIONS for e in pa.EPSILONS
                       for n in pa.NS])  # fmt: skip
    df["family"] = df["population"].map(pa.FAMILY)
    families = ["long-tailed", "sparse", "flat", "data sets"]
    lines = ["| prior | cells <= 1.0x | cells <= 1.1x | largest ratio | "
             + " | ".join(f"coverage {f}" for f in families) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(families)]  # fmt: skip
    for name, col in (("logistic-normal (PyMC)", "ln"), ("adaptive", "ad")):
        r = df[f"{col}_ratio"]
        cov = [df.loc[df.family == f, f"{col}_hits"].sum() / df.loc[df.family == f, "k"].sum()
               for f in families]  # fmt: skip
        lines.append(f"| {name} | {(r <= 1.0).mean():.1%} ({(r <= 1.0).sum()}/{len(r)}) | "
                     f"{(r <= 1.1).mean():.1%} | {r.max():.2f} | "
                     + " | ".join(f"{c:.3f}" for c in cov) + " |")  # fmt: skip
    cells = ["| population | eps | n | logistic-normal | adaptive | sd (median) | r_hat sd |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    cells += [f"| {r.population} | {r.eps:g} | {r.n:,} | {r.ln_ratio:.2f} | {r.ad_ratio:.2f} | "
              f"{r.sd:.2f} | {r.r_hat:.3f} |" for r in df.itertuples()]  # fmt: skip
    text = "\n".join([
        "# Logistic-normal prior (learnt sd) against the adaptive prior on every GRR cell",
        "",
        "- Command: `python benchmarks/investigations/prior_family_fit.py --grid`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; {time.perf_counter() - start:.0f}"
        f" s; Python {platform.python_version()}",
        "- prior_accuracy.py's tallies (seed 20261123), repeat 0 only: one tally per cell; "
        "posterior means' MSE over the best of MLE / Norm-Sub / IBU / EM-MR; 90% coverage pooled "
        "over each family's cells; both posteriors 2 chains x 1000 draws, seed 1",
        "",
        "## Summary per prior",
        "",
        *lines,
        "",
        "## MSE over the best frequentist estimator, per cell",
        "",
        *cells,
        "",
    ])  # fmt: skip
    print(text)
    GRID_OUT.write_text(text)


def families() -> None:
    rows = [
        "| population | family | K | thetas | best a (median) | best sd (median) "
        "| logistic-normal - Dirichlet, nats: min / median / max |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for pop in pa.POPULATIONS:
        truths = thetas(pop)
        fits = [(dirichlet_best(t), logistic_normal_best(t)) for t in truths]
        diff = np.array([ln[0] - d[0] for d, ln in fits])
        a = np.median([d[1] for d, _ in fits])
        sd = np.median([ln[1] for _, ln in fits])
        rows.append(f"| {pop} | {pa.FAMILY[pop]} | {truths[0].size} | {len(fits)} "
                    f"| {a:.3g} | {sd:.3g} | {diff.min():.1f} / {np.median(diff):.1f} / "
                    f"{diff.max():.1f} |")  # fmt: skip
    text = "\n".join([
        "# Symmetric Dirichlet against logistic-normal, each at its best, on the true populations",
        "",
        "- Command: `python benchmarks/investigations/prior_family_fit.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; Python "
        f"{platform.python_version()}",
        "- The true theta of benchmarks/prior_accuracy.py's cells (seed 20261123); positive: the "
        "logistic-normal fits better",
        "",
        *rows,
        "",
        "## The logistic-normal prior fitted (PyMC NUTS) against the adaptive prior",
        "",
        "| population | eps | n | logistic-normal MSE ratio | coverage | sd (median) | r_hat sd "
        "| adaptive MSE ratio | coverage |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(probe_row(*cell) for cell in PROBE),
        "",
    ])  # fmt: skip
    print(text)
    OUT.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", action="store_true",
                        help="every GRR cell, repeat 0: results/prior_family_grid.md")  # fmt: skip
    args = parser.parse_args()
    grid() if args.grid else families()


if __name__ == "__main__":
    main()
