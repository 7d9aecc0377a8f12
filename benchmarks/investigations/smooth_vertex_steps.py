"""The smoothness prior at a vertex posterior: what smaller steps and a nonlinear map buy.

The sampler's known fault (``SMOOTH_KNOWN_FAULTS`` in ``tests/bayes/test_sampler_reference.py``):
under the default ``SmoothDensity(3)`` on 90 GRR reports (60, 20, 10; eps = 1) the posterior
sits near the vertex theta = (1, 0, 0), where the likelihood is flat in both log-ratios, so the
slope and the curvature spread over their wide priors (sd 60-140) between the likelihood's
exponential walls (1.5-3 units wide), and NUTS diverges on about 3 % of its transitions.  This
measures, on that tally, against importance sampling from the prior (2,000,000 draws, the
reference test's):

* bayesldp's NUTS at a higher ``target_accept`` (0.99, 0.999: the user's lever);
* bayesldp's NUTS with its adapted step size multiplied by 0.3, 0.1 and 0.03 after warm-up
  (an instrument of this investigation, not an option of ``fit``: the dual averaging's final
  step is scaled), trees up to 12 deep;
* PyMC's NUTS on the shipped model (``fit(method="nuts")``), and on the same model with the
  slope sampled as ``b = sinh(v)`` (a nonlinear map that shrinks the slope's plateau to a few
  units of ``v`` while leaving the walls' position; the Jacobian ``cosh(v)`` in the density).

Columns: the divergent share, leapfrog steps per draw, the adapted step sizes (over chains),
seconds of the fit, the ESS of ``log lambda`` and the z-scores of E[log lambda] and of theta's
12 checks (``benchmarks/investigations/smooth_weights_rule.py``'s :func:`score`).

Usage::

    python benchmarks/investigations/smooth_vertex_steps.py --seeds 1,2 \
        --out benchmarks/investigations/results/smooth_vertex_steps.md
"""

from __future__ import annotations

import argparse
import datetime
import functools
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
from bayesldp.bayes import hmc  # noqa: E402
from bayesldp.bayes.hmc import adaptation  # noqa: E402
from benchmarks.investigations.smooth_weights_rule import score  # noqa: E402
from tests.bayes.test_sampler_reference import (  # noqa: E402
    MECH,
    ImportanceReference,
    smooth_prior_draws,
)

REPORTS = (60, 20, 10)
DRAWS, CHAINS = 10_000, 4
#: (label, target_accept, step factor, max tree depth) of bayesldp's NUTS
OURS = [("default", None, 1.0, 10), ("target_accept 0.99", 0.99, 1.0, 12),
        ("target_accept 0.999", 0.999, 1.0, 12), ("step x 0.3", None, 0.3, 12),
        ("step x 0.1", None, 0.1, 12), ("step x 0.03", None, 0.03, 12)]  # fmt: skip
#: (label, target_accept, slope map) of PyMC's NUTS
PYMC = [("shipped model", 0.9, False), ("shipped model", 0.99, False),
        ("slope b = sinh(v)", 0.9, True)]  # fmt: skip


def ours(tally, prior, seed: int, target_accept, factor: float, depth: int):
    """bayesldp's NUTS, its adapted step multiplied by ``factor`` (restored after)."""
    final = adaptation._DualAveraging.final
    adaptation._DualAveraging.final = lambda self: final(self) * factor
    try:
        out = hmc.sample(tally, prior, draws=DRAWS, chains=CHAINS, random_seed=seed,
                         target_accept=target_accept, max_treedepth=depth)  # fmt: skip
    finally:
        adaptation._DualAveraging.final = final
    ss = out.sample_stats
    return out.theta, out.extra["smoothness"], ss["diverging"], ss["n_steps"], ss["step_size"]


def pymc_nuts(tally, prior, seed: int, target_accept: float, sinh_slope: bool):
    """PyMC's NUTS on :func:`bayesldp.bayes.model.build_model`'s model, or on its fully
    non-centred form (the pilot's weight for K = 3 is 1) with ``b = sinh(v)``."""
    import pymc as pm
    import pytensor.tensor as pt

    if not sinh_slope:
        model = bayesldp.bayes.model.build_model(tally, prior=prior)
    else:
        line, modes, scale = prior.basis()
        with pm.Model() as model:
            log_lam = pm.Normal("log_smoothness", prior.log_scale_mean, prior.log_scale_sd)
            pm.Deterministic("smoothness", pt.exp(log_lam))
            u = pm.Normal("coef", 0.0, 1.0, shape=scale.shape[0])
            v = pm.Flat("v")
            b = pt.sinh(v)
            pm.Potential("slope_prior", -0.5 * (b / prior.slope_sd) ** 2 + pt.log(pt.cosh(v)))
            f = b * line + pt.dot(modes, pt.exp(log_lam) * scale * u)
            theta = pm.Deterministic("theta", pt.special.softmax(f))
            channel = np.asarray(MECH.channel)
            pm.Potential("lik", pt.sum(tally.counts * pt.log(pt.dot(channel, theta))))
    with model:
        idata = pm.sample(DRAWS, tune=1000, chains=CHAINS, cores=1, random_seed=seed,
                          target_accept=target_accept, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    post, ss = idata.posterior, idata.sample_stats
    return (post["theta"].values, post["smoothness"].values, ss["diverging"].values,
            ss["n_steps"].values, ss["step_size"].values)  # fmt: skip


def row(sampler: str, label: str, seed: int, run, ref, log_lam) -> str:
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theta, lam, diverging, steps, eps = run()
    seconds = time.perf_counter() - started
    r = score(theta, lam, diverging, ref, log_lam)
    eps = np.asarray(eps)[:, -1]
    line = (f"| {sampler} | {label} | {seed} | {100 * r['divergent']:.2f} | "
            f"{np.mean(steps):.0f} | {eps.min():.4f}-{eps.max():.4f} | {seconds:.0f} | "
            f"{r['ess']:,.0f} | {r['z_lam']:+.2f} | {r['z_theta']:.2f} |")  # fmt: skip
    print(line, flush=True)
    return line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--no-pymc", action="store_true")
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    started, load = time.perf_counter(), os.getloadavg()[0]
    tally = MECH.tally_from_report_counts(np.array(REPORTS))
    prior = bayesldp.bayes.SmoothDensity(3)
    theta, log_lam = smooth_prior_draws(3, prior, 2_000_000, np.random.default_rng(36))
    ref = ImportanceReference(theta, tally.loglik(theta))
    rows = []
    for label, accept, factor, depth in OURS:
        for seed in seeds:
            run = functools.partial(ours, tally, prior, seed, accept, factor, depth)
            rows.append(row("bayesldp hmc", label, seed, run, ref, log_lam))
    for label, accept, sinh_slope in [] if args.no_pymc else PYMC:
        for seed in seeds:
            run = functools.partial(pymc_nuts, tally, prior, seed, accept, sinh_slope)
            rows.append(row("PyMC NUTS", f"{label}, target_accept {accept}", seed, run, ref,
                            log_lam))  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/investigations/smooth_vertex_steps.py --seeds " + args.seeds
    command += " --no-pymc" if args.no_pymc else ""
    command += "" if args.out == "-" else f" --out {args.out}"
    lines = [
        "# The smoothness prior at a vertex posterior: smaller steps, a nonlinear map",
        "",
        f"- Command: `{command}`",
        f"- Date: {now}; commit {commit}; {time.perf_counter() - started:.0f} s; load average "
        f"at the start {load:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}",
        f"- GRR reports {REPORTS} at eps = 1, default `SmoothDensity(3)`; {CHAINS} chains x "
        f"{DRAWS:,} draws after 1,000 tuning; reference: importance sampling from 2,000,000 "
        f"prior draws (ESS {ref.ess:,.0f}); z on the combined standard error; the reference "
        "test's bounds are |z| 3.97 (13 checks, family-wise 1e-3) and 0.2 % divergent",
        "",
        "| sampler | setting | seed | divergent % | steps per draw | step sizes | seconds "
        "| ESS log lambda | z E[log lambda] | max abs z theta |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
        *rows,
    ]
    if args.out != "-":
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
