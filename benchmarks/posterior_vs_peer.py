"""The posterior mean and the default estimate against multi-freq-ldpy's output, at low signal.

multi-freq-ldpy 0.2.5 answers every protocol with its "MI" output: the unbiased estimate clipped
at 0 and renormalised.  ``multi_freq_parity.py`` checks, on every protocol here, that its output
is exactly that post-processing of the unbiased decode of its reports (the "MI gap" column,
at most 2e-15) and that both packages' reports follow one law; so the peer's answer to a set of
reports is computed here as ``clip_renormalise(bayesldp's unbiased oracle)`` on bayesldp's own
reports, and every estimator below answers the *same* reports (paired differences).

Protocols (all of ``multi_freq_parity.py``'s, at this check's sizes): the longitudinal L-GRR,
L-SUE, L-OUE, L-OSUE, L-SOUE over K = 64 values (one round, ``eps_perm = 2 eps``), dBitFlipPM
with the 64 values in 16 buckets and 4 sampled per user, and the multidimensional SPL, SMP,
RS+FD with GRR and OUE (RS+FD's OUE with zero and with random fake data) over records of three
attributes with domains (12, 7, 30).  Populations: every attribute Zipf(1.1) over its domain,
a fresh panel of ``--n`` users per repeat.  Truth: the panel's own frequencies (counts / n, what
the unbiased oracle is unbiased for), all attributes concatenated.

Estimators, per repeat, on the one round of reports:

* ``peer``: clip-and-renormalise of the unbiased oracle (multi-freq-ldpy's output);
* ``default``: ``bayesldp.estimate(tally)`` per attribute (the package's default rule);
* ``posterior``: the posterior mean of ``bayesldp.fit(tally)`` per attribute (its defaults:
  the adaptive prior, 4 chains x 1,000 draws), through
  :func:`bayesldp.mechanisms.multidimensional.fit_marginals` for records.

Per cell (protocol, eps): the MSE (mean over categories, then over repeats) of each, the
ratio of ``default`` and ``posterior`` to ``peer``, and the ratio's standard error from the
paired repeats (delta method: ``sd(a_i - R b_i) / (sqrt(r) mean(b))``).

Cost: a posterior of one round of the unary protocols (L-SUE ... L-SOUE, SPL / SMP / RS+FD
with OUE) at n = 10,000 keeps about one tally row per report and takes one to three minutes
per fit on a 2-core machine (L-OUE 72 s, SPL-OUE 184 s for its three attributes, measured once
while another job ran), so the committed run takes the protocols with few distinct reports
(dBitFlipPM and the GRR ones) at the check's low-signal budgets, eps 0.5 and 1.

Usage::

    python benchmarks/posterior_vs_peer.py        # writes benchmarks/results/posterior_vs_peer.md
    python benchmarks/posterior_vs_peer.py --quick --out /tmp/peer.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import logging
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import bayesldp
from bayesldp.mechanisms.multidimensional import RSFD, SMP, SPL, fit_marginals

sys.path.insert(0, str(Path(__file__).parent))
throughput = importlib.import_module("throughput")

OUT = Path(__file__).parent / "results" / "posterior_vs_peer.md"
K = 64
KS = (12, 7, 30)
B, D = 16, 4
SEED = 20261129
LONGITUDINAL = ("LGRR", "LSUE", "LOUE", "LOSUE", "LSOUE")
DBIT = "dBitFlipPM"
RECORDS = ("SPL-GRR", "SPL-OUE", "SMP-GRR", "SMP-OUE", "RSFD-GRR", "RSFD-OUE-z", "RSFD-OUE-r")
ESTIMATORS = ("peer", "default", "posterior")


def protocol(name: str, eps: float):
    """bayesldp's mechanism (one value per user) or multidimensional protocol (records)."""
    if name in LONGITUDINAL:
        return getattr(bayesldp, name)(K, eps, eps_perm=2 * eps)
    if name == DBIT:
        return bayesldp.DBitFlipPM(B, eps, d=D, values=K)
    kind, base = name.split("-")[:2]
    options = {"RSFD-OUE-z": {"fake": "zero"}, "RSFD-OUE-r": {"fake": "random"}}.get(name, {})
    return {"SPL": SPL, "SMP": SMP, "RSFD": RSFD}[kind](KS, eps, base=base, **options)


def zipf(k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    w = np.arange(1, k + 1, dtype=float) ** -1.1
    return rng.choice(k, size=size, p=w / w.sum())


def panel(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if name in RECORDS:
        return np.column_stack([zipf(k, n, rng) for k in KS])
    return zipf(K, n, rng)


def truth(name: str, proto, x: np.ndarray) -> np.ndarray:
    if name in RECORDS:
        return np.concatenate([np.bincount(x[:, j], minlength=k) / len(x)
                               for j, k in enumerate(KS)])  # fmt: skip
    values = proto.bucket_of(x) if name == DBIT else x
    return np.bincount(values, minlength=proto.k) / len(x)


def answers(name: str, proto, x: np.ndarray, seed: int, draws: int) -> dict[str, np.ndarray]:
    """Each estimator's frequencies (attributes concatenated) on one round of reports."""
    reports = proto.perturb(x, rng=seed)
    if name in RECORDS:
        tallies = proto.tallies(reports)
        mechs = proto.marginals
        fits = fit_marginals(tallies, draws=draws, random_seed=seed, progressbar=False)
        means = [fits[j].posterior["theta"].mean(("chain", "draw")).to_numpy()
                 for j in range(len(tallies))]  # fmt: skip
    else:
        tallies, mechs = [proto.tally(reports)], [proto]
        idata = bayesldp.fit(tallies[0], draws=draws, random_seed=seed, progressbar=False)
        means = [idata.posterior["theta"].mean(("chain", "draw")).to_numpy()]
    oracle = [m.unbiased_frequencies(t) for m, t in zip(mechs, tallies, strict=True)]
    return {
        "peer": np.concatenate([throughput.clip_renormalise(f) for f in oracle]),
        "default": np.concatenate([bayesldp.estimate(t).frequencies for t in tallies]),
        "posterior": np.concatenate(means),
    }


def cell(name: str, eps: float, n: int, repeats: int, draws: int) -> dict[str, np.ndarray]:
    """Per estimator, the MSE of each repeat (a fresh panel and round each)."""
    proto = protocol(name, eps)
    errors: dict[str, list[float]] = {e: [] for e in ESTIMATORS}
    for r in range(repeats):
        rng = np.random.default_rng([SEED, r])
        x = panel(name, n, rng)
        f = truth(name, proto, x)
        for est, value in answers(name, proto, x, SEED + 1000 * r + 1, draws).items():
            errors[est].append(float(np.mean((value - f) ** 2)))
    return {e: np.array(v) for e, v in errors.items()}


def ratio(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``mean(a) / mean(b)`` and its delta-method standard error over paired repeats."""
    r = a.mean() / b.mean()
    return r, float(np.std(a - r * b, ddof=1) / (np.sqrt(a.size) * b.mean()))


def table(rows: list[tuple[str, float, dict[str, np.ndarray]]]) -> list[str]:
    out = ["| protocol | eps | MSE peer | MSE default | MSE posterior | default / peer (se) "
           "| posterior / peer (se) | posterior at most 1.0x? |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for name, eps, mse in rows:
        d, d_se = ratio(mse["default"], mse["peer"])
        p, p_se = ratio(mse["posterior"], mse["peer"])
        verdict = "yes" if p <= 1.0 else ("within 2 se" if p - 2 * p_se <= 1.0 else "NO")
        out.append(f"| {name} | {eps:g} | {mse['peer'].mean():.3e} | {mse['default'].mean():.3e}"
                   f" | {mse['posterior'].mean():.3e} | {d:.3f} ({d_se:.3f}) | {p:.3f} "
                   f"({p_se:.3f}) | {verdict} |")  # fmt: skip
    return out


def summary(rows: list[tuple[str, float, dict[str, np.ndarray]]]) -> list[str]:
    lines = []
    for est in ("default", "posterior"):
        rs = [ratio(mse[est], mse["peer"]) for _, _, mse in rows]
        worst = max(range(len(rs)), key=lambda i: rs[i][0])
        above = sum(r - 2 * se > 1.0 for r, se in rs)
        lines.append(
            f"- {est}: at most 1.0x the peer's MSE in {sum(r <= 1.0 for r, _ in rs)} of "
            f"{len(rs)} cells; above it by more than 2 standard errors in {above}; ratios "
            f"{min(r for r, _ in rs):.3f}..{rs[worst][0]:.3f} (worst: {rows[worst][0]}, eps "
            f"{rows[worst][1]:g})"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="+", default=[*LONGITUDINAL, DBIT, *RECORDS])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0])
    parser.add_argument("--n", type=int, default=10_000, help="users per panel")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--draws", type=int, default=1000, help="posterior draws per chain")
    parser.add_argument("--quick", action="store_true", help="small sizes; needs --out")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.quick:
        if args.out == OUT:
            parser.error("--quick writes a small table: give --out")
        args.protocols, args.epsilons = ["LOUE", DBIT, "SMP-GRR"], [1.0]
        args.n, args.repeats, args.draws = 2000, 2, 200
    logging.getLogger("pymc").setLevel(logging.WARNING)
    info, start = throughput.machine_info(), time.time()
    rows = []
    for name in args.protocols:
        for eps in args.epsilons:
            t0 = time.time()
            rows.append((name, eps, cell(name, eps, args.n, args.repeats, args.draws)))
            print(f"{name} eps {eps:g}: {time.time() - t0:.0f} s", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip()  # fmt: skip
    command = " ".join(["python benchmarks/posterior_vs_peer.py", *(argv or sys.argv[1:])])
    lines = [
        "# The posterior mean and the default estimate against multi-freq-ldpy's output",
        "",
        f"- Command: `{command.strip()}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{(time.time() - start) / 60:.1f} min; commit {commit}",
        f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load average at "
        f"start {info['load']}; Python {info['python']}, numpy {info['numpy']}",
        f"- Panels of n = {args.n:,} users, {args.repeats} repeats per cell (a fresh panel and "
        f"round each); longitudinal K = {K} (eps_perm = 2 eps, one round), dBitFlipPM {K} "
        f"values in {B} buckets, {D} sampled; records over domains {KS}; every attribute "
        "Zipf(1.1). The peer's output is clip-and-renormalise of the unbiased oracle on the "
        "same reports (equal to multi-freq-ldpy's own, `multi_freq_parity.md`'s MI gap); "
        "MSE against the panel's own frequencies. See the script's docstring.",
        "",
        "## Summary",
        "",
        *summary(rows),
        "",
        "## Per cell",
        "",
        *table(rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
