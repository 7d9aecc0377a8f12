"""How far each mechanism and estimator is from the L2 floor of eps-LDP.

The floor: :func:`bayesldp.bounds.l2_lower_bound`, the summed squared error no unbiased linear
frequency estimator goes below in the worst case (the uniform dataset), attained by Pan's
symmetric extremal configuration ("Strict Optimality of Frequency and Distribution Estimation
Under Local Differential Privacy", arXiv 2603.11523, 2026), which
``SubsetSelection.l2_optimal`` is.  For K in {2, 10, 100} and eps in {0.5, 1, 2, 4}, n = 10,000
users holding each category equally often (the dataset where the floor is the worst case), per
mechanism:

* oracle: the unbiased oracle's exact summed variance over the floor (no simulation);
* MLE: its measured summed squared error over ``--repeats`` randomisations of the same users,
  over the floor;
* posterior mean: the same for ``bayesldp.fit``'s default posterior mean, at K <= 10 and
  ``--posterior-repeats`` randomisations.

A ratio below 1 is possible for the MLE and the posterior mean: they are not unbiased linear
estimators (both stay on the simplex; the posterior mean shrinks toward the prior).  The figure
draws the oracle's ratios.

Usage::

    python benchmarks/limits.py [--repeats 20] [--posterior-repeats 10]
        [--out benchmarks/results/limits.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesldp
from bayesldp.bounds import l2_lower_bound

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import machine_info

KS = (2, 10, 100)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
N = 10_000
MECHANISMS = {
    "GRR": lambda k, e: bayesldp.GRR(k, e),
    "SUE": lambda k, e: bayesldp.SUE(k, e),
    "OUE": lambda k, e: bayesldp.OUE(k, e),
    "OLH": lambda k, e: bayesldp.OLH(k, e),
    "HadamardResponse": lambda k, e: bayesldp.HadamardResponse(k, e),
    "SubsetSelection": lambda k, e: bayesldp.SubsetSelection(k, e),
    "SubsetSelection.l2_optimal": lambda k, e: bayesldp.SubsetSelection.l2_optimal(k, e),
}


def measured(mech, k: int, repeats: int, rng: np.random.Generator, posterior: bool) -> float:
    """Mean summed squared error over ``repeats`` randomisations of the uniform dataset."""
    counts = np.full(k, N // k)
    truth = counts / N
    errors = []
    for _ in range(repeats):
        tally = mech.simulate_tally(counts, rng=rng)
        if posterior:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = bayesldp.fit(tally, progressbar=False,
                                     random_seed=int(rng.integers(2**31)))  # fmt: skip
            est = idata.posterior["theta"].mean(("chain", "draw")).values
        else:
            est = bayesldp.estimate(tally, "mle").frequencies
        errors.append(float(np.sum((est - truth) ** 2)))
    return float(np.mean(errors))


def run(repeats: int, posterior_repeats: int) -> list[dict]:
    rng = np.random.default_rng(2026)
    rows = []
    for k in KS:
        for eps in EPSILONS:
            floor = l2_lower_bound(k, eps, N)
            for name, make in MECHANISMS.items():
                if name.startswith("SubsetSelection") and k == 2:
                    continue  # d = 1 is GRR
                mech = make(k, eps)
                oracle = float(np.sum(mech.oracle_variance(np.full(k, 1.0 / k), N)))
                mle = measured(mech, k, repeats, rng, posterior=False)
                post = (measured(mech, k, posterior_repeats, rng, posterior=True)
                        if k <= 10 and posterior_repeats else None)  # fmt: skip
                rows.append({"k": k, "eps": eps, "mechanism": name, "floor": floor,
                             "oracle": oracle / floor, "mle": mle / floor,
                             "posterior": None if post is None else post / floor})  # fmt: skip
                print(k, eps, name, f"{oracle / floor:.3f} {mle / floor:.3f}", file=sys.stderr)
    return rows


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KS), figsize=(12, 3.4), sharey=True)
    for ax, k in zip(axes, KS, strict=True):
        for name in MECHANISMS:
            pts = [(r["eps"], r["oracle"]) for r in rows if r["k"] == k and r["mechanism"] == name]
            if pts:
                ax.plot(*zip(*pts, strict=True), "o-", label=name, ms=3)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"K = {k}")
        ax.set_xlabel("epsilon")
    axes[0].set_ylabel("oracle's summed variance / L2 floor")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def render(rows: list[dict], command: str, seconds: float, load: float) -> str:
    info = machine_info()
    lines = ["# How far from the L2 floor of eps-LDP", "",
             f"- Command: `{command}`",
             f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load "
             f"{load:.2f} at the start; {datetime.date.today().isoformat()}; {seconds:.0f} s",
             f"- n = {N:,} users holding each category equally often; the floor is "
             "`bayesldp.bounds.l2_lower_bound(K, eps, n)` (Pan 2026); each ratio is a summed "
             "squared error over the floor: the oracle's exact variance, the MLE's and the "
             "posterior mean's measured over the repeats", "",
             "![the oracle's ratio to the floor](limits.png)", "",
             "| K | eps | floor | mechanism | oracle | MLE | posterior mean |",
             "|---:|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        post = "" if r["posterior"] is None else f"{r['posterior']:.3f}"
        lines.append(f"| {r['k']} | {r['eps']:g} | {r['floor']:.3g} | {r['mechanism']} | "
                     f"{r['oracle']:.3f} | {r['mle']:.3f} | {post} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--posterior-repeats", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    load, start = os.getloadavg()[0], time.perf_counter()
    rows = run(args.repeats, args.posterior_repeats)
    command = (f"python benchmarks/limits.py --repeats {args.repeats} --posterior-repeats "
               f"{args.posterior_repeats}" + (f" --out {args.out.as_posix()}" if args.out else ""))
    text = render(rows, command, time.perf_counter() - start, load)
    if args.out:
        args.out.write_text(text)
        figure(rows, args.out.with_suffix(".png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
