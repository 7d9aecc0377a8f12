"""The adaptive prior on numerical data: accuracy and sampler cost as the number of bins grows.

Square wave (SW) reports of Ye et al.'s SMN population (``numerical_parity.population``: two
normals, n = 4,982 after truncation to ``[-1, 1]``), ``K`` input and ``K`` output bins on
``[-1, 1]``, ``eps`` in 1 and 2, one set of reports per cell (seeded).  Each tally is fitted by
``bayesldp.fit`` under Dirichlet(1) and under the adaptive prior (2 chains x 500 draws after 500
warm-up steps, the default sampler), and estimated by ``ems_mr`` (the authors' EMS with mixture
reduction, bayesldp's) as the frequentist reference.  Per fit: Wasserstein-1 distance of the
posterior mean from the true K-bin histogram, wall seconds, mean leapfrog steps per draw,
r_hat_max, divergences and the posterior median of the concentration ``a``.  A fourth fit
uses a fixed Dirichlet(a) at that median (to 3 digits): it tells the sampler's cost at small
a apart from the cost of a's own mixing.

The question it answers: the adaptive prior lets the data shrink ``a`` where the histogram is
sparse; what does that cost the sampler as ``K`` grows?

Usage::

    python benchmarks/adaptive_bins.py            # writes benchmarks/results/adaptive_bins.md
    python benchmarks/adaptive_bins.py --bins 16  # one size, writes nothing
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesldp

sys.path.insert(0, str(Path(__file__).parent))
_parity = importlib.import_module("numerical_parity")  # the SMN population

OUT = Path(__file__).parent / "results" / "adaptive_bins.md"
SEED = 2026
BINS = (16, 64, 256)
EPSILONS = (1.0, 2.0)
DRAWS = 500


def w1(theta: np.ndarray, x: np.ndarray) -> float:
    """Wasserstein-1 distance on [-1, 1] between a K-bin histogram and the data's."""
    k = theta.size
    truth = np.histogram(x, bins=k, range=(-1, 1))[0] / x.size
    return float(np.abs(np.cumsum(theta / theta.sum() - truth)).sum() * 2 / k)


def fit_row(tally, x: np.ndarray, k: int, eps: float, name: str, prior) -> dict:
    """One fit's row; ``a50`` is the posterior median of a (adaptive) or the fixed a."""
    start = time.perf_counter()
    with warnings.catch_warnings():  # r_hat and divergences are recorded below
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, prior=prior, draws=DRAWS, tune=DRAWS, chains=2, cores=2,
                             random_seed=SEED, progressbar=False)  # fmt: skip
    seconds = time.perf_counter() - start
    attrs = idata.posterior.attrs
    a50 = float(np.median(idata.posterior["a"].values)) if prior == "adaptive" else prior
    print(f"K={k} eps={eps} {name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return dict(bins=k, eps=eps, estimator=name, seconds=seconds,
                steps=float(idata.sample_stats["n_steps"].mean()),
                r_hat=float(attrs["r_hat_max"]), divergences=int(attrs["divergences"]),
                a50=a50,
                w1=w1(idata.posterior["theta"].mean(("chain", "draw")).values, x))  # fmt: skip


def one_cell(x: np.ndarray, k: int, eps: float) -> list[dict]:
    """ems_mr, Dirichlet(1), the adaptive prior, and a fixed Dirichlet(a) at the adaptive
    posterior's median a (is the cost the sampler's at small a, or a's own mixing?)."""
    mech = bayesldp.SquareWave(k, eps, lo=-1.0, hi=1.0, output_bins=k)
    tally = mech.tally(mech.perturb(x, rng=np.random.SeedSequence([SEED, k, int(eps * 100)])))
    rows = [dict(bins=k, eps=eps, estimator="ems_mr", seconds=np.nan, steps=np.nan,
                 r_hat=np.nan, divergences=np.nan, a50=np.nan,
                 w1=w1(bayesldp.estimate(tally, "ems_mr").frequencies, x))]  # fmt: skip
    rows.append(fit_row(tally, x, k, eps, "dir1", 1.0))
    rows.append(fit_row(tally, x, k, eps, "adaptive", "adaptive"))
    a_fixed = float(f"{rows[-1]['a50']:.3g}")
    rows.append(fit_row(tally, x, k, eps, "dir(median a)", a_fixed))
    return rows


def _cell(value: float, spec: str) -> str:
    return "" if np.isnan(value) else format(value, spec)


def table(rows: list[dict]) -> str:
    lines = [
        "| bins | eps | estimator | W1 | seconds | leapfrog steps / draw | r_hat_max | "
        "divergences | a (median, or fixed) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [f"{r['bins']}", f"{r['eps']:g}", r["estimator"], f"{r['w1']:.4f}"]
        cells += [_cell(r[key], spec) for key, spec in
                  (("seconds", ".1f"), ("steps", ".0f"), ("r_hat", ".3f"),
                   ("divergences", ".0f"), ("a50", ".3g"))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bins", type=int, nargs="+", default=list(BINS))
    args = parser.parse_args()
    x = _parity.population("SMN", Path("."), np.random.default_rng([SEED, 1]))
    load = os.getloadavg()
    start = time.perf_counter()
    rows = [r for k in args.bins for e in EPSILONS for r in one_cell(x, k, e)]
    text = "\n".join([
        "# The adaptive prior on square-wave reports: accuracy and cost against the bins", "",
        "- Command: `python benchmarks/adaptive_bins.py`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; load average at the start {load[0]:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, bayesldp {bayesldp.__version__}",
        f"- SMN population, n = {x.size:,}; SW with K input and K output bins on [-1, 1]; "
        f"fits: 2 chains x {DRAWS} draws after {DRAWS} warm-up steps, seed {SEED}", "",
        table(rows), "",
    ])  # fmt: skip
    print(text)
    if tuple(args.bins) == BINS:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
