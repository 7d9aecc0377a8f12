"""The accuracy study's summaries and verdicts: what the records say about each paper's claims.

:func:`summarise` (per cell and estimator: mean, sd and standard error across repeats) and
:func:`paired` (paired comparisons of two estimators) read the records of
:mod:`~bayesldp.workflows.accuracy.experiments`; :func:`verdicts_mle`,
:func:`verdicts_em_mr` and :func:`verdicts_sampling` turn them into a :class:`Verdict` per claim
of the three papers of :data:`PAPERS` (:func:`all_verdicts`; full references in
:mod:`bayesldp.workflows.accuracy`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesldp.workflows.accuracy.experiments import (
    CELL_COLUMNS,
    LABELS,
    METRIC_COLUMNS,
    PAPERS,
    StudyResult,
)


# ============================================================================ summaries
def summarise(records: pd.DataFrame, section: str) -> pd.DataFrame:
    """Per cell and estimator: mean, sd and standard error of every metric across repeats."""
    keys = [*CELL_COLUMNS[section], "estimator"]
    metrics = [m for m in METRIC_COLUMNS[section] if m != "iterations"]
    grouped = records.groupby(keys, sort=False)
    out = grouped.size().rename("repeats").to_frame()
    for m in metrics:
        out[f"{m}_mean"] = grouped[m].mean()
        out[f"{m}_sd"] = grouped[m].std(ddof=1)
        out[f"{m}_se"] = out[f"{m}_sd"] / np.sqrt(out["repeats"])
    if "iterations" in records:
        out["iterations_mean"] = grouped["iterations"].mean().astype(float)
    return out.reset_index()


def paired(
    records: pd.DataFrame, section: str, a: str, b: str, metric: str = "mse"
) -> pd.DataFrame:
    """Per cell: ``mean(metric_a) / mean(metric_b)`` and the paired z of ``a - b`` over repeats."""
    keys = CELL_COLUMNS[section]
    wide = records.pivot_table(index=[*keys, "repeat"], columns="estimator", values=metric)
    by_cell = (wide[a] - wide[b]).groupby(level=keys, sort=False)
    mean_a = wide[a].groupby(level=keys, sort=False).mean()
    mean_b = wide[b].groupby(level=keys, sort=False).mean()
    se = by_cell.std(ddof=1) / np.sqrt(by_cell.count())
    out = pd.DataFrame({"ratio": mean_a / mean_b, "diff": by_cell.mean(), "se": se})
    # a constant non-zero difference is infinitely significant; identical estimates give 0
    diff = out["diff"].to_numpy(dtype=float)
    spread = out["se"].to_numpy(dtype=float)
    z = np.zeros_like(diff)
    ok = spread > 0
    z[ok] = diff[ok] / spread[ok]
    z[~ok & (diff > 0)] = np.inf
    z[~ok & (diff < 0)] = -np.inf
    out["z"] = z
    return out.reset_index()


# ============================================================================ verdicts
@dataclass(frozen=True)
class Verdict:
    """One claim of a paper and what the study found."""

    paper: str  # the paper's short citation, a value of PAPERS
    claim: str
    verdict: str  # "holds", "partly", "does not hold", "not tested"
    evidence: str


def _fmt(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if 1e-3 <= abs(x) < 1e4:
        return f"{x:.3g}"
    return f"{x:.2e}"


def _tri(n_yes: int, n_all: int) -> str:
    if n_all == 0:
        return "not tested"
    if n_yes == n_all:
        return "holds"
    return "does not hold" if n_yes == 0 else "partly"


def _cells(df: pd.DataFrame, cols: list[str]) -> str:
    return "; ".join(
        ", ".join(f"{c}={_fmt(row[c]) if isinstance(row[c], float) else row[c]}" for c in cols)
        + f": {row['ratio']:.3f} (z {row['z']:.1f})"
        for _, row in df.iterrows()
    )


SAME = 0.05  # "same accuracy": ratio of mean MSEs within 1 +- SAME
HALF = 0.6  # "reduces the error by almost half": ratio <= HALF


def _same_note(df: pd.DataFrame) -> str:
    """For a 'same accuracy' claim: say when MLE is nonetheless significantly better."""
    better = df[(df["ratio"] < 1) & (df["z"] < -2)]
    if not len(better):
        return ""
    gain = 100 * (1 - better["ratio"])
    return (
        f"  The MLE is nonetheless significantly more accurate in {len(better)}/{len(df)} of "
        f"these cells, by {gain.min():.1f}..{gain.max():.1f} %."
    )


def _against_norm_sub(
    cells: pd.DataFrame, claim: str, cols: list[str], by: str = "", alike: str = ""
) -> Verdict:
    """The verdict on a ``claim`` of Lopuhaä-Zwakenberg et al. on MLE against Norm-Sub.

    In ``cells`` (described by ``cols``): MLE is more accurate (lower mean MSE, paired z < -2) in
    every cell, or, where ``alike`` is the claim's word ("same", "similar"), the two are within
    ``SAME`` of each other."""
    if alike:
        met = cells[(cells["ratio"] - 1).abs() <= SAME]
        end = f"; '{alike}' = within {SAME:.0%}." + _same_note(cells)
    else:
        met = cells[(cells["ratio"] < 1) & (cells["z"] < -2)]
        end = "."
    evidence = f"MSE(MLE)/MSE(Norm-Sub){by}: {_cells(cells, cols)}{end}"
    return Verdict(PAPERS["mle"], claim, _tri(len(met), len(cells)), evidence)


def verdicts_mle(records: pd.DataFrame, cfg: Mapping[str, Any]) -> list[Verdict]:
    """The claims of Lopuhaä-Zwakenberg et al. 2020 (section 5, synthetic data)."""
    out: list[Verdict] = []
    est = set(records["estimator"])
    if not {"oracle", "norm_sub", "mle"} <= est:
        return [
            Verdict(PAPERS["mle"], "MLE vs Norm-Sub vs oracle", "not tested", "estimators missing")
        ]
    keys = CELL_COLUMNS["mle"]
    better = []
    for method in ("norm_sub", "mle"):
        pr = paired(records, "mle", method, "oracle")
        ok = pr[(pr["ratio"] < 1) & (pr["z"] < -2)]
        better.append((method, len(ok), len(pr), pr))
    n_yes = sum(b[1] for b in better)
    n_all = sum(b[2] for b in better)
    worst = [
        f"{LABELS[m]}: ratio to oracle {pr['ratio'].min():.3f}..{pr['ratio'].max():.3f}, "
        f"better in {ok}/{tot} cells"
        for m, ok, tot, pr in better
    ]
    fails = pd.concat(
        [pr.assign(estimator=m)[~((pr["ratio"] < 1) & (pr["z"] < -2))] for m, _, _, pr in better]
    )
    extra = ""
    if len(fails):
        extra = " Not better in: " + _cells(fails, [*keys, "estimator"]) + "."
    out.append(
        Verdict(
            PAPERS["mle"],
            "Norm-Sub and MLE both improve on the raw frequency oracle (MSE).",
            _tri(n_yes, n_all),
            "; ".join(worst) + " (better = lower mean MSE, paired z < -2)." + extra,
        )
    )
    mn = paired(records, "mle", "mle", "norm_sub")
    grr = mn[mn["mechanism"] == "GRR"]
    if len(grr):
        kmax = grr["k"].max()
        big = grr[(grr["k"] == kmax) & (grr["n"] == grr["n"].max())]
        claim = (
            f"GRR, n >> K (K = {kmax}, n = {big['n'].iloc[0]:,}): MLE and Norm-Sub give the "
            "same accuracy."
        )
        out.append(_against_norm_sub(big, claim, ["epsilon"], " by epsilon", alike="same"))
        small = grr[(grr["k"] == kmax) & (grr["n"] == grr["n"].min())]
        if small["n"].iloc[0] < grr["n"].max():
            claim = (
                f"GRR, n comparable to K (K = {kmax}, n = {small['n'].iloc[0]:,}): MLE is "
                "more accurate than Norm-Sub."
            )
            out.append(_against_norm_sub(small, claim, ["epsilon"], " by epsilon"))
        other = grr[grr["k"] != kmax]
        if len(other):
            out.append(
                Verdict(
                    PAPERS["mle"],
                    "(context, not a claim of the paper) GRR at the other K.",
                    "not tested",
                    f"MSE(MLE)/MSE(Norm-Sub): {_cells(other, ['k', 'n', 'epsilon'])}.",
                )
            )
    ue = mn[mn["mechanism"] != "GRR"]
    if len(ue):
        big = ue[ue["n"] == ue["n"].max()]
        claim = (
            f"Unary encoding, K = {big['k'].iloc[0]}, n = {big['n'].iloc[0]:,}: MLE is more "
            "accurate than Norm-Sub (the paper's condition on epsilon was not available to this "
            "study)."
        )
        out.append(_against_norm_sub(big, claim, ["mechanism", "epsilon"]))
        small = ue[ue["n"] == ue["n"].min()]
        if small["n"].iloc[0] < ue["n"].max():
            claim = (
                f"Unary encoding, moderate n = {small['n'].iloc[0]:,}: MLE and Norm-Sub are "
                "similar."
            )
            out.append(_against_norm_sub(small, claim, ["mechanism", "epsilon"], alike="similar"))
    return out


def _fading(pr: pd.DataFrame, axis: str, lo_value: Any, hi_value: Any) -> tuple[int, int, int]:
    """Over the series of ``pr`` along ``axis`` ("epsilon" or "n", the other of the two fixed):
    how many series there are, in how many the variant is ahead (ratio < 1) at ``lo_value``, and
    in how many of those it is closer to 1 at ``hi_value``."""
    other = "n" if axis == "epsilon" else "epsilon"
    total = ahead = fades = 0
    for _, grp in pr.groupby(["population", "mechanism", other], sort=False):
        lo = grp.loc[grp[axis] == lo_value, "ratio"].iloc[0]
        hi = grp.loc[grp[axis] == hi_value, "ratio"].iloc[0]
        total += 1
        ahead += int(lo < 1)
        fades += int(lo < 1 and abs(1 - hi) < abs(1 - lo))
    return total, ahead, fades


def _em_mr_claims(
    records: pd.DataFrame, cfg: Mapping[str, Any], variant: str
) -> tuple[Verdict, Verdict]:
    """The two accuracy claims of Ye et al. for one EM-MR variant against EM."""
    label = LABELS[variant]
    pr = paired(records, "em_mr", variant, "em")
    eps_lo, eps_hi = min(cfg["epsilon"]), max(cfg["epsilon"])
    n_lo, n_hi = min(cfg["n"]), max(cfg["n"])
    noisy = pr[(pr["epsilon"] <= min(1.0, eps_hi)) | (pr["n"] == n_lo)]
    halved = noisy[noisy["ratio"] <= HALF]
    lower = noisy[(noisy["ratio"] < 1) & (noisy["z"] < -2)]
    higher = noisy[(noisy["ratio"] > 1) & (noisy["z"] > 2)]
    if len(halved) == len(noisy):
        verdict = "holds"
    elif len(halved) or 2 * len(lower) >= len(noisy):
        verdict = "partly"
    else:
        verdict = "does not hold"
    evidence = (
        "(Verdict: holds if every noisy cell has ratio <= 0.6, partly if one does or half of "
        "them are significantly below 1.)  "
        f"In the {len(noisy)} noisy cells (epsilon <= 1 or n = {n_lo:,}) MSE({label})/MSE(EM) "
        f"ranges {noisy['ratio'].min():.3f}..{noisy['ratio'].max():.3f} (median "
        f"{noisy['ratio'].median():.3f}); <= {HALF} in {len(halved)}, significantly < 1 "
        f"(paired z < -2) in {len(lower)}, significantly > 1 in {len(higher)}."
    )
    if "norm_sub" in set(records["estimator"]):
        ns = paired(records, "em_mr", variant, "norm_sub")
        ns = ns.merge(noisy[CELL_COLUMNS["em_mr"]], on=CELL_COLUMNS["em_mr"])
        evidence += (
            f"  Against Norm-Sub in the same cells: {ns['ratio'].min():.3f}.."
            f"{ns['ratio'].max():.3f} (median {ns['ratio'].median():.3f})."
        )
    first = Verdict(
        PAPERS["em_mr"],
        f"With substantial noise (low epsilon or small n) {label} reduces the error by almost "
        "half.",
        verdict,
        evidence,
    )
    # the advantage fades: |1 - ratio| smaller at the high end of epsilon (n) than the low end
    total_eps, adv_lo_eps, fades_eps = _fading(pr, "epsilon", eps_lo, eps_hi)
    total_n, adv_lo_n, fades_n = _fading(pr, "n", n_lo, n_hi)
    use_eps, use_n = eps_lo < eps_hi, n_lo < n_hi
    tested = total_eps * use_eps + total_n * use_n
    yes = fades_eps * use_eps + fades_n * use_n
    corner = pr[(pr["epsilon"] == eps_hi) & (pr["n"] == n_hi)]
    if tested == 0:
        fade_verdict = "not tested"
    elif yes == tested:
        fade_verdict = "holds"
    else:
        fade_verdict = "partly" if 2 * yes >= tested else "does not hold"
    second = Verdict(
        PAPERS["em_mr"],
        f"As epsilon or n grows, the advantage of {label} diminishes.",
        fade_verdict,
        f"{label} is ahead of EM (ratio < 1) at epsilon = {eps_lo:g} in {adv_lo_eps}/{total_eps} "
        f"(population, mechanism, n) series, and closer to EM at epsilon = {eps_hi:g} in "
        f"{fades_eps}; ahead at n = {n_lo:,} in {adv_lo_n}/{total_n} (population, mechanism, "
        f"epsilon) series, closer to EM at n = {n_hi:,} in {fades_n}.  At epsilon = {eps_hi:g}, "
        f"n = {n_hi:,} the ratio is "
        + ", ".join(
            f"{row['population']} {row['mechanism']} {row['ratio']:.3f}"
            for _, row in corner.iterrows()
        )
        + ".  (Verdict: holds if every series shows an advantage that shrinks, partly if at "
        "least half do.)",
    )
    return first, second


def verdicts_em_mr(records: pd.DataFrame, cfg: Mapping[str, Any]) -> list[Verdict]:
    """Ye et al.'s claims (slides: evaluation and efficiency), for each EM-MR variant run."""
    est = set(records["estimator"])
    variants = [v for v in ("em_mr",) if v in est]
    if "em" not in est or not variants:
        return [
            Verdict(PAPERS["em_mr"], "EM-MR vs EM", "not tested", "estimators em and em_mr needed")
        ]
    claims = [_em_mr_claims(records, cfg, v) for v in variants]
    out = [c[0] for c in claims] + [c[1] for c in claims]
    summary = summarise(records, "em_mr")
    cells = CELL_COLUMNS["em_mr"]
    it = summary.pivot_table(index=cells, columns="estimator", values="iterations_mean")
    secs = summary.pivot_table(index=cells, columns="estimator", values="seconds_mean")
    # the slides' EM is plain EM: compare with the IBU (plain EM, the authors' stopping rule)
    # when it ran; bayesldp's "em" is SQUAREM-accelerated to the MLE
    base = "ibu" if "ibu" in est else "em"
    note = (
        "Both run plain EM steps as the authors' code does (IBU: one run with their stopping "
        "rule; EM-MR: three stages with theirs)."
        if base == "ibu"
        else "bayesldp's EM is SQUAREM-accelerated, so this does not test the slides' plain EM."
    )
    for v in variants:
        fewer = int((it[v] < it[base]).sum())
        time_ratio = secs[v] / secs[base]
        maps_ratio = it[v] / it[base]
        if fewer == len(it):
            verdict = "holds"
        else:
            verdict = "partly" if 2 * fewer >= len(it) else "does not hold"
        out.append(
            Verdict(
                PAPERS["em_mr"],
                f"{LABELS[v]} converges faster than EM.",
                verdict,
                f"{LABELS[v]} needed fewer EM maps than {LABELS[base]} in {fewer}/{len(it)} "
                f"cells (maps ratio {maps_ratio.min():.2f}..{maps_ratio.max():.2f}, median "
                f"{maps_ratio.median():.2f}); wall-time ratio {time_ratio.min():.2f}.."
                f"{time_ratio.max():.2f} (median {time_ratio.median():.2f}; times are noisy on "
                f"this shared machine, maps are not).  {note}",
            )
        )
    return out


def verdicts_sampling(
    records: pd.DataFrame, checks: pd.DataFrame, cfg: Mapping[str, Any]
) -> list[Verdict]:
    """The claims of Biswas et al. 2022 (sections 2-4)."""
    out: list[Verdict] = []
    sub = checks[checks["pi"] < 1]
    ncells = checks.groupby(["population", "epsilon", "pi"]).ngroups
    alpha = 0.001
    if "c" in set(checks["estimator"]):
        c = checks[checks["estimator"] == "c"]
        c_sub = c[c["pi"] < 1]
        ok = c[c["p_mean_as_paper"] > alpha]
        biased = c_sub[c_sub["p_unbiased"] < alpha]
        out.append(
            Verdict(
                PAPERS["sampling"],
                "Theorem 2.1 / eq. 4: with pi < 1 the naive c is biased, E c(x) = n f_x pi - "
                "n q (1 - pi)/(p - q).",
                _tri(len(ok) + len(biased), len(c) + len(c_sub)),
                f"chi-square of c against eq. 4 (exact mean given the population): p > {alpha} "
                f"in {len(ok)}/{len(c)} cells (min p {c['p_mean_as_paper'].min():.3g}); c against "
                f"n_x (unbiased): p < {alpha} in {len(biased)}/{len(c_sub)} cells with pi < 1.",
            )
        )
    for method, claim in (
        ("g", "Theorem 3.1: g is unbiased."),
        ("c_hat", "Theorem 3.4: c_hat is unbiased."),
    ):
        if method not in set(checks["estimator"]):
            continue
        m = checks[checks["estimator"] == method]
        ok = m[m["p_unbiased"] > alpha]
        out.append(
            Verdict(
                PAPERS["sampling"],
                claim,
                _tri(len(ok), len(m)),
                f"chi-square of the mean error over repeats (K = {cfg['k']} categories, exact "
                f"variance): p > {alpha} in {len(ok)}/{len(m)} cells (min p "
                f"{m['p_unbiased'].min():.3g}); observed/exact variance "
                f"{m['var_ratio'].min():.3f}..{m['var_ratio'].max():.3f}.",
            )
        )
    if "g" in set(checks["estimator"]):
        g = checks[checks["estimator"] == "g"]
        z = (g["var_star_ratio"] - 1) / g["var_star_se"]
        ok = g[z.abs() < 4]
        out.append(
            Verdict(
                PAPERS["sampling"],
                "Theorem 3.2: Var*(g) = n (q - q^2 pi) / ((p - q)^2 pi).",
                _tri(len(ok), len(g)),
                f"Empirical variance of g on the categories nobody holds / Var*: "
                f"{g['var_star_ratio'].min():.3f}..{g['var_star_ratio'].max():.3f} over {len(g)} "
                f"cells (median {g['var_star_ratio'].median():.3f}; within 4 standard errors in "
                f"{len(ok)}).",
            )
        )
    if {"g", "c_hat"} <= set(checks["estimator"]) and len(sub):
        piv = sub.pivot_table(
            index=["population", "epsilon", "pi"],
            columns="estimator",
            values=["exact_var_sum", "empirical_var_sum"],
        )
        exact = piv["exact_var_sum"]["c_hat"] / piv["exact_var_sum"]["g"]
        emp = piv["empirical_var_sum"]["c_hat"] / piv["empirical_var_sum"]["g"]
        ok = int((emp >= 1).sum())
        out.append(
            Verdict(
                PAPERS["sampling"],
                "Theorem 3.5: Var(c_hat) >= Var(g) (g is the more precise).",
                _tri(ok, len(emp)),
                f"Summed variance c_hat / g with pi < 1: exact {exact.min():.3f}.."
                f"{exact.max():.3f}, observed {emp.min():.3f}..{emp.max():.3f}; c_hat has the "
                f"smaller variance in "
                f"{int((emp < 1).sum())}/{len(emp)} cells.  The proof drops -2 q Cov(H, S); "
                "c_hat is the more precise (bayesldp.mechanisms.sampling docstring).",
            )
        )
    if "g" in set(records["estimator"]):
        tv = (
            records[records["estimator"] == "g"]
            .groupby(["population", "epsilon", "pi"], sort=True)["tv"]
            .agg(["mean", "std", "count"])
            .reset_index()
        )
        pis = sorted(tv["pi"].unique())
        if len(pis) > 1:
            mono, total, ratios = 0, 0, []
            for (pop, eps), grp in tv.groupby(["population", "epsilon"], sort=False):
                grp = grp.sort_values("pi")
                se = grp["std"] / np.sqrt(grp["count"])
                rises = grp["mean"].diff().iloc[1:] > 2 * np.hypot(se.iloc[1:], se.shift().iloc[1:])
                mono += int(not rises.any() and grp["mean"].iloc[-1] < grp["mean"].iloc[0])
                total += 1
                ratios.append(
                    (pop, eps, grp["mean"].iloc[0] / grp["mean"].iloc[-1], grp["mean"].iloc[0])
                )
            out.append(
                Verdict(
                    PAPERS["sampling"],
                    "As pi increases, g approximates the distribution better (TV decreases).",
                    _tri(mono, total),
                    f"Mean TV of g decreases from pi = {pis[0]:g} to {pis[-1]:g} without a "
                    f"significant rise between neighbouring pi in {mono}/{total} (population, "
                    "epsilon) series.",
                )
            )
            lo, hi = pis[0], pis[-1]
            r = [x[2] for x in ratios]
            drastic = sum(x > 2 for x in r)
            verdict = (
                "holds" if max(r) < 1.5 else ("does not hold" if drastic == len(r) else "partly")
            )
            out.append(
                Verdict(
                    PAPERS["sampling"],
                    f"TV at pi = {lo:g} is not drastically worse than at pi = {hi:g} (section 6, "
                    "Figure 3).",
                    verdict,
                    f"TV(g, pi = {lo:g}) / TV(g, pi = {hi:g}) = {min(r):.2f}..{max(r):.2f} over "
                    f"the (population, epsilon) series (TV at pi = {lo:g}: "
                    + ", ".join(f"{p} eps {e:g}: {t:.3f}" for p, e, _, t in ratios)
                    + "); 'not drastic' read as a ratio < 1.5, 'drastic' as > 2.  The variance "
                    "scales as 1/pi, so TV roughly as 1/sqrt(pi).",
                )
            )
    if {"c", "g"} <= set(records["estimator"]):
        pr = paired(records, "sampling", "c", "g")
        pr = pr[pr["pi"] < 1]
        if len(pr):
            out.append(
                Verdict(
                    PAPERS["sampling"],
                    "Without the correction (naive c) the estimate is far worse than g when "
                    "pi < 1.",
                    _tri(int((pr["ratio"] > 1).sum()), len(pr)),
                    f"MSE(c)/MSE(g) = {pr['ratio'].min():.3g}..{pr['ratio'].max():.3g} over "
                    f"{len(pr)} cells with pi < 1 (of {ncells}).",
                )
            )
    return out


def all_verdicts(result: StudyResult) -> list[Verdict]:
    """Every claim tested by the sections that ran."""
    out: list[Verdict] = []
    if "mle" in result.records:
        out += verdicts_mle(result.records["mle"], result.settings["mle"])
    if "em_mr" in result.records:
        out += verdicts_em_mr(result.records["em_mr"], result.settings["em_mr"])
    if "sampling" in result.records and result.checks is not None:
        out += verdicts_sampling(
            result.records["sampling"], result.checks, result.settings["sampling"]
        )
    return out
