"""The accuracy study's markdown report: :func:`render_markdown`.

The settings of each section, its tables (:func:`wide_table`, :func:`checks_table`), the
Cramer-Rao notes (:func:`cr_notes`), the verdicts of :mod:`~bayesldp.workflows.accuracy.verdicts`,
the deviations from the papers, and the machine the study ran on (:func:`machine_info`).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesldp.workflows.accuracy.experiments import (
    CELL_COLUMNS,
    LABELS,
    PAPERS,
    StudyResult,
    _em_mr_population,
)
from bayesldp.workflows.accuracy.verdicts import _fmt, all_verdicts, summarise


# ============================================================================ markdown
def _key(value: object) -> str:
    """A cell key in a table: integers with thousands separators, floats short."""
    if isinstance(value, int | np.integer):
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _pm(mean: float, spread: float) -> str:
    return f"{_fmt(mean)} ± {_fmt(spread)}"


def wide_table(summary: pd.DataFrame, section: str, metric: str, spread: str = "sd") -> str:
    """Markdown: one row per cell, one column per estimator, ``mean ± sd`` (or ``± se``)."""
    keys = CELL_COLUMNS[section]
    estimators = list(dict.fromkeys(summary["estimator"]))
    head = [*keys, *(LABELS.get(e, e) for e in estimators)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell, grp in summary.groupby(keys, sort=False):
        by = grp.set_index("estimator")
        values = [
            _pm(by.loc[e, f"{metric}_mean"], by.loc[e, f"{metric}_{spread}"])
            if e in by.index
            else ""
            for e in estimators
        ]
        shown = [_key(v) for v in cell]
        lines.append("| " + " | ".join([*shown, *values]) + " |")
    return "\n".join(lines)


def checks_table(checks: pd.DataFrame) -> str:
    """Markdown of the node-sampling formula checks."""
    head = [
        "population",
        "eps",
        "pi",
        "estimator",
        "p (mean as paper)",
        "p (unbiased)",
        "obs/exact var",
        "obs/Var* (± se)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in checks.iterrows():
        lines.append(
            "| "
            + " | ".join(
                [
                    row["population"],
                    f"{row['epsilon']:g}",
                    f"{row['pi']:g}",
                    LABELS[row["estimator"]],
                    f"{row['p_mean_as_paper']:.3g}",
                    f"{row['p_unbiased']:.3g}",
                    f"{row['var_ratio']:.3f}",
                    f"{row['var_star_ratio']:.3f} ± {row['var_star_se']:.3f}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


UNBIASED = ("oracle", "g", "c_hat", "oracle_sampled")


def cr_notes(summary: pd.DataFrame, section: str) -> str:
    """A sentence on where error/CR falls below 1 (significantly: mean + 2 se < 1)."""
    below = summary[summary["cr_ratio_mean"] + 2 * summary["cr_ratio_se"] < 1]
    parts = []
    for est, grp in below.groupby("estimator", sort=False):
        low = grp.loc[grp["cr_ratio_mean"].idxmin()]
        where = ", ".join(
            f"{c}={low[c]:g}" if isinstance(low[c], float) else f"{c}={low[c]}"
            for c in CELL_COLUMNS[section]
        )
        kind = "UNBIASED -- unexpected" if est in UNBIASED else "not unbiased"
        parts.append(
            f"{LABELS.get(est, est)} ({kind}) in {len(grp)} cells, lowest "
            f"{low['cr_ratio_mean']:.3g} at {where}"
        )
    unbiased = summary[summary["estimator"].isin(UNBIASED)]
    text = "error/CR significantly below 1 (mean + 2 se < 1): " + (
        "; ".join(parts) + "." if parts else "nowhere."
    )
    if len(unbiased):
        names = ", ".join(LABELS[e] for e in unbiased["estimator"].unique())
        lo, hi = unbiased["cr_ratio_mean"].min(), unbiased["cr_ratio_mean"].max()
        text += (
            f"  Unbiased estimators ({names}): error/CR {lo:.3g}..{hi:.3g}"
            " (>= 1 up to noise; exactly 1 in expectation for the GRR oracle, which attains the"
            " bound)."
        )
    return text


def machine_info() -> dict[str, str]:
    """uname -m, lscpu model name, cores, load, Python, numpy, git commit."""
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return {
        "arch": platform.machine(),
        "cpu": model,
        "cores": str(os.cpu_count()),
        "load": load,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "commit": commit or "unknown",
    }


def _settings_line(name: str, cfg: Mapping[str, Any]) -> str:
    if name == "mle":
        return (
            f"{cfg['repeats']} repeats (theta ~ Dirichlet({cfg['prior_alpha']:g}) each), epsilon "
            f"{cfg['epsilon']}; GRR K {cfg['grr_k']} x n {cfg['grr_n']}; "
            f"{'/'.join(cfg['ue_mechanisms'])} K {cfg['ue_k']} x n {cfg['ue_n']}"
        )
    if name == "em_mr":
        pops = ", ".join(_em_mr_population(p, cfg) for p in cfg["populations"])
        return (
            f"{cfg['repeats']} repeats, {'/'.join(cfg['mechanisms'])}, K = {cfg['k']}, "
            f"populations {pops} (Dirichlet redrawn per repeat), n {cfg['n']}, epsilon "
            f"{cfg['epsilon']}; EM-MR and IBU with the authors' settings; OLH Fisher information "
            f"over {cfg['cr_hashes']} hashes"
        )
    return (
        f"{cfg['repeats']} repeats, n = {cfg['n']:,}, K = {cfg['k']}, GRR, epsilon "
        f"{cfg['epsilon']}, pi {cfg['pi']}, populations "
        + "; ".join(p["name"] for p in cfg["populations"])
    )


DEVIATIONS = {
    "mle": "Lopuhaä-Zwakenberg et al. 2020: the paper's epsilon grid was not available to this "
    "study (0.5..4 here); it scores "
    "both theta and the users' empirical frequencies, this study scores theta only; its 'UE' is "
    "not said to be SUE or OUE (both run); the default run uses fewer Jeffreys draws than the "
    "paper's 100 (`--full`: 100).",
    "em_mr": "Ye et al.: their slides give neither the domain sizes nor the populations of S-MN "
    "(K = 64, Zipf(1.1) and Dirichlet(0.1) here); EM-MR and IBU follow the authors' GRR code "
    "(LDP-EM-MR: plain EM from uniform stopped by a log-likelihood gain rule, two merge rounds of "
    "up to K/4 components below 1-2 sd of a zero frequency, equal split of pooled weight; for "
    "OLH the same schedule, not the authors' separate OLH settings); the 10 largest estimates "
    "are never merged (the authors protect category indices 0-9); EM runs to convergence "
    "(max |change| < 1e-10).",
    "sampling": "Biswas et al. 2022: epsilon is not stated (1, 2, 4 here); "
    "'Bin(50,0.6)+Bin(50,0.4)' is read both as an equal mixture and as the sum; the paper plots "
    "one data set of 50,000 points, this study redraws the 50,000 nodes from theta in every "
    "repeat and scores against theta.",
}

SECTION_TITLES = {
    "mle": f"{PAPERS['mle']}: MLE vs Norm-Sub vs the raw oracle",
    "em_mr": f"{PAPERS['em_mr']}: EM-MR vs EM vs Norm-Sub",
    "sampling": f"{PAPERS['sampling']}: node sampling",
}

#: the full references of the papers whose claims the study checks
REFERENCES = {
    "mle": 'Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local '
    'Differential Privacy", WPES 2020',
    "em_mr": 'Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally '
    'Differentially Private Protocols"',
    "sampling": 'Biswas, Cormode and Maple, "Impact of Sampling on Locally Differentially '
    'Private Data Collection", arXiv 2022',
}


def render_markdown(
    result: StudyResult, info: Mapping[str, str], command: str, runtime: float
) -> str:
    """The report: machine, command, runtime, verdicts, then the tables of every section."""
    verdicts = all_verdicts(result)
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Accuracy study: where the papers' claims hold",
        "",
        "Papers:",
        "",
        *[f"- {PAPERS[name]}: {REFERENCES[name]}." for name in result.records],
        "",
        f"- Machine: {info['arch']}, {info['cpu']}, {info['cores']} cores (shared with other "
        f"jobs; load average at start {info['load']}); Python {info['python']}, numpy "
        f"{info['numpy']}; bayesldp commit {info['commit']}",
        f"- Date: {when}",
        f"- Command: `{command}`",
        f"- Runtime: {runtime:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in result.seconds.items())
        + f"); sizes: {'--full' if result.full else 'default'}",
        "",
        "Settings:",
        "",
        *[f"- `[{name}]`: {_settings_line(name, cfg)}" for name, cfg in result.settings.items()],
        "",
        "Truth is the population theta (users are drawn afresh from theta in every repeat). "
        "MSE = mean over categories of the squared error; TV = 1/2 L1; both mean ± sd over "
        "repeats.  error/CR = sum of squared errors / trace of the Cramér-Rao bound at theta for "
        "n reports, mean ± standard error over repeats; estimators that are not unbiased "
        "(Norm-Sub, MLE, EM, EM-MR, and the naive c) can go below 1 -- that is information, "
        "not an error; each section says where it happens.  Raw oracle estimates are scored "
        "as they are (off the simplex).  Paired comparisons use the same tally for every "
        "estimator of a repeat.",
        "",
        "Where this study departs from the papers (what they leave unstated, or what it reads "
        "differently):",
        "",
        *[f"- {DEVIATIONS[name]}" for name in result.records],
        "",
        "## Verdicts",
        "",
    ]
    for v in verdicts:
        lines.append(f"- **{v.paper} -- {v.verdict}.** {v.claim} {v.evidence}")
    for name in result.records:
        summary = summarise(result.records[name], name)
        lines += ["", f"## {SECTION_TITLES[name]}", ""]
        lines += ["MSE (mean ± sd over repeats)", "", wide_table(summary, name, "mse"), ""]
        lines += ["TV (mean ± sd)", "", wide_table(summary, name, "tv"), ""]
        lines += [
            "error / Cramér-Rao bound (mean ± se)",
            "",
            wide_table(summary, name, "cr_ratio", "se"),
            "",
            cr_notes(summary, name),
            "",
        ]
        if name == "em_mr":
            it = summary.pivot_table(
                index=CELL_COLUMNS[name], columns="estimator", values="iterations_mean", sort=False
            )
            secs = summary.pivot_table(
                index=CELL_COLUMNS[name], columns="estimator", values="seconds_mean", sort=False
            )
            lines += [
                "Mean EM maps and mean seconds per estimate",
                "",
                "| "
                + " | ".join(
                    [
                        *CELL_COLUMNS[name],
                        *(f"{LABELS[c]} maps" for c in it.columns if it[c].notna().any()),
                        *(f"{LABELS[c]} s" for c in secs.columns),
                    ]
                )
                + " |",
            ]
            cols_it = [c for c in it.columns if it[c].notna().any()]
            lines.append(
                "|" + "---|" * (len(CELL_COLUMNS[name]) + len(cols_it) + len(secs.columns))
            )
            for idx in it.index:
                cell = [_key(v) for v in idx]
                lines.append(
                    "| "
                    + " | ".join(
                        cell
                        + [f"{it.loc[idx, c]:.0f}" for c in cols_it]
                        + [f"{secs.loc[idx, c]:.3g}" for c in secs.columns]
                    )
                    + " |"
                )
            lines.append("")
        if name == "sampling" and result.checks is not None:
            lines += [
                "Formula checks (per cell, over repeats; exact conditional moments given the "
                "drawn population from `NodeSampling.expected_counts` / `count_variance`): "
                "p (mean as paper) is a chi-square test (K degrees of freedom) of the mean error "
                "against the paper's expectation (eq. 4 for c, n_x for g and c_hat); p (unbiased) "
                "against n_x; obs/exact var is the observed over the exact variance; obs/Var* is "
                "the observed mean square on categories nobody holds over the paper's Var*.",
                "",
                checks_table(result.checks),
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"
