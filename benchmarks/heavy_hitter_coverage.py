"""Heavy hitters: do PEM's posterior intervals cover the truth, with and without a holdout?

Population: the 10,000 most frequent English words of 4 to 8 letters a-z in the ``wordfreq``
package's English "large" list (3.1.1, from PyPI, data shipped in the wheel), the word of
frequency rank ``r`` given the share ``r^-s / sum_r r^-s`` (Zipf, ``s = 1.1``).  Each repeat
draws ``n`` users i.i.d. from these shares; the truth is the shares themselves (the posterior
is of the law the users are drawn from).  A found code's true share is the summed share of the
words with that code (0: a code no word has, a false positive).

Method: ``PEM(eps, k)`` with the keyed 24-bit code (the words have varying lengths), ``eta =
4`` (5 rounds for ``k = 10``), ``identify`` then ``posterior`` with :func:`bayesldp.fit`'s
defaults (``method="auto"``), one row per ``holdout`` (0: the paper's protocol, the posterior
reading the last round's reports).

Columns per (eps, holdout), pooled over the repeats:

* found words: the 90% equal-tailed intervals of the found codes that are some word's, covered
  / count, and a 95% Clopper-Pearson interval on that coverage (few intervals make it wide);
* other: the same for the "other" category (one interval per repeat; truth ``1 -`` the found
  codes' true shares);
* false positives: how many found codes are no word's, and their mean posterior mean (near 0
  when the posterior reads reports that did not choose them);
* recall: share of the true top-k words found, mean over the repeats.

Usage::

    python benchmarks/heavy_hitter_coverage.py           # writes results/heavy_hitter_coverage.md
    python benchmarks/heavy_hitter_coverage.py --quick   # smoke run, writes nothing unless --out
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261129
ZIPF_S = 1.1
N_WORDS = 10_000
WORD_LENGTHS = (4, 8)
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "heavy_hitter_coverage.md"


def word_population(n_words: int = N_WORDS) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_words`` most frequent words of 4-8 letters a-z (ties by the word) and their
    Zipf(1.1) shares by rank."""
    import wordfreq

    table = wordfreq.get_frequency_dict("en", wordlist="large")
    lo, hi = WORD_LENGTHS
    pattern = re.compile(f"[a-z]{{{lo},{hi}}}")
    kept = sorted(((f, w) for w, f in table.items() if pattern.fullmatch(w)),
                  key=lambda t: (-t[0], t[1]))[:n_words]  # fmt: skip
    if len(kept) < n_words:
        raise RuntimeError(f"wordfreq holds only {len(kept)} such words")
    words = np.array([w for _, w in kept], dtype=object)
    share = np.arange(1, n_words + 1, dtype=float) ** -ZIPF_S
    return words, share / share.sum()


def clopper_pearson(x: int, m: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - level) / 2
    lo = 0.0 if x == 0 else float(beta.ppf(a, x, m - x + 1))
    hi = 1.0 if x == m else float(beta.ppf(1 - a, x + 1, m - x))
    return lo, hi


_POPULATION: tuple[np.ndarray, np.ndarray] | None = None


def population_codes() -> tuple[np.ndarray, np.ndarray]:
    """The words' 24-bit codes (PEM's default key) and their shares, once per process."""
    global _POPULATION
    if _POPULATION is None:
        from bayesldp.heavy_hitters import PEM

        words, share = word_population()
        _POPULATION = PEM(1.0).encoder.encode(words), share
    return _POPULATION


def one_run(eps: float, holdout: float, k: int, n: int, repeat: int) -> dict[str, Any]:
    """One repeat: draw the users, search, fit, and score the found codes."""
    from bayesldp.heavy_hitters import PEM

    codes, share = population_codes()
    pem = PEM(eps, k, holdout=holdout)
    rng = np.random.default_rng([SEED, repeat])
    users = rng.choice(share.size, size=n, p=share)  # the same users for every eps and holdout
    gen = np.random.default_rng([SEED, repeat, int(eps * 1000), int(holdout * 1000)])
    reports = pem.perturb_codes(codes[users], gen)
    found = pem.identify(reports)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    uniq, start = np.unique(sorted_codes, return_index=True)
    code_share = np.add.reduceat(share[order], start)
    pos = np.clip(np.searchsorted(uniq, found.codes), 0, uniq.size - 1)
    truth = np.where(uniq[pos] == found.codes, code_share[pos], 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pem.posterior(reports, found, progressbar=False, random_seed=[SEED, repeat])
    bounds = post.interval(0.9).values
    covered = (bounds[:, 0] <= np.append(truth, 1 - truth.sum())) & (
        np.append(truth, 1 - truth.sum()) <= bounds[:, 1])
    mean = post.idata.posterior["theta"].mean(("chain", "draw")).values
    real = truth > 0
    return {
        "word_cov": int(covered[:-1][real].sum()), "word_n": int(real.sum()),
        "other_cov": int(covered[-1]),
        "fp_means": mean[:-1][~real].tolist(),
        "recall": float(np.isin(codes[:k], found.codes).mean()),
        "method": str(post.idata.posterior.attrs.get("method", "?")),
    }  # fmt: skip


def fmt_cov(x: int, m: int) -> str:
    if m == 0:
        return "- (0 intervals)"
    lo, hi = clopper_pearson(x, m)
    return f"{x}/{m} = {x / m:.2f} [{lo:.2f}, {hi:.2f}]"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, command: str, load: str,
             started: str, commit: str, seconds: float) -> str:  # fmt: skip
    import platform

    from bayesldp.heavy_hitters import PEM

    default = PEM(1.0).holdout
    lines = [
        "# Heavy hitters: coverage of PEM's posterior, with and without a holdout",
        "",
        f"Population: the {N_WORDS:,} most frequent English words of 4-8 letters a-z in wordfreq "
        f"3.1.1's English \"large\" list, Zipf({ZIPF_S:g}) shares by frequency rank; n = "
        f"{args.n:,} users a repeat, {args.repeats} repeats (the same users for every eps and "
        f"holdout); `PEM(eps, k={args.k})` (keyed 24-bit code, eta = 4), `posterior` with "
        "`bayesldp.fit`'s defaults; 90% equal-tailed intervals.  Holdout 0 is the paper's "
        f"protocol (the posterior reads the last round's reports); the default is holdout = "
        f"{default:g}; {args.jobs} worker process(es).",
        "",
        "Coverage: covered / intervals = rate [95% Clopper-Pearson interval on the rate].  "
        "False positives: found codes no word has (their true share is 0), and the mean of "
        "their posterior means.  Recall: share of the true top-k found, mean over repeats.",
        "",
        "| eps | holdout | found words covered | other covered | false positives (mean "
        "posterior mean) | recall |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        fp = r["fp_means"]
        fp_text = f"{len(fp)} ({np.mean(fp):.4f})" if fp else "0 (-)"
        tag = " (default)" if r["holdout"] == default else ""
        lines.append(
            f"| {r['eps']:g} | {r['holdout']:g}{tag} | {fmt_cov(r['word_cov'], r['word_n'])} | "
            f"{fmt_cov(r['other_cov'], r['repeats'])} | {fp_text} | {r['recall']:.3f} |"
        )
    methods = sorted({m for r in rows for m in r["methods"]})
    lines += [
        "",
        f"- Command: `{command}`",
        f"- Date: {started}; commit {commit}; {seconds / 60:.1f} minutes",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; `uptime` at start: {load}",
        f"- Posterior methods chosen by `fit`'s \"auto\": {', '.join(methods)}",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="n = 20,000, eps 4, holdout 0 and 0.2, 2 repeats, one process; "
                        "writes nothing")
    parser.add_argument("--out", type=Path, default=None, metavar="PATH",
                        help="markdown file (default benchmarks/results/heavy_hitter_coverage.md;"
                        " with --quick nothing unless given)")
    parser.add_argument("--n", type=int, default=100_000, help="users a repeat")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--holdouts", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (1: none)")
    args = parser.parse_args(argv)  # fmt: skip
    if args.quick:
        args.n, args.eps, args.holdouts, args.repeats, args.jobs = 20_000, [4.0], [0.0, 0.2], 2, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])]
    )
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    started = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True, check=False)  # fmt: skip
    commit = head.stdout.strip() or "unknown"
    from concurrent.futures import ProcessPoolExecutor

    population_codes()
    t0 = time.perf_counter()
    rows = []
    cells = [(eps, holdout) for eps in args.eps for holdout in args.holdouts]
    tasks = [(eps, holdout, args.k, args.n, r) for eps, holdout in cells
             for r in range(args.repeats)]  # fmt: skip
    def progress(results: Any) -> list[dict[str, Any]]:
        out = []
        for i, result in enumerate(results, 1):
            out.append(result)
            if i % args.repeats == 0:
                print(f"{i}/{len(tasks)} runs ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
        return out

    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            done = progress(pool.map(one_run, *zip(*tasks, strict=True)))
    else:
        done = progress(one_run(*task) for task in tasks)
    for c, (eps, holdout) in enumerate(cells):
        runs = done[c * args.repeats : (c + 1) * args.repeats]
        rows.append({"eps": eps, "holdout": holdout, "repeats": args.repeats,
                     "word_cov": sum(r["word_cov"] for r in runs),
                     "word_n": sum(r["word_n"] for r in runs),
                     "other_cov": sum(r["other_cov"] for r in runs),
                     "fp_means": [m for r in runs for m in r["fp_means"]],
                     "recall": float(np.mean([r["recall"] for r in runs])),
                     "methods": {r["method"] for r in runs}})  # fmt: skip
    text = markdown(rows, args, command, load, started, commit, time.perf_counter() - t0)
    print(text)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
