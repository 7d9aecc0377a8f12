"""Where ``fit_rounds``' time goes on unary-encoding rounds: the cost of a gradient and the steps.

``benchmarks/results/fit_rounds_speed.md`` puts ``fit_rounds`` on OUE (K = 12, 4 rounds of
20,000 reports) far above GRR's few seconds.  Its time is about (warm-up + draws) x chains x
leapfrog steps per draw x seconds per gradient / cores; this measures the two factors on the
same rounds (``fit_rounds_speed.make_rounds``): the gradient of the walk's density over the block
tally (:func:`bayesldp.bayes.hmc.walk.block_tally`; its rows' form and size), the rounds'
likelihood gradients taken one round at a time instead (each round's own rows, the cheapest the
likelihood operator offers; the Python loop's overhead included), and the mean steps per draw of
a short fit (300 warm-up iterations and draws, 4 chains).  The product is the floor that a
cheaper gradient could lower.

Usage::

    python benchmarks/investigations/fit_rounds_cost.py \
        --out benchmarks/investigations/results/fit_rounds_cost.md
"""

from __future__ import annotations

import argparse
import datetime
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_rounds_speed import make_rounds  # noqa: E402

REPEAT = 200  # gradients timed per measurement


def per_call(function, repeat: int = REPEAT) -> float:
    """Median of three timings of ``repeat`` calls, in microseconds per call."""
    function()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        times.append((time.perf_counter() - start) / repeat * 1e6)
    return float(np.median(times))


def measure(name: str) -> dict:
    import bayesldp
    from bayesldp.bayes.dynamic import RandomWalkPrior
    from bayesldp.bayes.hmc.walk import _WalkTarget
    from bayesldp.likelihood import Likelihood

    rounds = make_rounds(name, 20_000)
    target = _WalkTarget(rounds, RandomWalkPrior())
    point = target.start[None, :]
    block_us = per_call(lambda: target(point))
    liks = [Likelihood(tally.deduplicated()) for tally in rounds]
    theta = np.full(rounds[0].k, 1.0 / rounds[0].k)
    rounds_us = per_call(lambda: [lik.grad(theta) for lik in liks])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit_rounds(rounds, 300, tune=300, random_seed=1, progressbar=False,
                                    compute_convergence_checks=False)  # fmt: skip
    steps = float(idata.sample_stats["n_steps"].mean())
    return {"form": target.lik.kind, "rows": target.lik.n_rows, "width": target.lik.k,
            "round_rows": [lik.n_rows for lik in liks], "block_us": block_us,
            "rounds_us": rounds_us, "steps": steps}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), os.getloadavg()
    rows = {name: measure(name) for name in ("GRR", "OUE")}
    iterations = 2_000 * 4  # fit_rounds' default: 1,000 warm-up + 1,000 draws, 4 chains
    lines = ["| mechanism | block tally (form, rows x categories) | rows per round | gradient, "
             "block (us) | the rounds' gradients one by one (us) | steps per draw | floor on 2 "
             "cores, block (s) | floor, one by one (s) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in rows.items():
        floor = iterations * r["steps"] / 2 * 1e-6
        lines.append(
            f"| {name} | {r['form']}, {r['rows']:,} x {r['width']} | "
            f"{', '.join(f'{u:,}' for u in r['round_rows'])} | {r['block_us']:.0f} | "
            f"{r['rounds_us']:.0f} | {r['steps']:.1f} | {floor * r['block_us']:.0f} | "
            f"{floor * r['rounds_us']:.0f} |"
        )
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    import bayesldp

    text = "\n".join([
        "# Where fit_rounds' time goes: a gradient's cost and the steps per draw",
        "",
        "- Command: `python benchmarks/investigations/fit_rounds_cost.py --out "
        "benchmarks/investigations/results/fit_rounds_cost.md`",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{(time.perf_counter() - started) / 60:.1f} min; commit {commit}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}; Python {platform.python_version()}, bayesldp "
        f"{bayesldp.__version__}",
        "- The rounds of benchmarks/fit_rounds_speed.py (K = 12, 4 rounds of 20,000 reports, "
        "eps = 1); gradients at the posterior mode, median of 3 x 200 calls; steps per draw "
        "from a fit of 4 chains x 300 draws after 300 warm-up iterations; floor = 8,000 "
        "iterations (fit_rounds' default) x steps per draw x a gradient's time / 2 cores",
        "",
        *lines,
        "",
    ])  # fmt: skip
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
