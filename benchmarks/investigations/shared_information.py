"""Categories the data measure only jointly, and the HMC's target acceptance there.

Part 1: the HMC's ``shared_information`` (``bayesldp.bayes.hmc.nested._shared_information``: the
largest ratio, over categories, of the data's information about ``log theta_x`` on the
likelihood's diagonal to what is left once the other categories are free) at the posterior
mode under Dirichlet(1) and under the adaptive prior, for fifteen mechanism settings, K = 10 and
30, n in 1e3, 1e4, 1e5, two Dirichlet(1) populations each (12 values per row).  About 1 where each
category is measured by itself; RRRR's categories outside its subset are measured almost only
through their total.  Also, at the same modes: how often ``hmc._nesting`` finds a group of
categories measured mostly through their total (the default coordinates then nest them).

Parts 2 and 3: RRRR (K = 10, S = {0, 1, 2}, eps = 1, eps1 = 0.8: the quickstart's), n = 1e5 and
1e3, 30 Dirichlet(1) populations; ``bayesldp.fit(method="hmc")`` with 4 chains x 1000 draws
under Dirichlet(1) and the adaptive prior, on plain log-ratios (``coordinates="alr"``) at
several ``target_accept`` (n = 1e5) and at their default (0.95 where ``shared_information``
exceeds ``SHARED_INFORMATION``), and on the default coordinates (nested log-ratios wherever
``hmc._nesting`` finds a group, ``hmc._NestedTarget``, at 0.8 / 0.9): fits with a divergent
draw, divergent draws, mean leapfrog steps per draw, median seconds, the median smallest bulk
ESS and the largest r_hat of theta.

Usage::

    python benchmarks/investigations/shared_information.py   # writes results/shared_information.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np

import bayesldp
from bayesldp.bayes import AdaptiveDirichlet, hmc

OUT = Path(__file__).parent / "results" / "shared_information.md"
RRRR_ARGS = dict(subset=[0, 1, 2], eps1=0.8)


def settings(k: int) -> dict[str, bayesldp.Mechanism]:
    return {
        "GRR eps 0.5": bayesldp.GRR(k, 0.5),
        "GRR eps 1": bayesldp.GRR(k, 1.0),
        "GRR eps 4": bayesldp.GRR(k, 4.0),
        "OUE eps 1": bayesldp.OUE(k, 1.0),
        "OUE eps 4": bayesldp.OUE(k, 4.0),
        "OLH eps 1": bayesldp.OLH(k, 1.0),
        "HadamardResponse eps 1": bayesldp.HadamardResponse(k, 1.0),
        "SubsetSelection eps 1": bayesldp.SubsetSelection(k, 1.0),
        "SHE eps 1": bayesldp.SHE(k, 1.0),
        "THE eps 1": bayesldp.THE(k, 1.0),
        "CMS eps 1": bayesldp.CMS(k, 1.0),
        "RAPPOR eps 1": bayesldp.RAPPOR(k, 1.0),
        "RRRR eps 1, S = {0,1,2}, eps1 0.8": bayesldp.RRRR(k=k, epsilon=1.0, **RRRR_ARGS),
        "RRRR eps 1, S = {0,1,2}, eps1 0.5": bayesldp.RRRR(
            k=k, epsilon=1.0, subset=[0, 1, 2], eps1=0.5
        ),
        "RRRR eps 4, S = {0..4}, eps1 3": bayesldp.RRRR(
            k=k, epsilon=4.0, subset=list(range(5)), eps1=3.0
        ),
    }


def shared_at_modes(tally: bayesldp.Tally) -> list[tuple[float, bool]]:
    """``shared_information`` at the Dirichlet(1) mode and at the adaptive prior's mode, and
    whether ``hmc._nesting`` finds a group there."""
    out = []
    for prior in (np.ones(tally.k), AdaptiveDirichlet(tally.k)):
        target = hmc._Target(tally, prior)
        z, _ = hmc._find_mode(target, np.zeros(tally.k - 1))
        theta = target.theta(z[None, :])[0][0]
        m, m_free = hmc._information(target, theta)
        out.append((hmc._shared_ratio(m, m_free), hmc._nesting(m, m_free, theta) is not None))
    return out


def part1() -> list[str]:
    lines = ["## 1. shared_information by mechanism", "",
             f"Above {hmc.SHARED_INFORMATION:g} the default target_accept on plain log-ratios "
             "(`coordinates=\"alr\"`) is 0.95. Group found: modes where `hmc._nesting` finds "
             "a group of categories measured mostly through their total; the default "
             "coordinates then nest them.", "",
             "| K | mechanism | median | largest | values above the threshold | group found |",
             "|---:|---|---:|---:|---:|---:|"]  # fmt: skip
    for k in (10, 30):
        for name, mech in settings(k).items():
            vals, groups = [], []
            for n in (1_000, 10_000, 100_000):
                for seed in range(2):
                    gen = np.random.default_rng([seed, k, n])
                    counts = gen.multinomial(n, gen.dirichlet(np.ones(k)))
                    for shared, group in shared_at_modes(mech.simulate_tally(counts, rng=gen)):
                        vals.append(shared)
                        groups.append(group)
            over = sum(v > hmc.SHARED_INFORMATION for v in vals)
            lines.append(f"| {k} | {name} | {np.median(vals):.2f} | {max(vals):.2f} | "
                         f"{over}/{len(vals)} | {sum(groups)}/{len(groups)} |")  # fmt: skip
            print(lines[-1], flush=True)
    return lines


#: part 2's fits at n = 1e5: (label, prior, coordinates, target_accept or None for the default)
CONFIGS = [("Dirichlet(1)", 1.0, "alr", 0.8), ("Dirichlet(1)", 1.0, "alr", 0.9),
           ("Dirichlet(1)", 1.0, "alr", 0.95), ("Dirichlet(1)", 1.0, "alr", None),
           ("Dirichlet(1)", 1.0, "auto", None), ("Dirichlet(1)", 1.0, "auto", 0.9),
           ("adaptive", "adaptive", "alr", 0.9), ("adaptive", "adaptive", "alr", 0.95),
           ("adaptive", "adaptive", "alr", None), ("adaptive", "adaptive", "auto", None),
           ("adaptive", "adaptive", "auto", 0.95)]  # fmt: skip
#: at n = 1e3, each prior's default on either coordinates
DEFAULTS = [
    (label, prior, coordinates, None)
    for label, prior in (("Dirichlet(1)", 1.0), ("adaptive", "adaptive"))
    for coordinates in ("alr", "auto")
]


def part2(repeats: int, n: int, configs: list[tuple], number: int = 2) -> list[str]:
    mech = bayesldp.RRRR(k=10, epsilon=1.0, **RRRR_ARGS)
    tallies = []
    for seed in range(repeats):
        gen = np.random.default_rng([seed, 7])
        tallies.append(mech.simulate_tally(gen.multinomial(n, gen.dirichlet(np.ones(10))),
                                           rng=gen))  # fmt: skip
    lines = ["", f"## {number}. RRRR, K = 10, n = {n:,}, {repeats} populations", "",
             "Coordinates: `alr` plain log-ratios (the sampler before nested ones); `auto` the "
             "default (nested log-ratios wherever `hmc._nesting` finds a group).", "",
             "| prior | coordinates | target_accept | fits with a divergence | divergent draws "
             "| steps per draw | median s | median smallest bulk ESS | largest r_hat |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label, prior, coordinates, accept in configs:
        div, steps, secs, ess, rhat, used, nested = [], [], [], [], [], [], []
        for seed, tally in enumerate(tallies):
            opts = {} if accept is None else {"target_accept": accept}
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = bayesldp.fit(tally, prior=prior, method="hmc", random_seed=seed,
                                     progressbar=False, coordinates=coordinates,
                                     **opts)  # fmt: skip
            secs.append(time.perf_counter() - start)
            div.append(int(idata.sample_stats["diverging"].sum()))
            steps.append(float(idata.sample_stats["n_steps"].mean()))
            ess.append(float(az.ess(idata, var_names=["theta"]).to_array().min()))
            rhat.append(float(az.rhat(idata, var_names=["theta"]).to_array().max()))
            info = json.loads(idata.posterior.attrs["backend_info"])
            used.append(info["target_accept"])
            nested.append(info["coordinates"] == "nested")
        shown = (
            f"{accept:g}"
            if accept is not None
            else "default ("
            + ", ".join(f"{v:g}: {used.count(v)}" for v in sorted(set(used)))
            + " fits)"
        )
        coords = "alr" if coordinates == "alr" else f"auto (nested in {sum(nested)} fits)"
        fits = f"{sum(d > 0 for d in div)}/{len(div)}"
        lines.append(f"| {label} | {coords} | {shown} | {fits} | {sum(div)} | "
                     f"{np.mean(steps):.1f} | {np.median(secs):.2f} | {np.median(ess):.0f} | "
                     f"{max(rhat):.3f} |")  # fmt: skip
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    load = os.getloadavg()
    start = time.perf_counter()
    body = part1() + part2(args.repeats, 100_000, CONFIGS) + part2(args.repeats, 1_000, DEFAULTS, 3)
    minutes = (time.perf_counter() - start) / 60
    header = [
        "# Categories measured only jointly: shared information and target acceptance", "",
        "- Command: `python benchmarks/investigations/shared_information.py "
        f"--repeats {args.repeats}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; {minutes:.1f} min",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the start "
        f"{load[0]:.2f}; Python {platform.python_version()}, bayesldp {bayesldp.__version__}",
        "", "",
    ]  # fmt: skip
    args.out.write_text("\n".join(header + body) + "\n")


if __name__ == "__main__":
    main()
