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
categories): the opposite skew.  The table says how many nats each family is from the other at
its best, per population; it motivates a prior with a learnt skew of the log-frequencies (not
built).

Usage::

    python benchmarks/prior_family_fit.py   # writes benchmarks/results/prior_family_fit.md
"""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import gammaln

from bayesldp.datasets import load_dataset

sys.path.insert(0, str(Path(__file__).parent))
import prior_accuracy as pa  # the populations and seeds of the accuracy benchmark

SEED = 20261123  # prior_accuracy.py's default
OUT = Path(__file__).parent / "results" / "prior_family_fit.md"


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
    cells = [(e, n, r) for e in pa.EPSILONS for n in pa.NS for r in range(2)]
    if not pop.startswith("dirichlet"):
        cells = cells[:1]
    if pop in pa.DATASETS:
        counts = load_dataset(pop).counts.astype(float)
        theta = np.where(counts > 0, counts, 0.5)
        return [theta / theta.sum()]
    drawn = [pa.simulate(pop, eps, n, rep, SEED)[1] for eps, n, rep in cells]
    return [theta for theta in drawn if theta.min() > 0]  # numpy's Dirichlet(0.05) can underflow


def main() -> None:
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
        "- Command: `python benchmarks/prior_family_fit.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; Python "
        f"{platform.python_version()}",
        "- The true theta of benchmarks/prior_accuracy.py's cells (seed 20261123); positive: the "
        "logistic-normal fits better",
        "",
        *rows,
        "",
    ])  # fmt: skip
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
