"""Frequent items: the significance test of Wang et al. (2017) beside the posterior's rule.

Two questions, on simulated samples (the counts fixed: the shares are the sample's, as the
oracle's variance assumes), each repeated with fresh reports:

* who holds anything (``threshold = 0``, the paper's test): ``K`` categories of which the
  first ``held`` share the users by Zipf(1.1) and the rest are held by no one.  Reported per
  mechanism, epsilon and ``n``, for Bonferroni (the paper's) and Benjamini-Hochberg at 0.05:
  the family-wise error (share of repeats with any false find), the false discovery rate
  (mean share of false finds among the finds; 0 for no find), and the true-positive rate
  (share of the held categories found).
* who holds more than ``t`` (``threshold = t > 0``): all ``K`` categories held, by Zipf(1.1);
  the same rules, and the posterior's (``fit``'s defaults): ``P(theta_x > t) >= 0.95`` and the
  largest set with expected false discovery rate at most 0.05, with the expected rate the
  posterior states beside the realised one.

Usage::

    python benchmarks/investigations/significance.py [--repeats 200] [--posterior-repeats 40]
        [--out FILE]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
from throughput import machine_info

import bayesldp

ALPHA = 0.05


def zipf_counts(k: int, n: int, exponent: float = 1.1) -> np.ndarray:
    """``n`` users over ``k`` categories by Zipf shares, rounded so that they sum to ``n``."""
    shares = 1.0 / np.arange(1, k + 1) ** exponent
    counts = np.floor(shares / shares.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    return counts


def rates(found: np.ndarray, truth: np.ndarray) -> tuple[bool, float, float]:
    """(any false find, share of false finds among the finds, share of the true ones found)."""
    false = np.count_nonzero(~truth[found])
    return false > 0, (false / found.size if found.size else 0.0), truth[found].sum() / truth.sum()


def mean_rates(rows: list[tuple]) -> str:
    arr = np.array(rows, dtype=float)
    return " | ".join(f"{v:.3f}" for v in arr.mean(axis=0))


def who_holds(mechs, ns, k, held, repeats, rng) -> list[str]:
    lines = [f"## Who holds anything: threshold 0, K = {k}, the first {held} held (Zipf 1.1), "
             f"{repeats} repeats", "",
             "| mechanism | n | rule | family-wise error | false discovery rate | "
             "true-positive rate |", "|---|---:|---|---:|---:|---:|"]  # fmt: skip
    truth = np.arange(k) < held
    for mech in mechs:
        for n in ns:
            counts = np.r_[zipf_counts(held, n), np.zeros(k - held, int)]
            got = {"bonferroni": [], "bh": []}
            for _ in range(repeats):
                tally = mech.simulate_tally(counts, rng=rng)
                for rule in got:
                    found = bayesldp.frequent_items(tally, alpha=ALPHA, correction=rule).items
                    got[rule].append(rates(found, truth))
            for rule, rows in got.items():
                lines.append(f"| {mech!r} | {n:,} | {rule} | {mean_rates(rows)} |")
    return [*lines, ""]


def above_threshold(mechs, n, k, t, repeats, rng) -> list[str]:
    counts = zipf_counts(k, n)
    truth = counts / n > t
    lines = [f"## Who holds more than t = {t}: K = {k}, all held (Zipf 1.1), n = {n:,} "
             f"({truth.sum()} categories above t), {repeats} repeats", "",
             "| mechanism | rule | family-wise error | false discovery rate | true-positive rate "
             "| expected FDR stated |", "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for mech in mechs:
        got: dict[str, list] = {"bonferroni": [], "bh": [], "P > t at 0.95": [],
                                "expected FDR <= 0.05": []}  # fmt: skip
        stated: dict[str, list] = {"P > t at 0.95": [], "expected FDR <= 0.05": []}
        for _ in range(repeats):
            tally = mech.simulate_tally(counts, rng=rng)
            for rule in ("bonferroni", "bh"):
                found = bayesldp.frequent_items(tally, t, alpha=ALPHA, correction=rule).items
                got[rule].append(rates(found, truth))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = bayesldp.fit(tally, progressbar=False,
                                     random_seed=int(rng.integers(2**31)))  # fmt: skip
            for rule, kwargs in (("P > t at 0.95", {"level": 0.95}),
                                 ("expected FDR <= 0.05", {"fdr": ALPHA})):  # fmt: skip
                result = bayesldp.posterior_frequent_items(idata, t, **kwargs)
                got[rule].append(rates(result.items, truth))
                stated[rule].append(result.expected_fdr)
        for rule, rows in got.items():
            said = f"{np.mean(stated[rule]):.3f}" if rule in stated else ""
            lines.append(f"| {mech!r} | {rule} | {mean_rates(rows)} | {said} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--posterior-repeats", type=int, default=40)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(2017)
    start = time.perf_counter()
    load = os.getloadavg()[0]
    mechs = [bayesldp.GRR(50, 1.0), bayesldp.GRR(50, 4.0), bayesldp.OUE(50, 1.0),
             bayesldp.OLH(50, 1.0)]  # fmt: skip
    body = who_holds(mechs, (10_000, 100_000), 50, 10, args.repeats, rng)
    posterior_mechs = [bayesldp.GRR(20, 1.0), bayesldp.GRR(20, 2.0), bayesldp.GRR(20, 4.0)]
    body += above_threshold(posterior_mechs, 10_000, 20, 0.05, args.posterior_repeats, rng)
    info = machine_info()
    command = "python benchmarks/investigations/significance.py" + "".join(
        f" {flag} {value}" for flag, value in (("--repeats", args.repeats),
                                               ("--posterior-repeats", args.posterior_repeats),
                                               ("--out", args.out and args.out.as_posix()))
        if value is not None)  # fmt: skip
    head = ["# Frequent items: the significance test and the posterior's rule", "",
            f"- Command: `{command}`",
            f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; load "
            f"{load:.2f} at the start; {datetime.date.today().isoformat()}; "
            f"{time.perf_counter() - start:.0f} s",
            "- Rules at 0.05: Bonferroni over K (Wang, Blocki, Li and Jha, USENIX Security "
            "2017), Benjamini-Hochberg, and the posterior's (fit's defaults); counts fixed per "
            "row, reports drawn afresh per repeat", ""]  # fmt: skip
    text = "\n".join(head + body)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
