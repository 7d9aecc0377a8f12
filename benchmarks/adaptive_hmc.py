"""Convergence and cost of bayesldp's NUTS under the adaptive prior, by sampling scheme.

Cells: GRR, K = 30, n in {1e3, 1e4, 1e5}, eps in {0.5, 1, 2}, populations Zipf(1.5)
(``theta_x ∝ x^-1.5``) and one Dirichlet(0.05) draw (fixed seed).  Each cell is fitted with the
fixed prior ``Dirichlet(1)`` and with ``prior="adaptive"`` under each scheme of
``bayesldp.bayes.hmc`` (option ``adaptive_scheme``): "marginal" (theta's marginal posterior, a
summed out on its grid) and "joint" (theta and s = log a jointly, the default); 2 chains x
1000 draws after 1000 warm-up iterations, the same ``random_seed``.  All fits of a cell run
one after the other in this process, so their seconds compare on a shared machine.

Printed (markdown): r_hat_max and ess_bulk_min over theta and divergences (the fit's
``posterior.attrs``), r_hat of a, mean tree depth and wall seconds of ``bayesldp.fit``.

Usage::

    python benchmarks/adaptive_hmc.py                      # the full grid (18 cells)
    python benchmarks/adaptive_hmc.py --n 1000 --eps 0.5   # a part of it
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesldp
from bayesldp.bayes.fit import import_arviz

K, DRAWS, CHAINS, SEED, DATA_SEED = 30, 1000, 2, 3, 1
SCHEMES = ("marginal", "joint")


def population(name: str) -> np.ndarray:
    if name == "zipf":
        theta = np.arange(1, K + 1) ** -1.5
    else:
        theta = np.random.default_rng(7).dirichlet(np.full(K, 0.05))
    return theta / theta.sum()


def run(tally: bayesldp.Tally, prior: object, **options: object) -> dict[str, float]:
    az = import_arviz()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, prior=prior, draws=DRAWS, chains=CHAINS, random_seed=SEED,
                             **options)  # fmt: skip
    seconds = time.perf_counter() - started
    attrs = idata.posterior.attrs
    out = {
        "r_hat": attrs["r_hat_max"],
        "ess": attrs["ess_bulk_min"],
        "div": attrs["divergences"],
        "depth": float(idata.sample_stats["tree_depth"].mean()),
        "sec": seconds,
        "r_hat_a": float("nan"),
    }
    if "a" in idata.posterior:
        out["r_hat_a"] = float(az.rhat(idata.posterior["a"])["a"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="*", default=[1000, 10_000, 100_000])
    parser.add_argument("--eps", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    parser.add_argument("--pop", nargs="*", default=["zipf", "dir0.05"])
    parser.add_argument("--schemes", nargs="*", default=list(SCHEMES))
    args = parser.parse_args()
    # compile the kernels outside the timings
    warm = bayesldp.GRR(K, 1.0).simulate_tally(np.full(K, 10), rng=0)
    for scheme in args.schemes:
        run(warm, "adaptive", adaptive_scheme=scheme, tune=20)
    run(warm, 1.0, tune=20)
    print("| pop | n | eps | fit | r_hat_max | r_hat a | ess_bulk_min | divergences | depth "
          "| seconds | x fixed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pop in args.pop:
        for n in args.n:
            for eps in args.eps:
                counts = np.random.default_rng(DATA_SEED).multinomial(n, population(pop))
                tally = bayesldp.GRR(K, eps).simulate_tally(counts, rng=DATA_SEED + 1)
                fits = [("fixed a=1", run(tally, 1.0))]
                for scheme in args.schemes:
                    fits.append((scheme, run(tally, "adaptive", adaptive_scheme=scheme)))
                base = fits[0][1]["sec"]
                for name, r in fits:
                    print(f"| {pop} | {n} | {eps} | {name} | {r['r_hat']:.3f} | "
                          f"{r['r_hat_a']:.3f} | {r['ess']:.0f} | {r['div']} | {r['depth']:.1f} "
                          f"| {r['sec']:.2f} | {r['sec'] / base:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
