"""An oracle bound for the adaptive prior's cost: theta sampled with its concentration known.

The target was the adaptive prior (:class:`bayesldp.AdaptiveDirichlet`) at most 1.5x
Dirichlet(1)'s seconds at equal or better ESS.  ``benchmarks/investigations/adaptive_cost.py`` found
the default joint scheme at 4.11x (median over prior_accuracy's GRR tallies), 2.55x of it in steps
per draw. This script asks what the hyperparameter itself costs: any scheme that samples ``theta``
given ``a`` (a Gibbs sampler, an empirical-Bayes plug-in) can at best sample ``theta`` as fast as a
fixed Dirichlet(``a``) posterior at the ``a`` the data choose.  Per tally, the same seed, 2 chains x
1000 draws after 1000 warm-up, cores=1, one after the other in one worker process:

* ``dir1``: ``fit(prior=1.0)``, the reference;
* ``joint``: ``fit(prior="adaptive")``, the default scheme (its posterior median of ``a``,
  ``a_hat``, sets the next one);
* ``oracle``: ``fit(prior=a_hat)``: a fixed symmetric Dirichlet at the adaptive posterior's own
  concentration, known in advance, nothing sampled but ``theta``: the bound;
* ``gibbs``: a Gibbs sampler (an instrument of this script, not a package option): each
  iteration draws ``a | theta`` exactly on the prior's grid
  (:meth:`bayesldp.AdaptiveDirichlet.draw_concentration`'s law) and then makes one NUTS
  transition of the package's compiled kernel on the ALR coordinates under Dirichlet(``a``),
  with the package's warm-up (dual averaging, Stan's dense-metric windows); the option issue
  41 names ("a Gibbs step for the concentration given theta between NUTS moves").

Reported: seconds (the sampler's, ``backend_info["wall_time"]``; Gibbs: its whole run), leapfrog
steps per draw, min bulk ESS over theta (and of log a), ESS per second, r_hat, divergences, and
the ratios to ``dir1`` on the same tally (median and 90th percentile; ESS ratios median and 10th
percentile).  Tallies: ``adaptive_cost.py``'s (repeat 0 of prior_accuracy's 96 GRR cells and 8
RRRR tallies at n = 1e5).

Usage::

    # writes benchmarks/investigations/results/adaptive_oracle.md
    python benchmarks/investigations/adaptive_oracle.py
    # 4 GRR + 1 RRRR tallies, writes nothing
    python benchmarks/investigations/adaptive_oracle.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesldp
from bayesldp.bayes.fit import import_arviz
from bayesldp.bayes.hmc.adaptation import (
    _DualAveraging,
    _init_step_size,
    _momentum_factor,
    _try_momentum_factor,
    _windows,
)
from bayesldp.bayes.hmc.targets import _find_mode, _Target
from bayesldp.bayes.hmc.tree import _N_SLOTS, _transition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the investigation it builds on
import adaptive_cost as ac  # the tallies, the fit timer, the seeds
import prior_accuracy as pa

OUT = Path(__file__).parent / "results" / "adaptive_oracle.md"
SCHEMES = ("dir1", "joint", "oracle", "gibbs")


# ---------------------------------------------------------------------- the Gibbs instrument
def _set_concentration(target: _Target, a: float) -> tuple:
    """Make ``target`` the Dirichlet(a 1_K) posterior (in place); its kernels' data."""
    target.alpha[:] = a
    target.shift = target.n + target.k * a
    target.const = math.lgamma(target.k * a) - target.k * math.lgamma(a)
    return target.data()


def _gibbs_chain(target: _Target, prior: bayesldp.AdaptiveDirichlet, z: np.ndarray,
                 laplace: np.ndarray, rng: np.random.Generator, max_depth: int = 10,
                 target_accept: float = 0.8) -> tuple:  # fmt: skip
    """One chain: ``a | theta`` on the grid, then one NUTS transition of ``z | a``, per iteration;
    the package's warm-up of the step size and dense metric (as ``hmc.run._chain``)."""
    d, tune, draws = target.d, ac.TUNE, ac.DRAWS
    data = _set_concentration(target, 1.0)
    lp, grad = target(z[None, :])
    lp, grad = float(lp[0]), np.ascontiguousarray(grad[0])
    rstate = rng.integers(0, 2**64 - 1, size=1, dtype=np.uint64, endpoint=True)
    noise = rng.standard_normal((tune + draws, d))
    inv_metric, factor = laplace.copy(), _momentum_factor(laplace)
    ws, work = np.empty((_N_SLOTS, d)), target.work()
    st_vec, st_sc = np.empty((max_depth + 1, 7, d)), np.empty((max_depth + 1, 3))
    st_depth = np.empty(max_depth + 1, dtype=np.int64)
    eps = _init_step_size(z, grad, lp, 1.0, inv_metric, factor, rng.standard_normal((100, d)),
                          data, ws, work)  # fmt: skip
    adapt, windows, window = _DualAveraging(eps, target_accept), _windows(tune), 0
    count, mean, m2 = 0, np.zeros(d), np.zeros((d, d))
    out_z, out_a, steps, diverged = np.empty((draws, d)), np.empty(draws), np.empty(draws), 0
    for it in range(tune + draws):
        _, log_theta = target.theta(z[None, :])
        cum = np.cumsum(np.exp(prior.conditional_log_probs(log_theta.sum())))
        a = float(prior.a[min(np.searchsorted(cum, rng.random() * cum[-1]), cum.size - 1)])
        data = _set_concentration(target, a)
        lp, grad = target(z[None, :])
        lp, grad = float(lp[0]), np.ascontiguousarray(grad[0])
        lp, _, _, n_steps, div, accept = _transition(
            z, grad, lp, eps, inv_metric, factor, max_depth, noise[it], rstate, data, ws, st_vec,
            st_sc, st_depth, work,
        )  # fmt: skip
        if it >= tune:
            out_z[it - tune], out_a[it - tune], steps[it - tune] = z, a, n_steps
            diverged += div
            continue
        eps = adapt.update(accept)
        if window < len(windows) and it >= windows[window][0]:
            count += 1
            delta = z - mean
            mean += delta / count
            m2 += np.outer(delta, z - mean)
            if it + 1 == windows[window][1]:  # Stan's window end, as hmc.run._chain
                new = (count * m2 / max(count - 1, 1) + (d + 3.0) * laplace) / (count + d + 3.0)
                new = np.ascontiguousarray(0.5 * (new + new.T))
                new_factor = _try_momentum_factor(new)
                if new_factor is not None:
                    inv_metric, factor = new, new_factor
                eps = _init_step_size(z, grad, lp, eps, inv_metric, factor,
                                      rng.standard_normal((100, d)), data, ws, work)  # fmt: skip
                adapt.restart(eps)
                count, mean, m2 = 0, np.zeros(d), np.zeros((d, d))
                window += 1
        if it + 1 == tune:
            eps = adapt.final()
    return out_z, out_a, steps, diverged


def gibbs_fit(tally: bayesldp.Tally, seed: int) -> dict:
    """The Gibbs instrument's chains, from the Dirichlet(1) posterior mode, with its summary."""
    az = import_arviz()
    start = time.perf_counter()
    prior, rng = bayesldp.AdaptiveDirichlet(tally.k), np.random.default_rng(seed)
    target = _Target(tally, np.ones(tally.k))
    mode, laplace = _find_mode(target, np.zeros(tally.k - 1))
    chains = [_gibbs_chain(target, prior, mode + child.standard_normal(target.d)
                           @ np.linalg.cholesky(laplace).T, laplace, child)
              for child in rng.spawn(ac.CHAINS)]  # fmt: skip
    seconds = time.perf_counter() - start
    theta, _ = target.theta(np.stack([c[0] for c in chains]))
    log_a = np.log(np.stack([c[1] for c in chains]))
    post = az.convert_to_dataset({"theta": theta, "log_a": log_a})
    return dict(seconds=seconds, steps=float(np.mean([c[2] for c in chains])),
                ess=float(np.nanmin(az.ess(post, var_names=["theta"])["theta"])),
                ess_a=float(az.ess(post, var_names=["log_a"])["log_a"]),
                r_hat=float(np.nanmax(az.rhat(post)["theta"])),
                divergences=int(sum(c[3] for c in chains)),
                a_hat=float(np.exp(np.median(log_a))))  # fmt: skip


# ---------------------------------------------------------------------- one tally
def _fit(tally: bayesldp.Tally, seed: int, prior: float | str) -> tuple[dict, object]:
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, draws=ac.DRAWS, tune=ac.TUNE, chains=ac.CHAINS, cores=1,
                             random_seed=seed, progressbar=False, prior=prior)  # fmt: skip
    attrs = idata.posterior.attrs
    row = dict(seconds=float(json.loads(attrs["backend_info"])["wall_time"]),
               steps=float(idata.sample_stats["n_steps"].mean()),
               ess=float(np.nanmin(az.ess(idata.posterior, var_names=["theta"])["theta"])),
               r_hat=float(attrs["r_hat_max"]), divergences=int(attrs["divergences"]))  # fmt: skip
    if "a" in idata.posterior:
        log_a = np.log(idata.posterior["a"].values)
        row.update(a_hat=float(np.exp(np.median(log_a))), ess_a=float(az.ess(log_a)))
    return row, idata


def one_tally(group: str, key: tuple) -> list[dict]:
    tally, seed = ac.grr_tally(*key) if group == "GRR" else ac.rrrr_tally(*key)
    rows = {"dir1": _fit(tally, seed, 1.0)[0], "joint": _fit(tally, seed, "adaptive")[0]}
    a_hat = rows["joint"]["a_hat"]
    rows["oracle"] = dict(_fit(tally, seed, a_hat)[0], a_hat=a_hat)
    rows["gibbs"] = gibbs_fit(tally, seed)
    return [dict(group=group, tally=" ".join(map(str, key)), scheme=label, **row)
            for label, row in rows.items()]  # fmt: skip


def _init_worker() -> None:
    """Compile every kernel outside the timings."""
    tally = bayesldp.GRR(10, 1.0).simulate_tally(np.full(10, 30), rng=0)
    for prior in (1.0, "adaptive", 0.3):
        _fit(tally, 0, prior)
    gibbs_fit(tally, 0)
    _fit(ac.rrrr_tally(0)[0], 0, 1.0)  # RRRR's nested coordinates compile kernels of their own


def q(x: pd.Series, p: float) -> float:
    return float(np.quantile(x, p))


def tables(df: pd.DataFrame) -> str:
    lines = ["## Per scheme: medians per fit", "",
             "| tallies | scheme | fits | sampler s | steps per draw | min bulk ESS (theta) | "
             "bulk ESS (log a) | ESS/s | fits with divergences | r_hat > 1.01 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for group, g in df.groupby("group", sort=False):
        for label in SCHEMES:
            s = g[g.scheme == label]
            ess_a = f"{s.ess_a.median():.0f}" if s.ess_a.notna().any() else "-"
            lines.append(f"| {group} | {label} | {len(s)} | {s.seconds.median():.3f} | "
                         f"{s.steps.median():.1f} | {s.ess.median():.0f} | {ess_a} | "
                         f"{(s.ess / s.seconds).median():.0f} | {(s.divergences > 0).sum()} | "
                         f"{(s.r_hat > 1.01).sum()} |")  # fmt: skip
    wide = df.assign(ess_s=df.ess / df.seconds).pivot_table(
        index=["group", "tally"], columns="scheme", values=["seconds", "steps", "ess", "ess_s"]
    )
    lines += ["", "## Ratio to Dirichlet(1) on the same tally", "",
              "Median / 90th percentile of the time and steps ratios; median / 10th percentile "
              "of the ESS ratios (the goal: time at most 1.5x, ESS at least 1x).", "",
              "| tallies | scheme | time ratio | steps per draw ratio | min-ESS ratio | "
              "ESS/s ratio | tallies with time <= 1.5x and ESS >= 1x |",
              "|---|---|---|---|---|---|---:|"]  # fmt: skip
    for group in df.group.unique():
        w = wide.xs(group, level="group")
        for label in SCHEMES[1:]:
            r = {v: w[(v, label)] / w[(v, "dir1")] for v in ("seconds", "steps", "ess", "ess_s")}
            met = int(((r["seconds"] <= 1.5) & (r["ess"] >= 1.0)).sum())
            lines.append(f"| {group} | {label} | {r['seconds'].median():.2f} / "
                         f"{q(r['seconds'], 0.9):.2f} | {r['steps'].median():.2f} / "
                         f"{q(r['steps'], 0.9):.2f} | {r['ess'].median():.2f} / "
                         f"{q(r['ess'], 0.1):.2f} | {r['ess_s'].median():.2f} / "
                         f"{q(r['ess_s'], 0.1):.2f} | {met} of {len(w)} |")  # fmt: skip
    lines += ["", "## GRR by population: median time ratio to Dirichlet(1), and a_hat", "",
              "| population | tallies | joint | oracle | gibbs | median a_hat |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    grr = wide.xs("GRR", level="group")
    pops = grr.index.str.split(" ").str[0]
    joint = df[(df.group == "GRR") & (df.scheme == "joint")].set_index("tally")
    for pop in pa.POPULATIONS:
        w = grr[pops == pop]
        if len(w) == 0:
            continue
        cells = " | ".join(f"{(w[('seconds', s)] / w[('seconds', 'dir1')]).median():.2f}"
                           for s in SCHEMES[1:])  # fmt: skip
        a_hat = joint.loc[w.index, "a_hat"].median()
        lines.append(f"| {pop} | {len(w)} | {cells} | {a_hat:.3g} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 GRR + 1 RRRR tallies, writes nothing")
    args = ap.parse_args()
    jobs = ac.tally_jobs(args.quick)
    df, run_lines = ac.run_jobs(jobs, one_tally, _init_worker)
    n_grr = sum(group == "GRR" for group, _ in jobs)
    header = "\n".join([
        "# An oracle bound for the adaptive prior's cost: theta with its concentration known", "",
        "- Command: `python benchmarks/investigations/adaptive_oracle.py"
        f"{' --quick' if args.quick else ''}`",
        *run_lines,
        f"- {n_grr} GRR and {len(jobs) - n_grr} RRRR tallies (adaptive_cost.py's); each fitted "
        f"under Dirichlet(1), the adaptive prior's joint scheme, the fixed Dirichlet(a_hat) "
        f"(a_hat: the joint fit's posterior median of a) and the Gibbs instrument, {ac.CHAINS} "
        f"chains x {ac.DRAWS} draws after {ac.TUNE} warm-up, cores=1, same seed (the script's "
        "docstring says what each is)", "",
    ])  # fmt: skip
    text = header + "\n" + tables(df) + "\n"
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
