"""The tables of ``heavy_hitters.py``: per-cell means, the paired verdict, the time split.

A cell compares ours with pure-ldp on the same drawn users and seeds, so each metric gives one
paired difference per seed, ``d_s`` (oriented so that a positive value favours ours: higher
precision, recall and NCR, lower MSE).  From :data:`MIN_PAIRED` seeds on, ours is *behind* on a
metric when the mean difference is more than two standard errors against it
(``mean(d) < -2 sd(d) / sqrt(S)``), *ahead* when more than two in its favour; the accuracy goal
of a cell is met when ours is behind on none of its four metrics.  With fewer seeds the verdict
is on the means, as a plain comparison (any shortfall counts).  A seed where either method
returned nothing has no MSE difference: a metric left with fewer than :data:`MIN_PAIRED`
paired seeds in a cell of enough seeds is *not judged* (two standard errors of one or two
differences say nothing; none at all when one method never returned anything, whose precision
and recall already count it), and the results file names it.

Under equal methods a one-sided 2-standard-error flag fires with probability about 0.03 per
metric at 20 seeds (Student's t, 19 degrees of freedom), so a 27-cell grid of four correlated
metrics is expected to show up to three "behind" cells by chance: a flagged cell is confirmed or
not on fresh seeds (``--first-seed``), which the results file says.
"""

from __future__ import annotations

import math

import numpy as np

GOAL = 20.0  # throughput: ours at least this many times pure-ldp's users/s
MIN_PAIRED = 5  # seeds from which a cell is judged on its paired differences
METRICS = (("precision", ".2f", True), ("recall", ".2f", True), ("ncr", ".2f", True),
           ("mse", ".1e", False))  # fmt: skip
SHOWN = {"precision": "precision", "recall": "recall", "ncr": "NCR", "mse": "MSE"}

Cell = tuple[str, float, int]  # population, eps, k


def _ms(values: list[float], fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    if np.all(np.isnan(v)):
        return "-"
    m, sd = np.nanmean(v), (np.nanstd(v, ddof=1) if np.sum(~np.isnan(v)) > 1 else 0.0)
    return f"{m:{fmt}} ± {sd:{fmt}}"


def mean(runs: list[dict[str, float]], key: str) -> float:
    v = np.array([r[key] for r in runs], dtype=float)
    return float(np.nanmean(v)) if not np.all(np.isnan(v)) else math.nan


def _fmt_rate(rate: float) -> str:
    return f"{rate / 1e3:.3g} k" if rate < 1e6 else f"{rate / 1e6:.3g} M"


def paired(ours: list[dict[str, float]], theirs: list[dict[str, float]], key: str,
           higher: bool) -> tuple[float, float, int]:  # fmt: skip
    """Mean and standard error of the per-seed differences, positive in ours' favour, and
    their number; seeds where either method returned nothing (MSE undefined) are left out;
    (nan, nan, 0) if none."""
    a = np.array([r[key] for r in ours], dtype=float)
    b = np.array([r[key] for r in theirs], dtype=float)
    d = (a - b) if higher else (b - a)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return math.nan, math.nan, 0
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0
    return float(d.mean()), se, int(d.size)


def verdict(
    ours: list[dict[str, float]], theirs: list[dict[str, float]]
) -> tuple[list, list, list]:
    """(metrics where ours is behind, where it is ahead, not judged), the first two as
    (name, mean, se), the last as (name, paired seeds); paired from :data:`MIN_PAIRED` seeds,
    on the means below."""
    behind, ahead, unjudged = [], [], []
    for key, _, higher in METRICS:
        ma, mb = mean(ours, key), mean(theirs, key)
        if math.isnan(ma) and math.isnan(mb):  # neither returned anything: a tie
            continue
        if len(ours) < MIN_PAIRED:
            if math.isnan(ma) or (not math.isnan(mb) and (ma < mb if higher else ma > mb)):
                behind.append((SHOWN[key], math.nan, math.nan))
            continue
        m, se, pairs = paired(ours, theirs, key, higher)
        if pairs < MIN_PAIRED:  # e.g. one method returned nothing on most seeds (MSE undefined)
            unjudged.append((SHOWN[key], pairs))
        elif m < -2 * se or (se == 0 and m < 0):
            behind.append((SHOWN[key], m, se))
        elif m > 2 * se or (se == 0 and m > 0):
            ahead.append((SHOWN[key], m, se))
    return behind, ahead, unjudged


def verdict_rule(seeds: int) -> str:
    """How the cells were judged, for the results file's header."""
    if seeds < MIN_PAIRED:
        return f"on the means (fewer than {MIN_PAIRED} seeds: any shortfall counts)"
    return (
        "judged on the per-seed paired differences (same users): ours is behind on a metric when "
        "their mean is more than 2 standard errors against it (shown as mean ± standard error, "
        "positive in ours' favour), ahead when more than 2 in its favour; a one-sided "
        "2-standard-error flag fires with probability about 0.03 per metric when the methods "
        "are equal, so a flagged cell is checked on fresh seeds (`--first-seed`); a metric with "
        f"fewer than {MIN_PAIRED} paired seeds (MSE is undefined on a seed where either method "
        "returned nothing) is not judged, and named"
    )


def _said(flags: list, fmt: dict[str, str]) -> str:
    return ", ".join(name if math.isnan(m) else f"{name} {m:+{fmt[name]}} ± {se:{fmt[name]}}"
                     for name, m, se in flags)  # fmt: skip


def _unjudged(metrics: list) -> str:
    return ", ".join(f"{name}: {n} paired seed{'s' * (n != 1)}" for name, n in metrics)


def pair_table(
    scores: dict, ours: str, theirs: str, cells: list[Cell]
) -> tuple[str, int, int, list[str], list[str]]:
    """The comparison table, the cells meeting the accuracy and the throughput goals, the
    cells where ours is behind and those with a metric not judged (for the file's summary)."""
    fmt = {SHOWN[key]: f for key, f, _ in METRICS}
    head = ("| population | eps | k | precision ours / theirs | recall ours / theirs "
            "| NCR ours / theirs | MSE ours / theirs | users/s ours / theirs | ratio (CPU) "
            "| ours >= theirs? | 20x? |")  # fmt: skip
    lines = [head, "|" + "---|" * 11]
    n_acc = n_fast = 0
    flagged, skipped = [], []
    for cell in cells:
        a, b = scores[ours][cell], scores[theirs][cell]
        behind, ahead, unjudged = verdict(a, b)
        ratio = mean(a, "rate") / mean(b, "rate")
        ratio_cpu = mean(a, "rate_cpu") / mean(b, "rate_cpu")
        n_acc += not behind
        n_fast += ratio >= GOAL
        said = f"no: {_said(behind, fmt)}" if behind else "yes"
        if ahead:
            said += f" (ahead: {_said(ahead, fmt)})"
        name = f"{cell[0]} eps {cell[1]:g} k {cell[2]}"
        if unjudged:
            said += "; not judged: " + _unjudged(unjudged)
            skipped.append(f"{name} ({_unjudged(unjudged)})")
        if behind:
            flagged.append(f"{name} ({_said(behind, fmt)})")
        cols = [f"{_ms([r[key] for r in a], f)} / {_ms([r[key] for r in b], f)}"
                for key, f, _ in METRICS]  # fmt: skip
        lines.append(
            f"| {cell[0]} | {cell[1]:g} | {cell[2]} | "
            + " | ".join(cols)
            + f" | {_fmt_rate(mean(a, 'rate'))} / {_fmt_rate(mean(b, 'rate'))} "
            f"| {ratio:.0f}x ({ratio_cpu:.0f}x) | {said} | {'yes' if ratio >= GOAL else 'no'} |"
        )
    return "\n".join(lines), n_acc, n_fast, flagged, skipped


def single_table(scores: dict, method: str, cells: list[Cell]) -> str:
    lines = ["| population | eps | k | precision | recall | NCR | MSE | users/s |",
             "|" + "---|" * 8]  # fmt: skip
    for cell in cells:
        a = scores[method][cell]
        cols = [_ms([r[key] for r in a], f) for key, f, _ in METRICS]
        lines.append(f"| {cell[0]} | {cell[1]:g} | {cell[2]} | " + " | ".join(cols)
                     + f" | {_fmt_rate(mean(a, 'rate'))} |")  # fmt: skip
    return "\n".join(lines)


def split_table(scores: dict, populations: list[str]) -> str:
    """Mean client and server seconds of each method on each population (over eps, k, seeds)."""
    methods = ["ours PEM", "pure-ldp PEM", "ours SFP", "pure-ldp SFP", "ours TreeHist"]
    lines = ["| population | " + " | ".join(methods) + " |", "|" + "---|" * (len(methods) + 1)]
    for name in populations:
        cols = []
        for m in methods:
            runs = [r for cell, rs in scores[m].items() if cell[0] == name for r in rs]
            cols.append(f"{mean(runs, 'client'):.2f} + {mean(runs, 'server'):.2f}")
        lines.append(f"| {name} | " + " | ".join(cols) + " |")
    return "\n".join(lines)
