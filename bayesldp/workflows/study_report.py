"""Writing a study's outputs: report.md, CSV tables, posteriors as netCDF and PNG figures."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.workflows.study import StudyResult


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            )


def summarise(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard deviation across repeats of each metric per (mechanism, eps, method)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in metrics:
        groups[(row["mechanism"], row["epsilon"], row["method"])].append(row)
    table = []
    for (mech, eps, method), rows in groups.items():
        entry = {"mechanism": mech, "epsilon": eps, "method": method, "repeats": len(rows)}
        for key in ("tv", "mse", "seconds"):
            values = np.array([r[key] for r in rows])
            entry[key] = float(values.mean())
            entry[f"{key}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        table.append(entry)
    return table


def markdown_table(summary: list[dict[str, Any]]) -> str:
    """The summary as a markdown table (TV and MSE as mean ± sd over repeats)."""
    lines = [
        "| mechanism | epsilon | method | TV | MSE | seconds | repeats |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for e in summary:
        lines.append(
            f"| {e['mechanism']} | {e['epsilon']:g} | {e['method']} | "
            f"{e['tv']:.4f} ± {e['tv_sd']:.4f} | {e['mse']:.2e} ± {e['mse_sd']:.1e} | "
            f"{e['seconds']:.3f} | {e['repeats']} |"
        )
    return "\n".join(lines)


def convergence_table(rows: list[dict[str, Any]]) -> str:
    """One line per posterior fit: the largest r_hat, the smallest bulk ESS, divergences."""
    lines = [
        "| mechanism | epsilon | repeat | method | largest r_hat | smallest bulk ESS | "
        "divergences | seconds |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mechanism']} | {r['epsilon']:g} | {r['repeat']} | {r['method']} | "
            f"{r['r_hat_max']:.3f} | {r['ess_bulk_min']:.0f} | {r['divergences']} | "
            f"{r['seconds']:.2f} |"
        )
    return "\n".join(lines)


def _labels_lines(result: StudyResult) -> list[str]:
    """Where the categories' names are, and the first few of them (nothing if unnamed)."""
    if not getattr(result, "named", False):
        return []
    shown = "; ".join(f"{x} = {label}" for x, label in enumerate(result.labels[:8]))
    more = f"; ... ({len(result.labels)} in all)" if len(result.labels) > 8 else ""
    return [
        f"Category labels (column `label` of estimates.csv, the figures' category axes and the "
        f"posteriors' `category` coordinate): {shown}{more}.",
        "",
    ]


def key_value_lines(result: StudyResult) -> list[str]:
    """A key-value study's section: the keys' frequencies and means against the truth."""
    from bayesldp.workflows.key_value_study import key_value_table, mean_error_table

    return ["## Key frequencies and mean values", "",
            "The TV and MSE above are over the key frequencies (the fraction of users holding "
            "each key); the mean absolute error of the keys' mean values (mean ± sd over "
            "repeats):", "", mean_error_table(result.metrics), "",
            "Each key in the first repeat (estimates.csv: columns truth, estimate for the "
            "frequency; mean_truth, mean_estimate for the mean value):", "",
            key_value_table(result), ""]  # fmt: skip


def summary_text(result: StudyResult) -> str:
    """What ``bayesldp run`` prints of a study: the error table (and a key-value study's
    errors of the means and its keys)."""
    text = markdown_table(summarise(result.metrics))
    if result.spec["population"]["kind"] == "key_value":
        from bayesldp.workflows.key_value_study import key_value_table, mean_error_table

        text += f"\n\n{mean_error_table(result.metrics)}\n\n{key_value_table(result)}"
    return text


def write_report(result: StudyResult, out_dir: str | Path, *, figures: bool = True) -> Path:
    """Write ``report.md``, ``metrics.csv``, ``estimates.csv``, posteriors and figures."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "metrics.csv", result.metrics)
    _write_csv(out / "estimates.csv", result.estimates)
    summary = summarise(result.metrics)
    study = result.spec["study"]
    lines = [
        f"# Study: {study['name']}",
        "",
        study.get("description") or "",
        "",
        f"Users per repeat: {study['n']:,}; repeats: {len(result.truths)}; "
        f"categories: {result.spec['population']['k']}; population: "
        f"{result.spec['population']['kind']}; seed: {study['seed']}.",
        "",
        *_labels_lines(result),
        "## Error per method (mean ± sd over repeats)",
        "",
        "TV = 1/2 ||estimate - truth||_1 against the empirical frequencies of the simulated users;",
        "MSE is the mean over categories of the squared error; seconds is the time of the method",
        "alone (the tally is built once per mechanism and shared), after one untimed warm-up call",
        f"of every method ({result.warmup_seconds:.1f} s in all: numba compilation or cache loads",
        "and first imports, which would otherwise land in the first repeat).",
        "",
        markdown_table(summary),
        "",
    ]
    if result.spec["population"]["kind"] == "key_value":
        lines += key_value_lines(result)
    if result.convergence:
        lines += ["## Posterior convergence (every fit)", "",
                  "As PyMC checks: r_hat above 1.01, bulk ESS below 100 per chain or a "
                  "divergence needs attention.", "",
                  convergence_table(result.convergence), ""]  # fmt: skip
    posterior_files = []
    for label, idata in result.fits.items():
        from bayesldp.bayes import save_fit

        name = "posterior_" + "".join(c if c.isalnum() else "_" for c in label).strip("_") + ".nc"
        save_fit(idata, out / name)
        posterior_files.append(name)
    if posterior_files:
        lines += ["## Posteriors (first repeat)", ""] + [f"- `{f}`" for f in posterior_files] + [""]
    if figures:
        from bayesldp import plotting

        names = plotting.study_figures(result, summary, out)
        lines += ["## Figures", ""] + [f"![{n}]({n})" for n in names] + [""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"
