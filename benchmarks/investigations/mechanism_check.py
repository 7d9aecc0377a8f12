"""Which check flags a wrong mechanism or epsilon: calibration under the right model, power.

For each mechanism and each pair (epsilon the reports were made at, epsilon analysed) in
(1, 1), (2, 2), (2, 1), (1, 2), ``--reps`` tallies of ``n`` users (``theta ~ Dirichlet(1)`` over
``K`` categories, a new one per tally) give one p-value each:

* ``check_mechanism`` (``bayesldp.check_mechanism``, the theta-free support-size check) on
  OUE, SUE, OLH (``g`` of the epsilon the reports were made at: the reports carry it) and
  THE; the reports of one mechanism are tallied by the analysed one;
* on GRR, which has no theta-free statistic, two posterior predictive p-values of Pearson's
  discrepancy ``D(c, theta) = sum_y (c_y - m pi_y)^2 / (m pi_y)``, ``pi = theta^T P`` the report
  probabilities of the analysed channel: ``in-sample`` (posterior of all ``n`` reports,
  replicated tallies of ``n`` reports, ``Pr[D(rep) >= D(obs)]``, the reading of
  ``sample_posterior_predictive`` + ``az.plot_bpv``) and ``held-out`` (the report counts split
  at random in halves, a multivariate-hypergeometric split, exact for exchangeable users; the
  posterior of one half, the p-value of the other half's tally against replicated tallies of
  its size).  The posterior is Dirichlet(1)'s (the model ``bayesldp.fit`` samples with
  ``prior=1.0``), ``--draws`` independent draws by rejection sampling (the posterior of the
  report probabilities is ``Dirichlet(c + 1)`` restricted to the channel's image), or, where
  the reports fall outside or near the edge of the image, by data augmentation (Gibbs: 40
  chains, 200 warm-up draws, every 10th draw after).

For each cell: the share of p-values below 0.05 (the size under the right epsilon, the power
under the wrong one), the Kolmogorov-Smirnov distance of the p-values from the uniform law and
its p-value, and, for the theta-free check, the sd of the total support count over the tallies
against the binomial law's.  ``--json`` also writes every p-value (the guide's figure reads it).

Usage::

    python benchmarks/investigations/mechanism_check.py [--reps 200] [--k 10] [--n 10000]
        [--out benchmarks/investigations/results/mechanism_check.md]
        [--json benchmarks/investigations/results/mechanism_check.json]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import shlex
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
from throughput import machine_info

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "investigations" / "results" / "mechanism_check.md"
PAIRS = ((1.0, 1.0), (2.0, 2.0), (2.0, 1.0), (1.0, 2.0))
THETA_FREE = ("OUE", "SUE", "OLH", "THE")


def _mechanism(name: str, k: int, eps: float, eps_made: float):
    import bayesldp

    if name == "OLH":  # the reports carry g: the one of the epsilon they were made at
        return bayesldp.OLH(k, eps, g=bayesldp.OLH(k, eps_made).g)
    return getattr(bayesldp, name)(k, eps)


def theta_free_cell(name: str, k: int, n: int, made: float, analysed: float, reps: int,
                    rng: np.random.Generator) -> dict:  # fmt: skip
    """p-values of check_mechanism, and the total support count of each tally."""
    import bayesldp

    maker = _mechanism(name, k, made, made)
    reader = _mechanism(name, k, analysed, made)
    pvals, totals = [], []
    for _ in range(reps):
        theta = rng.dirichlet(np.ones(k))
        x = rng.choice(k, size=n, p=theta)
        tally = reader.tally(maker.perturb(x, rng))
        pvals.append(bayesldp.check_mechanism(tally).p_value)
        totals.append(float(tally.stat.sum()))
    p, q = reader.p_star, reader.q_star
    sd = np.sqrt(n * p * (1 - p) + n * (k - 1) * q * (1 - q))
    return {"p": pvals, "sd_ratio": float(np.std(totals, ddof=1) / sd)}


def gibbs(report_counts: np.ndarray, channel: np.ndarray, draws: int,
          rng: np.random.Generator, chains: int = 40, warmup: int = 200,
          thin: int = 10) -> np.ndarray:  # fmt: skip
    """Posterior draws of theta under Dirichlet(1) by data augmentation: ``chains`` chains from
    the uniform theta at once, ``warmup`` draws dropped, then every ``thin``-th draw."""
    k = channel.shape[0]
    per_chain = -(-draws // chains)
    theta = np.full((chains, k), 1.0 / k)
    out = []
    for it in range(warmup + per_chain * thin):
        w = channel[None, :, :] * theta[:, :, None]  # (C, K, m): Pr[X = x, Y = y] up to a constant
        w /= w.sum(axis=1, keepdims=True)
        latent = rng.multinomial(np.broadcast_to(report_counts, (chains, w.shape[2])),
                                 np.swapaxes(w, 1, 2))  # (C, m, K): true values of each report
        gamma = rng.standard_gamma(1.0 + latent.sum(axis=1))
        theta = gamma / gamma.sum(axis=1, keepdims=True)
        if it >= warmup and (it - warmup) % thin == thin - 1:
            out.append(theta)
    return np.concatenate(out)[:draws]


def posterior(report_counts: np.ndarray, channel: np.ndarray, draws: int,
              rng: np.random.Generator) -> tuple[np.ndarray, bool]:  # fmt: skip
    """Independent posterior draws of GRR's theta under Dirichlet(1), and whether Gibbs gave them.

    The report probabilities ``pi = q + (p - q) theta`` map the uniform prior on theta to the
    uniform law on the image ``{pi : pi_y >= q}``, so the posterior of ``pi`` is
    ``Dirichlet(c + 1)`` restricted to it: rejection sampling (``20 draws`` proposals).  Where
    too few are accepted (reports outside the image or near its boundary), :func:`gibbs`.
    """
    p, q = float(channel[0, 0]), float(channel[0, 1])
    proposals = rng.dirichlet(report_counts + 1.0, size=20 * draws)
    accepted = proposals[proposals.min(axis=1) >= q]
    if accepted.shape[0] >= draws:
        return (accepted[:draws] - q) / (p - q), False
    return gibbs(report_counts, channel, draws, rng), True


def ppc_p_value(observed: np.ndarray, theta: np.ndarray, channel: np.ndarray,
                rng: np.random.Generator, *, held_out: bool = False) -> float:  # fmt: skip
    """``Pr[D(rep) >= D(obs)]`` over the draws, Pearson's discrepancy, ``m`` reports.

    In-sample: the realised discrepancy ``D(c, theta_s)`` against each draw's own ``pi_s``
    (Gelman, Meng and Stern, "Posterior predictive assessment of model fitness via realized
    discrepancies", 1996).  Held-out: against the posterior predictive mean ``m pibar`` (one
    reference for the observed and the replicated tallies, so the posterior's own spread is in
    the replicates as it is in the held-out tally).
    """
    m = int(observed.sum())
    pi = theta @ channel  # (S, outputs)
    pi /= pi.sum(axis=1, keepdims=True)
    rep = rng.multinomial(m, pi)
    expected = m * (pi.mean(axis=0, keepdims=True) if held_out else pi)
    d_obs = np.sum((observed - expected) ** 2 / expected, axis=1)
    d_rep = np.sum((rep - expected) ** 2 / expected, axis=1)
    return float(np.mean(d_rep >= d_obs))


def population(k: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    """``theta ~ Dirichlet(1)``; or (``"in image"``) 0.7 uniform + 0.3 Dirichlet(1): every
    category at least ``0.7 / K``, so GRR's reports at epsilon 2 are those of another theta at
    epsilon 1 (that needs ``theta_x >= (q1 - q2) / (p2 - q2) = 0.062`` at K = 10); or
    (``"eps-1 twin"``) that other theta, ``(q2 - q1 + (p2 - q2) theta) / (p1 - q1)``: its
    reports at epsilon 1 have the law of the ``"in image"`` population's at epsilon 2 (a
    control of the wrong-epsilon cells)."""
    theta = rng.dirichlet(np.ones(k))
    if kind == "Dirichlet(1)":
        return theta
    theta = 0.7 / k + 0.3 * theta
    if kind == "in image":
        return theta
    # "eps-1 twin": the theta whose reports at epsilon 1 have the law of theta's at epsilon 2
    (p1, q1), (p2, q2) = (_grr_levels(k, e) for e in (1.0, 2.0))
    return (q2 - q1 + (p2 - q2) * theta) / (p1 - q1)


def _grr_levels(k: int, eps: float) -> tuple[float, float]:
    return math.exp(eps) / (math.exp(eps) + k - 1), 1.0 / (math.exp(eps) + k - 1)


def grr_cell(k: int, n: int, made: float, analysed: float, reps: int, draws: int,
             rng: np.random.Generator, kind: str = "Dirichlet(1)") -> dict:  # fmt: skip
    import bayesldp

    maker, reader = bayesldp.GRR(k, made), bayesldp.GRR(k, analysed)
    channel = np.asarray(reader.channel, dtype=float)
    in_sample, held_out, used_gibbs = [], [], 0
    for _ in range(reps):
        theta = population(k, kind, rng)
        counts = maker.simulate_tally(rng.multinomial(n, theta), rng).stat.astype(np.int64)
        draws_all, g1 = posterior(counts, channel, draws, rng)
        in_sample.append(ppc_p_value(counts, draws_all, channel, rng))
        train = rng.multivariate_hypergeometric(counts, n // 2)
        test = counts - train
        draws_train, g2 = posterior(train, channel, draws, rng)
        held_out.append(ppc_p_value(test, draws_train, channel, rng, held_out=True))
        used_gibbs += int(g1) + int(g2)
    return {"p_in_sample": in_sample, "p_held_out": held_out,
            "gibbs": used_gibbs / (2 * reps)}  # fmt: skip


def summary(p: list[float]) -> dict:
    p = np.asarray(p)
    ks = stats.kstest(p, "uniform")
    return {"below_05": float(np.mean(p < 0.05)), "ks": float(ks.statistic),
            "ks_p": float(ks.pvalue), "mean": float(p.mean())}  # fmt: skip


def render(cells: list[dict], args: argparse.Namespace, command: str, seconds: float) -> str:
    info = machine_info()
    lines = [
        "# Checking the mechanism and epsilon: calibration and power",
        "",
        f"- Command: `{command}`",
        f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load average at "
        f"start {info['load']}; Python {info['python']}; {_dt.date.today().isoformat()}; "
        f"{seconds:.0f} s",
        f"- Problem: K = {args.k}, n = {args.n:,}, {args.reps} tallies per cell, theta ~ "
        f"Dirichlet(1) per tally; GRR posteriors: Dirichlet(1), {args.draws} draws",
        "- `< 0.05`: the share of p-values below 0.05 (the size when the epsilons agree, the "
        f"power when not; its binomial sd at 0.05 is {np.sqrt(0.05 * 0.95 / args.reps):.3f}); "
        "KS: the Kolmogorov-Smirnov distance of the p-values from Uniform(0, 1) and its "
        "p-value; sd ratio: the sd of the total support count over the tallies / the "
        "binomial law's (the exact law of unary encoding and THE; shown where the epsilons agree); "
        "theta `in image`: 0.7 uniform + 0.3 Dirichlet(1), every category >= 0.7/K, where "
        "GRR's reports at epsilon 2 are those of another theta at epsilon 1, and `eps-1 twin` that "
        "theta (its reports at epsilon 1 have the same law); Gibbs: the share of "
        "GRR's posteriors drawn by Gibbs (reports outside or near the edge of the channel's "
        "image), the others by exact rejection sampling",
        "",
        "| check | mechanism | theta | eps made | eps analysed | < 0.05 | mean p | KS | KS p | "
        "sd ratio | Gibbs |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cells:
        s = c["summary"]
        ratio = f"{c['sd_ratio']:.3f}" if "sd_ratio" in c and c["made"] == c["analysed"] else "-"
        gibbs_share = f"{c['gibbs']:.2f}" if "gibbs" in c else "-"
        lines.append(
            f"| {c['check']} | {c['mechanism']} | {c['theta']} | {c['made']:g} | "
            f"{c['analysed']:g} | "
            f"{s['below_05']:.3f} | {s['mean']:.3f} | {s['ks']:.3f} | {s['ks_p']:.2g} | "
            f"{ratio} | {gibbs_share} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--draws", type=int, default=200, help="Gibbs draws per GRR posterior")
    parser.add_argument("--rng", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=None, help="markdown results (else stdout)")
    parser.add_argument("--json", type=Path, default=None, help="every p-value, as JSON")
    args = parser.parse_args(argv)
    command = "python benchmarks/investigations/mechanism_check.py " + shlex.join(
        argv if argv is not None else sys.argv[1:])
    rng = np.random.default_rng(args.rng)
    start = time.perf_counter()
    cells = []
    for made, analysed in PAIRS:
        for name in THETA_FREE:
            cell = theta_free_cell(name, args.k, args.n, made, analysed, args.reps, rng)
            cells.append({"check": "check_mechanism", "mechanism": name, "theta": "Dirichlet(1)",
                          "made": made, "analysed": analysed, **cell,
                          "summary": summary(cell["p"])})  # fmt: skip
        kinds = ("Dirichlet(1)", "in image", *(("eps-1 twin",) if made == analysed == 1 else ()))
        for kind in kinds:
            grr = grr_cell(args.k, args.n, made, analysed, args.reps, args.draws, rng, kind)
            for key, label in (("p_in_sample", "in-sample PPC"), ("p_held_out", "held-out PPC")):
                cells.append({"check": label, "mechanism": "GRR", "theta": kind, "made": made,
                              "analysed": analysed, "p": grr[key], "gibbs": grr["gibbs"],
                              "summary": summary(grr[key])})  # fmt: skip
        print(f"eps {made:g} -> {analysed:g}: {time.perf_counter() - start:.0f} s", flush=True)
    text = render(cells, args, command.strip(), time.perf_counter() - start)
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)
    if args.json is not None:
        info = machine_info()
        args.json.write_text(json.dumps({
            "command": command.strip(), "date": _dt.date.today().isoformat(),
            "machine": f"{info['machine']}, {info['cpu']}, {info['cores']} cores",
            "k": args.k, "n": args.n, "reps": args.reps,
            "cells": [{key: c[key] for key in ("check", "mechanism", "theta", "made", "analysed",
                                               "p")}
                      for c in cells]}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
