"""Independence Metropolis-Hastings from the prior where the data are weak: the rule's numbers,
its cost, and what the sampler gives (``bayesldp.bayes.prior_mh``).

For each tally: the rule (:func:`bayesldp.bayes.prior_mh.check`: 4,000 prior draws weighted by
the likelihood, PSIS Pareto k and efficiency ESS/M; its verdict and median time over 20
Generators), then, where it holds, the sampler without thinning (4 chains x 50,000 proposals:
acceptance, bulk ESS of theta per proposal, time) and ``fit``'s default with thinning (4 chains
x 1,000 draws: thin, smallest bulk ESS of theta, divergences, wall time of ``fit``).

Tallies: the smoothness prior's reference cases (GRR reports at eps = 1, K = 3, from
``tests/bayes/test_sampler_reference.py``), the enumerated GRR tally under Dirichlet(1, 1.5,
0.7) and the adaptive prior, and a data-dominated GRR tally (K = 10, n = 5,000).

Usage::

    python benchmarks/investigations/prior_mh_rule.py \
        --out benchmarks/investigations/results/prior_mh_rule.md
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

import bayesldp  # noqa: E402
from bayesldp.bayes import prior_mh  # noqa: E402
from bayesldp.bayes.fit import import_arviz  # noqa: E402


def cases() -> list[tuple[str, object, object]]:
    grr3 = bayesldp.GRR(3, 1.0)
    smooth = [("narrow prior, (40, 30, 20)", (40, 30, 20), {"log_scale_sd": 1.0, "slope_sd": 3.0}),
              ("default, (12, 9, 7)", (12, 9, 7), {}),
              ("default, (40, 30, 20)", (40, 30, 20), {}),
              ("default, (25, 25, 40)", (25, 25, 40), {}),
              ("default, (60, 20, 10) (vertex)", (60, 20, 10), {})]  # fmt: skip
    out = [(f"SmoothDensity {name}", grr3.tally_from_report_counts(np.array(r)),
            bayesldp.bayes.SmoothDensity(3, **kw)) for name, r, kw in smooth]  # fmt: skip
    small = grr3.tally_from_report_counts(np.array([12, 5, 9]))
    out.append(("Dirichlet(1, 1.5, 0.7), GRR (12, 5, 9)", small, np.array([1.0, 1.5, 0.7])))
    out.append(("adaptive, GRR (12, 5, 9)", small, bayesldp.bayes.AdaptiveDirichlet(3)))
    mech = bayesldp.GRR(10, 1.0)
    x = np.random.default_rng(5).choice(10, size=5000, p=np.arange(1, 11) / 55)
    big = mech.tally(mech.perturb(x, rng=6))
    out.append(("adaptive, GRR K = 10, n = 5,000", big, bayesldp.bayes.AdaptiveDirichlet(10)))
    out.append(("Dirichlet(1), GRR K = 10, n = 5,000", big, np.ones(10)))
    return out


def measure(name: str, tally, prior) -> str:
    az = import_arviz()
    times, rule = [], None
    for seed in range(20):
        started = time.perf_counter()
        rule = prior_mh.check(tally, prior, np.random.default_rng([seed, 2]))
        times.append(time.perf_counter() - started)
    row = (f"| {name} | {tally.n} | {rule.draws:,} | {rule.pareto_k:.2f} | {rule.efficiency:.3f} "
           f"| {'prior_mh' if rule.ok else 'NUTS'} | {1e3 * np.median(times):.1f} |")  # fmt: skip
    if not rule.ok:
        return row + " | | | | | |"
    started = time.perf_counter()
    out = prior_mh.sample(tally, prior, draws=50_000, chains=4, random_seed=1, thin=1)
    raw_s = time.perf_counter() - started
    ess = min(float(az.ess(out.theta[:, :, x], method="bulk")) for x in range(tally.k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        idata = bayesldp.fit(tally, 1000, chains=4, prior=prior, method="prior_mh",
                             random_seed=1)  # fmt: skip
        fit_s = time.perf_counter() - started
    thin = int(np.ceil(prior_mh.THIN_PER_EFFICIENCY / rule.efficiency))
    return (row + f" {out.info['acceptance']:.3f} | {ess / 200_000:.3f} | {raw_s:.2f} | "
            f"{min(thin, prior_mh.MAX_THIN)} | {idata.posterior.attrs['ess_bulk_min']:,.0f} | "
            f"{int(idata.sample_stats['diverging'].sum())} / {fit_s:.2f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), os.getloadavg()[0]
    prior_mh.check(cases()[0][1], cases()[0][2], np.random.default_rng(0))  # imports, compiles
    prior_mh.sample(cases()[0][1], cases()[0][2], draws=10, chains=1, random_seed=0)
    rows = [measure(*case) for case in cases()]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([
        "# Independence MH from the prior: the rule and the sampler",
        "",
        "- Command: `python benchmarks/investigations/prior_mh_rule.py --out "
        "benchmarks/investigations/results/prior_mh_rule.md`",
        f"- Date: {now}; commit {commit}; {time.perf_counter() - started:.0f} s; load average "
        f"at the start {load:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}",
        f"- Rule: {prior_mh.RULE_DRAWS:,} prior draws (a first stage of "
        f"{prior_mh.FIRST_STAGE} stops below efficiency {prior_mh.FIRST_STAGE_FLOOR}), Pareto k "
        f"<= {prior_mh.PARETO_K_MAX} and efficiency >= {prior_mh.EFFICIENCY_MIN}; its time is the "
        "median over 20 Generators. Unthinned: 4 chains x 50,000 proposals (seed 1). fit: "
        "method='prior_mh', 4 chains x 1,000 draws, thin = ceil(3 / efficiency) (<= 30)",
        "",
        "| tally | n | rule draws | Pareto k | efficiency | rule says | rule ms | acceptance "
        "| bulk ESS / proposal | 200,000 proposals s | thin | fit min bulk ESS (of 4,000) "
        "| fit divergences / s |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ])  # fmt: skip
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
