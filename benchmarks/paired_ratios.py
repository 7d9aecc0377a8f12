"""Paired ratios of mean errors, their one-sided tests and pooled means (the survey benchmarks).

A cell's ratio is ``mean(a) / mean(g)`` over populations that each give one ``a`` and one ``g``
(an adaptive survey and its GRR baseline on the same users, say); its standard error is the
delta method's over the pairs, numerator and denominator both random.  Cells are tested
one-sided against a margin with Holm's step-down correction, and pooled as the inverse-variance
mean of their log ratios (the standard error of a log ratio is ``se / ratio``; cells without
variation are left out of the pooling).
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def paired_ratio(a: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """``mean(a) / mean(g)`` and its delta-method standard error over the pairs (0 for one)."""
    a, g = np.asarray(a, float), np.asarray(g, float)
    r = a.mean() / g.mean()
    if a.size < 2:
        return float(r), 0.0
    cov = np.cov(a, g)
    var = (cov[0, 0] - 2 * r * cov[0, 1] + r**2 * cov[1, 1]) / (g.mean() ** 2 * a.size)
    return float(r), float(np.sqrt(max(var, 0.0)))


def worse_p_value(ratio: float, se: float, margin: float) -> float:
    """One-sided p-value of "the ratio is above ``margin``" (worse by more than the margin):
    ``1 - Phi((ratio - margin) / se)``; without a standard error, 0 above the margin, else 1."""
    if se > 0:
        return float(stats.norm.sf((ratio - margin) / se))
    return float(ratio <= margin)


def holm(p: list[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down rejections of the hypotheses with p-values ``p``, family level
    ``alpha``."""
    order = np.argsort(p, kind="stable")
    rejected = [False] * len(p)
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected[i] = True
    return rejected


def pooled_ratio(pairs: list[tuple[float, float]]) -> str:
    """The inverse-variance mean of the log ratios of ``(ratio, se)`` pairs, as a ratio with its
    95% interval.  A pair without a standard error (a cell whose populations all gave the same
    ratio, such as a survey that never adapted against its coupled baseline) carries no
    uncertainty to weigh by: it is left out, and the text says how many were."""
    kept = [(r, se) for r, se in pairs if se > 0]
    if not kept:
        return "n/a"
    logs = np.array([np.log(r) for r, _ in kept])
    w = np.array([(r / se) ** 2 for r, se in kept])
    mean, se = float(np.sum(w * logs) / np.sum(w)), float(1.0 / np.sqrt(np.sum(w)))
    low, high = np.exp(mean - 1.96 * se), np.exp(mean + 1.96 * se)
    left = len(pairs) - len(kept)
    note = f"; {left} cell{'s' * (left > 1)} without variation left out" if left else ""
    return f"{np.exp(mean):.3f} (95%: {low:.3f}-{high:.3f}{note})"


def pooled_section(summary: list[str]) -> list[str]:
    """A results file's closing lines: the pooled table ``summary`` under its caption."""
    caption = "Pooled (inverse-variance mean of the log ratios, as a ratio, with its 95% interval):"
    return ["", caption, "", *summary, ""]
