"""How often ``bayesldp.fit`` at its default draws warns on an easy problem.

``fit``'s convergence checks are PyMC's (r_hat above 1.01, bulk ESS below 100 per chain, any
divergence).  Where they fire on an easy problem at the default draws, a user learns to ignore
them.  This script fits GRR tallies (K = 10, n = 5,000, epsilon 1, a population drawn from
Dirichlet(1) per seed) with ``fit``'s defaults (1,000 draws, 4 chains, the adaptive prior), one
seed per population, and counts the fits that warned, with each fit's largest r_hat, smallest
bulk ESS and divergences.

Usage::

    python benchmarks/investigations/fit_default_warnings.py [--seeds 20] [--draws 1000]
        [--out benchmarks/investigations/results/fit_default_warnings.md]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
from throughput import machine_info

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "investigations" / "results" / "fit_default_warnings.md"


def one_fit(seed: int, k: int, n: int, epsilon: float, draws: int) -> dict:
    """Fit one seed's tally; the fit's checks and the warnings it gave."""
    import bayesldp

    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.ones(k))
    mech = bayesldp.GRR(k, epsilon)
    tally = mech.simulate_tally(rng.multinomial(n, theta), rng=rng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = bayesldp.fit(tally, draws, random_seed=seed, progressbar=False)
    attrs = idata.posterior.attrs
    return {"seed": seed, "r_hat": float(attrs["r_hat_max"]), "ess": float(attrs["ess_bulk_min"]),
            "divergences": int(attrs["divergences"]),
            "warnings": [str(w.message).split(":")[1].strip() for w in caught]}  # fmt: skip


def render(rows: list[dict], args: argparse.Namespace, command: str) -> str:
    info = machine_info()
    warned = sum(bool(r["warnings"]) for r in rows)
    lines = [
        "# fit's default draws on an easy problem: how often it warns",
        "",
        f"- Command: `{command}`",
        f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load average at "
        f"start {info['load']}; Python {info['python']}; {_dt.date.today().isoformat()}",
        f"- Problem: GRR, K = {args.k}, n = {args.n:,}, epsilon {args.epsilon:g}; theta from "
        f"Dirichlet(1) per seed; `fit(tally, {args.draws})` (4 chains, the adaptive prior)",
        "",
        f"**Warned in {warned} of {len(rows)} fits.**",
        "",
        "| seed | largest r_hat | smallest bulk ESS | divergences | warnings |",
        "|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['r_hat']:.4f} | {r['ess']:.0f} | {r['divergences']} | "
                     f"{'; '.join(r['warnings']) or '-'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    rows = []
    for seed in range(args.seeds):
        rows.append(one_fit(seed, args.k, args.n, args.epsilon, args.draws))
        print(f"seed {seed}: {rows[-1]}", file=sys.stderr, flush=True)
    shown = ["python", "benchmarks/investigations/fit_default_warnings.py", *(argv or sys.argv[1:])]
    text = render(rows, args, shlex.join(shown))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
